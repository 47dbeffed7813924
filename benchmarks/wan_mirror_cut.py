"""Benchmark (not a test): two-site lab of real Artemis, WAN emulator in the mirror path, steady mirror backlog,
then a cut and the drain.

Issue 15: report the mirror backlog drain after a 60 s cut at 1,000 msg/s against the floor measured on real
Artemis by hand (~50,000 events/s warm, ~20,000 after a restart; no WAN emulator in that path). Issue 4's target:
at 1,000 persistent msgs/s on dc1 with 20 ms one-way WAN latency the steady-state backlog stays under 1 s of
events, and after a 60 s cut the backlog drains at least 5x faster than it built up. Brings up its own lab (free
ports, temporary root) with labctl, drives traffic with a proton client on dc1, samples dc1's SNF queue with the
collection's Jolokia client, prints one JSON line, takes the lab down.

    .venv/bin/python benchmarks/wan_mirror_cut.py --rate 1000 --warmup 20 --cut 60 [--latency-ms 20]

``drain_events_per_s`` is the backlog over the drain time (net: traffic keeps adding events meanwhile);
``drain_gross_events_per_s`` counts every event the mirror delivered during the drain (SNF MessagesAcknowledged).
FirstMessageAge is not used: real Artemis reports it epoch-sized for acks (ARTEMIS-FACTS section 7).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia as j
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


def _client(site: dict[str, Any]) -> j.JolokiaClient:
    return j.JolokiaClient(site["jolokia_url"], site["credentials"]["user"], site["credentials"]["password"],
                           origin=site["jolokia_origin"])


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
            client = _client(dc1)
            traffic = _Traffic(url, args.rate)
            thread = threading.Thread(target=Container(traffic).run, daemon=True)
            thread.start()
            steady: list[dict[str, Any]] = []
            t_end = time.monotonic() + args.warmup
            while time.monotonic() < t_end:
                steady.append(client.read(snf, ["MessageCount"]))
                time.sleep(0.5)
            drained_level = max(50, args.rate // 20, 2 * max((s["MessageCount"] for s in steady), default=0))
            wan.control(link, "cut")
            time.sleep(args.cut)
            at_cut_end = client.read(snf, ["MessageCount", "MessagesAcknowledged"])
            backlog = at_cut_end["MessageCount"]
            wan.control(link, "restore")
            t0 = time.monotonic()
            drained_at, acked_during = None, None
            while time.monotonic() - t0 < max(60.0, args.cut * 2):
                # drained = back to the steady-state level (events in flight at this rate), not to zero
                now = client.read(snf, ["MessageCount", "MessagesAcknowledged"])
                if now["MessageCount"] <= drained_level:
                    drained_at = time.monotonic() - t0
                    acked_during = now["MessagesAcknowledged"] - at_cut_end["MessagesAcknowledged"]
                    break
                time.sleep(0.1)
            traffic.stop.set()
            thread.join(10)
        finally:
            labctl.down(plan)
    counts = [s["MessageCount"] for s in steady]
    events_per_s = 2.0 * args.rate  # one mirror event per send and one per acknowledgement
    build_rate = backlog / args.cut if args.cut else 0
    drain_rate = backlog / drained_at if drained_at else None
    print(json.dumps({
        "version": args.version, "rate": args.rate, "wan_latency_ms": args.latency_ms,
        "produced": traffic.sent, "consumed": traffic.received,
        "steady_snf_count_max": max(counts) if counts else None,
        "steady_backlog_seconds_max": round(max(counts) / events_per_s, 2) if counts else None,
        "cut_seconds": args.cut, "backlog_events": backlog, "build_events_per_s": round(build_rate, 1),
        "drain_seconds": round(drained_at, 2) if drained_at else None,
        "drain_events_per_s": round(drain_rate, 1) if drain_rate else None,
        "drain_gross_events_per_s": round(acked_during / drained_at, 1) if drained_at and acked_during else None,
        "drain_over_build": round(drain_rate / build_rate, 1) if drain_rate and build_rate else None,
        "drained_level_events": drained_level,
    }))


if __name__ == "__main__":
    main()
