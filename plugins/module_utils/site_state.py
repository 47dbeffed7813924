# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Site snapshots: everything the gates, modules, agent and runbooks need about one broker, in a constant
number of HTTP requests whatever the number of queues.

One bulk POST per snapshot carries:

1. broker attributes that exist in every supported release (one list read),
2. ``Status`` and 3. ``PendingMirrorAcks`` as separate items (a missing attribute fails only its own item:
   ``PendingMirrorAcks`` is 2.40+),
4. ONE wildcard read of all queue MBeans with the needed attributes,
5. a wildcard read of the broker-connection MBeans (2.39+; fails harmlessly before),
6. ``listBrokerConnections()`` (every release; ``uri``/``connected`` only 2.39+),
7. a wildcard read of the acceptors, and optionally 8. of the addresses,
9. the continuity broker plugin's MBean (headline attributes; its per-address tables on request). A broker
   without the plugin answers 404 for that item only: ``continuity_plugin`` is then ``None`` with a note.

Before 2.32 the mirror SNF queue has no MBean; then a second request asks ``listQueues`` for the SNF queues
(still constant). Broker name discovery (when not given) costs one ``search`` once per collector.

``parse_snapshot`` is pure (results in, plain dict out) so it is tested without HTTP; ``SiteCollector`` does
the I/O. Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.continuity.artemis.plugins.module_utils import continuity_plugin as plugin
from ansible_collections.continuity.artemis.plugins.module_utils import jolokia as j
from ansible_collections.continuity.artemis.plugins.module_utils import lag
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on
from ansible_collections.continuity.artemis.plugins.module_utils import versions

#: Broker attributes present in every release since 2.30 (older than the supported 2.37): safe in one list read.
BROKER_ATTRS = ("Name", "Version", "NodeID", "Active", "Started", "Backup", "HAPolicy", "ReplicaSync", "Uptime",
                "UptimeMillis", "ConnectionCount", "TotalMessageCount", "TotalConsumerCount", "AddressNames",
                "QueueNames")
QUEUE_ATTRS = ("MessageCount", "DeliveringCount", "ConsumerCount", "MessagesAdded", "MessagesAcknowledged",
               "Paused", "PersistedPause", "FirstMessageAge", "FirstMessageTimestamp", "InternalQueue",
               "Temporary", "Durable")
CONNECTION_ATTRS = ("Name", "Started", "Connected", "Uri", "Protocol", "User", "RetryInterval", "ReconnectAttempts")
ACCEPTOR_ATTRS = ("Started", "Parameters")
ADDRESS_ATTRS = ("Paused", "RoutingTypes", "MessageCount", "QueueNames")

#: ``listQueues`` options selecting every queue (the form the Artemis console sends), and the page size used.
LIST_ALL_OPTIONS = json.dumps({"field": "", "operation": "", "value": "", "sortField": "name", "sortOrder": "asc"})
LIST_PAGE_SIZE = 1000000
QUEUE_SOURCES = ("list", "mbeans")


def list_queues_request(broker_name: str, options: str = LIST_ALL_OPTIONS) -> dict:
    return j.exec_request(on.broker(broker_name), "listQueues(java.lang.String,int,int)", options, 1, LIST_PAGE_SIZE)


def snapshot_requests(broker_name: str, include_addresses: bool = False, include_acceptors: bool = True,
                      include_connection_mbeans: bool = False, queue_source: str = "list",
                      acceptor_names: Optional[Sequence[str]] = None,
                      include_plugin_tables: bool = False) -> List[Tuple[str, dict]]:
    """``(key, request)`` pairs of one snapshot; :func:`parse_snapshot` takes ``{key: Result}``.

    Queues come from ONE ``listQueues`` call by default (``queue_source="list"``: every counter the gates need,
    ``internalQueue``, and the mirror SNF queue when the broker lists it; all values are strings). It costs one
    operation whatever the number of queues; a wildcard read of the queue MBeans (``"mbeans"``) also gives
    ``FirstMessageAge`` but costs a scan of all MBeans on some servers (1.6 s for 1,000 queues on the lab).

    ``listBrokerConnections()`` already carries ``uri``/``connected`` on 2.39+, so the broker-connection MBeans
    (``User``, ``RetryInterval``, ``ReconnectAttempts``) are only read on request: every wildcard read has a cost
    that grows with the number of MBeans on some servers (the lab scans them all).
    """
    b = on.broker(broker_name)
    reqs = [
        ("broker", j.read_request(b, list(BROKER_ATTRS))),
        ("status", j.read_request(b, "Status")),
        ("pending", j.read_request(b, "PendingMirrorAcks")),
        ("queues", j.read_request(on.all_queues(broker_name), list(QUEUE_ATTRS)) if queue_source == "mbeans"
         else list_queues_request(broker_name)),
        ("bconn_list", j.exec_request(b, "listBrokerConnections()")),
        ("continuity", plugin.read_request(broker_name, include_plugin_tables)),
    ]
    if include_connection_mbeans:
        reqs.append(("bconn_mbeans", j.read_request(on.all_broker_connections(broker_name), list(CONNECTION_ATTRS))))
    if include_acceptors and acceptor_names:
        # known names: exact reads are cheap whatever the number of other MBeans
        reqs.extend(("acceptor:" + name, j.read_request(on.acceptor(broker_name, name), list(ACCEPTOR_ATTRS)))
                    for name in acceptor_names)
    elif include_acceptors:
        reqs.append(("acceptors", j.read_request(on.all_acceptors(broker_name), list(ACCEPTOR_ATTRS))))
    if include_addresses:
        reqs.append(("addresses", j.read_request(on.all_addresses(broker_name), list(ADDRESS_ATTRS))))
    return reqs


def _pattern_value(res: Optional[j.Result], notes: List[str], what: str) -> Dict[str, Any]:
    """Value of a wildcard read; an empty match is ``{}`` (Jolokia answers 404, or 400 "No matching ...")."""
    if res is None:
        return {}
    if res.ok:
        return res.value or {}
    text = res.error or ""
    if res.status == 404 or (res.status == 400 and ("No matching" in text or "No MBean" in text)):
        return {}
    err = j.error_from_item(res.request, res.status, res.error_type, res.error)
    notes.append("%s unavailable: %s" % (what, err))
    return {}


def _opt_bool(value: Any) -> Optional[bool]:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def _queue_entry(name: str, props: Dict[str, str], attrs: Dict[str, Any], mbean: str) -> dict:
    return {
        "name": name,
        "address": props.get("address"),
        "routing_type": (props.get("routing-type") or "").lower() or None,
        "mbean": mbean,
        "message_count": lag._opt_int(attrs.get("MessageCount")),
        "delivering_count": lag._opt_int(attrs.get("DeliveringCount")),
        "consumer_count": lag._opt_int(attrs.get("ConsumerCount")),
        "messages_added": lag._opt_int(attrs.get("MessagesAdded")),
        "messages_acknowledged": lag._opt_int(attrs.get("MessagesAcknowledged")),
        "paused": _opt_bool(attrs.get("Paused")),
        "persisted_pause": _opt_bool(attrs.get("PersistedPause")),
        "first_message_age_ms": lag._opt_float(attrs.get("FirstMessageAge")),
        "first_message_timestamp_ms": lag._opt_float(attrs.get("FirstMessageTimestamp")),
        "internal": _opt_bool(attrs.get("InternalQueue")),
        "temporary": _opt_bool(attrs.get("Temporary")),
        "durable": _opt_bool(attrs.get("Durable")),
    }


def _parse_json_string(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def parse_snapshot(broker_name: str, results: Dict[str, j.Result], ts: float, url: Optional[str] = None) -> dict:
    """Turn the results of :func:`snapshot_requests` (``{key: Result}``) into a plain snapshot dict.

    Raises the typed error when the broker read itself failed (nothing useful without it). Anything else that
    failed is ``None``/empty with an entry in ``notes``; a missing feature is never reported as zero.
    """
    items = results
    notes: List[str] = []
    broker_res = items["broker"]
    broker_res.raise_for_status()
    battrs = dict(broker_res.value or {})
    version_text = battrs.get("Version")
    try:
        ver = versions.parse_version(version_text)
        feats = versions.features(ver)
    except versions.VersionError:
        ver, feats = None, {}
        notes.append("unrecognised Artemis version %r: features unknown" % (version_text,))

    status = None
    if items["status"].ok:
        status = _parse_json_string(items["status"].value)
    else:
        notes.append("broker Status not readable: %s" % (items["status"].error or items["status"].status))

    pending = None
    if items["pending"].ok:
        pending = lag._opt_int(items["pending"].value)
    elif feats.get("pending_mirror_acks"):
        notes.append("PendingMirrorAcks not readable: %s" % (items["pending"].error,))
    else:
        notes.append("PendingMirrorAcks needs Artemis %s+ (broker is %s): reported as null"
                     % (versions.since("pending_mirror_acks"), version_text))

    queues: Dict[str, dict] = {}
    qres = items["queues"]
    if qres.request.get("type") == "exec":
        if qres.ok:
            queues, total = queues_from_list(qres.value)
            if total is not None and total > len(queues):
                notes.append("listQueues returned %d of %d queues" % (len(queues), total))
        else:
            err = j.error_from_item(qres.request, qres.status, qres.error_type, qres.error)
            notes.append("listQueues failed: %s" % err)
    else:
        for mbean, attrs in _pattern_value(qres, notes, "queue MBeans").items():
            try:
                _domain, props = on.parse(mbean)
            except on.ObjectNameError:
                continue
            name = props.get("queue")
            if name is None:
                continue
            queues[name] = _queue_entry(name, props, attrs or {}, mbean)

    connections: Dict[str, dict] = {}
    list_res = items["bconn_list"]
    if list_res.ok:
        rows = _parse_json_string(list_res.value) or []
        for row in rows if isinstance(rows, list) else []:
            name = row.get("name")
            if not name:
                continue
            connections[name] = {
                "name": name,
                "protocol": row.get("protocol"),
                "started": _opt_bool(row.get("started")),
                "connected": _opt_bool(row.get("connected")) if "connected" in row else None,
                "uri": row.get("uri"),
                "source": "listBrokerConnections",
            }
    else:
        notes.append("listBrokerConnections failed: %s" % (list_res.error or list_res.status))
    for mbean, attrs in _pattern_value(items.get("bconn_mbeans"), [], "broker-connection MBeans").items():
        try:
            _domain, props = on.parse(mbean)
        except on.ObjectNameError:
            continue
        name = props.get("name")
        entry = connections.setdefault(name, {"name": name})
        entry.update({
            "started": _opt_bool(attrs.get("Started")),
            "connected": _opt_bool(attrs.get("Connected")),
            "uri": attrs.get("Uri", entry.get("uri")),
            "protocol": attrs.get("Protocol", entry.get("protocol")),
            "user": attrs.get("User"),
            "retry_interval": attrs.get("RetryInterval"),
            "reconnect_attempts": attrs.get("ReconnectAttempts"),
            "mbean": mbean,
            "source": "mbean",
        })
    if connections and feats and not feats.get("list_broker_connections_uri_connected"):
        notes.append("broker connections: 'connected' and 'uri' need Artemis %s+ (broker is %s): uri is null, "
                     "connected is inferred from the SNF queue's consumer count when it can be read"
                     % (versions.since("broker_connection_mbean"), version_text))

    queue_names = set(battrs.get("QueueNames") or [])
    mirrors: Dict[str, dict] = {}
    for name, conn in connections.items():
        snf_name = lag.snf_queue_name(name)
        snf = queues.get(snf_name)
        is_mirror = snf is not None or snf_name in queue_names
        conn["mirror"] = True if is_mirror else None
        if is_mirror:
            mirrors[name] = {"connection": name, "snf_queue": snf_name, "snf": snf}
    if connections and feats and not feats.get("snf_queue_mbean"):
        since = versions.since("snf_queue_mbean")
        notes.append("mirror SNF queue has no MBean before Artemis %s (broker is %s): backlog taken from "
                     "listQueues when it lists the queue, else null" % (since, version_text))

    _infer_connected(connections, mirrors)

    exact = {k[len("acceptor:"):]: r for k, r in items.items() if k.startswith("acceptor:")}
    acceptors: Optional[Dict[str, dict]] = {} if ("acceptors" in items or exact) else None
    acceptors_stale = False
    for name, res in exact.items():
        if res.ok:
            attrs = res.value or {}
            acceptors[name] = {"name": name, "started": _opt_bool(attrs.get("Started")),  # type: ignore[index]
                               "parameters": attrs.get("Parameters"), "mbean": res.request["mbean"]}
        else:
            acceptors_stale = True
            notes.append("acceptor %s not readable: %s" % (name, res.error or res.status))
    for mbean, attrs in _pattern_value(items.get("acceptors"), notes, "acceptor MBeans").items():
        try:
            _domain, props = on.parse(mbean)
        except on.ObjectNameError:
            continue
        if acceptors is not None:
            acceptors[props.get("name")] = {"name": props.get("name"), "started": _opt_bool(attrs.get("Started")),
                                            "parameters": attrs.get("Parameters"), "mbean": mbean}

    addresses: Optional[Dict[str, dict]] = None
    if items.get("addresses") is not None:
        addresses = {}
        for mbean, attrs in _pattern_value(items["addresses"], notes, "address MBeans").items():
            try:
                _domain, props = on.parse(mbean)
            except on.ObjectNameError:
                continue
            name = props.get("address")
            addresses[name] = {"name": name, "paused": _opt_bool(attrs.get("Paused")),
                               "routing_types": attrs.get("RoutingTypes"),
                               "message_count": lag._opt_int(attrs.get("MessageCount")),
                               "queue_names": attrs.get("QueueNames"), "mbean": mbean}

    return {
        "url": url,
        "broker": broker_name,
        "reachable": True,
        "ts": ts,
        "version": version_text,
        "features": feats,
        "name": battrs.get("Name"),
        "node_id": battrs.get("NodeID"),
        "active": _opt_bool(battrs.get("Active")),
        "started": _opt_bool(battrs.get("Started")),
        "backup": _opt_bool(battrs.get("Backup")),
        "ha_policy": battrs.get("HAPolicy"),
        "replica_sync": _opt_bool(battrs.get("ReplicaSync")),
        "uptime": battrs.get("Uptime"),
        "uptime_millis": battrs.get("UptimeMillis"),
        "connection_count": battrs.get("ConnectionCount"),
        "total_message_count": battrs.get("TotalMessageCount"),
        "total_consumer_count": battrs.get("TotalConsumerCount"),
        "address_names": battrs.get("AddressNames"),
        "status": status,
        "pending_mirror_acks": pending,
        "queues": queues,
        "connections": connections,
        "mirrors": mirrors,
        "acceptors": acceptors,
        "acceptors_stale": acceptors_stale,
        "addresses": addresses,
        "continuity_plugin": plugin.from_result(items.get("continuity"), notes, ts),
        "notes": notes,
    }


def _infer_connected(connections: Dict[str, dict], mirrors: Dict[str, dict]) -> None:
    """Before 2.39 nothing says whether a broker connection is connected. A started mirror connection consumes
    its SNF queue while connected (real 2.44: ConsumerCount 1 connected, 0 while the peer was down), so the
    SNF consumer count stands in for it; ``connected_source`` records that it was inferred."""
    for name, conn in connections.items():
        if conn.get("connected") is not None:
            conn.setdefault("connected_source", conn.get("source"))
            continue
        snf = (mirrors.get(name) or {}).get("snf")
        if conn.get("started") is False:
            conn["connected"] = False
            conn["connected_source"] = "stopped"
        elif snf is not None and snf.get("consumer_count") is not None:
            conn["connected"] = snf["consumer_count"] > 0
            conn["connected_source"] = "snf_consumer_count"
        else:
            conn["connected_source"] = None


def _list_entry(row: Dict[str, Any]) -> dict:
    return {
        "name": row.get("name"), "address": row.get("address"),
        "routing_type": (row.get("routingType") or "").lower() or None, "mbean": None,
        "message_count": lag._opt_int(row.get("messageCount")),
        "delivering_count": lag._opt_int(row.get("deliveringCount")),
        "consumer_count": lag._opt_int(row.get("consumerCount")),
        "messages_added": lag._opt_int(row.get("messagesAdded")),
        "messages_acknowledged": lag._opt_int(row.get("messagesAcked")),
        "paused": _opt_bool(row.get("paused")), "persisted_pause": _opt_bool(row.get("persistedPause")),
        "first_message_age_ms": None, "first_message_timestamp_ms": None,
        "internal": _opt_bool(row.get("internalQueue")), "temporary": _opt_bool(row.get("temporary")),
        "durable": _opt_bool(row.get("durable")), "source": "listQueues",
    }


def queues_from_list(value: Any):
    """``({name: queue entry}, total count)`` from a ``listQueues`` answer (a JSON string, every field a string)."""
    data = _parse_json_string(value)
    if not isinstance(data, dict):
        return {}, None
    rows = data.get("data") or []
    out = {row["name"]: _list_entry(row) for row in rows if isinstance(row, dict) and row.get("name")}
    return out, lag._opt_int(data.get("count"))


def _merge_list_queues(snapshot: dict, value: Any) -> None:
    """Fill SNF entries from a ``listQueues`` answer (pre-2.32 fallback of the ``mbeans`` queue source)."""
    listed, _total = queues_from_list(value)
    for name, entry in listed.items():
        conn_name = lag.mirror_connection_of(name)
        if conn_name is None or conn_name not in snapshot["connections"]:
            continue
        snapshot["connections"][conn_name]["mirror"] = True
        mirror = snapshot["mirrors"].setdefault(conn_name, {"connection": conn_name, "snf_queue": name, "snf": None})
        mirror["snf"] = entry


def _now() -> float:
    # looked up at call time so tests can replace this module's ``time``
    return time.time()


class SiteCollector:
    """Snapshots of one site through one :class:`~jolokia.JolokiaClient`; caches the broker name.

    ``collect()`` raises the typed Jolokia error when the site cannot be read; ``collect_or_unreachable()``
    returns ``{"reachable": False, "error": ...}`` instead (agent, failover probes, every wait) when the site
    cannot serve yet: connection refused, not Jolokia, or a broker in its startup window
    (:class:`~jolokia.BrokerNotReady`).
    """

    def __init__(self, client: j.JolokiaClient, broker_name: Optional[str] = None, site: Optional[str] = None,
                 clock=None, queue_source: str = "list", acceptor_refresh: int = 30):
        self.queue_source = queue_source
        # Acceptor names are learnt from one wildcard read and then read by exact name; the wildcard read is
        # repeated every ``acceptor_refresh`` snapshots and whenever a known acceptor cannot be read.
        self.acceptor_refresh = max(1, int(acceptor_refresh))
        self._acceptor_names: Optional[List[str]] = None
        self._acceptor_reads = 0
        self.client = client
        self.broker_name = broker_name
        self.site = site
        self._clock = clock or _now

    def resolve_broker(self) -> str:
        if self.broker_name is None:
            self.broker_name = self.client.discover_broker()
        return self.broker_name

    def collect(self, include_addresses: bool = False, include_acceptors: bool = True,
                include_connection_mbeans: bool = False, queue_source: Optional[str] = None,
                include_plugin_tables: bool = False) -> dict:
        broker_name = self.resolve_broker()
        start_count = self.client.request_count
        started = time.monotonic()
        source = queue_source or self.queue_source
        names = None
        if include_acceptors and self._acceptor_names and self._acceptor_reads % self.acceptor_refresh:
            names = self._acceptor_names
        pairs = snapshot_requests(broker_name, include_addresses, include_acceptors, include_connection_mbeans,
                                  source, acceptor_names=names, include_plugin_tables=include_plugin_tables)
        results = self.client.bulk([req for _key, req in pairs])
        ts = self._clock()
        self.client.value_of(results[0])  # the broker read failing makes the snapshot useless: raise
        snap = parse_snapshot(broker_name, {key: res for (key, _req), res in zip(pairs, results, strict=True)}, ts,
                              self.client.url)
        if include_acceptors:
            self._acceptor_reads += 1
            if snap["acceptors_stale"]:
                self._acceptor_names, self._acceptor_reads = None, 0
            elif names is None and snap["acceptors"] is not None:
                self._acceptor_names = sorted(snap["acceptors"])
        # Before 2.32 the SNF queue has no MBean and may be missing from QueueNames: ask listQueues whenever the
        # broker has connections, and learn which of them are mirrors from the answer.
        pending = [m for m in snap["mirrors"].values() if m["snf"] is None]
        no_snf_mbean = not snap["features"].get("snf_queue_mbean", True)
        if source == "mbeans" and (pending or snap["connections"]) and no_snf_mbean:
            options = json.dumps({"field": "name", "operation": "CONTAINS", "value": lag.MIRROR_QUEUE_PREFIX})
            res = self.client.bulk([j.exec_request(on.broker(broker_name), "listQueues(java.lang.String,int,int)",
                                                   options, 1, 1000)])[0]
            if res.ok:
                _merge_list_queues(snap, res.value)
                _infer_connected(snap["connections"], snap["mirrors"])
                if not any(m.get("snf") for m in snap["mirrors"].values()):
                    snap["notes"].append("listQueues does not list a mirror SNF queue: backlog unknown")
            else:
                snap["notes"].append("listQueues fallback for the SNF queue failed: %s" % (res.error or res.status))
        snap["site"] = self.site
        snap["requests"] = self.client.request_count - start_count
        snap["elapsed"] = time.monotonic() - started
        return snap

    def collect_counters(self, connections: Optional[Sequence[str]] = None) -> dict:
        """A light sample: only the mirror SNF queues' counters (one cheap request whatever the number of queues).

        With ``connections``, their SNF queue MBeans are read by exact name; without, one ``listQueues`` filtered
        on the ``$ACTIVEMQ_ARTEMIS_MIRROR_`` prefix finds them all. Enough for rates (:func:`snf_sample`).
        """
        broker_name = self.resolve_broker()
        start_count = self.client.request_count
        mirrors: Dict[str, dict] = {}
        if connections is None:
            options = json.dumps({"field": "name", "operation": "CONTAINS", "value": lag.MIRROR_QUEUE_PREFIX,
                                  "sortField": "name", "sortOrder": "asc"})
            res = self.client.bulk([list_queues_request(broker_name, options)])[0]
            ts = self._clock()
            listed, _total = queues_from_list(self.client.value_of(res))
            for name, entry in listed.items():
                conn = lag.mirror_connection_of(name)
                if conn:
                    mirrors[conn] = {"connection": conn, "snf_queue": name, "snf": entry}
        else:
            names = list(connections)
            reqs = [j.read_request(on.queue(broker_name, lag.snf_queue_name(c), lag.snf_queue_name(c)),
                                   ["MessageCount", "DeliveringCount", "ConsumerCount", "MessagesAdded",
                                    "MessagesAcknowledged"]) for c in names]
            results = self.client.bulk(reqs) if reqs else []
            ts = self._clock()
            for conn, res in zip(names, results, strict=True):
                snf = None
                if res.ok:
                    _domain, props = on.parse(res.request["mbean"])
                    snf = _queue_entry(lag.snf_queue_name(conn), props, res.value or {}, res.request["mbean"])
                mirrors[conn] = {"connection": conn, "snf_queue": lag.snf_queue_name(conn), "snf": snf}
        return {"site": self.site, "url": self.client.url, "broker": broker_name, "reachable": True, "ts": ts,
                "light": True, "mirrors": mirrors, "connections": {}, "queues": {}, "notes": [],
                "requests": self.client.request_count - start_count}

    def collect_or_unreachable(self, include_addresses: bool = False, include_acceptors: bool = True) -> dict:
        try:
            return self.collect(include_addresses, include_acceptors)
        except (j.ConnectionFailed, j.ProtocolError, j.BrokerNotReady) as exc:
            return unreachable(self.site, self.client.url, self.broker_name, exc, self._clock())


def unreachable(site: Optional[str], url: Optional[str], broker_name: Optional[str], error: Exception,
                ts: float) -> dict:
    """The snapshot of a site that could not be read (no values, the error)."""
    return {"site": site, "url": url, "broker": broker_name, "reachable": False, "ts": ts, "error": str(error),
            "queues": {}, "connections": {}, "mirrors": {}, "acceptors": {}, "addresses": None,
            "pending_mirror_acks": None, "features": {}, "version": None, "continuity_plugin": None,
            "notes": ["unreachable: %s" % error]}


# ------------------------------------------------------------------------------------ pure derived views
def snf_sample(snapshot: dict, connection: str) -> Optional[lag.SnfSample]:
    """:class:`lag.SnfSample` of a mirror connection's SNF queue, ``None`` when it cannot be read."""
    mirror = (snapshot.get("mirrors") or {}).get(connection)
    if not mirror or mirror.get("snf") is None:
        return None
    q = mirror["snf"]
    return lag.SnfSample(ts=snapshot["ts"], message_count=q.get("message_count"),
                         messages_added=q.get("messages_added"),
                         messages_acknowledged=q.get("messages_acknowledged"),
                         delivering_count=q.get("delivering_count"),
                         first_message_age_ms=q.get("first_message_age_ms"),
                         first_message_timestamp_ms=q.get("first_message_timestamp_ms"))


def mirror_connections(snapshot: dict, connection: Optional[str] = None) -> List[str]:
    """Names of the mirror connections to look at: ``connection`` if given, else every mirror, else every
    broker connection (a connection whose SNF queue cannot be seen may still be a mirror)."""
    if connection:
        return [connection]
    names = sorted(snapshot.get("mirrors") or {})
    return names or sorted(snapshot.get("connections") or {})


def client_queues(snapshot: dict) -> Dict[str, dict]:
    """Queues that take part in a site comparison (no internal, temporary, mirror or management queues)."""
    return {n: q for n, q in (snapshot.get("queues") or {}).items()
            if not lag.is_excluded_queue(n, q.get("internal"), q.get("temporary"))}


def paused_client_queues(snapshot: dict) -> Optional[List[str]]:
    """Names of the client queues (:func:`client_queues`) that are paused; None when the queues were not read.

    A swapover pauses the old site's client queues and resumes them after the switch; one interrupted in between
    leaves them paused, and their consumers then get nothing the day that site is active again."""
    if snapshot.get("queues") is None:
        return None
    return sorted(n for n, q in client_queues(snapshot).items() if q.get("paused"))


def compare_sites(snapshot: dict, peer: dict, tolerance: int = 0, exclude_prefixes: Sequence[str] = (),
                  include: Optional[Sequence[str]] = None,
                  address_filter: Optional[str] = None) -> lag.QueueComparison:
    """Per-queue message count comparison of two snapshots (see :func:`lag.compare_queues`)."""
    return lag.compare_queues(snapshot.get("queues") or {}, peer.get("queues") or {}, tolerance=tolerance,
                              exclude_prefixes=exclude_prefixes, include=include, address_filter=address_filter)


def select_names(names: Sequence[str], names_list: Optional[Sequence[str]] = None, prefix: Optional[str] = None,
                 regex: Optional[str] = None) -> List[str]:
    """Names matching an explicit list, a prefix or a regular expression (``re.search``); sorted."""
    import re

    out = set()
    if names_list:
        out.update(n for n in names if n in set(names_list))
    if prefix:
        out.update(n for n in names if n.startswith(prefix))
    if regex:
        rx = re.compile(regex)
        out.update(n for n in names if rx.search(n))
    return sorted(out)


def consumers_on(snapshot: dict, queues: Optional[Sequence[str]] = None,
                 prefix: Optional[str] = None) -> Dict[str, int]:
    """Queues with consumers among the selected client queues (all client queues when nothing is selected)."""
    pool = client_queues(snapshot)
    names = list(pool)
    if queues or prefix:
        names = select_names(names, queues, prefix)
    return {n: pool[n]["consumer_count"] for n in names if (pool[n].get("consumer_count") or 0) > 0}


def plugin_estimates(source: Optional[dict], target: Optional[dict], backlog: Optional[int] = None,
                     connected: Optional[bool] = None) -> Optional[dict]:
    """RPO and duplicates-at-risk of the direction ``source`` -> ``target`` from the continuity plugin: the target's
    replication latency (:func:`lag.replication_rpo`) and the source's ack model (:func:`lag.duplicates_at_risk`).

    ``None`` when neither site has the plugin; a side without it leaves its part ``None`` with a note.
    """
    src = (source or {}).get("continuity_plugin") if source and source.get("reachable", True) else None
    dst = (target or {}).get("continuity_plugin") if target and target.get("reachable", True) else None
    if src is None and dst is None:
        return None
    notes = []
    repl = (dst or {}).get("replication") or {}
    if dst is None:
        notes.append("no continuity plugin readable on the target: replication latency unknown")
    rpo = lag.replication_rpo(repl.get("latency_p99_seconds"), repl.get("newest_event_age_seconds"),
                              repl.get("mirrored_per_second"), backlog, connected)
    acks = (src or {}).get("ack_model") or {}
    if src is None:
        notes.append("no continuity plugin readable on the source: ack model unknown")
    dup = lag.duplicates_at_risk(acks.get("unacked_deliveries"), acks.get("acks_per_second"), rpo.seconds, backlog)
    notes.extend(n for n in rpo.notes + dup.notes if n not in notes)
    return {
        "replication_latency_p50_seconds": repl.get("latency_p50_seconds"),
        "replication_latency_p99_seconds": repl.get("latency_p99_seconds"),
        "newest_event_age_seconds": repl.get("newest_event_age_seconds"),
        "rpo_seconds_est": rpo.seconds, "rpo_messages_est": rpo.messages, "rpo_basis": rpo.basis,
        "duplicates_at_risk_est": dup.total, "in_flight_deliveries": dup.in_flight,
        "unreplicated_acks_est": dup.unreplicated_acks, "duplicates_basis": dup.basis,
        "acks_per_ack_call": acks.get("acks_per_ack_call"),
        "source_role": (src or {}).get("site_role"), "target_role": (dst or {}).get("site_role"),
        "notes": notes,
    }


def assess_mirrors(current: dict, previous: Optional[dict] = None, peer: Optional[dict] = None,
                   connection: Optional[str] = None, overhead_seconds: float = 0.0,
                   assumed_drain_rate: Optional[float] = None, queue_tolerance: int = 0,
                   exclude_prefixes: Sequence[str] = (), address_filter: Optional[str] = None,
                   disconnected_for: Optional[float] = None) -> dict:
    """Lag assessment of every outgoing mirror of a site (the one function behind ``mirror_info`` and the agent).

    ``previous`` (an earlier snapshot of the same site) gives rates; ``peer`` gives the target's
    ``PendingMirrorAcks``, the per-queue comparison and the consumers on the peer. Returns
    ``{"connections": [per-connection dict: lag.assess() keys + name/uri/connected_source/snf_queue/lag_sample/
    plugin_estimates (:func:`plugin_estimates`, ``None`` without the continuity plugin)],
    "comparison": QueueComparison.as_dict() or None, "passive_consumers": int or None}``; each ``lag_sample``
    holds the evidence ``lag_sample`` fields (source "module"; callers may override).
    """
    comparison = None
    passive = None
    peer_ok = peer is not None and peer.get("reachable", True)
    if peer_ok and current.get("reachable", True):
        comparison = compare_sites(current, peer, tolerance=queue_tolerance, exclude_prefixes=exclude_prefixes,
                                   address_filter=address_filter)
    if peer_ok:
        passive = sum(consumers_on(peer).values())
    out = []
    for name in mirror_connections(current, connection):
        conn = (current.get("connections") or {}).get(name) or {}
        cur = snf_sample(current, name)
        prev = snf_sample(previous, name) if previous and previous.get("reachable", True) else None
        a = lag.assess(prev, cur, connected=conn.get("connected"), started=conn.get("started"),
                       pending_acks=peer.get("pending_mirror_acks") if peer_ok else None, comparison=comparison,
                       overhead_seconds=overhead_seconds, assumed_drain_rate=assumed_drain_rate,
                       disconnected_for=disconnected_for)
        if not conn:
            a["notes"].insert(0, "no broker connection named %r on broker %s" % (name, current.get("broker")))
        if peer is None:
            a["notes"].append("no peer given: pending acks and queue comparison not checked")
        elif not peer_ok:
            a["notes"].append("peer unreachable: %s" % peer.get("error"))
        elif peer.get("pending_mirror_acks") is None:
            a["notes"].append("peer PendingMirrorAcks unknown (needs Artemis %s+)" % versions.since(
                "pending_mirror_acks"))
        mirror = (current.get("mirrors") or {}).get(name) or {}
        entry = dict(a)
        entry.update({"name": name, "uri": conn.get("uri"), "exists": bool(conn),
                      "connected_source": conn.get("connected_source"), "mirror": conn.get("mirror"),
                      "snf_queue": mirror.get("snf_queue", lag.snf_queue_name(name)),
                      "plugin_estimates": plugin_estimates(current, peer, a["backlog"], a["connected"])})
        entry["lag_sample"] = lag.lag_sample_fields(
            a, source="module", site=current.get("site") or current.get("broker"),
            reachable=current.get("reachable", True), connection=name,
            peer=(peer.get("site") or peer.get("broker")) if peer is not None else None,
            passive_consumers=passive, plugin_estimates=entry["plugin_estimates"])
        out.append(entry)
    return {"connections": out, "comparison": comparison.as_dict() if comparison is not None else None,
            "passive_consumers": passive}


def read_pair(first, second):
    """Two site reads at the same time, ``second`` in a worker thread: one round trip of wall time instead of two
    (the switch's drain samples, mirror_wait's samples of a site and its peer)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        later = pool.submit(second)
        return first(), later.result()
