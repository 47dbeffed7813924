"""The engine's AMQP section reader/writer against proton's own encoder/decoder."""

from __future__ import annotations

import uuid

import pytest
from proton import Message, symbol

from artemis_lab.core import codec
from artemis_lab.core.matching import AddressFilter, best_match, matches
from artemis_lab.model import SecuritySettingConfig

MESSAGES = [
    Message(body=b"x" * 1024, durable=True, address="orders", properties={"a": 1}, priority=7, id="m1",
            annotations={symbol("x-opt-foo"): "bar"}, creation_time=1700000000.5, user_id=b"bob"),
    Message(body="plain"),
    Message(body=None, address="a" * 300, id=uuid.uuid4()),
    Message(body=1, ttl=5, delivery_count=3, durable=True, id=12345, instructions={symbol("x-opt-da"): 1}),
]


@pytest.mark.parametrize("msg", MESSAGES)
def test_fast_reader_agrees_with_proton(msg):
    raw = bytes(msg.encode())
    fast = codec.scan(raw)
    slow = codec._slow_scan(raw)
    for field in ("durable", "priority", "to", "creation_time", "header_end", "da_start", "da_end", "message_id"):
        assert getattr(fast, field) == getattr(slow, field), field
    assert fast.durable == bool(msg.durable)
    assert fast.to == msg.address
    assert fast.creation_time == round((msg.creation_time or 0) * 1000)  # ms, 0 when absent


def test_redelivery_header_keeps_every_other_section_byte_exact():
    raw = bytes(MESSAGES[0].encode())
    meta = codec.scan(raw)
    again = codec.with_delivery_count(raw, meta, 2)
    assert again[-(len(raw) - meta.header_end):] == raw[meta.header_end:]
    decoded = Message()
    decoded.decode(again)
    assert (decoded.delivery_count, decoded.priority, decoded.durable, decoded.body) == (2, 7, True, b"x" * 1024)


def test_delivery_annotations_added_and_removed():
    raw = bytes(MESSAGES[3].encode())
    meta = codec.scan(raw)
    tagged = codec.with_delivery_annotations(raw, meta, {symbol("x-opt-amq-mr-id"): 99, symbol("k"): "v"})
    tmeta = codec.scan(tagged)
    assert codec.read_delivery_annotations(tagged, tmeta) == {"x-opt-amq-mr-id": 99, "k": "v"}
    stripped = codec.without_delivery_annotations(tagged, tmeta)
    assert codec.scan(stripped).da_start == -1
    decoded = Message()
    decoded.decode(stripped)
    assert (decoded.body, decoded.id, decoded.delivery_count) == (1, 12345, 3)


@pytest.mark.parametrize("index", range(len(MESSAGES)))
def test_meta_without_delivery_annotations_equals_a_rescan(index):
    raw = bytes(MESSAGES[index].encode())
    tagged = codec.with_delivery_annotations(raw, codec.scan(raw), {symbol("x-opt-amq-mr-id"): 7, symbol("b"): "dc1"})
    tmeta = codec.scan(tagged, want_annotations=True)
    assert tmeta.da_start >= 0
    stripped = codec.without_delivery_annotations(tagged, tmeta)
    assert codec.meta_without_delivery_annotations(tmeta) == codec.scan(stripped)
    # a message without delivery annotations keeps its offsets
    plain = codec.scan(codec.without_delivery_annotations(raw, codec.scan(raw)))
    assert codec.meta_without_delivery_annotations(plain) == plain


def test_mirror_event_encoding_round_trips_through_proton():
    ann = {symbol("x-opt-amq-mr-ev-type"): symbol("postAck"), symbol("x-opt-amq-mr-qu"): "orders"}
    raw = codec.encode_event(ann, 4242, durable=True)
    decoded = Message()
    decoded.decode(raw)
    assert decoded.annotations == ann and decoded.body == 4242 and decoded.durable
    meta = codec.scan(raw, want_annotations=True)
    assert meta.annotations == {"x-opt-amq-mr-ev-type": "postAck", "x-opt-amq-mr-qu": "orders"}
    assert codec.body_value(raw) == 4242
    assert codec.body_value(codec.encode_event(ann, '{"name": "q"}', durable=False)) == '{"name": "q"}'


def test_wildcards_and_most_specific_match():
    assert matches("#", "a.b.c") and matches("a.#", "a") and matches("a.#", "a.b.c")
    assert matches("a.*", "a.b") and not matches("a.*", "a.b.c") and not matches("a.*", "a")
    assert matches("a.*.c", "a.x.c") and not matches("b.#", "a.b")
    settings = [SecuritySettingConfig(match=m) for m in ("#", "orders.#", "orders.*", "orders.eu")]
    assert best_match(settings, "orders.eu").match == "orders.eu"
    assert best_match(settings, "orders.us").match == "orders.*"
    assert best_match(settings, "orders.us.west").match == "orders.#"
    assert best_match(settings, "other").match == "#"


def test_mirror_address_filter_exclusion_wins_and_is_case_sensitive():
    f = AddressFilter("orders.,!orders.tmp")
    assert f.allows("orders.eu") and not f.allows("orders.tmp.1") and not f.allows("payments")
    assert not f.allows("Orders.eu")
    assert AddressFilter(None).allows("anything")
    assert not AddressFilter("!audit").allows("audit.log") and AddressFilter("!audit").allows("orders")
