"""The traffic engine: P producers and C consumers on one proton Container thread, ledgers through evidence.py.

Every client owns its own connection (as real applications do) over the site URL list: when a swapover fences
the active site, each client fails over to the next URL on its own. The container thread runs everything AMQP;
the caller's thread (cli.py) only reads ``snapshot()`` and calls ``request_stop()``, both thread-safe.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

from proton import Delivery
from proton.reactor import Container

from ansible_collections.continuity.artemis.plugins.module_utils import amqp, evidence
from continuity_traffic.config import TrafficConfig

# The engine's timer wakes when the next thing is due (a paced send, a resend, a batch's ack timeout), never sooner
# than TICK_MIN nor later than TICK_MAX apart (TICK_MAX: how soon a stop request or the stop's progress is seen).
# A fixed 5 ms tick cost 0.07 of a core at 50 msg/s in the reactor's own event dispatch (benchmarks/README.md).
TICK_MIN, TICK_MAX = 0.005, 0.05

# Application properties every message carries (the consumer reads producer/seq back from them).
P_RUN, P_PRODUCER, P_SEQ, P_ATTEMPT, P_SEND_TS = "ct_run", "ct_producer", "ct_seq", "ct_attempt", "ct_send_ts"


def message_id(run_id: str, producer: str, seq: int) -> str:
    return f"{run_id}:{producer}:{seq}"


def resend_delay(attempt: int, base: float, cap: float) -> float:
    """Delay before attempt ``attempt`` (2 = first resend): base, 2*base, 4*base ... capped."""
    if attempt <= 1:
        return 0.0
    return min(cap, base * (2 ** (attempt - 2)))


class Pacer:
    """How many messages a producer may issue now to hold ``rate`` msg/s (pure; the clock is passed in).

    Time without a connection is not made up with a burst afterwards: the deficit is capped at
    ``max_burst_seconds`` of traffic."""

    def __init__(self, rate: float, start: float, max_burst_seconds: float = 0.5) -> None:
        self.rate = rate
        self.t0 = start
        self.issued = 0
        self.max_burst = max(1, int(rate * max_burst_seconds)) if rate > 0 else 0

    def allowance(self, now: float) -> int:
        if self.rate <= 0:
            return 1 << 30
        due = int((now - self.t0) * self.rate + 1e-6) - self.issued  # epsilon: float time vs whole slots
        if due > self.max_burst:
            # behind (disconnected, stalled): forget the missed slots instead of bursting
            self.t0 = now - (self.issued + self.max_burst) / self.rate
            due = self.max_burst
        return max(0, due)

    def took(self, n: int = 1) -> None:
        self.issued += n

    def due_in(self, now: float) -> float:
        """Seconds until the next message may be issued (0: now)."""
        if self.rate <= 0:
            return 0.0
        return max(0.0, self.t0 + (self.issued + 1) / self.rate - now)


@dataclass
class Pending:
    msg_id: str
    seq: int
    attempt: int
    send_ts: float
    site: str
    address: str
    done: bool = False


class Counters:
    """Counters shared with the reporting thread (ints updated on the container thread; read as a copy)."""

    def __init__(self) -> None:
        self.values: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    def add(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.values[key] += n

    def copy(self) -> dict[str, int]:
        with self.lock:
            return dict(self.values)


class Producer(amqp.ManagedClient):
    def __init__(self, engine: TrafficEngine, name: str, address: str) -> None:
        cfg = engine.cfg
        super().__init__(engine.endpoints, engine.options, name=name, reconnect=True, prefetch=0,
                         auto_accept=False, backoff=(0.1, 2.0, 2.0))
        self.engine = engine
        self.cfg = cfg
        self.address = address
        self.seq = 0
        self.pending: dict[tuple[str, int], Pending] = {}
        self.retry: collections.deque[tuple[float, Pending]] = collections.deque()
        self.pacer = Pacer(cfg.rate / max(1, cfg.producers), time.monotonic())
        self.sender = None
        self.issuing = True
        self.body = amqp.payload(cfg.size, name)
        self.ledger = evidence.EvidenceWriter(
            evidence.ledger_path(cfg.evidence_dir, cfg.run_id, "sent", name), run_id=cfg.run_id, ledger="sent",
            writer=name)

    # connection ---------------------------------------------------------------------------------------------
    def on_ready(self, event) -> None:
        self.sender = event.container.create_sender(self.connection, self.address, options=amqp.sender_options())
        self.engine.connected(self.name, self.endpoint.site)

    def on_link_opened(self, event) -> None:
        self.pump()

    def on_sendable(self, event) -> None:
        self.pump()

    def on_lost(self, err: amqp.AmqpError) -> None:
        self.sender = None
        self.engine.lost(self.name, err)
        now = time.time()
        for pend in list(self.pending.values()):
            # Sent but never settled: the broker may or may not have stored it (docs/evidence.md "in doubt").
            self._finish(pend, "in_doubt", None, err.message, now)
            self._maybe_resend(pend, now)
        self.pending.clear()

    def on_failed(self, err: amqp.AmqpError) -> None:
        self.engine.client_failed(self, err)

    # sending --------------------------------------------------------------------------------------------------
    def pump(self) -> None:
        """Send resends that are due, then new messages as the pacer, credit and in-flight limit allow."""
        link = self.sender
        if link is None or not self.ready or not link.state & link.REMOTE_ACTIVE:
            return
        now_m = time.monotonic()
        while self.retry and self.retry[0][0] <= now_m and link.credit > 0 and \
                len(self.pending) < self.cfg.max_in_flight:
            _, pend = self.retry.popleft()
            self._send(link, pend.msg_id, pend.seq, pend.attempt)
        if not self.issuing:
            return
        allowed = min(self.pacer.allowance(now_m), link.credit, self.cfg.max_in_flight - len(self.pending))
        for _ in range(max(0, allowed)):
            seq = self.seq
            self.seq += 1
            self.pacer.took()
            self._send(link, message_id(self.cfg.run_id, self.name, seq), seq, 1)

    def _send(self, link, msg_id: str, seq: int, attempt: int) -> None:
        now = time.time()
        props = {P_RUN: self.cfg.run_id, P_PRODUCER: self.name, P_SEQ: seq, P_ATTEMPT: attempt, P_SEND_TS: now}
        msg = amqp.make_message(self.body, msg_id, properties=props, durable=self.cfg.durable, creation_time=now)
        pend = Pending(msg_id, seq, attempt, now, self.endpoint.site, self.address)
        dlv = link.send(msg)
        dlv._ct_pending = pend  # attributes live in proton's record: the next event's wrapper has it
        self.pending[(msg_id, attempt)] = pend
        self.engine.counters.add("sent_attempts")
        if attempt > 1:
            self.engine.counters.add("resends")

    def _settled(self, event, outcome: str) -> None:
        pend = getattr(event.delivery, "_ct_pending", None)
        if pend is None or pend.done or self.ledger.closed:
            return  # (after close the send was already recorded in doubt)
        self.pending.pop((pend.msg_id, pend.attempt), None)
        now = time.time()
        self._finish(pend, outcome, now, None, now)
        if outcome in ("released", "modified"):
            self._maybe_resend(pend, now)
        self.pump()

    def on_accepted(self, event) -> None:
        self._settled(event, "accepted")

    def on_rejected(self, event) -> None:
        self._settled(event, "rejected")

    def on_released(self, event) -> None:
        self._settled(event, "modified" if event.delivery.remote_state == Delivery.MODIFIED else "released")

    def _finish(self, pend: Pending, outcome: str, confirm_ts: float | None, error: str | None,
                now: float) -> None:
        pend.done = True
        self.ledger.write(evidence.sent_record(
            self.cfg.run_id, self.name, pend.seq, pend.msg_id, pend.address, pend.site, pend.send_ts, confirm_ts,
            outcome, pend.attempt, durable=self.cfg.durable, size=self.cfg.size, error=error, ts=now))
        self.engine.counters.add("sent_" + outcome)

    def _maybe_resend(self, pend: Pending, now: float) -> None:
        if pend.attempt >= self.cfg.retry_attempts or (not self.issuing and self.engine.stop_deadline_passed()):
            self.engine.counters.add("gave_up")
            return
        nxt = Pending(pend.msg_id, pend.seq, pend.attempt + 1, 0.0, "", pend.address)
        delay = resend_delay(nxt.attempt, self.cfg.retry_backoff, self.cfg.retry_backoff_max)
        self.retry.append((time.monotonic() + delay, nxt))

    def due_in(self, now_m: float) -> float | None:
        """Seconds until pump() has something to send; None while only an event (credit, a settlement, the link
        opening) can give it something, since those events pump themselves."""
        link = self.sender
        if link is None or not self.ready or link.credit <= 0 or len(self.pending) >= self.cfg.max_in_flight:
            return None
        due = [self.retry[0][0] - now_m] if self.retry else []
        if self.issuing:
            due.append(self.pacer.due_in(now_m))
        return max(0.0, min(due)) if due else None

    @property
    def idle(self) -> bool:
        return not self.pending and not self.retry

    def close(self, clean: bool, reason: str) -> None:
        now = time.time()
        for pend in list(self.pending.values()):
            self._finish(pend, "in_doubt", None, "stopped before the broker settled it", now)
        self.pending.clear()
        # recorded already as in_doubt/released: a resend that never went out adds no record
        self.engine.counters.add("resends_abandoned", len(self.retry))
        self.retry.clear()
        self.stop()
        self.ledger.close(clean=clean, reason=reason)


class Consumer(amqp.ManagedClient):
    def __init__(self, engine: TrafficEngine, name: str, address: str) -> None:
        cfg = engine.cfg
        super().__init__(engine.endpoints, engine.options, name=name, reconnect=True, prefetch=cfg.prefetch,
                         auto_accept=False, backoff=(0.1, 2.0, 2.0))
        self.engine = engine
        self.cfg = cfg
        self.address = address
        self.held: list[tuple[Any, dict]] = []   # batch/transacted: (delivery, record) not yet acknowledged
        self.batch_started = 0.0
        self.last_activity = time.monotonic()  # the last message, or the last (re)connect: what drain_idle counts from
        self.receiver = None
        self.txn = None
        self.txn_committing: list[tuple[Any, dict]] | None = None
        self.waiting: list[tuple[Any, dict]] = []  # transacted: received while no transaction was declared
        self.ledger = evidence.EvidenceWriter(
            evidence.ledger_path(cfg.evidence_dir, cfg.run_id, "received", name), run_id=cfg.run_id,
            ledger="received", writer=name)

    def on_ready(self, event) -> None:
        self.receiver = event.container.create_receiver(self.connection, self.address,
                                                        options=amqp.consume_options())
        self.last_activity = time.monotonic()  # the broker has had no time to deliver yet
        self.engine.connected(self.name, self.endpoint.site)
        if self.cfg.ack_mode == "transacted":
            self.txn = None
            event.container.declare_transaction(self.connection, handler=self)

    def on_message(self, event) -> None:
        if self.ledger.closed:
            # prefetched before the close and handed out by proton afterwards: not acknowledged, so the broker
            # redelivers it to the next consumer; nothing to record
            self.engine.counters.add("received_after_close")
            return
        now = time.time()
        self.last_activity = time.monotonic()
        msg = event.message
        props = msg.properties or {}
        dc = int(msg.delivery_count or 0)
        rec = {"msg_id": str(msg.id), "producer": props.get(P_PRODUCER), "seq": props.get(P_SEQ), "recv_ts": now,
               "delivery_count": dc, "site": self.endpoint.site}
        self.engine.counters.add("received")
        if dc > 0:
            self.engine.counters.add("redelivered")
        mode = self.cfg.ack_mode
        if mode == "per-message":
            self.accept(event.delivery)
            self._write(rec, time.time())
            return
        if not self.held:
            self.batch_started = time.monotonic()
        if mode == "transacted":
            if self.txn is None:  # between two transactions: accepted in the next one once it is declared
                self.waiting.append((event.delivery, rec))
                return
            self.txn.accept(event.delivery)
        self.held.append((event.delivery, rec))
        if len(self.held) >= self.cfg.batch_size:
            self.flush_acks()

    def flush_acks(self) -> None:
        if not self.held or not self.ready:
            return
        if self.cfg.ack_mode == "batch":
            now = time.time()
            for dlv, _rec in self.held:
                self.accept(dlv)
            for _, rec in self.held:
                self._write(rec, now)
            self.held = []
        elif self.cfg.ack_mode == "transacted" and self.txn is not None and self.txn_committing is None:
            self.txn_committing = self.held
            self.held = []
            txn, self.txn = self.txn, None  # messages arriving during the discharge wait for the next one
            txn.commit()

    @property
    def busy(self) -> bool:
        """Acknowledgements still to make or to be confirmed (batch, transacted)."""
        return bool(self.held or self.waiting or self.txn_committing)

    def tick(self, now_m: float) -> None:
        if self.due_in(now_m) == 0.0:
            self.flush_acks()

    def due_in(self, now_m: float) -> float | None:
        """Seconds until the held batch's acknowledgement timeout (None: nothing held)."""
        return max(0.0, self.batch_started + self.cfg.batch_timeout - now_m) if self.held else None

    # transactions ---------------------------------------------------------------------------------------------
    def on_transaction_declared(self, event) -> None:
        self.txn = event.transaction
        if self.waiting and not self.held:
            self.batch_started = time.monotonic()
        for dlv, rec in self.waiting:
            self.txn.accept(dlv)
            self.held.append((dlv, rec))
        self.waiting = []

    def on_transaction_committed(self, event) -> None:
        now = time.time()
        for dlv, rec in self.txn_committing or []:
            dlv.settle()  # the broker settled them with the discharge; forget them locally too
            self._write(rec, now)
        self.txn_committing = None
        self.txn = None
        if self.ready and self.connection is not None:
            self.engine.container.declare_transaction(self.connection, handler=self)

    def on_transaction_declare_failed(self, event) -> None:
        self.engine.client_failed(self, amqp.AmqpError(
            amqp.PROTOCOL, f"{self.endpoint.site}: the broker refused to declare an AMQP transaction: "
                           "--ack-mode transacted is not supported there"))

    def on_transaction_aborted(self, event) -> None:
        # The broker rolled back: those messages come back (redelivered); no ack happened.
        self.engine.counters.add("txn_aborted")
        for _, rec in self.txn_committing or []:
            self._write(rec, None)
        self.txn_committing = None
        self.txn = None

    def on_link_failed(self, event, err) -> None:
        if event.link.name == "txn-ctrl":
            err = amqp.AmqpError(amqp.PROTOCOL, f"{self.endpoint.site}: no AMQP transaction coordinator "
                                                f"({err.message}): --ack-mode transacted is not supported there")
            self.engine.client_failed(self, err)
            return
        super().on_link_failed(event, err)

    # loss and close -------------------------------------------------------------------------------------------
    def _write(self, rec: dict, ack_ts: float | None) -> None:
        self.ledger.write(evidence.received_record(
            self.cfg.run_id, self.name, rec["msg_id"], self.address, rec["site"], rec["recv_ts"], ack_ts,
            rec["delivery_count"], producer=rec["producer"], seq=rec["seq"], ack_mode=self.cfg.ack_mode))
        if ack_ts is not None:
            self.engine.counters.add("acked")

    def _drop_held(self) -> None:
        # Received but never acknowledged: the broker hands them out again (redelivered); ack_ts stays null.
        for _, rec in self.held:
            self._write(rec, None)
            self.engine.counters.add("unacked_at_loss")
        for _, rec in [*(self.txn_committing or []), *self.waiting]:
            self._write(rec, None)
            self.engine.counters.add("unacked_at_loss")
        self.waiting = []
        self.held = []
        self.txn_committing = None
        self.txn = None

    def on_lost(self, err: amqp.AmqpError) -> None:
        self.receiver = None
        self.engine.lost(self.name, err)
        self._drop_held()

    def on_failed(self, err: amqp.AmqpError) -> None:
        self.engine.client_failed(self, err)

    def close(self, clean: bool, reason: str) -> None:
        if self.ready and self.cfg.ack_mode == "batch":
            self.flush_acks()
        self._drop_held()
        self.stop()
        self.ledger.close(clean=clean, reason=reason)


def next_tick(due: list[float | None]) -> float:
    """The timer's next delay from what each client has due (None: nothing), within [TICK_MIN, TICK_MAX]."""
    return min(TICK_MAX, max(TICK_MIN, min((d for d in due if d is not None), default=TICK_MAX)))


class TrafficEngine:
    """Run with ``start()``; stop with ``request_stop()``; ``wait()`` returns when everything is closed."""

    def __init__(self, cfg: TrafficConfig) -> None:
        self.cfg = cfg
        self.endpoints = cfg.endpoints()
        self.options = cfg.client_options()
        self.counters = Counters()
        self.state = "starting"
        self.started_at = time.time()
        self.stop_reason: str | None = None
        self.fatal: amqp.AmqpError | None = None
        self.errors: collections.deque[dict] = collections.deque(maxlen=20)
        self.sites: dict[str, str | None] = {}
        self._cmds: queue.Queue = queue.Queue()
        self._stop_requested = threading.Event()
        self._done = threading.Event()
        self._stop_started: float | None = None
        self.producers: list[Producer] = []
        self.consumers: list[Consumer] = []
        self.container = Container(self)
        self.container.container_id = f"continuity-traffic-{cfg.name}"
        self.thread = threading.Thread(target=self._run, name="traffic-engine", daemon=True)

    # public, any thread -------------------------------------------------------------------------------------
    def start(self) -> None:
        evidence.run_dir(self.cfg.evidence_dir, self.cfg.run_id)
        addrs = self.cfg.address
        self.producers = [Producer(self, n, addrs[i % len(addrs)]) for i, n in enumerate(self.cfg.producer_names())]
        self.consumers = [Consumer(self, n, addrs[i % len(addrs)]) for i, n in enumerate(self.cfg.consumer_names())]
        self.thread.start()

    def request_stop(self, reason: str = "stopped") -> None:
        if not self._stop_requested.is_set():
            self.stop_reason = reason
            self._stop_requested.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def snapshot(self) -> dict[str, Any]:
        c = self.counters.copy()
        sent_ok = c.get("sent_accepted", 0)
        return {
            "run_id": self.cfg.run_id, "name": self.cfg.name, "state": self.state, "started": self.started_at,
            "elapsed": round(time.time() - self.started_at, 3), "duration": self.cfg.duration,
            "run_dir": self.cfg.run_dir, "stop_reason": self.stop_reason,
            "fatal": self.fatal.to_dict() if self.fatal else None,
            "producers": self.cfg.producers, "consumers": self.cfg.consumers,
            "sites": dict(self.sites),
            "sent": {k[5:]: v for k, v in c.items() if k.startswith("sent_") and k != "sent_attempts"},
            "sent_attempts": c.get("sent_attempts", 0), "resends": c.get("resends", 0),
            "gave_up": c.get("gave_up", 0),
            "in_flight": sum(len(p.pending) for p in self.producers),
            "received": c.get("received", 0), "acked": c.get("acked", 0),
            "redelivered": c.get("redelivered", 0), "unacked_at_loss": c.get("unacked_at_loss", 0),
            "backlog_estimate": max(0, sent_ok - c.get("acked", 0)) if self.cfg.consumers else None,
            "connects": c.get("connects", 0), "disconnects": c.get("disconnects", 0),
            "errors": list(self.errors),
        }

    # container thread ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.container.run()
        except Exception as exc:  # pragma: no cover - reported, ledgers still closed below
            self.fatal = amqp.AmqpError(amqp.PROTOCOL, f"engine crashed: {exc!r}")
            # the traceback too: a crash inside the AMQP library is otherwise undiagnosable from the ledgers
            self.errors.append({"ts": time.time(), "client": "engine", "kind": "crash", "message": repr(exc),
                                "traceback": traceback.format_exc(limit=12)})
        finally:
            for client in [*self.producers, *self.consumers]:
                if not client.ledger.closed:
                    client.ledger.close(clean=False, reason=self.fatal.message if self.fatal else "engine ended")
            self.state = "stopped"
            self._done.set()

    def on_reactor_init(self, event) -> None:
        self.state = "running"
        # Consumers first, so that they are attached before the first message arrives.
        for client in [*self.consumers, *self.producers]:
            client.start(event.container)
        event.container.schedule(TICK_MIN, self)

    def on_timer_task(self, event) -> None:
        now_m = time.monotonic()
        if self._stop_requested.is_set() and self._stop_started is None:
            self._begin_stop(now_m)
        for p in self.producers:
            p.pump()
        for c in self.consumers:
            c.tick(now_m)
        if self._stop_started is not None and self._stop_progress(now_m):
            return
        event.container.schedule(next_tick([c.due_in(now_m) for c in [*self.producers, *self.consumers]]), self)

    def _begin_stop(self, now_m: float) -> None:
        self._stop_started = now_m
        self.state = "stopping"
        for p in self.producers:
            p.issuing = False

    def stop_deadline_passed(self) -> bool:
        return self._stop_started is not None and time.monotonic() - self._stop_started > self.cfg.drain_timeout

    def _stop_progress(self, now_m: float) -> bool:
        """Stop order: producers settle what is in flight; consumers drain until idle; then close all."""
        waited = now_m - self._stop_started
        timed_out = waited >= self.cfg.drain_timeout
        producers_idle = all(p.idle or not p.ready for p in self.producers)
        # A consumer that is reconnecting (its broker failing back, a site switching) is not idle: what waits for it
        # on the queue would stay there and the ledgers would call it lost. The drain timeout bounds the wait.
        consumers_idle = all(c.ready and now_m - c.last_activity >= self.cfg.drain_idle and not c.busy
                             for c in self.consumers)
        if self.fatal is None and not timed_out and not (producers_idle and consumers_idle):
            return False
        clean = self.fatal is None
        reason = self.stop_reason or "stopped"
        if timed_out and not (producers_idle and consumers_idle):
            reason += f" (drain timeout {self.cfg.drain_timeout:.0f}s)"
        self.state = "closing"
        for c in self.consumers:
            c.close(clean, reason)
        for p in self.producers:
            p.close(clean, reason)
        self.container.stop()
        return True

    # callbacks from clients (container thread) ---------------------------------------------------------------
    def connected(self, name: str, site: str) -> None:
        self.sites[name] = site
        self.counters.add("connects")

    def lost(self, name: str, err: amqp.AmqpError) -> None:
        self.sites[name] = None
        self.counters.add("disconnects")
        self.errors.append({"ts": time.time(), "client": name, "kind": err.kind, "message": err.message})

    def client_failed(self, client: amqp.ManagedClient, err: amqp.AmqpError) -> None:
        """A client cannot go on (transactions unsupported, credentials refused for good): stop the run."""
        self.fatal = err
        self.errors.append({"ts": time.time(), "client": client.name, "kind": err.kind, "message": err.message})
        self.request_stop(f"fatal: {err.message}")
