"""The measured runbook overhead that the RTO estimate adds to the drain time.

RTO estimate = backlog / drain rate (the shared ``lag.rto_estimate``) + the time a swapover spends on
everything else (quiesce, gates, activation). That overhead is measured, not guessed: it comes from the last
rehearsal's evidence (phase records of the ``swapover`` runbook) or from the pipeline's summary, else from
``rto.overhead_seconds`` in the configuration.

``swapover_runs`` / ``overhead_from_phases`` are pure (records in, numbers out); ``OverheadSource`` does the
file reading and re-reads at most once a minute.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ansible_collections.continuity.artemis.plugins.module_utils import evidence

LOG = logging.getLogger("continuity_agent.rto")
SWAPOVER = "swapover"


@dataclass(frozen=True)
class SwapoverRun:
    run_id: str
    start_ts: float
    end_ts: float
    drain_seconds: float    # backlog / drain rate of the last lag sample before the run (0 without one)

    @property
    def duration(self) -> float:
        return self.end_ts - self.start_ts

    @property
    def overhead(self) -> float:
        return max(0.0, self.duration - self.drain_seconds)


def drain_estimate_before(records: Iterable[dict], ts: float, window: float = 60.0) -> float:
    """Drain time (backlog / drain rate, summed over connections) from the newest lag samples taken in the
    ``window`` seconds before ``ts``; 0.0 when there is none or the backlog was empty."""
    newest: dict[tuple, dict] = {}
    for rec in records:
        if rec.get("kind") != "lag_sample" or not rec.get("reachable"):
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


def swapover_runs(records: Iterable[dict]) -> list[SwapoverRun]:
    """Completed swapovers found in phase records, oldest first.

    A run spans its first phase start to its last phase end. Its overhead is that duration minus the time the
    backlog it started with needed to drain (estimated from the lag samples just before it): the drain phase of
    a runbook also waits for stable gate samples, which is overhead even at an empty backlog, so phase names
    are not used to split the two. Runs with an unfinished phase (``end_ts`` null) or a failed/rolled back
    phase are skipped: they did not measure a complete switch. ``run_id`` of a second swapover in the same run
    is suffixed ``#2``, ``#3``...
    """
    records = list(records)
    by_run: dict[str, list[dict]] = {}
    for rec in records:
        if rec.get("kind") == "phase" and rec.get("runbook") == SWAPOVER and rec.get("start_ts") is not None:
            by_run.setdefault(rec.get("run_id") or "", []).append(rec)
    # A rehearsal run may hold several swapovers (and failover/failback between them): a phase name seen again
    # starts the next execution.
    executions: list[tuple[str, list[dict]]] = []
    for run_id, phases in by_run.items():
        current: list[dict] = []
        for p in sorted(phases, key=lambda r: r["start_ts"]):
            if any(q.get("phase") == p.get("phase") for q in current):
                executions.append((run_id, current))
                current = []
            current.append(p)
        executions.append((run_id, current))
    runs = []
    for run_id, phases in executions:
        if any(p.get("end_ts") is None or p.get("decision") in ("fail", "rollback") for p in phases):
            continue
        start = min(float(p["start_ts"]) for p in phases)
        end = max(float(p["end_ts"]) for p in phases)
        drain = drain_estimate_before(records, start)
        n = sum(1 for r in runs if r.run_id.split("#")[0] == run_id)
        runs.append(SwapoverRun(run_id if n == 0 else f"{run_id}#{n + 1}", start, end, min(drain, end - start)))
    return sorted(runs, key=lambda r: r.end_ts)


def read_records(evidence_dir: str, kinds: tuple = ("phase", "lag_sample"), max_files: int = 500) -> list[dict]:
    """Records of the given kinds from ``<evidence_dir>/**.jsonl`` (newest files first, at most ``max_files``)."""
    files = glob.glob(os.path.join(evidence_dir, "**", "*.jsonl"), recursive=True)
    files.sort(key=lambda p: os.path.getmtime(p), reverse=True)
    out = []
    for path in files[:max_files]:
        try:
            for _number, rec in evidence.iter_records(path):
                if rec.get("kind") in kinds:
                    out.append(rec)
        except (OSError, ValueError, evidence.EvidenceError) as exc:
            LOG.warning("skipping unreadable evidence file %s: %s", path, exc)
    return out


#: How many of the newest swapovers the overhead is taken from.
RECENT_RUNS = 3


def overhead_of(runs: list[SwapoverRun], recent: int = RECENT_RUNS) -> float:
    """The largest overhead of the ``recent`` newest swapovers: runbook overhead varies from run to run (a
    quiesce that waits for clients, a slow activation), and an RTO estimate for an SLA must not rest on the
    luckiest run."""
    return max(r.overhead for r in runs[-recent:])


def overhead_from_summary(doc: object) -> float | None:
    """``rto_seconds_observed`` of the newest run in a pipeline summary (a run summary or ``{"runs": [...]}``).

    The observed RTO includes the drain at that moment; in a rehearsal at steady load the drain is a fraction
    of a second, so the value is used as the overhead (slightly pessimistic, the safe direction).
    """
    rows: list = []
    if isinstance(doc, dict):
        rows = doc.get("runs") if isinstance(doc.get("runs"), list) else [doc]
    elif isinstance(doc, list):
        rows = doc
    best = None
    for row in rows:
        if not isinstance(row, dict):
            continue
        value = row.get("rto_seconds_observed")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            key = row.get("end_ts") or 0
            if best is None or key >= best[0]:
                best = (key, float(value))
    return best[1] if best else None


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
            self.runs = swapover_runs(read_records(self.evidence_dir))
            if self.runs:
                value, source = overhead_of(self.runs), "evidence"
        self.value, self.source = value, source
