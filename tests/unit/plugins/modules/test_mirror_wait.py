"""mirror_wait: passes after a drain, times out with the failing condition, stability, errors."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.modules import mirror_wait

URL1 = "http://dc1:8161/console/jolokia"
URL2 = "http://dc2:8161/console/jolokia"
PEER = {"url": URL2, "username": "admin", "password": "secret", "broker_name": "dc2"}


def args(**kw):
    a = {"url": URL1, "username": "admin", "password": "secret", "broker_name": "dc1", "peer": PEER,
         "wait_timeout": 10, "wait_sleep": 1}
    a.update(kw)
    return a


@pytest.fixture
def pair(jolokia_sites):
    def make(gen="2.44"):
        return (jolokia_sites.add(f"site-{gen}-dc1.json", URL1), jolokia_sites.add(f"site-{gen}-dc2.json", URL2))
    return make


GATE = dict(connected=True, max_backlog=0, max_pending_acks=0, queues_equal=True, no_consumers_on={"site": "peer"})


def test_passes_after_drain(pair, jfake, fake_time):
    dc1, dc2 = pair()
    snf = dc1.queues[-1]
    snf.update(MessageCount=9000, MessagesAdded=50_000, MessagesAcknowledged=41_000)
    dc2.queues[2]["MessageCount"] = 2  # orders still behind on dc2
    steps = iter([(4000, 46_000), (0, 50_000)])

    def drain(seconds):
        try:
            count, acked = next(steps)
        except StopIteration:
            return
        snf.update(MessageCount=count, MessagesAcknowledged=acked)
        if count == 0:
            dc2.queues[2]["MessageCount"] = 5
    fake_time.on_sleep = drain
    r = jfake.run_module(mirror_wait, args(**GATE, max_lag=1.0, stable_samples=2), check_mode=True)
    assert not r.failed, r.result["msg"] if r.failed else None
    res = r.result
    assert res["ok"] and res["changed"] is False
    assert [s["ok"] for s in res["samples"]] == [False, False, True, True]
    assert res["samples"][0]["failed"] == ["max_backlog", "max_lag", "queues_equal"]
    assert res["samples"][1]["directions"][0]["drain_rate"] == pytest.approx(5000.0)
    assert res["samples"][1]["directions"][0]["lag_seconds"] == pytest.approx(0.8)
    assert res["elapsed"] == pytest.approx(3.0)
    assert all("ts" in s and "elapsed" in s for s in res["samples"])


def test_times_out_while_wan_cut(pair, jfake, fake_time):
    dc1, _ = pair()
    dc1.connections[0]["Connected"] = False
    dc1.queues[-1].update(MessageCount=120)
    r = jfake.run_module(mirror_wait, args(connected=True, max_backlog=0, wait_timeout=5, wait_sleep=2))
    assert r.failed
    res = r.result
    assert res["timed_out"] is True and res["ok"] is False
    assert res["failed_conditions"] == ["connected", "max_backlog"]
    assert "timed out after 5.0 s (4 samples)" in res["msg"]
    assert "dc1/DC2 is not connected" in res["msg"] and "backlog 120 events > 0" in res["msg"]
    assert res["last"]["elapsed"] == 5.0


def test_wait_false_single_look(pair, jfake, fake_time):
    _, dc2 = pair()
    dc2.queues[2]["ConsumerCount"] = 1
    r = jfake.run_module(mirror_wait, args(no_consumers_on={"site": "peer", "prefix": "ord"}, wait=False))
    assert r.failed and r.result["timed_out"] is False and len(r.result["samples"]) == 1
    assert "mirror gate not met" in r.result["msg"] and "dc2/orders (1)" in r.result["msg"]
    assert fake_time.sleeps == []


def test_pre_2_40_pending_acks_never_passes(pair, jfake, fake_time):
    pair("2.33")
    r = jfake.run_module(mirror_wait, args(max_pending_acks=0, wait_timeout=2))
    assert r.failed and "pending_acks unknown" in r.result["msg"]
    r = jfake.run_module(mirror_wait, args(connected=True, max_backlog=0, queues_equal=True, wait_timeout=2))
    assert not r.failed, r.result.get("msg")


def test_unreachable_peer_is_a_failed_sample_then_recovers(pair, jolokia_sites, jfake, fake_time):
    _, dc2 = pair()
    dc2.fail_connections = 6  # 2 samples x 3 attempts

    r = jfake.run_module(mirror_wait, args(connected=True, wait_timeout=10))
    assert not r.failed, r.result.get("msg")
    assert [s["ok"] for s in r.result["samples"]] == [False, False, True]


@pytest.mark.parametrize(
    "kw,words",
    [
        ({}, ["at least one condition"]),
        ({"queues_equal": True, "peer": None}, ["queues_equal need(s) the peer"]),
        ({"connected": True, "stable_samples": 0}, ["stable_samples must be >= 1"]),
        ({"connected": True, "password": "bad"}, ["HTTP 401"]),
        ({"connected": True, "direction": "sideways"}, ["direction"]),
    ],
)
def test_argument_and_auth_errors(pair, jfake, fake_time, kw, words):
    pair()
    r = jfake.run_module(mirror_wait, args(**kw))
    assert r.failed
    for w in words:
        assert w in r.result["msg"]
