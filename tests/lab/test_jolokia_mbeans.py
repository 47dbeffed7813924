"""MBean fidelity on a lab broker started through bin/artemis-service (real engine when available): real
ObjectNames, attribute/operation names and signatures no wider than Artemis' (recorded 2.44.0 `list`), value
shapes, and the control operations' observable effects."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import ADMIN, ADMIN_PW, LabInstance, recorded, wait_for
from proton import Message
from proton.utils import BlockingConnection


@pytest.fixture(scope="module")
def lab(engine_lab: LabInstance) -> LabInstance:
    return engine_lab


def _list(lab: LabInstance, name: str) -> dict[str, Any]:
    path = "org.apache.activemq.artemis/" + name.split(":", 1)[1]
    return lab.jolokia.value({"type": "list", "path": path})


def _recorded_list(name: str, index: int | None = None) -> dict[str, Any]:
    body = recorded(name)["response"]["body"]
    return (body[index] if index is not None else body)["value"]


def _sigs(ops: dict[str, Any]) -> set[tuple[str, tuple[str, ...], str]]:
    out = set()
    for name, entries in ops.items():
        for e in entries if isinstance(entries, list) else [entries]:
            out.add((name, tuple(a["type"] for a in e["args"]), e["ret"]))
    return out


@pytest.mark.parametrize(
    ("which", "recorded_file", "index"),
    [("broker", "16-list-broker-mbean.json", None), ("queue", "15-list-queue-mbean.json", None),
     ("connection", "17-list-bconn-acceptor-address.json", 0), ("acceptor", "17-list-bconn-acceptor-address.json", 1),
     ("address", "17-list-bconn-acceptor-address.json", 2)],
)
def test_names_and_signatures_exist_in_artemis(lab: LabInstance, which: str, recorded_file: str,
                                               index: int | None) -> None:
    j = lab.jolokia
    name = {"broker": j.bname(), "queue": j.qname("orders"), "connection": j.cname("DC2"),
            "acceptor": j.accname("artemis"), "address": j.aname("orders")}[which]
    ours, real = _list(lab, name), _recorded_list(recorded_file, index)
    assert ours["class"] == real["class"]
    invented_attrs = set(ours["attr"]) - set(real["attr"])
    assert not invented_attrs
    for attr, meta in ours["attr"].items():
        assert (meta["type"], meta["rw"]) == (real["attr"][attr]["type"], real["attr"][attr]["rw"]), attr
    assert not _sigs(ours["op"]) - _sigs(real["op"])


def test_broker_attributes(lab: LabInstance) -> None:
    j = lab.jolokia
    names = ["Version", "Name", "NodeID", "Active", "Started", "Backup", "HAPolicy", "Status", "PendingMirrorAcks",
             "AddressNames", "QueueNames", "ConnectionCount", "TotalMessageCount", "Uptime", "UptimeMillis",
             "TotalConsumerCount", "BrokerPluginClassNames"]
    v = j.value({"type": "read", "mbean": j.bname(), "attribute": names})
    assert v["Version"] == "2.44.0-lab" and v["Name"] == "dc1" and v["Active"] and v["Started"]
    assert v["Backup"] is False and v["HAPolicy"] == "Primary Only" and v["PendingMirrorAcks"] == 0
    assert re.fullmatch(r"[\d,]+\.\d{3} seconds|\d+ minutes?", v["Uptime"]) and isinstance(v["UptimeMillis"], int)
    status = json.loads(v["Status"])
    assert status["server"]["state"] == "STARTED" and status["server"]["nodeId"] == v["NodeID"]
    rec_status = json.loads(recorded("05-read-broker-attrlist.json")["response"]["body"]["value"]["Status"])
    assert set(status) == set(rec_status) and set(status["server"]) == set(rec_status["server"])
    assert set(status["server"]["jaas"]["properties"]) == set(rec_status["server"]["jaas"]["properties"])
    assert "orders" in v["QueueNames"] and "$ACTIVEMQ_ARTEMIS_MIRROR_DC2" in v["QueueNames"]
    assert {"orders", "DLQ", "ExpiryQueue"} <= set(v["AddressNames"])
    rec = recorded("05-read-broker-attrlist.json")["response"]["body"]["value"]
    for key in rec:
        assert type(v[key]) is type(rec[key]), key


def test_broker_connection_peer_down_and_stop_start(lab: LabInstance) -> None:
    j = lab.jolokia
    read = j.call({"type": "read", "mbean": j.cname("DC2")})
    rec = recorded("25-bconn-dc2-down.json")["response"]["body"]
    assert set(read["value"]) == set(rec["value"]) and read["request"] == {"mbean": j.cname("DC2"), "type": "read"}
    assert (read["value"]["Started"], read["value"]["Connected"]) == (True, False)
    assert read["value"]["RetryInterval"] == 500 and read["value"]["ReconnectAttempts"] == -1
    listed = json.loads(j.value({"type": "exec", "mbean": j.bname(), "operation": "listBrokerConnections()"}))
    rec_list = json.loads(recorded("26-list-bconns-down-post.json")["response"]["body"]["value"])
    assert [set(x) for x in listed] == [set(x) for x in rec_list]
    assert j.value({"type": "exec", "mbean": j.bname(), "operation": "stopBrokerConnection",
                    "arguments": ["DC2"]}) is None
    both = {"type": "read", "mbean": j.cname("DC2"), "attribute": ["Started", "Connected"]}
    assert j.value(both) == {"Started": False, "Connected": False}
    assert j.value({"type": "exec", "mbean": j.cname("DC2"), "operation": "start()"}) is None
    assert j.value(both)["Started"] is True


def test_queue_pause_resume_and_counts(lab: LabInstance) -> None:
    j = lab.jolokia
    q = j.qname("orders")
    j.value({"type": "exec", "mbean": q, "operation": "pause(boolean)", "arguments": [True]})
    assert j.value({"type": "read", "mbean": q, "attribute": ["Paused", "PersistedPause"]}) == {
        "Paused": True, "PersistedPause": True}
    j.value({"type": "exec", "mbean": q, "operation": "resume()"})
    assert j.value({"type": "read", "mbean": q, "attribute": ["Paused", "PersistedPause"]}) == {
        "Paused": False, "PersistedPause": False}
    assert j.value({"type": "exec", "mbean": q, "operation": "countMessages()"}) == 0
    assert j.value({"type": "exec", "mbean": q, "operation": "countMessages(java.lang.String)",
                    "arguments": [""]}) == 0


def test_messages_sent_over_amqp_show_in_queue_mbean(lab: LabInstance) -> None:
    j = lab.jolokia
    conn = BlockingConnection(f"amqp://{ADMIN}:{ADMIN_PW}@127.0.0.1:{lab.amqp_port}", timeout=10,
                              allowed_mechs="PLAIN", allow_insecure_mechs=True)
    try:
        sender = conn.create_sender("orders")
        for i in range(3):
            sender.send(Message(body=f"m{i}", durable=True, creation_time=1_700_000_000.0 + i))
    finally:
        conn.close()
    attrs = ["MessageCount", "MessagesAdded", "FirstMessageTimestamp", "FirstMessageAge", "ConsumerCount"]
    v = wait_for(lambda: (r := j.value({"type": "read", "mbean": j.qname("orders"), "attribute": attrs}))
                 ["MessageCount"] == 3 and r)
    assert v["MessagesAdded"] >= 3 and v["ConsumerCount"] == 0
    removed = j.value({"type": "exec", "mbean": j.qname("orders"), "operation": "removeMessages(java.lang.String)",
                       "arguments": [""]})
    assert removed == 3


def test_first_message_timestamp_is_amqp_creation_time_in_ms(lab: LabInstance) -> None:
    j = lab.jolokia
    conn = BlockingConnection(f"amqp://{ADMIN}:{ADMIN_PW}@127.0.0.1:{lab.amqp_port}", timeout=10,
                              allowed_mechs="PLAIN", allow_insecure_mechs=True)
    try:
        conn.create_sender("orders").send(Message(body="t", durable=True, creation_time=1_700_000_000.0))
    finally:
        conn.close()
    attrs = ["MessageCount", "FirstMessageTimestamp", "FirstMessageAge"]
    v = wait_for(lambda: (r := j.value({"type": "read", "mbean": j.qname("orders"), "attribute": attrs}))
                 ["MessageCount"] == 1 and r)
    j.value({"type": "exec", "mbean": j.qname("orders"), "operation": "removeAllMessages()"})
    assert v["FirstMessageTimestamp"] == 1_700_000_000_000
    assert v["FirstMessageAge"] > 0


def test_list_queues_and_addresses_are_json_strings_of_strings(lab: LabInstance) -> None:
    j = lab.jolokia
    opts = json.dumps({"field": "name", "operation": "CONTAINS", "value": "orders", "sortField": "name",
                       "sortOrder": "asc"})
    raw = j.value({"type": "exec", "mbean": j.bname(), "operation": "listQueues", "arguments": [opts, 1, 50]})
    got = json.loads(raw)
    rec = json.loads(recorded("69-exec-listQueues-filter.json")["response"]["body"]["value"])
    assert set(got) == {"data", "count"} and got["count"] == 1
    assert set(got["data"][0]) == set(rec["data"][0])
    assert all(isinstance(v, str) for v in got["data"][0].values())
    addresses = json.loads(j.value({"type": "exec", "mbean": j.bname(),
                                    "operation": "listAddresses(java.lang.String,int,int)",
                                    "arguments": ["{}", 1, 100]}))
    rec_a = json.loads(recorded("70-exec-listAddresses.json")["response"]["body"]["value"])
    assert set(addresses["data"][0]) == set(rec_a["data"][0])
    assert addresses["count"] == len(addresses["data"]) >= 3


def test_address_block_returns_true_and_changes_no_attribute(lab: LabInstance) -> None:
    j = lab.jolokia
    before = j.value({"type": "read", "mbean": j.aname("orders")})
    assert j.value({"type": "exec", "mbean": j.aname("orders"), "operation": "block()"}) is True
    after = j.value({"type": "read", "mbean": j.aname("orders")})
    assert before == after
    assert j.value({"type": "exec", "mbean": j.aname("orders"), "operation": "unblock()"}) is None
    rec = recorded("51-read-address-blocked.json")["response"]["body"]["value"]
    assert set(after) <= set(rec)


def test_acceptor_stop_frees_port_and_start_rebinds(lab: LabInstance) -> None:
    import socket

    j = lab.jolokia
    acc = j.accname("artemis")
    params = j.value({"type": "read", "mbean": acc, "attribute": "Parameters"})
    assert params["port"] == str(lab.amqp_port) and "CORE" in params["protocols"]
    j.value({"type": "exec", "mbean": acc, "operation": "stop()"})
    try:
        assert j.value({"type": "read", "mbean": acc, "attribute": "Started"}) is False
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", lab.amqp_port), timeout=2):
            pass
    finally:
        j.value({"type": "exec", "mbean": acc, "operation": "start()"})
    assert j.value({"type": "read", "mbean": acc, "attribute": "Started"}) is True
    socket.create_connection(("127.0.0.1", lab.amqp_port), timeout=2).close()


def test_create_and_delete_address_and_queue(lab: LabInstance) -> None:
    j = lab.jolokia
    j.value({"type": "exec", "mbean": j.bname(), "operation": "createAddress(java.lang.String,java.lang.String)",
             "arguments": ["inv", "ANYCAST"]})
    conf = json.dumps({"name": "inv", "address": "inv", "routing-type": "ANYCAST", "durable": True})
    j.value({"type": "exec", "mbean": j.bname(), "operation": "createQueue(java.lang.String,boolean)",
             "arguments": [conf, False]})
    assert j.value({"type": "read", "mbean": j.qname("inv"), "attribute": "MessageCount"}) == 0
    dup = j.call({"type": "exec", "mbean": j.bname(), "operation": "createQueue(java.lang.String,boolean)",
                  "arguments": [conf, False]})
    assert dup["status"] == 500 and dup["error_type"].endswith("ActiveMQQueueExistsException")
    j.value({"type": "exec", "mbean": j.bname(), "operation": "destroyQueue(java.lang.String)", "arguments": ["inv"]})
    j.value({"type": "exec", "mbean": j.bname(), "operation": "deleteAddress(java.lang.String,boolean)",
             "arguments": ["inv", False]})
    assert j.call({"type": "read", "mbean": j.aname("inv")})["status"] == 404


def test_one_pattern_read_returns_every_queue(lab: LabInstance) -> None:
    j = lab.jolokia
    pattern = 'org.apache.activemq.artemis:broker="dc1",component=addresses,address=*,subcomponent=queues,*'
    value = j.value({"type": "read", "mbean": pattern, "attribute": ["MessageCount", "MessagesAdded"]})
    queues = j.value({"type": "read", "mbean": j.bname(), "attribute": "QueueNames"})
    assert len(value) == len(queues)
    assert all(re.search(r'queue="[^"]+"', name) for name in value)
