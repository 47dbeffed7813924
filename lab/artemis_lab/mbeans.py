"""The Artemis MBeans of a lab broker: real ObjectNames, attribute names/types and operation signatures
(ARTEMIS-FACTS.md section 4, recorded 2.44.0 `list` output), backed by `BrokerAPI`.

MBeans are built per Jolokia request from the broker's current state; each MBean fetches its info dict once
per request, so a read of all attributes costs one core call.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from artemis_lab import reload as reload_mod
from artemis_lab import versions
from artemis_lab.errors import IllegalArgument, LabArtemisError
from artemis_lab.jolokia.objectname import ObjectName, build, quote
from artemis_lab.model import InstanceConfig

DOMAIN = "org.apache.activemq.artemis"
IMPL = "org.apache.activemq.artemis.core.management.impl."
NETTY_ACCEPTOR = "org.apache.activemq.artemis.core.remoting.impl.netty.NettyAcceptorFactory"
STR, INT, LONG, BOOL, STRS = "java.lang.String", "int", "long", "boolean", "[Ljava.lang.String;"
MAP, OBJS = "java.util.Map", "[Ljava.lang.Object;"
SNF_PREFIX = "$ACTIVEMQ_ARTEMIS_MIRROR_"

HA_POLICY_NAMES = {
    "PRIMARY_ONLY": "Primary Only",
    "LIVE_ONLY": "Live Only",
    "REPLICATION_PRIMARY_QUORUM_VOTING": "Replication Primary w/quorum voting",
    "REPLICATION_BACKUP_QUORUM_VOTING": "Replication Backup w/quorum voting",
    "SHARED_STORE_PRIMARY": "Shared Store Primary",
    "SHARED_STORE_BACKUP": "Shared Store Backup",
    "COLOCATED": "Colocated",
    "REPLICATION_PRIMARY_LOCK_MANAGER": "Replication Primary w/lock manager",
    "REPLICATION_BACKUP_LOCK_MANAGER": "Replication Backup w/lock manager",
}


@dataclass
class Attribute:
    type: str
    desc: str
    get: Callable[[], Any]
    set: Callable[[Any], None] | None = None


@dataclass
class Operation:
    name: str
    args: list[tuple[str, str, str]]  # (name, java type, description)
    ret: str
    desc: str
    fn: Callable[..., Any]

    @property
    def signature(self) -> tuple[str, ...]:
        return tuple(a[1] for a in self.args)


@dataclass
class MBean:
    name: ObjectName
    class_name: str
    attributes: dict[str, Attribute] = field(default_factory=dict)
    operations: list[Operation] = field(default_factory=list)

    def ops_named(self, name: str) -> list[Operation]:
        return [op for op in self.operations if op.name == name]


def _memo(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    cache: list[dict[str, Any]] = []

    def get() -> dict[str, Any]:
        if not cache:
            cache.append(fn())
        return cache[0]

    return get


def print_duration(ms: float) -> str:
    """Artemis TimeUtils.printDuration (Uptime attribute)."""
    secs = ms / 1000
    if secs < 60:
        return f"{secs:,.3f} seconds"
    minutes = secs / 60
    if minutes < 60:
        m = int(minutes)
        return f"{m:,} minute" + ("s" if m > 1 else "")
    hours = minutes / 60
    if hours < 24:
        h, m = int(hours), int(minutes % 60)
        text = f"{h:,} hour" + ("s" if h > 1 else "")
        return text + (f" {m} minute" + ("s" if m > 1 else "") if m else "")
    d, h = int(hours / 24), int(hours % 24)
    text = f"{d:,} day" + ("s" if d > 1 else "")
    return text + (f" {h} hour" + ("s" if h > 1 else "") if h else "")


def _wildcard_regex(match: str) -> re.Pattern[str]:
    parts = []
    for word in match.split("."):
        parts.append(".*" if word == "#" else "[^.]+" if word == "*" else re.escape(word))
    regex = r"\.".join(parts).replace(r".*\.", r"(?:.*\.)?").replace(r"\..*", r"(?:\..*)?")
    return re.compile(regex)


def _s(value: Any) -> str:
    """listQueues/listAddresses render every field as a string, booleans lower case, None as ''."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


class ManagementModel:
    """Builds the MBean set of one lab broker."""

    def __init__(self, broker: Any, config: InstanceConfig):
        self.broker = broker
        self.config = config
        self.version = config.emulated_version
        self.started_at = time.time()
        # Writable broker attributes that only the management layer keeps.
        self.counter_sample_period = 10000
        self.counter_max_day_count = 10

    # --- names ----------------------------------------------------------------------------------------------------
    def _b(self) -> str:
        return quote(self.broker.name)

    def broker_name(self) -> ObjectName:
        return build(DOMAIN, broker=self._b())

    def address_name(self, address: str) -> ObjectName:
        return build(DOMAIN, broker=self._b(), component="addresses", address=quote(address))

    def queue_name(self, address: str, routing_type: str, queue: str) -> ObjectName:
        return build(DOMAIN, broker=self._b(), component="addresses", address=quote(address),
                     subcomponent="queues", **{"routing-type": quote(routing_type.lower()), "queue": quote(queue)})

    def acceptor_name(self, name: str) -> ObjectName:
        return build(DOMAIN, broker=self._b(), component="acceptors", name=quote(name))

    def connection_name(self, name: str) -> ObjectName:
        return build(DOMAIN, broker=self._b(), component="broker-connections", name=quote(name))

    # --- enumeration ----------------------------------------------------------------------------------------------
    def all(self) -> list[MBean]:
        info = self.broker.broker_info()
        beans = [self.broker_mbean(_memo(lambda: info))]
        for address in info["address_names"]:
            beans.append(self.address_mbean(address))
        for queue in info["queue_names"]:
            try:
                qinfo = self.broker.queue_info(queue)
            except LabArtemisError:
                continue  # deleted meanwhile
            beans.append(self.queue_mbean(queue, _memo(lambda q=qinfo: q)))
        for acceptor in self.broker.acceptor_names():
            beans.append(self.acceptor_mbean(acceptor))
        if versions.has_broker_connection_mbean(self.version):
            for conn in self.broker.broker_connections():
                beans.append(self.connection_mbean(conn["name"]))
        return beans

    def find(self, name: ObjectName) -> MBean | None:
        """The MBean with exactly this name, built without enumerating everything."""
        if name.domain != DOMAIN or name.get("broker") != self.broker.name:
            return None
        keys = {k for k, _ in name.props}
        component = name.get("component")
        try:
            if keys == {"broker"}:
                return self.broker_mbean(_memo(self.broker.broker_info))
            if component == "addresses" and keys == {"broker", "component", "address"}:
                address = name.get("address") or ""
                self.broker.address_info(address)
                return self.address_mbean(address)
            if component == "addresses" and keys == {"broker", "component", "address", "subcomponent",
                                                     "routing-type", "queue"} and name.get("subcomponent") == "queues":
                queue = name.get("queue") or ""
                if queue.startswith(SNF_PREFIX) and not versions.has_snf_queue_mbean(self.version):
                    return None  # no SNF queue MBean before 2.32
                qinfo = self.broker.queue_info(queue)
                if qinfo["address"] != name.get("address") or qinfo["routing_type"].lower() != name.get(
                    "routing-type"
                ):
                    return None
                return self.queue_mbean(queue, _memo(lambda: qinfo))
            if component == "acceptors" and keys == {"broker", "component", "name"}:
                acc = name.get("name") or ""
                return self.acceptor_mbean(acc) if acc in self.broker.acceptor_names() else None
            if component == "broker-connections" and keys == {"broker", "component", "name"}:
                if not versions.has_broker_connection_mbean(self.version):
                    return None
                conn = name.get("name") or ""
                known = {c["name"] for c in self.broker.broker_connections()}
                return self.connection_mbean(conn) if conn in known else None
        except LabArtemisError:
            return None
        return None

    # --- broker ---------------------------------------------------------------------------------------------------
    def _status(self, info: dict[str, Any]) -> str:
        etc = Path(self.config.instance_dir) / "etc"
        jaas = {}
        for fname in ("artemis-users.properties", "artemis-roles.properties"):
            path = etc / fname
            if path.exists():
                jaas[fname] = {"reloadTime": str(int(path.stat().st_mtime * 1000)),
                               "Alder32": str(zlib.adler32(path.read_bytes()))}
        status = {
            "configuration": {"properties": {"system-brokerconfig.": {"alder32": "1", "fileAlder32": "0"}}},
            "server": {
                "jaas": {"properties": jaas},
                "state": "STARTED" if info.get("started") else "STOPPED",
                "version": self.broker.version,
                "nodeId": self.broker.node_id,
                "identity": None,
                "uptime": print_duration(info.get("uptime_ms", 0)),
            },
        }
        return json.dumps(status, separators=(",", ":"))

    def _acceptors_json(self) -> str:
        rows = []
        for name in self.broker.acceptor_names():
            info = self.broker.acceptor_info(name)
            rows.append({"name": name, "factoryClassName": info.get("factory_class_name", NETTY_ACCEPTOR),
                         "params": info.get("parameters", {}), "extraProps": {}})
        return json.dumps(rows, separators=(",", ":"))

    def broker_mbean(self, info: Callable[[], dict[str, Any]]) -> MBean:
        b, cfg = self.broker, self.config.broker

        def ha() -> str:
            kind = info().get("ha_policy", "PRIMARY_ONLY")
            if kind == "PRIMARY_ONLY" and not versions.uses_primary_backup_names(self.version):
                kind = "LIVE_ONLY"  # before the 2.32 rename the enum said "Live Only" (inferred from the source)
            return HA_POLICY_NAMES.get(kind, kind)

        a: dict[str, Attribute] = {
            "Name": Attribute(STR, "name of the server", lambda: b.name),
            "Version": Attribute(STR, "Server's version", lambda: b.version),
            "NodeID": Attribute(STR, "Node ID of this server", lambda: b.node_id),
            "Active": Attribute(BOOL, "Server is active", lambda: bool(info()["active"])),
            "Started": Attribute(BOOL, "whether this server is started", lambda: bool(info()["started"])),
            "Backup": Attribute(BOOL, "is this server a backup", lambda: bool(info().get("backup", False))),
            "ReplicaSync": Attribute(BOOL, "whether the initial replication synchronization process with the backup "
                                           "server is complete", lambda: False),
            "SharedStore": Attribute(BOOL, "whether this server shares its data store with a corresponding live or "
                                           "backup server", lambda: False),
            "Clustered": Attribute(BOOL, "whether this server is clustered", lambda: False),
            "HAPolicy": Attribute(STR, "The HA Policy of the server", ha),
            "Status": Attribute(STR, "The status of the server", lambda: self._status(info())),
            "Uptime": Attribute(STR, "Uptime of the broker", lambda: print_duration(info()["uptime_ms"])),
            "UptimeMillis": Attribute(LONG, "Uptime of the broker in milliseconds", lambda: int(info()["uptime_ms"])),
            "AddressNames": Attribute(STRS, "names of the addresses created on this server",
                                      lambda: list(info()["address_names"])),
            "QueueNames": Attribute(STRS, "names of the queues created on this server",
                                    lambda: list(info()["queue_names"])),
            "AddressCount": Attribute(INT, "number of addresses", lambda: len(info()["address_names"])),
            "QueueCount": Attribute(INT, "number of queues", lambda: len(info()["queue_names"])),
            "ConnectionCount": Attribute(INT, "Number of clients connected to this server",
                                         lambda: int(info()["connection_count"])),
            "TotalConnectionCount": Attribute(LONG, "Number of clients which have connected to this server since it "
                                                    "was started",
                                              lambda: int(info().get("total_connection_count",
                                                                     info()["connection_count"]))),
            "TotalMessageCount": Attribute(LONG, "Number of messages in all queues on the server",
                                           lambda: int(info()["total_message_count"])),
            "TotalConsumerCount": Attribute(LONG, "Number of consumers consuming messages from all the queues on "
                                                  "this server", lambda: int(info()["total_consumer_count"])),
            "TotalMessagesAdded": Attribute(LONG, "Number of messages sent to this server since it was started",
                                            lambda: int(info().get("total_messages_added", 0))),
            "TotalMessagesAcknowledged": Attribute(LONG, "Number of messages acknowledged from all the queues on "
                                                         "this server since it was started",
                                                   lambda: int(info().get("total_messages_acknowledged", 0))),
            "BrokerPluginClassNames": Attribute(STRS, "names of the broker plugins",
                                                lambda: list(info().get("plugin_class_names", []))),
            "PersistenceEnabled": Attribute(BOOL, "whether this server is using persistence and store data",
                                            lambda: cfg.persistence_enabled),
            "SecurityEnabled": Attribute(BOOL, "whether security is enabled", lambda: cfg.security_enabled),
            "JournalDirectory": Attribute(STR, "file system directory used to store journal log",
                                          lambda: cfg.journal_directory),
            "BindingsDirectory": Attribute(STR, "file system directory used to store bindings",
                                           lambda: cfg.bindings_directory),
            "PagingDirectory": Attribute(STR, "file system directory used to store paging files",
                                         lambda: cfg.paging_directory),
            "LargeMessagesDirectory": Attribute(STR, "file system directory used to store large messages",
                                                lambda: cfg.large_messages_directory),
            "JournalType": Attribute(STR, "type of journal used by this server",
                                     lambda: cfg.core_settings.get("journal-type", "NIO")),
            "ManagementAddress": Attribute(STR, "management address of this server", lambda: "activemq.management"),
            "ManagementNotificationAddress": Attribute(STR, "management notification address of this server",
                                                       lambda: "activemq.notifications"),
            "WildcardRoutingEnabled": Attribute(BOOL, "whether wildcard routing is supported by this server",
                                                lambda: True),
            "CurrentTimeMillis": Attribute(LONG, "Current time on the server", lambda: int(time.time() * 1000)),
            "AcceptorsAsJSON": Attribute(STR, "Acceptors configured for this server as JSON", self._acceptors_json),
            "ConnectorServices": Attribute(STRS, "connector services", lambda: []),
            "ClusterConnectionNames": Attribute(STRS, "names of the cluster-connections deployed on this server",
                                                lambda: []),
            "DivertNames": Attribute(STRS, "names of the diverts deployed on this server", lambda: []),
            "BridgeNames": Attribute(STRS, "names of the bridges deployed on this server", lambda: []),
            "MessageCounterSamplePeriod": Attribute(
                LONG, "Sample period (in milliseconds) to take message counter snapshot",
                lambda: self.counter_sample_period, lambda v: setattr(self, "counter_sample_period", int(v))),
            "MessageCounterMaxDayCount": Attribute(
                INT, "Maximum number of days kept in memory for message counter",
                lambda: self.counter_max_day_count, lambda v: setattr(self, "counter_max_day_count", int(v))),
        }
        if versions.has_pending_mirror_acks(self.version):
            a["PendingMirrorAcks"] = Attribute(INT, "Number of pending mirror acks",
                                               lambda: int(info().get("pending_mirror_acks", 0)))
        s1 = [("name", STR, "name")]
        ops = [
            Operation("listBrokerConnections", [], STR, "list all broker connections", self._list_bconns),
            Operation("startBrokerConnection", s1, "void", "start a broker connection", b.start_broker_connection),
            Operation("stopBrokerConnection", s1, "void", "stop a broker connection", b.stop_broker_connection),
            Operation("listQueues", [("options", STR, "Options"), ("pageNumber", INT, "Page Number"),
                                     ("pageSize", INT, "Page Size")], STR, "Search for Queues", self._list_queues),
            Operation("listAddresses", [("separator", STR, "Separator")], STR, "List the addresses",
                      lambda sep: sep.join(self.broker.broker_info()["address_names"])),
            Operation("listAddresses", [("options", STR, "Options"), ("pageNumber", INT, "Page Number"),
                                        ("pageSize", INT, "Page Size")], STR, "Search for Addresses",
                      self._list_addresses),
            Operation("createAddress", [("name", STR, "The name of the address"),
                                        ("routingTypes", STR,
                                         "Comma separated list of Routing Types (anycast/multicast)")],
                      STR, "Create an address", self._create_address),
            Operation("getAddressInfo", [("address", STR, "Address")], STR, "Get address info",
                      lambda addr: json.dumps(self._address_row(addr), separators=(",", ":"))),
            Operation("deleteAddress", [("name", STR, "The name of the address"),
                                        ("force", BOOL, "Force consumers and queues out")], "void",
                      "Delete an address", lambda n, f: b.delete_address(n, bool(f))),
            Operation("deleteAddress", [("name", STR, "The name of the address")], "void", "Delete an address",
                      lambda n: b.delete_address(n, False)),
            Operation("createQueue", [("address", STR, "Address of the queue"), ("name", STR, "Name of the queue"),
                                      ("durable", BOOL, "Is the queue durable?")], "void",
                      "Create a queue", lambda a_, n, d: self._create_queue(a_, n, "MULTICAST", d)),
            Operation("createQueue", [("address", STR, "Address of the queue"), ("name", STR, "Name of the queue"),
                                      ("durable", BOOL, "Is the queue durable?"),
                                      ("routingType", STR, "The routing type used for this address")], "void",
                      "Create a queue", lambda a_, n, d, rt: self._create_queue(a_, n, rt, d)),
            Operation("createQueue", [("address", STR, "Address of the queue"), ("name", STR, "Name of the queue")],
                      "void", "Create a queue", lambda a_, n: self._create_queue(a_, n, "MULTICAST", True)),
            Operation("createQueue", [("queueConfiguration", STR, "the configuration of the queue in JSON format")],
                      STR, "Create a queue", lambda j: self._create_queue_json(j, False)),
            Operation("createQueue", [("queueConfiguration", STR, "the configuration of the queue in JSON format"),
                                      ("ignoreIfExists", BOOL, "whether or not to simply return without an exception "
                                                               "if the queue exists")],
                      STR, "Create a queue", lambda j, i: self._create_queue_json(j, bool(i))),
            Operation("createQueue", [("address", STR, "Address of the queue"), ("name", STR, "Name of the queue"),
                                      ("routingType", STR, "The routing type used for this address")], "void",
                      "Create a queue", lambda a_, n, rt: self._create_queue(a_, n, rt, True)),
            Operation("createQueue", [("address", STR, "Address of the queue"), ("name", STR, "Name of the queue"),
                                      ("filter", STR, "Filter of the queue"),
                                      ("durable", BOOL, "Is the queue durable?")],
                      "void", "Create a queue",
                      lambda a_, n, f, d: self._create_queue(a_, n, "MULTICAST", d, f or None)),
            Operation("createQueue", [("address", STR, "Address of the queue"), ("name", STR, "Name of the queue"),
                                      ("filter", STR, "Filter of the queue"),
                                      ("durable", BOOL, "Is the queue durable?"),
                                      ("routingType", STR, "The routing type used for this address")],
                      "void", "Create a queue", lambda a_, n, f, d, rt: self._create_queue(a_, n, rt, d, f or None)),
            Operation("destroyQueue", [("name", STR, "Name of the queue to destroy")], "void", "Destroy a queue",
                      lambda n: b.destroy_queue(n, False)),
            Operation("destroyQueue", [("name", STR, "Name of the queue to destroy"),
                                       ("removeConsumers", BOOL, "Remove consumers of this queue")], "void",
                      "Destroy a queue", lambda n, r: b.destroy_queue(n, bool(r))),
            Operation("destroyQueue", [("name", STR, "Name of the queue to destroy"),
                                       ("removeConsumers", BOOL, "Remove consumers of this queue"),
                                       ("forceAutoDeleteAddress", BOOL, "Remove address if auto-created")], "void",
                      "Destroy a queue", lambda n, r, _f: b.destroy_queue(n, bool(r))),
            Operation("reloadConfigurationFile", [], "void", "forces the broker to reload its configuration file",
                      lambda: reload_mod.reload_configuration(b) and None),
            Operation("closeConnectionsForUser", [("userName", STR, "a user name")], BOOL,
                      "Closes all the connections for the given user", b.close_connections_for_user),
            Operation("listConnectionsAsJSON", [], STR, "List all the connections as a JSON string",
                      lambda: json.dumps(b.connections(), separators=(",", ":"))),
            Operation("listAllConsumersAsJSON", [], STR, "List all consumers as a JSON string",
                      lambda: json.dumps(b.consumers(), separators=(",", ":"))),
            Operation("listConsumersAsJSON", [("connectionID", STR, "a connection ID")], STR,
                      "List all the consumers which belongs to the connection as a JSON string",
                      lambda cid: json.dumps([c for c in b.consumers() if str(c.get("connectionID")) == cid],
                                             separators=(",", ":"))),
        ]
        return MBean(self.broker_name(), IMPL + "ActiveMQServerControlImpl", a, ops)

    def _list_bconns(self) -> str:
        rows = []
        for c in self.broker.broker_connections():
            row: dict[str, Any] = {"name": c["name"], "protocol": c.get("protocol", "AMQP"),
                                   "started": bool(c["started"])}
            if versions.has_broker_connection_mbean(self.version):
                row["uri"] = c.get("uri")
                row["connected"] = bool(c.get("connected"))
            rows.append(row)
        return json.dumps(rows, separators=(",", ":"))

    def _create_address(self, name: str, routing_types: str) -> str:
        types = [t.strip().upper() for t in routing_types.split(",") if t.strip()]
        for t in types:
            if t not in ("ANYCAST", "MULTICAST"):
                raise IllegalArgument(f"No enum constant org.apache.activemq.artemis.api.core.RoutingType.{t}")
        self.broker.create_address(name, types)
        return json.dumps(self._address_row(name), separators=(",", ":"))

    def _create_queue(self, address: str, name: str, routing_type: str, durable: Any,
                      filter_: str | None = None) -> None:
        rt = routing_type.upper()
        if rt not in ("ANYCAST", "MULTICAST"):
            raise IllegalArgument(f"No enum constant org.apache.activemq.artemis.api.core.RoutingType.{rt}")
        self.broker.create_queue(address, name, rt, bool(durable), filter_)

    def _create_queue_json(self, text: str, ignore_if_exists: bool) -> str:
        try:
            conf = json.loads(text)
        except json.JSONDecodeError as exc:
            raise IllegalArgument(f"Invalid queue configuration JSON: {exc}") from exc
        name = conf.get("name")
        if not name:
            raise IllegalArgument("AMQ229228: name must be specified")
        address = conf.get("address") or name
        rt = str(conf.get("routing-type") or "MULTICAST").upper()
        durable = conf.get("durable", True)
        durable = durable if isinstance(durable, bool) else str(durable).lower() == "true"
        self.broker.create_queue(address, name, rt, durable, conf.get("filter-string") or None, ignore_if_exists)
        return json.dumps({"name": name, "address": address, "routing-type": rt, "durable": durable},
                          separators=(",", ":"))

    # listQueues / listAddresses: options {"field","operation","value","sortField","sortOrder"}
    @staticmethod
    def _filter_sort_page(rows: list[dict[str, str]], options: str, page: int, size: int) -> str:
        try:
            opts = json.loads(options) if options else {}
        except json.JSONDecodeError:
            opts = {}
        fld, op, val = opts.get("field") or "", (opts.get("operation") or "").upper(), opts.get("value") or ""
        if fld and op:
            def keep(row: dict[str, str]) -> bool:
                cell = row.get(fld, "")
                if op == "EQUALS":
                    return cell == val
                if op == "NOT_EQUALS":
                    return cell != val
                if op == "CONTAINS":
                    return val in cell
                if op == "NOT_CONTAINS":
                    return val not in cell
                try:
                    if op == "GREATER_THAN":
                        return float(cell) > float(val)
                    if op == "LESS_THAN":
                        return float(cell) < float(val)
                except ValueError:
                    return False
                return True

            rows = [r for r in rows if keep(r)]
        sort_field = opts.get("sortField") or "name"

        def sort_key(row: dict[str, str]) -> tuple[int, float, str]:
            cell = row.get(sort_field, "")
            try:
                return (0, float(cell), "")
            except ValueError:
                return (1, 0.0, cell)

        rows.sort(key=sort_key, reverse=(opts.get("sortOrder") or "asc").lower() == "desc")
        total = len(rows)
        start = max(page - 1, 0) * size if size > 0 else 0
        data = rows[start : start + size] if size > 0 else rows
        return json.dumps({"data": data, "count": total}, separators=(",", ":"))

    def _queue_row(self, name: str, q: dict[str, Any]) -> dict[str, str]:
        return {
            "id": _s(q.get("id", 0)), "name": name, "address": q["address"], "filter": _s(q.get("filter")),
            "durable": _s(q.get("durable", True)), "paused": _s(q.get("paused", False)),
            "persistedPause": _s(q.get("persisted_pause", False)), "temporary": _s(q.get("temporary", False)),
            "purgeOnNoConsumers": _s(q.get("purge_on_no_consumers", False)),
            "consumerCount": _s(q.get("consumer_count", 0)), "maxConsumers": _s(q.get("max_consumers", -1)),
            "autoCreated": _s(q.get("auto_created", False)), "user": _s(q.get("user")),
            "routingType": q.get("routing_type", "ANYCAST").upper(),
            "messagesAdded": _s(q.get("messages_added", 0)), "messageCount": _s(q.get("message_count", 0)),
            "messagesAcked": _s(q.get("messages_acknowledged", 0)),
            "messagesExpired": _s(q.get("messages_expired", 0)),
            "deliveringCount": _s(q.get("delivering_count", 0)), "messagesKilled": _s(q.get("messages_killed", 0)),
            "directDeliver": "false", "exclusive": "false", "lastValue": "false", "lastValueKey": "",
            "scheduledCount": _s(q.get("scheduled_count", 0)), "groupRebalance": "false",
            "groupRebalancePauseDispatch": "false", "groupBuckets": "-1", "groupFirstKey": "", "enabled": "true",
            "ringSize": "-1", "consumersBeforeDispatch": "0", "delayBeforeDispatch": "-1", "autoDelete": "false",
            "internalQueue": _s(q.get("internal", False)),
        }

    def _list_queues(self, options: str, page: int, size: int) -> str:
        rows = []
        for name in self.broker.broker_info()["queue_names"]:
            try:
                rows.append(self._queue_row(name, self.broker.queue_info(name)))
            except LabArtemisError:
                continue
        return self._filter_sort_page(rows, options, page, size)

    def _address_row(self, address: str) -> dict[str, str]:
        a = self.broker.address_info(address)
        return {
            "id": _s(a.get("id", 0)), "name": address,
            "routingTypes": json.dumps([t.upper() for t in a.get("routing_types", [])]),
            "queueCount": _s(len(a.get("queue_names", []))), "internal": _s(a.get("internal", False)),
            "temporary": _s(a.get("temporary", False)), "autoCreated": _s(a.get("auto_created", False)),
            "paused": _s(a.get("paused", False)), "currentDuplicateIdCacheSize": "0",
            "retroactiveResource": "false", "unroutedMessageCount": _s(a.get("unrouted_message_count", 0)),
            "routedMessageCount": _s(a.get("routed_message_count", 0)),
            "messageCount": _s(a.get("message_count", 0)), "addressLimitPercent": "0", "numberOfPages": "0",
            "addressSize": _s(a.get("bytes", 0)), "maxPageReadBytes": "20971520", "maxPageReadMessages": "-1",
            "prefetchPageBytes": "20971520", "prefetchPageMessages": "20971520", "numberOfBytesPerPage": "10485760",
            "paging": "false",
        }

    def _list_addresses(self, options: str, page: int, size: int) -> str:
        rows = []
        for name in self.broker.broker_info()["address_names"]:
            try:
                rows.append(self._address_row(name))
            except LabArtemisError:
                continue
        return self._filter_sort_page(rows, options, page, size)

    # --- address --------------------------------------------------------------------------------------------------
    def _roles(self, address: str) -> list[list[Any]]:
        order = ["send", "consume", "createDurableQueue", "deleteDurableQueue", "createNonDurableQueue",
                 "deleteNonDurableQueue", "manage", "browse", "createAddress", "deleteAddress", "view", "edit"]
        matching = [s for s in self.config.broker.security_settings if _wildcard_regex(s.match).fullmatch(address)]
        if not matching:
            return []
        best = max(matching, key=lambda s: len(s.match.replace("#", "").replace("*", "")))
        roles = sorted({r for rs in best.permissions.values() for r in rs})
        return [[r, *[r in best.permissions.get(p, frozenset()) for p in order]] for r in roles]

    def address_mbean(self, address: str) -> MBean:
        b = self.broker
        info = _memo(lambda: b.address_info(address))
        order = ["send", "consume", "createDurableQueue", "deleteDurableQueue", "createNonDurableQueue",
                 "deleteNonDurableQueue", "manage", "browse", "createAddress", "deleteAddress", "view", "edit"]
        roles_json = lambda: json.dumps(  # noqa: E731
            [{"name": r[0], **dict(zip(order, r[1:], strict=True))} for r in self._roles(address)],
            separators=(",", ":"))
        a = {
            "Address": Attribute(STR, "name of the address", lambda: address),
            "Id": Attribute(LONG, "internal ID of this address", lambda: int(info().get("id", 0))),
            "Internal": Attribute(BOOL, "whether this address is internal", lambda: bool(info().get("internal"))),
            "Temporary": Attribute(BOOL, "whether this address is temporary", lambda: bool(info().get("temporary"))),
            "AutoCreated": Attribute(BOOL, "whether this address was created automatically",
                                     lambda: bool(info().get("auto_created", False))),
            "MessageCount": Attribute(LONG, "number of messages currently in all queues bound to this address",
                                      lambda: int(info()["message_count"])),
            "NumberOfMessages": Attribute(LONG, "number of messages currently in all queues bound to this address",
                                          lambda: int(info().get("number_of_messages", info()["message_count"]))),
            "Paused": Attribute(BOOL, "whether this address is paused", lambda: bool(info()["paused"])),
            "QueueNames": Attribute(STRS, "names of the local queue(s) bound to this address",
                                    lambda: list(info()["queue_names"])),
            "AllQueueNames": Attribute(STRS, "names of both the local and remote queue(s) bound to this address",
                                       lambda: list(info()["queue_names"])),
            "BindingNames": Attribute(STRS, "names of all bindings (both queues and diverts) bound to this address",
                                      lambda: list(info()["queue_names"])),
            "QueueCount": Attribute(LONG, "number of local queues bound to this address",
                                    lambda: len(info()["queue_names"])),
            "RemoteQueueNames": Attribute(STRS, "names of the remote queue(s) bound to this address", lambda: []),
            "RoutingTypes": Attribute(STRS, "routing types enabled on this address",
                                      lambda: [t.upper() for t in info()["routing_types"]]),
            "RoutingTypesAsJSON": Attribute(STR, "Get the routing types enabled on this address as JSON",
                                            lambda: json.dumps([t.upper() for t in info()["routing_types"]])),
            "RoutedMessageCount": Attribute(LONG, "number of messages routed to one or more bindings",
                                            lambda: int(info().get("routed_message_count", 0))),
            "UnRoutedMessageCount": Attribute(LONG, "number of messages not routed to any bindings",
                                              lambda: int(info().get("unrouted_message_count", 0))),
            "AddressSize": Attribute(LONG, "the number of estimated bytes being used by all the queue(s) bound to "
                                           "this address; used to control paging and blocking",
                                     lambda: int(info().get("bytes", 0))),
            "Roles": Attribute(OBJS, "roles (name and permissions) associated with this address",
                               lambda: self._roles(address)),
            "RolesAsJSON": Attribute(STR, "roles  (name and permissions) associated with this address using JSON",
                                     roles_json),
            "CurrentDuplicateIdCacheSize": Attribute(LONG, "current size of the duplicate ID cache", lambda: 0),
            "RetroactiveResource": Attribute(BOOL, "whether this address is used for a retroactive address",
                                             lambda: False),
            "Paging": Attribute(BOOL, "whether this address is paging", lambda: False),
            "NumberOfPages": Attribute(LONG, "number of pages used by this address", lambda: 0),
            "NumberOfBytesPerPage": Attribute(LONG, "number of bytes per page for this address", lambda: 10485760),
            "AddressLimitPercent": Attribute(INT, "the % of memory limit (global or local) that is in use by this "
                                                  "address", lambda: 0),
            "MaxPageReadBytes": Attribute(INT, "max bytes to read from page", lambda: 20971520),
            "MaxPageReadMessages": Attribute(INT, "max messages to read from page", lambda: -1),
            "PrefetchPageBytes": Attribute(INT, "prefetch page bytes", lambda: 20971520),
            "PrefetchPageMessages": Attribute(INT, "prefetch page messages", lambda: -1),
        }
        ops = [
            Operation("block", [], BOOL, "Block all producers on this address",
                      lambda: bool(b.block_address(address))),
            Operation("unblock", [], "void", "Unblock producers on this address", lambda: b.unblock_address(address)),
            Operation("pause", [], "void", "Pauses all the queues bound to this address",
                      lambda: b.pause_address(address, False)),
            Operation("pause", [("persist", BOOL, "if true, the pause state will be persisted.")], "void",
                      "Pauses all the queues bound to this address", lambda p: b.pause_address(address, bool(p))),
            Operation("resume", [], "void", "Resumes all the queues bound to this address",
                      lambda: b.resume_address(address)),
            Operation("clearDuplicateIdCache", [], BOOL, "Clear the duplicate ID cache for this address",
                      lambda: True),
        ]
        return MBean(self.address_name(address), IMPL + "AddressControlImpl", a, ops)

    # --- queue ----------------------------------------------------------------------------------------------------
    def queue_mbean(self, queue: str, info: Callable[[], dict[str, Any]]) -> MBean:
        b = self.broker
        q = info
        a = {
            "Name": Attribute(STR, "name of this queue", lambda: queue),
            "Address": Attribute(STR, "address this queue is bound to", lambda: q()["address"]),
            "ID": Attribute(LONG, "id of this queue", lambda: int(q().get("id", 0))),
            "RoutingType": Attribute(STR, "routing type used by this queue", lambda: q()["routing_type"].upper()),
            "Filter": Attribute(STR, "filter associated with this queue", lambda: q().get("filter")),
            "Durable": Attribute(BOOL, "whether this queue is durable", lambda: bool(q().get("durable", True))),
            "Temporary": Attribute(BOOL, "whether this queue is temporary", lambda: bool(q().get("temporary"))),
            "InternalQueue": Attribute(BOOL, "is this queue internal", lambda: bool(q().get("internal"))),
            "ConfigurationManaged": Attribute(BOOL, "is this queue managed by configuration (broker.xml)",
                                              lambda: bool(q().get("configuration_managed", False))),
            "User": Attribute(STR, "the user that created the queue", lambda: q().get("user")),
            "MessageCount": Attribute(LONG, "number of messages currently in this queue (includes scheduled, paged, "
                                            "and in-delivery messages)", lambda: int(q()["message_count"])),
            "DurableMessageCount": Attribute(LONG, "number of durable messages currently in this queue",
                                             lambda: int(q().get("durable_message_count", q()["message_count"]))),
            "DeliveringCount": Attribute(INT, "number of messages that this queue is currently delivering to its "
                                              "consumers", lambda: int(q()["delivering_count"])),
            "DurableDeliveringCount": Attribute(INT, "number of durable messages that this queue is currently "
                                                     "delivering to its consumers",
                                                lambda: int(q().get("durable_delivering_count",
                                                                    q()["delivering_count"]))),
            "ScheduledCount": Attribute(LONG, "number of scheduled messages in this queue",
                                        lambda: int(q().get("scheduled_count", 0))),
            "DurableScheduledCount": Attribute(LONG, "number of durable scheduled messages in this queue",
                                               lambda: int(q().get("scheduled_count", 0))),
            "ConsumerCount": Attribute(INT, "number of consumers consuming messages from this queue",
                                       lambda: int(q()["consumer_count"])),
            "MessagesAdded": Attribute(LONG, "number of messages added to this queue since it was created",
                                       lambda: int(q()["messages_added"])),
            "MessagesAcknowledged": Attribute(LONG, "number of messages acknowledged from this queue since it was "
                                                    "created", lambda: int(q()["messages_acknowledged"])),
            "AcknowledgeAttempts": Attribute(LONG, "number of messages acknowledged attempts from this queue since "
                                                   "it was created",
                                             lambda: int(q().get("acknowledge_attempts",
                                                                 q()["messages_acknowledged"]))),
            "MessagesExpired": Attribute(LONG, "number of messages expired from this queue since it was created",
                                         lambda: int(q().get("messages_expired", 0))),
            "MessagesKilled": Attribute(LONG, "number of messages removed from this queue since it was created due "
                                              "to exceeding the max delivery attempts",
                                        lambda: int(q().get("messages_killed", 0))),
            "FirstMessageAge": Attribute("java.lang.Long", "age of the first message in milliseconds",
                                         lambda: q().get("first_message_age")),
            "FirstMessageTimestamp": Attribute("java.lang.Long", "timestamp of the first message in milliseconds",
                                               lambda: q().get("first_message_timestamp")),
            "FirstMessageAsJSON": Attribute(STR, "first message on the queue as JSON", lambda: self._first_json(queue)),
            "Paused": Attribute(BOOL, "whether the queue is paused.", lambda: bool(q()["paused"])),
            "PersistedPause": Attribute(BOOL, "whether the queue's paused state is persisted",
                                        lambda: bool(q().get("persisted_pause", False))),
            "MaxConsumers": Attribute(INT, "maximum number of consumers allowed on this queue at any one time",
                                      lambda: int(q().get("max_consumers", -1))),
            "PurgeOnNoConsumers": Attribute(BOOL, "purge this queue when the last consumer disconnects",
                                            lambda: bool(q().get("purge_on_no_consumers", False))),
            "Exclusive": Attribute(BOOL, "If the queue should route exclusively to one consumer", lambda: False),
            "LastValue": Attribute(BOOL, "is this queue a last value queue", lambda: False),
            "Enabled": Attribute(BOOL, "is this queue enabled", lambda: True),
            "DeadLetterAddress": Attribute(STR, "dead-letter address associated with this queue",
                                           lambda: self._setting(q()["address"], "dead_letter_address")),
            "ExpiryAddress": Attribute(STR, "expiry address associated with this queue",
                                       lambda: self._setting(q()["address"], "expiry_address")),
            "PersistentSize": Attribute(LONG, "persistent size of all messages in this queue",
                                        lambda: int(q().get("persistent_size", 0))),
            "DeliveringSize": Attribute(LONG, "persistent size of messages that this queue is currently delivering "
                                              "to its consumers", lambda: int(q().get("delivering_size", 0))),
            "ScheduledSize": Attribute(LONG, "persistent size of scheduled messages in this queue", lambda: 0),
            "GroupBuckets": Attribute(INT, "number of group buckets", lambda: -1),
            "GroupCount": Attribute(INT, "number of groups", lambda: 0),
            "RingSize": Attribute(LONG, "the size of the ring", lambda: -1),
        }
        ops = [
            Operation("pause", [], "void", "Pauses the Queue", lambda: b.pause_queue(queue, False)),
            Operation("pause", [("persist", BOOL, "if true, the pause state will be persisted.")], "void",
                      "Pauses the Queue", lambda p: b.pause_queue(queue, bool(p))),
            Operation("resume", [], "void", "Resumes the queue", lambda: b.resume_queue(queue)),
            Operation("countMessages", [], LONG, "Returns the number of the messages in the queue",
                      lambda: b.count_messages(queue, None)),
            Operation("countMessages", [("filter", STR, "A message filter (can be empty)")], LONG,
                      "Returns the number of the messages in the queue matching the given filter",
                      lambda f: b.count_messages(queue, f or None)),
            Operation("countMessages", [("filter", STR, "A message filter (can be empty)"),
                                        ("groupByProperty", STR, "A property to group by")], STR,
                      "Returns the number of the messages in the queue matching the given filter, grouped by the "
                      "given property field", lambda f, g: self._count_grouped(queue, f, g)),
            Operation("removeMessages", [("filter", STR, "A message filter (can be empty)")], INT,
                      "Remove the messages corresponding to the given filter (and returns the number of removed "
                      "messages)", lambda f: b.remove_messages(queue, f or None)),
            Operation("removeMessages", [("flushLimit", INT, "Limit to flush transactions during the operation"),
                                         ("filter", STR, "A message filter (can be empty)")], INT,
                      "Remove the messages corresponding to the given filter (and returns the number of removed "
                      "messages)", lambda _lim, f: b.remove_messages(queue, f or None)),
            Operation("removeAllMessages", [], INT, "Remove all the messages from the Queue (and returns the number "
                                                    "of removed messages)", lambda: b.remove_messages(queue, None)),
            Operation("listMessages", [("filter", STR, "A message filter (can be empty)")], "[Ljava.util.Map;",
                      "List all the messages in the queue matching the given filter",
                      lambda f: b.browse_messages(queue, 10000) if not f else self._browse_filtered(queue, f)),
            Operation("browse", [], "[Ljavax.management.openmbean.CompositeData;", "Browse Messages",
                      lambda: b.browse_messages(queue, 200)),
        ]
        return MBean(self.queue_name(q()["address"], q()["routing_type"], queue), IMPL + "QueueControlImpl", a, ops)

    def _setting(self, address: str, attr: str) -> str | None:
        best = None
        for s in self.config.broker.address_settings:
            if _wildcard_regex(s.match).fullmatch(address) and getattr(s, attr) is not None:
                if best is None or len(s.match) > len(best.match):
                    best = s
        return getattr(best, attr) if best else None

    def _first_json(self, queue: str) -> str:
        msgs = self.broker.browse_messages(queue, 1)
        return json.dumps(msgs[:1] or [{}], separators=(",", ":"), default=str)

    def _count_grouped(self, queue: str, filter_: str, group_by: str) -> str:
        groups: dict[str, int] = {}
        for msg in self._browse_filtered(queue, filter_) if filter_ else self.broker.browse_messages(queue, 100000):
            key = str(msg.get("properties", {}).get(group_by, msg.get(group_by, "null")))
            groups[key] = groups.get(key, 0) + 1
        return json.dumps(groups, separators=(",", ":"))

    def _browse_filtered(self, queue: str, filter_: str) -> list[dict[str, Any]]:
        # The core evaluates filters in count/remove; browsing with a filter is approximated by equality tests.
        m = re.fullmatch(r"\s*(\w+)\s*=\s*'([^']*)'\s*", filter_)
        msgs = self.broker.browse_messages(queue, 100000)
        if not m:
            return msgs
        key, val = m.groups()
        return [x for x in msgs if str(x.get("properties", {}).get(key)) == val]

    # --- acceptor -------------------------------------------------------------------------------------------------
    def acceptor_mbean(self, name: str) -> MBean:
        b = self.broker
        info = _memo(lambda: b.acceptor_info(name))
        a = {
            "Name": Attribute(STR, "name of the acceptor", lambda: name),
            "FactoryClassName": Attribute(STR, "class name of the AcceptorFactory implementation used by this "
                                               "acceptor",
                                          lambda: info().get("factory_class_name", NETTY_ACCEPTOR)),
            "Parameters": Attribute(MAP, "parameters used to configure this acceptor",
                                    lambda: dict(info().get("parameters", {}))),
            "Started": Attribute(BOOL, "whether this component is started", lambda: bool(info()["started"])),
        }
        ops = [
            Operation("start", [], "void", "starts this component", lambda: b.start_acceptor(name)),
            Operation("stop", [], "void", "stops this component", lambda: b.stop_acceptor(name)),
            Operation("reload", [], "void", "Re-create the acceptor with the existing configuration values. Useful, "
                                            "for example, for reloading key/trust stores on acceptors which support "
                                            "SSL.", lambda: None),
        ]
        return MBean(self.acceptor_name(name), IMPL + "AcceptorControlImpl", a, ops)

    # --- broker connection (2.39+) --------------------------------------------------------------------------------
    def connection_mbean(self, name: str) -> MBean:
        b = self.broker

        def info() -> dict[str, Any]:
            for c in b.broker_connections():
                if c["name"] == name:
                    return c
            raise IllegalArgument(f"broker connection {name} not found")

        memo = _memo(info)
        a = {
            "Name": Attribute(STR, "name of the broker connection", lambda: name),
            "Uri": Attribute(STR, "the URI of the remote broker for this broker connection",
                             lambda: memo().get("uri")),
            "User": Attribute(STR, "the user this broker connection is using", lambda: memo().get("user")),
            "Protocol": Attribute(STR, "the wire protocol this broker connection is using",
                                  lambda: memo().get("protocol", "AMQP")),
            "RetryInterval": Attribute(LONG, "the retry interval configured for this broker connection",
                                       lambda: int(memo().get("retry_interval", 5000))),
            "ReconnectAttempts": Attribute(INT, "the number of reconnection attempts configured for this broker "
                                                "connection", lambda: int(memo().get("reconnect_attempts", -1))),
            "Started": Attribute(BOOL, "whether this component is started", lambda: bool(memo()["started"])),
            "Connected": Attribute(BOOL, "whether this broker connection is currently connected to the remote",
                                   lambda: bool(memo().get("connected"))),
        }
        ops = [
            Operation("start", [], "void", "starts this component", lambda: b.start_broker_connection(name)),
            Operation("stop", [], "void", "stops this component", lambda: b.stop_broker_connection(name)),
        ]
        return MBean(self.connection_name(name), IMPL + "BrokerConnectionControlImpl", a, ops)


__all__ = ["DOMAIN", "Attribute", "MBean", "ManagementModel", "Operation", "print_duration"]
