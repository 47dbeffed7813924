"""Per-link state of client connections: producers (incoming messages), consumers and browsers (outgoing
messages), and incoming mirror links from a peer broker. Hot paths take raw proton pointers (see `pn`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proton import Condition, Delivery, Link

from artemis_lab.core import codec, pn

if TYPE_CHECKING:
    from artemis_lab.core.broker import Broker
    from artemis_lab.core.connection import AmqpSocket
    from artemis_lab.core.store import Queue, Ref

PRODUCER_CREDIT = 1000  # Artemis' amqpCredits default
PRODUCER_LOW = 300  # amqpLowCredits default


class LinkState:
    def __init__(self, broker: Broker, link: Any, socket: AmqpSocket):
        self.b = broker
        self.link = link  # the wrapper keeps proton's link alive while we use the raw pointer
        self.lp = link._impl
        self.socket = socket
        self.gone = False

    def on_flow(self) -> None:
        pass


class Producer(LinkState):
    def __init__(self, broker: Broker, link: Any, socket: AmqpSocket, address: str | None,
                 roles: frozenset[str]):
        super().__init__(broker, link, socket)
        self.address = address.split("::", 1)[0] if address else None
        self.roles = roles

    def _blocked(self) -> bool:
        if self.address is None:
            return False
        addr = self.b.addresses.get(self.address)
        return addr is not None and addr.blocked

    def grant(self) -> None:
        """Top up credit unless the address is blocked (then producers simply get no more credit)."""
        if self.gone or self._blocked():
            return
        credit = pn.link_credit(self.lp)
        if credit < PRODUCER_LOW:
            pn.link_flow(self.lp, PRODUCER_CREDIT - credit)

    def on_delivery(self, d: Any, lp: Any) -> None:
        if pn.delivery_partial(d):
            return
        if pn.delivery_aborted(d):
            pn.delivery_settle(d)
            return
        raw = pn.recv(lp, d)
        meta = codec.scan(raw)
        address = self.address
        settled = pn.delivery_settled(d)
        if address is None:  # anonymous relay: each message names its address
            address = meta.to.split("::", 1)[0] if meta.to else None
            error = None if address else ("amqp:not-found", "message without a `to` on an anonymous link")
            if error is None:
                assert address is not None
                error = self.b._check_producer_address(address, set(), self.roles, self.socket)
            if error is not None:
                self._reject(d, *error)
                self.grant()
                return
        assert address is not None
        msg = self.b.route(address, raw, meta, delivery=None if settled else (d, self.socket))
        if msg is None and not settled:
            self._reject(d, "amqp:not-found", f"AMQ229036: Address {address} does not exist")
        elif settled:
            pn.delivery_settle(d)
        self.grant()

    @staticmethod
    def _reject(d: Any, condition: str, description: str) -> None:
        dlv = Delivery.wrap(d)
        dlv.local.condition = Condition(condition, description)
        dlv.update(Delivery.REJECTED)
        dlv.settle()


class Consumer(LinkState):
    def __init__(self, broker: Broker, link: Any, socket: AmqpSocket, queue: Queue, browse: bool, cid: int,
                 subscription: bool = False):
        super().__init__(broker, link, socket)
        self.queue = queue
        self.browse = browse
        self.cid = cid
        self.subscription = subscription  # a durable subscription: removed on unsubscribe (link close)
        self.unsettled: dict[int, Ref] = {}  # delivery pointer -> ref
        self.presettled = link.snd_settle_mode == Link.SND_SETTLED
        self._tag = 0
        self._cursor = 0  # browsers: highest message id already shown
        self.draining = False

    def credit(self) -> int:
        return pn.link_credit(self.lp)

    def on_flow(self) -> None:
        self.b.mark_dirty(self.queue)
        if pn.link_get_drain(self.lp):
            self.draining = True  # answered after the next delivery round (`Broker._pump`)

    def send(self, ref: Ref) -> None:
        msg = ref.msg
        self._tag += 1
        d = pn.send(self.lp, b"%d" % self._tag, codec.with_delivery_count(msg.raw, msg.meta, ref.delivery_count))
        if self.presettled:
            pn.delivery_settle(d)
            self.b._ack(ref)
            return
        ref.consumer = self
        self.queue.delivering += 1
        self.unsettled[pn.ptr(d)] = ref

    def browse_pump(self) -> None:
        while pn.link_credit(self.lp) > 0:
            nxt = None
            for ref in self.queue.available:
                if ref.msg.mid > self._cursor and (nxt is None or ref.msg.mid < nxt.msg.mid):
                    nxt = ref
            if nxt is None:
                break
            self._cursor = nxt.msg.mid
            self._tag += 1
            d = pn.send(self.lp, b"%d" % self._tag, codec.with_delivery_count(nxt.msg.raw, nxt.msg.meta,
                                                                            nxt.delivery_count))
            pn.delivery_settle(d)  # a browsed copy needs no outcome: the message stays in the queue

    def on_disposition(self, d: Any) -> None:
        key = pn.ptr(d)
        ref = self.unsettled.get(key)
        state = pn.delivery_remote_state(d)
        settled = pn.delivery_settled(d)
        if ref is None:
            if state or settled:
                pn.delivery_settle(d)
            return
        if state == pn.ACCEPTED or (not state and settled):
            del self.unsettled[key]
            self.queue.delivering -= 1
            ref.consumer = None
            self.b._ack(ref)
        elif state == pn.REJECTED:
            del self.unsettled[key]
            self.queue.delivering -= 1
            ref.consumer = None
            self.queue.messages_killed += 1
            self.b._ack(ref)
        elif state == pn.RELEASED:
            del self.unsettled[key]
            self.b.return_refs([ref], count=False)  # released = not delivered (AMQP, Artemis)
        elif state == pn.MODIFIED:
            del self.unsettled[key]
            # only modified{delivery-failed} counts as a delivery attempt (Artemis ProtonServerSenderContext)
            self.b.return_refs([ref], count=bool(pn.disposition_is_failed(pn.delivery_remote(d))))
        else:
            return  # no terminal outcome yet (e.g. RECEIVED)
        pn.delivery_settle(d)


class MirrorIn(LinkState):
    """Target side of a peer's mirror link: every delivery is one mirror event; settled after it is stored."""

    def __init__(self, broker: Broker, link: Any, socket: AmqpSocket, node: str, credits: int = PRODUCER_CREDIT,
                 low_credits: int = PRODUCER_LOW):
        super().__init__(broker, link, socket)
        self.node = node
        # the target acceptor's amqpCredits / amqpLowCredits, as Artemis' mirror receiver uses them
        self.credits, self.low_credits = credits, low_credits

    def on_delivery(self, d: Any, lp: Any) -> None:
        if pn.delivery_partial(d):
            return
        raw = pn.recv(lp, d)
        self.b.apply_mirror_event(self, raw)
        if pn.delivery_settled(d):
            pn.delivery_settle(d)
        else:
            self.b.settle_after_commit(d, self.socket)
        credit = pn.link_credit(lp)
        if credit < self.low_credits:
            pn.link_flow(lp, self.credits - credit)
