"""Tests of the pure lag / RPO / RTO model."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import lag

NOW_MS = 1_795_314_253_347.0  # an epoch-ms value as seen in a real 2.44 capture


def snf(ts, count, added, acked, **kw):
    return lag.SnfSample(ts=ts, message_count=count, messages_added=added, messages_acknowledged=acked, **kw)


class TestRates:
    def test_rates_from_counter_deltas(self):
        r = lag.compute_rates(snf(100.0, 10, 1000, 990), snf(102.0, 30, 3000, 2970))
        assert r.add_rate == pytest.approx(1000.0)
        assert r.drain_rate == pytest.approx(990.0)
        assert r.net_rate == pytest.approx(10.0)
        assert r.interval == pytest.approx(2.0)
        assert r.reason is None

    def test_non_positive_interval_gives_unknown(self):
        r = lag.compute_rates(snf(5.0, 1, 1, 0), snf(5.0, 1, 2, 1))
        assert r.add_rate is None and r.drain_rate is None and r.reason

    def test_counter_reset_is_unknown_not_negative(self):
        # A broker restart resets MessagesAdded; a negative rate would be nonsense.
        r = lag.compute_rates(snf(0.0, 5, 5000, 4995), snf(1.0, 3, 3, 0))
        assert r.add_rate is None and r.drain_rate is None
        assert "MessagesAdded" in r.reason
        assert r.net_rate == pytest.approx(-2.0)

    def test_missing_counters(self):
        r = lag.compute_rates(lag.SnfSample(ts=0.0), lag.SnfSample(ts=1.0))
        assert (r.add_rate, r.drain_rate, r.net_rate) == (None, None, None)


class TestBacklogAndAge:
    def test_backlog_prefers_message_count(self):
        assert lag.backlog(snf(0, 7, 100, 10)) == 7

    def test_backlog_fallback_and_unknown(self):
        assert lag.backlog(lag.SnfSample(ts=0, messages_added=100, messages_acknowledged=90)) == 10
        assert lag.backlog(lag.SnfSample(ts=0)) is None
        assert lag.backlog(None) is None

    def test_from_attributes_accepts_strings_and_nulls(self):
        s = lag.SnfSample.from_attributes(3.0, {"MessageCount": "5", "MessagesAdded": 9, "MessagesAcknowledged": 4,
                                               "FirstMessageAge": None, "DeliveringCount": 1})
        assert (s.message_count, s.messages_added, s.messages_acknowledged, s.delivering_count) == (5, 9, 4, 1)
        assert s.first_message_age_ms is None
        assert lag.SnfSample.from_attributes(1.0, None).message_count is None

    @pytest.mark.parametrize(
        "age_ms,ts_ms,expected",
        [
            (1510, NOW_MS - 1510, 1.51),  # creation time set: real age
            (None, None, None),  # empty queue / in flight
            (NOW_MS, 0, None),  # timestamp 0 -> age is the epoch
            (NOW_MS, None, None),  # epoch-sized without timestamp info
            (-5, None, None),  # clock skew
        ],
    )
    def test_plausible_age(self, age_ms, ts_ms, expected):
        got = lag.plausible_age_seconds(age_ms, ts_ms, NOW_MS)
        assert got == (pytest.approx(expected) if expected is not None else None)


class TestLagSeconds:
    def test_zero_backlog_is_zero_lag(self):
        assert lag.lag_seconds(0, None) == 0.0

    def test_unknown_backlog(self):
        assert lag.lag_seconds(None, 100.0) is None

    def test_backlog_over_drain_rate(self):
        # FIFO: 1,200 events ahead, draining 600/s -> the last one queued now arrives in 2 s, whatever arrives behind.
        assert lag.lag_seconds(1200, 600.0) == pytest.approx(2.0)
        assert lag.lag_seconds(1200, 600.0, 200.0) == pytest.approx(2.0)

    def test_steady_traffic_is_a_small_lag_not_an_unknown_one(self):
        # 100 events/s added and drained, 3 waiting at the sample: 0.03 s behind (this was "unbounded" before,
        # which failed status.yml's lag_known check under ordinary load).
        assert lag.lag_seconds(3, 100.0, 100.0) == pytest.approx(0.03)
        assert lag.lag_seconds(300, 100.0, 150.0) == pytest.approx(3.0)  # growing: the next sample reads more

    @pytest.mark.parametrize("drain,add", [(0.0, None), (None, None), (0.0, 100.0), (None, 150.0)])
    def test_not_draining_is_unknown(self, drain, add):
        assert lag.lag_seconds(10, drain, add) is None


class TestRpoRto:
    def test_rpo_empty(self):
        r = lag.rpo_estimate(0, 100.0)
        assert (r.events, r.messages, r.seconds, r.basis) == (0, 0.0, 0.0, "empty")

    def test_rpo_from_add_rate_with_send_share(self):
        share = lag.send_share(1000.0, 2000.0)
        r = lag.rpo_estimate(4000, 2000.0, share_of_sends=share)
        assert r.events == 4000 and r.messages == pytest.approx(2000.0)
        assert r.seconds == pytest.approx(2.0) and r.basis == "add_rate"

    def test_rpo_messages_upper_bound_noted(self):
        r = lag.rpo_estimate(10, 5.0)
        assert r.messages == 10.0 and any("upper bound" in n for n in r.notes)

    def test_rpo_disconnected_uses_cut_duration(self):
        r = lag.rpo_estimate(120_000, 2000.0, connected=False, disconnected_for=75.0)
        assert r.seconds == pytest.approx(75.0) and r.basis == "disconnected"

    def test_rpo_falls_back_to_plausible_age_then_unknown(self):
        assert lag.rpo_estimate(3, 0.0, first_age_seconds=1.5).seconds == 1.5
        r = lag.rpo_estimate(3, None, None)
        assert r.seconds is None and r.notes

    def test_rpo_unknown_backlog(self):
        r = lag.rpo_estimate(None, 10.0)
        assert r.events is None and r.messages is None and r.seconds is None

    def test_rto_measured_assumed_unknown(self):
        r = lag.rto_estimate(120_000, 50_000.0, overhead_seconds=8.0)
        assert r.drain_seconds == pytest.approx(2.4) and r.seconds == pytest.approx(10.4) and r.basis == "measured"
        r = lag.rto_estimate(40_000, 0.0, 8.0, assumed_drain_rate=20_000.0)
        assert r.seconds == pytest.approx(10.0) and r.basis == "assumed"
        r = lag.rto_estimate(40_000, None, 8.0)
        assert r.seconds is None and r.overhead_seconds == 8.0
        assert lag.rto_estimate(0, None, 3.0).seconds == 3.0

    def test_site_loss_rto_has_no_drain(self):
        r = lag.site_loss_rto_estimate(6.0, 8.0)
        assert r.seconds == 14.0 and r.drain_seconds == 0.0 and r.basis == "site-loss" and not r.notes
        r = lag.site_loss_rto_estimate(None, 8.0)
        assert r.seconds == 8.0 and r.notes

    def test_send_share_clamped(self):
        assert lag.send_share(3000.0, 2000.0) == 1.0
        assert lag.send_share(None, 2000.0) is None
        assert lag.send_share(10.0, 0.0) is None

    @pytest.mark.parametrize("consumers,batch,expected", [(3, 10, 27), (1, 1, 0), (0, 50, 0), (2, 2, 2)])
    def test_ack_widening(self, consumers, batch, expected):
        assert lag.ack_widening(consumers, batch) == expected


class TestCompareQueues:
    def test_equal_sites_ignore_mirror_and_management_queues(self):
        local = {"orders": 5, "$ACTIVEMQ_ARTEMIS_MIRROR_DC2": 40, "activemq.management.x": 1, "DLQ": 0}
        peer = {"orders": 5, "DLQ": 0}
        c = lag.compare_queues(local, peer)
        assert c.equal and c.compared == 2 and c.excluded == 2 and c.diffs == []

    def test_differences_and_missing_queues(self):
        local = {"orders": 1, "only.here": 0, "same": 3}
        peer = {"orders": 0, "only.there": 2, "same": 3}
        c = lag.compare_queues(local, peer)
        assert not c.equal
        assert c.diff_count == 3
        by = {d["queue"]: d for d in c.diffs}
        assert by["orders"] == {"queue": "orders", "local": 1, "peer": 0, "delta": 1}
        assert by["only.here"]["peer"] is None and by["only.there"]["local"] is None
        assert c.only_local == ["only.here"] and c.only_peer == ["only.there"]
        assert c.as_dict()["diff_count"] == 3

    def test_tolerance_and_dict_entries(self):
        local = {"a": {"message_count": "12", "address": "a"}, "b": {"MessageCount": 1, "InternalQueue": True}}
        peer = {"a": {"message_count": 10}, "b": {"MessageCount": 9}}
        assert lag.compare_queues(local, peer, tolerance=2).equal
        assert not lag.compare_queues(local, peer, tolerance=1).equal

    def test_address_filter_and_include(self):
        local = {"orders.a": 1, "orders.tmp.x": 5, "audit": 7}
        peer = {"orders.a": 1, "orders.tmp.x": 0, "audit": 0}
        c = lag.compare_queues(local, peer, address_filter="orders.,!orders.tmp")
        assert c.equal and c.compared == 1
        c = lag.compare_queues(local, peer, include=["audit"])
        assert not c.equal and c.compared == 1

    @pytest.mark.parametrize(
        "address,flt,expected",
        [("x", None, True), ("orders.1", "orders.", True), ("audit", "orders.", False),
         ("orders.tmp.1", "orders.,!orders.tmp", False), ("audit", "!orders.tmp", True)],
    )
    def test_address_mirrored(self, address, flt, expected):
        assert lag.address_mirrored(address, flt) is expected

    def test_snf_names(self):
        assert lag.snf_queue_name("DC2") == "$ACTIVEMQ_ARTEMIS_MIRROR_DC2"
        assert lag.mirror_connection_of("$ACTIVEMQ_ARTEMIS_MIRROR_DC2") == "DC2"
        assert lag.mirror_connection_of("orders") is None


class TestAssess:
    def test_steady_state_in_sync(self):
        a = lag.assess(snf(0.0, 0, 9, 9), snf(1.0, 0, 9, 9), connected=True, started=True, pending_acks=0)
        assert a["backlog"] == 0 and a["lag_seconds"] == 0.0 and a["rpo_seconds_est"] == 0.0
        assert a["add_rate"] == 0.0 and a["queue_diff_count"] is None

    def test_outage_never_reports_epoch_age_as_lag(self):
        prev = snf(100.0, 3000, 10_000, 7000)
        cur = snf(101.0, 5000, 12_000, 7000, first_message_age_ms=NOW_MS, first_message_timestamp_ms=0)
        a = lag.assess(prev, cur, connected=False, started=True, disconnected_for=30.0, assumed_drain_rate=20_000.0)
        assert a["lag_seconds"] is None
        assert a["first_message_age_seconds"] is None
        assert a["rpo_seconds_est"] == pytest.approx(30.0)
        assert a["rto_seconds_est"] == pytest.approx(0.25)
        assert any("disconnected" in n for n in a["notes"])
        assert any("FirstMessageAge ignored" in n for n in a["notes"])

    def test_draining(self):
        a = lag.assess(snf(0.0, 10_000, 50_000, 40_000), snf(1.0, 5_000, 51_000, 46_000), connected=True,
                       overhead_seconds=2.0)
        assert a["drain_rate"] == 6000.0 and a["lag_seconds"] == pytest.approx(5000 / 6000)  # FIFO lag
        assert a["rto_seconds_est"] == pytest.approx(5000 / 6000 + 2.0)

    def test_no_snf_reading(self):
        a = lag.assess(None, None, connected=True)
        assert a["backlog"] is None and a["lag_seconds"] is None and a["rpo_events_est"] is None
        assert any("2.32" in n for n in a["notes"])

    def test_comparison_fields(self):
        cmp = lag.compare_queues({"q": 1}, {"q": 0})
        a = lag.assess(None, snf(0.0, 0, 0, 0), comparison=cmp, consumers=2, ack_batch=5)
        assert a["queue_diff_count"] == 1 and a["queue_diffs"][0]["queue"] == "q"
        assert a["duplicates_at_risk"] == 8
