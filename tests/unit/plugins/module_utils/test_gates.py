"""Gate evaluation and the wait loop (pure, over snapshots from the fake brokers)."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import gates
from ansible_collections.continuity.artemis.plugins.module_utils import site_state as ss


@pytest.fixture
def pair(jfake):
    """Two fake sites (2.44) and a function taking a snapshot of each."""
    sites = jfake.Sites()
    dc1 = sites.add("site-2.44-dc1.json", "http://dc1:8161/console/jolokia")
    dc2 = sites.add("site-2.44-dc2.json", "http://dc2:8161/console/jolokia")
    clock = {"t": 1000.0}
    c1 = ss.SiteCollector(jfake.make_client(dc1), "dc1", "dc1", clock=lambda: clock["t"])
    c2 = ss.SiteCollector(jfake.make_client(dc2), "dc2", "dc2", clock=lambda: clock["t"])

    def take(advance=1.0):
        clock["t"] += advance
        return c1.collect(), c2.collect()
    return dc1, dc2, take


ALL = {"connected": True, "max_backlog": 0, "max_lag": 1.0, "max_pending_acks": 0, "queues_equal": True,
       "no_consumers_on": {"site": "peer"}}


def test_in_sync_pair_passes_everything(pair):
    _, _, take = pair
    s1, s2 = take()
    ev = gates.evaluate(ALL, s1, s2)
    assert ev["ok"], ev["failed"]
    assert {d["connection"] for d in ev["directions"]} == {"DC2", "DC1"}


def test_disconnected_backlog_and_consumers_fail_with_reasons(pair):
    dc1, dc2, take = pair
    dc1.connections[0]["Connected"] = False
    snf = dc1.queues[-1]
    snf["MessageCount"] = 120
    dc2.queues[2]["ConsumerCount"] = 2
    dc2.pending_mirror_acks = 3
    s1, s2 = take()
    ev = gates.evaluate(ALL, s1, s2)
    assert ev["failed"] == ["connected", "max_backlog", "max_lag", "max_pending_acks", "no_consumers_on"]
    c = ev["conditions"]
    assert "dc1/DC2 is not connected" in c["connected"]["reason"]
    assert "dc1/DC2 backlog 120 events > 0" in c["max_backlog"]["reason"]
    assert "lag_seconds unknown" in c["max_lag"]["reason"]
    assert "dc1/DC2 pending_acks 3 > 0" in c["max_pending_acks"]["reason"]  # target of dc1->dc2 is dc2
    assert "dc2/orders (2)" in c["no_consumers_on"]["reason"]


def test_queue_difference_fails_even_with_zero_pending_acks(pair):
    # the real 2.44 double-delivery case: PendingMirrorAcks back to 0 while the sites differ
    _, dc2, take = pair
    dc2.queues[2]["MessageCount"] = 6
    s1, s2 = take()
    ev = gates.evaluate({"max_pending_acks": 0, "queues_equal": True}, s1, s2)
    assert ev["failed"] == ["queues_equal"]
    assert "orders 5!=6" in ev["conditions"]["queues_equal"]["reason"]
    assert gates.evaluate({"queues_equal": True}, s1, s2, queue_tolerance=1)["ok"]


def test_lag_from_two_samples(pair):
    dc1, _, take = pair
    snf = dc1.queues[-1]
    snf.update(MessageCount=10_000, MessagesAdded=100_000, MessagesAcknowledged=90_000)
    prev = take()
    snf.update(MessageCount=4_000, MessagesAdded=101_000, MessagesAcknowledged=97_000)
    cur = take(1.0)
    ev = gates.evaluate({"max_lag": 1.0}, cur[0], cur[1], prev_site=prev[0], prev_peer=prev[1])
    lags = {d["connection"]: d["lag_seconds"] for d in ev["directions"]}
    assert lags["DC2"] == pytest.approx(4000 / 7000)  # 4,000 waiting, 7,000 acked in the second: FIFO lag
    assert ev["ok"]


def test_outgoing_only_and_missing_peer(pair):
    _, dc2, take = pair
    dc2.queues[-1]["MessageCount"] = 9  # dc2's own backlog
    s1, s2 = take()
    assert gates.evaluate({"max_backlog": 0}, s1, s2, direction="outgoing")["ok"]
    assert not gates.evaluate({"max_backlog": 0}, s1, s2)["ok"]
    ev = gates.evaluate({"max_pending_acks": 0, "queues_equal": True}, s1, None)
    assert ev["failed"] == ["max_pending_acks", "queues_equal"]
    assert "give the peer" in ev["conditions"]["max_pending_acks"]["reason"]


def test_unknown_connection_and_unreachable(pair):
    _, _, take = pair
    s1, _s2 = take()
    ev = gates.evaluate({"connected": True}, s1, None, connection="NOPE")
    assert not ev["ok"] and "unknown" in ev["conditions"]["connected"]["reason"]
    down = ss.unreachable("dc2", "http://dc2", "dc2", RuntimeError("refused"), 1.0)
    ev = gates.evaluate({"connected": True, "queues_equal": True}, s1, down)
    assert ev["failed"] == ["connected", "queues_equal"]
    assert "unreachable" in ev["conditions"]["connected"]["reason"]


def test_pre_2_40_pending_acks_unknown_fails(jfake):
    sites = jfake.Sites()
    a = sites.add("site-2.33-dc1.json", "http://dc1:8161/console/jolokia")
    b = sites.add("site-2.33-dc2.json", "http://dc2:8161/console/jolokia")
    s1 = ss.SiteCollector(jfake.make_client(a), "dc1").collect()
    s2 = ss.SiteCollector(jfake.make_client(b), "dc2").collect()
    ev = gates.evaluate({"max_pending_acks": 0, "connected": True, "max_backlog": 0}, s1, s2)
    assert ev["failed"] == ["max_pending_acks"]
    assert "pending_acks unknown" in ev["conditions"]["max_pending_acks"]["reason"]


def test_wait_until_requires_stable_samples(fake_clock):
    clock = fake_clock
    oks = iter([False, True, True, False, True, True, True])
    ev = lambda sample, prev: {"ok": sample, "failed": [] if sample else ["max_backlog"],  # noqa: E731
                               "conditions": {"max_backlog": {"ok": sample, "reason": None if sample else "big"}},
                               "directions": []}
    res = gates.wait_until(lambda: next(oks), ev, wait_timeout=100, wait_sleep=2, stable_samples=3,
                           clock=clock, wall=clock, sleeper=clock.sleep)
    assert res["ok"] and len(res["samples"]) == 7 and res["elapsed"] == 12.0
    assert [s["stable_streak"] for s in res["samples"]] == [0, 1, 2, 0, 1, 2, 3]


def test_wait_until_times_out_with_last_failure(fake_clock):
    clock = fake_clock
    ev = lambda sample, prev: {"ok": False, "failed": ["connected"],  # noqa: E731
                               "conditions": {"connected": {"ok": False, "reason": "dc1/DC2 is not connected"}},
                               "directions": []}
    res = gates.wait_until(lambda: None, ev, wait_timeout=5, wait_sleep=2, clock=clock, wall=clock,
                           sleeper=clock.sleep)
    assert not res["ok"] and res["timed_out"] and res["failed"] == ["connected"]
    assert [s["elapsed"] for s in res["samples"]] == [0, 2, 4, 5]  # last sample at the deadline
    assert "dc1/DC2 is not connected" in res["reason"]


def test_wait_until_stops_early_when_told_waiting_cannot_help(fake_clock):
    clock = fake_clock
    ev = lambda sample, prev: {"ok": False, "failed": ["queues_equal"],  # noqa: E731
                               "conditions": {"queues_equal": {"ok": False, "reason": "orders 3!=5"}},
                               "directions": []}
    res = gates.wait_until(lambda: None, ev, wait_timeout=600, wait_sleep=2, clock=clock, wall=clock,
                           sleeper=clock.sleep, stop_early=lambda e, elapsed: "quiet" if elapsed >= 4 else None)
    assert not res["ok"] and not res["timed_out"] and res["stopped_early"] == "quiet"
    assert res["elapsed"] == 4.0 and res["failed"] == ["queues_equal"] and "orders 3!=5" in res["reason"]
    # never asked about a passing sample, and never when not waiting
    asked = []
    ok = lambda sample, prev: {"ok": True, "failed": [], "conditions": {}, "directions": []}  # noqa: E731
    res = gates.wait_until(lambda: None, ok, 10, 1, stable_samples=1, clock=clock, wall=clock, sleeper=clock.sleep,
                           stop_early=lambda e, elapsed: asked.append(e) or "x")
    assert res["ok"] and res["stopped_early"] is None and asked == []


def test_wait_false_single_sample_and_not_yet_stable(fake_clock):
    clock = fake_clock
    ev = lambda sample, prev: {"ok": True, "failed": [], "conditions": {}, "directions": []}  # noqa: E731
    res = gates.wait_until(lambda: None, ev, 10, 1, stable_samples=2, wait=False, clock=clock, wall=clock,
                           sleeper=clock.sleep)
    assert not res["ok"] and not res["timed_out"] and res["failed"] == ["stable_samples"]
    assert len(res["samples"]) == 1
