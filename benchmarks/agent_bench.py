"""Benchmark (not a test): the continuity agent sampling two sites with 1,000 queues each.

Goal (issue 10): under 200 ms per cycle and under 100 MiB RSS for the agent.

Two modes, one JSON line each (numbers recorded in benchmarks/agent.md):

* ``replay`` (default): the agent's own cost. The Jolokia answers of two 2.44 sites with N queues are produced
  once by the unit suite's fake Artemis and replayed byte for byte by an in-process transport, so a cycle
  measures exactly what the agent does: JSON decode, site_state parsing, the lag model for both directions, the
  per-queue comparison, role/SLA rules, the evidence write and last-known.json, plus one /metrics rendering.
* ``lab``: end to end against a private real Apache Artemis two-site lab (labctl, temporary root, free ports)
  with N queues created on both sites over Jolokia; includes HTTP and the brokers' own Jolokia.

    .venv/bin/python benchmarks/agent_bench.py --queues 1000 --cycles 30
    .venv/bin/python benchmarks/agent_bench.py --mode lab --queues 1000 --cycles 10
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on
from continuity_agent.config import parse
from continuity_agent.service import Agent

ROOT = Path(__file__).resolve().parents[1]


def rss_mib() -> float:
    """Current resident set size of this process (the agent), from /proc."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class ReplayTransport:
    """Answers every POST with the bytes the fake broker gave for the same body (recorded on first use)."""

    def __init__(self, broker: Any):
        self.broker = broker
        self.cache: dict[bytes, tuple[int, dict, bytes]] = {}
        self.last_used = 0.0

    def post(self, body: bytes, headers: dict, fresh: bool = False) -> tuple[int, dict, bytes]:
        if body not in self.cache:
            self.cache[body] = self.broker.handle_http(body, headers)
        self.last_used = time.monotonic()
        return self.cache[body]

    def close(self) -> None:
        pass


def _unit_fakes() -> Any:
    spec = importlib.util.spec_from_file_location("continuity_unit_fakes", ROOT / "tests" / "unit" / "conftest.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def config(sites: dict[str, dict], tmp: Path) -> Any:
    return parse({"interval": 5, "listen": {"enabled": False}, "sites": sites,
                  "sla": {"rpo_seconds": 5, "rpo_messages": 1000, "rto_seconds": 60, "lag_seconds": 5},
                  "evidence": {"dir": str(tmp / "evidence"), "run_id": "bench"}, "state_dir": str(tmp / "state")})


def measure(agent: Agent, cycles: int) -> dict[str, Any]:
    agent.sample_once()  # warm-up: broker name discovery, first rates
    times, scrape = [], []
    for _ in range(cycles):
        started = time.perf_counter()
        agent.sample_once()
        mid = time.perf_counter()
        generate_latest(agent.registry)
        times.append(mid - started)
        scrape.append(time.perf_counter() - mid)
    cycle = agent.last_cycle
    assert cycle is not None
    return {
        "cycle_ms_median": round(statistics.median(times) * 1000, 1),
        "cycle_ms_p95": round(sorted(times)[int(0.95 * (len(times) - 1))] * 1000, 1),
        "cycle_ms_max": round(max(times) * 1000, 1),
        "scrape_render_ms_median": round(statistics.median(scrape) * 1000, 1),
        "rss_mib": round(rss_mib(), 1),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "queues_per_site": {n: v.queue_count for n, v in cycle.sites.items()},
        "directions": len(cycle.directions),
        "http_requests_per_site_per_cycle": None,
    }


def replay(queues: int, cycles: int) -> dict[str, Any]:
    fakes = _unit_fakes()
    brokers = {"dc1": fakes.FakeArtemis("site-2.44-dc1.json", "http://dc1:8161/console/jolokia"),
               "dc2": fakes.FakeArtemis("site-2.44-dc2.json", "http://dc2:8161/console/jolokia")}
    brokers["dc2"].allowed_origins = ["http://dc2:8161"]
    for b in brokers.values():
        b.queues.extend({"Name": f"bench.q{i:05d}", "Address": f"bench.q{i:05d}", "MessageCount": i % 7,
                         "ConsumerCount": 0, "MessagesAdded": 1000 + i, "MessagesAcknowledged": 1000}
                        for i in range(queues))
    clients = {n: jolokia.JolokiaClient(b.url, username="admin", password="secret", transport=ReplayTransport(b))
               for n, b in brokers.items()}
    sites = {n: {"jolokia": {"url": b.url, "username": "admin", "password": "secret"}, "broker_name": n,
                 "client_acceptors": ["amqp"]} for n, b in brokers.items()}
    with tempfile.TemporaryDirectory() as tmp:
        agent = Agent(config(sites, Path(tmp)), clients=clients)
        before = {n: c.request_count for n, c in clients.items()}
        out = measure(agent, cycles)
        out["http_requests_per_site_per_cycle"] = {
            n: (c.request_count - before[n] - 1) / cycles for n, c in clients.items()}  # -1: warm-up cycle
        agent.close()
    return out


def create_queues(client: jolokia.JolokiaClient, broker: str, count: int) -> None:
    for first in range(0, count, 200):
        reqs = []
        for i in range(first, min(count, first + 200)):
            name = f"bench.q{i:05d}"
            conf = json.dumps({"name": name, "address": name, "routing-type": "ANYCAST", "durable": True})
            reqs.append(jolokia.exec_request(on.broker(broker), "createQueue(java.lang.String,boolean)", conf, True))
        for res in client.bulk(reqs):
            res.raise_for_status()


def lab(queues: int, cycles: int) -> dict[str, Any]:
    from continuity_lab import labctl

    with tempfile.TemporaryDirectory() as tmp:
        plan = labctl.make_plan({"LAB_ROOT": str(Path(tmp) / "lab"), "LAB_PORT_BASE": "auto"})
        with labctl.running(plan) as endpoints:
            sites = {}
            for name, s in endpoints["sites"].items():
                c = jolokia.JolokiaClient(s["jolokia_url"], username=s["credentials"]["user"],
                                          password=s["credentials"]["password"], origin=s["jolokia_origin"],
                                          timeout=60)
                create_queues(c, s["broker_name"], queues)
                c.close()
                sites[name] = {"jolokia": {"url": s["jolokia_url"], "origin": s["jolokia_origin"],
                                           "username": s["credentials"]["user"],
                                           "password": s["credentials"]["password"], "timeout": 30},
                               "broker_name": s["broker_name"], "client_acceptors": s["client_acceptors"]}
            agent = Agent(config(sites, Path(tmp)))
            before = {n: c.request_count for n, c in agent.clients.items()}
            out = measure(agent, cycles)
            out["http_requests_per_site_per_cycle"] = {
                n: (c.request_count - before[n] - 1) / cycles for n, c in agent.clients.items()}
            out["site_read_ms_last"] = {n: round((v.scrape_seconds or 0) * 1000, 1)
                                        for n, v in agent.last_cycle.sites.items()}
            agent.close()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("replay", "lab"), default="replay")
    p.add_argument("--queues", type=int, default=1000)
    p.add_argument("--cycles", type=int, default=30)
    args = p.parse_args()
    out = replay(args.queues, args.cycles) if args.mode == "replay" else lab(args.queues, args.cycles)
    out.update({"benchmark": "agent", "mode": args.mode, "cycles": args.cycles, "goal_cycle_ms": 200,
                "goal_rss_mib": 100, "cpus": os.cpu_count(),
                "load_avg_1m": round(os.getloadavg()[0], 2)})
    out["pass"] = out["cycle_ms_median"] < 200 and out["peak_rss_mib"] < 100
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
