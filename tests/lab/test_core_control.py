"""Lab broker engine control operations: queue/address pause, address block, acceptor stop/start."""

from __future__ import annotations

import socket

import pytest
from core_support import DictRealm, connect, instance, port_of, send, start, wait_for
from proton import ConnectionException, Timeout

from artemis_lab.core.broker import Broker


@pytest.fixture
def broker(tmp_path):
    b = start(instance(tmp_path))
    yield b
    b.stop()


def test_paused_queue_accepts_but_delivers_nothing(broker):
    port = port_of(broker)
    broker.pause_queue("orders")
    send(port, "orders", ["p1"])
    assert broker.queue_info("orders")["message_count"] == 1
    assert broker.queue_info("orders")["paused"] is True
    conn = connect(port, timeout=1)
    rcv = conn.create_receiver("orders")
    with pytest.raises(Timeout):
        rcv.receive(timeout=0.5)
    broker.resume_queue("orders")
    assert rcv.receive(timeout=5).body == "p1"
    rcv.accept()
    conn.close()


def test_persisted_pause_survives_restart_plain_pause_does_not(tmp_path):
    inst = instance(tmp_path, queues=("orders", "other"))
    b = start(inst)
    b.pause_queue("orders", persist=True)
    b.pause_queue("other")
    assert b.queue_info("orders")["persisted_pause"] is True
    assert b.queue_info("other")["persisted_pause"] is False
    b.stop()
    b = Broker(inst, DictRealm())
    b.start()
    try:
        assert (b.queue_info("orders")["paused"], b.queue_info("orders")["persisted_pause"]) == (True, True)
        assert b.queue_info("other")["paused"] is False
        b.resume_queue("orders")
        assert (b.queue_info("orders")["paused"], b.queue_info("orders")["persisted_pause"]) == (False, False)
    finally:
        b.stop()
    b = Broker(inst, DictRealm())
    b.start()
    try:
        assert b.queue_info("orders")["paused"] is False  # the resume was journaled too
    finally:
        b.stop()


def test_paused_address_holds_deliveries(broker):
    port = port_of(broker)
    broker.pause_address("orders")
    assert broker.address_info("orders")["paused"] is True
    send(port, "orders", ["a1"])
    conn = connect(port, timeout=1)
    rcv = conn.create_receiver("orders")
    with pytest.raises(Timeout):
        rcv.receive(timeout=0.5)
    broker.resume_address("orders")
    assert rcv.receive(timeout=5).body == "a1"
    conn.close()


def test_blocked_address_gives_new_producers_no_credit(broker):
    port = port_of(broker)
    assert broker.block_address("orders") is True
    conn = connect(port, timeout=1)
    snd = conn.create_sender("orders")
    from proton import Message

    with pytest.raises(Timeout):
        snd.send(Message(body="blocked", durable=True))
    assert broker.queue_info("orders")["message_count"] == 0
    assert broker.unblock_address("orders") is True
    conn.timeout = 5
    snd.send(Message(body="unblocked", durable=True))
    # the first message waited in the client for credit and went out after the unblock
    assert broker.queue_info("orders")["message_count"] == 2
    assert [m["durable"] for m in broker.browse_messages("orders")] == [True, True]
    conn.close()


def test_acceptor_stop_refuses_connects_frees_port_and_drops_clients(broker):
    port = port_of(broker)
    conn = connect(port)
    rcv = conn.create_receiver("orders")
    broker.stop_acceptor("amqp")
    assert broker.acceptor_info("amqp")["started"] is False
    with pytest.raises(ConnectionException):
        connect(port, timeout=2)
    # the port is free: something else can bind it
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    probe.bind(("127.0.0.1", port))
    probe.close()
    # the existing client was dropped
    with pytest.raises(ConnectionException):
        rcv.receive(timeout=3)
    wait_for(lambda: broker.broker_info()["connection_count"] == 0)
    broker.start_acceptor("amqp")
    assert broker.acceptor_info("amqp")["started"] is True
    assert port_of(broker) == port
    send(port, "orders", ["back"])
    assert broker.queue_info("orders")["message_count"] == 1


def test_port_in_use_refuses_to_start_and_releases_other_ports(tmp_path):
    from core_support import free_port

    from artemis_lab import errors

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    first = free_port()
    inst = instance(tmp_path, port=first, extra_acceptors={"second": busy.getsockname()[1]})
    try:
        with pytest.raises(errors.ConfigurationError):
            Broker(inst, DictRealm()).start()
        probe = socket.socket()
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", first))  # the acceptor bound before the failure was released
        probe.close()
    finally:
        busy.close()
