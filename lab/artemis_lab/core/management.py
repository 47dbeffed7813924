"""The management side of the engine: every public `BrokerAPI` method (thread-safe: each takes the broker lock).

A mixin of `artemis_lab.core.broker.Broker`, kept apart from the network/routing code it drives.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from typing import Any

from artemis_lab import errors, reload
from artemis_lab.core import codec
from artemis_lab.core.links import Consumer, Producer
from artemis_lab.core.mirror import SNF_PREFIX, MirrorSource
from artemis_lab.core.store import KIND_MIRROR_EVENT, Address, Queue
from artemis_lab.versions import has_snf_queue_mbean

log = logging.getLogger("artemis_lab.core.broker")

START_WAIT_S = 2.0  # start_broker_connection waits this long at most for the link to come up
HA_POLICIES = {None: "PRIMARY_ONLY", "primary-only": "PRIMARY_ONLY", "live-only": "PRIMARY_ONLY"}


class AcceptorState:
    """One acceptor: its configuration and, while started, its listening socket."""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.sock: socket.socket | None = None
        self.port = cfg.port

    @property
    def started(self) -> bool:
        return self.sock is not None


class BrokerManagement:
    """Public API methods; state and internals (`_lock`, `_create_queue`, ...) come from `Broker`."""

    # Provided by Broker (declared for readers and type checkers).
    _lock: Any
    instance: Any
    cfg: Any
    queues: dict[str, Queue]
    addresses: dict[str, Address]

    def _api_done(self) -> None:
        self._commit()
        self.loop.wake()

    def _snf_visible(self) -> bool:
        """The SNF queue has its queue MBean (and shows in names) from Artemis 2.32."""
        cached = self.__dict__.get("_snf_visible_cache")
        if cached is None:
            cached = self.__dict__["_snf_visible_cache"] = has_snf_queue_mbean(self.instance.emulated_version)
        return cached

    def _visible_queue(self, q: Queue) -> bool:
        if not q.internal:
            return True
        return q.name.startswith(SNF_PREFIX) and self._snf_visible()

    def _queue(self, name: str) -> Queue:
        q = self.queues.get(name)
        if q is None or not self._visible_queue(q):
            raise errors.NonExistentQueue(name)
        return q

    def _address(self, name: str) -> Address:
        addr = self.addresses.get(name)
        if addr is None or (addr.internal and not self._snf_visible()):
            raise errors.NonExistentAddress(name)
        return addr

    def broker_info(self) -> dict[str, Any]:
        with self._lock:
            visible = [q for q in self.queues.values() if self._visible_queue(q)]
            client = [q for q in visible if not q.internal]
            return {
                "started": self.started,
                "active": self.started,
                "uptime_ms": int((time.time() - self._started_at) * 1000) if self.started else 0,
                "connection_count": sum(1 for s in self.sockets.values() if s.server),
                "total_message_count": sum(q.message_count for q in client),
                "total_consumer_count": sum(len(q.consumers) for q in client),
                "total_messages_added": sum(q.messages_added for q in client),
                "total_messages_acknowledged": sum(q.messages_acknowledged for q in client),
                "pending_mirror_acks": len(self.ack_manager.pending),
                "address_names": sorted(a.name for a in self.addresses.values()
                                        if not a.internal or self._snf_visible()),
                "queue_names": sorted(q.name for q in visible),
                "plugin_class_names": [p.class_name for p in self.cfg.broker_plugins],
                "ha_policy": self._ha_policy(),
                "backup": (self.cfg.ha_policy.role in ("backup", "slave")),
                "node_id": self.node_id,
            }

    def _ha_policy(self) -> str:
        ha = self.cfg.ha_policy
        if ha.kind in HA_POLICIES:
            return HA_POLICIES[ha.kind]
        backup = ha.role in ("backup", "slave")
        if ha.kind == "replication":
            if ha.role == "colocated":
                return "COLOCATED"
            return "REPLICA" if backup else "REPLICATED"
        if ha.kind == "shared-store":
            return "SHARED_STORE_BACKUP" if backup else "SHARED_STORE_PRIMARY"
        return "PRIMARY_ONLY"

    def address_info(self, address: str) -> dict[str, Any]:
        with self._lock:
            addr = self._address(address)
            count = sum(q.message_count for q in addr.queues.values())
            return {
                "routing_types": sorted(addr.routing_types),
                "queue_names": sorted(addr.queues),
                "message_count": count,
                "number_of_messages": count,
                "paused": addr.paused,
                "internal": addr.internal,
                "temporary": False,
                "bytes": sum(q.held_bytes for q in addr.queues.values()),
                "blocked": addr.blocked,
                "auto_created": addr.auto_created,
            }

    def create_address(self, address: str, routing_types: list[str]) -> None:
        with self._lock:
            self._create_address(address, {r.upper() for r in routing_types})
            self._api_done()

    def delete_address(self, address: str, force: bool = False) -> None:
        with self._lock:
            addr = self._address(address)
            if addr.queues and not force:
                raise errors.IllegalState(f"AMQ229203: Address {address} has bindings")
            self._delete_address(addr)
            self._api_done()

    def pause_address(self, address: str, persist: bool = False) -> None:
        with self._lock:
            addr = self._address(address)
            addr.paused = True
            if persist:
                addr.persisted_pause = True
                self.journal.append(("p", address, True))
            self._api_done()

    def resume_address(self, address: str) -> None:
        with self._lock:
            addr = self._address(address)
            addr.paused = False
            if addr.persisted_pause:
                addr.persisted_pause = False
                self.journal.append(("p", address, False))
            self._dirty.update(addr.queues.values())
            self._api_done()

    def block_address(self, address: str) -> bool:
        with self._lock:
            addr = self._address(address)
            addr.blocked = True
            log.info("AMQ224114-lab: address %s blocked", address)
            return True

    def unblock_address(self, address: str) -> bool:
        with self._lock:
            addr = self._address(address)
            addr.blocked = False
            for s in self.sockets.values():
                for state in getattr(s, "links", {}).values():
                    if isinstance(state, Producer):
                        state.grant()
            log.info("AMQ224115-lab: address %s unblocked", address)
            self._api_done()
            return True

    def address_blocked(self, address: str) -> bool:
        with self._lock:
            addr = self.addresses.get(address)
            return bool(addr is not None and addr.blocked)

    def queue_info(self, queue: str) -> dict[str, Any]:
        with self._lock:
            return self._queue(queue).info()

    def create_queue(self, address: str, queue: str, routing_type: str, durable: bool = True,
                     filter: str | None = None, ignore_if_exists: bool = False) -> None:
        with self._lock:
            if queue in self.queues:
                if ignore_if_exists:
                    return
                raise errors.QueueExists(queue, self.queues[queue].address)
            self._create_queue(address, queue, routing_type, durable, filter)
            self._api_done()

    def destroy_queue(self, queue: str, remove_consumers: bool = False) -> None:
        with self._lock:
            q = self._queue(queue)
            if q.internal:
                raise errors.IllegalState(f"queue {queue} is internal")
            if q.consumers and not remove_consumers:
                raise errors.IllegalState(f"AMQ229025: Cannot delete queue {queue} on binding - it has consumers")
            self._destroy_queue(q)
            self._api_done()

    def pause_queue(self, queue: str, persist: bool = False) -> None:
        with self._lock:
            q = self._queue(queue)
            q.paused = True
            if persist:
                q.persisted_pause = True
                self.journal.append(("P", q.qid, True))
            self._api_done()

    def resume_queue(self, queue: str) -> None:
        with self._lock:
            q = self._queue(queue)
            q.paused = False
            if q.persisted_pause:
                q.persisted_pause = False
                self.journal.append(("P", q.qid, False))
            self._dirty.add(q)
            self._api_done()

    def count_messages(self, queue: str, filter: str | None = None) -> int:
        with self._lock:
            q = self._queue(queue)
            if not filter:
                return q.message_count
            from artemis_lab.core.filters import compile_filter

            match = compile_filter(filter)
            return sum(1 for r in q.available if match(r.msg))

    def remove_messages(self, queue: str, filter: str | None = None) -> int:
        with self._lock:
            q = self._queue(queue)
            from artemis_lab.core.filters import compile_filter

            match = compile_filter(filter)
            victims = [r for r in q.available if match(r.msg)]
            for r in victims:
                q.available.remove(r)
                self._ack(r)
            self._api_done()
            return len(victims)

    def browse_messages(self, queue: str, limit: int = 100) -> list[dict[str, Any]]:
        with self._lock:
            q = self._queue(queue)
            out = []
            for r in list(q.available)[:limit]:
                props: dict[str, Any] = {}
                if r.msg.kind != KIND_MIRROR_EVENT:
                    with contextlib.suppress(Exception):
                        props = {str(k): v for k, v in codec.application_properties(r.msg.raw).items()}
                out.append({"messageID": r.msg.mid, "address": r.msg.address, "durable": r.msg.durable,
                            "timestamp": r.msg.timestamp, "userID": str(r.msg.meta.message_id or ""),
                            "properties": props, "deliveryCount": r.delivery_count})
            return out

    def acceptor_names(self) -> list[str]:
        with self._lock:
            return list(self.acceptors)

    def _acceptor(self, name: str) -> AcceptorState:
        acc = self.acceptors.get(name)
        if acc is None:
            raise errors.IllegalArgument(f"acceptor {name} not found")
        return acc

    def acceptor_info(self, name: str) -> dict[str, Any]:
        with self._lock:
            acc = self._acceptor(name)
            params = dict(acc.cfg.params)
            params.setdefault("host", acc.cfg.host)
            params.setdefault("port", str(acc.cfg.port))
            return {"started": acc.started, "parameters": params,
                    "factory_class_name":
                        "org.apache.activemq.artemis.core.remoting.impl.netty.NettyAcceptorFactory",
                    "bound_port": acc.port}

    def start_acceptor(self, name: str) -> None:
        with self._lock:
            acc = self._acceptor(name)
            if acc.sock is None:
                self._bind(acc)
            self.loop.wake()

    def stop_acceptor(self, name: str) -> None:
        with self._lock:
            acc = self._acceptor(name)
            self._unbind(acc)
            self._api_done()

    def update_acceptors(self, configs: list[Any]) -> dict[str, list[str]]:
        """Apply reloaded acceptor configurations as Artemis 2.43+ does (RemotingServiceImpl.updateAcceptors):
        new or changed acceptors are (re)created and started only with autoStart, removed ones are stopped,
        unchanged ones are left alone (their clients stay connected)."""
        wanted = {c.name: c for c in configs}
        out: dict[str, list[str]] = {"created": [], "recreated": [], "removed": [], "started": []}
        with self._lock:
            for name, acc in list(self.acceptors.items()):
                if name not in wanted:
                    self._unbind(acc)
                    del self.acceptors[name]
                    out["removed"].append(name)
            for name, cfg in wanted.items():
                old = self.acceptors.get(name)
                if old is not None and old.cfg == cfg:
                    continue
                if old is not None:
                    self._unbind(old)
                    out["recreated"].append(name)
                else:
                    out["created"].append(name)
                acc = AcceptorState(cfg)
                self.acceptors[name] = acc
                if self.started and reload.auto_start(cfg.params):
                    self._bind(acc)
                    out["started"].append(name)
            self._api_done()
        self.loop.wake()
        return out

    def broker_connections(self) -> list[dict[str, Any]]:
        with self._lock:
            out = [m.info() for m in self.mirrors.values()]
            for bc in self.cfg.broker_connections:
                if bc.name not in self.mirrors:
                    out.append({"name": bc.name, "protocol": "AMQP", "started": False, "connected": False,
                                "uri": bc.uri, "user": bc.user, "retry_interval": bc.retry_interval,
                                "reconnect_attempts": bc.reconnect_attempts, "auto_start": bc.auto_start})
            return out

    def _mirror(self, name: str) -> MirrorSource:
        m = self.mirrors.get(name)
        if m is None:
            raise errors.IllegalArgument(f"broker connection {name} not found")
        return m

    def start_broker_connection(self, name: str) -> None:
        """Returns once connected (as recorded on Artemis: Connected=true on the read right after the exec),
        or as soon as the first attempt failed (then Started=true, Connected=false, retrying)."""
        with self._lock:
            mirror = self._mirror(name)
            mirror.start()
            self.loop.wake()
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            with self._lock:
                if mirror.connected or not mirror.started or mirror.failures > 0:
                    return
            time.sleep(0.005)

    def stop_broker_connection(self, name: str) -> None:
        with self._lock:
            self._mirror(name).stop()
            self._api_done()

    def connections(self) -> list[dict[str, Any]]:
        with self._lock:
            out = []
            for s in self.sockets.values():
                if not s.server:
                    continue
                sessions = {id(st.link.session) for st in getattr(s, "links", {}).values()}
                out.append({"connectionID": s.id, "clientAddress": s.client_address,
                            "creationTime": s.creation_time, "sessionCount": len(sessions), "protocol": "AMQP",
                            "user": s.user, "acceptor": s.acceptor})
            return out

    def close_connections_for_user(self, user: str) -> bool:
        with self._lock:
            victims = [s for s in self.sockets.values() if s.server and s.user == user]
            for s in victims:
                self.force_close(s)
            self._api_done()
            return bool(victims)

    def consumers(self) -> list[dict[str, Any]]:
        with self._lock:
            out = []
            for s in self.sockets.values():
                for st in getattr(s, "links", {}).values():
                    if isinstance(st, Consumer):
                        out.append({"consumerID": st.cid, "connectionID": s.id, "queueName": st.queue.name,
                                    "address": st.queue.address, "browseOnly": st.browse,
                                    "deliveringCount": len(st.unsettled), "user": s.user})
            return out
