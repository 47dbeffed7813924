# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Pure mirror lag / RPO / RTO model for ActiveMQ Artemis AMQP mirroring.

No I/O happens here: every function takes plain numbers or mappings and returns plain data, so the
modules, the runbooks, the agent and the PySpark pipeline share one implementation.

Background (ARTEMIS-FACTS sections 3 and 7):

* Every mirrored operation (a client send, an ack, a queue create/delete) becomes one *event* on the source's
  store-and-forward (SNF) queue ``$ACTIVEMQ_ARTEMIS_MIRROR_<connection>``. Its ``MessageCount`` is the number
  of events the peer has not confirmed yet: the replication *backlog*. One produced and consumed message is
  two events.
* ``MessagesAdded`` and ``MessagesAcknowledged`` of the SNF queue are monotonically increasing counters (reset
  by a broker restart). Their deltas between two samples give the event *add rate* and *drain rate*.
* ``FirstMessageAge`` is NOT a lag signal: it is null while events are in flight and becomes the current
  epoch in milliseconds when the oldest event carries no timestamp (acks, plain AMQP sends). This module
  derives lag from counts and rates and only uses the age when it is plausible (see :func:`plausible_age_seconds`).

Units: timestamps in epoch seconds (float), rates in events per second, ages in milliseconds as Artemis
reports them. Unknown values are ``None``, never a made-up zero.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

from ansible_collections.continuity.artemis.plugins.module_utils import evidence

#: Prefix of the SNF queue (and address) Artemis creates per mirror broker connection.
MIRROR_QUEUE_PREFIX = "$ACTIVEMQ_ARTEMIS_MIRROR_"

#: Queue/address name prefixes that are never mirrored or are broker internals. Comparing them between sites
#: would report differences that mean nothing (ARTEMIS-FACTS section 3 "Not mirrored").
DEFAULT_EXCLUDED_PREFIXES: tuple = (
    MIRROR_QUEUE_PREFIX,
    "activemq.management",
    "activemq.notifications",
    "$sys.",
    "notif.",
)

#: An age older than this (milliseconds) cannot be a real message age; Artemis reports the current epoch in
#: milliseconds when the message timestamp is 0. 10 years is far beyond any retention and far below the
#: ~1.7e12 an epoch-sized age has.
MAX_PLAUSIBLE_AGE_MS = 10 * 365 * 24 * 3600 * 1000


@dataclass(frozen=True)
class SnfSample:
    """One reading of a mirror SNF queue (the source side of a broker connection).

    ``ts`` is when the reading was taken (epoch seconds, ideally the Jolokia response ``timestamp`` or the
    caller's clock right after the request). Every counter may be ``None`` when unknown (for example no SNF
    queue MBean before Artemis 2.32).
    """

    ts: float
    message_count: Optional[int] = None
    messages_added: Optional[int] = None
    messages_acknowledged: Optional[int] = None
    delivering_count: Optional[int] = None
    first_message_age_ms: Optional[float] = None
    first_message_timestamp_ms: Optional[float] = None

    @classmethod
    def from_attributes(cls, ts: float, attrs: Optional[Mapping[str, Any]]) -> "SnfSample":
        """Build a sample from a queue MBean attribute mapping (Jolokia ``read`` value).

        Missing attributes become ``None``. ``attrs`` may be ``None`` (queue not found).
        """
        attrs = attrs or {}
        return cls(
            ts=float(ts),
            message_count=_opt_int(attrs.get("MessageCount")),
            messages_added=_opt_int(attrs.get("MessagesAdded")),
            messages_acknowledged=_opt_int(attrs.get("MessagesAcknowledged")),
            delivering_count=_opt_int(attrs.get("DeliveringCount")),
            first_message_age_ms=_opt_float(attrs.get("FirstMessageAge")),
            first_message_timestamp_ms=_opt_float(attrs.get("FirstMessageTimestamp")),
        )


@dataclass(frozen=True)
class Rates:
    """Event rates between two samples.

    ``add_rate``: events captured per second (MessagesAdded delta / dt).
    ``drain_rate``: events confirmed by the peer per second (MessagesAcknowledged delta / dt).
    ``net_rate``: backlog growth per second (add - drain); negative while draining.
    ``interval``: seconds between the two samples. ``reason`` explains a ``None`` rate.
    """

    add_rate: Optional[float]
    drain_rate: Optional[float]
    net_rate: Optional[float]
    interval: Optional[float]
    reason: Optional[str] = None


@dataclass(frozen=True)
class RpoEstimate:
    """What would be lost if the source site vanished now.

    ``events``: SNF events not yet confirmed by the peer (sends AND acks).
    ``messages``: estimate of client messages among them (``events`` scaled by the send share when known,
    else equal to ``events`` as an upper bound).
    ``seconds``: how many seconds of recent traffic those events represent.
    ``basis``: how ``seconds`` was derived (``empty``, ``add_rate``, ``first_message_age``, ``disconnected``).
    """

    events: Optional[int]
    messages: Optional[float]
    seconds: Optional[float]
    basis: Optional[str]
    notes: list = field(default_factory=list)


@dataclass(frozen=True)
class RtoEstimate:
    """How long a consistency-first switch would take from now.

    ``drain_seconds``: backlog / drain rate (0 when empty). ``overhead_seconds``: measured runbook overhead
    (quiesce, gates, activation) supplied by the caller. ``seconds``: their sum, ``None`` when the drain time is
    unknown. ``basis`` names the rate used (``measured``, ``assumed``, ``empty``).
    """

    seconds: Optional[float]
    drain_seconds: Optional[float]
    overhead_seconds: float
    basis: Optional[str]
    notes: list = field(default_factory=list)


@dataclass(frozen=True)
class QueueComparison:
    """Per-queue message count comparison between a site and its peer.

    ``diffs``: one dict per differing queue, ``{"queue", "local", "peer", "delta"}`` (delta = local - peer;
    ``None`` count = queue missing on that side). ``compared``: how many queues were compared.
    ``equal``: ``True`` when no difference exceeds ``tolerance``.
    """

    equal: bool
    compared: int
    diffs: list
    excluded: int
    only_local: list
    only_peer: list

    @property
    def diff_count(self) -> int:
        return len(self.diffs)

    def as_dict(self) -> dict:
        data = asdict(self)
        data["diff_count"] = self.diff_count
        return data


def _opt_int(value: Any) -> Optional[int]:
    """Artemis list operations return numbers as strings; accept both, keep ``None``."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return None


def _opt_float(value: Any) -> Optional[float]:
    if value is None or isinstance(value, bool):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def compute_rates(prev: SnfSample, cur: SnfSample) -> Rates:
    """Event rates from two SNF samples of the same queue.

    Returns ``None`` rates (with ``reason``) when the interval is not positive, a counter is unknown, or a
    counter went backwards (broker restart resets them; a negative rate would be nonsense).
    """
    dt = cur.ts - prev.ts
    if not dt or dt <= 0:
        return Rates(None, None, None, None, "samples are not in time order (interval <= 0)")
    add = _delta_rate(prev.messages_added, cur.messages_added, dt)
    drain = _delta_rate(prev.messages_acknowledged, cur.messages_acknowledged, dt)
    reason = None
    if add is None or drain is None:
        missing = [n for n, v in (("MessagesAdded", add), ("MessagesAcknowledged", drain)) if v is None]
        reason = "unknown or reset counter: " + ", ".join(missing)
    net = None
    if prev.message_count is not None and cur.message_count is not None:
        # The backlog delta is the most direct growth signal; it stays right even when acks of the SNF
        # queue are not the only way events leave it (expiry, admin purge).
        net = (cur.message_count - prev.message_count) / dt
    elif add is not None and drain is not None:
        net = add - drain
    return Rates(add, drain, net, dt, reason)


def _delta_rate(a: Optional[int], b: Optional[int], dt: float) -> Optional[float]:
    if a is None or b is None:
        return None
    delta = b - a
    if delta < 0:
        return None
    return delta / dt


def backlog(sample: Optional[SnfSample]) -> Optional[int]:
    """Events not yet confirmed by the peer: the SNF ``MessageCount``.

    Falls back to ``MessagesAdded - MessagesAcknowledged`` only when ``MessageCount`` is unknown; both
    counters start at broker start, so the difference equals the queue depth unless messages expired or were
    removed administratively (then it overestimates, which is the safe direction for a gate).
    """
    if sample is None:
        return None
    if sample.message_count is not None:
        return sample.message_count
    if sample.messages_added is not None and sample.messages_acknowledged is not None:
        return max(0, sample.messages_added - sample.messages_acknowledged)
    return None


def plausible_age_seconds(
    age_ms: Optional[float], timestamp_ms: Optional[float] = None, now_ms: Optional[float] = None
) -> Optional[float]:
    """``FirstMessageAge`` in seconds when it can be trusted, else ``None``.

    Rejected: ``None`` (empty queue or all events in flight), a ``FirstMessageTimestamp`` of 0 or below
    (Artemis then reports the current epoch as the age), an age larger than :data:`MAX_PLAUSIBLE_AGE_MS`,
    an age that would place the message before the epoch given ``now_ms``, and negative ages (clock skew).
    """
    if age_ms is None:
        return None
    if timestamp_ms is not None and timestamp_ms <= 0:
        return None
    if age_ms < 0 or age_ms > MAX_PLAUSIBLE_AGE_MS:
        return None
    if now_ms is not None and age_ms >= now_ms:
        return None
    return age_ms / 1000.0


def lag_seconds(
    backlog_events: Optional[int], drain_rate: Optional[float], add_rate: Optional[float] = None
) -> Optional[float]:
    """How far behind the peer is, in seconds: backlog / drain rate.

    The mirror's store-and-forward queue is FIFO, so the last event queued now reaches the peer once the events
    ahead of it have drained, whatever arrives behind it: that time is the peer's staleness. Under steady traffic
    (events added as fast as they drain) the backlog stays small and so does the lag; a backlog that grows makes
    the lag grow sample by sample.

    * backlog 0 -> 0.0 (in sync, whatever the rates).
    * backlog unknown -> ``None``.
    * Not draining (drain rate 0 or unknown) while events wait -> ``None``: the lag is unbounded / unknown and must
      not be reported as a number. Gates treat ``None`` as "not satisfied".

    ``add_rate`` is accepted for the callers' symmetry and does not change the result (see above).
    """
    del add_rate  # FIFO: what arrives behind the backlog does not delay it
    if backlog_events is None:
        return None
    if backlog_events <= 0:
        return 0.0
    if drain_rate is None or drain_rate <= 0:
        return None
    return backlog_events / drain_rate


def send_share(client_send_rate: Optional[float], snf_add_rate: Optional[float]) -> Optional[float]:
    """Fraction of SNF events that are client sends (the rest are acks and admin events).

    ``client_send_rate`` is the sum of ``MessagesAdded`` rates of the mirrored client queues of the site
    (multicast fan-out makes it an upper bound). Result clamped to [0, 1]; ``None`` when unknown.
    """
    if client_send_rate is None or snf_add_rate is None or snf_add_rate <= 0:
        return None
    return max(0.0, min(1.0, client_send_rate / snf_add_rate))


def rpo_estimate(
    backlog_events: Optional[int],
    add_rate: Optional[float] = None,
    first_age_seconds: Optional[float] = None,
    share_of_sends: Optional[float] = None,
    connected: Optional[bool] = None,
    disconnected_for: Optional[float] = None,
) -> RpoEstimate:
    """Data at risk if the source site were lost now.

    ``events`` is the backlog. ``messages`` scales it by ``share_of_sends`` (see :func:`send_share`); without
    it ``messages`` equals ``events`` (an upper bound, because acks are events too).

    ``seconds`` (how much recent traffic the backlog covers), first rule that applies:

    1. backlog 0 -> 0.
    2. connection down for a known time (``connected`` False and ``disconnected_for``) -> at least that time:
       nothing captured since the cut reached the peer.
    3. ``add_rate`` > 0 -> backlog / add_rate (the backlog is that many seconds of the current event stream).
    4. a plausible first-message age (see :func:`plausible_age_seconds`).
    5. otherwise ``None`` with a note.
    """
    notes: list = []
    if backlog_events is None:
        return RpoEstimate(None, None, None, None, ["backlog unknown (no SNF queue reading)"])
    messages: Optional[float] = float(backlog_events)
    if share_of_sends is not None:
        messages = backlog_events * share_of_sends
    else:
        notes.append("messages is an upper bound: the backlog counts acks as events too")
    if backlog_events <= 0:
        return RpoEstimate(0, 0.0, 0.0, "empty", [])
    if connected is False and disconnected_for is not None and disconnected_for >= 0:
        seconds = disconnected_for
        if add_rate is not None and add_rate > 0:
            seconds = max(seconds, backlog_events / add_rate)
        return RpoEstimate(backlog_events, messages, seconds, "disconnected", notes)
    if add_rate is not None and add_rate > 0:
        return RpoEstimate(backlog_events, messages, backlog_events / add_rate, "add_rate", notes)
    if first_age_seconds is not None:
        return RpoEstimate(backlog_events, messages, first_age_seconds, "first_message_age", notes)
    notes.append("seconds at risk unknown: no add rate and no plausible first-message age")
    return RpoEstimate(backlog_events, messages, None, None, notes)


def rto_estimate(
    backlog_events: Optional[int],
    drain_rate: Optional[float],
    overhead_seconds: float = 0.0,
    add_rate: Optional[float] = None,
    assumed_drain_rate: Optional[float] = None,
) -> RtoEstimate:
    """Time a consistency-first switch would take from now: drain time + measured runbook overhead.

    The drain happens while the active site is quiesced, so new additions stop: the drain time is
    backlog / drain rate, not the net rate (``add_rate`` is accepted for symmetry and ignored on purpose).
    When the measured drain rate is unknown or zero (mirror disconnected, idle), ``assumed_drain_rate`` (for
    example the rate measured at the last rehearsal; real Artemis 2.44 drained ~20,000-50,000 events/s) is
    used and ``basis`` says so; without it the estimate is ``None``.
    """
    del add_rate  # quiesced during the drain; see docstring
    overhead = float(overhead_seconds or 0.0)
    if backlog_events is None:
        return RtoEstimate(None, None, overhead, None, ["backlog unknown"])
    if backlog_events <= 0:
        return RtoEstimate(overhead, 0.0, overhead, "empty")
    if drain_rate is not None and drain_rate > 0:
        drain = backlog_events / drain_rate
        return RtoEstimate(drain + overhead, drain, overhead, "measured")
    if assumed_drain_rate is not None and assumed_drain_rate > 0:
        drain = backlog_events / assumed_drain_rate
        return RtoEstimate(drain + overhead, drain, overhead, "assumed",
                           ["no measured drain rate (mirror idle or disconnected); assumed rate used"])
    return RtoEstimate(None, None, overhead, None, ["no drain rate: mirror not draining and no assumed rate"])


def site_loss_rto_estimate(detection_seconds: Optional[float], overhead_seconds: float = 0.0) -> RtoEstimate:
    """Time from losing the active site to clients consuming on the survivor: detection + promotion overhead.

    There is no drain term: what the lost site still held is data loss (the RPO), not time anyone waits for.
    ``detection_seconds`` is how long the runbook takes to declare the site lost (probes x interval).
    """
    notes = [] if detection_seconds is not None else ["detection time unknown: counted as 0"]
    total = float(detection_seconds or 0.0) + float(overhead_seconds or 0.0)
    return RtoEstimate(total, 0.0, total, "site-loss", notes)


def ack_widening(consumers: int, ack_batch: int) -> int:
    """Extra events a batched-ack consumer model can leave unmirrored.

    A consumer that acks every ``ack_batch`` messages can hold up to ``ack_batch - 1`` consumed but not yet
    acked messages; their acks were never captured, so after a switch the peer still holds them and delivers
    them again (duplicates, not loss). Per-message acks (``ack_batch`` 1) add nothing.
    """
    if consumers <= 0 or ack_batch <= 1:
        return 0
    return consumers * (ack_batch - 1)


@dataclass(frozen=True)
class DuplicatesEstimate:
    """Messages a failover from the source site now would deliver again on the peer (duplicates, not loss).

    ``in_flight``: deliveries handed to consumers on the source and not acknowledged yet (the peer still holds
    them). ``unreplicated_acks``: acks made on the source that have not reached the peer yet (ack rate x
    replication latency, at most the mirror backlog). ``total``: their sum, ``None`` when ``in_flight`` is unknown.
    """

    total: Optional[float]
    in_flight: Optional[int]
    unreplicated_acks: Optional[float]
    basis: Optional[str]
    notes: list = field(default_factory=list)


def replication_rpo(
    latency_p99_seconds: Optional[float],
    newest_event_age_seconds: Optional[float] = None,
    mirrored_per_second: Optional[float] = None,
    backlog_events: Optional[int] = None,
    connected: Optional[bool] = None,
) -> RpoEstimate:
    """Seconds (and messages) of the source's traffic not yet on the peer, from the continuity plugin's
    end-to-end replication latency measured on the peer (docs/plugin.md).

    ``latency_p99_seconds``/``newest_event_age_seconds``/``mirrored_per_second`` are the peer's (target's)
    readings; ``backlog_events`` the source's SNF backlog when known. First rule that applies:

    1. backlog 0 -> 0 (everything captured was confirmed).
    2. mirror disconnected and a newest-event age -> that age: nothing sent after the newest applied message
       reached the peer.
    3. a p99 latency in the window -> it: the messages sent during the last p99 seconds are still on the way.
    4. a newest-event age -> it, as an upper bound (the source may just have been idle).
    5. otherwise ``None``.

    ``messages`` = seconds x the rate mirrored messages arrive at (the source's send rate in steady state);
    ``events`` is the backlog as given.
    """
    notes: list = []
    if backlog_events is not None and backlog_events <= 0:
        return RpoEstimate(0, 0.0, 0.0, "empty", [])
    if backlog_events is None:
        notes.append("mirror backlog unknown: estimated from the replication latency alone")
    seconds, basis = None, None
    if connected is False and newest_event_age_seconds is not None:
        seconds, basis = newest_event_age_seconds, "newest_mirrored_event"
    elif latency_p99_seconds is not None:
        seconds, basis = latency_p99_seconds, "replication_latency_p99"
    elif newest_event_age_seconds is not None:
        seconds, basis = newest_event_age_seconds, "newest_mirrored_event"
        notes.append("no replication latency sample in the window: newest mirrored event age used (an upper "
                     "bound: the source may have been idle)")
    else:
        notes.append("no replication latency sample and no mirrored event yet: seconds at risk unknown")
    messages = None
    if seconds is not None and mirrored_per_second is not None:
        messages = seconds * mirrored_per_second
    return RpoEstimate(backlog_events, messages, seconds, basis, notes)


def duplicates_at_risk(
    unacked_deliveries: Optional[int],
    acks_per_second: Optional[float],
    replication_seconds: Optional[float],
    backlog_events: Optional[int] = None,
) -> DuplicatesEstimate:
    """Duplicates a failover from the source site now would cause: deliveries in flight on the source plus its
    acks not yet replicated (source's ack rate x the replication latency to the peer, capped by the backlog).

    Inputs come from the continuity plugin: ``unacked_deliveries`` and ``acks_per_second`` of the source (its
    ack model), ``replication_seconds`` measured on the peer (for example :func:`replication_rpo` seconds).
    """
    notes: list = []
    unreplicated: Optional[float]
    if backlog_events is not None and backlog_events <= 0:
        unreplicated, basis = 0.0, "empty"
    elif acks_per_second is not None and replication_seconds is not None:
        unreplicated, basis = max(0.0, acks_per_second) * max(0.0, replication_seconds), "ack_rate_x_latency"
        if backlog_events is not None and unreplicated > backlog_events:
            unreplicated, basis = float(backlog_events), "backlog"
    else:
        unreplicated, basis = None, None
        notes.append("unreplicated acks unknown: no ack rate or no replication latency")
    if unacked_deliveries is None:
        notes.append("deliveries in flight unknown (no ack model on the source)")
        return DuplicatesEstimate(None, None, unreplicated, basis, notes)
    total = float(unacked_deliveries) + (unreplicated or 0.0)
    if unreplicated is None:
        notes.append("total counts the deliveries in flight only")
    return DuplicatesEstimate(total, int(unacked_deliveries), unreplicated, basis, notes)


def is_excluded_queue(
    name: str,
    internal: Optional[bool] = False,
    temporary: Optional[bool] = False,
    extra_prefixes: Iterable[str] = (),
) -> bool:
    """True for queues that are never mirrored or are broker internals (not part of a site comparison)."""
    if internal or temporary:
        return True
    for prefix in tuple(DEFAULT_EXCLUDED_PREFIXES) + tuple(extra_prefixes):
        if name.startswith(prefix):
            return True
    return False


def address_mirrored(address: str, address_filter: Optional[str]) -> bool:
    """Apply a ``<mirror address-filter>``: comma-separated prefixes, ``!`` excludes, exclusion wins.

    An empty/None filter mirrors everything. With only exclusions, everything else is mirrored; with at least
    one inclusion, an address must match an inclusion.
    """
    if not address_filter:
        return True
    includes, excludes = [], []
    for part in address_filter.split(","):
        part = part.strip()
        if not part:
            continue
        if part.startswith("!"):
            excludes.append(part[1:])
        else:
            includes.append(part)
    if any(address.startswith(p) for p in excludes):
        return False
    if includes:
        return any(address.startswith(p) for p in includes)
    return True


def _queue_count(entry: Any) -> Optional[int]:
    if isinstance(entry, Mapping):
        for key in ("message_count", "MessageCount", "messageCount"):
            if key in entry:
                return _opt_int(entry[key])
        return None
    return _opt_int(entry)


def _queue_flag(entry: Any, *keys: str) -> bool:
    if not isinstance(entry, Mapping):
        return False
    for key in keys:
        value = entry.get(key)
        if isinstance(value, str):
            value = value.lower() == "true"
        if value:
            return True
    return False


def _queue_address(entry: Any, name: str) -> str:
    if isinstance(entry, Mapping):
        for key in ("address", "Address"):
            if entry.get(key):
                return str(entry[key])
    return name


def compare_queues(
    local: Mapping[str, Any],
    peer: Mapping[str, Any],
    tolerance: int = 0,
    exclude_prefixes: Iterable[str] = (),
    include: Optional[Sequence[str]] = None,
    address_filter: Optional[str] = None,
) -> QueueComparison:
    """Compare message counts per queue between two sites.

    ``local``/``peer`` map queue name -> count, or queue name -> mapping with ``message_count`` (or
    ``MessageCount``) and optionally ``address``, ``internal``/``InternalQueue``, ``temporary``/``Temporary``.

    Excluded: internal/temporary queues, :data:`DEFAULT_EXCLUDED_PREFIXES` (mirror SNF, management,
    notifications) plus ``exclude_prefixes``, and queues whose address the mirror ``address_filter`` does
    not mirror. ``include`` (queue names or prefixes ending in ``*``) restricts the comparison.

    A queue present on one side only is a difference (count ``None`` on the missing side). A difference
    within ``tolerance`` messages (in-flight at the sample instant) does not count.
    """
    extra = tuple(exclude_prefixes)
    names = sorted(set(local) | set(peer))
    diffs: list = []
    only_local: list = []
    only_peer: list = []
    compared = 0
    excluded = 0
    for name in names:
        entry = local.get(name, peer.get(name))
        internal = _queue_flag(local.get(name), "internal", "InternalQueue") or _queue_flag(
            peer.get(name), "internal", "InternalQueue")
        temporary = _queue_flag(local.get(name), "temporary", "Temporary") or _queue_flag(
            peer.get(name), "temporary", "Temporary")
        if is_excluded_queue(name, internal, temporary, extra) or not address_mirrored(
                _queue_address(entry, name), address_filter) or (include is not None and not _selected(name, include)):
            excluded += 1
            continue
        compared += 1
        lc = _queue_count(local[name]) if name in local else None
        pc = _queue_count(peer[name]) if name in peer else None
        if name not in peer:
            only_local.append(name)
        if name not in local:
            only_peer.append(name)
        if lc is None or pc is None:
            if name in local and name in peer and lc is None and pc is None:
                continue  # both unknown: nothing to compare, reported by the caller's notes
            diffs.append({"queue": name, "local": lc, "peer": pc, "delta": None})
            continue
        if abs(lc - pc) > tolerance:
            diffs.append({"queue": name, "local": lc, "peer": pc, "delta": lc - pc})
    return QueueComparison(not diffs, compared, diffs, excluded, only_local, only_peer)


def _selected(name: str, include: Sequence[str]) -> bool:
    for pattern in include:
        if pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


def mirror_connection_of(queue_name: str) -> Optional[str]:
    """Connection name of an SNF queue name (``$ACTIVEMQ_ARTEMIS_MIRROR_DC2`` -> ``DC2``), else ``None``."""
    if queue_name.startswith(MIRROR_QUEUE_PREFIX):
        return queue_name[len(MIRROR_QUEUE_PREFIX):] or None
    return None


def snf_queue_name(connection: str) -> str:
    """SNF queue (and address) name for a mirror broker connection."""
    return MIRROR_QUEUE_PREFIX + connection


def assess(
    prev: Optional[SnfSample],
    cur: Optional[SnfSample],
    *,
    connected: Optional[bool] = None,
    started: Optional[bool] = None,
    pending_acks: Optional[int] = None,
    comparison: Optional[QueueComparison] = None,
    overhead_seconds: float = 0.0,
    assumed_drain_rate: Optional[float] = None,
    client_send_rate: Optional[float] = None,
    disconnected_for: Optional[float] = None,
    consumers: int = 0,
    ack_batch: int = 1,
) -> dict:
    """One lag assessment of a mirror connection, as a plain dict with the evidence ``lag_sample`` fields.

    Keys: ``started``, ``connected``, ``backlog``, ``delivering``, ``pending_acks``, ``add_rate``,
    ``drain_rate``, ``lag_seconds``, ``first_message_age_seconds`` (plausible only), ``rpo_events_est``,
    ``rpo_messages_est``, ``rpo_seconds_est``, ``rpo_basis``, ``duplicates_at_risk`` (batched acks),
    ``rto_seconds_est``, ``rto_basis``, ``queue_diff_count``, ``queue_diffs``, ``notes``. The caller adds
    ``source``, ``site``, ``peer``, ``connection``, ``reachable`` and ``role``.

    ``prev`` may be ``None`` (a single sample): rates, and therefore ``lag_seconds`` while the backlog is not
    empty, are then ``None``.
    """
    notes: list = []
    cur_backlog = backlog(cur)
    rates = Rates(None, None, None, None, "one sample only")
    if prev is not None and cur is not None:
        rates = compute_rates(prev, cur)
    if rates.reason and cur_backlog:
        notes.append("rates: " + rates.reason)
    if cur is None or cur_backlog is None:
        notes.append("backlog unknown: no SNF queue reading (Artemis < 2.32 has no SNF queue MBean)")
    now_ms = cur.ts * 1000.0 if cur is not None else None
    age = None
    if cur is not None:
        age = plausible_age_seconds(cur.first_message_age_ms, cur.first_message_timestamp_ms, now_ms)
        if cur.first_message_age_ms is not None and age is None:
            notes.append("FirstMessageAge ignored: not a plausible age (epoch-sized or timestamp 0)")
    lag = lag_seconds(cur_backlog, rates.drain_rate, rates.add_rate)
    if lag is None and cur_backlog:
        if connected is False:
            notes.append("lag unbounded: mirror disconnected while the backlog is not empty")
        elif rates.drain_rate is not None:
            notes.append("lag unbounded: the backlog is not draining")
    rpo = rpo_estimate(cur_backlog, rates.add_rate, age, send_share(client_send_rate, rates.add_rate),
                       connected, disconnected_for)
    rto = rto_estimate(cur_backlog, rates.drain_rate if connected is not False else None, overhead_seconds,
                       assumed_drain_rate=assumed_drain_rate)
    notes.extend(n for n in rpo.notes + rto.notes if n not in notes)
    return {
        "started": started,
        "connected": connected,
        "backlog": cur_backlog,
        "delivering": cur.delivering_count if cur is not None else None,
        "pending_acks": pending_acks,
        "add_rate": rates.add_rate,
        "drain_rate": rates.drain_rate,
        "lag_seconds": lag,
        "first_message_age_seconds": age,
        "rpo_events_est": rpo.events,
        "rpo_messages_est": rpo.messages,
        "rpo_seconds_est": rpo.seconds,
        "rpo_basis": rpo.basis,
        "duplicates_at_risk": ack_widening(consumers, ack_batch),
        "rto_seconds_est": rto.seconds,
        "rto_basis": rto.basis,
        "queue_diff_count": comparison.diff_count if comparison is not None else None,
        "queue_diffs": list(comparison.diffs) if comparison is not None else [],
        "notes": notes,
    }


#: Nullable fields of an evidence ``lag_sample`` record: evidence.py's list (the record format is defined there).
LAG_SAMPLE_FIELDS = evidence.LAG_SAMPLE_FIELDS


def lag_sample_fields(assessment: Mapping[str, Any], *, source: str, site: str, reachable: bool = True,
                      peer: Optional[str] = None, connection: Optional[str] = None,
                      passive_consumers: Optional[int] = None, role: Optional[str] = None,
                      plugin_estimates: Optional[Mapping[str, Any]] = None) -> dict:
    """The fields of an evidence ``lag_sample`` record from an :func:`assess` result (without ``schema``,
    ``kind``, ``run_id``, ``ts``): pass them to ``evidence.lag_sample_record(run_id, **fields)``.

    ``plugin_estimates`` (``site_state.plugin_estimates``, ``None`` without the continuity plugin) gives
    ``duplicates_at_risk_est`` (:func:`duplicates_at_risk`) and ``replication_latency_p99_seconds`` (measured on
    the peer); both are null without it."""
    fields = {name: assessment.get(name) for name in LAG_SAMPLE_FIELDS}
    fields.update(peer=peer, connection=connection, passive_consumers=passive_consumers, role=role)
    plugin = plugin_estimates or {}
    fields.update(duplicates_at_risk_est=plugin.get("duplicates_at_risk_est"),
                  replication_latency_p99_seconds=plugin.get("replication_latency_p99_seconds"))
    # built by evidence.py's builder (placeholder run id and time, dropped): one definition of the record
    rec = evidence.lag_sample_record("-", source, site, reachable, ts=0.0, notes=list(assessment.get("notes") or []),
                                     queue_diffs=list(assessment.get("queue_diffs") or []), **fields)
    return {k: v for k, v in rec.items() if k not in evidence.COMMON_FIELDS}
