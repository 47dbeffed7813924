"""The lab broker engine: implements `artemis_lab.api.BrokerAPI`.

One network thread (`EventLoop`) runs every socket (acceptors, client connections, outgoing mirror
connections) through proton's engine. All state is guarded by one RLock held by the loop while it processes
an iteration and by every public method, so management threads see a consistent broker.

Per iteration: read sockets -> handle proton events (route messages, acks, attaches) -> deliver to
consumers and mirror links -> write the journal in one go -> settle what waited for the journal -> write
sockets. That is the group commit that makes a settled durable message survive `kill -9`.

Mixins keep the pieces apart: `persistence` (journal replay/compaction), `attach` (what a link attach means),
`management` (the public BrokerAPI methods). Mirroring lives in `mirror` (source, ack manager) and
`apply_mirror_event` here (target).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import socket
import threading
import time
from typing import Any

from proton import Collector, Condition, Event, Link, symbol

from artemis_lab import errors, reload, versions
from artemis_lab.core import codec, persistence, pn
from artemis_lab.core.attach import AttachHandling
from artemis_lab.core.connection import AmqpSocket
from artemis_lab.core.filters import compile_filter
from artemis_lab.core.journal import Journal
from artemis_lab.core.links import Consumer, MirrorIn
from artemis_lab.core.loop import EventLoop
from artemis_lab.core.management import AcceptorState, BrokerManagement
from artemis_lab.core.matching import best_match
from artemis_lab.core.mirror import (
    ADD_ADDRESS,
    ADDRESS,
    BROKER_ID,
    CREATE_QUEUE,
    DELETE_ADDRESS,
    DELETE_QUEUE,
    EVENT_TYPE,
    INTERNAL_DESTINATION,
    INTERNAL_ID,
    POST_ACK,
    QUEUE,
    AckManager,
    MirrorSource,
)
from artemis_lab.core.persistence import DUPLICATE_ID_CACHE_SIZE, Persistence
from artemis_lab.core.sasl import SaslServer
from artemis_lab.core.store import KIND_MIRROR_EVENT, Address, Queue, Ref
from artemis_lab.core.store import Message as StoredMessage
from artemis_lab.model import AddressSettingConfig, InstanceConfig

log = logging.getLogger("artemis_lab.core.broker")


def _match_all(_msg: Any) -> bool:
    return True

DUPLICATE_ID = "_AMQ_DUPL_ID"
DUPLICATE_ID_BYTES = DUPLICATE_ID.encode()
ID_RESERVATION = 100_000
SESSION_INCOMING_CAPACITY = 64 * 1024 * 1024  # bytes; see the SESSION_REMOTE_OPEN handler


class Broker(Persistence, AttachHandling, BrokerManagement):
    def __init__(self, instance: InstanceConfig, realm: Any) -> None:
        self.instance = instance
        self.cfg = instance.broker
        self.realm = realm
        self.name = self.cfg.name
        self.version = instance.emulated_version + versions.LAB_SUFFIX
        self.node_id = ""
        self._lock = threading.RLock()
        self.addresses: dict[str, Address] = {}
        self.queues: dict[str, Queue] = {}
        self._queues_by_id: dict[int, Queue] = {}
        self._next_id = 1
        self._id_reserved = 0  # ids below this are covered by an ("I", n) journal record
        data_dir = self.cfg.journal_directory
        if not os.path.isabs(data_dir):
            data_dir = os.path.join(instance.instance_dir, data_dir)
        # Group commit writes to the OS before settling (survives kill -9); fsync (power loss) only on request,
        # because one fsync per loop iteration costs milliseconds on ordinary disks.
        self.journal = Journal(data_dir, fsync=os.environ.get("ARTEMIS_LAB_JOURNAL_FSYNC") == "1",
                               enabled=self.cfg.persistence_enabled)
        self.loop = EventLoop()
        self.collector = Collector()
        self.acceptors: dict[str, AcceptorState] = {a.name: AcceptorState(a) for a in self.cfg.acceptors}
        self.sockets: dict[int, AmqpSocket] = {}
        self._post_commit: list[tuple[Any, AmqpSocket]] = []  # deliveries to settle once the journal is written
        self._links: dict[int, Any] = {}  # proton link pointer -> link state (Producer/Consumer/MirrorIn/...)
        self._dirty: set[Queue] = set()
        self.mirrors: dict[str, MirrorSource] = {}
        cs = self.cfg.core_settings
        self.ack_manager = AckManager(self, int(cs.get("mirror-ack-manager-queue-attempts", 5)),
                                      int(cs.get("mirror-ack-manager-page-attempts", 2)),
                                      int(cs.get("mirror-ack-manager-retry-delay", 100)))
        self._mirror_seen: dict[str, int] = {}  # source node id -> highest mirror event id applied
        self._dup_ids: dict[str, dict[Any, None]] = {}  # address -> recent _AMQ_DUPL_ID values, oldest first
        self._filters: dict[int, Any] = {}  # queue id -> compiled filter
        self._mirror_seen_dirty: set[str] = set()
        self._started_at = 0.0
        self._compact_at = persistence.COMPACT_MIN_BYTES  # module attribute: tests lower it
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.started = False
        self._consumer_seq = 0
        self.total_added = 0
        self.total_acked = 0
        for bc in self.cfg.broker_connections:
            if bc.mirror is not None:
                self.mirrors[bc.name] = MirrorSource(self, bc)

    # ================================================================== life cycle
    def start(self) -> None:
        with self._lock:
            self._validate()
            self._replay()
            self._deploy_config()
            self._compact()
            self.journal.open()
            try:
                for acc in self.acceptors.values():
                    if reload.auto_start(acc.cfg.params):  # autoStart=false: a fenced site stays fenced
                        self._bind(acc)
            except Exception:
                for acc in self.acceptors.values():  # leave no port bound behind a failed start
                    self._unbind(acc)
                self.journal.close()
                raise
            self._started_at = time.time()
            self.started = True
            self._thread = threading.Thread(target=self._run, name=f"lab-broker-{self.name}", daemon=True)
            self._thread.start()
            for m in self.mirrors.values():
                if m.cfg.auto_start:
                    m.start()
            self.ack_manager.start()
            self.loop.call_later(1.0, self._tick_transports)
        self.loop.wake()
        log.info("lab broker %s (emulating %s) active, node id %s", self.name, self.instance.emulated_version,
                 self.node_id)

    def stop(self) -> None:
        with self._lock:
            if not self.started:
                return
            self._stopping = True
            for m in self.mirrors.values():
                m.started = False
                m.drop()
            for acc in self.acceptors.values():
                self._unbind(acc)
            for s in list(self.sockets.values()):
                self.force_close(s)
            self._commit()
        self.loop.wake()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            self.journal.close()
            self.started = False
            self.loop.close()

    def _validate(self) -> None:
        for bc in self.cfg.broker_connections:
            if bc.retry_interval <= 0:
                raise errors.ConfigurationError(f"retry-interval of broker connection {bc.name} must be > 0")
            if bc.reconnect_attempts == 0:
                raise errors.ConfigurationError(f"reconnect-attempts of broker connection {bc.name} cannot be 0")

    # ================================================================== ids
    def _new_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        if i >= self._id_reserved:
            # Ids of non-durable messages/events also reach the peer (its mirror dedup is by id), so a
            # restarted broker must never reuse one: journal a reservation ahead of use. It is written
            # before anything carrying these ids leaves (journal flush precedes socket writes).
            self._id_reserved = i + ID_RESERVATION
            self.journal.append(("I", self._id_reserved))
        return i

    def _tick_transports(self) -> None:
        # proton sends heartbeats / detects idle peers only when ticked
        now = time.time()
        for s in list(self.sockets.values()):
            with contextlib.suppress(Exception):
                s.transport.tick(now)
        if not self._stopping:
            self.loop.call_later(1.0, self._tick_transports)

    def _deploy_config(self) -> None:
        for a in self.cfg.addresses:
            self._create_address(a.name, {r.upper() for r in a.routing_types}, capture=False)
            for qc in a.queues:
                if qc.name not in self.queues:
                    self._create_queue(a.name, qc.name, qc.routing_type, qc.durable, qc.filter,
                                       max_consumers=qc.max_consumers, purge=qc.purge_on_no_consumers, capture=False)
        for m in self.mirrors.values():
            self._create_address(m.snf_name, {"ANYCAST"}, internal=True, capture=False)
            if m.snf_name not in self.queues:
                self._create_queue(m.snf_name, m.snf_name, "ANYCAST", m.mirror.durable, None, internal=True,
                                   capture=False)
            m.snf = self.queues[m.snf_name]

    # ================================================================== addresses and queues (internal)
    def _attach_queue(self, q: Queue) -> None:
        self.queues[q.name] = q
        self._queues_by_id[q.qid] = q
        addr = self.addresses.get(q.address)
        if addr is None:
            addr = self.addresses[q.address] = Address(q.address, {q.routing_type}, internal=q.internal)
        addr.queues[q.name] = q

    def _create_address(self, name: str, routing_types: set[str], internal: bool = False, auto: bool = False,
                        capture: bool = True) -> Address:
        addr = self.addresses.get(name)
        if addr is not None:
            if not routing_types <= addr.routing_types:
                addr.routing_types |= routing_types
                self.journal.append(("A", name, tuple(sorted(addr.routing_types)), addr.internal, addr.auto_created))
            return addr
        addr = self.addresses[name] = Address(name, routing_types, internal=internal, auto_created=auto)
        self.journal.append(("A", name, tuple(sorted(addr.routing_types)), internal, auto))
        if capture and not internal:
            for m in self.mirrors.values():
                m.capture_address(ADD_ADDRESS, name, sorted(addr.routing_types))
        return addr

    def _create_queue(self, address: str, name: str, routing_type: str, durable: bool = True,
                      filter: str | None = None, internal: bool = False, temporary: bool = False,
                      auto: bool = False, max_consumers: int = -1, purge: bool = False,
                      capture: bool = True) -> Queue:
        rt = routing_type.upper()
        addr = self._create_address(address, {rt}, internal=internal, auto=auto, capture=capture)
        if rt not in addr.routing_types:
            addr.routing_types.add(rt)
        q = Queue(self._new_id(), name, address, rt, durable, filter, internal, temporary, max_consumers, purge,
                  auto)
        self._attach_queue(q)
        if durable:
            self.journal.append(self._queue_record(q))
        if capture:
            for m in self.mirrors.values():
                m.capture_queue(CREATE_QUEUE, q)
        return q

    def _destroy_queue(self, q: Queue, capture: bool = True) -> None:
        for c in list(q.consumers):
            self._close_link(c.link, "amqp:resource-deleted", f"queue {q.name} deleted")
            self._remove_consumer(c)
        self.queues.pop(q.name, None)
        self._queues_by_id.pop(q.qid, None)
        addr = self.addresses.get(q.address)
        if addr is not None:
            addr.queues.pop(q.name, None)
        for ref in q.available:
            ref.msg.refs -= 1
        q.available.clear()
        q.by_key.clear()
        if q.durable:
            self.journal.append(("q", q.qid))
        self._dirty.discard(q)
        if capture:
            for m in self.mirrors.values():
                m.capture_queue(DELETE_QUEUE, q)

    def _delete_address(self, addr: Address, capture: bool = True) -> None:
        for q in list(addr.queues.values()):
            self._destroy_queue(q, capture=capture)
        self.addresses.pop(addr.name, None)
        self.journal.append(("a", addr.name))
        if capture and not addr.internal:
            for m in self.mirrors.values():
                m.capture_address(DELETE_ADDRESS, addr.name, sorted(addr.routing_types))

    def _settings(self, address: str) -> AddressSettingConfig:
        found = best_match(self.cfg.address_settings, address)
        return found if found is not None else AddressSettingConfig(match="#")

    # ================================================================== routing
    def route(self, address: str, raw: bytes, meta: codec.Meta, *, from_mirror: bool = False,
              origin: tuple[str, int] | None = None, delivery: Any = None) -> StoredMessage | None:
        addr = self.addresses.get(address)
        if addr is None:
            return None
        if not from_mirror and DUPLICATE_ID_BYTES in raw and self._is_duplicate(address, raw):
            # Artemis drops a send whose _AMQ_DUPL_ID it has seen on this address; the producer is not told
            if delivery is not None:
                pn.incref(delivery[0])
                self._post_commit.append(delivery)
            return StoredMessage(0, raw, meta, address, None, 0)
        mid = self._new_id()
        onode, oid = origin if origin is not None else (self.node_id, mid)
        msg = StoredMessage(mid, raw, meta, address, onode, oid)
        qids: list[int] = []
        targets = [q for q in addr.queues.values() if not q.internal and (q.filter is None or self._accepts(q, raw))]
        for q in targets:
            ref = Ref(msg, q)
            q.add(ref)
            q.messages_added += 1
            msg.refs += 1
            self.total_added += 1
            if q.durable:
                qids.append(q.qid)
            if q.consumers:
                self._dirty.add(q)
        sync_waits = 0
        if targets and not from_mirror and not addr.internal:
            for m in self.mirrors.values():
                if m.snf is None or not m.wants(address):
                    continue
                ref = Ref(msg, m.snf)
                m.snf.add(ref)
                m.snf.messages_added += 1
                msg.refs += 1
                if m.snf.durable:
                    qids.append(m.snf.qid)
                if m.mirror.sync:
                    sync_waits += 1
        if msg.durable and qids:
            self.journal.append(("M", mid, raw, address, tuple(qids), onode, oid, 0))
        if delivery is not None:
            pn.incref(delivery[0])
            if sync_waits:
                msg.sync_waiter = [delivery, sync_waits]
            else:
                self._post_commit.append(delivery)
        return msg

    def _accepts(self, q: Queue, raw: bytes) -> bool:
        """A queue filter (the lab's subset of the selector syntax, see `filters`); a filter outside that
        subset is logged once and then matches everything rather than silently dropping messages."""
        match = self._filters.get(q.qid)
        if match is None:
            try:
                match = compile_filter(q.filter)
            except errors.IllegalArgument:
                log.warning("lab broker %s: filter %r of queue %s is outside the lab's filter subset; "
                            "it matches every message", self.name, q.filter, q.name)
                match = _match_all
            self._filters[q.qid] = match
        return match(StoredMessage(0, raw, codec.Meta(), q.address, None, 0))

    def settle_after_commit(self, d: Any, s: AmqpSocket) -> None:
        pn.incref(d)
        self._post_commit.append((d, s))

    def _is_duplicate(self, address: str, raw: bytes) -> bool:
        """Duplicate detection on `_AMQ_DUPL_ID` (client sends only: mirrored sends never touch the cache,
        so a producer re-sending to the other site after a failover is not caught, as in Artemis)."""
        dup = codec.application_properties(raw).get(DUPLICATE_ID)
        if dup is None:
            return False
        key = bytes(dup) if isinstance(dup, bytes | bytearray | memoryview) else str(dup)
        cache = self._dup_ids.setdefault(address, {})
        if key in cache:
            log.info("lab broker %s: duplicate message %r on %s ignored", self.name, key, address)
            return True
        cache[key] = None
        if len(cache) > DUPLICATE_ID_CACHE_SIZE:
            del cache[next(iter(cache))]  # oldest first: dicts keep insertion order
        self.journal.append(("U", address, key))
        return False

    def enqueue_mirror_event(self, m: MirrorSource, raw: bytes, with_id: bool, front: bool = False) -> None:
        if m.snf is None:
            return
        meta = codec.scan(raw)
        mid = self._new_id()
        msg = StoredMessage(mid, raw, meta, m.snf_name, None, mid if with_id else 0, KIND_MIRROR_EVENT)
        ref = Ref(msg, m.snf)
        m.snf.add(ref, front=front)
        m.snf.messages_added += 1
        msg.refs = 1
        if msg.durable and m.snf.durable:
            self.journal.append(("M", mid, raw, m.snf_name, (m.snf.qid,), None, msg.origin_id, KIND_MIRROR_EVENT))

    # ================================================================== acks / returns
    def _ack(self, ref: Ref, from_mirror: bool = False) -> None:
        q = ref.queue
        msg = ref.msg
        q.messages_acknowledged += 1
        self.total_acked += 1
        key = (msg.origin_node, msg.origin_id)
        if q.by_key.get(key) is ref:
            del q.by_key[key]
        msg.refs -= 1
        if msg.durable:
            q.held_durable -= 1
        q.held_bytes -= len(msg.raw)
        if msg.durable and q.durable and q.qid in self._queues_by_id:
            self.journal.append(("K", q.qid, msg.mid))
        if not from_mirror and not q.internal:
            for m in self.mirrors.values():
                m.capture_ack(ref)

    def ack_available(self, ref: Ref) -> None:
        """A mirrored ack found its message idle in the queue: remove it (not mirrored back: no echo)."""
        with contextlib.suppress(ValueError):
            ref.queue.available.remove(ref)
        self._ack(ref, from_mirror=True)

    def ack_snf(self, ref: Ref) -> None:
        snf = ref.queue
        snf.delivering -= 1
        ref.consumer = None
        self._ack(ref, from_mirror=True)
        msg = ref.msg
        waiter = msg.sync_waiter
        if waiter is not None:
            waiter[1] -= 1
            if waiter[1] <= 0:
                msg.sync_waiter = None
                self._post_commit.append(waiter[0])

    def return_refs(self, refs: list[Ref], count: bool = True) -> None:
        """Back to the head of their queues in original order (delivery_count+1 when `count`)."""
        for ref in sorted(refs, key=lambda r: r.msg.mid, reverse=True):
            q = ref.queue
            q.delivering -= 1
            ref.consumer = None
            if q.qid not in self._queues_by_id:
                continue
            if count:
                ref.delivery_count += 1
                if not q.internal and self._undeliverable(ref):
                    continue
                if ref.msg.durable and q.durable:
                    self.journal.append(("C", q.qid, ref.msg.mid, ref.delivery_count))
            q.available.appendleft(ref)
            self._dirty.add(q)

    def _undeliverable(self, ref: Ref) -> bool:
        """max-delivery-attempts reached: to the dead-letter address when one exists, else dropped
        (Artemis logs AMQ222149 and drops it)."""
        settings = self._settings(ref.queue.address)
        limit = settings.max_delivery_attempts
        if limit < 0 or ref.delivery_count < limit:
            return False
        q = ref.queue
        q.messages_killed += 1
        self._ack(ref)
        dla = settings.dead_letter_address
        if dla and dla in self.addresses:
            self.route(dla, ref.msg.raw, ref.msg.meta)
        else:
            log.warning("lab broker %s: message %s on %s reached max-delivery-attempts=%d and was dropped",
                        self.name, ref.msg.mid, q.name, limit)
        return True

    # ================================================================== network loop
    def _run(self) -> None:
        sel = self.loop.selector
        while True:
            timeout = 0.0 if (self._post_commit or self.journal.dirty) else self.loop.next_timeout(0.5)
            try:
                ready = sel.select(timeout)
            except OSError:
                ready = []
            with self._lock:
                if self._stopping:
                    return
                for key, mask in ready:
                    kind, obj = key.data
                    if kind == "sock":
                        if mask & selectors.EVENT_READ:
                            obj.on_readable()
                        if mask & selectors.EVENT_WRITE:
                            obj.write()
                    elif kind == "accept":
                        self._accept(obj)
                    elif kind == "connect":
                        obj.on_connect_ready()
                    elif kind == "wake":
                        self.loop.drain_wake()
                try:
                    self.loop.run_due_timers()
                    self._iterate()
                except Exception:  # keep serving: one bad event must not stop the broker's only thread
                    log.exception("lab broker %s: error in the network loop", self.name)

    def _iterate(self) -> None:
        self._process_events()
        self._pump()
        self._process_events()
        self._commit()
        self._flush_sockets()

    def _commit(self) -> None:
        for node in self._mirror_seen_dirty:
            self.journal.append(("W", node, self._mirror_seen[node]))
        self._mirror_seen_dirty.clear()
        self.journal.flush()
        self._maybe_compact()
        if self._post_commit:
            todo, self._post_commit = self._post_commit, []
            for d, sock in todo:
                if not sock.closed:  # else the connection is gone: nothing left to settle
                    pn.delivery_update(d, pn.ACCEPTED)
                    pn.delivery_settle(d)
                pn.decref(d)

    def _flush_sockets(self) -> None:
        sel = self.loop.selector
        for s in list(self.sockets.values()):
            if s.closed:
                continue
            if not s.write():
                self._socket_gone(s)
                continue
            if s.finished:
                self._socket_gone(s)
                continue
            want = selectors.EVENT_READ | (selectors.EVENT_WRITE if s.want_write else 0)
            if getattr(s, "_sel_mask", None) != want:
                with contextlib.suppress(KeyError, ValueError):
                    sel.modify(s.sock, want, ("sock", s))
                s._sel_mask = want

    def add_socket(self, s: AmqpSocket) -> None:
        s.sock.setblocking(False)
        self.sockets[id(s)] = s
        self.loop.selector.register(s.sock, selectors.EVENT_READ, ("sock", s))
        s._sel_mask = selectors.EVENT_READ

    def register_connecting(self, s: socket.socket, owner: MirrorSource) -> None:
        self.loop.selector.register(s, selectors.EVENT_WRITE, ("connect", owner))

    def unregister_fd(self, s: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.loop.selector.unregister(s)

    def force_close(self, s: AmqpSocket) -> None:
        self._socket_gone(s)

    def _socket_gone(self, s: AmqpSocket) -> None:
        if id(s) not in self.sockets:
            return
        del self.sockets[id(s)]
        self.unregister_fd(s.sock)
        self._cleanup_connection(s)
        s.close_socket()
        with contextlib.suppress(Exception):
            s.transport.unbind()
        if (s.owner is not None and s.owner.sock is s) or (s.owner is not None and s.owner.sock is None):
            s.owner.on_socket_closed()

    def _cleanup_connection(self, s: AmqpSocket, failed: bool = True) -> None:
        """`failed`: the connection was lost rather than closed by the client (Artemis then counts the
        unsettled deliveries as delivered: delivery-count + 1)."""
        links = getattr(s, "links", None) or {}
        for state in list(links.values()):
            self._link_gone(state, failed=failed)
        links.clear()

    # ------------------------------------------------------------------ acceptors
    def _bind(self, acc: AcceptorState) -> None:
        cfg = acc.cfg
        host = cfg.host if cfg.host not in ("", "0.0.0.0") else "0.0.0.0"
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, acc.port))
        except OSError as exc:
            s.close()
            raise errors.ConfigurationError(f"AMQ214004: cannot bind acceptor {cfg.name} to {host}:{acc.port}: "
                                            f"{exc}") from exc
        s.listen(128)
        s.setblocking(False)
        acc.port = s.getsockname()[1]  # port 0 in the config: keep the kernel's choice across stop/start
        acc.sock = s
        self.loop.selector.register(s, selectors.EVENT_READ, ("accept", acc))

    def _unbind(self, acc: AcceptorState) -> None:
        if acc.sock is None:
            return
        self.unregister_fd(acc.sock)
        acc.sock.close()
        acc.sock = None
        for s in list(self.sockets.values()):
            if s.acceptor == acc.cfg.name:
                self.force_close(s)

    def _accept(self, acc: AcceptorState) -> None:
        if acc.sock is None:
            return
        for _ in range(64):
            try:
                sock, _addr = acc.sock.accept()
            except (BlockingIOError, InterruptedError, OSError):
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if "AMQP" not in acc.cfg.protocols:
                sock.close()  # the lab speaks AMQP only
                continue
            sasl = SaslServer(allow_anonymous=not self.cfg.security_enabled, authenticate=self._authenticate)
            amqp = AmqpSocket(sock, self.collector, server=True, sasl=sasl, acceptor=acc.cfg.name,
                              container=self.node_id)
            amqp.links = {}
            self.add_socket(amqp)

    def _authenticate(self, mech: str, user: str | None, password: str | None
                      ) -> tuple[bool, str | None, frozenset[str]]:
        if mech == "ANONYMOUS":
            return (not self.cfg.security_enabled), None, frozenset()
        roles = self.realm.authenticate(user or "", password or "")
        if roles is None:
            if not self.cfg.security_enabled:
                return True, user, frozenset()
            log.info("lab broker %s: failed to authenticate user %s over AMQP", self.name, user)
            return False, user, frozenset()
        return True, user, frozenset(roles)

    @staticmethod
    def _roles_of(s: AmqpSocket) -> frozenset[str]:
        return s.roles

    # ------------------------------------------------------------------ proton events
    _SLOW_EVENTS = frozenset(t.number for t in (
        Event.LINK_REMOTE_OPEN, Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH, Event.SESSION_REMOTE_OPEN,
        Event.SESSION_REMOTE_CLOSE, Event.CONNECTION_REMOTE_OPEN, Event.CONNECTION_REMOTE_CLOSE,
        Event.TRANSPORT_CLOSED))

    def _process_events(self) -> None:
        # Deliveries and flow go straight to the link state through raw pointers; only the rare
        # life-cycle events are wrapped into proton's Python objects.
        cimpl = self.collector._impl
        links = self._links
        slow = self._SLOW_EVENTS
        while True:
            ev = pn.collector_peek(cimpl)
            if ev == pn.NULL:
                return
            t = pn.event_type(ev)
            try:
                if t == pn.PN_DELIVERY:
                    d = pn.event_delivery(ev)
                    lp = pn.delivery_link(d)
                    state = links.get(pn.ptr(lp))
                    if state is not None:
                        if pn.link_is_receiver(lp):
                            state.on_delivery(d, lp)
                        else:
                            state.on_disposition(d)
                elif t == pn.PN_LINK_FLOW:
                    state = links.get(pn.ptr(pn.event_link(ev)))
                    if state is not None:
                        state.on_flow()
                elif t in slow:
                    self._dispatch(Event.wrap(ev))
            except Exception:
                log.exception("error handling proton event %s", t)
            pn.collector_pop(cimpl)

    def _dispatch(self, ev: Event) -> None:
        t = ev.type
        if t == Event.LINK_REMOTE_OPEN:
            link = ev.link
            owner = self._links.get(pn.ptr(link._impl))
            if isinstance(owner, MirrorSource):
                owner.on_link_open(link)
            elif link.state & Link.LOCAL_UNINIT:
                self._on_attach(link)
        elif t in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH):
            link = ev.link
            state = self._links.get(pn.ptr(link._impl))
            if isinstance(state, MirrorSource):
                if state.sock is not None:
                    self.force_close(state.sock)
                return
            if state is not None:
                closed = t == Event.LINK_REMOTE_CLOSE
                self._link_gone(state, unsubscribe=closed)
            if link.state & Link.LOCAL_ACTIVE:
                if t == Event.LINK_REMOTE_CLOSE:
                    link.close()
                else:
                    link.detach()
        elif t == Event.SESSION_REMOTE_OPEN:
            ssn = ev.session
            if ssn.state & ssn.LOCAL_UNINIT:
                # proton's default incoming window (1 MiB of frames) caps a mirror link at ~200 deliveries per
                # round trip; Artemis' windows are credit-bound only, so open the session window wide.
                ssn.incoming_capacity = SESSION_INCOMING_CAPACITY
                ssn.open()
        elif t == Event.SESSION_REMOTE_CLOSE:
            ssn = ev.session
            s = ssn.connection._lab
            for state in list(getattr(s, "links", {}).values()):
                if state.link.session == ssn:
                    self._link_gone(state)
            if ssn.state & ssn.LOCAL_ACTIVE:
                ssn.close()
        elif t == Event.CONNECTION_REMOTE_OPEN:
            conn = ev.connection
            if conn.state & conn.LOCAL_UNINIT:
                conn.offered_capabilities = [symbol("ANONYMOUS-RELAY")]
                conn.open()
        elif t == Event.CONNECTION_REMOTE_CLOSE:
            conn = ev.connection
            s = conn._lab
            self._cleanup_connection(s, failed=False)
            if conn.state & conn.LOCAL_ACTIVE:
                conn.close()
        elif t == Event.TRANSPORT_CLOSED:
            s = ev.connection._lab if ev.connection is not None else None
            if s is not None:
                self._cleanup_connection(s)

    def _close_link(self, link: Any, condition: str, description: str) -> None:
        with contextlib.suppress(Exception):
            link.condition = Condition(condition, description)
            link.close()

    def _refuse(self, link: Any, condition: str, description: str) -> None:
        # Like Artemis: answer the attach with a null terminus, then detach with the error.
        if link.is_sender:
            link.source.address = None
        else:
            link.target.address = None
        link.open()
        self._close_link(link, condition, description)

    def _link_gone(self, state: Any, unsubscribe: bool = False, failed: bool = False) -> None:
        self._links.pop(pn.ptr(state.lp), None)
        s = state.socket
        links = getattr(s, "links", None)
        if links is not None:
            links.pop(id(state), None)
        if isinstance(state, Consumer):
            self._remove_consumer(state, unsubscribe=unsubscribe, failed=failed)
        state.gone = True

    def _remove_consumer(self, c: Consumer, unsubscribe: bool = False, failed: bool = False) -> None:
        if c.gone:
            return
        c.gone = True
        q = c.queue
        if c in q.consumers:
            q.consumers.remove(c)
        if c.unsettled:
            refs = list(c.unsettled.values())
            c.unsettled.clear()
            # As Artemis (ServerConsumerImpl cancel): a consumer that closes cleanly did not "deliver" its
            # unsettled messages (count unchanged); a failed connection did (count + 1).
            self.return_refs(refs, count=failed)
        if q.qid in self._queues_by_id and (q.temporary or (c.subscription and unsubscribe)):
            if not q.consumers:
                self._destroy_queue(q)
        elif q.purge_on_no_consumers and not q.consumers and q.qid in self._queues_by_id:
            while q.available:
                self._ack(q.available.popleft())

    def remember_link(self, lp: Any, state: Any) -> None:
        self._links[pn.ptr(lp)] = state

    def forget_link(self, lp: Any) -> None:
        self._links.pop(pn.ptr(lp), None)

    def _register_link(self, s: AmqpSocket, link: Any, state: Any) -> None:
        self._links[pn.ptr(link._impl)] = state
        if not hasattr(s, "links"):
            s.links = {}
        s.links[id(state)] = state

    # ------------------------------------------------------------------ delivery to consumers
    def mark_dirty(self, q: Queue) -> None:
        self._dirty.add(q)

    def _pump(self) -> None:
        if self._dirty:
            dirty, self._dirty = self._dirty, set()
            for q in dirty:
                if q.qid in self._queues_by_id:
                    self._deliver(q)
                    for c in q.consumers:
                        if c.draining:
                            c.draining = False
                            pn.link_drained(c.lp)  # credit left after delivering what we had: give it back
        for m in self.mirrors.values():
            if m.snf is not None and m.snf.available and m.connected:
                m.pump()

    def _deliver(self, q: Queue) -> None:
        addr = self.addresses.get(q.address)
        browsers = getattr(q, "browsers", None)
        if browsers:
            for b in list(browsers):
                if b.gone:
                    browsers.remove(b)
                else:
                    b.browse_pump()
        if q.paused or (addr is not None and addr.paused) or not q.consumers or not q.available:
            return
        consumers = q.consumers
        avail = q.available
        n = len(consumers)
        idle = 0
        while avail and idle < n:
            c = consumers[q.rr % n]
            q.rr += 1
            if c.credit() <= 0:
                idle += 1
                continue
            idle = 0
            ref = avail.popleft()
            c.send(ref)

    # ================================================================== mirror target
    def apply_mirror_event(self, state: MirrorIn, raw: bytes) -> None:
        meta = codec.scan(raw, want_annotations=True)
        da = codec.read_delivery_annotations(raw, meta)
        eid = da.get(str(INTERNAL_ID))
        node = state.node
        if eid is not None:
            eid = int(eid)
            if eid <= self._mirror_seen.get(node, 0):
                return  # a replay after reconnect: already stored
            self._mirror_seen[node] = eid
            self._mirror_seen_dirty.add(node)
        ann = {str(k): v for k, v in (meta.annotations or {}).items()}
        event = ann.get(str(EVENT_TYPE))
        if event is None:
            stored = codec.without_delivery_annotations(raw, meta)
            smeta = codec.meta_without_delivery_annotations(meta)
            address = da.get(str(INTERNAL_DESTINATION)) or smeta.to
            origin_node = str(da.get(str(BROKER_ID)) or node)
            if address is None:
                return
            if address not in self.addresses:
                settings = self._settings(address)
                self._create_address(address, {settings.default_address_routing_type.upper()}, auto=True,
                                     capture=False)
            self.route(address, stored, smeta, from_mirror=True, origin=(origin_node, int(eid or 0)))
            return
        event = str(event)
        body = codec.body_value(raw)
        if event == POST_ACK:
            qname = str(ann.get(str(QUEUE)))
            origin_node = str(ann.get(str(BROKER_ID)) or node)
            self.ack_manager.handle(qname, origin_node, int(body))
        elif event == ADD_ADDRESS:
            info = json.loads(body)
            self._create_address(info["name"], {r.upper() for r in info.get("routingTypes", ["MULTICAST"])},
                                 capture=False)
        elif event == DELETE_ADDRESS:
            addr = self.addresses.get(str(ann.get(str(ADDRESS))))
            if addr is not None and not addr.internal:
                self._delete_address(addr, capture=False)
        elif event == CREATE_QUEUE:
            info = json.loads(body)
            if info["name"] not in self.queues:
                self._create_queue(info["address"], info["name"], info.get("routing-type", "ANYCAST"),
                                   bool(info.get("durable", True)), info.get("filter-string"),
                                   auto=bool(info.get("auto-created", False)), capture=False)
        elif event == DELETE_QUEUE:
            q = self.queues.get(str(ann.get(str(QUEUE))))
            if q is not None and not q.internal:
                self._destroy_queue(q, capture=False)
