"""Per-link state of client connections: producers (incoming messages), consumers and browsers (outgoing
messages), and incoming mirror links from a peer broker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proton import Condition, Delivery, Link

from artemis_lab.core import codec

if TYPE_CHECKING:
    from artemis_lab.core.broker import Broker
    from artemis_lab.core.connection import AmqpSocket
    from artemis_lab.core.store import Queue, Ref

PRODUCER_CREDIT = 1000  # Artemis' amqpCredits default
PRODUCER_LOW = 300  # amqpLowCredits default


class Producer:
    def __init__(self, broker: Broker, link: Any, socket: AmqpSocket, address: str | None,
                 roles: frozenset[str]):
        self.b = broker
        self.link = link
        self.socket = socket
        self.address = address.split("::", 1)[0] if address else None
        self.roles = roles
        self.gone = False

    def _blocked(self) -> bool:
        if self.address is None:
            return False
        addr = self.b.addresses.get(self.address)
        return addr is not None and addr.blocked

    def grant(self) -> None:
        """Top up credit unless the address is blocked (then producers simply get no more credit)."""
        if self.gone or self._blocked():
            return
        credit = self.link.credit
        if credit < PRODUCER_LOW:
            self.link.flow(PRODUCER_CREDIT - credit)

    def on_flow(self) -> None:
        pass

    def on_delivery(self, dlv: Any) -> None:
        if dlv.partial:
            return
        link = self.link
        if dlv.aborted:
            dlv.settle()
            return
        raw = link.recv(dlv.pending)
        link.advance()
        meta = codec.scan(raw)
        address = self.address
        if address is None:  # anonymous relay: each message names its address
            address = meta.to.split("::", 1)[0] if meta.to else None
            error = None if address else ("amqp:not-found", "message without a `to` on an anonymous link")
            if error is None:
                assert address is not None
                error = self.b._check_producer_address(address, set(), self.roles, self.socket)
            if error is not None:
                self._reject(dlv, *error)
                self.grant()
                return
        assert address is not None
        msg = self.b.route(address, raw, meta, delivery=None if dlv.settled else dlv)
        if msg is None and not dlv.settled:
            self._reject(dlv, "amqp:not-found", f"AMQ229036: Address {address} does not exist")
        elif dlv.settled:
            dlv.settle()
        self.grant()

    @staticmethod
    def _reject(dlv: Any, condition: str, description: str) -> None:
        dlv.local.condition = Condition(condition, description)
        dlv.update(Delivery.REJECTED)
        dlv.settle()


class Consumer:
    def __init__(self, broker: Broker, link: Any, socket: AmqpSocket, queue: Queue, browse: bool, cid: int,
                 subscription: bool = False):
        self.b = broker
        self.link = link
        self.socket = socket
        self.queue = queue
        self.browse = browse
        self.cid = cid
        self.subscription = subscription  # a durable subscription: removed on unsubscribe (link close)
        self.unsettled: dict[bytes, Ref] = {}
        self.presettled = link.snd_settle_mode == Link.SND_SETTLED
        self._tag = 0
        self._cursor = 0  # browsers: highest message id already shown
        self.gone = False

    def on_flow(self) -> None:
        self.b.mark_dirty(self.queue)
        link = self.link
        if link.drain_mode and (self.queue.paused or not self.queue.available):
            link.drained()

    def _next_tag(self) -> bytes:
        self._tag += 1
        return str(self._tag).encode()

    def send(self, ref: Ref) -> None:
        q = self.queue
        link = self.link
        msg = ref.msg
        dlv = link.delivery(self._next_tag())
        link.send(codec.with_delivery_count(msg.raw, msg.meta, ref.delivery_count))
        link.advance()
        if self.presettled:
            dlv.settle()
            self.b._ack(ref)
            return
        ref.consumer = self
        q.delivering += 1
        self.unsettled[dlv.tag] = ref

    def browse_pump(self) -> None:
        link = self.link
        while link.credit > 0:
            nxt = None
            for ref in self.queue.available:
                if ref.msg.mid > self._cursor and (nxt is None or ref.msg.mid < nxt.msg.mid):
                    nxt = ref
            if nxt is None:
                break
            self._cursor = nxt.msg.mid
            dlv = link.delivery(self._next_tag())
            link.send(codec.with_delivery_count(nxt.msg.raw, nxt.msg.meta, nxt.delivery_count))
            link.advance()
            dlv.settle()  # a browsed copy needs no outcome: the message stays in the queue

    def on_disposition(self, dlv: Any) -> None:
        ref = self.unsettled.get(dlv.tag)
        if ref is None:
            if dlv.remote_state or dlv.settled:
                dlv.settle()
            return
        state = dlv.remote_state
        if state == Delivery.ACCEPTED or (not state and dlv.settled):
            del self.unsettled[dlv.tag]
            self.queue.delivering -= 1
            ref.consumer = None
            self.b._ack(ref)
        elif state == Delivery.REJECTED:
            del self.unsettled[dlv.tag]
            self.queue.delivering -= 1
            ref.consumer = None
            self.queue.messages_killed += 1
            self.b._ack(ref)
        elif state in (Delivery.RELEASED, Delivery.MODIFIED):
            del self.unsettled[dlv.tag]
            self.b.return_refs([ref], count=True)
        else:
            return  # no terminal outcome yet (e.g. RECEIVED)
        dlv.settle()


class MirrorIn:
    """Target side of a peer's mirror link: every delivery is one mirror event; settled after it is stored."""

    def __init__(self, broker: Broker, link: Any, socket: AmqpSocket, node: str):
        self.b = broker
        self.link = link
        self.socket = socket
        self.node = node
        self.gone = False
        self.credit = link.credit

    def on_flow(self) -> None:
        pass

    def on_delivery(self, dlv: Any) -> None:
        if dlv.partial:
            return
        link = self.link
        raw = link.recv(dlv.pending)
        link.advance()
        self.b.apply_mirror_event(self, raw)
        if dlv.settled:
            dlv.settle()
        else:
            self.b._post_commit.append(dlv)
        if link.credit < PRODUCER_LOW:
            link.flow(PRODUCER_CREDIT - link.credit)
