"""The measured runbook overhead that the RTO estimate adds to the drain time.

RTO estimate = backlog / drain rate (the shared ``lag.rto_estimate``) + the time a swapover spends on
everything else (quiesce, gates, activation, clients reconnecting). That overhead is measured, not guessed, by
the collection's one definition (``rto_overhead``, the pipeline uses it too): a swapover's observed RTO (its
first phase start to the first message received on the new active site) minus the drain time its backlog
needed; the overhead in use is the largest of the newest three. The swapovers come from the rehearsal
evidence (phase records of the ``swapover`` runbook, the traffic ledgers' ``received`` records, lag samples)
or from the pipeline's summary (its switches' ``rto_overhead_observed``), else ``rto.overhead_seconds`` of the
configuration applies.

``swapover_runs`` / ``overhead_of`` are pure (records in, numbers out); ``OverheadSource`` does the file
reading and re-reads at most once a minute.
"""

from __future__ import annotations

import bisect
import glob
import json
import logging
import os
import time
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from ansible_collections.continuity.artemis.plugins.module_utils import rto_overhead as overhead_model

LOG = logging.getLogger("continuity_agent.rto")
SWAPOVER = "swapover"


@dataclass(frozen=True)
class SwapoverRun:
    run_id: str
    start_ts: float
    end_ts: float
    drain_seconds: float    # backlog / drain rate of the old site's last lag sample before the run (0 without one)
    old_site: str | None = None
    new_site: str | None = None
    first_recv_ts: float | None = None  # first message received on the new site after the start (None: none)

    @property
    def duration(self) -> float:
        """The runbook's phase span (informational: the RTO ends at the first receive, not the last phase)."""
        return self.end_ts - self.start_ts

    @property
    def rto_observed(self) -> float | None:
        return None if self.first_recv_ts is None else self.first_recv_ts - self.start_ts

    @property
    def overhead(self) -> float | None:
        return overhead_model.switch_overhead(self.rto_observed, self.drain_seconds)


def drain_estimate_before(records: Iterable[dict], ts: float, window: float = 60.0, site: str | None = None) -> float:
    """Drain time (backlog / drain rate, summed over connections) from the newest lag samples taken in the
    ``window`` seconds before ``ts`` (of ``site`` only when given: the old active site, whose backlog a swapover
    drains); 0.0 when there is none or the backlog was empty."""
    newest: dict[tuple, dict] = {}
    for rec in records:
        if rec.get("kind") != "lag_sample" or not rec.get("reachable"):
            continue
        if site is not None and rec.get("site") != site:
            continue
        rts = rec.get("ts") or 0.0
        if not ts - window <= rts <= ts:
            continue
        key = (rec.get("site"), rec.get("connection"))
        if key not in newest or newest[key]["ts"] < rts:
            newest[key] = rec
    total = 0.0
    for rec in newest.values():
        if rec.get("backlog") and rec.get("drain_rate"):
            total += rec["backlog"] / rec["drain_rate"]
    return total


def _add_receive(receives: dict, rec: dict) -> None:
    if rec.get("kind") == "received" and rec.get("recv_ts") is not None and rec.get("site") is not None:
        receives.setdefault((rec.get("run_id") or "", rec["site"]), array("d")).append(float(rec["recv_ts"]))


def receive_times(records: Iterable[dict]) -> dict[tuple[str, str], Sequence[float]]:
    """(run id, site) -> ``recv_ts`` of every ``received`` record (the traffic ledgers)."""
    out: dict = {}
    for rec in records:
        _add_receive(out, rec)
    return out


def swapover_runs(records: Iterable[dict],
                  receives: Mapping[tuple[str, str], Sequence[float]] | None = None) -> list[SwapoverRun]:
    """Completed swapovers found in phase records, oldest first, with their first receive on the new site.

    Executions are told apart by the collection's one rule (``rto_overhead.executions``: a phase name seen again
    starts the next one). Executions with an unfinished phase (``end_ts`` null) or a failed/rolled back phase are
    skipped: they did not measure a complete switch. The first receive is the first ``recv_ts`` of the same run on
    the new active site (the last ``roles_after``) at or after the start and before the run's next runbook
    execution starts (a later switch, the failover drill): a receive after that measures another switch, and a
    receive of another run another traffic altogether. ``receives``: :func:`receive_times`, by default taken from
    ``records``. ``run_id`` of a second swapover in the same run is suffixed ``#2``, ``#3``...
    """
    records = list(records)
    if receives is None:
        receives = receive_times(records)
    found = []
    starts: dict[str, list[float]] = {}  # run id -> start of every execution of any runbook
    for e in overhead_model.executions(r for r in records if r.get("kind") == "phase"):
        start = min(float(p["start_ts"]) for p in e["phases"])
        starts.setdefault(e["run_id"], []).append(start)
        if e["runbook"] != SWAPOVER or not overhead_model.completed(e):
            continue
        end = max(float(p["end_ts"]) for p in e["phases"])
        old, new = overhead_model.sites_switched(e)
        drain = drain_estimate_before(records, start, site=old)
        found.append((e["run_id"], start, end, min(drain, end - start), old, new))
    found.sort(key=lambda r: r[1])
    sorted_times = {key: sorted(times) for key, times in receives.items()}
    runs: list[SwapoverRun] = []
    for run_id, start, end, drain, old, new in found:
        later = [t for t in starts.get(run_id, []) if t > start]
        first = None
        times = sorted_times.get((run_id, new)) or []
        k = bisect.bisect_left(times, start)
        if k < len(times) and (not later or times[k] < min(later)):
            first = times[k]
        n = sum(1 for r in runs if r.run_id.split("#")[0] == run_id)
        runs.append(SwapoverRun(run_id if n == 0 else f"{run_id}#{n + 1}", start, end, drain, old, new, first))
    return runs


def read_evidence(evidence_dir: str, max_files: int = 500) -> tuple[list[dict], dict]:
    """Phase and lag sample records, and the receive times per run and site (:func:`receive_times`; the ledgers
    can hold millions of records, so only their run id, ``site`` and ``recv_ts`` are kept), from
    ``<evidence_dir>/**.jsonl`` (newest files first, at most ``max_files``)."""
    files = glob.glob(os.path.join(evidence_dir, "**", "*.jsonl"), recursive=True)
    files.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    out: list[dict] = []
    receives: dict = {}
    for path in files[:max_files]:
        try:
            for _number, rec in evidence.iter_records(path):
                if rec.get("kind") in ("phase", "lag_sample"):
                    out.append(rec)
                else:
                    _add_receive(receives, rec)
        except (OSError, ValueError, evidence.EvidenceError) as exc:
            LOG.warning("skipping unreadable evidence file %s: %s", path, exc)
    return out, receives


def overhead_of(runs: list[SwapoverRun], recent: int = overhead_model.RECENT_SWITCHES) -> float | None:
    """The overhead in use (``rto_overhead.overhead_estimate``): the largest observed overhead of the ``recent``
    newest swapovers that have one; None when none was observed."""
    return overhead_model.overhead_estimate([r.overhead for r in runs], recent)


def overhead_from_summary(doc: object) -> float | None:
    """The overhead from a pipeline summary (``summary.json``): ``rto_overhead.overhead_estimate`` over its
    swapovers' ``rto_overhead_observed`` (computed there by the same definition), oldest first."""
    switches = doc.get("switches") if isinstance(doc, dict) else None
    if not isinstance(switches, list):
        return None
    rows = sorted((s for s in switches if isinstance(s, dict) and s.get("kind") == SWAPOVER
                   and isinstance(s.get("start_ts"), (int, float))), key=lambda s: s["start_ts"])
    history = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None
               for v in (s.get("rto_overhead_observed") for s in rows)]
    return overhead_model.overhead_estimate(history)


class OverheadSource:
    """Current overhead and where it came from; re-reads the files at most every ``refresh`` seconds."""

    def __init__(self, fixed: float = 0.0, evidence_dir: str | None = None, summary_file: str | None = None,
                 refresh: float = 60.0, clock=time.monotonic):
        self.fixed = fixed
        self.evidence_dir = evidence_dir
        self.summary_file = summary_file
        self.refresh = refresh
        self._clock = clock
        self._next = 0.0
        self.value = fixed
        self.source = "config"
        self.runs: list[SwapoverRun] = []

    def current(self) -> tuple[float, str]:
        now = self._clock()
        if now >= self._next:
            self._next = now + self.refresh
            self._reload()
        return self.value, self.source

    def _reload(self) -> None:
        value, source = self.fixed, "config"
        if self.summary_file and os.path.exists(self.summary_file):
            try:
                with open(self.summary_file, encoding="utf-8") as fh:
                    found = overhead_from_summary(json.load(fh))
                if found is not None:
                    value, source = found, "summary"
            except (OSError, ValueError) as exc:
                LOG.warning("cannot read rto.summary_file %s: %s", self.summary_file, exc)
        if self.evidence_dir and os.path.isdir(self.evidence_dir):
            records, receives = read_evidence(self.evidence_dir)
            self.runs = swapover_runs(records, receives)
            found = overhead_of(self.runs)
            if found is not None:
                value, source = found, "evidence"
        self.value, self.source = value, source
