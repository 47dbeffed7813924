# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Site switches: activate or fence one site, and the swapover sequence, over the shared Jolokia client.

The swapover runs inside ONE module execution (quiesce -> drain gate -> activate) because every Ansible task
costs start-up time that clients would spend unable to send. Each phase is returned as an evidence ``phase``
record body, so the runbook writes what happened even when a gate fails.

Standard library only (plus the sibling module_utils); file writes are limited to broker.xml fences.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.continuity.artemis.plugins.module_utils import continuity_plugin as plugin
from ansible_collections.continuity.artemis.plugins.module_utils import gates
from ansible_collections.continuity.artemis.plugins.module_utils import jolokia as j
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on
from ansible_collections.continuity.artemis.plugins.module_utils import reconcile
from ansible_collections.continuity.artemis.plugins.module_utils import site_role
from ansible_collections.continuity.artemis.plugins.module_utils import site_state
from ansible_collections.continuity.artemis.plugins.module_utils import versions


class SwitchError(Exception):
    """A switch that could not be done or proven; ``phases`` holds what happened until then."""

    def __init__(self, message: str, phases: Optional[List[dict]] = None, state: Optional[dict] = None):
        super().__init__(message)
        self.phases = phases or []
        self.state = state or {}


#: How long a role read waits for a client acceptor the broker is recreating (:meth:`Site.settled_snapshot`):
#: twice Artemis's default configuration refresh period, so one refresh that starts just after the read fits.
ACCEPTOR_RECREATE_SECONDS = 10.0


class Site:
    """One site as a runbook sees it: its name, a :class:`site_state.SiteCollector`, the client acceptors
    that fence it, and (when the task runs on the broker host) the path of its broker.xml."""

    def __init__(self, name: str, collector: Any, client_acceptors: Sequence[str], broker_xml: Optional[str] = None):
        if not client_acceptors:
            raise ValueError("site %s: client_acceptors must name at least one acceptor" % name)
        self.name = name
        self.collector = collector
        self.client_acceptors = list(client_acceptors)
        self.broker_xml = broker_xml

    @property
    def client(self) -> j.JolokiaClient:
        return self.collector.client

    def broker(self) -> str:
        return self.collector.resolve_broker()

    def snapshot(self) -> dict:
        return self.collector.collect()

    def snapshot_or_unreachable(self) -> dict:
        return self.collector.collect_or_unreachable()

    def missing_acceptors(self, snapshot: dict) -> List[str]:
        """Client acceptors a reachable, serving-capable broker does not list (an HA backup standing by has none
        to list)."""
        if not snapshot.get("reachable", True) or site_role.is_standby(snapshot):
            return []
        return site_role.missing_acceptors(snapshot.get("acceptors") or {}, self.client_acceptors)

    def settled_snapshot(self, reachable_or_not: bool = False, **wait: Any) -> dict:
        """A snapshot to read the site's role from (:meth:`_settled`)."""
        return self._settled(self.snapshot_or_unreachable if reachable_or_not else self.snapshot,
                             self.missing_acceptors, **wait)

    def settled_acceptors(self, **wait: Any) -> Dict[str, Optional[bool]]:
        """``{acceptor: started}`` of a broker known to be reachable and serving-capable, read as
        :meth:`settled_snapshot` reads (one pattern read per try: cheaper than a snapshot)."""
        return self._settled(lambda: read_acceptors(self),
                             lambda states: site_role.missing_acceptors(states, self.client_acceptors), **wait)

    @staticmethod
    def _settled(take: Callable[[], Any], missing: Callable[[Any], List[str]],
                 timeout: float = ACCEPTOR_RECREATE_SECONDS, sleep: float = 0.2,
                 clock: Callable[[], float] = time.monotonic, sleeper: Callable[[float], None] = time.sleep) -> Any:
        """Artemis 2.43+ applies a changed acceptor in broker.xml by destroying it and creating it anew (at its
        periodic configuration refresh, every 5 s by default, or on ``reloadConfigurationFile()``), so a read in
        between finds a client acceptor missing: seen right after a fence was written. Such a read is taken again
        for up to ``timeout`` seconds; an acceptor still missing then is reported (``role_of`` names it) rather
        than guessed."""
        read = take()
        deadline = clock() + timeout
        while missing(read) and clock() < deadline:
            sleeper(sleep)
            read = take()
        return read


# ------------------------------------------------------------------------------------------ pure helpers
def acceptor_states(snapshot: dict) -> Dict[str, Optional[bool]]:
    return {name: a.get("started") for name, a in (snapshot.get("acceptors") or {}).items()}


def role_of(snapshot: dict, client_acceptors: Sequence[str]) -> str:
    """Role of a site from its snapshot; ``unreachable`` when the broker could not be read."""
    if not snapshot.get("reachable", True):
        return site_role.UNREACHABLE
    if site_role.is_standby(snapshot):
        return site_role.STANDBY
    return site_role.derive_role(acceptor_states(snapshot), client_acceptors)


def version_tuple(snapshot: dict) -> Optional[tuple]:
    try:
        return versions.parse_version(snapshot.get("version")).number
    except versions.VersionError:
        return None


def config_errors(status: Any) -> List[str]:
    """Errors reported in the broker's ``Status`` document (failed configuration reloads), as text."""
    found: List[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if "error" in str(key).lower() and value not in (None, "", [], {}, "0", 0):
                    found.append("%s%s: %s" % (path, key, value))
                else:
                    walk(value, "%s%s." % (path, key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, "%s%d." % (path, i))

    walk(status, "")
    return found


def drain_conditions(site_snap: dict, peer_snap: dict) -> Dict[str, Any]:
    """What proves a zero-loss switch: both mirrors connected and empty, no pending acks where the release
    can tell (2.40+), and equal per-queue counts (the only proof on every release: real Artemis drops a
    mirrored ack it cannot apply and PendingMirrorAcks returns to 0 while the sites differ)."""
    conds: Dict[str, Any] = {"connected": True, "max_backlog": 0, "queues_equal": True}
    if all((s.get("features") or {}).get("pending_mirror_acks") for s in (site_snap, peer_snap)):
        conds["max_pending_acks"] = 0
    return conds


def phase(runbook: str, name: str, start_ts: float, end_ts: Optional[float], decision: str,
          reason: Optional[str] = None, roles_before: Optional[dict] = None, roles_after: Optional[dict] = None,
          gate_samples: Optional[list] = None, data: Optional[dict] = None) -> dict:
    """The body of an evidence ``phase`` record (``evidence.phase_record`` takes these keys)."""
    rec = {"runbook": runbook, "phase": name, "start_ts": start_ts, "end_ts": end_ts, "decision": decision,
           "reason": reason}
    for key, value in (("roles_before", roles_before), ("roles_after", roles_after),
                       ("gate_samples", gate_samples), ("data", data)):
        if value is not None:
            rec[key] = value
    return rec


# ------------------------------------------------------------------------------------------ broker.xml fence
def persist_fence(path: str, acceptors: Sequence[str], auto_start: bool, check_mode: bool = False) -> dict:
    """Write ``autoStart`` of the client acceptors into broker.xml (atomically, keeping owner and mode).

    Returns ``{"changed", "acceptors", "before", "after", "path"}`` (before/after for ``--diff``).
    """
    with open(path, "r", encoding="utf-8") as fh:
        before = fh.read()
    after, changed = site_role.set_acceptors_auto_start(before, list(acceptors), auto_start)
    if changed and not check_mode:
        st = os.stat(path)
        fd, tmp = tempfile.mkstemp(prefix=".broker.xml.", dir=os.path.dirname(os.path.abspath(path)))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(after)
            os.chmod(tmp, st.st_mode & 0o7777)
            if hasattr(os, "chown"):
                try:
                    os.chown(tmp, st.st_uid, st.st_gid)
                except PermissionError:
                    pass  # not root: the file keeps our ownership, as any edit by this user would
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return {"changed": bool(changed), "acceptors": changed, "before": before, "after": after, "path": path}


# ------------------------------------------------------------------------------------------ acceptor I/O
def set_acceptors(site: Site, names: Sequence[str], started: bool) -> None:
    """start()/stop() the named acceptors in ONE bulk request; raises the first item's typed error."""
    if not names:
        return
    op = "start()" if started else "stop()"
    broker = site.broker()
    results = site.client.bulk([j.exec_request(on.acceptor(broker, n), op) for n in names])
    for res in results:
        res.raise_for_status()


def read_acceptors(site: Site) -> Dict[str, Optional[bool]]:
    """``{acceptor: started}`` of a site (:func:`acceptors_started`)."""
    return acceptors_started(site.client, site.broker())


def acceptors_started(client: j.JolokiaClient, broker: str) -> Dict[str, Optional[bool]]:
    """``{acceptor: started}`` of a broker with one pattern read (cheaper than a full snapshot while polling)."""
    return {name: attrs.get("Started") for name, attrs in _acceptor_attributes(client, broker, ["Started"]).items()}


def acceptors_applied(site: Site) -> Tuple[Dict[str, Optional[bool]], Dict[str, bool]]:
    """``({acceptor: started}, {acceptor: opened by the configuration its broker applied last})`` in one read.

    An acceptor's ``Parameters`` are those it was created with: the broker.xml its broker applied last (at start,
    on a reload, or by its own periodic file scan), which is what a reload compares the file with. ``autoStart``
    absent means true."""
    attrs = _acceptor_attributes(site.client, site.broker(), ["Started", "Parameters"])
    started = {name: a.get("Started") for name, a in attrs.items()}
    applied_open = {name: str((a.get("Parameters") or {}).get("autoStart", "true")).lower() != "false"
                    for name, a in attrs.items()}
    return started, applied_open


def _acceptor_attributes(client: j.JolokiaClient, broker: str, names: List[str]) -> Dict[str, dict]:
    value = client.read(on.all_acceptors(broker), names)
    out: Dict[str, dict] = {}
    for mbean, attrs in (value or {}).items():
        _domain, props = on.parse(mbean)
        out[props.get("name", mbean)] = attrs or {}
    return out


def _bulk_exec(site: Site, calls: Sequence[tuple]) -> None:
    """Operations on many MBeans in ONE request; raises the first item's typed error."""
    if calls:
        for res in site.client.bulk([j.exec_request(mbean, op) for mbean, op in calls]):
            res.raise_for_status()


#: ``listQueues`` options selecting only the queues with deliveries not yet acknowledged: the broker filters,
#: so a settle sample stays one small answer however many queues the site has. ``deliveringCount`` is the field
#: name every release from 2.30 to 2.44 accepts (2.44 also takes ``DELIVERING_COUNT``, older ones ignore it).
IN_FLIGHT_OPTIONS = json.dumps({"field": "deliveringCount", "operation": "GREATER_THAN", "value": "0",
                                "sortField": "name", "sortOrder": "asc"})


def in_flight(site: Site, queue_names: Sequence[str]) -> int:
    """Deliveries handed to consumers and not acknowledged yet, summed over ``queue_names`` (one request)."""
    listed, _total = site_state.queues_from_list(
        site.client.request(site_state.list_queues_request(site.broker(), IN_FLIGHT_OPTIONS)))
    wanted = set(queue_names)
    return sum(q.get("delivering_count") or 0 for name, q in listed.items() if name in wanted)


def quiesce(site: Site, snapshot: dict, settle_timeout: float = 5.0, settle_sleep: float = 0.02,
            clock: Callable[[], float] = time.monotonic, sleeper: Callable[[float], None] = time.sleep) -> dict:
    """Let deliveries in flight be acknowledged before the fence, so no acknowledgement is cut in half.

    The client queues are paused (no new deliveries; consumers acknowledge what they already hold), then it
    waits, at most ``settle_timeout``, until no message is being delivered. A delivery still unacknowledged
    at the fence stays on both sites and is delivered again by the other site.

    Producers are not stopped here: an AMQP producer holds credit (``amqpCredits``, 1000 by default), so an
    address ``block()`` would not stop it within seconds, and real Artemis shows no readable trace of a block.
    Sends in flight at the fence are "in doubt" for the client, which resends them.
    Call :func:`release` after the fence to resume the queues this paused.
    """
    broker = site.broker()
    paused, names = [], []
    for name, q in sorted(site_state.client_queues(snapshot).items()):
        if q.get("paused") or not q.get("address"):
            continue  # paused by someone else: leave it as it is
        paused.append(q.get("mbean") or on.queue(broker, q["address"], name, q.get("routing_type") or "anycast"))
        names.append(name)
    start = clock()
    state = {"paused": paused, "settled": False, "outstanding_deliveries": None, "settle_seconds": None,
             "pause_seconds": None, "samples": 0}
    _bulk_exec(site, [(m, "pause()") for m in paused])
    state["pause_seconds"] = clock() - start
    while True:
        state["samples"] += 1
        state["outstanding_deliveries"] = in_flight(site, names)
        if state["outstanding_deliveries"] == 0:
            state["settled"] = True
            break
        if clock() - start >= settle_timeout:
            break
        sleeper(settle_sleep)
    state["settle_seconds"] = clock() - start
    return state


def release(site: Site, quiesced: Optional[dict], also: Sequence[str] = ()) -> None:
    """Undo :func:`quiesce`: resume the queues it paused, and the queue MBeans in ``also``."""
    ours = list(quiesced["paused"]) if quiesced else []
    mbeans = ours + [m for m in also if m not in ours]
    _bulk_exec(site, [(m, "resume()") for m in mbeans])


def left_paused(site: Site, snapshot: dict) -> Dict[str, str]:
    """``{queue name: MBean}`` of the client queues paused in ``snapshot``.

    A site about to become passive, or passive and about to become active, keeps no paused client queue: a pause
    there was left by a swapover interrupted between its quiesce and its resume (or set by hand on the site that
    no longer serves), and it would silently hold messages from consumers the day that site serves again
    (issue 16 item 5). Pauses are not mirrored, so none of them follows clients to the other site anyway."""
    broker = site.broker()
    queues = site_state.client_queues(snapshot)
    out = {}
    for name in site_state.paused_client_queues(snapshot) or []:
        q = queues[name]
        routing = q.get("routing_type") or "anycast"
        out[name] = q.get("mbean") or on.queue(broker, q.get("address") or name, name, routing)
    return out


def set_guard(site: Site, role: str, snapshot: Optional[dict] = None, check_mode: bool = False) -> dict:
    """Give the continuity plugin's passive-site guard ``role`` (a no-op without the plugin).

    The role comes from ``snapshot`` when it read the plugin; otherwise it is read first, so a plugin whose read
    failed in the snapshot is never mistaken for an absent one (a guard left passive refuses every client).
    """
    current = (snapshot or {}).get("continuity_plugin") or {}
    if current.get("site_role") in plugin.ROLES:
        return plugin.apply_role(site.client, site.broker(), role, current["site_role"], check_mode)
    return plugin.set_role(site.client, site.broker(), role, check_mode)


def stop_clients(site: Site, started_now: Dict[str, Optional[bool]], check_mode: bool = False) -> List[str]:
    """Stop a site's started client acceptors (ONE request): its clients are disconnected, the failure every
    AMQP/JMS client fails over on. Returns the names stopped."""
    to_stop = [n for n in site.client_acceptors if started_now.get(n)]
    if to_stop and not check_mode:
        set_acceptors(site, to_stop, False)
    return to_stop


def seal(site: Site, snapshot: Optional[dict] = None, check_mode: bool = False) -> dict:
    """Make a fenced site stay passive: the continuity plugin's guard (when installed) refuses clients that reach
    it through an acceptor left open (the mirror's), and ``autoStart=false`` in broker.xml survives a restart."""
    guard = set_guard(site, plugin.PASSIVE, snapshot, check_mode)
    fence = persist_fence(site.broker_xml, site.client_acceptors, False, check_mode) if site.broker_xml else None
    return {"guard": guard, "fence": fence, "changed": guard["changed"] or bool(fence and fence["changed"])}


def deactivate(site: Site, started_now: Dict[str, Optional[bool]], check_mode: bool = False,
               snapshot: Optional[dict] = None) -> dict:
    """Fence a site: :func:`stop_clients` then :func:`seal`.

    The acceptors first: a guard turned passive first would refuse the connected clients' sends one by one
    instead of disconnecting them (seen: a client library crashed on it).
    """
    to_stop = stop_clients(site, started_now, check_mode)
    sealed = seal(site, snapshot, check_mode)
    return {"stopped": to_stop, "fence": sealed["fence"], "guard": sealed["guard"],
            "changed": bool(to_stop) or sealed["changed"]}


def lift_persisted_fence(site: Site, snapshot: dict) -> Optional[dict]:
    """An active site whose broker.xml still fences its client acceptors comes back passive after a restart.
    Before 2.43 the activation opens the acceptors with start() and lifts the file after it, so a run killed in
    between leaves exactly that; a file change does not touch the running acceptors there, so the re-run lifts
    it. From 2.43 the file is lifted before the reload that opens them (and a running broker applies its file
    itself), so nothing is written there."""
    if not site.broker_xml or site_role.activation_method(version_tuple(snapshot)) != "start":
        return None
    return persist_fence(site.broker_xml, site.client_acceptors, True)


def activate(site: Site, started_now: Dict[str, Optional[bool]], version: Optional[tuple],
             wait_timeout: float = 30.0, wait_sleep: float = 0.05, check_mode: bool = False,
             clock: Callable[[], float] = time.monotonic, sleeper: Callable[[float], None] = time.sleep,
             snapshot: Optional[dict] = None) -> dict:
    """Open a site's client acceptors so that the running state and broker.xml agree.

    Artemis 2.43+ recreates a changed acceptor on config reload, so there the fence is lifted in broker.xml
    and ``reloadConfigurationFile()`` starts the acceptors (a later file change would otherwise bounce the
    clients that just connected). Before 2.43, ``start()`` now and the file for the next restart.
    The continuity plugin's guard (when installed) turns active first, so the first clients are not refused.
    """
    to_start = [n for n in site.client_acceptors if not started_now.get(n)]
    method = site_role.activation_method(version)
    if method == "reload" and not site.broker_xml:
        method = "start"  # no file access here: start() now; the fence in the file stays until a deploy
    result: Dict[str, Any] = {"started": to_start, "method": method, "fence": None, "changed": False}
    result["guard"] = set_guard(site, plugin.ACTIVE, snapshot, check_mode)
    if check_mode:
        result["changed"] = bool(to_start) or result["guard"]["changed"]
        if site.broker_xml:
            result["fence"] = persist_fence(site.broker_xml, site.client_acceptors, True, check_mode=True)
            result["changed"] = result["changed"] or result["fence"]["changed"]
        return result
    if method == "reload":
        result["fence"] = persist_fence(site.broker_xml, site.client_acceptors, True)
        if to_start and not result["fence"]["changed"]:
            # the file already opens them (a fence never persisted, e.g. a rollback): a reload would not
            # recreate an unchanged acceptor, and start() now cannot be undone by a later reload
            set_acceptors(site, to_start, True)
            result["method"] = "start"
        elif to_start:
            site.client.exec(on.broker(site.broker()), "reloadConfigurationFile()")
            deadline = clock() + wait_timeout
            while True:
                state, applied_open = acceptors_applied(site)
                closed = [n for n in site.client_acceptors if not state.get(n)]
                # A reload recreates only an acceptor whose broker.xml entry differs from the one its broker
                # applied last. One applied open stays stopped: its fence was written and lifted again before the
                # broker's periodic file scan read it (switches seconds apart, a rollback; measured on 2.44: a
                # 30 s outage). The file and the broker agree, so start() opens it without a later bounce.
                unchanged = [n for n in closed if applied_open.get(n)]
                if unchanged:
                    set_acceptors(site, unchanged, True)
                    result["method"] = "reload+start"
                    closed = [n for n in closed if n not in unchanged]
                if not closed:
                    break
                if clock() >= deadline:
                    # The reload did not open them: open them directly rather than leave no site serving.
                    set_acceptors(site, closed, True)
                    result["method"] = "reload+start"
                    break
                sleeper(wait_sleep)
    else:
        set_acceptors(site, to_start, True)
        if site.broker_xml:
            result["fence"] = persist_fence(site.broker_xml, site.client_acceptors, True)
    result["changed"] = (bool(to_start) or bool(result["fence"] and result["fence"]["changed"])
                         or result["guard"]["changed"])
    return result


def read_both(first: Site, second: Site) -> tuple:
    """Snapshots of two sites taken at the same time (one round trip instead of two)."""
    return site_state.read_pair(first.snapshot, second.snapshot)


# ------------------------------------------------------------------------------------------ swapover
def swapover(old: Site, new: Site, drain_timeout: float = 120.0, wait_sleep: float = 0.2,
             stable_samples: int = 2, preflight_max_backlog: Optional[int] = None, queue_tolerance: int = 0,
             rollback: bool = True, check_mode: bool = False, activation_timeout: float = 30.0,
             settle_timeout: float = 5.0, address_filter: Optional[str] = None, confirm_sleep: float = 0.05,
             mirror_extras: str = "refuse", quiet_seconds: float = 3.0,
             wall: Callable[[], float] = time.time, clock: Callable[[], float] = time.monotonic,
             sleeper: Callable[[float], None] = time.sleep) -> dict:
    """Planned switch of the active role from ``old`` to ``new``: consistency first.

    1. preflight: both reachable, ``old`` active and ``new`` passive (or an interrupted swapover to resume),
       mirrors connected both ways, backlog under ``preflight_max_backlog``, no consumers on ``new``, no
       configuration errors in either broker's Status;
    2. quiesce: pause ``old``'s client queues until the deliveries in flight are acknowledged (at most
       ``settle_timeout``), then stop its client acceptors (clients are disconnected; the mirror acceptor stays
       up);
    3. drain gate: both backlogs 0, pending acks 0 (2.40+), per-queue counts equal (only queues on addresses
       the mirror's ``address_filter`` mirrors), for ``stable_samples``
       consecutive samples within ``drain_timeout`` (``wait_sleep`` apart while draining, ``confirm_sleep`` after
       a sample that passed); on failure ``old`` is re-activated (rollback) and
       :class:`SwitchError` is raised: nothing was lost, clients return to ``old``. When only the counts differ
       for ``quiet_seconds`` while both sites are quiet (connected, backlog 0, no pending acks), waiting cannot
       help: the differing queues are compared message by message (:mod:`reconcile`) and ``mirror_extras``
       decides about copies only ``new`` holds (``refuse``; ``remove`` those that came from ``old``; ``keep``);
       a message only ``old`` holds always refuses;
    4. persist ``old``'s fence in its broker.xml when this host has it (a write that fails rolls back), then
       activate ``new`` (the point of no return);
    5. seal ``old`` (plugin guard passive, fence persisted) and resume its paused queues, then one look at the
       mirrors (``mirrors_connected_after``): outside the client outage.

    Re-running after an interruption converges: a swapover already done returns ``changed`` False; one
    stopped after the quiesce resumes at the drain gate.
    """
    runbook = "swapover"
    phases: List[dict] = []
    t0 = wall()
    snap_old = old.settled_snapshot(clock=clock, sleeper=sleeper)
    snap_new = new.settled_snapshot(clock=clock, sleeper=sleeper)
    role_old, role_new = role_of(snap_old, old.client_acceptors), role_of(snap_new, new.client_acceptors)
    roles_before = {old.name: role_old, new.name: role_new}
    state = {"roles_before": roles_before, "versions": {old.name: snap_old.get("version"),
                                                        new.name: snap_new.get("version")}}

    if snap_old.get("node_id") and snap_old.get("node_id") == snap_new.get("node_id"):
        reason = ("%s and %s are the same broker (NodeID %s, reached at %s and %s): check the sites' URLs; nothing "
                  "was changed" % (old.name, new.name, snap_old["node_id"], snap_old.get("url"), snap_new.get("url")))
        phases.append(phase(runbook, "preflight", t0, wall(), "fail", reason, roles_before))
        raise SwitchError(reason, phases, state)
    if role_old == site_role.PASSIVE and role_new == site_role.ACTIVE:
        # A re-run after an interruption past the activation finishes what the switch leaves behind: the old site
        # sealed (guard, autoStart=false) and no client queue left paused on it (issue 16 items 5 and 6).
        changed, sealed, resumed_left, lifted = False, None, [], None
        if not check_mode:
            paused_old = left_paused(old, snap_old)
            sealed = seal(old, snap_old)
            release(old, None, list(paused_old.values()))
            resumed_left = sorted(paused_old)
            lifted = lift_persisted_fence(new, snap_new)
            changed = sealed["changed"] or bool(resumed_left) or bool(lifted and lifted["changed"])
        phases.append(phase(runbook, "preflight", t0, wall(), "skipped",
                            "already done: %s is active and %s passive" % (new.name, old.name)
                            + ("; sealed %s" % old.name if sealed and sealed["changed"] else "")
                            + ("; lifted the fence left in %s's broker.xml" % new.name
                               if lifted and lifted["changed"] else "")
                            + ("; resumed the client queues left paused on %s: %s"
                               % (old.name, ", ".join(resumed_left)) if resumed_left else ""),
                            roles_before, roles_before, data={"resumed_left_paused": resumed_left}))
        return {"changed": changed, "phases": phases, "roles_before": roles_before, "roles_after": roles_before,
                "client_outage_seconds": None, "resumed": False,
                "old_fence_persisted": bool(sealed and sealed["fence"] is not None),
                "mirrors_connected_after": None, **state}
    if role_new in (site_role.ACTIVE, site_role.MIXED) and role_old in (site_role.ACTIVE, site_role.MIXED):
        reason = ("both sites serve clients (%s %s, %s %s): fence one of them with the site_role module before "
                  "a swapover" % (old.name, role_old, new.name, role_new))
        phases.append(phase(runbook, "preflight", t0, wall(), "fail", reason, roles_before))
        raise SwitchError(reason, phases, state)
    if role_new == site_role.MIXED:
        reason = ("%s is half open (%s): finish or undo that activation first (site_role state=active|passive)"
                  % (new.name, acceptor_states(snap_new)))
        phases.append(phase(runbook, "preflight", t0, wall(), "fail", reason, roles_before))
        raise SwitchError(reason, phases, state)
    resumed = role_old in (site_role.PASSIVE, site_role.MIXED)

    # 1. preflight (a resumed swapover has already fenced the old site: the remaining gates still apply)
    pre_conds: Dict[str, Any] = {"connected": True, "no_consumers_on": {"site": "peer"}}
    if preflight_max_backlog is not None and not resumed:
        pre_conds["max_backlog"] = preflight_max_backlog
    ev = gates.evaluate(pre_conds, snap_old, snap_new, direction="both", queue_tolerance=queue_tolerance,
                        address_filter=address_filter)
    problems = ["%s: %s" % (n, ev["conditions"][n]["reason"]) for n in ev["failed"]]
    for snap, site in ((snap_old, old), (snap_new, new)):
        errs = config_errors(snap.get("status"))
        if errs:
            problems.append("config status of %s reports errors: %s" % (site.name, "; ".join(errs[:5])))
    preflight_sample = gates.sample_record(ev, wall(), 0.0, 1 if ev["ok"] else 0)
    if problems:
        reason = "preflight failed, nothing was changed: " + "; ".join(problems)
        phases.append(phase(runbook, "preflight", t0, wall(), "fail", reason, roles_before,
                            gate_samples=[preflight_sample]))
        raise SwitchError(reason, phases, state)
    phases.append(phase(runbook, "preflight", t0, wall(), "pass",
                        "resuming an interrupted swapover: %s is already fenced" % old.name if resumed else None,
                        roles_before, gate_samples=[preflight_sample]))
    if check_mode:
        return {"changed": True, "phases": phases, "roles_before": roles_before,
                "roles_after": {old.name: site_role.PASSIVE, new.name: site_role.ACTIVE},
                "client_outage_seconds": None, "resumed": resumed, "old_fence_persisted": False,
                "mirrors_connected_after": None, **state}

    # Client queues left paused on either site by an interrupted swapover (issue 16 item 5): the new site's are
    # resumed now, while it is still passive (no client sees it); the old site's once it is passive, after the
    # activation -- on a rollback they stay as they were.
    left_new, left_old = left_paused(new, snap_new), left_paused(old, snap_old)
    try:
        release(new, None, list(left_new.values()))
    except j.JolokiaError as exc:
        reason = "could not resume the client queues left paused on %s (%s): %s; nothing was switched" % (
            new.name, ", ".join(sorted(left_new)), exc)
        phases.append(phase(runbook, "preflight", t0, wall(), "fail", reason, roles_before))
        raise SwitchError(reason, phases, state) from exc
    state["resumed_left_paused"] = {new.name: sorted(left_new), old.name: []}

    # 2. quiesce: only what clients wait for is done between here and the activation (pause, settle, stop the
    # acceptors); the old site is sealed (guard, persisted fence) and its queues resumed after the activation.
    t_quiesce = wall()
    quiesced = None

    def resume_old(why: str, left: Sequence[str] = ()) -> None:
        """Resume the queues the quiesce paused, and ``left`` (best effort: the site is fenced or failed anyway)."""
        t = clock()
        try:
            release(old, quiesced, left)
        except j.JolokiaError as exc:
            phases.append(phase(runbook, "release", wall(), wall(), "fail",
                                "could not resume the paused queues of %s (%s): %s" % (old.name, why, exc)))
            return
        if quiesced:
            timings["release_seconds"] = clock() - t

    timings: Dict[str, Optional[float]] = {"stop_seconds": None, "release_seconds": None}
    try:
        if not resumed:
            quiesced = quiesce(old, snap_old, settle_timeout, clock=clock, sleeper=sleeper)
        t_stop = clock()
        stopped = stop_clients(old, acceptor_states(snap_old))
        timings["stop_seconds"] = clock() - t_stop
    except j.JolokiaError as exc:
        resume_old("quiesce failed")
        reason = ("quiesce of %s failed: %s; it may be partly fenced (client acceptors stopped, or client queues "
                  "left paused: status.yml shows paused_queues): run the swapover again (it resumes) or "
                  "site_role state=active on %s to undo" % (old.name, exc, old.name))
        phases.append(phase(runbook, "quiesce", t_quiesce, wall(), "fail", reason))
        raise SwitchError(reason, phases, state) from exc
    phases.append(phase(runbook, "quiesce", t_quiesce, wall(), "done",
                        data={"stopped_acceptors": stopped,
                              "settled": quiesced["settled"] if quiesced else None,
                              "outstanding_deliveries": quiesced["outstanding_deliveries"] if quiesced else None,
                              "settle_seconds": quiesced["settle_seconds"] if quiesced else None,
                              "pause_seconds": quiesced["pause_seconds"] if quiesced else None,
                              "settle_samples": quiesced["samples"] if quiesced else 0,
                              "paused_queues": len(quiesced["paused"]) if quiesced else 0,
                              "stop_seconds": timings["stop_seconds"]}))

    # 3. drain gate: both sites are read at the same time, so a sample costs one round trip, not two
    t_drain, t_drain_mono = wall(), clock()
    conds = drain_conditions(snap_old, snap_new)

    def take():
        return read_both(old, new)

    last_passed = [False]

    def judge(sample, previous):
        ev = gates.evaluate(conds, sample[0], sample[1], previous[0] if previous else None,
                            previous[1] if previous else None, direction="both",
                            queue_tolerance=queue_tolerance, address_filter=address_filter)
        last_passed[0] = bool(ev["ok"])
        return ev

    def pace(seconds: float) -> None:
        # While draining, sample every wait_sleep; a sample that passed is confirmed sooner (clients are waiting),
        # by a sample that is still a distinct, later read of both sites.
        sleeper(min(seconds, confirm_sleep) if last_passed[0] else seconds)

    def settle_extras(waited: dict) -> dict:
        """The queues whose counts differ on quiet sites, message by message; ``mirror_extras`` decides (a
        ``reconcile`` phase records what was found and done). Returns the gate's outcome after that."""
        t_rec = wall()
        snaps = read_both(old, new)
        cmp = site_state.compare_sites(snaps[0], snaps[1], tolerance=queue_tolerance, address_filter=address_filter)
        names = [d["queue"] for d in cmp.diffs]
        found = reconcile.queue_differences(old.client, snaps[0], new.client, snaps[1], names)
        decision = reconcile.decide(found, mirror_extras, old.name, new.name)
        data: Dict[str, Any] = {"policy": mirror_extras, "queues": reconcile.evidence(found), "removed": {},
                                "kept": decision["kept"], "why_compared": waited["stopped_early"]}
        for name, ids in decision["remove"].items():
            data["removed"][name] = reconcile.remove(new.client, reconcile.queue_mbean(snaps[1], name), ids)
        phases.append(phase(runbook, "reconcile", t_rec, wall(), "pass" if decision["ok"] else "fail",
                            decision["reason"], gate_samples=waited["samples"][-3:], data=data))
        if not decision["ok"]:
            return dict(waited, reason="%s; %s" % (waited["reason"], decision["reason"]))
        # the gate once more: with the extras removed the counts are equal; kept ones are allowed exactly
        allowed = {name: len(d["only_new_from_old"]) + len(d["only_new_other"]) for name, d in found.items()}
        if mirror_extras == "remove":
            allowed = {}

        def judge_again(sample, previous):
            ev = judge(sample, previous)
            if "queues_equal" in ev["failed"] and allowed:
                now_cmp = site_state.compare_sites(sample[0], sample[1], tolerance=queue_tolerance,
                                                   address_filter=address_filter)
                if all(d["delta"] is not None and -d["delta"] == allowed.get(d["queue"]) for d in now_cmp.diffs):
                    ev["conditions"]["queues_equal"] = dict(ev["conditions"]["queues_equal"], ok=True,
                                                            reason="kept: %s" % allowed)
                    ev["failed"] = [n for n in ev["failed"] if n != "queues_equal"]
                    ev["ok"] = not ev["failed"]
                    last_passed[0] = ev["ok"]
            return ev

        again = gates.wait_until(take, judge_again, max(30.0, drain_timeout - waited["elapsed"]), wait_sleep,
                                 stable_samples, clock=clock, wall=wall, sleeper=pace)
        again["samples"] = waited["samples"] + again["samples"]
        again["elapsed"] = waited["elapsed"] + again["elapsed"]
        return again

    quiet_since: List[Optional[float]] = [None]
    quiet_diffs: List[Any] = [None]

    def only_counts_differ(ev: dict, _elapsed: float) -> Optional[str]:
        # connected, backlog 0 and (2.40+) no pending acks both ways: the mirror has nothing left to carry, so
        # counts that still differ, unchanged, for quiet_seconds will not become equal by waiting. Unchanged: an
        # ack still being applied on the target moves a count, and before 2.40 nothing else shows it.
        if ev["failed"] != ["queues_equal"]:
            quiet_since[0] = None
            return None
        diffs = [(d["queue"], d["local"], d["peer"])
                 for d in (ev["conditions"]["queues_equal"].get("value") or {}).get("diffs") or []]
        now = clock()
        if quiet_since[0] is None or diffs != quiet_diffs[0]:
            quiet_since[0], quiet_diffs[0] = now, diffs
        if now - quiet_since[0] < quiet_seconds:
            return None
        return "both sites quiet for %.1f s and the same queue counts still differ" % (now - quiet_since[0])

    try:
        waited = gates.wait_until(take, judge, drain_timeout, wait_sleep, stable_samples, clock=clock, wall=wall,
                                  sleeper=pace, stop_early=only_counts_differ)
        if waited.get("stopped_early"):
            waited = settle_extras(waited)
    except (j.JolokiaError, ValueError) as exc:
        waited = {"ok": False, "samples": [], "reason": "a site could not be read during the drain: %s" % exc,
                  "elapsed": clock() - t_drain_mono, "failed": ["reachable"]}
    notes = [] if "max_pending_acks" in conds else [
        "PendingMirrorAcks is not available on these releases (needs %s+): the gate relies on equal queue counts"
        % versions.since("pending_mirror_acks")]

    def roll_back(reason: str, file_usable: bool = True) -> None:
        """Nothing was switched: re-activate the old site (unless rollback is off) and raise SwitchError.
        ``file_usable`` False: its broker.xml could not be written, so the acceptors are started directly."""
        if not rollback:
            raise SwitchError(reason + "; rollback disabled: %s stays fenced and NO site serves clients" % old.name,
                              phases, state)
        t_rb = wall()
        target = old if file_usable else Site(old.name, old.collector, old.client_acceptors)
        try:
            undone = activate(target, read_acceptors(old), version_tuple(snap_old), activation_timeout,
                              clock=clock, sleeper=sleeper)  # no snapshot: the guard's role is read now
        except Exception as exc:  # the operator must know no site serves now
            phases.append(phase(runbook, "rollback", t_rb, wall(), "fail", "rollback of %s failed: %s"
                                % (old.name, exc)))
            raise SwitchError("%s; ROLLBACK FAILED, no site serves clients: %s" % (reason, exc), phases,
                              state) from exc
        roles_rb = {old.name: site_role.ACTIVE, new.name: site_role.PASSIVE}
        phases.append(phase(runbook, "rollback", t_rb, wall(), "rollback",
                            "%s re-activated; nothing was switched" % old.name, roles_after=roles_rb,
                            data={"method": undone["method"]}))
        raise SwitchError(reason + "; rolled back: %s is active again" % old.name, phases,
                          dict(state, roles_after=roles_rb))

    if not waited["ok"]:
        reason = "drain gate failed: %s" % waited["reason"]
        phases.append(phase(runbook, "drain", t_drain, wall(), "fail", reason, gate_samples=waited["samples"],
                            data={"conditions": conds, "notes": notes}))
        resume_old("drain gate failed")
        roll_back(reason)
    phases.append(phase(runbook, "drain", t_drain, wall(), "pass", gate_samples=waited["samples"],
                        data={"conditions": conds, "notes": notes, "elapsed": waited["elapsed"]}))

    # 4. activate (point of no return). The old site's fence goes into its broker.xml first (a file write, when
    # this host has it): a controller killed at any instant after the activation leaves an old site that comes
    # back passive if its broker restarts (issue 16 item 6). Its guard is sealed after the activation.
    t_act = wall()
    fence_first = None
    try:
        if old.broker_xml:
            fence_first = persist_fence(old.broker_xml, old.client_acceptors, False)
    except (OSError, ValueError) as exc:
        reason = ("the fence of %s could not be written to %s, so a restart would make it serve next to %s: %s"
                  % (old.name, old.broker_xml, new.name, exc))
        phases.append(phase(runbook, "activate", t_act, wall(), "fail", reason))
        resume_old("the old site's fence could not be persisted")
        roll_back(reason, file_usable=False)
    try:
        opened = activate(new, acceptor_states(snap_new), version_tuple(snap_new), activation_timeout,
                          clock=clock, sleeper=sleeper, snapshot=snap_new)
    except j.JolokiaError as exc:
        resume_old("activation failed")
        reason = ("activation of %s failed after the drain gate passed: %s; NO SITE SERVES CLIENTS: run the "
                  "swapover again (it resumes at the drain gate) or site_role state=active on %s"
                  % (new.name, exc, new.name))
        phases.append(phase(runbook, "activate", t_act, wall(), "fail", reason))
        raise SwitchError(reason, phases, state) from exc
    t_active = wall()
    roles_after = {old.name: site_role.PASSIVE, new.name: site_role.ACTIVE}
    phases.append(phase(runbook, "activate", t_act, t_active, "done", roles_before=roles_before,
                        roles_after=roles_after,
                        data={"method": opened["method"], "started_acceptors": opened["started"],
                              "guard": opened["guard"],
                              "old_fence_written_first": bool(fence_first and fence_first["changed"]),
                              "client_outage_seconds": t_active - t_quiesce}))

    # 5. seal the old site (clients are served again meanwhile) and resume its paused queues
    t_seal = wall()
    sealed = None
    try:
        sealed = seal(old, snap_old)
    except (j.JolokiaError, OSError) as exc:
        # the switch is done and the old site's acceptors are stopped; the runbook persists the fence on the old
        # site's host when old_fence_persisted is false
        phases.append(phase(runbook, "seal", t_seal, wall(), "fail",
                            "%s is fenced (acceptors stopped) but not sealed: %s" % (old.name, exc)))
    finally:
        resume_old("after the switch", list(left_old.values()))
        state["resumed_left_paused"][old.name] = sorted(left_old)
    if sealed is not None:
        phases.append(phase(runbook, "seal", t_seal, wall(), "done",
                            data={"guard": sealed["guard"],
                                  "fence_written": bool(sealed["fence"] and sealed["fence"]["changed"]),
                                  "release_seconds": timings["release_seconds"]}))

    # 6. one look at the mirrors after the switch (both ways connected?): when they are, the runbook's
    # mirrors-connected post-gate is already proven and need not start another module to wait for it
    t_look = wall()
    try:
        after = read_both(new, old)
        ev = gates.evaluate({"connected": True}, after[0], after[1], direction="both")
        look = gates.sample_record(ev, wall(), 0.0, 1 if ev["ok"] else 0)
        connected_after = bool(ev["ok"])
        reason = None if ev["ok"] else ev["conditions"]["connected"]["reason"]
    except j.JolokiaError as exc:
        look, connected_after, reason = None, False, "could not read the sites: %s" % exc
    phases.append(phase(runbook, "mirrors_after", t_look, wall(), "pass" if connected_after else "fail", reason,
                        gate_samples=[look] if look else None))
    return {"changed": True, "phases": phases, "roles_before": roles_before, "roles_after": roles_after,
            "client_outage_seconds": (t_active - t_quiesce) if not resumed else None, "resumed": resumed,
            "old_fence_persisted": bool(sealed and sealed["fence"] is not None),
            "mirrors_connected_after": connected_after, **state}
