"""`FakeBroker`: an in-memory BrokerAPI with no network and no journal.

It exists so the management surfaces (Jolokia, MBeans, CLI, service scripts) can be tested without the AMQP
core: state changes made through management are visible through management, nothing more. Messages can be
injected with `put()` to give counts something to count.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from artemis_lab import versions
from artemis_lab.errors import IllegalArgument, NonExistentAddress, NonExistentQueue, QueueExists
from artemis_lab.model import InstanceConfig

SNF_PREFIX = "$ACTIVEMQ_ARTEMIS_MIRROR_"


class FakeBroker:
    def __init__(self, instance: InstanceConfig, realm: Any) -> None:
        self.instance = instance
        self.realm = realm
        self.name = instance.broker.name
        self.version = instance.emulated_version + versions.LAB_SUFFIX
        self.node_id = str(uuid.uuid5(uuid.NAMESPACE_URL, instance.instance_dir))
        self._lock = threading.RLock()
        self._started_at = 0.0
        self._started = False
        self._addresses: dict[str, dict[str, Any]] = {}
        self._queues: dict[str, dict[str, Any]] = {}
        self._acceptors = {a.name: {"cfg": a, "started": False} for a in instance.broker.acceptors}
        self._conns = {
            c.name: {"cfg": c, "started": False, "connected": False} for c in instance.broker.broker_connections
        }
        self._next_id = 1

    # --- life cycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        with self._lock:
            for a in self.instance.broker.addresses:
                self.create_address(a.name, [t.upper() for t in a.routing_types])
                for q in a.queues:
                    self.create_queue(a.name, q.name, q.routing_type.upper(), q.durable, q.filter, True)
            for name, c in self._conns.items():
                if c["cfg"].mirror is not None:
                    snf = SNF_PREFIX + name
                    self.create_address(snf, ["ANYCAST"])
                    self.create_queue(snf, snf, "ANYCAST", True, None, True)
                    self._queues[snf]["internal"] = True
                c["started"] = c["cfg"].auto_start
            for acc in self._acceptors.values():
                acc["started"] = True
            self._started = True
            self._started_at = time.time()

    def stop(self) -> None:
        with self._lock:
            self._started = False
            for acc in self._acceptors.values():
                acc["started"] = False

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _visible(self, queue: str) -> bool:
        return not (queue.startswith(SNF_PREFIX) and not versions.has_snf_queue_mbean(self.instance.emulated_version))

    # --- broker -------------------------------------------------------------------------------------------------
    def broker_info(self) -> dict[str, Any]:
        with self._lock:
            queues = [q for q in self._queues if self._visible(q)]
            return {
                "started": self._started, "active": self._started,
                "uptime_ms": int((time.time() - self._started_at) * 1000) if self._started else 0,
                "connection_count": 0, "total_message_count": sum(len(q["messages"]) for q in self._queues.values()),
                "total_consumer_count": 0,
                "total_messages_added": sum(q["added"] for q in self._queues.values()),
                "total_messages_acknowledged": sum(q["acked"] for q in self._queues.values()),
                "pending_mirror_acks": 0, "address_names": list(self._addresses), "queue_names": queues,
                "plugin_class_names": [p.class_name for p in self.instance.broker.broker_plugins],
                "ha_policy": "PRIMARY_ONLY", "backup": False,
            }

    # --- addresses ----------------------------------------------------------------------------------------------
    def _address(self, address: str) -> dict[str, Any]:
        a = self._addresses.get(address)
        if a is None:
            raise NonExistentAddress(address)
        return a

    def address_info(self, address: str) -> dict[str, Any]:
        with self._lock:
            a = self._address(address)
            qs = [n for n, q in self._queues.items() if q["address"] == address and self._visible(n)]
            count = sum(len(self._queues[n]["messages"]) for n in qs)
            return {"routing_types": sorted(a["routing_types"]), "queue_names": qs, "message_count": count,
                    "number_of_messages": count, "paused": a["paused"], "internal": False, "temporary": False,
                    "bytes": 0, "id": a["id"]}

    def create_address(self, address: str, routing_types: list[str]) -> None:
        with self._lock:
            if address in self._addresses:
                self._addresses[address]["routing_types"].update(routing_types)
                return
            self._addresses[address] = {"routing_types": set(routing_types), "paused": False, "blocked": False,
                                        "id": self._id()}

    def delete_address(self, address: str, force: bool = False) -> None:
        with self._lock:
            self._address(address)
            bound = [n for n, q in self._queues.items() if q["address"] == address]
            if bound and not force:
                raise IllegalArgument(f"AMQ229203: Address {address} has bindings")
            for n in bound:
                del self._queues[n]
            del self._addresses[address]

    def pause_address(self, address: str, persist: bool = False) -> None:
        with self._lock:
            self._address(address)["paused"] = True

    def resume_address(self, address: str) -> None:
        with self._lock:
            self._address(address)["paused"] = False

    def block_address(self, address: str) -> bool:
        with self._lock:
            self._address(address)["blocked"] = True
            return True

    def unblock_address(self, address: str) -> bool:
        with self._lock:
            self._address(address)["blocked"] = False
            return True

    # --- queues -------------------------------------------------------------------------------------------------
    def _queue(self, queue: str) -> dict[str, Any]:
        q = self._queues.get(queue)
        if q is None:
            raise NonExistentQueue(queue)
        return q

    def queue_info(self, queue: str) -> dict[str, Any]:
        with self._lock:
            q = self._queue(queue)
            first = q["messages"][0]["timestamp"] if q["messages"] else None
            return {
                "address": q["address"], "routing_type": q["routing_type"], "durable": q["durable"],
                "temporary": False, "internal": q["internal"], "filter": q["filter"],
                "message_count": len(q["messages"]), "durable_message_count": len(q["messages"]),
                "delivering_count": 0, "scheduled_count": 0, "consumer_count": 0, "messages_added": q["added"],
                "messages_acknowledged": q["acked"], "messages_expired": 0, "messages_killed": 0,
                "first_message_timestamp": first,
                "first_message_age": int(time.time() * 1000) - first if first is not None else None,
                "paused": q["paused"], "persisted_pause": q["persisted_pause"], "max_consumers": -1,
                "purge_on_no_consumers": False, "id": q["id"],
            }

    def create_queue(self, address: str, queue: str, routing_type: str, durable: bool = True,
                     filter: str | None = None, ignore_if_exists: bool = False) -> None:
        with self._lock:
            if queue in self._queues:
                if ignore_if_exists:
                    return
                raise QueueExists(queue, self._queues[queue]["address"])
            self.create_address(address, [routing_type.upper()])
            self._queues[queue] = {"address": address, "routing_type": routing_type.upper(), "durable": durable,
                                   "filter": filter, "messages": [], "added": 0, "acked": 0, "paused": False,
                                   "persisted_pause": False, "internal": False, "id": self._id()}

    def destroy_queue(self, queue: str, remove_consumers: bool = False) -> None:
        with self._lock:
            self._queue(queue)
            del self._queues[queue]

    def pause_queue(self, queue: str, persist: bool = False) -> None:
        with self._lock:
            q = self._queue(queue)
            q["paused"], q["persisted_pause"] = True, bool(persist)

    def resume_queue(self, queue: str) -> None:
        with self._lock:
            q = self._queue(queue)
            q["paused"], q["persisted_pause"] = False, False

    def _matches(self, msg: dict[str, Any], filter: str | None) -> bool:
        if not filter:
            return True
        key, _, value = filter.partition("=")
        return str(msg["properties"].get(key.strip())) == value.strip().strip("'")

    def count_messages(self, queue: str, filter: str | None = None) -> int:
        with self._lock:
            return sum(1 for m in self._queue(queue)["messages"] if self._matches(m, filter))

    def remove_messages(self, queue: str, filter: str | None = None) -> int:
        with self._lock:
            q = self._queue(queue)
            keep = [m for m in q["messages"] if not self._matches(m, filter)]
            removed = len(q["messages"]) - len(keep)
            q["messages"], q["acked"] = keep, q["acked"] + removed
            return removed

    def browse_messages(self, queue: str, limit: int = 100) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(m) for m in self._queue(queue)["messages"][:limit]]

    def put(self, queue: str, properties: dict[str, Any] | None = None, timestamp: int | None = None) -> None:
        """Test helper: a message lands on the queue."""
        with self._lock:
            q = self._queue(queue)
            q["added"] += 1
            q["messages"].append({"messageID": q["added"], "address": q["address"], "durable": True,
                                  "timestamp": int(time.time() * 1000) if timestamp is None else timestamp,
                                  "userID": None, "properties": dict(properties or {})})

    # --- acceptors ----------------------------------------------------------------------------------------------
    def acceptor_names(self) -> list[str]:
        return list(self._acceptors)

    def acceptor_info(self, name: str) -> dict[str, Any]:
        with self._lock:
            acc = self._acceptors[name]
            cfg = acc["cfg"]
            params = {**cfg.params, "host": cfg.host, "port": str(cfg.port), "scheme": "tcp"}
            return {"started": acc["started"], "parameters": params,
                    "factory_class_name": "org.apache.activemq.artemis.core.remoting.impl.netty.NettyAcceptorFactory"}

    def start_acceptor(self, name: str) -> None:
        with self._lock:
            self._acceptors[name]["started"] = True

    def stop_acceptor(self, name: str) -> None:
        with self._lock:
            self._acceptors[name]["started"] = False

    # --- broker connections -------------------------------------------------------------------------------------
    def broker_connections(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{"name": n, "protocol": "AMQP", "started": c["started"], "connected": c["connected"],
                     "uri": c["cfg"].uri, "user": c["cfg"].user, "retry_interval": c["cfg"].retry_interval,
                     "reconnect_attempts": c["cfg"].reconnect_attempts, "auto_start": c["cfg"].auto_start}
                    for n, c in self._conns.items()]

    def _conn(self, name: str) -> dict[str, Any]:
        c = self._conns.get(name)
        if c is None:
            raise IllegalArgument(f"broker connection {name} not found")
        return c

    def start_broker_connection(self, name: str) -> None:
        with self._lock:
            self._conn(name)["started"] = True

    def stop_broker_connection(self, name: str) -> None:
        with self._lock:
            c = self._conn(name)
            c["started"], c["connected"] = False, False

    # --- connections --------------------------------------------------------------------------------------------
    def connections(self) -> list[dict[str, Any]]:
        return []

    def close_connections_for_user(self, user: str) -> bool:
        return False

    def consumers(self) -> list[dict[str, Any]]:
        return []
