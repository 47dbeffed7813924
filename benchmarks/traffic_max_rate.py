"""Ceiling of the rehearsal traffic tool on this machine: `--rate 0` (as fast as credit allows) for a few seconds.

    .venv/bin/python benchmarks/traffic_max_rate.py [--seconds 10] [--producers 1] [--consumers 1] [--size 256]
        [--endpoints build/lab/endpoints.json]

The target is dc1 of a real Apache Artemis two-site lab (dual mirror to dc2, SASL PLAIN): without --endpoints a
private one (labctl: temporary root, a free port block, stopped afterwards), with --endpoints a running lab's.
Prints one JSON line: accepted sends/s, acknowledged receives/s, and whether the ledgers reconcile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "traffic"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--consumers", type=int, default=1)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--endpoints", help="endpoints.json of a running lab")
    args = ap.parse_args()

    from support import load_ledgers, reconcile

    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if args.endpoints:
            endpoints = json.loads(Path(args.endpoints).read_text())
        else:
            from continuity_lab import labctl

            plan = labctl.make_plan({"LAB_ROOT": str(Path(tmp) / "lab"), "LAB_PORT_BASE": "auto"})
            endpoints = stack.enter_context(labctl.running(plan))
        site = endpoints["sites"]["dc1"]
        target = ["--url", f"dc1={site['amqp_url']}", "--user", site["credentials"]["user"],
                  "--address", "bench.traffic"]
        env["CONTINUITY_TRAFFIC_PASSWORD"] = site["credentials"]["password"]
        backend = f"Artemis {endpoints.get('broker_version', '?')} dc1"
        status = Path(tmp) / "status.json"
        cmd = [sys.executable, "-m", "continuity_traffic", "run", *target, "--rate", "0", "-P",
               str(args.producers), "-C", str(args.consumers), "--size", str(args.size), "--duration",
               str(args.seconds), "--drain-timeout", "60", "--evidence-dir", tmp, "--run-id", "bench",
               "--status-file", str(status), "--display", "quiet"]
        start = time.monotonic()
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.seconds + 120)
        wall = time.monotonic() - start
        snap = json.loads(status.read_text())
        rec = reconcile(load_ledgers(Path(tmp) / "bench"))
    accepted = snap["sent"].get("accepted", 0)
    print(json.dumps({
        "backend": backend, "seconds": args.seconds, "producers": args.producers, "consumers": args.consumers,
        "size": args.size, "accepted": accepted, "accepted_per_s": round(accepted / args.seconds, 1),
        "acked": snap["acked"], "acked_per_s_incl_drain": round(snap["acked"] / max(1e-6, snap["elapsed"]), 1),
        "wall_s": round(wall, 1), "exit": res.returncode,
        # without consumers nothing is received: "lost" would only count the queue
        "lost": len(rec.lost) if args.consumers else None, "duplicates": len(rec.duplicates),
        "cpus": os.cpu_count()}))
    return 0 if res.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
