"""Mirror source: one per `<amqp-connection>` holding `<mirror>`.

Every mirrored event first becomes a reference on the local durable internal queue
`$ACTIVEMQ_ARTEMIS_MIRROR_<name>` (the SNF queue). An outgoing AMQP client connection sends the SNF in order
over one sender link to the peer's acceptor; the peer settles after storing, and only then is the event
acknowledged (removed) here. Event/annotation names follow Artemis' AMQP mirror so traces look alike.
"""

from __future__ import annotations

import errno
import json
import logging
import socket
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from proton import symbol

from artemis_lab.core import codec, pn
from artemis_lab.core.connection import AmqpSocket
from artemis_lab.core.matching import AddressFilter
from artemis_lab.core.store import KIND_MIRROR_EVENT, Queue, Ref
from artemis_lab.model import BrokerConnectionConfig

if TYPE_CHECKING:
    from artemis_lab.core.broker import Broker

log = logging.getLogger("artemis_lab.core.mirror")

SNF_PREFIX = "$ACTIVEMQ_ARTEMIS_MIRROR_"
MIRROR_CAPABILITY = symbol("amq.mirror")
EVENT_TYPE = symbol("x-opt-amq-mr-ev-type")
ADDRESS = symbol("x-opt-amq-mr-adr")
QUEUE = symbol("x-opt-amq-mr-qu")
BROKER_ID = symbol("x-opt-amq-bkr-id")
INTERNAL_ID = symbol("x-opt-amq-mr-id")
INTERNAL_DESTINATION = symbol("x-opt-amq-mr-dst")
ADD_ADDRESS = "addAddress"
DELETE_ADDRESS = "deleteAddress"
CREATE_QUEUE = "createQueue"
DELETE_QUEUE = "deleteQueue"
POST_ACK = "postAck"


def parse_uris(uri: str) -> list[tuple[str, int]]:
    """`tcp://a:5672?x=y#tcp://b:5672` -> [(a, 5672), (b, 5672)]."""
    out = []
    for part in uri.split("#"):
        part = part.strip()
        if not part:
            continue
        parsed = urlparse(part.split("?")[0])
        out.append((parsed.hostname or "localhost", parsed.port or 5672))
    return out


def is_mirror_internal(address: str) -> bool:
    return address.startswith(SNF_PREFIX)


class MirrorSource:
    def __init__(self, broker: Broker, cfg: BrokerConnectionConfig):
        assert cfg.mirror is not None
        self.b = broker
        self.cfg = cfg
        self.name = cfg.name
        self.mirror = cfg.mirror
        self.filter = AddressFilter(cfg.mirror.address_filter)
        self.snf_name = SNF_PREFIX + cfg.name
        self.snf: Queue | None = None
        self.started = False
        self.connected = False
        self.sock: AmqpSocket | None = None
        self.connecting: socket.socket | None = None
        self.sender: Any = None
        self.lp: Any = None  # raw pointer of `sender`
        self.unsettled: dict[int, Ref] = {}  # delivery pointer -> SNF ref
        self._tag = 0
        self._attempt = 0
        self._failures = 0
        self._generation = 0
        self.uris = parse_uris(cfg.uri)

    # --- capture ------------------------------------------------------------------------------------
    def wants(self, address: str) -> bool:
        if is_mirror_internal(address) or address.startswith("activemq.management"):
            return False
        return self.filter.allows(address)

    def capture_ack(self, ref: Ref) -> None:
        if not self.mirror.message_acknowledgements or not self.wants(ref.queue.address):
            return
        msg = ref.msg
        annotations: dict = {EVENT_TYPE: symbol(POST_ACK), ADDRESS: ref.queue.address, QUEUE: ref.queue.name}
        if msg.origin_node != self.b.node_id:
            annotations[BROKER_ID] = msg.origin_node
        self._event(annotations, msg.origin_id)

    def capture_address(self, kind: str, address: str, routing_types: list[str]) -> None:
        enabled = self.mirror.queue_creation if kind == ADD_ADDRESS else self.mirror.queue_removal
        if enabled and self.wants(address):
            body = json.dumps({"name": address, "routingTypes": routing_types})
            self._event({EVENT_TYPE: symbol(kind), ADDRESS: address}, body)

    def capture_queue(self, kind: str, queue: Queue) -> None:
        enabled = self.mirror.queue_creation if kind == CREATE_QUEUE else self.mirror.queue_removal
        if not enabled or queue.temporary or queue.internal or not self.wants(queue.address):
            return
        if kind == CREATE_QUEUE:
            body: Any = json.dumps({"name": queue.name, "address": queue.address,
                                    "routing-type": queue.routing_type, "durable": queue.durable,
                                    "filter-string": queue.filter, "max-consumers": queue.max_consumers,
                                    "purge-on-no-consumers": queue.purge_on_no_consumers,
                                    "auto-created": queue.auto_created})
        else:
            body = queue.name
        self._event({EVENT_TYPE: symbol(kind), ADDRESS: queue.address, QUEUE: queue.name}, body)

    def _event(self, ann: dict, body: Any, keep_id: bool = True, front: bool = False) -> None:
        raw = codec.encode_event(ann, body, self.mirror.durable)
        self.b.enqueue_mirror_event(self, raw, with_id=keep_id, front=front)

    def sync_definitions(self) -> None:
        """At every connect, re-send the address/queue definitions (idempotent on the target), ahead of the
        backlog, so messages captured before the peer knew a queue still find it. No event id: these are
        never deduplicated and not journaled."""
        events: list[tuple[dict, Any]] = []
        for addr in self.b.addresses.values():
            if addr.internal or not self.wants(addr.name) or not self.mirror.queue_creation:
                continue
            events.append(({EVENT_TYPE: symbol(ADD_ADDRESS), ADDRESS: addr.name},
                           json.dumps({"name": addr.name, "routingTypes": sorted(addr.routing_types)})))
            for q in addr.queues.values():
                if q.internal or q.temporary:
                    continue
                events.append(({EVENT_TYPE: symbol(CREATE_QUEUE), ADDRESS: q.address, QUEUE: q.name},
                               json.dumps({"name": q.name, "address": q.address, "routing-type": q.routing_type,
                                           "durable": q.durable, "filter-string": q.filter})))
        for ann, body in reversed(events):
            raw = codec.encode_event(ann, body, False)
            self.b.enqueue_mirror_event(self, raw, with_id=False, front=True)

    # --- outgoing connection ------------------------------------------------------------------------
    def start(self) -> None:
        if self.started:
            return
        self.started = True
        self._failures = 0
        self._generation += 1
        self._try_connect(self._generation)

    def stop(self) -> None:
        self.started = False
        self._generation += 1
        self.drop()

    def drop(self) -> None:
        """Close the outgoing connection (if any) and give the unsent/unsettled events back to the SNF."""
        if self.connecting is not None:
            self.b.unregister_fd(self.connecting)
            self.connecting.close()
            self.connecting = None
        if self.sock is not None:
            sock, self.sock = self.sock, None
            self.b.force_close(sock)
        self._lost()

    def _lost(self) -> None:
        was = self.connected
        self.connected = False
        if self.snf is not None:
            self.snf.mirror_sender = None
        if self.lp is not None:
            self.b.forget_link(self.lp)
        self.sender = None
        self.lp = None
        self.sock = None
        if self.unsettled and self.snf is not None:
            refs = list(self.unsettled.values())
            self.unsettled.clear()
            self.b.return_refs(refs, count=False)
        if was:
            log.info("broker connection %s disconnected", self.name)

    def _try_connect(self, generation: int) -> None:
        if generation != self._generation or not self.started or self.sock is not None or self.connecting:
            return
        host, port = self.uris[self._attempt % len(self.uris)]
        self._attempt += 1
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            err = s.connect_ex((host, port))
        except OSError:
            err = errno.ECONNREFUSED
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            s.close()
            self._failed()
            return
        self.connecting = s
        self._connect_target = (host, port)
        self.b.register_connecting(s, self)

    def on_connect_ready(self) -> None:
        s = self.connecting
        if s is None:
            return
        self.connecting = None
        self.b.unregister_fd(s)
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            s.close()
            self._failed()
            return
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        host = self._connect_target[0]
        amqp = AmqpSocket(s, self.b.collector, server=False, client_user=self.cfg.user,
                          client_password=self.cfg.password, container=self.b.node_id, hostname=host)
        amqp.owner = self
        self.sock = amqp
        self.b.add_socket(amqp)
        conn = amqp.connection
        conn.open()
        ssn = conn.session()
        ssn.open()
        snd = ssn.sender(f"{self.snf_name}-{self.b.node_id}")
        snd.source.address = self.snf_name
        snd.target.address = self.snf_name
        snd.target.capabilities.put_array(False, 21)  # 21 = symbol array
        snd.target.capabilities.enter()
        snd.target.capabilities.put_symbol(str(MIRROR_CAPABILITY))
        snd.target.capabilities.exit()
        snd.properties = {BROKER_ID: self.b.node_id}
        snd.open()
        self.sender = snd
        self.lp = snd._impl
        self.b.remember_link(snd._impl, self)

    def on_link_open(self, link: Any) -> None:
        if link.remote_target is not None and link.remote_target.address:
            self.connected = True
            if self.snf is not None:
                self.snf.mirror_sender = self
            self._failures = 0
            self.sync_definitions()
            log.info("broker connection %s connected to %s:%s", self.name, *self._connect_target)

    def on_socket_closed(self) -> None:
        self._lost()
        if self.started:
            self._failed()

    def _failed(self) -> None:
        if not self.started:
            return
        self._failures += 1
        if self.cfg.reconnect_attempts != -1 and self._failures > self.cfg.reconnect_attempts:
            log.warning("broker connection %s: could not re-establish after %d attempts", self.name,
                        self._failures - 1)
            return
        generation = self._generation
        self.b.loop.call_later(max(self.cfg.retry_interval, 1) / 1000.0, lambda: self._try_connect(generation))

    # --- sending ----------------------------------------------------------------------------------------
    def on_flow(self) -> None:
        pass  # the loop pumps every connected mirror with a backlog once per iteration

    def pump(self) -> None:
        lp = self.lp
        snf = self.snf
        if not self.connected or lp is None or snf is None:
            return
        avail = snf.available
        credit = pn.link_credit(lp)
        while avail and credit > 0:
            ref = avail.popleft()
            snf.delivering += 1
            ref.consumer = self
            self._tag += 1
            d = pn.send(lp, b"%d" % self._tag, self._encode(ref))
            self.unsettled[pn.ptr(d)] = ref
            credit -= 1

    def _encode(self, ref: Ref) -> bytes:
        msg = ref.msg
        da: dict = {}
        if msg.kind == KIND_MIRROR_EVENT:
            if msg.origin_id > 0:
                da[INTERNAL_ID] = msg.mid
            return codec.with_delivery_annotations(msg.raw, msg.meta, da) if da else msg.raw
        if msg.origin_node != self.b.node_id:
            da[BROKER_ID] = msg.origin_node
        da[INTERNAL_ID] = msg.origin_id
        if msg.meta.to != msg.address:
            da[INTERNAL_DESTINATION] = msg.address
        return codec.with_delivery_annotations(msg.raw, msg.meta, da)

    def on_disposition(self, d: Any) -> None:
        state = pn.delivery_remote_state(d)
        if not state and not pn.delivery_settled(d):
            return  # no outcome yet
        ref = self.unsettled.pop(pn.ptr(d), None)
        if ref is not None:
            if state in (pn.RELEASED, pn.MODIFIED):
                self.b.return_refs([ref], count=False)
            else:
                self.b.ack_snf(ref)
        pn.delivery_settle(d)

    @property
    def failures(self) -> int:
        """Failed connection attempts since the last start or successful connect."""
        return self._failures

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "protocol": "AMQP",
            "started": self.started,
            "connected": self.connected,
            "uri": self.cfg.uri,
            "user": self.cfg.user,
            "retry_interval": self.cfg.retry_interval,
            "reconnect_attempts": self.cfg.reconnect_attempts,
            "auto_start": self.cfg.auto_start,
        }


class AckManager:
    """Target side: mirrored acks whose message is not available (held by a local consumer, or not arrived)
    wait in a persisted retry list; retried every `retry_delay`, then dropped silently after
    queue-attempts + page-attempts tries (the message stays: Artemis' double-delivery caveat)."""

    def __init__(self, broker: Broker, queue_attempts: int, page_attempts: int, retry_delay_ms: int):
        self.b = broker
        self.queue_attempts = queue_attempts
        self.page_attempts = page_attempts
        self.retry_delay = max(retry_delay_ms, 1) / 1000.0
        self.pending: dict[tuple[str, str, int], int] = {}  # (queue, origin node, origin id) -> attempts
        self._scheduled = False
        self.dropped = 0

    def handle(self, queue: str, node: str, origin_id: int) -> None:
        if self._try(queue, node, origin_id):
            return
        key = (queue, node, origin_id)
        if key not in self.pending:
            self.pending[key] = 0
            self.b.journal.append(("T", queue, node, origin_id, 0))
        self._schedule()

    def restore(self, queue: str, node: str, origin_id: int, attempts: int) -> None:
        self.pending[(queue, node, origin_id)] = attempts

    def forget(self, key: tuple[str, str, int]) -> None:
        self.pending.pop(key, None)

    def _try(self, queue: str, node: str, origin_id: int) -> bool:
        q = self.b.queues.get(queue)
        if q is None:
            return True  # queue gone: nothing left to acknowledge
        ref = q.by_key.get((node, origin_id))
        if ref is None or ref.consumer is not None:
            return False
        self.b.ack_available(ref)
        return True

    def _schedule(self) -> None:
        if not self._scheduled and self.pending:
            self._scheduled = True
            self.b.loop.call_later(self.retry_delay, self._tick)

    def _tick(self) -> None:
        self._scheduled = False
        limit = self.queue_attempts + self.page_attempts
        for key in list(self.pending):
            attempts = self.pending[key] + 1
            if self._try(*key) or attempts >= limit:
                if attempts >= limit:
                    self.dropped += 1
                del self.pending[key]
                self.b.journal.append(("t", *key))
            else:
                self.pending[key] = attempts
        self._schedule()

    def start(self) -> None:
        self._schedule()


def now_ms() -> int:
    return int(time.time() * 1000)
