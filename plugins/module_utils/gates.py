# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Pure evaluation of mirror gate conditions over site snapshots, and the wait loop around it.

Used by the ``mirror_wait`` module and by the runbooks. No I/O: snapshots come from
:mod:`site_state` (or any dict of the same shape); :func:`wait_until` takes the sampling function.

Conditions (all optional; only the given ones are checked):

``connected`` (bool)
    every looked-at mirror connection is started and connected (True) / not connected (False).
``max_backlog`` (int)
    SNF ``MessageCount`` of each looked-at direction <= N. Unknown (no SNF reading) fails.
``max_lag`` (float, seconds)
    lag from backlog and drain rate (:func:`lag.lag_seconds`) <= T. Needs the previous snapshot for rates,
    except that an empty backlog is 0 s. Unknown fails.
``max_pending_acks`` (int)
    ``PendingMirrorAcks`` of the mirror TARGET(s) <= N; unknown (Artemis < 2.40, no peer) fails.
``queues_equal`` (bool)
    per-queue message counts equal between site and peer (within ``queue_tolerance``), internal, management
    and mirror queues excluded. Required for a zero-loss claim: real Artemis drops a mirrored ack it cannot
    apply while ``PendingMirrorAcks`` returns to 0.
``no_consumers_on`` (dict ``{site: peer|site|both, queues: [...], prefix: "..."}``)
    no consumer on the selected client queues of that site (default: the peer, i.e. the passive site).

Direction: the site's outgoing mirror(s) are always looked at; with a peer snapshot and ``direction`` "both"
the peer's outgoing mirror(s) too (in sync both ways).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.continuity.artemis.plugins.module_utils import lag
from ansible_collections.continuity.artemis.plugins.module_utils import site_state

CONDITION_NAMES = ("connected", "max_backlog", "max_lag", "max_pending_acks", "queues_equal", "no_consumers_on")


def direction_metrics(snapshot: dict, previous: Optional[dict] = None, connection: Optional[str] = None,
                      target: Optional[dict] = None) -> List[dict]:
    """Per mirror connection of ``snapshot``: started/connected, backlog, rates, lag, target's pending acks."""
    out = []
    if not snapshot.get("reachable", True):
        return [{"site": snapshot.get("site"), "connection": connection, "reachable": False, "started": None,
                 "connected": None, "backlog": None, "lag_seconds": None, "pending_acks": None,
                 "add_rate": None, "drain_rate": None, "notes": ["unreachable: %s" % snapshot.get("error")]}]
    for name in site_state.mirror_connections(snapshot, connection):
        conn = (snapshot.get("connections") or {}).get(name)
        cur = site_state.snf_sample(snapshot, name)
        prev = site_state.snf_sample(previous, name) if previous and previous.get("reachable", True) else None
        pending = None
        if target is not None and target.get("reachable", True):
            pending = target.get("pending_mirror_acks")
        a = lag.assess(prev, cur, connected=conn.get("connected") if conn else None,
                       started=conn.get("started") if conn else None, pending_acks=pending)
        notes = list(a["notes"])
        if conn is None:
            notes.insert(0, "no broker connection named %r on %s" % (name, snapshot.get("broker")))
        out.append({"site": snapshot.get("site") or snapshot.get("broker"), "connection": name, "reachable": True,
                    "exists": conn is not None, "started": a["started"], "connected": a["connected"],
                    "backlog": a["backlog"], "add_rate": a["add_rate"], "drain_rate": a["drain_rate"],
                    "lag_seconds": a["lag_seconds"], "pending_acks": pending, "notes": notes})
    if not out:
        out.append({"site": snapshot.get("site") or snapshot.get("broker"), "connection": None, "reachable": True,
                    "exists": False, "started": None, "connected": None, "backlog": None, "add_rate": None,
                    "drain_rate": None, "lag_seconds": None, "pending_acks": None,
                    "notes": ["no broker connection on %s" % snapshot.get("broker")]})
    return out


def _label(d: dict) -> str:
    return "%s/%s" % (d.get("site"), d.get("connection"))


def _check_max(dirs: List[dict], key: str, limit: float, unit: str = "") -> dict:
    bad = []
    values = {}
    for d in dirs:
        v = d.get(key)
        values[_label(d)] = v
        if v is None:
            why = "unreachable" if not d.get("reachable", True) else (d["notes"][0] if d.get("notes") else "unknown")
            bad.append("%s %s unknown (%s)" % (_label(d), key, why))
        elif v > limit:
            bad.append("%s %s %s%s > %s%s" % (_label(d), key, _fmt(v), unit, limit, unit))
    return {"ok": not bad, "value": values, "limit": limit, "reason": "; ".join(bad) or None}


def _fmt(v: Any) -> str:
    return ("%.3f" % v).rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


def evaluate(conditions: Dict[str, Any], site: dict, peer: Optional[dict] = None, prev_site: Optional[dict] = None,
             prev_peer: Optional[dict] = None, connection: Optional[str] = None,
             peer_connection: Optional[str] = None, direction: str = "both", queue_tolerance: int = 0,
             exclude_prefixes=(), address_filter: Optional[str] = None) -> dict:
    """Evaluate the given conditions once.

    Returns ``{"ok", "failed": [names], "conditions": {name: {"ok", "value", "limit", "reason"}},
    "directions": [direction metrics]}``. A condition whose data is unknown fails with the reason.
    """
    conds = {k: v for k, v in (conditions or {}).items() if v is not None and k in CONDITION_NAMES}
    dirs = direction_metrics(site, prev_site, connection, target=peer)
    if peer is not None and direction == "both":
        dirs += direction_metrics(peer, prev_peer, peer_connection, target=site)
    results: Dict[str, dict] = {}

    if "connected" in conds:
        want = bool(conds["connected"])
        bad = []
        values = {}
        for d in dirs:
            state = bool(d.get("started")) and bool(d.get("connected")) if d.get("connected") is not None else None
            values[_label(d)] = state
            if state is None:
                bad.append("%s connection state unknown%s" % (
                    _label(d), " (unreachable)" if not d.get("reachable", True) else ""))
            elif state != want:
                bad.append("%s is %s" % (_label(d), "connected" if state else
                                         ("stopped" if d.get("started") is False else "not connected")))
        results["connected"] = {"ok": not bad, "value": values, "limit": want, "reason": "; ".join(bad) or None}

    if "max_backlog" in conds:
        results["max_backlog"] = _check_max(dirs, "backlog", conds["max_backlog"], " events")

    if "max_lag" in conds:
        results["max_lag"] = _check_max(dirs, "lag_seconds", float(conds["max_lag"]), " s")

    if "max_pending_acks" in conds:
        if peer is None:
            results["max_pending_acks"] = {"ok": False, "value": None, "limit": conds["max_pending_acks"],
                                           "reason": "pending acks are read on the mirror target: give the peer"}
        else:
            pend = list(dirs)
            for d in pend:
                if d.get("pending_acks") is None and d.get("reachable", True):
                    d.setdefault("notes", []).insert(0, "PendingMirrorAcks of the target unknown (Artemis < 2.40?)")
            results["max_pending_acks"] = _check_max(pend, "pending_acks", conds["max_pending_acks"])

    if conds.get("queues_equal"):
        if peer is None:
            results["queues_equal"] = {"ok": False, "value": None, "limit": True,
                                       "reason": "queue comparison needs the peer"}
        elif not site.get("reachable", True) or not peer.get("reachable", True):
            results["queues_equal"] = {"ok": False, "value": None, "limit": True,
                                       "reason": "a site is unreachable"}
        else:
            cmp = site_state.compare_sites(site, peer, tolerance=queue_tolerance, exclude_prefixes=exclude_prefixes,
                                           address_filter=address_filter)
            reason = None
            if not cmp.equal:
                shown = ", ".join("%s %s!=%s" % (d["queue"], d["local"], d["peer"]) for d in cmp.diffs[:10])
                reason = "%d queue(s) differ: %s%s" % (cmp.diff_count, shown, " ..." if cmp.diff_count > 10 else "")
            results["queues_equal"] = {"ok": cmp.equal, "value": {"compared": cmp.compared,
                                                                  "diff_count": cmp.diff_count,
                                                                  "diffs": cmp.diffs[:50]},
                                       "limit": queue_tolerance, "reason": reason}

    if "no_consumers_on" in conds:
        spec = conds["no_consumers_on"] or {}
        which = spec.get("site", "peer")
        snaps = []
        if which in ("site", "both"):
            snaps.append(site)
        if which in ("peer", "both"):
            if peer is None:
                results["no_consumers_on"] = {"ok": False, "value": None, "limit": 0,
                                              "reason": "no_consumers_on site=%s needs the peer" % which}
                snaps = []
            else:
                snaps.append(peer)
        if "no_consumers_on" not in results:
            found: Dict[str, int] = {}
            bad = []
            for s in snaps:
                label = s.get("site") or s.get("broker")
                if not s.get("reachable", True):
                    bad.append("%s unreachable" % label)
                    continue
                for q, n in site_state.consumers_on(s, spec.get("queues"), spec.get("prefix")).items():
                    found["%s/%s" % (label, q)] = n
            if found:
                bad.append("consumers on " + ", ".join("%s (%d)" % kv for kv in sorted(found.items())))
            results["no_consumers_on"] = {"ok": not bad, "value": found, "limit": 0, "reason": "; ".join(bad) or None}

    failed = [name for name in CONDITION_NAMES if name in results and not results[name]["ok"]]
    return {"ok": not failed, "failed": failed, "conditions": results, "directions": dirs}


class StabilityTracker:
    """Counts consecutive evaluations where every condition held (the ``stable_samples`` rule)."""

    def __init__(self, stable_samples: int = 1):
        self.required = max(1, int(stable_samples))
        self.streak = 0

    def update(self, evaluation: dict) -> bool:
        self.streak = self.streak + 1 if evaluation["ok"] else 0
        return self.streak >= self.required


def sample_record(evaluation: dict, ts: float, elapsed: float, streak: int) -> dict:
    """Compact per-sample record returned by ``mirror_wait`` and written to phase evidence."""
    return {
        "ts": ts,
        "elapsed": round(elapsed, 3),
        "ok": evaluation["ok"],
        "stable_streak": streak,
        "failed": list(evaluation["failed"]),
        "conditions": evaluation["conditions"],
        "directions": [{k: d.get(k) for k in ("site", "connection", "reachable", "started", "connected", "backlog",
                                              "add_rate", "drain_rate", "lag_seconds", "pending_acks", "notes")}
                       for d in evaluation["directions"]],
    }


def wait_until(take_sample: Callable[[], tuple], evaluate_sample: Callable[[tuple, Optional[tuple]], dict],
               wait_timeout: float, wait_sleep: float, stable_samples: int = 1, wait: bool = True,
               clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
               sleeper: Callable[[float], None] = time.sleep, max_samples_kept: int = 1000,
               stop_early: Optional[Callable[[dict, float], Optional[str]]] = None) -> dict:
    """Sample and evaluate until the conditions held for ``stable_samples`` consecutive samples.

    ``take_sample()`` returns an opaque sample (e.g. ``(site_snapshot, peer_snapshot)``);
    ``evaluate_sample(sample, previous_sample)`` returns an :func:`evaluate` result. With ``wait`` False one
    sample is taken. The loop never sleeps past the deadline: a last sample is taken at the deadline.
    ``stop_early(evaluation, elapsed)`` may end the wait before the deadline: it returns why (waiting longer would
    not change the outcome), or None.

    Returns ``{"ok", "timed_out", "elapsed", "samples": [sample_record...], "last", "failed", "reason",
    "stopped_early"}`` (``stopped_early``: the reason :func:`stop_early` gave, else None).
    """
    tracker = StabilityTracker(stable_samples)
    start = clock()
    deadline = start + max(0.0, float(wait_timeout))
    records: List[dict] = []
    previous = None
    while True:
        sample = take_sample()
        ev = evaluate_sample(sample, previous)
        previous = sample
        stable = tracker.update(ev)
        now = clock()
        rec = sample_record(ev, wall(), now - start, tracker.streak)
        records.append(rec)
        if len(records) > max_samples_kept:
            del records[1]  # keep the first sample and the most recent ones
        if stable:
            return {"ok": True, "timed_out": False, "elapsed": now - start, "samples": records, "last": rec,
                    "failed": [], "reason": None, "stopped_early": None}
        early = stop_early(ev, now - start) if stop_early is not None and wait and not ev["ok"] else None
        if early:
            reasons = ["%s: %s" % (n, ev["conditions"][n]["reason"]) for n in rec["failed"]]
            return {"ok": False, "timed_out": False, "elapsed": now - start, "samples": records, "last": rec,
                    "failed": rec["failed"], "reason": "; ".join(reasons), "stopped_early": early}
        if not wait or now >= deadline:
            failed = rec["failed"] or (["stable_samples"] if ev["ok"] else [])
            reasons = ["%s: %s" % (n, ev["conditions"][n]["reason"]) for n in rec["failed"]]
            if ev["ok"]:
                reasons.append("conditions held for %d of %d required consecutive samples"
                               % (tracker.streak, tracker.required))
            return {"ok": False, "timed_out": bool(wait), "elapsed": now - start, "samples": records, "last": rec,
                    "failed": failed, "reason": "; ".join(reasons), "stopped_early": None}
        sleeper(max(0.0, min(float(wait_sleep), deadline - now)))
