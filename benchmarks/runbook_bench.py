"""Benchmark of swapover.yml on the lab: runbook overhead and client outage with 100 queues and a drained mirror.

    .venv/bin/python benchmarks/runbook_bench.py [--queues 100] [--messages 5] [--swaps 2] [--json out.json]

Starts a private two-site lab (lab-up.sh --script on a free port block + initial_roles.yml), creates `--queues`
anycast queues on dc1 by sending `--messages` durable messages to each of `--queues` addresses (auto-created,
mirrored to dc2), waits until the mirror is drained (both directions connected, backlog 0, every queue count
equal), then runs swapover.yml `--swaps` times (dc1 -> dc2, dc2 -> dc1, ...) as an operator would and reports,
per swap, from the evidence the run wrote:

- wall: the ansible-playbook process, start to exit;
- drain: the drain gate phase (the time the drain itself needs; the mirror is drained, so this is the gate's
  stable-sample cost);
- overhead = wall - drain (the issue's target: < 20 s);
- client outage: quiesce -> activate, the module's `client_outage_seconds` (target: < 10 s);
- per phase: preflight / quiesce / drain / activate (inside the one swapover task), then the rest of the
  playbook: before the swap task (inventory, site resolution, role reads), after it (fence persisted on the old
  site, redirect hook, post-gates: mirrors connected + canary round trip).

Prints one JSON object and a markdown table. Not a test: no pass/fail, the targets are printed next to the
numbers. The machine, date and command are printed with them (benchmarks/runbooks.md keeps the record).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from runbook_support import ADMIN_PASSWORD, ADMIN_USER, Lab, phases, read_jsonl

TARGET_OVERHEAD_S = 20.0
TARGET_OUTAGE_S = 10.0


def create_queues(lab: Lab, n: int, messages: int) -> None:
    """`n` addresses on dc1, each with `messages` durable messages (auto-created anycast queues, mirrored)."""
    from proton import Message
    from proton.utils import BlockingConnection

    from ansible_collections.continuity.artemis.plugins.module_utils.amqp import Anycast

    url = lab.amqp_url("dc1").replace("amqp://", f"amqp://{ADMIN_USER}:{ADMIN_PASSWORD}@")
    conn = BlockingConnection(url, timeout=60, allowed_mechs="PLAIN", allow_insecure_mechs=True)
    try:
        for i in range(n):
            # The `queue` capability makes the auto-created address ANYCAST, as the traffic tool does.
            sender = conn.create_sender(f"bench.q{i:03d}", options=Anycast())
            for k in range(messages):
                sender.send(Message(body=f"bench-{i}-{k}", durable=True, creation_time=time.time()))
            sender.close()
    finally:
        conn.close()


def wait_drained(lab: Lab, queues: int, timeout: float = 300) -> float:
    """Seconds until both mirrors are connected, empty, and every queue count is equal on both sites."""
    from ansible_collections.continuity.artemis.plugins.module_utils import gates
    from ansible_collections.continuity.artemis.plugins.module_utils.site_state import SiteCollector

    cols = {s: SiteCollector(lab.client(s, timeout=20), broker_name=s, site=s) for s in ("dc1", "dc2")}
    t0 = time.monotonic()
    ev: dict = {}
    while time.monotonic() - t0 < timeout:
        s1, s2 = cols["dc1"].collect(), cols["dc2"].collect()
        ev = gates.evaluate({"connected": True, "max_backlog": 0, "queues_equal": True}, s1, s2, direction="both")
        bench = [q for q in s2.get("queues", {}) if q.startswith("bench.q")]
        if ev["ok"] and len(bench) >= queues:
            return time.monotonic() - t0
        time.sleep(1)
    raise RuntimeError(f"mirror not drained within {timeout} s: {ev.get('failed')}")


def one_swap(lab: Lab, evidence_dir: Path, run_id: str, to: str) -> dict:
    run = lab.playbook("swapover.yml", {"continuity_to_site": to}, evidence_dir=evidence_dir, run_id=run_id)
    out: dict = {"to": to, "rc": run.rc, "wall_s": round(run.wall, 3)}
    if run.rc != 0:
        out["error"] = run.tail(15)
    recs = {r["phase"]: r for r in phases(evidence_dir / run_id, "swapover")}
    per_phase = {name: round(r["end_ts"] - r["start_ts"], 3) for name, r in recs.items() if r.get("end_ts")}
    out["phases_s"] = per_phase
    if "preflight" in recs and "activate" in recs:
        swap_start, swap_end = recs["preflight"]["start_ts"], recs["activate"]["end_ts"]
        out["swap_task_s"] = round(swap_end - swap_start, 3)
        out["before_swap_task_s"] = round(swap_start - run.started, 3)
        out["after_swap_task_s"] = round(run.ended - swap_end, 3)
        out["client_outage_s"] = round(recs["activate"]["data"]["client_outage_seconds"], 3)
    samples = (recs.get("drain") or {}).get("gate_samples") or []
    if samples:
        # How many queues the drain gate compared (proves the 100 queues were part of the gate).
        out["queues_compared"] = ((samples[-1].get("conditions") or {}).get("queues_equal") or {}).get(
            "value", {}).get("compared")
        out["drain_samples"] = len(samples)
    drain = per_phase.get("drain")
    out["drain_s"] = drain
    out["overhead_s"] = round(run.wall - drain, 3) if drain is not None else None
    canaries = read_jsonl(evidence_dir / run_id / "canaries.jsonl") if (evidence_dir / run_id /
                                                                         "canaries.jsonl").exists() else []
    out["canaries_seen"] = sum(1 for c in canaries if c.get("outcome") == "seen")
    return out


def machine() -> dict:
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"host": platform.node(), "platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in load] if load else None}


def markdown(result: dict) -> str:
    lines = ["| swap | wall s | drain s | overhead s (target < 20) | client outage s (target < 10) | preflight | "
             "quiesce | drain | activate | before swap task | after swap task | queues compared | rc |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, s in enumerate(result["swaps"], 1):
        ph = s.get("phases_s", {})
        lines.append(f"| {i} -> {s['to']} | {s['wall_s']} | {s.get('drain_s')} | {s.get('overhead_s')} | "
                     f"{s.get('client_outage_s')} | {ph.get('preflight')} | {ph.get('quiesce')} | {ph.get('drain')} | "
                     f"{ph.get('activate')} | {s.get('before_swap_task_s')} | {s.get('after_swap_task_s')} | "
                     f"{s.get('queues_compared')} | {s['rc']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--messages", type=int, default=5, help="messages left in each queue")
    ap.add_argument("--swaps", type=int, default=2)
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="runbook-bench-"))
    lab = Lab(root / "lab")
    result: dict = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
                    "command": " ".join([Path(sys.executable).name, *sys.argv]), "queues": args.queues,
                    "messages_per_queue": args.messages, "port_base": lab.base, "swaps": []}
    try:
        t0 = time.monotonic()
        lab.up()
        result["lab_up_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        create_queues(lab, args.queues, args.messages)
        result["create_s"] = round(time.monotonic() - t0, 1)
        result["drained_after_s"] = round(wait_drained(lab, args.queues), 1)
        sites = ["dc2", "dc1"]
        for i in range(args.swaps):
            result["swaps"].append(one_swap(lab, root / "evidence", f"bench-{i + 1}", sites[i % 2]))
        result["machine"]["loadavg_end"] = machine()["loadavg"]
    finally:
        lab.down()
    print(json.dumps(result, indent=1))
    print(markdown(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0 if all(s["rc"] == 0 for s in result["swaps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
