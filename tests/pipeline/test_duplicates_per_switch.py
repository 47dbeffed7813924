"""Issue 17: the pipeline compares the continuity plugin's duplicates-at-risk estimate (the old site's last lag
sample before a switch) with the duplicates the ledgers show for that switch, in summary.json, the switches table
and the report.

The evidence is written here record by record with the collection's evidence builders, so every expected number
is counted from the records themselves: a failover from dc1 to dc2 that delivers a known set of messages twice,
then a swapover back to dc1 that does the same with another set, and duplicates that belong to no switch.
"""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import evidence as ev

T0 = 1_767_225_600.0
RATE = 100  # messages per second, one producer
INTERVAL = 1.0  # lag sample interval (s)


class Run:
    """One run's records and what the test expects, counted from the records."""

    def __init__(self, run_id: str, estimate_failover: float | None, estimate_swapover: float | None):
        self.rid = run_id
        self.sent: list[dict] = []
        self.received: list[dict] = []
        self.small: list[dict] = []
        self.seq = 0
        self.estimate = {"failover": estimate_failover, "swapover": estimate_swapover}
        self.fail_at, self.swap_at = T0 + 10.0, T0 + 20.0

    def send(self, site: str, ts: float) -> str:
        mid = f"{self.rid}:p0:{self.seq}"
        self.sent.append(ev.sent_record(self.rid, "p0", self.seq, mid, "orders", site, ts, ts + 0.002, "accepted",
                                        ts=ts + 0.002))
        self.seq += 1
        return mid

    def receive(self, mid: str, site: str, ts: float, delivery_count: int = 0, ack: bool = True) -> None:
        seq = int(mid.rsplit(":", 1)[1])
        self.received.append(ev.received_record(self.rid, "c0", mid, "orders", site, ts, ts + 0.001 if ack else None,
                                                delivery_count, producer="p0", seq=seq, ts=ts))

    def build(self) -> None:
        # 0-10 s: dc1 active, each message received 5 ms after its send
        before_failover = []
        for k in range(10 * RATE):
            t = T0 + k / RATE
            mid = self.send("dc1", t)
            self.receive(mid, "dc1", t + 0.005, ack=k < 10 * RATE - 40)  # the last 40: in an unacked batch
            before_failover.append(mid)
        # a broker redelivery on dc1 long before the failover: a duplicate of no switch
        self.receive(before_failover[100], "dc1", T0 + 1.2, delivery_count=1)
        # failover at 10 s: 30 of the last unacked messages come again from dc2 as fresh deliveries, 2 more as
        # redeliveries (dc2 had handed them out once already)
        for mid in before_failover[-32:-2]:
            self.receive(mid, "dc2", self.fail_at + 2.0)
        for mid in before_failover[-2:]:
            self.receive(mid, "dc2", self.fail_at + 2.1, delivery_count=1)
        # 12-20 s: dc2 active
        before_swapover = []
        for k in range(8 * RATE):
            t = self.fail_at + 2.0 + k / RATE
            mid = self.send("dc2", t)
            self.receive(mid, "dc2", t + 0.005)
            before_swapover.append(mid)
        # received twice on dc2 between the switches: a duplicate of no switch
        self.receive(before_swapover[50], "dc2", self.fail_at + 3.0)
        # swapover back to dc1 at 20 s: 5 messages received on dc2 before it come again from dc1 after it
        for mid in before_swapover[-5:]:
            self.receive(mid, "dc1", self.swap_at + 1.5)
        for k in range(2 * RATE):
            t = self.swap_at + 1.0 + k / RATE
            self.receive(self.send("dc1", t), "dc1", t + 0.005)

        self.small.append(ev.run_record(self.rid, "start", "drill", params={"consumers": 1, "ack_batch": 40},
                                        ts=T0 - 1.0))
        self.small.append(ev.incident_record(self.rid, "dc1", "dc2", self.fail_at, detected_ts=self.fail_at + 0.5,
                                             ts=self.fail_at + 0.5))
        for name, a, b, after in (("preflight", 0.0, 0.2, None), ("activate", 0.5, 0.9, {"dc1": "active",
                                                                                       "dc2": "passive"})):
            self.small.append(ev.phase_record(self.rid, "swapover", name, self.swap_at + a, self.swap_at + b, "done",
                                              roles_before={"dc1": "passive", "dc2": "active"}, roles_after=after,
                                              ts=self.swap_at + b))
        self.small.append(ev.run_record(self.rid, "end", "drill", outcome="pass", ts=self.swap_at + 5.0))
        # lag samples every INTERVAL s, both directions; dc1 is down from the failover until the swapover
        for j in range(int(25 / INTERVAL)):
            ts = T0 + 0.5 + j * INTERVAL
            for site, peer in (("dc1", "dc2"), ("dc2", "dc1")):
                where = {"peer": peer, "connection": f"to-{peer}", "ts": ts}
                if site == "dc1" and self.fail_at <= ts < self.swap_at:
                    self.small.append(ev.lag_sample_record(self.rid, "agent", site, False, role="unreachable",
                                                           **where))
                    continue
                # the estimate of the old site's last sample before each switch; earlier samples say otherwise
                last_before = ((site == "dc1" and ts < self.fail_at <= ts + INTERVAL)
                               or (site == "dc2" and ts < self.swap_at <= ts + INTERVAL))
                which = "failover" if site == "dc1" else "swapover"
                estimate = self.estimate[which] if last_before else (None if self.estimate[which] is None else 7.0)
                self.small.append(ev.lag_sample_record(
                    self.rid, "agent", site, True, started=True, connected=True, backlog=3, add_rate=200.0,
                    drain_rate=200.0, role="active", duplicates_at_risk_est=estimate,
                    replication_latency_p99_seconds=None if estimate is None else 0.015, **where))
        for led, writer, recs in (("sent", "p0", self.sent), ("received", "c0", self.received)):
            self.small.append(ev.ledger_end_record(self.rid, led, writer, len(recs), True, ts=self.swap_at + 6.0))

    def write(self, root) -> None:
        d = root / self.rid
        d.mkdir(parents=True)
        for name, recs in (("sent-p0", self.sent), ("received-c0", self.received), ("drill", self.small)):
            (d / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))

    # ----- expectations counted from the records (not from the parameters above)
    def deliveries(self, site: str, start: float) -> float:
        """Received records on ``site`` in the 10 s before ``start``, per second."""
        return sum(1 for r in self.received if r["site"] == site and start - 10.0 <= r["recv_ts"] < start) / 10.0

    def across(self, old_site: str, start: float, previous: float) -> tuple[int, int]:
        """Messages first received on ``old_site`` in [previous, start) and received again after ``start``:
        (all of them, those whose deliveries were fresh at least twice)."""
        by_msg: dict[str, list[dict]] = {}
        for r in self.received:
            by_msg.setdefault(r["msg_id"], []).append(r)
        total = distinct = 0
        for recs in by_msg.values():
            recs.sort(key=lambda r: r["recv_ts"])
            if (len(recs) > 1 and recs[0]["site"] == old_site and previous <= recs[0]["recv_ts"] < start
                    and recs[-1]["recv_ts"] >= start):
                total += 1
                distinct += sum(1 for r in recs if r["delivery_count"] == 0) > 1
        return total, distinct


@pytest.fixture(scope="module")
def duplicates_result(spark, tmp_path_factory):
    from continuity_pipeline import jobs

    root = tmp_path_factory.mktemp("dup-evidence")
    runs = {"dup-close": Run("dup-close", 31.5, 4.0), "dup-far": Run("dup-far", 300.0, 4.0),
            "dup-noplugin": Run("dup-noplugin", None, None)}
    for r in runs.values():
        r.build()
        r.write(root)
    out = tmp_path_factory.mktemp("dup-out")
    result = jobs.run_pipeline(spark, [str(root)], str(out), {}, jobs.Progress(quiet=True))
    return out, result, runs


def _switch(result: dict, run_id: str, kind: str) -> dict:
    return next(s for s in result["switches"] if s["run_id"] == run_id and s["kind"] == kind)


def test_each_switch_gets_the_duplicates_it_delivered_and_the_estimate_before_it(duplicates_result):
    out, _result, runs = duplicates_result
    summary = json.loads((out / "summary.json").read_text())
    for rid, run in runs.items():
        fo, sw = _switch(summary, rid, "failover"), _switch(summary, rid, "swapover")
        total, distinct = run.across("dc1", run.fail_at, float("-inf"))
        assert total == 32 and distinct == 30  # the construction above, seen from the records
        assert (fo["duplicates_observed"], fo["duplicates_observed_distinct"],
                fo["duplicates_observed_redelivery"]) == (total, distinct, total - distinct), fo
        assert (sw["duplicates_observed"], sw["duplicates_observed_distinct"]) == run.across(
            "dc2", run.swap_at, run.fail_at), sw
        # the run counts every duplicate; the two that no switch delivered stay out of the switches' figures
        whole = next(r for r in summary["runs"] if r["run_id"] == rid)
        assert whole["duplicated"] == fo["duplicates_observed"] + sw["duplicates_observed"] + 2
        # the estimate is the old site's last reachable sample before the switch, not an earlier one
        assert fo["duplicates_at_risk_estimated"] == run.estimate["failover"]
        assert sw["duplicates_at_risk_estimated"] == run.estimate["swapover"]
        assert fo["sample_interval_seconds"] == pytest.approx(INTERVAL)
        assert fo["client_receive_rate"] == pytest.approx(run.deliveries("dc1", run.fail_at))
        assert sw["client_receive_rate"] == pytest.approx(run.deliveries("dc2", run.swap_at))
        assert fo["duplicates_at_risk_ack_batching"] is not None  # the params-based bound is kept apart
        assert "duplicates_at_risk" not in fo


def test_the_judgement_allows_one_sample_interval_of_traffic(duplicates_result):
    out, _result, runs = duplicates_result
    summary = json.loads((out / "summary.json").read_text())
    close = _switch(summary, "dup-close", "failover")
    tolerance = INTERVAL * runs["dup-close"].deliveries("dc1", runs["dup-close"].fail_at)
    assert close["duplicates_tolerance_messages"] == pytest.approx(tolerance)
    assert close["duplicates_error"] == pytest.approx(31.5 - 32)
    assert close["duplicates_within_tolerance"] is True and "within one sample interval" in close[
        "duplicates_judgement"]
    far = _switch(summary, "dup-far", "failover")
    assert 300.0 - 32 > far["duplicates_tolerance_messages"]
    assert far["duplicates_within_tolerance"] is False and "pessimistic" in far["duplicates_judgement"]
    assert _switch(summary, "dup-far", "swapover")["duplicates_within_tolerance"] is True
    none = _switch(summary, "dup-noplugin", "failover")
    assert none["duplicates_at_risk_estimated"] is None and none["duplicates_within_tolerance"] is None
    assert none["duplicates_observed"] == 32 and "no continuity plugin on dc1" in none["duplicates_judgement"]


def test_switches_table_lag_table_and_report_show_the_comparison(spark, duplicates_result):
    out, _result, _runs = duplicates_result
    rows = {(r["run_id"], r["kind"]): r for r in spark.read.parquet(str(out / "tables" / "switches")).collect()}
    close = rows[("dup-close", "failover")]
    assert (close["duplicates_at_risk_estimated"], close["duplicates_observed"]) == (31.5, 32)
    assert close["duplicates_within_tolerance"] is True
    lag = spark.read.parquet(str(out / "tables" / "lag_samples"))
    assert {"duplicates_at_risk_est", "replication_latency_p99_seconds"} <= set(lag.columns)
    html = (out / "report.html").read_text()
    # the comparison has a table of its own (the switches table of the first screen must fit 1,280 px)
    details = re.search(r"<table id='duplicates'.*?</table>", html, re.S).group(0)
    assert re.search(r"<td>32</td><td>31\.5</td>", details), details
    assert "within one sample interval" in details and "pessimistic" in details
