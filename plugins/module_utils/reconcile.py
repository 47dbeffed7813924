# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Which messages two mirrored sites disagree on, one by one: what a drain gate does when the sites are quiet
(backlog 0, no pending acks) and a queue's counts still differ.

A mirrored message keeps one identity on every site: on the broker it was sent to it is (that broker's NodeID, its
``messageID``); the copy the mirror delivers to the peer carries that origin in its annotations
``x-opt-amq-bkr-id`` / ``x-opt-amq-mr-id`` (Artemis AMQPMirrorControllerSource; a replicated HA pair shares one
NodeID and its message ids, so a backup's messages match what its primary mirrored).

After a ``kill -9`` of a replicated primary the other site can hold copies the pair no longer has (docs/ha.md):
**phantoms** (a send the dead primary mirrored before its backup had it, never confirmed to the producer) and **lost
acknowledgements** (a message the pair settled whose acknowledgement the mirror never carried; also, without any
pair, one a broker was still applying when it stopped: Artemis 2.44.0 drops what its mirror target retries at a
stop). Both are extra copies of messages that originated on the peer: a switch to the site holding them would deliver
them (again). What this module can tell from the brokers alone is that origin; which of the two kinds a copy is
needs the clients' records.

Standard library only (plus the sibling module_utils).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any, Dict, List, Sequence, Tuple

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia as j
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on

BROKER_ID = "x-opt-amq-bkr-id"
MIRROR_ID = "x-opt-amq-mr-id"
#: what a drain gate may do with messages the new site holds beyond the old one
POLICIES = ("refuse", "remove", "keep")
#: messages browsed per queue and side at most: a larger difference is not something to settle message by message
DEFAULT_LIMIT = 100000
_PROPERTY_MAPS = ("LongProperties", "IntProperties", "StringProperties", "ShortProperties", "ByteProperties")


def annotation(message: Dict[str, Any], name: str) -> Any:
    """An annotation of a browsed message (``QueueControl.browse`` CompositeData), under any of the prefixes Artemis
    shows it with (``messageAnnotations.``, ``extraProperties.``) or none."""
    for kind in _PROPERTY_MAPS:
        for key, value in (message.get(kind) or {}).items():
            if key == name or key.endswith("." + name):
                return value
    return None


def identity(message: Dict[str, Any], broker_node: str) -> Tuple[str, str]:
    """(origin NodeID, origin message id) of a message browsed on the broker whose NodeID is ``broker_node``."""
    origin = annotation(message, BROKER_ID)
    mirror_id = annotation(message, MIRROR_ID)
    if origin and mirror_id is not None:
        return str(origin), str(mirror_id)
    return str(broker_node), str(message.get("messageID"))


def summary(message: Dict[str, Any], broker_node: str) -> Dict[str, Any]:
    """What the evidence keeps of one message: ids, origin and timestamp (never its body)."""
    origin, origin_id = identity(message, broker_node)
    return {"message_id": str(message.get("messageID")), "user_id": message.get("userID"), "origin_node": origin,
            "origin_id": origin_id, "timestamp": message.get("timestamp")}


def compare(old_messages: Sequence[dict], old_node: str, new_messages: Sequence[dict], new_node: str) -> dict:
    """One queue of two sites, message by message.

    Returns ``only_new_from_old`` (copies on the new site of messages that originated on the old site, which the old
    site no longer holds: phantoms or lost acknowledgements), ``only_new_other`` (the new site's other extras: sent
    there, or elsewhere), ``only_old`` (messages the new site does not hold: a switch would lose them unless they
    were consumed there), each a list of :func:`summary`.
    """
    old_ids = {identity(m, old_node) for m in old_messages}
    new_ids = {identity(m, new_node) for m in new_messages}
    out: Dict[str, List[dict]] = {"only_new_from_old": [], "only_new_other": [], "only_old": []}
    for m in new_messages:
        key = identity(m, new_node)
        if key not in old_ids:
            out["only_new_from_old" if key[0] == str(old_node) else "only_new_other"].append(summary(m, new_node))
    out["only_old"] = [summary(m, old_node) for m in old_messages if identity(m, old_node) not in new_ids]
    return out


def decide(differences: Dict[str, dict], policy: str, old: str, new: str) -> dict:
    """What a drain gate does with per-queue :func:`compare` results under ``policy`` (:data:`POLICIES`).

    A message only the old site holds always refuses the switch (it could be lost). ``remove`` removes from the new
    site the copies that originated on the old site; ``keep`` switches with every extra copy (it will be delivered
    after the switch); ``refuse`` stops and says what was found. Returns ``{"ok", "remove": {queue: [message_id]},
    "kept": n, "reason"}``.
    """
    if policy not in POLICIES:
        raise ValueError("policy must be one of %s, got %r" % (", ".join(POLICIES), policy))
    only_old = {q: len(d["only_old"]) for q, d in differences.items() if d["only_old"]}
    from_old = {q: len(d["only_new_from_old"]) for q, d in differences.items() if d["only_new_from_old"]}
    other = {q: len(d["only_new_other"]) for q, d in differences.items() if d["only_new_other"]}

    def listed(counts: Dict[str, int]) -> str:
        return ", ".join("%s %d" % kv for kv in sorted(counts.items()))

    said = []
    if from_old:
        said.append("%s holds copies of messages that came from %s and that %s no longer has (phantoms or lost "
                    "acknowledgements: after an HA takeover on %s, or a restart of %s while its mirror applied "
                    "acknowledgements; docs/ha.md): %s" % (new, old, old, old, new, listed(from_old)))
    if other:
        said.append("%s holds messages %s never had: %s" % (new, old, listed(other)))
    if only_old:
        said.append("%s holds messages %s does not: %s" % (old, new, listed(only_old)))
    found = "; ".join(said)
    if only_old:
        return {"ok": False, "remove": {}, "kept": 0,
                "reason": found + " -- a switch could lose them: nothing is switched (no continuity_mirror_extras "
                                  "setting overrides this)"}
    if policy == "refuse":
        return {"ok": False, "remove": {}, "kept": 0,
                "reason": found + " -- nothing is switched; to switch, run again with continuity_mirror_extras=remove "
                                  "(removes from %s the copies that came from %s) or =keep (%s delivers them after "
                                  "the switch)" % (new, old, new)}
    if policy == "keep":
        return {"ok": True, "remove": {}, "kept": sum(from_old.values()) + sum(other.values()),
                "reason": found + " -- kept (continuity_mirror_extras=keep)"}
    if other:
        return {"ok": False, "remove": {}, "kept": 0,
                "reason": found + " -- continuity_mirror_extras=remove removes only copies that came from %s; the "
                                  "others may be the only copy: nothing is switched (=keep switches with them)" % old}
    return {"ok": True, "kept": 0,
            "reason": found + " -- removing them from %s (continuity_mirror_extras=remove)" % new,
            "remove": {q: [m["message_id"] for m in d["only_new_from_old"]] for q, d in differences.items()
                       if d["only_new_from_old"]}}


# ------------------------------------------------------------------------------------------ broker I/O
def browse(client: j.JolokiaClient, queue_mbean: str, page_size: int = 200, limit: int = DEFAULT_LIMIT) -> List[dict]:
    """Every message of a queue, page by page (one ``browse()`` answer is capped by the broker's page size)."""
    out: List[dict] = []
    page = 1
    while True:
        batch = client.exec(queue_mbean, "browse(int,int)", page, page_size) or []
        out.extend(batch)
        if len(batch) < page_size:
            return out
        if len(out) >= limit:
            raise ValueError("%s holds more than %d messages: too many to compare one by one" % (queue_mbean, limit))
        page += 1


def remove(client: j.JolokiaClient, queue_mbean: str, message_ids: Sequence[str], chunk: int = 200) -> int:
    """Remove these messages (the broker's own ``messageID``s) from a queue; returns how many the broker removed.
    A removal on a mirrored site is mirrored as an acknowledgement, which the peer drops for a message it lacks."""
    removed = 0
    for i in range(0, len(message_ids), chunk):
        reqs = [j.exec_request(queue_mbean, "removeMessage(long)", int(mid)) for mid in message_ids[i:i + chunk]]
        for res in client.bulk(reqs, raise_errors=True):
            removed += 1 if res.value else 0
    return removed


def queue_mbean(snapshot: dict, name: str) -> str:
    """The MBean of a queue of a site snapshot. A snapshot read with ``listQueues`` has no MBean name per queue
    (``mbean`` None): it is built from the snapshot's broker and the queue's address and routing type."""
    q = snapshot["queues"][name]
    return q.get("mbean") or on.queue(snapshot["broker"], q.get("address") or name, q.get("name") or name,
                                      q.get("routing_type") or "anycast")


def queue_differences(old_client: j.JolokiaClient, old_snapshot: dict, new_client: j.JolokiaClient,
                      new_snapshot: dict, queues: Sequence[str], limit: int = DEFAULT_LIMIT) -> Dict[str, dict]:
    """:func:`compare` for each named queue, browsing both sites (queue MBeans from the snapshots)."""
    out: Dict[str, dict] = {}
    for name in queues:
        old_q = (old_snapshot.get("queues") or {}).get(name)
        new_q = (new_snapshot.get("queues") or {}).get(name)
        old_msgs = browse(old_client, queue_mbean(old_snapshot, name), limit=limit) if old_q else []
        new_msgs = browse(new_client, queue_mbean(new_snapshot, name), limit=limit) if new_q else []
        out[name] = compare(old_msgs, old_snapshot.get("node_id") or "", new_msgs, new_snapshot.get("node_id") or "")
    return out


def evidence(differences: Dict[str, dict], shown: int = 20) -> Dict[str, Any]:
    """Per queue: the counts of each kind and the first ``shown`` messages of each (ids only)."""
    return {q: {kind: {"count": len(msgs), "first": msgs[:shown]} for kind, msgs in d.items()}
            for q, d in differences.items()}
