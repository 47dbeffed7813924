"""Lab broker engine over AMQP with a plain proton client: SASL, routing, settlement, browse, security."""

from __future__ import annotations

import pytest
from core_support import (
    SourceCapability,
    TargetCapability,
    connect,
    flush,
    instance,
    port_of,
    send,
    start,
    wait_for,
)
from proton import ConnectionException, Delivery, Message
from proton.reactor import Copy
from proton.utils import LinkDetached

from artemis_lab import errors


@pytest.fixture
def broker(tmp_path):
    b = start(instance(tmp_path))
    yield b
    b.stop()


def test_wrong_password_is_refused(broker):
    port = port_of(broker)
    with pytest.raises(ConnectionException) as exc:
        connect(port, password="wrong")
    assert "unauthorized-access" in str(exc.value)
    with pytest.raises(ConnectionException):
        connect(port, user="nobody", password="x")
    connect(port).close()  # the right password still works


def test_anycast_delivery_preserves_message_and_counts(broker):
    port = port_of(broker)
    conn = connect(port)
    snd = conn.create_sender("orders")
    sent = Message(body="hello", durable=True, properties={"k": "v", "n": 7}, subject="s1", id="m-1",
                   annotations={"x-opt-lab": "a"})
    snd.send(sent)
    assert broker.queue_info("orders")["message_count"] == 1
    assert broker.queue_info("orders")["messages_added"] == 1
    rcv = conn.create_receiver("orders")
    got = rcv.receive(timeout=5)
    assert (got.body, got.properties, got.subject, got.id, got.durable) == ("hello", {"k": "v", "n": 7}, "s1",
                                                                            "m-1", True)
    assert got.annotations == {"x-opt-lab": "a"}
    assert broker.queue_info("orders")["delivering_count"] == 1
    rcv.accept()
    flush(conn)
    wait_for(lambda: broker.queue_info("orders")["message_count"] == 0)
    assert broker.queue_info("orders")["messages_acknowledged"] == 1
    conn.close()


def test_multicast_address_fans_out_to_each_subscriber(broker):
    broker.create_address("news", ["MULTICAST"])
    port = port_of(broker)
    conn, conn2 = connect(port), connect(port)  # the blocking client names links after the address: 2 conns
    r1 = conn.create_receiver("news")
    r2 = conn2.create_receiver("news")
    wait_for(lambda: len(broker.address_info("news")["queue_names"]) == 2)
    send(port, "news", ["flash"])
    assert r1.receive(timeout=5).body == "flash"
    assert r2.receive(timeout=5).body == "flash"
    r1.accept()
    r2.accept()
    conn.close()
    conn2.close()
    # non-durable subscription queues go away with their receivers
    wait_for(lambda: broker.address_info("news")["queue_names"] == [])


def test_auto_create_anycast_queue_and_multicast_address(broker):
    port = port_of(broker)
    send(port, "auto.jobs", ["j1"], options=TargetCapability("queue"))
    assert broker.queue_info("auto.jobs")["message_count"] == 1
    assert broker.queue_info("auto.jobs")["routing_type"] == "ANYCAST"
    # no capability: the address-settings default routing type (MULTICAST, as Artemis) applies
    send(port, "auto.events", ["e1"])
    assert broker.address_info("auto.events")["routing_types"] == ["MULTICAST"]
    assert broker.address_info("auto.events")["queue_names"] == []  # nobody subscribed: message dropped


def test_browse_does_not_consume(broker):
    port = port_of(broker)
    send(port, "orders", ["one", "two"])
    conn = connect(port)
    browser = conn.create_receiver("orders", name="browser", options=Copy())
    assert [browser.receive(timeout=5).body for _ in range(2)] == ["one", "two"]
    assert broker.queue_info("orders")["message_count"] == 2
    rcv = conn.create_receiver("orders")
    assert rcv.receive(timeout=5).body == "one"
    rcv.accept()
    conn.close()
    wait_for(lambda: broker.queue_info("orders")["message_count"] == 1)


def _settle_modified(rcv, delivery_failed: bool) -> None:
    """BlockingReceiver has no way to set modified's delivery-failed flag: set it on the delivery."""
    rcv.fetcher.unsettled[0].local.failed = delivery_failed
    rcv.settle(Delivery.MODIFIED)


def test_released_and_modified_follow_artemis_delivery_counting(broker):
    # Artemis (ProtonServerSenderContext): released and modified without delivery-failed are "not
    # delivered" (count unchanged); modified{delivery-failed} counts as an attempt.
    port = port_of(broker)
    send(port, "orders", ["r"])
    conn = connect(port)
    rcv = conn.create_receiver("orders")
    assert rcv.receive(timeout=5).delivery_count == 0
    rcv.release(delivered=False)  # RELEASED
    assert rcv.receive(timeout=5).delivery_count == 0
    _settle_modified(rcv, delivery_failed=False)
    assert rcv.receive(timeout=5).delivery_count == 0
    _settle_modified(rcv, delivery_failed=True)
    again = rcv.receive(timeout=5)
    assert (again.body, again.delivery_count) == ("r", 1)
    _settle_modified(rcv, delivery_failed=True)
    assert rcv.receive(timeout=5).delivery_count == 2
    rcv.accept()
    flush(conn)
    conn.close()
    wait_for(lambda: broker.queue_info("orders")["message_count"] == 0)


def test_unsettled_messages_return_on_close_counted_only_when_the_connection_failed(broker):
    port = port_of(broker)
    send(port, "orders", ["u"])
    conn = connect(port)
    rcv = conn.create_receiver("orders")
    assert rcv.receive(timeout=5).body == "u"
    assert broker.queue_info("orders")["delivering_count"] == 1
    conn.close()  # a clean close without an outcome: not a delivery (count stays 0, as recorded on 2.44.0)
    wait_for(lambda: broker.queue_info("orders")["delivering_count"] == 0)
    conn = connect(port)
    rcv = conn.create_receiver("orders")
    again = rcv.receive(timeout=5)
    assert (again.body, again.delivery_count) == ("u", 0)
    assert broker.close_connections_for_user("admin") is True  # the broker drops it: a failed connection
    wait_for(lambda: broker.queue_info("orders")["delivering_count"] == 0)
    conn = connect(port)
    third = conn.create_receiver("orders").receive(timeout=5)
    assert (third.body, third.delivery_count) == ("u", 1)
    conn.close()


def test_security_settings_refuse_attach(broker):
    port = port_of(broker)
    conn = connect(port, user="reader", password="readpw")
    with pytest.raises(LinkDetached) as exc:
        conn.create_sender("orders")
    assert "unauthorized-access" in str(exc.value)
    conn.close()
    conn = connect(port, user="reader", password="readpw")
    with pytest.raises(LinkDetached):
        conn.create_receiver("orders")  # consume needs role amq
    conn.close()
    send(port, "orders", ["b"])
    conn = connect(port, user="reader", password="readpw")
    assert conn.create_receiver("orders", options=Copy()).receive(timeout=5).body == "b"  # browse is allowed
    conn.close()


def test_queue_api_errors_and_consumer_listing(broker):
    with pytest.raises(errors.NonExistentQueue):
        broker.queue_info("nope")
    with pytest.raises(errors.QueueExists):
        broker.create_queue("orders", "orders", "ANYCAST")
    port = port_of(broker)
    conn = connect(port)
    conn.create_receiver("orders", options=SourceCapability("queue"))
    wait_for(lambda: broker.queue_info("orders")["consumer_count"] == 1)
    assert [c["queueName"] for c in broker.consumers()] == ["orders"]
    assert broker.broker_info()["connection_count"] == 1
    conn.close()
    wait_for(lambda: broker.queue_info("orders")["consumer_count"] == 0)


def test_filtered_count_and_remove(broker):
    port = port_of(broker)
    conn = connect(port)
    snd = conn.create_sender("orders")
    for i in range(4):
        snd.send(Message(body=i, durable=True, properties={"color": "red" if i % 2 else "blue"}))
    conn.close()
    assert broker.count_messages("orders", "color = 'red'") == 2
    assert broker.remove_messages("orders", "color = 'red'") == 2
    assert broker.count_messages("orders") == 2
    assert [m["properties"]["color"] for m in broker.browse_messages("orders")] == ["blue", "blue"]


def test_max_delivery_attempts_drops_or_dead_letters(tmp_path):
    from core_support import instance as make_instance

    inst = make_instance(tmp_path, queues=("orders", "DLQ"))
    inst.broker.address_settings[0].max_delivery_attempts = 2
    inst.broker.address_settings[0].dead_letter_address = "DLQ"
    b = start(inst)
    try:
        port = port_of(b)
        send(port, "orders", ["poison"])
        conn = connect(port)
        rcv = conn.create_receiver("orders")
        for _ in range(2):
            assert rcv.receive(timeout=5).body == "poison"
            _settle_modified(rcv, delivery_failed=True)
        flush(conn)
        wait_for(lambda: b.queue_info("DLQ")["message_count"] == 1)
        assert b.queue_info("orders")["message_count"] == 0
        assert b.queue_info("orders")["messages_killed"] == 1
        conn.close()
    finally:
        b.stop()


def test_selector_consumers_are_refused_not_ignored(broker):
    from proton.reactor import Selector

    conn = connect(port_of(broker))
    with pytest.raises(LinkDetached) as exc:
        conn.create_receiver("orders", options=Selector("color = 'red'"))
    assert "not-implemented" in str(exc.value)
    conn.close()


def test_first_message_timestamp_is_the_creation_time_or_zero(broker):
    port = port_of(broker)
    conn = connect(port)
    snd = conn.create_sender("orders")
    snd.send(Message(body="t", durable=True, creation_time=1_700_000_000.25))
    snd.send(Message(body="no time", durable=True))
    conn.close()
    info = broker.queue_info("orders")
    assert info["first_message_timestamp"] == 1_700_000_000_250
    assert info["first_message_age"] > 0
    assert [m["timestamp"] for m in broker.browse_messages("orders")] == [1_700_000_000_250, 0]


def test_duplicate_id_detection_survives_restart(tmp_path):
    from core_support import DictRealm
    from core_support import instance as make_instance

    from artemis_lab.core.broker import Broker

    inst = make_instance(tmp_path)
    b = start(inst)
    try:
        port = port_of(b)
        conn = connect(port)
        snd = conn.create_sender("orders")
        snd.send(Message(body="first", durable=True, properties={"_AMQ_DUPL_ID": "order-1"}))
        snd.send(Message(body="again", durable=True, properties={"_AMQ_DUPL_ID": "order-1"}))  # accepted, dropped
        snd.send(Message(body="other", durable=True, properties={"_AMQ_DUPL_ID": "order-2"}))
        conn.close()
        assert [m["properties"]["_AMQ_DUPL_ID"] for m in b.browse_messages("orders")] == ["order-1", "order-2"]
    finally:
        b.stop()
    b = Broker(inst, DictRealm())
    b.start()
    try:
        conn = connect(port_of(b))
        conn.create_sender("orders").send(Message(body="x", durable=True, properties={"_AMQ_DUPL_ID": "order-2"}))
        conn.close()
        assert b.queue_info("orders")["message_count"] == 2  # the id cache came back from the journal
    finally:
        b.stop()


def test_anonymous_sasl_only_when_security_is_disabled(tmp_path):
    from core_support import instance as make_instance
    from proton.utils import BlockingConnection

    open_inst = make_instance(tmp_path / "open")
    open_inst.broker.security_enabled = False
    b = start(open_inst)
    try:
        conn = BlockingConnection(f"amqp://127.0.0.1:{port_of(b)}", timeout=5, allowed_mechs="ANONYMOUS")
        conn.create_sender("orders").send(Message(body="anon", durable=True))
        conn.close()
        assert b.queue_info("orders")["message_count"] == 1
    finally:
        b.stop()
    closed = start(make_instance(tmp_path / "closed"))
    try:
        with pytest.raises(ConnectionException):
            BlockingConnection(f"amqp://127.0.0.1:{port_of(closed)}", timeout=5, allowed_mechs="ANONYMOUS")
    finally:
        closed.stop()


def test_counters_durable_and_bytes(broker):
    port = port_of(broker)
    send(port, "orders", ["d1", "d2"], durable=True)
    send(port, "orders", ["n1"], durable=False)
    info = broker.queue_info("orders")
    assert (info["message_count"], info["durable_message_count"]) == (3, 2)
    assert broker.address_info("orders")["bytes"] > 0
    conn = connect(port)
    rcv = conn.create_receiver("orders")
    for _ in range(3):
        rcv.receive(timeout=5)
        rcv.accept()
    flush(conn)
    conn.close()
    info = broker.queue_info("orders")
    assert (info["message_count"], info["durable_message_count"]) == (0, 0)
    assert broker.address_info("orders")["bytes"] == 0


def test_queue_filters_select_what_is_routed(broker):
    broker.create_address("colors", ["MULTICAST"])
    broker.create_queue("colors", "reds", "MULTICAST", filter="color = 'red'")
    broker.create_queue("colors", "all", "MULTICAST")
    conn = connect(port_of(broker))
    snd = conn.create_sender("colors")
    for color in ("red", "blue", "red"):
        snd.send(Message(body=color, durable=True, properties={"color": color}))
    conn.close()
    assert broker.queue_info("reds")["message_count"] == 2
    assert broker.queue_info("all")["message_count"] == 3
