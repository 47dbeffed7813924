"""Swapover soak on the real two-site lab: N consecutive swapovers (dc1 -> dc2 -> dc1 ...) under traffic over many
queues, with the ledgers reconciled at the end. Issue 15's proof: 20 swaps at 1,000 msg/s over 100 queues, 0 lost,
0 duplicated, every gate recorded; client outage <= 1.0 s and runbook overhead <= 10 s per swap.

    .venv/bin/python benchmarks/swapover_soak.py [--queues 100] [--rate 1000] [--swaps 20] [--processes 2]
                                                 [--json out.json]

Starts a private lab (real Apache Artemis 2.44.0, deployed by the collection), then `--processes` traffic tool
processes in the background, each with queues/processes addresses (one producer and one consumer per address,
the rate split evenly), then runs playbooks/swapover.yml `--swaps` times as an operator would, waiting after each
swap until the consumers received on the new site. Per swap it reports (from the evidence the run wrote): wall,
drain phase, overhead (wall - drain), client outage (quiesce -> activate), the queues the drain gate compared.
At the end: the ledgers of every process reconciled (accepted, lost, duplicates from one accepted send).
Not a test: the targets are printed next to the numbers; the record lives in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from runbook_bench import machine, one_swap
from runbook_support import Lab, Traffic, reconcile

TARGET_OUTAGE_S = 1.0
TARGET_OVERHEAD_S = 10.0


def start_traffic(lab: Lab, evidence: Path, run_id: str, queues: int, rate: float, processes: int) -> list:
    per = max(1, queues // processes)
    out = []
    for p in range(processes):
        addrs = [f"soak.q{i:03d}" for i in range(p * per, min(queues, (p + 1) * per))]
        extra = [a for addr in addrs[1:] for a in ("--address", addr)]
        t = Traffic(lab, evidence, run_id, f"soak{p}", address=addrs[0], producers=len(addrs), consumers=len(addrs),
                    rate=rate / processes, extra=[*extra, "--max-in-flight", "50", "--prefetch", "20"])
        t.start(wait=60)
        out.append(t)
    return out


def received_on(traffic: list, site: str) -> int:
    return sum(t.count("received", site) for t in traffic)


def wait_received(traffic: list, site: str, n: int, timeout: float) -> bool:
    start, deadline = received_on(traffic, site), time.monotonic() + timeout
    while time.monotonic() < deadline:
        if received_on(traffic, site) - start >= n:
            return True
        time.sleep(0.5)
    return False


def spread(values: list) -> dict | None:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)} if values else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--rate", type=float, default=1000.0, help="total msg/s over all producers")
    ap.add_argument("--swaps", type=int, default=20)
    ap.add_argument("--processes", type=int, default=2, help="traffic tool processes (one proton thread each)")
    ap.add_argument("--json", help="write the result here too")
    ap.add_argument("--keep", action="store_true", help="leave the lab running (prints its root)")
    opts = ap.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="swapover-soak-"))
    lab = Lab(root / "lab")
    evidence, run_id = root / "evidence", "soak"
    t0 = time.time()
    lab.up()
    result: dict = {"machine": machine(), "params": vars(opts), "lab_up_s": round(time.time() - t0, 1),
                    "swaps": []}
    traffic: list = []
    try:
        traffic = start_traffic(lab, evidence, run_id, opts.queues, opts.rate, opts.processes)
        if not wait_received(traffic, "dc1", int(opts.rate * 5), 120):
            raise RuntimeError("traffic did not reach dc1's consumers")
        active = "dc1"
        for i in range(opts.swaps):
            to = "dc2" if active == "dc1" else "dc1"
            swap = one_swap(lab, evidence, run_id, to)
            swap["n"] = i + 1
            swap["roles_after"] = lab.roles()
            swap["traffic_resumed"] = wait_received(traffic, to, int(opts.rate * 2), 120)
            result["swaps"].append(swap)
            print(json.dumps(swap), flush=True)
            if swap["rc"] != 0:
                break
            active = to
            time.sleep(2)  # steady traffic between swaps, as an operator's pause would give
    finally:
        for t in traffic:
            t.stop(timeout=120)
    total = {"accepted": 0, "lost": 0, "real_duplicates": 0, "resend_duplicates": 0, "in_doubt_only": 0}
    for t in traffic:
        s = reconcile(evidence / run_id, t.name, run_id, validate=False).summary()
        total["accepted"] += s["accepted_msgs"]
        total["lost"] += s["lost"]
        total["real_duplicates"] += s["real_duplicates"]
        total["resend_duplicates"] += s["resend_duplicates"]
        total["in_doubt_only"] += s["in_doubt_only"]
    result["ledgers"] = total
    ok = [s for s in result["swaps"] if s["rc"] == 0]
    outages = [s["client_outage_s"] for s in ok if s.get("client_outage_s") is not None]
    overheads = [s["overhead_s"] for s in ok if s.get("overhead_s") is not None]
    result["summary"] = {
        "swaps_ok": len(ok), "swaps": len(result["swaps"]),
        "outage_s": spread(outages),
        "overhead_s": spread(overheads),
        "targets": {"outage_s": TARGET_OUTAGE_S, "overhead_s": TARGET_OVERHEAD_S},
    }
    print(json.dumps(result["summary"] | {"ledgers": total}, indent=2))
    if opts.json:
        Path(opts.json).write_text(json.dumps(result, indent=2))
    if opts.keep:
        print(f"lab left running under {lab.root} (bash lab/lab-down.sh with LAB_ROOT={lab.root})")
    else:
        lab.down()
    return 0 if len(ok) == opts.swaps and total["lost"] == 0 and total["real_duplicates"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
