"""kill -9 of a lab broker process: settled sends and processed acks survive, nothing acked comes back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from core_support import connect, free_port, instance, send, start, wait_for
from proton import Message

HERE = Path(__file__).resolve().parent
PAD = "x" * 200


def _spawn(tmp_path: Path, port: int, mirror_port: int | None = None, name: str = "crash") -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    extra = [str(mirror_port)] if mirror_port else []
    proc = subprocess.Popen([sys.executable, str(HERE / "core_support.py"), str(tmp_path), name, str(port), *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), line
    return proc


def test_kill_minus_9_keeps_exactly_the_unacked_messages(tmp_path):
    port = free_port()
    proc = _spawn(tmp_path, port)
    try:
        conn = connect(port)
        snd = conn.create_sender("orders")
        for i in range(50):
            snd.send(Message(body=i, durable=True))  # returns once the broker settled it
        rcv = conn.create_receiver("orders", credit=20)
        acked = []
        for _ in range(20):
            acked.append(rcv.receive(timeout=5).body)
            rcv.accept()
        # one more round trip: the broker answers only after processing (and journaling) the accepts above
        conn.create_sender("orders", name="barrier")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert acked == list(range(20))

    proc = _spawn(tmp_path, port)
    try:
        conn = connect(port)
        rcv = conn.create_receiver("orders")
        remaining = []
        while True:
            try:
                msg = rcv.receive(timeout=1)
            except Exception:
                break
            remaining.append(msg.body)
            rcv.accept()
        conn.close()
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(10)
    assert remaining == list(range(20, 50))


def test_mirror_backlog_survives_kill_minus_9_of_the_source(tmp_path):
    port_a, port_b = free_port(), free_port()
    proc = _spawn(tmp_path, port_a, mirror_port=port_b, name="dc1")  # its peer is not running yet
    try:
        send(port_a, "orders", [f"backlog-{i}" for i in range(25)])  # each settled = stored in queue and SNF
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
    peer = start(instance(tmp_path, "dc2", port_b))
    try:
        assert peer.queue_info("orders")["message_count"] == 0
        proc = _spawn(tmp_path, port_a, mirror_port=port_b, name="dc1")
        try:
            wait_for(lambda: peer.queue_info("orders")["message_count"] == 25, timeout=10)
            conn = connect(port_b)
            rcv = conn.create_receiver("orders")
            assert [rcv.receive(timeout=5).body for _ in range(3)] == ["backlog-0", "backlog-1", "backlog-2"]
            conn.close()
        finally:
            proc.stdin.close()  # type: ignore[union-attr]
            proc.wait(10)
    finally:
        peer.stop()


def test_runtime_compaction_keeps_unacked_and_in_flight_messages(tmp_path, monkeypatch):
    from artemis_lab.core import persistence

    monkeypatch.setattr(persistence, "COMPACT_MIN_BYTES", 8192)  # compact after a few KiB instead of 64 MiB
    inst = instance(tmp_path, "compact", free_port())
    b = start(inst)
    try:
        port = int(b.acceptor_info("amqp")["bound_port"])
        send(port, "orders", [f"c{i}-{PAD}" for i in range(60)])
        conn = connect(port)
        rcv = conn.create_receiver("orders", credit=30)
        got = [rcv.receive(timeout=5) for _ in range(30)]
        for _ in range(20):  # accept the first 20; the other 10 stay delivered, unsettled
            rcv.accept()
        conn.create_sender("orders", name="barrier")  # round trip: the accepts are processed
        wait_for(lambda: b.queue_info("orders")["message_count"] == 40)
        before = b.journal.compactions
        b._compact_at = 0  # force one more compaction now, while 10 messages are out on the consumer
        conn.create_sender("orders", name="barrier2")
        wait_for(lambda: b.journal.compactions > before)
        assert before >= 2  # the one at start and at least one while running
        held = [m.body for m in got[20:]]
    finally:
        b.stop()
    b = start(inst)
    try:
        port = int(b.acceptor_info("amqp")["bound_port"])
        assert b.queue_info("orders")["message_count"] == 40
        conn = connect(port)
        rcv = conn.create_receiver("orders")
        bodies = []
        for _ in range(40):
            bodies.append(rcv.receive(timeout=5).body)
            rcv.accept()
        conn.close()
        assert bodies == held + [f"c{i}-{PAD}" for i in range(30, 60)]
    finally:
        b.stop()
