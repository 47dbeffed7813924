"""Prometheus exposition of the latest :class:`~continuity_agent.model.Cycle`.

A custom collector renders the newest cycle at scrape time, so a label set that disappeared (a deleted queue
difference, a removed connection) disappears from the scrape too instead of lingering with an old value.
``METRICS`` is the one list of names, types, units and labels: docs/agent.md, the alert rules and the tests are
checked against it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from continuity_agent import __version__
from continuity_agent.model import Cycle

SITE = ("site",)
DIRECTION = ("site", "peer", "connection")


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str          # gauge | counter
    unit: str
    labels: tuple[str, ...]
    help: str


METRICS: tuple[Metric, ...] = (
    # --- sites
    Metric("continuity_site_reachable", "gauge", "bool", SITE,
           "1 when the site's Jolokia answered the last sample, 0 when it could not be read"),
    Metric("continuity_site_last_success_timestamp_seconds", "gauge", "seconds", SITE,
           "Epoch time of the last successful sample of the site"),
    Metric("continuity_site_sample_duration_seconds", "gauge", "seconds", SITE,
           "Time the last bulk Jolokia read of the site took"),
    Metric("continuity_site_role", "gauge", "bool", ("site", "role"),
           "1 for the site's current role (active, passive, mixed, unknown, unreachable) from its client acceptors"),
    Metric("continuity_site_pending_mirror_acks", "gauge", "acks", SITE,
           "PendingMirrorAcks of the site's broker (mirrored acks it could not apply yet; Artemis 2.40+)"),
    Metric("continuity_site_client_consumers", "gauge", "consumers", SITE,
           "Consumers on the site's client queues (internal, mirror and management queues excluded)"),
    Metric("continuity_site_consumers_on_passive", "gauge", "bool", SITE,
           "1 when the site is passive and has consumers (mirrored acks may be dropped: double delivery)"),
    Metric("continuity_site_queues", "gauge", "queues", SITE, "Queues seen on the site at the last sample"),
    Metric("continuity_site_paused_client_queues", "gauge", "queues", SITE,
           "Client queues paused on the site (a swapover interrupted between its quiesce and its resume leaves them "
           "so: their consumers get nothing; the next swapover resumes them)"),
    Metric("continuity_site_switch_needed", "gauge", "bool", SITE,
           "1 when no broker of the site serves (one broker: it cannot be read; an HA pair: none is live), 0 while "
           "the site is served, also by a backup that took over"),
    # --- sites with several brokers (an HA pair, docs/ha.md): one series per broker of the site
    Metric("continuity_site_live_broker", "gauge", "bool", ("site", "broker"),
           "1 for the broker that serves the site (the live one of its HA pair), 0 for the others"),
    Metric("continuity_site_ha_takeover", "gauge", "bool", SITE,
           "1 when the site is served by a backup that took over from its primary (no site switch needed, no "
           "redundancy left until the primary is back)"),
    Metric("continuity_broker_up", "gauge", "bool", ("site", "broker"),
           "1 when the broker of the site answered Jolokia at the last sample"),
    Metric("continuity_broker_ha_backup", "gauge", "bool", ("site", "broker"),
           "Artemis Backup of the broker: 1 while it stands by as a backup replicating its live broker, 0 once live"),
    Metric("continuity_broker_ha_replica_sync", "gauge", "bool", ("site", "broker"),
           "Artemis ReplicaSync: on a backup, 1 once it holds a full copy of its live broker's journal; on a live "
           "broker, 1 while its backup is synchronised; absent for a backup standing by on a shared store"),
    Metric("continuity_broker_ha_shared_store", "gauge", "bool", ("site", "broker"),
           "1 for a backup standing by on its pair's shared store (site_role.pair_state shared_store): it copies "
           "nothing, so it has no replica_sync series; 0 for the other brokers of the site that answered"),
    Metric("continuity_site_sample_errors_total", "counter", "samples", SITE,
           "Samples of the site that failed (unreachable, refused credentials, not Jolokia)"),
    # --- mirror directions
    Metric("continuity_mirror_up", "gauge", "bool", DIRECTION,
           "1 while the direction's values are live, 0 when they are the last known values of an unreachable "
           "source site"),
    Metric("continuity_mirror_connected", "gauge", "bool", DIRECTION,
           "1 when the mirror broker connection is connected, 0 when it is not or its source is unreachable"),
    Metric("continuity_mirror_started", "gauge", "bool", DIRECTION, "1 when the mirror broker connection is started"),
    Metric("continuity_mirror_backlog_events", "gauge", "events", DIRECTION,
           "Mirror events captured on site and not yet confirmed by peer (SNF queue MessageCount); kept at the "
           "last known value while site is unreachable"),
    Metric("continuity_mirror_pending_acks", "gauge", "acks", DIRECTION,
           "PendingMirrorAcks of the peer (target side of this direction)"),
    Metric("continuity_mirror_add_rate_events_per_second", "gauge", "events/s", DIRECTION,
           "Mirror events captured per second between the last two samples"),
    Metric("continuity_mirror_drain_rate_events_per_second", "gauge", "events/s", DIRECTION,
           "Mirror events confirmed by the peer per second between the last two samples"),
    Metric("continuity_mirror_lag_seconds", "gauge", "seconds", DIRECTION,
           "Seconds until the peer has caught up (backlog / net drain rate); +Inf while the backlog is not "
           "draining"),
    Metric("continuity_mirror_disconnected_seconds", "gauge", "seconds", DIRECTION,
           "How long the mirror connection has been seen disconnected (0 while connected)"),
    Metric("continuity_mirror_queue_differences", "gauge", "queues", DIRECTION,
           "Client queues whose message count differs between site and peer beyond the tolerance"),
    Metric("continuity_mirror_rpo_events_estimate", "gauge", "events", DIRECTION,
           "Mirror events that would be lost if site vanished now"),
    Metric("continuity_mirror_rpo_messages_estimate", "gauge", "messages", DIRECTION,
           "Client messages at risk if site vanished now (upper bound: acks are events too)"),
    Metric("continuity_mirror_rpo_seconds_estimate", "gauge", "seconds", DIRECTION,
           "Seconds of recent traffic at risk if site vanished now"),
    Metric("continuity_mirror_rto_seconds_estimate", "gauge", "seconds", DIRECTION,
           "Estimated consistency-first switch time from site to peer: drain time + measured runbook overhead"),
    Metric("continuity_mirror_sla_breach", "gauge", "bool", (*DIRECTION, "target"),
           "1 when the direction breaches the configured SLA target (rpo_seconds, rpo_messages, rto_seconds, "
           "lag_seconds, pending_acks)"),
    Metric("continuity_mirror_last_sample_timestamp_seconds", "gauge", "seconds", DIRECTION,
           "Epoch time the direction's values were sampled (old while the source is unreachable)"),
    Metric("continuity_queue_count_difference", "gauge", "messages", ("site", "peer", "address", "queue"),
           "Message count on site minus on peer, for the differing queues only (at most comparison.max_reported)"),
    # --- the continuity broker plugin (docs/plugin.md), when the site runs it
    Metric("continuity_plugin_up", "gauge", "bool", SITE,
           "1 when the site's continuity plugin MBean was read, 0 when the site answered without it (not installed)"),
    Metric("continuity_plugin_site_role", "gauge", "bool", ("site", "role"),
           "1 for the role of the plugin's passive-site guard (active, passive): passive refuses every client but "
           "the mirror"),
    Metric("continuity_plugin_passive_guard_refusals_total", "counter", "refusals", SITE,
           "Client sends and consumer creations the plugin refused while the site was passive (since broker start "
           "or statistics reset)"),
    Metric("continuity_plugin_unacked_deliveries", "gauge", "deliveries", SITE,
           "Deliveries handed to consumers and not yet acknowledged (redelivered by the peer after a failover)"),
    Metric("continuity_plugin_deliveries_per_second", "gauge", "1/s", SITE,
           "Deliveries to consumers per second over the plugin's window"),
    Metric("continuity_plugin_acks_per_second", "gauge", "1/s", SITE,
           "Client acknowledgements per second over the plugin's window"),
    Metric("continuity_plugin_acks_per_ack_call", "gauge", "ratio", SITE,
           "Acknowledged deliveries per ack call over the plugin's window (the clients' ack batching factor)"),
    Metric("continuity_plugin_ack_latency_seconds", "gauge", "seconds", ("site", "quantile"),
           "Deliver-to-ack latency over the plugin's window, quantile 0.5 and 0.99"),
    Metric("continuity_plugin_replication_latency_seconds", "gauge", "seconds", ("site", "quantile"),
           "Mirror replication latency measured on this site as target (arrival here minus send time on the peer) "
           "over the plugin's window, quantile 0.5 and 0.99"),
    Metric("continuity_plugin_replication_latency_max_seconds", "gauge", "seconds", SITE,
           "Largest mirror replication latency over the plugin's window"),
    Metric("continuity_plugin_newest_mirrored_event_age_seconds", "gauge", "seconds", SITE,
           "Now minus the send time of the newest mirrored message applied here (grows while the mirror is late "
           "or the peer idle)"),
    Metric("continuity_plugin_mirrored_messages_per_second", "gauge", "1/s", SITE,
           "Mirrored messages applied here per second over the plugin's window"),
    Metric("continuity_mirror_plugin_rpo_seconds_estimate", "gauge", "seconds", DIRECTION,
           "Seconds of site's traffic not yet on peer, from the replication latency peer's plugin measures"),
    Metric("continuity_mirror_plugin_rpo_messages_estimate", "gauge", "messages", DIRECTION,
           "Messages of site not yet on peer: the plugin RPO seconds times the mirrored message rate"),
    Metric("continuity_mirror_duplicates_at_risk_estimate", "gauge", "messages", DIRECTION,
           "Messages a failover from site to peer now would deliver again: deliveries in flight on site plus its "
           "acks not yet replicated"),
    Metric("continuity_mirror_unreplicated_acks_estimate", "gauge", "acks", DIRECTION,
           "Acks made on site not yet applied on peer (site's ack rate times the replication latency, at most the "
           "backlog)"),
    # --- canaries (canaries.enabled)
    Metric("continuity_canary_latency_seconds", "gauge", "seconds", ("site", "peer"),
           "Median replication latency of the last canary probe: sent on site, seen on peer"),
    Metric("continuity_canary_latency_max_seconds", "gauge", "seconds", ("site", "peer"),
           "Largest canary latency of the last probe"),
    Metric("continuity_canary_seen_ratio", "gauge", "ratio", ("site", "peer"),
           "Share of the last probe's canaries seen on peer within canaries.timeout"),
    Metric("continuity_canary_last_timestamp_seconds", "gauge", "seconds", ("site", "peer"),
           "Epoch time of the last canary probe"),
    # --- agent
    Metric("continuity_sla_target", "gauge", "target unit", ("target",), "Configured SLA targets"),
    Metric("continuity_agent_rto_overhead_seconds", "gauge", "seconds", ("source",),
           "Runbook overhead added to the RTO estimate and where it came from (evidence, summary, config)"),
    Metric("continuity_agent_cycles_total", "counter", "cycles", (), "Sampling cycles completed"),
    Metric("continuity_agent_cycle_duration_seconds", "gauge", "seconds", (), "Duration of the last cycle"),
    Metric("continuity_agent_last_cycle_timestamp_seconds", "gauge", "seconds", (),
           "Epoch time the last cycle finished"),
    Metric("continuity_agent_interval_seconds", "gauge", "seconds", (), "Configured sampling interval"),
    Metric("continuity_agent_info", "gauge", "info", ("version",), "Agent version (value 1)"),
)
BY_NAME = {m.name: m for m in METRICS}
ROLES = ("active", "passive", "mixed", "unknown", "unreachable")
PLUGIN_ROLES = ("active", "passive")


def exposed_names() -> set[str]:
    """Every series name a scrape can contain (counters also expose ``_total``/``_created``)."""
    names = set()
    for m in METRICS:
        names.add(m.name)
        if m.kind == "counter":
            names.add(m.name.removesuffix("_total") + "_created")
    return names


def _b(value: bool | None) -> float | None:
    return None if value is None else (1.0 if value else 0.0)


class AgentCollector(Collector):
    """Holds the newest cycle (swapped atomically) and renders it at each scrape."""

    def __init__(self, interval: float, sla_targets: dict[str, float]):
        self._lock = threading.Lock()
        self.cycle: Cycle | None = None
        self.cycles = 0
        self.cycle_duration: float | None = None
        self.last_cycle_ts: float | None = None
        self.errors: dict[str, int] = {}
        self.interval = interval
        self.sla_targets = dict(sla_targets)
        self.canaries: dict[tuple[str, str], Any] = {}

    def publish_canary(self, result: Any) -> None:
        with self._lock:
            self.canaries[(result.site, result.peer)] = result

    def publish(self, cycle: Cycle, duration: float, finished: float) -> None:
        with self._lock:
            for name, view in cycle.sites.items():
                self.errors.setdefault(name, 0)
                if not view.reachable:
                    self.errors[name] += 1
            self.cycle = cycle
            self.cycles += 1
            self.cycle_duration = duration
            self.last_cycle_ts = finished

    def collect(self) -> Iterator:
        with self._lock:
            cycle, cycles, duration, last = self.cycle, self.cycles, self.cycle_duration, self.last_cycle_ts
            errors = dict(self.errors)
            canaries = dict(self.canaries)
        fam = {m.name: (CounterMetricFamily if m.kind == "counter" else GaugeMetricFamily)(
            m.name.removesuffix("_total") if m.kind == "counter" else m.name, m.help, labels=list(m.labels))
            for m in METRICS}

        def add(name: str, labels: tuple, value: float | None) -> None:
            if value is None:
                return  # unknown is absent, never a made-up zero
            fam[name].add_metric(list(labels), float(value))

        add("continuity_agent_info", (__version__,), 1)
        add("continuity_agent_interval_seconds", (), self.interval)
        add("continuity_agent_cycles_total", (), cycles)
        add("continuity_agent_cycle_duration_seconds", (), duration)
        add("continuity_agent_last_cycle_timestamp_seconds", (), last)
        for target, value in sorted(self.sla_targets.items()):
            add("continuity_sla_target", (target,), value)
        for (site, peer), c in sorted(canaries.items()):
            add("continuity_canary_latency_seconds", (site, peer), c.latency_p50)
            add("continuity_canary_latency_max_seconds", (site, peer), c.latency_max)
            add("continuity_canary_seen_ratio", (site, peer), c.seen_ratio)
            add("continuity_canary_last_timestamp_seconds", (site, peer), c.ts)
        for site, count in sorted(errors.items()):
            add("continuity_site_sample_errors_total", (site,), count)
        if cycle is not None:
            add("continuity_agent_rto_overhead_seconds", (cycle.overhead_source,), cycle.overhead_seconds)
            for name, v in cycle.sites.items():
                s = (name,)
                add("continuity_site_reachable", s, _b(v.reachable))
                add("continuity_site_last_success_timestamp_seconds", s, v.last_success_ts)
                add("continuity_site_sample_duration_seconds", s, v.scrape_seconds if v.reachable else None)
                for role in ROLES:
                    add("continuity_site_role", (name, role), 1.0 if v.role == role else 0.0)
                add("continuity_site_pending_mirror_acks", s, v.pending_mirror_acks)
                add("continuity_site_client_consumers", s, v.client_consumers)
                add("continuity_site_consumers_on_passive", s, _b(v.consumers_on_passive))
                add("continuity_site_queues", s, v.queue_count)
                add("continuity_site_paused_client_queues", s,
                    None if v.paused_client_queues is None else float(len(v.paused_client_queues)))
                add("continuity_site_switch_needed", s, _b(v.switch_needed))
                if v.ha:
                    add("continuity_site_ha_takeover", s, _b(v.ha["takeover"]))
                    for b in v.ha["brokers"]:
                        k = (name, b.broker)
                        serving = v.ha["serving"] and b.broker == v.ha["live_broker"]
                        add("continuity_site_live_broker", k, _b(serving))
                        add("continuity_broker_up", k, _b(b.up))
                        add("continuity_broker_ha_backup", k, _b(b.backup))
                        add("continuity_broker_ha_replica_sync", k, _b(b.replica_sync))
                        add("continuity_broker_ha_shared_store", k, _b(b.shared_store))
                if v.reachable:
                    _add_plugin(add, name, v.plugin)
            for d in cycle.directions:
                k = (d.site, d.peer, d.connection)
                add("continuity_mirror_up", k, 0.0 if d.stale else 1.0)
                add("continuity_mirror_connected", k, 0.0 if d.stale else _b(d.connected))
                add("continuity_mirror_started", k, None if d.stale else _b(d.started))
                add("continuity_mirror_backlog_events", k, d.backlog)
                add("continuity_mirror_pending_acks", k, d.pending_acks)
                add("continuity_mirror_add_rate_events_per_second", k, d.add_rate)
                add("continuity_mirror_drain_rate_events_per_second", k, d.drain_rate)
                add("continuity_mirror_lag_seconds", k, math.inf if d.lag_unbounded else d.lag_seconds)
                if not d.stale:
                    add("continuity_mirror_disconnected_seconds", k, d.disconnected_seconds or 0.0)
                add("continuity_mirror_queue_differences", k, d.queue_diff_count)
                add("continuity_mirror_rpo_events_estimate", k, d.rpo_events_est)
                add("continuity_mirror_rpo_messages_estimate", k, d.rpo_messages_est)
                add("continuity_mirror_rpo_seconds_estimate", k, d.rpo_seconds_est)
                add("continuity_mirror_rto_seconds_estimate", k, d.rto_seconds_est)
                add("continuity_mirror_last_sample_timestamp_seconds", k, d.ts)
                est = d.plugin_estimates or {}
                add("continuity_mirror_plugin_rpo_seconds_estimate", k, est.get("rpo_seconds_est"))
                add("continuity_mirror_plugin_rpo_messages_estimate", k, est.get("rpo_messages_est"))
                add("continuity_mirror_duplicates_at_risk_estimate", k, est.get("duplicates_at_risk_est"))
                add("continuity_mirror_unreplicated_acks_estimate", k, est.get("unreplicated_acks_est"))
                for target, breached in sorted(d.sla_breach.items()):
                    add("continuity_mirror_sla_breach", (*k, target), _b(breached))
                if not d.stale:
                    for diff in d.queue_diffs:
                        if diff.get("delta") is not None:
                            add("continuity_queue_count_difference",
                                (d.site, d.peer, diff.get("address") or diff["queue"], diff["queue"]), diff["delta"])
        yield from fam.values()


def _add_plugin(add: Any, site: str, plugin: dict | None) -> None:
    """The continuity plugin's site values; only ``continuity_plugin_up`` 0 when the site has no plugin."""
    s = (site,)
    add("continuity_plugin_up", s, 0.0 if plugin is None else 1.0)
    if plugin is None:
        return
    for role in PLUGIN_ROLES:
        add("continuity_plugin_site_role", (site, role), 1.0 if plugin.get("site_role") == role else 0.0)
    guard, acks = plugin.get("passive_guard") or {}, plugin.get("ack_model") or {}
    repl = plugin.get("replication") or {}
    add("continuity_plugin_passive_guard_refusals_total", s, guard.get("refusals"))
    add("continuity_plugin_unacked_deliveries", s, acks.get("unacked_deliveries"))
    add("continuity_plugin_deliveries_per_second", s, acks.get("deliveries_per_second"))
    add("continuity_plugin_acks_per_second", s, acks.get("acks_per_second"))
    add("continuity_plugin_acks_per_ack_call", s, acks.get("acks_per_ack_call"))
    add("continuity_plugin_ack_latency_seconds", (site, "0.5"), acks.get("ack_latency_p50_seconds"))
    add("continuity_plugin_ack_latency_seconds", (site, "0.99"), acks.get("ack_latency_p99_seconds"))
    add("continuity_plugin_replication_latency_seconds", (site, "0.5"), repl.get("latency_p50_seconds"))
    add("continuity_plugin_replication_latency_seconds", (site, "0.99"), repl.get("latency_p99_seconds"))
    add("continuity_plugin_replication_latency_max_seconds", s, repl.get("latency_max_seconds"))
    add("continuity_plugin_newest_mirrored_event_age_seconds", s, repl.get("newest_event_age_seconds"))
    add("continuity_plugin_mirrored_messages_per_second", s, repl.get("mirrored_per_second"))


def make_registry(collector: AgentCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
