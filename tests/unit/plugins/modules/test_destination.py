"""destination: pause/resume (verifiable, idempotent) and block/unblock (not readable back)."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.modules import destination

URL = "http://dc1:8161/console/jolokia"


def args(**kw):
    a = {"url": URL, "username": "admin", "password": "secret", "broker_name": "dc1"}
    a.update(kw)
    return a


def execs(b):
    return [(c[1], c[2]) for c in b.calls if c[0] == "exec"]


def queue(b, name):
    return next(q for q in b.queues if q["Name"] == name)


@pytest.mark.parametrize("gen", ["2.44", "2.33"])
def test_pause_persist_idempotent_resume(jolokia_sites, jfake, gen):
    b = jolokia_sites.add(f"site-{gen}-dc1.json", URL)
    r = jfake.run_module(destination, args(names=["orders"], regex="^inv", state="paused", persist=True), diff=True)
    assert not r.failed, r.result
    res = r.result
    assert res["changed"] is True and res["selected"] == ["invoices", "orders"]
    assert res["destinations"]["orders"] == {"before": {"paused": False, "persisted_pause": False},
                                             "after": {"paused": True, "persisted_pause": True}}
    assert {op for _, op in execs(b)} == {"pause(boolean)"}
    assert queue(b, "orders")["PersistedPause"] is True

    r = jfake.run_module(destination, args(names=["orders"], regex="^inv", state="paused", persist=True))
    assert r.result["changed"] is False and len(execs(b)) == 2

    # a non-persisted pause is upgraded when persist is asked, a persisted one is kept with persist=false
    queue(b, "orders")["PersistedPause"] = False
    r = jfake.run_module(destination, args(names=["orders"], state="paused", persist=True))
    assert r.result["changed_destinations"] == ["orders"]
    r = jfake.run_module(destination, args(names=["orders"], state="paused"))
    assert r.result["changed"] is False and queue(b, "orders")["PersistedPause"] is True

    r = jfake.run_module(destination, args(regex=".", state="resumed"))
    assert r.result["changed_destinations"] == ["invoices", "orders"]
    assert "$ACTIVEMQ_ARTEMIS_MIRROR_DC2" not in r.result["selected"]


def test_check_mode_does_not_execute(jolokia_sites, jfake):
    b = jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(destination, args(names=["orders"], state="paused"), check_mode=True)
    assert r.result["changed"] is True and r.result["destinations"]["orders"]["after"]["paused"] is True
    assert execs(b) == [] and queue(b, "orders").get("Paused", False) is False


def test_block_is_executed_every_time_and_unverified(jolokia_sites, jfake):
    b = jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(destination, args(type="address", names=["orders"], state="blocked"), diff=True)
    res = r.result
    assert res["changed"] is True and res["unverified"] == ["orders"]
    assert res["diff"]["before"] == {"orders": {"blocked": "unknown"}}
    assert b.blocked == {"orders"}
    r = jfake.run_module(destination, args(type="address", names=["orders"], state="blocked"))
    assert r.result["changed"] is True and len(execs(b)) == 2  # cannot be read back: executed again
    jfake.run_module(destination, args(type="address", names=["orders"], state="unblocked"))
    assert b.blocked == set()


def test_address_pause(jolokia_sites, jfake):
    b = jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(destination, args(type="address", prefix="ord", state="paused"))
    assert r.result["changed_destinations"] == ["orders"] and b.addresses["orders"]["Paused"] is True
    r = jfake.run_module(destination, args(type="address", prefix="ord", state="paused"))
    assert r.result["changed"] is False


@pytest.mark.parametrize(
    "kw,words",
    [
        ({"names": ["orders"], "state": "blocked"}, ["applies to addresses"]),
        ({"names": ["nope"], "state": "paused"}, ["nope do not exist"]),
        ({"names": ["$ACTIVEMQ_ARTEMIS_MIRROR_DC2"], "state": "paused"}, ["internal", "include_internal"]),
        ({"prefix": "zzz", "state": "paused"}, ["No queue matches", "allow_empty"]),
        ({"regex": "(", "state": "paused"}, ["regex"]),
        ({"state": "paused"}, ["one of the following is required"]),
    ],
)
def test_errors(jolokia_sites, jfake, kw, words):
    jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(destination, args(**kw))
    assert r.failed
    for w in words:
        assert w in r.result["msg"], r.result["msg"]


def test_allow_empty_and_internal_opt_in(jolokia_sites, jfake):
    b = jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(destination, args(prefix="zzz", state="paused", allow_empty=True))
    assert not r.failed and r.result["changed"] is False
    r = jfake.run_module(destination, args(names=["$ACTIVEMQ_ARTEMIS_MIRROR_DC2"], state="paused",
                                           include_internal=True))
    assert r.result["changed"] is True and b.queues[-1]["Paused"] is True
