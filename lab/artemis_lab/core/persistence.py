"""Durability of the broker state: journal replay at start, and compaction (at start and when the append-only
journal has grown). Record kinds: N node id, I id reservation, A/a address, Q/q queue, M message (with the
queue ids holding it), K ack, C delivery count, P/p queue/address persisted pause, W mirror dedup watermark,
T/t mirror ack retry list, U duplicate-id cache. A mixin of `Broker`."""

from __future__ import annotations

import uuid
from typing import Any

from artemis_lab.core import codec
from artemis_lab.core.store import Address, Queue, Ref
from artemis_lab.core.store import Message as StoredMessage

COMPACT_MIN_BYTES = 64 * 1024 * 1024
DUPLICATE_ID_CACHE_SIZE = 20000  # Artemis' id-cache-size default


class Persistence:
    """Replay and compaction over Broker's state (`journal`, `queues`, `addresses`, ...)."""

    journal: Any

    def _replay(self) -> None:
        pending: dict[int, dict[int, Ref]] = {}  # qid -> mid -> ref (refs not acked yet)
        retry: dict[tuple[str, str, int], int] = {}
        for rec in self.journal.replay():
            kind = rec[0]
            if kind == "M":
                _, mid, raw, address, qids, onode, oid, mkind = rec
                meta = codec.scan(raw)
                msg = StoredMessage(mid, raw, meta, address, onode, oid, mkind)
                for qid in qids:
                    q = self._queues_by_id.get(qid)
                    if q is not None:
                        pending.setdefault(qid, {})[mid] = Ref(msg, q)
                        msg.refs += 1
                self._next_id = max(self._next_id, mid + 1)
            elif kind == "K":
                refs = pending.get(rec[1])
                if refs is not None:
                    ref = refs.pop(rec[2], None)
                    if ref is not None:
                        ref.msg.refs -= 1
            elif kind == "C":
                ref = pending.get(rec[1], {}).get(rec[2])
                if ref is not None:
                    ref.delivery_count = rec[3]
            elif kind == "N":
                self.node_id = rec[1]
            elif kind == "I":
                self._next_id = max(self._next_id, rec[1])
            elif kind == "A":
                _, name, rts, internal, auto = rec
                if name not in self.addresses:
                    self.addresses[name] = Address(name, set(rts), internal=internal, auto_created=auto)
                else:
                    self.addresses[name].routing_types |= set(rts)
            elif kind == "a":
                self.addresses.pop(rec[1], None)
            elif kind == "Q":
                _, qid, name, address, rt, durable, flt, internal, maxc, purge, auto = rec
                q = Queue(qid, name, address, rt, durable, flt, internal, False, maxc, purge, auto)
                self._attach_queue(q)
                self._next_id = max(self._next_id, qid + 1)
            elif kind == "q":
                q = self._queues_by_id.pop(rec[1], None)
                if q is not None:
                    self.queues.pop(q.name, None)
                    addr = self.addresses.get(q.address)
                    if addr is not None:
                        addr.queues.pop(q.name, None)
                pending.pop(rec[1], None)
            elif kind == "P":
                q = self._queues_by_id.get(rec[1])
                if q is not None:
                    q.paused = q.persisted_pause = rec[2]
            elif kind == "p":
                addr = self.addresses.get(rec[1])
                if addr is not None:
                    addr.paused = addr.persisted_pause = rec[2]
            elif kind == "W":
                self._mirror_seen[rec[1]] = max(self._mirror_seen.get(rec[1], 0), rec[2])
            elif kind == "U":
                cache = self._dup_ids.setdefault(rec[1], {})
                cache[rec[2]] = None
                if len(cache) > DUPLICATE_ID_CACHE_SIZE:
                    del cache[next(iter(cache))]
            elif kind == "T":
                retry[(rec[1], rec[2], rec[3])] = rec[4]
            elif kind == "t":
                retry.pop((rec[1], rec[2], rec[3]), None)
        for qid, refs in pending.items():
            q = self._queues_by_id.get(qid)
            if q is None:
                continue
            for mid in sorted(refs):
                q.add(refs[mid])
            self._dirty.add(q)
        for key, attempts in retry.items():
            self.ack_manager.restore(*key, attempts)
        if not self.node_id:
            self.node_id = str(uuid.uuid4())

    def _compact(self) -> None:
        """Rewrite the journal with only the live state (start-time compaction)."""

        def records():
            yield ("N", self.node_id)
            for addr in self.addresses.values():
                yield ("A", addr.name, tuple(sorted(addr.routing_types)), addr.internal, addr.auto_created)
                if addr.persisted_pause:
                    yield ("p", addr.name, True)
            for q in self._queues_by_id.values():
                if not q.durable:
                    continue
                yield self._queue_record(q)
                if q.persisted_pause:
                    yield ("P", q.qid, True)
            seen: dict[int, list[int]] = {}
            msgs: dict[int, StoredMessage] = {}
            for q in self._queues_by_id.values():
                if not q.durable:
                    continue
                for ref in self._held(q):  # waiting and being delivered: both are unacknowledged
                    if ref.msg.durable:
                        seen.setdefault(ref.msg.mid, []).append(q.qid)
                        msgs[ref.msg.mid] = ref.msg
            for mid in sorted(msgs):
                m = msgs[mid]
                yield ("M", mid, m.raw, m.address, tuple(seen[mid]), m.origin_node, m.origin_id, m.kind)
            for q in self._queues_by_id.values():
                for ref in self._held(q):
                    if ref.delivery_count and ref.msg.durable and q.durable:
                        yield ("C", q.qid, ref.msg.mid, ref.delivery_count)
            for node, eid in self._mirror_seen.items():
                yield ("W", node, eid)
            for address, cache in self._dup_ids.items():
                for key in cache:
                    yield ("U", address, key)
            for (qn, node, oid), attempts in self.ack_manager.pending.items():
                yield ("T", qn, node, oid, attempts)
            yield ("I", max(self._next_id, self._id_reserved))

        self.journal.rewrite(records())

    @staticmethod
    def _held(q: Queue) -> list[Ref]:
        """Every unacknowledged ref of the queue (available or out on a consumer/mirror link)."""
        refs = {id(r): r for r in q.available}
        for r in q.by_key.values():
            refs.setdefault(id(r), r)
        return sorted(refs.values(), key=lambda r: r.msg.mid)

    def _maybe_compact(self) -> None:
        """Runtime compaction: the journal is append-only, so rewrite the live state once it grew a lot."""
        if self.journal.size < self._compact_at or self.journal.dirty:
            return
        self.journal.close()
        self._compact()
        self.journal.open()
        self._compact_at = max(COMPACT_MIN_BYTES, 2 * self.journal.size)

    @staticmethod
    def _queue_record(q: Queue) -> tuple:
        return ("Q", q.qid, q.name, q.address, q.routing_type, q.durable, q.filter, q.internal, q.max_consumers,
                q.purge_on_no_consumers, q.auto_created)
