"""What the agent writes to disk: rotating evidence files of ``lag_sample`` records, and one
``last-known.json`` per site for failover.

Records are built with the shared ``evidence.lag_sample_record`` and written by the shared ``EvidenceWriter``
(1 s flush); this module only adds size-based rotation and the atomic last-known file.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import tempfile
import threading
import time

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from continuity_agent.model import Cycle, DirectionView, SiteView

LOG = logging.getLogger("continuity_agent.output")
LAST_KNOWN_SCHEMA = "continuity.artemis.agent.last-known/1"
FILE_PREFIX = "lag-agent-"


def lag_record(run_id: str, d: DirectionView) -> dict:
    """The evidence record of one direction (``ts`` = when its values were sampled)."""
    fields = dict(d.lag_sample)
    source = fields.pop("source", "agent")
    site = fields.pop("site", d.site)
    reachable = fields.pop("reachable", not d.stale)
    queue_diffs = fields.pop("queue_diffs", None)
    notes = fields.pop("notes", None)
    fields = {k: v for k, v in fields.items() if k in evidence.LAG_SAMPLE_FIELDS}
    return evidence.lag_sample_record(run_id, source, site, reachable, queue_diffs=queue_diffs, notes=notes,
                                      ts=d.ts, **fields)


def site_unreachable_record(run_id: str, v: SiteView, ts: float) -> dict:
    """A site that cannot be read and has no known mirror (never reachable since the agent started)."""
    return evidence.lag_sample_record(run_id, "agent", v.site, False, peer=v.peer, role=v.role,
                                      notes=["site unreachable: %s" % (v.error or "unknown error")], ts=ts)


class RotatingEvidence:
    """``<dir>/<run_id>/lag-agent-<n>.jsonl``; a new file past ``max_bytes``, the oldest removed past ``keep``."""

    def __init__(self, directory: str, run_id: str, max_bytes: int, keep: int):
        self.run_dir = evidence.run_dir(directory, run_id, create=True)
        self.run_id = run_id
        self.max_bytes = max_bytes
        self.keep = keep
        self.writer: evidence.EvidenceWriter | None = None
        self._lock = threading.Lock()  # the sampling loop and the canary thread both write
        self.index = self._last_index()
        self._open(self.index + 1)

    def _files(self) -> list[str]:
        return sorted(glob.glob(os.path.join(self.run_dir, FILE_PREFIX + "*.jsonl")))

    def _last_index(self) -> int:
        best = 0
        for path in self._files():
            stem = os.path.basename(path)[len(FILE_PREFIX):-len(".jsonl")]
            if stem.isdigit():
                best = max(best, int(stem))
        return best

    def _open(self, index: int) -> None:
        # A restart starts a new file: the previous process' last line may be torn, and appending behind a
        # torn line would make it a bad line in the middle of a file.
        self.index = index
        path = os.path.join(self.run_dir, f"{FILE_PREFIX}{index:06d}.jsonl")
        self.writer = evidence.EvidenceWriter(path, flush_interval=1.0)
        self._prune()

    def _prune(self) -> None:
        files = self._files()
        for path in files[: max(0, len(files) - self.keep)]:
            try:
                os.unlink(path)
            except OSError as exc:
                LOG.warning("cannot remove old evidence file %s: %s", path, exc.strerror)

    @property
    def path(self) -> str:
        assert self.writer is not None
        return self.writer.path

    def write(self, records: list[dict]) -> None:
        with self._lock:
            assert self.writer is not None
            for rec in records:
                self.writer.write(rec)
            self.writer.flush()
            if os.path.getsize(self.writer.path) >= self.max_bytes:
                self.writer.close()
                self._open(self.index + 1)

    def close(self) -> None:
        with self._lock:
            if self.writer is not None:
                self.writer.close()


def atomic_write_json(path: str, doc: dict) -> None:
    """Write-then-rename in the same directory: a reader sees the old or the new file, never half of one."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".last-known.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o640)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def last_known_path(state_dir: str, site: str) -> str:
    return os.path.join(state_dir, site, "last-known.json")


def last_known_doc(run_id: str, view: SiteView, directions: list[DirectionView], written: float) -> dict:
    """The state failover needs when ``view.site`` is suddenly gone (see docs/agent.md)."""
    outgoing = [d for d in directions if d.site == view.site and not d.stale]
    return {
        "schema": LAST_KNOWN_SCHEMA,
        "site": view.site,
        "peer": view.peer,
        "broker": view.broker,
        "version": view.version,
        "sample_ts": view.ts,
        "written_ts": written,
        "role": view.role,
        "pending_mirror_acks": view.pending_mirror_acks,
        "client_consumers": view.client_consumers,
        "at_risk_events": _sum(d.rpo_events_est for d in outgoing),
        "at_risk_messages": _sum(d.rpo_messages_est for d in outgoing),
        "at_risk_seconds": _max(d.rpo_seconds_est for d in outgoing),
        # from the continuity plugin (null without it): what a failover from this site would deliver twice
        "duplicates_at_risk": _sum((d.plugin_estimates or {}).get("duplicates_at_risk_est") for d in outgoing),
        "plugin_site_role": (view.plugin or {}).get("site_role"),
        "lag_samples": [lag_record(run_id, d) for d in outgoing],
    }


def _sum(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def _max(values) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


class Outputs:
    """Evidence + last-known files for one agent; both optional (``None`` directory = off)."""

    def __init__(self, evidence_dir: str | None, run_id: str, max_bytes: int, keep: int, state_dir: str | None):
        self.run_id = run_id
        self.evidence = RotatingEvidence(evidence_dir, run_id, max_bytes, keep) if evidence_dir else None
        self.state_dir = state_dir

    def records(self, cycle: Cycle) -> list[dict]:
        recs = [lag_record(self.run_id, d) for d in cycle.directions]
        with_direction = {d.site for d in cycle.directions}
        recs.extend(site_unreachable_record(self.run_id, v, cycle.ts) for v in cycle.sites.values()
                    if not v.reachable and v.site not in with_direction)
        return recs

    def write(self, cycle: Cycle) -> None:
        if self.evidence is not None:
            self.evidence.write(self.records(cycle))
        if self.state_dir:
            now = time.time()
            for view in cycle.sites.values():
                # Only a reachable sample replaces last-known.json: when a site dies, the file keeps its last
                # state, which is exactly what failover needs (what it had not replicated yet).
                if view.reachable:
                    atomic_write_json(last_known_path(self.state_dir, view.site),
                                      last_known_doc(self.run_id, view, cycle.directions, now))

    def close(self) -> None:
        if self.evidence is not None:
            self.evidence.close()
