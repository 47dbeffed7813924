"""In-memory broker state: messages, references, queues and addresses (the journal makes them durable)."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from artemis_lab.core.codec import Meta

KIND_MESSAGE = 0
KIND_MIRROR_EVENT = 1  # a control event on a mirror SNF queue (ack, create/delete address/queue)


class Message:
    __slots__ = ("address", "durable", "kind", "meta", "mid", "origin_id", "origin_node", "raw", "refs",
                 "sync_waiter", "timestamp")

    def __init__(self, mid: int, raw: bytes, meta: Meta, address: str, origin_node: str | None,
                 origin_id: int, kind: int = KIND_MESSAGE):
        self.mid = mid
        self.raw = raw
        self.meta = meta
        self.address = address
        self.durable = meta.durable
        self.timestamp = meta.creation_time
        # Where the message was first produced: (node id, id there). Mirror acks find messages by it.
        self.origin_node = origin_node
        self.origin_id = origin_id
        self.kind = kind
        self.refs = 0  # live references (queues still holding it)
        self.sync_waiter: Any = None  # producer delivery held until a sync mirror confirms


class Ref:
    __slots__ = ("consumer", "delivery_count", "msg", "queue")

    def __init__(self, msg: Message, queue: Queue, delivery_count: int = 0):
        self.msg = msg
        self.queue = queue
        self.delivery_count = delivery_count
        self.consumer: Any = None


class Queue:
    def __init__(self, qid: int, name: str, address: str, routing_type: str, durable: bool = True,
                 filter: str | None = None, internal: bool = False, temporary: bool = False,
                 max_consumers: int = -1, purge_on_no_consumers: bool = False, auto_created: bool = False):
        self.qid = qid
        self.name = name
        self.address = address
        self.routing_type = routing_type.upper()
        self.durable = durable
        self.filter = filter
        self.internal = internal
        self.temporary = temporary
        self.max_consumers = max_consumers
        self.purge_on_no_consumers = purge_on_no_consumers
        self.auto_created = auto_created
        self.available: deque[Ref] = deque()
        self.delivering = 0
        self.consumers: list[Any] = []
        self.rr = 0
        self.messages_added = 0
        self.messages_acknowledged = 0
        self.messages_expired = 0
        self.messages_killed = 0
        self.paused = False
        self.persisted_pause = False
        # mirror key (origin node, origin id) -> ref, for refs held by this queue (available or delivering)
        self.by_key: dict[tuple[str | None, int], Ref] = {}
        self.mirror_sender: Any = None  # set on an SNF queue while its broker connection is attached
        # running totals over held refs, so management reads stay O(1) on big backlogs
        self.held_durable = 0
        self.held_bytes = 0

    @property
    def message_count(self) -> int:
        return len(self.available) + self.delivering

    def add(self, ref: Ref, front: bool = False) -> None:
        if ref.msg.durable:
            self.held_durable += 1
        self.held_bytes += len(ref.msg.raw)
        if front:
            self.available.appendleft(ref)
        else:
            self.available.append(ref)
        self.by_key[(ref.msg.origin_node, ref.msg.origin_id)] = ref

    def first_timestamp(self) -> int | None:
        if self.available:
            return self.available[0].msg.timestamp
        return None

    def info(self) -> dict[str, Any]:
        ts = self.first_timestamp()
        return {
            "address": self.address,
            "routing_type": self.routing_type,
            "durable": self.durable,
            "temporary": self.temporary,
            "internal": self.internal,
            "filter": self.filter,
            "message_count": self.message_count,
            "durable_message_count": self.held_durable if self.durable else 0,
            "delivering_count": self.delivering,
            "scheduled_count": 0,
            # the broker connection's sender counts as the SNF queue's consumer (Artemis shows 1 while connected)
            "consumer_count": len(self.consumers) + (1 if self.mirror_sender is not None else 0),
            "messages_added": self.messages_added,
            "messages_acknowledged": self.messages_acknowledged,
            "messages_expired": self.messages_expired,
            "messages_killed": self.messages_killed,
            "first_message_timestamp": ts,
            "first_message_age": (int(time.time() * 1000) - ts) if ts is not None else None,
            "paused": self.paused,
            "persisted_pause": self.persisted_pause,
            "max_consumers": self.max_consumers,
            "purge_on_no_consumers": self.purge_on_no_consumers,
            "auto_created": self.auto_created,
            "id": self.qid,
        }


class Address:
    def __init__(self, name: str, routing_types: set[str], internal: bool = False, auto_created: bool = False):
        self.name = name
        self.routing_types = {r.upper() for r in routing_types}
        self.internal = internal
        self.auto_created = auto_created
        self.queues: dict[str, Queue] = {}
        self.paused = False
        self.persisted_pause = False
        self.blocked = False
