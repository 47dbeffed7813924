"""broker_connection: MBean path (2.44) and broker-operation path (2.33); idempotence, check mode, diff."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.modules import broker_connection

URL = "http://dc1:8161/console/jolokia"


def args(**kw):
    a = {"url": URL, "username": "admin", "password": "secret", "broker_name": "dc1", "name": "DC2"}
    a.update(kw)
    return a


def execs(broker):
    return [c for c in broker.calls if c[0] == "exec" and "listBrokerConnections" not in str(c[2])]


@pytest.mark.parametrize("gen,method,op", [("2.44", "mbean", "stop()"), ("2.33", "broker_operation",
                                                                          "stopBrokerConnection")])
def test_stop_then_idempotent_then_start(jolokia_sites, jfake, gen, method, op):
    b = jolokia_sites.add(f"site-{gen}-dc1.json", URL)
    r = jfake.run_module(broker_connection, args(state="stopped"), diff=True)
    assert not r.failed, r.result
    res = r.result
    assert res["changed"] is True and res["method"] == method
    assert res["connection"]["started"] is False
    assert res["diff"] == {"before": {"name": "DC2", "state": "started"}, "after": {"name": "DC2", "state": "stopped"}}
    assert [c[2] for c in execs(b)] == [op]
    assert b.connections[0]["Started"] is False

    r = jfake.run_module(broker_connection, args(state="stopped"))
    assert r.result["changed"] is False and len(execs(b)) == 1

    r = jfake.run_module(broker_connection, args(state="started"))
    assert r.result["changed"] is True and b.connections[0]["Started"] is True


def test_check_mode_changes_nothing(jolokia_sites, jfake):
    b = jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(broker_connection, args(state="stopped"), check_mode=True, diff=True)
    assert r.result["changed"] is True and r.result["connection"]["started"] is False
    assert execs(b) == [] and b.connections[0]["Started"] is True


def test_unknown_connection_lists_existing(jolokia_sites, jfake):
    jolokia_sites.add("site-2.33-dc1.json", URL)
    r = jfake.run_module(broker_connection, args(name="NOPE", state="stopped"))
    assert r.failed and "'NOPE' does not exist on broker dc1; existing: DC2" in r.result["msg"]


def test_unknown_broker_and_no_role(jolokia_sites, jfake):
    jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(broker_connection, args(broker_name="dc2"))
    assert r.failed and "'dc2' does not exist" in r.result["msg"] and "dc1" in r.result["msg"]
    r = jfake.run_module(broker_connection, args(username="norole"))
    assert r.failed and "Permission denied" in r.result["msg"]


def test_discovers_broker_name(jolokia_sites, jfake):
    jolokia_sites.add("site-2.44-dc1.json", URL)
    a = args(state="started")
    del a["broker_name"]
    r = jfake.run_module(broker_connection, a)
    assert not r.failed and r.result["changed"] is False
