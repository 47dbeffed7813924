"""Helpers for the traffic tool tests: run the CLI, read and reconcile ledgers, validate every record.

The reconciliation here is deliberately simple (the real analysis is the pipeline's job): lost = accepted
msg_id never received; duplicates = msg_id acknowledged more than once.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.continuity.artemis.plugins.module_utils import evidence

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "plugins" / "module_utils"))
from amqp_support import MiniBroker, free_port  # noqa: E402,F401  (re-exported for the tests)

PY = sys.executable


def traffic_cmd(*args: str) -> list[str]:
    return [PY, "-m", "continuity_traffic", *args]


def run_traffic(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(traffic_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def spawn_traffic(*args: str, log: Path, env: dict | None = None) -> subprocess.Popen:
    with open(log, "ab") as fh:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(traffic_cmd(*args), stdout=fh, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})


def wait_for(predicate, timeout: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def read_status(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Ledgers:
    sent: list[dict] = field(default_factory=list)
    received: list[dict] = field(default_factory=list)
    ends: dict[str, dict | None] = field(default_factory=dict)   # file -> its ledger_end (None = cut off)
    invalid: list[str] = field(default_factory=list)
    records: int = 0


def load_ledgers(run_dir: Path) -> Ledgers:
    """Every record of every *.jsonl in run_dir, each validated against the schema (jsonschema backend)."""
    out = Ledgers()
    for path in sorted(glob.glob(str(run_dir / "*.jsonl"))):
        end = None
        for number, rec in evidence.iter_records(path):
            out.records += 1
            problems = evidence.validate(rec, backend="jsonschema")
            if problems:
                out.invalid.append(f"{path}:{number}: {problems}")
            kind = rec["kind"]
            if kind == "sent":
                out.sent.append(rec)
            elif kind == "received":
                out.received.append(rec)
            elif kind == "ledger_end":
                end = rec
        out.ends[os.path.basename(path)] = end
    return out


@dataclass
class Reconciliation:
    accepted: int
    received_ids: int
    lost: list[str]
    duplicates: dict[str, int]           # msg_id -> times acknowledged (>1)
    in_doubt_only: list[str]
    redelivered_records: int
    unacked_records: int


def reconcile(led: Ledgers) -> Reconciliation:
    outcomes: dict[str, set[str]] = collections.defaultdict(set)
    for rec in led.sent:
        outcomes[rec["msg_id"]].add(rec["outcome"])
    accepted = {m for m, o in outcomes.items() if "accepted" in o}
    in_doubt_only = sorted(m for m, o in outcomes.items() if o <= {"in_doubt", "error"})
    acked = collections.Counter(r["msg_id"] for r in led.received if r["ack_ts"] is not None)
    seen = {r["msg_id"] for r in led.received}
    return Reconciliation(
        accepted=len(accepted), received_ids=len(seen), lost=sorted(accepted - seen),
        duplicates={m: n for m, n in acked.items() if n > 1}, in_doubt_only=in_doubt_only,
        redelivered_records=sum(1 for r in led.received if r["redelivered"]),
        unacked_records=sum(1 for r in led.received if r["ack_ts"] is None))


def lab_endpoints() -> dict | None:
    """build/lab/endpoints.json written by `make lab-up`, if the lab is up."""
    path = ROOT / "build" / "lab" / "endpoints.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
