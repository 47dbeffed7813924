"""Two lab brokers in one process, mirrored both ways (dual mirror), observed through the BrokerAPI."""

from __future__ import annotations

import time

import pytest
from core_support import DictRealm, connect, free_port, instance, mirror_connection, send, start, wait_for

from artemis_lab.core.broker import Broker

SNF_A = "$ACTIVEMQ_ARTEMIS_MIRROR_DC2"  # on dc1: events for dc2
SNF_B = "$ACTIVEMQ_ARTEMIS_MIRROR_DC1"


class Pair:
    def __init__(self, tmp_path, version: str = "2.44.0", filter_a: str | None = None, sync_a: bool = False):
        self.port_a, self.port_b = free_port(), free_port()
        self.inst_a = instance(tmp_path, "dc1", self.port_a, version=version, queues=("orders", "audit.log"),
                               mirror_to=[mirror_connection("DC2", self.port_b, address_filter=filter_a,
                                                            sync=sync_a)])
        self.inst_b = instance(tmp_path, "dc2", self.port_b, version=version, queues=("orders", "audit.log"),
                               mirror_to=[mirror_connection("DC1", self.port_a)])
        self.a = start(self.inst_a)
        self.b = start(self.inst_b)

    def restart_b(self) -> None:
        self.b = Broker(self.inst_b, DictRealm())
        self.b.start()

    def connected(self) -> bool:
        return all(c["connected"] for br in (self.a, self.b) for c in br.broker_connections())

    def idle(self) -> bool:
        """Connected both ways and both SNF queues empty (the definitions re-sent at connect included)."""
        return self.connected() and count(self.a, SNF_A) == 0 and count(self.b, SNF_B) == 0

    def stop(self) -> None:
        for br in (self.a, self.b):
            if br.started:
                br.stop()


@pytest.fixture
def pair(tmp_path):
    p = Pair(tmp_path)
    wait_for(p.idle)
    yield p
    p.stop()


def count(broker: Broker, queue: str) -> int:
    return broker.queue_info(queue)["message_count"]


def test_send_on_a_arrives_on_b_and_snf_drains(pair):
    send(pair.port_a, "orders", [f"m{i}" for i in range(20)])
    wait_for(lambda: count(pair.b, "orders") == 20)
    wait_for(lambda: count(pair.a, SNF_A) == 0)
    snf = pair.a.queue_info(SNF_A)
    assert snf["internal"] is True
    assert snf["messages_added"] >= 20 and snf["messages_acknowledged"] == snf["messages_added"]
    # no echo: dc2 did not send the messages back to dc1
    time.sleep(0.2)
    assert count(pair.a, "orders") == 20
    assert pair.b.queue_info(SNF_B)["messages_added"] == pair.b.queue_info(SNF_B)["messages_acknowledged"]
    # the body and properties arrive intact on dc2
    got = connect(pair.port_b)
    msg = got.create_receiver("orders").receive(timeout=5)
    assert msg.body == "m0" and msg.durable
    got.close()


def test_consume_on_a_empties_b(pair):
    send(pair.port_a, "orders", ["x", "y", "z"])
    wait_for(lambda: count(pair.b, "orders") == 3)
    conn = connect(pair.port_a)
    rcv = conn.create_receiver("orders")
    for _ in range(3):
        rcv.receive(timeout=5)
        rcv.accept()
    conn.close()
    wait_for(lambda: count(pair.a, "orders") == 0)
    wait_for(lambda: count(pair.b, "orders") == 0)
    wait_for(lambda: count(pair.a, SNF_A) == 0)
    assert pair.b.broker_info()["pending_mirror_acks"] == 0


def test_peer_down_backlog_grows_then_drains(pair):
    pair.b.stop()
    wait_for(lambda: not pair.a.broker_connections()[0]["connected"])
    assert pair.a.broker_connections()[0]["started"] is True
    send(pair.port_a, "orders", [f"b{i}" for i in range(10)])
    snf = pair.a.queue_info(SNF_A)
    assert (snf["message_count"], snf["durable_message_count"], snf["consumer_count"]) == (10, 10, 0)
    pair.restart_b()
    wait_for(pair.connected)
    wait_for(lambda: count(pair.b, "orders") == 10)
    wait_for(lambda: count(pair.a, SNF_A) == 0)
    assert pair.a.queue_info(SNF_A)["consumer_count"] == 1  # as recorded: the mirror sender is its consumer


def test_stop_broker_connection_keeps_capturing(pair):
    pair.a.stop_broker_connection("DC2")
    assert count(pair.a, SNF_A) == 0
    info = pair.a.broker_connections()[0]
    assert (info["started"], info["connected"]) == (False, False)
    send(pair.port_a, "orders", ["held"])
    time.sleep(0.3)
    assert count(pair.a, SNF_A) == 1 and count(pair.b, "orders") == 0
    pair.a.start_broker_connection("DC2")
    info = pair.a.broker_connections()[0]
    assert (info["started"], info["connected"]) == (True, True)  # already on the read right after the start
    wait_for(lambda: count(pair.b, "orders") == 1)
    wait_for(lambda: count(pair.a, SNF_A) == 0)
    with pytest.raises(Exception, match="broker connection NOPE not found"):
        pair.a.start_broker_connection("NOPE")


def test_mirrored_queue_creation(pair):
    pair.a.create_queue("jobs", "jobs", "ANYCAST")
    wait_for(lambda: "jobs" in pair.b.broker_info()["queue_names"])
    assert pair.b.queue_info("jobs")["routing_type"] == "ANYCAST"
    pair.a.destroy_queue("jobs")
    wait_for(lambda: "jobs" not in pair.b.broker_info()["queue_names"])


def test_consumer_on_target_makes_mirrored_ack_pending_then_dropped(pair):
    send(pair.port_a, "orders", ["dup"])
    wait_for(lambda: count(pair.b, "orders") == 1)
    holder = connect(pair.port_b)
    held = holder.create_receiver("orders").receive(timeout=5)  # held unsettled on dc2
    assert held.body == "dup"
    conn = connect(pair.port_a)
    rcv = conn.create_receiver("orders")
    rcv.receive(timeout=5)
    rcv.accept()
    conn.close()
    wait_for(lambda: pair.b.broker_info()["pending_mirror_acks"] > 0, timeout=3, interval=0.01)
    # 5 queue attempts + 2 page attempts every 100 ms, then dropped silently
    wait_for(lambda: pair.b.broker_info()["pending_mirror_acks"] == 0, timeout=5)
    assert count(pair.a, "orders") == 0
    holder.close()  # the held message goes back to dc2's queue: the documented double delivery
    wait_for(lambda: count(pair.b, "orders") == 1)
    again = connect(pair.port_b)
    redelivered = again.create_receiver("orders").receive(timeout=5)
    assert (redelivered.body, redelivered.delivery_count) == ("dup", 0)  # as recorded on Artemis 2.44.0
    again.close()


def test_address_filter_exclusion_is_not_mirrored(tmp_path):
    p = Pair(tmp_path, filter_a="orders,audit,!audit.log")
    try:
        wait_for(p.connected)
        send(p.port_a, "audit.log", ["secret"])
        send(p.port_a, "orders", ["public"])
        wait_for(lambda: count(p.b, "orders") == 1)
        time.sleep(0.2)
        assert count(p.b, "audit.log") == 0
        assert count(p.a, "audit.log") == 1
    finally:
        p.stop()


def test_sync_mirror_holds_client_sends_while_peer_is_down(tmp_path):
    p = Pair(tmp_path, sync_a=True)
    try:
        wait_for(p.connected)
        send(p.port_a, "orders", ["synced"])  # settled only after dc2 stored it
        assert count(p.b, "orders") == 1
        p.b.stop()
        wait_for(lambda: not p.a.broker_connections()[0]["connected"])
        conn = connect(p.port_a, timeout=1)
        snd = conn.create_sender("orders")
        from proton import Message, Timeout

        dlv = snd.link.send(Message(body="waiting", durable=True))  # returns the delivery, no waiting
        with pytest.raises(Timeout):
            conn.wait(lambda: dlv.settled, timeout=1)
        assert count(p.a, "orders") == 2  # stored on dc1, but the producer is not told yet
        p.restart_b()
        conn.wait(lambda: dlv.settled, timeout=10)
        assert dlv.remote_state == dlv.ACCEPTED
        conn.close()
        wait_for(lambda: count(p.b, "orders") == 2)
    finally:
        p.stop()


def test_snf_queue_visible_only_from_2_32(tmp_path):
    p = Pair(tmp_path, version="2.31.0")
    try:
        wait_for(p.connected)
        assert SNF_A not in p.a.broker_info()["queue_names"]
        with pytest.raises(Exception, match="AMQ229017"):
            p.a.queue_info(SNF_A)
    finally:
        p.stop()
    p = Pair(tmp_path / "new", version="2.32.0")
    try:
        assert SNF_A in p.a.broker_info()["queue_names"]
    finally:
        p.stop()


def test_snf_queue_is_not_reachable_by_clients(pair):
    from proton.utils import LinkDetached

    conn = connect(pair.port_a)
    with pytest.raises(LinkDetached):
        conn.create_receiver(SNF_A)
    conn.close()


def test_stopping_the_acceptor_drops_the_peers_incoming_mirror(pair):
    pair.b.stop_acceptor("amqp")  # dc1's DC2 mirror came in through it
    wait_for(lambda: not pair.a.broker_connections()[0]["connected"])
    assert pair.a.broker_connections()[0]["started"] is True  # still retrying
    pair.b.start_acceptor("amqp")
    wait_for(lambda: pair.a.broker_connections()[0]["connected"])


def test_a_separate_mirror_acceptor_survives_fencing_the_client_acceptor(tmp_path):
    client_a, client_b, mirror_a, mirror_b = (free_port() for _ in range(4))
    inst_a = instance(tmp_path, "dc1", client_a, extra_acceptors={"mirror": mirror_a},
                      mirror_to=[mirror_connection("DC2", mirror_b)])
    inst_b = instance(tmp_path, "dc2", client_b, extra_acceptors={"mirror": mirror_b},
                      mirror_to=[mirror_connection("DC1", mirror_a)])
    a, b = start(inst_a), start(inst_b)
    try:
        wait_for(lambda: all(c["connected"] for br in (a, b) for c in br.broker_connections()))
        a.stop_acceptor("amqp")  # fence dc1's clients
        time.sleep(0.3)
        assert all(c["connected"] for br in (a, b) for c in br.broker_connections())
        send(client_b, "orders", ["after-fence"])
        wait_for(lambda: count(a, "orders") == 1)
    finally:
        a.stop()
        b.stop()


def test_uri_alternates_are_tried_in_turn(tmp_path):
    dead, port_b = free_port(), free_port()
    conn_cfg = mirror_connection("DC2", port_b)
    conn_cfg.uri = f"tcp://127.0.0.1:{dead}#tcp://127.0.0.1:{port_b}"  # first host down: use the alternate
    a = start(instance(tmp_path, "dc1", free_port(), mirror_to=[conn_cfg]))
    b = start(instance(tmp_path, "dc2", port_b))
    try:
        wait_for(lambda: a.broker_connections()[0]["connected"])
        send(int(a.acceptor_info("amqp")["bound_port"]), "orders", ["via-alternate"])
        wait_for(lambda: count(b, "orders") == 1)
    finally:
        a.stop()
        b.stop()


def test_reconnect_attempts_limit_gives_up(tmp_path):
    port_b = free_port()
    conn_cfg = mirror_connection("DC2", port_b)
    conn_cfg.reconnect_attempts = 2
    a = start(instance(tmp_path, "dc1", free_port(), mirror_to=[conn_cfg]))
    try:
        time.sleep(1.0)  # 1 attempt + 2 retries at 200 ms, then no more
        b = start(instance(tmp_path, "dc2", port_b))
        try:
            time.sleep(0.8)
            info = a.broker_connections()[0]
            assert (info["started"], info["connected"]) == (True, False)
            a.stop_broker_connection("DC2")
            a.start_broker_connection("DC2")  # an explicit start tries again
            wait_for(lambda: a.broker_connections()[0]["connected"])
        finally:
            b.stop()
    finally:
        a.stop()


def test_replayed_events_after_a_lost_settlement_are_deduplicated(pair, monkeypatch):
    from artemis_lab.core.mirror import MirrorSource

    source = pair.a.mirrors["DC2"]
    # Simulate settlements lost on the wire: dc1 ignores dc2's dispositions, so the events stay unsettled.
    monkeypatch.setattr(MirrorSource, "on_disposition", lambda self, d: None)
    send(pair.port_a, "orders", ["once-1", "once-2", "once-3"])
    wait_for(lambda: count(pair.b, "orders") == 3)
    assert count(pair.a, SNF_A) >= 3  # not confirmed as far as dc1 knows
    monkeypatch.undo()
    pair.a.stop_broker_connection("DC2")  # unsettled events go back to the SNF ...
    pair.a.start_broker_connection("DC2")  # ... and are sent again
    wait_for(lambda: count(pair.a, SNF_A) == 0)
    assert source.connected
    assert count(pair.b, "orders") == 3  # the replay was recognised, not stored twice


def test_duplicate_id_is_not_caught_across_sites(pair):
    from proton import Message

    for port in (pair.port_a, pair.port_b):  # the same business send, once per site (a resend after failover)
        conn = connect(port)
        conn.create_sender("orders").send(Message(body="pay", durable=True, properties={"_AMQ_DUPL_ID": "p-1"}))
        conn.close()
    wait_for(lambda: count(pair.a, "orders") == 2 and count(pair.b, "orders") == 2)
    # while on one site the id is caught
    conn = connect(pair.port_a)
    conn.create_sender("orders").send(Message(body="pay", durable=True, properties={"_AMQ_DUPL_ID": "p-1"}))
    conn.close()
    time.sleep(0.2)
    assert count(pair.a, "orders") == 2 and count(pair.b, "orders") == 2
