"""Benchmark (not a test): two-site lab, WAN at 20 ms, steady mirror backlog, then a cut and the drain.

Target (issue 4): at 1,000 persistent msgs/s produced and consumed on dc1 with 20 ms one-way WAN latency the
steady-state SNF backlog stays under 1 s (FirstMessageAge), and after a 60 s cut the backlog drains at least 5x
faster than it built up. Brings up its own lab (free ports, temporary root) with labctl, drives traffic with a
proton client on dc1, samples dc1's SNF queue over Jolokia, prints one JSON line, takes the lab down.

    .venv/bin/python benchmarks/wan_mirror_cut.py --rate 1000 --warmup 20 --cut 60
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from continuity_lab import labctl, wan


class _Traffic(MessagingHandler):
    """Paced producer and an accepting consumer on the same queue of one site.

    The clients are tools here, not the subject: one message is encoded once and sent as bytes, and the consumer
    accepts raw deliveries without decoding them, so the two brokers get the CPU (as in lab_broker_throughput).
    """

    def __init__(self, url: str, rate: int):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.url, self.rate = url, rate
        self.sent = self.received = 0
        self.stop = threading.Event()
        self.payload = Message(body=b"x" * 1024, durable=True).encode()

    def on_start(self, event: Any) -> None:
        # Separate connections, as real producers and consumers have.
        producer = event.container.connect(self.url, allowed_mechs="PLAIN", allow_insecure_mechs=True)
        consumer = event.container.connect(self.url, allowed_mechs="PLAIN", allow_insecure_mechs=True)
        self.sender = event.container.create_sender(producer, "orders")
        event.container.create_receiver(consumer, "orders").flow(500)
        self.start = time.monotonic()
        event.container.schedule(0.005, self)

    def on_timer_task(self, event: Any) -> None:
        if self.stop.is_set():
            event.container.stop()
            return
        due = int((time.monotonic() - self.start) * self.rate)
        snd = self.sender
        while self.sent < due and snd.credit > 0:
            snd.delivery(snd.delivery_tag())
            snd.stream(self.payload)
            snd.advance()
            self.sent += 1
        event.container.schedule(0.005, self)

    def on_delivery(self, event: Any) -> None:
        dlv = event.delivery
        if dlv.link.is_sender:
            if dlv.updated:
                dlv.settle()  # the broker's outcome for a send arrived
            return
        if dlv.partial or not dlv.readable:
            return
        link = dlv.link
        link.recv(dlv.pending)
        link.advance()
        dlv.update(dlv.ACCEPTED)
        dlv.settle()
        if link.credit < 250:  # one flow frame per 250 messages
            link.flow(500 - link.credit)
        self.received += 1


def _read(site: dict[str, Any], mbean: str, attrs: list[str]) -> dict[str, Any]:
    token = base64.b64encode(f"{site['credentials']['user']}:{site['credentials']['password']}".encode()).decode()
    body = json.dumps({"type": "read", "mbean": mbean, "attribute": attrs}).encode()
    req = urllib.request.Request(site["jolokia_url"], data=body, method="POST", headers={
        "Authorization": f"Basic {token}", "Origin": site["jolokia_origin"], "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())["value"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=20, help="seconds of steady state sampled before the cut")
    ap.add_argument("--cut", type=float, default=60, help="seconds the WAN stays cut")
    ap.add_argument("--version", default="2.44.0")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as root:
        os.environ.update({"LAB_ROOT": root, "LAB_PORT_BASE": "auto", "LAB_ARTEMIS_VERSION": args.version})
        plan = labctl.make_plan()
        try:
            endpoints = labctl.up(plan)
            dc1 = endpoints["sites"]["dc1"]
            link = endpoints["wan"]["dc1-dc2"]["control_url"]
            for info in endpoints["wan"].values():
                wan.control(info["control_url"], "latency", ms=args.latency_ms)
            snf = ('org.apache.activemq.artemis:broker="dc1",component=addresses,'
                   'address="$ACTIVEMQ_ARTEMIS_MIRROR_DC2",'
                   'subcomponent=queues,routing-type="anycast",queue="$ACTIVEMQ_ARTEMIS_MIRROR_DC2"')
            url = dc1["amqp_url"].replace("amqp://", f"amqp://{dc1['credentials']['user']}:"
                                                      f"{dc1['credentials']['password']}@")
            traffic = _Traffic(url, args.rate)
            thread = threading.Thread(target=Container(traffic).run, daemon=True)
            thread.start()
            steady: list[dict[str, Any]] = []
            t_end = time.monotonic() + args.warmup
            while time.monotonic() < t_end:
                steady.append(_read(dc1, snf, ["MessageCount", "FirstMessageAge"]))
                time.sleep(0.5)
            drained_level = max(50, args.rate // 20, 2 * max((s["MessageCount"] for s in steady), default=0))
            wan.control(link, "cut")
            time.sleep(args.cut)
            backlog = _read(dc1, snf, ["MessageCount"])["MessageCount"]
            wan.control(link, "restore")
            t0 = time.monotonic()
            drained_at = None
            while time.monotonic() - t0 < max(60.0, args.cut * 2):
                # drained = back to the steady-state level (events in flight at this rate), not to zero
                if _read(dc1, snf, ["MessageCount"])["MessageCount"] <= drained_level:
                    drained_at = time.monotonic() - t0
                    break
                time.sleep(0.1)
            traffic.stop.set()
            thread.join(10)
        finally:
            labctl.down(plan)
    ages = [s["FirstMessageAge"] for s in steady if s["FirstMessageAge"] is not None]
    counts = [s["MessageCount"] for s in steady]
    build_rate = backlog / args.cut if args.cut else 0
    drain_rate = backlog / drained_at if drained_at else None
    print(json.dumps({
        "version": args.version, "rate": args.rate, "wan_latency_ms": args.latency_ms,
        "produced": traffic.sent, "consumed": traffic.received,
        "steady_snf_count_max": max(counts) if counts else None,
        "steady_first_message_age_ms_max": max(ages) if ages else None,
        "cut_seconds": args.cut, "backlog_events": backlog, "build_events_per_s": round(build_rate, 1),
        "drain_seconds": round(drained_at, 2) if drained_at else None,
        "drain_events_per_s": round(drain_rate, 1) if drain_rate else None,
        "drain_over_build": round(drain_rate / build_rate, 1) if drain_rate and build_rate else None,
        "drained_level_events": drained_level,
    }))


if __name__ == "__main__":
    main()
