"""acceptor: fence client acceptors, idempotence, check mode, diff, unknown names, warning."""

from __future__ import annotations

from ansible_collections.continuity.artemis.plugins.modules import acceptor

URL = "http://dc1:8161/console/jolokia"


def args(**kw):
    a = {"url": URL, "username": "admin", "password": "secret", "broker_name": "dc1", "name": ["artemis", "amqp"]}
    a.update(kw)
    return a


def execs(b):
    return [(c[1], c[2]) for c in b.calls if c[0] == "exec"]


def test_fence_and_idempotent(jolokia_sites, jfake):
    b = jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(acceptor, args(state="stopped"), diff=True)
    assert not r.failed, r.result
    res = r.result
    assert res["changed"] is True and sorted(res["changed_acceptors"]) == ["amqp", "artemis"]
    assert res["acceptors"] == {"artemis": {"started": False}, "amqp": {"started": False}, "mirror": {"started": True}}
    assert res["diff"]["before"] == {"artemis": "started", "amqp": "started"}
    assert res["diff"]["after"] == {"artemis": "stopped", "amqp": "stopped"}
    assert len(execs(b)) == 2 and all(op == "stop()" for _, op in execs(b))
    assert not res.get("warnings")
    r = jfake.run_module(acceptor, args(state="stopped"))
    assert r.result["changed"] is False and len(execs(b)) == 2


def test_check_mode(jolokia_sites, jfake):
    b = jolokia_sites.add("site-2.33-dc1.json", URL)
    b.acceptors["amqp"]["Started"] = False
    r = jfake.run_module(acceptor, args(state="started"), check_mode=True)
    assert r.result["changed"] is True and r.result["changed_acceptors"] == ["amqp"]
    assert r.result["acceptors"]["amqp"]["started"] is True
    assert execs(b) == [] and b.acceptors["amqp"]["Started"] is False


def test_unknown_acceptor(jolokia_sites, jfake):
    jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(acceptor, args(name=["amqp", "stomp"], state="stopped"))
    assert r.failed and "stomp do not exist" in r.result["msg"] and "existing: amqp, artemis, mirror" in r.result["msg"]


def test_warns_when_nothing_left_for_the_mirror(jolokia_sites, jfake):
    jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(acceptor, args(names=["artemis", "amqp", "mirror"], state="stopped"))
    assert not r.failed
    assert any("mirror cannot connect" in w for w in r.result["warnings"])
