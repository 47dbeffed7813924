"""Benchmark (not a test): mirror_info on a site with 1,000 queues - HTTP requests per site and time inside the module.

Target (issue 5): at most 2 HTTP requests per site and under 1 s inside the module. Also measures one site snapshot
(the agent's sampling cost) and how long mirror_wait takes to notice a drained backlog.

Brings up its own two-site lab (labctl, free ports, temporary root) unless --endpoints names a running lab's
endpoints.json, creates N queues on both sites over Jolokia (createQueue JSON form, ignoreIfExists), then runs the
mirror_info module in-process (its real main(), arguments as Ansible passes them) and prints one JSON line.

    .venv/bin/python benchmarks/jolokia_bench.py --queues 1000 --runs 5
    .venv/bin/python benchmarks/jolokia_bench.py --endpoints build/lab/endpoints.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on
from ansible_collections.continuity.artemis.plugins.module_utils.site_state import SiteCollector

ROOT = Path(__file__).resolve().parents[1]


def site_conn(site: dict[str, Any]) -> dict[str, Any]:
    return {"url": site["jolokia_url"], "username": site["credentials"]["user"],
            "password": site["credentials"]["password"], "broker_name": site["broker_name"]}


def create_queues(site: dict[str, Any], count: int, prefix: str = "bench.q") -> float:
    """Create ``count`` anycast queues in bulk requests of 200; returns the seconds it took."""
    client = jolokia.client_from_options(site_conn(site), timeout=60)
    started = time.monotonic()
    broker = on.broker(site["broker_name"])
    for first in range(0, count, 200):
        reqs = []
        for i in range(first, min(count, first + 200)):
            name = f"{prefix}{i:05d}"
            conf = json.dumps({"name": name, "address": name, "routing-type": "ANYCAST", "durable": True})
            reqs.append(jolokia.exec_request(broker, "createQueue(java.lang.String,boolean)", conf, True))
        for res in client.bulk(reqs):
            res.raise_for_status()
    return time.monotonic() - started


def wait_in_sync(dc1: dict[str, Any], dc2: dict[str, Any], queues: int, timeout: float = 120) -> float:
    """Seconds until dc2 has the bench queues and both SNF backlogs are 0 (raises on timeout)."""
    started = time.monotonic()
    c1, c2 = (SiteCollector(jolokia.client_from_options(site_conn(s), timeout=60), s["broker_name"])
              for s in (dc1, dc2))
    while time.monotonic() - started < timeout:
        s1, s2 = c1.collect(include_acceptors=False), c2.collect(include_acceptors=False)
        have = sum(1 for n in s2["queues"] if n.startswith("bench.q"))
        backlog = [(m["snf"] or {}).get("message_count") for s in (s1, s2) for m in s["mirrors"].values()]
        if have >= queues and all(b == 0 for b in backlog):
            return time.monotonic() - started
        time.sleep(0.5)
    raise SystemExit(f"sites not in sync after {timeout} s: dc2 has {have} bench queues, SNF backlogs {backlog}")


def run_module(module: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Run an Ansible module's main() in-process the way AnsiballZ does; return its JSON result."""
    from ansible.module_utils.testing import patch_module_args

    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out):
        try:
            module.main()
        except SystemExit:
            pass
    return json.loads(out.getvalue())


def send(site: dict[str, Any], n: int, address: str = "orders") -> None:
    from proton import Message
    from proton.utils import BlockingConnection

    creds = site["credentials"]
    url = site["amqp_url"].replace("amqp://", f"amqp://{creds['user']}:{creds['password']}@")
    c = BlockingConnection(url, timeout=30, allowed_mechs="PLAIN", allow_insecure_mechs=True)
    try:
        sender = c.create_sender(address)
        for i in range(n):
            sender.send(Message(body=f"bench-{i}", durable=True))
    finally:
        c.close()


def drain_detection(endpoints: dict[str, Any], wait_sleep: float, messages: int = 200) -> dict[str, Any]:
    """Cut dc1->dc2, build a backlog, restore, and time how long after the SNF queue reached 0 (seen by a 50 ms
    poller of the SNF MBean) mirror_wait returned. Target: within one poll interval (plus one sample)."""
    import threading

    from ansible_collections.continuity.artemis.plugins.modules import mirror_wait
    from continuity_lab import wan

    dc1 = endpoints["sites"]["dc1"]
    control = endpoints["wan"]["dc1-dc2"]["control_url"]
    client = jolokia.client_from_options(site_conn(dc1))
    snf = on.queue(dc1["broker_name"], "$ACTIVEMQ_ARTEMIS_MIRROR_DC2", "$ACTIVEMQ_ARTEMIS_MIRROR_DC2")
    wan.control(control, "cut")
    try:
        send(dc1, messages)
        backlog = client.read(snf, "MessageCount")
    finally:
        wan.control(control, "restore")
    drained_at: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            if client.read(snf, "MessageCount") == 0:
                drained_at.append(time.monotonic())
                return
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    started = time.monotonic()
    poller.start()
    res = run_module(mirror_wait, dict(site_conn(dc1), direction="outgoing", max_backlog=0, connected=True,
                                       wait_timeout=60, wait_sleep=wait_sleep))
    returned = time.monotonic()
    stop.set()
    poller.join(5)
    delay = returned - drained_at[0] if drained_at else None
    return {"backlog_before_restore": backlog, "mirror_wait_ok": res.get("ok"), "samples": len(res.get("samples", [])),
            "drain_s": round(drained_at[0] - started, 3) if drained_at else None,
            "detected_after_drain_s": round(delay, 3) if delay is not None else None, "wait_sleep": wait_sleep,
            "within_one_interval": delay is not None and delay <= wait_sleep + 1.0}


def bench(endpoints: dict[str, Any], queues: int, runs: int, interval: float) -> dict[str, Any]:
    from ansible_collections.continuity.artemis.plugins.modules import mirror_info

    dc1, dc2 = endpoints["sites"]["dc1"], endpoints["sites"]["dc2"]
    # Create on dc1 only: the mirror (queue-creation=true) creates them on dc2; wait until both sites are in sync.
    create_s = create_queues(dc1, queues)
    mirrored_s = wait_in_sync(dc1, dc2, queues)
    args = dict(site_conn(dc1), peer=site_conn(dc2), sample_interval=interval)
    results = []
    for _ in range(runs):
        started = time.monotonic()
        res = run_module(mirror_info, args)
        wall = time.monotonic() - started
        if res.get("failed"):
            raise SystemExit(f"mirror_info failed: {res.get('msg')}")
        results.append({"wall": wall, "inside": res["elapsed"] - interval, "site_requests": res["site"]["requests"],
                        "peer_requests": res["peer_site"]["requests"],
                        "compared": res["queue_comparison"]["compared"]})
    # the agent's cost: one snapshot of one site (lag only), and with the acceptors (role detection) which costs a
    # wildcard read
    col = SiteCollector(jolokia.client_from_options(site_conn(dc1)), dc1["broker_name"])
    snaps, snaps_acc = [], []
    for _ in range(runs):
        t0 = time.monotonic()
        snap = col.collect(include_acceptors=False)
        snaps.append(time.monotonic() - t0)
        t0 = time.monotonic()
        col.collect(include_acceptors=True)
        snaps_acc.append(time.monotonic() - t0)
    inside = [r["inside"] for r in results]
    detection = drain_detection(endpoints, wait_sleep=0.5)
    return {
        "benchmark": "jolokia_bench",
        "broker_version": endpoints.get("broker_version"),
        "queues_per_site": len(snap["queues"]),
        "queue_create_seconds": round(create_s, 3),
        "queues_mirrored_seconds": round(mirrored_s, 3),
        "sample_interval": interval,
        "runs": runs,
        "mirror_info_inside_s": {"median": round(statistics.median(inside), 4), "max": round(max(inside), 4)},
        "mirror_info_wall_s_median": round(statistics.median(r["wall"] for r in results), 4),
        "http_requests_site": sorted({r["site_requests"] for r in results}),
        "http_requests_peer": sorted({r["peer_requests"] for r in results}),
        "queues_compared": results[-1]["compared"],
        "snapshot_s": {"median": round(statistics.median(snaps), 4), "max": round(max(snaps), 4)},
        "snapshot_with_acceptors_s": {"median": round(statistics.median(snaps_acc), 4),
                                      "max": round(max(snaps_acc), 4)},
        "mirror_wait_drain_detection": detection,
        "target": {"http_requests_per_site_max": 2, "inside_module_s_max": 1.0,
                   "drain_noticed_within": "one poll interval (+1 s for the sample itself)"},
        # median: the 2 cores are shared with other work, single runs stall; max is reported above
        "pass": statistics.median(inside) < 1.0 and max(r["site_requests"] for r in results) <= 2
        and bool(detection["within_one_interval"])
        and max(r["peer_requests"] for r in results) <= 2,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--interval", type=float, default=1.0, help="mirror_info sample_interval (subtracted)")
    ap.add_argument("--endpoints", help="endpoints.json of a running lab (default: start a private lab)")
    ap.add_argument("--version", default=os.environ.get("LAB_ARTEMIS_VERSION", "2.44.0"))
    opts = ap.parse_args(argv)
    if opts.endpoints:
        print(json.dumps(bench(json.loads(Path(opts.endpoints).read_text()), opts.queues, opts.runs, opts.interval)))
        return 0
    from continuity_lab import labctl

    root = Path(tempfile.mkdtemp(prefix="jolokia-bench-"))
    env = {"LAB_ROOT": str(root), "LAB_PORT_BASE": "auto", "LAB_ARTEMIS_VERSION": opts.version}
    with labctl.running(labctl.make_plan({**os.environ, **env})) as endpoints:
        print(json.dumps(bench(endpoints, opts.queues, opts.runs, opts.interval)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
