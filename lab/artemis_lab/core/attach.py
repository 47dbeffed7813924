"""Link attach handling: what a client's sender/receiver attach means in Artemis terms (producer to an
address, consumer of an anycast queue, multicast subscription, browser, a peer's mirror link), with
auto-create per address-settings and security-settings checks. A mixin of `Broker`."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from proton import Terminus

from artemis_lab.core import security
from artemis_lab.core.connection import AmqpSocket
from artemis_lab.core.links import PRODUCER_CREDIT, PRODUCER_LOW, Consumer, MirrorIn, Producer
from artemis_lab.core.mirror import BROKER_ID, MIRROR_CAPABILITY, SNF_PREFIX
from artemis_lab.core.store import Queue

UNAUTHORIZED = "amqp:unauthorized-access"
NOT_FOUND = "amqp:not-found"


class AttachHandling:
    """Attach decisions; uses Broker's state and helpers (`_refuse`, `_create_queue`, `_settings`, ...)."""

    def _on_attach(self, link: Any) -> None:
        s: AmqpSocket = link.connection._lab
        if s is None or s.server is False:
            self._refuse(link, NOT_FOUND, "unexpected link")
            return
        roles = self._roles_of(s)
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        if link.is_receiver:
            self._attach_producer(link, s, roles)
        else:
            self._attach_consumer(link, s, roles)

    def _can(self, roles: frozenset[str], perm: str, address: str) -> bool:
        return security.allowed(self.cfg, roles, perm, address)

    @staticmethod
    def _has_filter(terminus: Any) -> bool:
        data = terminus.filter
        data.rewind()
        if data.next() is None:
            return False
        value = data.get_object()
        return bool(value)

    @staticmethod
    def _caps(terminus: Any) -> set[str]:
        out: set[str] = set()
        with contextlib.suppress(Exception):
            data = terminus.capabilities
            data.rewind()
            while data.next():
                obj = data.get_object()
                if isinstance(obj, list | tuple):
                    out.update(str(x) for x in obj)
                elif hasattr(obj, "elements"):
                    out.update(str(x) for x in obj.elements)
                else:
                    out.add(str(obj))
        return out

    def _attach_producer(self, link: Any, s: AmqpSocket, roles: frozenset[str]) -> None:
        if link.remote_target.type == Terminus.COORDINATOR:
            self._refuse(link, "amqp:not-implemented", "transactions are not supported by the lab broker")
            return
        address = link.remote_target.address
        caps = self._caps(link.remote_target)
        if str(MIRROR_CAPABILITY) in caps:
            if address is None or not address.startswith(SNF_PREFIX):
                self._refuse(link, NOT_FOUND, "mirror link needs an SNF address")
                return
            if not self._can(roles, "send", address):
                self._refuse(link, UNAUTHORIZED, f"AMQ229032: User: {s.user} does not have permission='SEND' "
                                                 f"on address {address}")
                return
            props = link.remote_properties or {}
            node = str(props.get(BROKER_ID) or props.get(str(BROKER_ID)) or link.connection.remote_container or "")
            # Artemis shows the peer's SNF address on the target (not its queue).
            if address not in self.addresses:
                self._create_address(address, {"ANYCAST"}, capture=False)
            params = self.acceptors[s.acceptor].cfg.params if s.acceptor in self.acceptors else {}
            credits = int(params.get("amqpCredits", PRODUCER_CREDIT))
            state = MirrorIn(self, link, s, node, credits, int(params.get("amqpLowCredits", PRODUCER_LOW)))
            self._register_link(s, link, state)
            link.open()
            link.flow(credits)
            return
        if address is not None:
            error = self._check_producer_address(address, caps, roles, s)
            if error is not None:
                self._refuse(link, *error)
                return
        state = Producer(self, link, s, address, roles)
        self._register_link(s, link, state)
        link.open()
        state.grant()

    def _check_producer_address(self, address: str, caps: set[str], roles: frozenset[str],
                                s: AmqpSocket) -> tuple[str, str] | None:
        if address.startswith(SNF_PREFIX) or (address in self.addresses and self.addresses[address].internal):
            return NOT_FOUND, f"AMQ229036: Address {address} does not exist"
        if "::" in address:
            address = address.split("::", 1)[0]
        if not self._can(roles, "send", address):
            return UNAUTHORIZED, f"AMQ229032: User: {s.user} does not have permission='SEND' on address {address}"
        if address in self.addresses:
            return None
        settings = self._settings(address)
        if not settings.auto_create_addresses:
            return NOT_FOUND, f"AMQ229036: Address {address} does not exist"
        if not self._can(roles, "createAddress", address):
            return UNAUTHORIZED, (f"AMQ229032: User: {s.user} does not have permission='CREATE_ADDRESS' "
                                  f"on address {address}")
        rt = "ANYCAST" if "queue" in caps else "MULTICAST" if "topic" in caps else \
            settings.default_address_routing_type.upper()
        self._create_address(address, {rt}, auto=True)
        if rt == "ANYCAST" and settings.auto_create_queues and self._can(roles, "createDurableQueue", address):
            self._create_queue(address, address, "ANYCAST", True, auto=True)
        return None

    def _attach_consumer(self, link: Any, s: AmqpSocket, roles: frozenset[str]) -> None:
        src = link.remote_source
        address = src.address
        if not address:
            self._refuse(link, "amqp:not-implemented", "dynamic or null sources are not supported by the lab")
            return
        caps = self._caps(src)
        if self._has_filter(src):
            self._refuse(link, "amqp:not-implemented", "consumer filters (selectors) are not supported by the lab")
            return
        browse = src.distribution_mode == Terminus.DIST_MODE_COPY
        durable_sub = src.durability != Terminus.NONDURABLE
        perm = "browse" if browse else "consume"
        queue: Queue | None = None
        subscription = False
        if address.startswith(SNF_PREFIX) or (address in self.queues and self.queues[address].internal):
            self._refuse(link, NOT_FOUND, f"AMQ229017: Queue {address} does not exist")
            return
        if "::" in address:
            addr_name, qname = address.split("::", 1)
            queue = self.queues.get(qname)
            if queue is None or queue.address != addr_name:
                self._refuse(link, NOT_FOUND, f"AMQ229017: Queue {address} does not exist")
                return
        elif address in self.queues and "topic" not in caps:
            queue = self.queues[address]
        else:
            addr = self.addresses.get(address)
            settings = self._settings(address)
            if addr is None:
                if not settings.auto_create_addresses:
                    self._refuse(link, NOT_FOUND, f"AMQ229036: Address {address} does not exist")
                    return
                if not self._can(roles, "createAddress", address):
                    self._refuse(link, UNAUTHORIZED, f"AMQ229032: User: {s.user} does not have "
                                                     f"permission='CREATE_ADDRESS' on address {address}")
                    return
                rt = "ANYCAST" if "queue" in caps else "MULTICAST" if "topic" in caps else \
                    settings.default_address_routing_type.upper()
                if rt == "ANYCAST":
                    if not self._can(roles, "createDurableQueue", address):
                        self._refuse(link, UNAUTHORIZED, f"AMQ229032: User: {s.user} does not have "
                                                         f"permission='CREATE_DURABLE_QUEUE' on address {address}")
                        return
                    queue = self._create_queue(address, address, "ANYCAST", True, auto=True)
                else:
                    addr = self._create_address(address, {"MULTICAST"}, auto=True)
            if queue is None and addr is not None:
                if "MULTICAST" in addr.routing_types and "queue" not in caps:
                    subscription = True
                else:
                    anycast = [q for q in addr.queues.values() if q.routing_type == "ANYCAST" and not q.internal]
                    if not anycast:
                        self._refuse(link, NOT_FOUND, f"AMQ229017: Queue {address} does not exist")
                        return
                    queue = anycast[0]
            if subscription:
                if not self._can(roles, perm, address):
                    self._refuse(link, UNAUTHORIZED, f"AMQ229032: User: {s.user} does not have "
                                                     f"permission='{perm.upper()}' on address {address}")
                    return
                if durable_sub:
                    qname = f"{link.connection.remote_container}.{link.name}"
                    queue = self.queues.get(qname)
                    if queue is None:
                        if not self._can(roles, "createDurableQueue", address):
                            self._refuse(link, UNAUTHORIZED, f"AMQ229032: User: {s.user} does not have "
                                                             f"permission='CREATE_DURABLE_QUEUE' on address "
                                                             f"{address}")
                            return
                        queue = self._create_queue(address, qname, "MULTICAST", True)
                else:
                    if not self._can(roles, "createNonDurableQueue", address):
                        self._refuse(link, UNAUTHORIZED, f"AMQ229032: User: {s.user} does not have "
                                                         f"permission='CREATE_NON_DURABLE_QUEUE' on address "
                                                         f"{address}")
                        return
                    queue = self._create_queue(address, str(uuid.uuid4()), "MULTICAST", False, temporary=False)
                    queue.temporary = True  # removed with its consumer (Artemis: non-durable subscription)
        assert queue is not None
        if not self._can(roles, perm, queue.address):
            self._refuse(link, UNAUTHORIZED, f"AMQ229032: User: {s.user} does not have permission="
                                             f"'{perm.upper()}' on address {queue.address}")
            return
        if queue.max_consumers >= 0 and len(queue.consumers) >= queue.max_consumers and not browse:
            self._refuse(link, "amqp:resource-limit-exceeded", f"AMQ229031: maximum consumers reached on {queue.name}")
            return
        self._consumer_seq += 1
        c = Consumer(self, link, s, queue, browse, self._consumer_seq, subscription=subscription and durable_sub)
        self._register_link(s, link, c)
        if not browse:
            queue.consumers.append(c)
        else:
            queue.browsers = [*getattr(queue, "browsers", []), c]
        link.open()
        self._dirty.add(queue)
