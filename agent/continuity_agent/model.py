"""The agent's pure sampling logic: site snapshots in, one :class:`Cycle` (everything the metrics, the evidence
and last-known.json show) out. No I/O here; the lag/RPO/RTO arithmetic is the shared one
(``site_state.assess_mirrors`` -> ``lag.assess``), this module only keeps the state across cycles that a
single call cannot know (previous snapshot for rates, when a mirror went down, the last known values of a site
that stopped answering) and applies the role and passive-consumer rules and the shared SLA rule (``sla``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.continuity.artemis.plugins.module_utils import site_role, site_state, sla
from continuity_agent.config import AgentConfig, SlaSettings

UNKNOWN_ROLE = "unknown"


@dataclass
class SiteView:
    site: str
    peer: str
    reachable: bool
    ts: float
    error: str | None = None
    role: str = UNKNOWN_ROLE
    version: str | None = None
    broker: str | None = None
    pending_mirror_acks: int | None = None
    client_consumers: int | None = None
    consumers_by_queue: dict[str, int] = field(default_factory=dict)
    consumers_on_passive: bool | None = None
    last_success_ts: float | None = None
    scrape_seconds: float | None = None
    queue_count: int | None = None
    paused_client_queues: list[str] | None = None  # paused client queues (an interrupted swapover leaves them)
    plugin: dict | None = None       # the continuity plugin's values (site_state "continuity_plugin"); None = absent
    notes: list[str] = field(default_factory=list)
    switch_needed: bool = False      # no broker of the site serves (site_role.pair_state; one broker: unreadable)
    ha: dict | None = None           # a site with several brokers: site_role.pair_state + "brokers" (BrokerView)


@dataclass
class BrokerView:
    """One broker of a site with several brokers (an HA pair, docs/ha.md), as the last sample read it."""

    broker: str
    up: bool                        # answered Jolokia
    live: bool                      # serves (reachable and not a backup standing by)
    backup: bool | None = None      # Artemis Backup: true while it stands by as a backup (false once live)
    replica_sync: bool | None = None  # Artemis ReplicaSync (None = not read, or a standby on a shared store)
    ha_policy: str | None = None
    # stands by on the pair's shared store (site_role.pair_state "shared_store"): it copies nothing, so its ReplicaSync
    # (false as Artemis reads it) says nothing about it and is not kept; None = did not answer
    shared_store: bool | None = None
    error: str | None = None


@dataclass
class DirectionView:
    """One mirror connection from ``site`` to ``peer`` (events captured on ``site`` for ``peer``)."""

    site: str
    peer: str
    connection: str
    ts: float                       # when the values were sampled (older than the cycle when stale)
    stale: bool = False             # the source site is unreachable: values are its last known ones
    started: bool | None = None
    connected: bool | None = None
    backlog: int | None = None
    pending_acks: int | None = None
    add_rate: float | None = None
    drain_rate: float | None = None
    lag_seconds: float | None = None
    lag_unbounded: bool = False     # backlog > 0 and not draining: lag is infinite, not unknown
    rpo_events_est: int | None = None
    rpo_messages_est: float | None = None
    rpo_seconds_est: float | None = None
    rpo_basis: str | None = None
    rto_seconds_est: float | None = None
    rto_basis: str | None = None
    queue_diff_count: int | None = None
    queue_diffs: list[dict] = field(default_factory=list)
    disconnected_seconds: float | None = None
    plugin_estimates: dict | None = None  # site_state.plugin_estimates: RPO from replication latency, duplicates
    sla_breach: dict[str, bool] = field(default_factory=dict)
    lag_sample: dict = field(default_factory=dict)


@dataclass
class Cycle:
    ts: float
    sites: dict[str, SiteView]
    directions: list[DirectionView]
    overhead_seconds: float
    overhead_source: str


def site_role_of(snapshot: dict, client_acceptors: tuple[str, ...]) -> tuple[str, str | None]:
    """Role via ``site_role.derive_role`` from the client acceptors' ``Started``; (role, note)."""
    if not snapshot.get("reachable", True):
        return site_role.UNREACHABLE, None
    if not client_acceptors:
        return UNKNOWN_ROLE, "role unknown: no client_acceptors configured for this site"
    started = {name: bool(a.get("started")) for name, a in (snapshot.get("acceptors") or {}).items()
               if a.get("started") is not None}
    try:
        return site_role.derive_role(started, list(client_acceptors)), None
    except ValueError as exc:
        return UNKNOWN_ROLE, f"role unknown: {exc}"


def select_live(site: str, brokers: list[tuple[str, dict]]) -> tuple[dict, dict]:
    """The snapshot a site with several brokers is read from, and its pair state, from every broker's snapshot
    (inventory order, primary first).

    The live broker is chosen by the collection's one rule (``site_role.pair_state``, also behind status.yml).
    When no broker of the site serves (all down, or a backup still standing by), the site is unreachable for
    the model, exactly like a lost single-broker site: its mirrors keep their last known backlog and RPO.
    """
    facts = [site_role.broker_facts(name, snap) for name, snap in brokers]
    state = site_role.pair_state(facts)
    snaps = dict(brokers)
    shared = set(state["shared_store"])  # pair_state's judgement, not the agent's: one rule (docs/ha.md)
    views = [BrokerView(broker=f["broker"], up=f["reachable"], live=f["live"],
                        backup=snap.get("backup") if f["reachable"] else None,
                        replica_sync=snap.get("replica_sync") if f["reachable"] and f["broker"] not in shared else None,
                        ha_policy=snap.get("ha_policy") if f["reachable"] else None,
                        shared_store=(f["broker"] in shared) if f["reachable"] else None,
                        error=None if f["reachable"] else snap.get("error"))
             for f, (_name, snap) in zip(facts, brokers, strict=True)]
    state = dict(state, brokers=views)
    if state["serving"]:
        return snaps[state["live_broker"]], state
    parts = [f"{v.broker} down ({v.error or 'unreadable'})" if not v.up else f"{v.broker} stands by"
             for v in views]
    error = "no broker of the site serves: " + ", ".join(parts)
    first = snaps[state["live_broker"]]
    ts = max(float(snap.get("ts") or 0.0) for _n, snap in brokers)
    snap = site_state.unreachable(site, first.get("url"), state["live_broker"], RuntimeError(error), ts)
    return snap, state


def sla_breaches(values: dict[str, Any], sla_settings: SlaSettings, stale: bool = False) -> dict[str, bool]:
    """Target -> breached, for every configured target that applies: the collection's one SLA rule
    (``sla.direction_verdicts``). A value above its target breaches, and so does an unknown value (an unbounded
    lag, an RPO nobody could bound, pending acks an Artemis before 2.40 does not report): it cannot be proven to
    be within target. On a stale (unreachable) source the live-only targets (lag, RTO, pending acks) do not
    apply and are left out; the last known backlog and RPO are judged."""
    verdicts = sla.direction_verdicts(dict(values, stale=stale), sla_settings.targets())
    return {target: sla.breached(v) for target, v in verdicts.items() if v != sla.NOT_JUDGED}


class Sampler:
    """Keeps the cross-cycle state; :meth:`step` is called once per cycle with the snapshots of every site."""

    def __init__(self, cfg: AgentConfig):
        self.cfg = cfg
        self.previous: dict[str, dict] = {}                     # last reachable snapshot per site
        self.last_success: dict[str, float] = {}
        self.disconnected_since: dict[tuple[str, str], float] = {}
        self.last_directions: dict[tuple[str, str], DirectionView] = {}
        # the agent's own canaries are in flight between the sites all the time: never a queue difference
        self._excluded = tuple(cfg.comparison.exclude_prefixes) + (
            (cfg.canaries.address,) if cfg.canaries.enabled else ())

    # ---- per site
    def _site_view(self, name: str, snap: dict) -> SiteView:
        settings = self.cfg.sites[name]
        view = SiteView(site=name, peer=settings.peer, reachable=bool(snap.get("reachable", True)),
                        ts=float(snap.get("ts") or 0.0), error=snap.get("error"), broker=snap.get("broker"),
                        version=snap.get("version"), scrape_seconds=snap.get("elapsed"),
                        notes=list(snap.get("notes") or []))
        role, note = site_role_of(snap, settings.client_acceptors)
        view.role = role
        if note:
            view.notes.append(note)
        if view.reachable:
            self.last_success[name] = view.ts
            view.pending_mirror_acks = snap.get("pending_mirror_acks")
            view.consumers_by_queue = site_state.consumers_on(snap)
            if self.cfg.canaries.enabled:
                # the canary probe browses its own queue on the peer: that browser is not an application consumer
                queues = snap.get("queues") or {}
                view.consumers_by_queue = {
                    q: n for q, n in view.consumers_by_queue.items()
                    if (queues.get(q) or {}).get("address") != self.cfg.canaries.address}
            view.client_consumers = sum(view.consumers_by_queue.values())
            view.queue_count = len(snap.get("queues") or {})
            view.paused_client_queues = site_state.paused_client_queues(snap)
            view.plugin = snap.get("continuity_plugin")
            if role == site_role.PASSIVE:
                view.consumers_on_passive = view.client_consumers > 0
            elif role in (site_role.ACTIVE, site_role.MIXED):
                view.consumers_on_passive = False
        view.last_success_ts = self.last_success.get(name)
        view.switch_needed = not view.reachable  # one broker: the rule of pair_state with a pair of one
        return view

    # ---- per direction
    def _disconnected_for(self, site: str, snap: dict, now: float) -> dict[str, float | None]:
        """Seconds each connection of ``site`` has been seen disconnected (None = connected or unknown)."""
        out: dict[str, float | None] = {}
        for name, conn in (snap.get("connections") or {}).items():
            key = (site, name)
            if conn.get("connected") is False:
                since = self.disconnected_since.setdefault(key, float(snap.get("ts") or now))
                out[name] = max(0.0, float(snap.get("ts") or now) - since)
            else:
                self.disconnected_since.pop(key, None)
                out[name] = None
        return out

    def _passive_consumers(self, peer_view: SiteView | None, assessed: int | None) -> int | None:
        """Consumers on the peer when the peer is the passive side of this direction (see docs/agent.md)."""
        if peer_view is None or not peer_view.reachable:
            return None
        if peer_view.role == site_role.PASSIVE:
            return peer_view.client_consumers
        if peer_view.role == site_role.ACTIVE:
            return 0
        if peer_view.role == UNKNOWN_ROLE:
            return assessed  # no roles configured: every consumer on the peer counts, like mirror_info
        return None  # mixed: an interrupted switch, neither side is clearly passive

    def _live_directions(self, name: str, snap: dict, peer_snap: dict | None, views: dict[str, SiteView],
                         now: float, overhead: float) -> list[DirectionView]:
        settings = self.cfg.sites[name]
        cmp = self.cfg.comparison
        disc = self._disconnected_for(name, snap, now)
        prev = self.previous.get(name)
        if prev is not None and prev.get("broker") != snap.get("broker"):
            prev = None  # another broker of the pair serves now: its counters are not the previous one's
        out = []
        names = site_state.mirror_connections(snap)
        for conn_name in names:
            result = site_state.assess_mirrors(
                snap, previous=prev, peer=peer_snap, connection=conn_name, overhead_seconds=overhead,
                assumed_drain_rate=self.cfg.rto.assumed_drain_rate, queue_tolerance=cmp.tolerance,
                exclude_prefixes=self._excluded, address_filter=cmp.address_filter,
                disconnected_for=disc.get(conn_name))
            a = result["connections"][0]
            peer_view = views.get(settings.peer)
            passive = self._passive_consumers(peer_view, result["passive_consumers"])
            queues = snap.get("queues") or {}
            peer_queues = (peer_snap or {}).get("queues") or {}
            diffs = []
            for d in list(a["queue_diffs"])[: cmp.max_reported]:
                q = queues.get(d["queue"]) or peer_queues.get(d["queue"]) or {}
                diffs.append(dict(d, address=q.get("address") or d["queue"]))
            d = DirectionView(
                site=name, peer=settings.peer, connection=conn_name, ts=float(snap.get("ts") or now),
                started=a["started"], connected=a["connected"], backlog=a["backlog"], pending_acks=a["pending_acks"],
                add_rate=a["add_rate"], drain_rate=a["drain_rate"], lag_seconds=a["lag_seconds"],
                lag_unbounded=bool(a["backlog"]) and a["lag_seconds"] is None and prev is not None,
                rpo_events_est=a["rpo_events_est"], rpo_messages_est=a["rpo_messages_est"],
                rpo_seconds_est=a["rpo_seconds_est"], rpo_basis=a["rpo_basis"],
                rto_seconds_est=a["rto_seconds_est"], rto_basis=a["rto_basis"],
                queue_diff_count=a["queue_diff_count"], queue_diffs=diffs,
                disconnected_seconds=disc.get(conn_name), plugin_estimates=a.get("plugin_estimates"))
            d.sla_breach = sla_breaches(vars(d), self.cfg.sla)
            sample = dict(a["lag_sample"])
            sample.update(source="agent", site=name, peer=settings.peer, role=views[name].role,
                          passive_consumers=passive, queue_diffs=diffs)
            sample["notes"] = list(sample.get("notes") or [])
            if d.sla_breach:
                breached = sorted(t + (" (unknown)" if getattr(d, sla.DIRECTION_FIELDS[t]) is None else "")
                                  for t, b in d.sla_breach.items() if b)
                if breached:
                    sample["notes"].append("SLA breached: " + ", ".join(breached))
            d.lag_sample = sample
            self.last_directions[(name, conn_name)] = d
            out.append(d)
        return out

    def _stale_directions(self, name: str, now: float) -> list[DirectionView]:
        """The last known values of an unreachable site's mirrors: they are what a failover would lose."""
        out = []
        for (site, _conn), last in sorted(self.last_directions.items()):
            if site != name:
                continue
            d = copy.deepcopy(last)
            d.stale = True
            # A mirror whose source broker cannot be read moves nothing; rates, lag and RTO describe a live
            # mirror and are dropped, the backlog and the RPO estimate are kept as last known.
            d.connected = None
            d.add_rate = d.drain_rate = d.lag_seconds = d.rto_seconds_est = None
            d.lag_unbounded = False
            d.rto_basis = None
            d.disconnected_seconds = None
            d.plugin_estimates = None  # measured live on both sites: nothing to keep for a lost one
            d.sla_breach = sla_breaches(vars(d), self.cfg.sla, stale=True)
            sample = dict(d.lag_sample)
            sample.update(reachable=False, connected=None, add_rate=None, drain_rate=None, lag_seconds=None,
                          rto_seconds_est=None, role=site_role.UNREACHABLE, pending_acks=None,
                          passive_consumers=None, queue_diff_count=None, queue_diffs=[],
                          duplicates_at_risk_est=None, replication_latency_p99_seconds=None)
            sample["notes"] = [f"site unreachable; backlog and RPO are the last known values from ts {last.ts:.3f}"]
            d.lag_sample = sample
            out.append(d)
        return out

    def step(self, snapshots: dict[str, dict], now: float, overhead: float = 0.0,
             overhead_source: str = "config", pairs: dict[str, list[tuple[str, dict]]] | None = None) -> Cycle:
        """One cycle. ``snapshots``: one per single-broker site; ``pairs``: every broker's snapshot (inventory
        order) of each site with several brokers, read through its live broker (:func:`select_live`)."""
        snapshots = dict(snapshots)
        states = {}
        for name, brokers in (pairs or {}).items():
            snapshots[name], states[name] = select_live(name, brokers)
        views = {name: self._site_view(name, snapshots[name]) for name in self.cfg.sites}
        for name, state in states.items():
            views[name].ha = state
            views[name].switch_needed = bool(state["switch_needed"])
            if state["takeover"]:
                down = ", ".join(state["down"]) or "the primary"
                views[name].notes.append(f"served by its backup {state['live_broker']} ({down} down): the site did "
                                         "not fail, no site switch needed")
        directions: list[DirectionView] = []
        for name, settings in self.cfg.sites.items():
            snap = snapshots[name]
            if views[name].reachable:
                peer_snap = snapshots.get(settings.peer)
                directions.extend(self._live_directions(name, snap, peer_snap, views, now, overhead))
            else:
                directions.extend(self._stale_directions(name, now))
                for key in [k for k in self.disconnected_since if k[0] == name]:
                    del self.disconnected_since[key]
        for name in self.cfg.sites:
            if views[name].reachable:
                self.previous[name] = snapshots[name]
        return Cycle(ts=now, sites=views, directions=directions, overhead_seconds=overhead,
                     overhead_source=overhead_source)
