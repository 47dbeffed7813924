"""Benchmark (not a test): one lab broker, persistent 1 KiB messages produced and consumed over AMQP.

Target (issue 3): >= 2,000 msg/s produced and consumed with p99 end-to-end latency < 50 ms on a 2-core box.
The broker runs in its own process; the producer in another; the consumer in this one. The producer paces
to `--rate` and stamps each message with its send time; the consumer accepts each message and records
now - send time. Prints one JSON line with the figures.

    .venv/bin/python benchmarks/lab_broker_throughput.py --rate 2000 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

USER, PASSWORD = "bench", "bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_broker(instance_dir: str, port: int, ready: mp.Event, stop: mp.Event, out: mp.Queue) -> None:
    from artemis_lab.core.broker import Broker
    from artemis_lab.model import (
        AcceptorConfig,
        AddressConfig,
        AddressSettingConfig,
        BrokerConfig,
        InstanceConfig,
        QueueConfig,
        SecuritySettingConfig,
    )

    class Realm:
        def authenticate(self, user: str, password: str) -> frozenset[str] | None:
            return frozenset({"amq"}) if (user, password) == (USER, PASSWORD) else None

    perms = {p: frozenset({"amq"}) for p in ("send", "consume", "browse", "createAddress", "createDurableQueue",
                                             "createNonDurableQueue")}
    cfg = BrokerConfig(
        name="bench",
        acceptors=[AcceptorConfig(name="amqp", uri=f"tcp://127.0.0.1:{port}", host="127.0.0.1", port=port)],
        addresses=[AddressConfig(name="bench", queues=[QueueConfig(name="bench", address="bench")])],
        address_settings=[AddressSettingConfig(match="#")],
        security_settings=[SecuritySettingConfig(match="#", permissions=perms)],
    )
    broker = Broker(InstanceConfig(instance_dir=instance_dir, broker=cfg, emulated_version="2.44.0"), Realm())
    broker.start()
    cpu0 = time.process_time()
    ready.set()
    stop.wait()
    out.put({"broker_cpu_s": time.process_time() - cpu0})  # the broker's own CPU, whatever the box load
    broker.stop()


class _Producer(MessagingHandler):
    def __init__(self, url: str, rate: int, seconds: float, size: int):
        super().__init__(auto_settle=True)
        self.url, self.rate, self.seconds = url, rate, seconds
        # Clients are tools here, not the subject: encode one template and patch the send time into it, so the
        # Python client costs as little as possible per message (the broker still parses every message).
        self.template = bytearray(Message(body=b"x" * size, durable=True, properties={"t": 0.0}).encode())
        self.offset = self.template.index(b"\xa1\x01t\x82") + 4
        self.sent = 0
        self.accepted = 0
        self.total = int(rate * seconds)

    def on_start(self, event) -> None:
        conn = event.container.connect(self.url, allowed_mechs="PLAIN", allow_insecure_mechs=True)
        self.sender = event.container.create_sender(conn, "bench")
        self.start = time.monotonic()
        event.container.schedule(0.005, self)

    def on_timer_task(self, event) -> None:
        due = min(self.total, int((time.monotonic() - self.start) * self.rate))
        snd = self.sender
        while self.sent < due and snd.credit > 0:
            struct.pack_into(">d", self.template, self.offset, time.time())
            snd.delivery(snd.delivery_tag())
            snd.stream(bytes(self.template))
            snd.advance()
            self.sent += 1
        if self.sent < self.total:
            event.container.schedule(0.005, self)

    def on_accepted(self, event) -> None:
        self.accepted += 1
        if self.accepted == self.total:
            self.elapsed = time.monotonic() - self.start
            event.connection.close()


def _run_producer(url: str, rate: int, seconds: float, size: int, out: mp.Queue) -> None:
    handler = _Producer(url, rate, seconds, size)
    Container(handler).run()
    out.put({"produced": handler.accepted, "produce_seconds": round(handler.elapsed, 3)})


class _Consumer(MessagingHandler):
    def __init__(self, url: str, total: int):
        super().__init__(prefetch=0, auto_accept=False)  # credit is granted in batches below
        self.url, self.total = url, total
        self.latencies: list[float] = []

    def on_start(self, event) -> None:
        conn = event.container.connect(self.url, allowed_mechs="PLAIN", allow_insecure_mechs=True)
        event.container.create_receiver(conn, "bench").flow(1000)

    def on_delivery(self, event) -> None:
        # raw bytes instead of decoding a Message: find the send time the producer patched in
        dlv = event.delivery
        if dlv.partial or not dlv.readable:
            return
        link = dlv.link
        data = link.recv(dlv.pending)
        link.advance()
        now = time.time()
        at = data.index(b"\xa1\x01t\x82") + 4
        dlv.update(dlv.ACCEPTED)
        dlv.settle()
        credit = link.credit
        if credit < 500:  # one flow frame per 500 messages instead of one per message
            link.flow(1000 - credit)
        if not self.latencies:
            self.first = time.monotonic()
        self.latencies.append(now - struct.unpack_from(">d", data, at)[0])
        if len(self.latencies) == self.total:
            self.elapsed = time.monotonic() - self.first
            event.connection.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=2000, help="offered produce rate, msg/s")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=1024, help="body bytes")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    port = _free_port()
    ready, stop = ctx.Event(), ctx.Event()
    broker_out: mp.Queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        broker = ctx.Process(target=_run_broker, args=(tmp, port, ready, stop, broker_out), daemon=True)
        broker.start()
        if not ready.wait(30):
            raise SystemExit("broker did not start")
        url = f"amqp://{USER}:{PASSWORD}@127.0.0.1:{port}"
        total = int(args.rate * args.seconds)
        results: mp.Queue = ctx.Queue()
        producer = ctx.Process(target=_run_producer, args=(url, args.rate, args.seconds, args.size, results))
        consumer = _Consumer(url, total)
        producer.start()
        Container(consumer).run()
        produced = results.get(timeout=60)
        producer.join(10)
        stop.set()
        broker_cpu = broker_out.get(timeout=30)["broker_cpu_s"]
        broker.join(10)
    lat = sorted(consumer.latencies)

    def pct(p: float) -> float:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 2)

    print(json.dumps({
        "offered_rate": args.rate,
        "messages": total,
        "body_bytes": args.size,
        "produced_per_s": round(produced["produced"] / produced["produce_seconds"], 1),
        "consumed_per_s": round(len(lat) / consumer.elapsed, 1),
        "latency_ms_p50": pct(0.50),
        "latency_ms_p99": pct(0.99),
        "latency_ms_max": round(lat[-1] * 1000, 2),
        # CPU the broker process spent per message (produce + consume): its capacity on an idle core
        "broker_cpu_us_per_msg": round(broker_cpu / total * 1e6, 1),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }))


if __name__ == "__main__":
    main()
