"""Pure parts (no JVM): explanations, switches, verdicts, ledger truncation, Prometheus text, generator."""

from __future__ import annotations

import glob
import json

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import lag
from continuity_pipeline import analysis, outputs, validate
from continuity_pipeline.generate import GenerateError, GenParams, generate


def test_explain_names_the_field():
    assert validate.explain('{"seq": "x"}') == 'seq must be an integer, got "x"'
    assert validate.explain("{oops").startswith("not valid JSON")
    assert validate.explain("[1]").startswith("not a JSON object")


def test_switches_from_phases_ignore_rollbacks():
    phases = [
        {"run_id": "r", "runbook": "swapover", "phase": "preflight", "start_ts": 1.0, "end_ts": 2.0,
         "roles_before": {"dc1": "active", "dc2": "passive"}, "roles_after": None},
        {"run_id": "r", "runbook": "swapover", "phase": "activate", "start_ts": 2.0, "end_ts": 3.0,
         "roles_before": None, "roles_after": {"dc1": "passive", "dc2": "active"}},
        # second execution that rolled back: roles unchanged -> not a switch
        {"run_id": "r", "runbook": "swapover", "phase": "preflight", "start_ts": 10.0, "end_ts": 11.0,
         "roles_before": {"dc1": "passive", "dc2": "active"}, "roles_after": {"dc1": "passive", "dc2": "active"}},
    ]
    sw = analysis.switches(phases, [])
    assert [(s["switch_id"], s["start_ts"], s["old_site"], s["new_site"]) for s in sw] == [
        ("swapover#1", 1.0, "dc1", "dc2")]
    assert [p["execution"] for p in analysis.phase_executions(phases)] == [1, 1, 2]


def test_verdict_rules():
    obs = {"rpo_messages_observed": 3, "rpo_seconds_observed": 0.5, "rto_seconds_observed": None}
    # a target whose value nobody observed cannot be proven met: UNKNOWN, and the run fails (issue 19)
    assert analysis.verdict(obs, {"rpo_messages": 5, "rpo_seconds": None, "rto_seconds": 1.0}) == {
        "overall": "FAIL", "rpo_messages": "PASS", "rpo_seconds": "n/a", "rto_seconds": "UNKNOWN"}
    # a target that does not apply (the RTO of a run without a switch) is not judged
    assert analysis.verdict(obs, {"rpo_messages": 5, "rto_seconds": 1.0}, ("rto_seconds",)) == {
        "overall": "PASS", "rpo_messages": "PASS", "rpo_seconds": "n/a", "rto_seconds": "n/a"}
    assert analysis.verdict({**obs, "rto_seconds_observed": 1.5}, {"rto_seconds": 1.0})["rto_seconds"] == "FAIL"
    assert analysis.verdict(obs, {"rpo_messages": 2})["overall"] == "FAIL"
    assert analysis.verdict(obs, {})["overall"] == "NO-TARGET"
    assert analysis.targets_for({"targets": {"rpo_seconds": 9.0}}, {"rpo_seconds": 1.0})["rpo_seconds"] == 1.0


def test_truncated_ledgers():
    writers = [{"run_id": "r", "ledger": "sent", "writer": "p0", "records": 5, "last_ts": 1.0},
               {"run_id": "r", "ledger": "sent", "writer": "p1", "records": 5, "last_ts": 1.0},
               {"run_id": "r", "ledger": "received", "writer": "c0", "records": 4, "last_ts": 1.0}]
    ends = [{"run_id": "r", "ledger": "sent", "writer": "p0", "records": 5, "clean": True},
            {"run_id": "r", "ledger": "received", "writer": "c0", "records": 6, "clean": True}]
    got = {(t["writer"], t["problem"].split(":")[0]) for t in analysis.truncated_ledgers(writers, ends)}
    assert got == {("p1", "no ledger_end record"), ("c0", "ledger_end says 6 records, 4 were read")}


def test_estimates_use_the_shared_lag_model():
    sample = {"ts": 1.0, "backlog": 100, "add_rate": 2000.0, "drain_rate": 2100.0, "connected": True}
    est = analysis.estimates({}, sample, 1000.0, {"params": json.dumps({"rto_overhead_seconds": 0.3})})
    assert est["rpo_messages_estimated"] == pytest.approx(50.0)  # half of the events are sends
    assert est["rpo_seconds_estimated"] == pytest.approx(0.05)
    assert est["rto_seconds_estimated"] == pytest.approx(100 / 2100.0 + 0.3)


def test_failover_rto_estimate_is_detection_plus_overhead_without_drain():
    sample = {"ts": 1.0, "backlog": 50_000, "add_rate": 2000.0, "drain_rate": 0.0, "connected": False}
    params = {"rto_overhead_seconds": {"swapover": 1.0, "failover": "8.0"}, "loss_probes": "3",
              "loss_probe_interval": 2.0}
    est = analysis.estimates({"kind": "failover"}, sample, 1000.0, {"params": json.dumps(params)})
    assert est["rto_basis"] == "site-loss" and est["rto_overhead_basis"] == "params"
    assert est["rto_seconds_estimated"] == pytest.approx(3 * 2.0 + 8.0)  # the 50k backlog is RPO, not waiting
    assert est["rto_drain_seconds"] == 0.0
    # earlier failovers in the evidence replace the parameters (their observed overhead includes detection)
    # (the largest of the newest three: rto_overhead.overhead_estimate)
    est = analysis.estimates({"kind": "failover"}, sample, 1000.0, {"params": json.dumps(params)},
                             [90.0, 15.0, 17.0, 40.0])
    assert est["rto_seconds_estimated"] == pytest.approx(40.0) and est["rto_overhead_basis"] == "history"
    # without a sample the failover estimate still stands (it needs no backlog)
    est = analysis.estimates({"kind": "failover"}, None, None, {"params": json.dumps(params)})
    assert est["rto_seconds_estimated"] == pytest.approx(14.0) and est["rpo_messages_estimated"] is None


def test_duplicates_at_risk_estimates_of_a_switch():
    """The plugin's estimate comes from the old site's last sample (null without the plugin), the ack-batching
    bound from the run parameters, the sample interval from the sample before it."""
    params = {"params": json.dumps({"consumers": 2, "ack_batch": 50})}
    sample = {"ts": 100.5, "prev_ts": 99.5, "backlog": 10, "add_rate": 400.0, "drain_rate": 400.0,
              "connected": True, "duplicates_at_risk_est": 90.25, "replication_latency_p99_seconds": 0.012}
    est = analysis.estimates({"kind": "failover"}, sample, 200.0, params)
    assert est["duplicates_at_risk_estimated"] == 90.25
    assert est["duplicates_at_risk_ack_batching"] == lag.ack_widening(2, 50)
    assert est["replication_latency_p99_seconds"] == 0.012 and est["sample_interval_seconds"] == 1.0
    # a sample without the plugin, and the first sample of a site (no interval)
    est = analysis.estimates({"kind": "failover"}, {"ts": 5.0, "prev_ts": None, "backlog": 0}, None, None)
    assert est["duplicates_at_risk_estimated"] is None and est["sample_interval_seconds"] is None
    assert est["duplicates_at_risk_ack_batching"] is None  # no run parameters
    assert analysis.estimates({"kind": "failover"}, None, None, params)["duplicates_at_risk_estimated"] is None


@pytest.mark.parametrize(("args", "within", "tolerance", "words"), [
    ((90.25, 91, 1.0, 200.0), True, 200.0, "within one sample interval's traffic: 1.00 s x 200.0 msg/s = 200"),
    ((90.0, 291, 1.0, 200.0), False, 200.0, "outside one sample interval's traffic"),  # off by 201 > 200
    ((90.0, 290, 1.0, 200.0), True, 200.0, "within"),  # exactly one interval's traffic still passes
    ((400.0, 10, 2.0, 50.0), False, 100.0, "pessimistic"),
    ((0.0, 30, 0.5, 40.0), False, 20.0, "optimistic"),
    ((0.0, 0, 1.0, 0.0), True, 0.0, "within"),  # nothing delivered, nothing at risk, nothing duplicated
    ((5.0, 5, None, 200.0), None, None, "no earlier lag sample"),
    ((5.0, 5, 1.0, None), None, None, "no delivery rate"),
    ((None, 12, 1.0, 200.0), None, 200.0, "no continuity plugin on dc1"),
    ((12.0, None, 1.0, 200.0), None, 200.0, "no received ledger"),
])
def test_duplicates_check_judges_within_one_sample_interval_of_traffic(args, within, tolerance, words):
    check = analysis.duplicates_check(*args, old_site="dc1")
    assert check["duplicates_within_tolerance"] is within
    assert check["duplicates_tolerance_messages"] == (None if tolerance is None else pytest.approx(tolerance))
    est, obs = args[0], args[1]
    assert check["duplicates_error"] == (None if est is None or obs is None else pytest.approx(est - obs))
    assert words in check["duplicates_judgement"]


def test_duplicates_per_switch_from_the_small_aggregate():
    """A duplicated message belongs to the switch it was delivered across: first received on the switch's old
    site after the previous switch started, received again after this one started."""
    from continuity_pipeline import reconcile

    switches = [("r", "failover@105", 105.0, "dc2", "dc1"), ("r", "swapover#1", 100.0, "dc1", "dc2"),
                ("nolog", "swapover#1", 100.0, "dc1", "dc2")]
    dictionary = [{"site_c": 11, "site": "dc1"}, {"site_c": 22, "site": "dc2"}]
    zero = dict.fromkeys(reconcile.COUNT_COLUMNS, 0)

    def row(phase, site_c, redelivery, distinct, address_c=7):
        return {**zero, "run_id": "r", "address_c": address_c, "dup_phase": phase, "dup_site_c": site_c,
                "duplicated": redelivery + distinct, "duplicated_redelivery": redelivery,
                "duplicated_distinct": distinct, "received_records": 2 * (redelivery + distinct),
                **dict.fromkeys(("rpo_first_send_ts", "rpo_last_send_ts", "lost_first_send_ts", "lost_last_send_ts",
                                 "first_send_ts", "last_recv_ts"))}

    rows = [row(None, None, 0, 0) | {"received_records": 500},  # ordinary messages (and duplicates of no switch)
            row(0, 11, 2, 5),  # first received on dc1 before the swapover, again after it: the swapover's
            row(0, 22, 1, 0),  # before the swapover but first received on dc2, not its old site
            row(1, 22, 0, 3, address_c=8),  # between the starts on dc2, again after the failover: the failover's
            row(1, 22, 1, 0)]
    per = reconcile._duplicates_per_switch(rows, switches, dictionary)
    assert per[("r", "swapover#1")] == {"duplicates_observed": 7, "duplicates_observed_redelivery": 2,
                                        "duplicates_observed_distinct": 5}
    assert per[("r", "failover@105")] == {"duplicates_observed": 4, "duplicates_observed_redelivery": 1,
                                          "duplicates_observed_distinct": 3}
    # a run without received records: not observed (None), not zero
    assert per[("nolog", "swapover#1")]["duplicates_observed"] is None
    merged = {r["address_c"]: r for r in reconcile._merge_counts(rows)}
    assert merged[7]["duplicated"] == 9 and merged[8]["duplicated"] == 3 and "dup_phase" not in merged[7]


def test_runbook_overhead_sources():
    assert analysis.runbook_overhead({}, "swapover", [1.0, 3.0]) == (3.0, "history")
    assert analysis.runbook_overhead({}, "swapover", [9.0, 1.0, None, 3.0, 2.0]) == (3.0, "history")  # newest 3
    assert analysis.runbook_overhead({"rto_overhead_seconds": 0.5}, "swapover", [None]) == (0.5, "params")
    assert analysis.observed_overhead(2.5, {"rto_drain_seconds": 1.0}) == 1.5
    assert analysis.observed_overhead(None, {"rto_drain_seconds": 1.0}) is None
    assert analysis.runbook_overhead({"rto_overhead_seconds": 0.5}, "failback", None) == (0.5, "params")
    assert analysis.runbook_overhead({"rto_overhead_seconds": {"failover": 8}}, "swapover", []) == (None, "none")
    est = analysis.estimates({"kind": "swapover"}, {"backlog": 0, "drain_rate": None}, None, None)
    assert est["rto_seconds_estimated"] == 0.0 and any("no runbook overhead" in n for n in est["notes"])


def test_prometheus_text_is_well_formed():
    result = {"runs": [{"run_id": 'a"b', "lost": 2, "verdict": "FAIL", "duplicated_distinct": 1,
                        "duplicated_redelivery": 0}],
              "reconciliation": [{"run_id": "x", "address": "q", "lost": 2, "duplicated": 1}],
              "phases": [], "bad_input": {"errors": 0, "warnings": 1}}
    text = outputs.prometheus_text(result)
    assert 'continuity_run_lost_messages{run_id="a\\"b"} 2' in text
    assert 'continuity_run_sla_pass{run_id="a\\"b"} 0' in text
    assert "# TYPE continuity_bad_input_records gauge" in text


def test_generated_records_are_valid_evidence(tmp_path):
    from ansible_collections.continuity.artemis.plugins.module_utils import evidence

    truths = generate(GenParams(out=str(tmp_path), run_id="v", messages=3000, producers=2, consumers=2, lost=2,
                                duplicated=1, redelivered=1, reorder=1, in_doubt=2, late=1, failover_at=1.5,
                                seed=5, chunk=1000))
    problems = []
    for path in glob.glob(str(tmp_path / "v" / "*.jsonl")):
        with open(path) as fh:
            for number, line in enumerate(fh, 1):
                problems += [f"{path}:{number}: {p}" for p in evidence.validate(json.loads(line))]
    assert problems == []
    assert truths[0]["lost"] == 2 and truths[0]["sent_records"] == 3000


def test_generator_refuses_impossible_faults(tmp_path):
    with pytest.raises(GenerateError):
        generate(GenParams(out=str(tmp_path), messages=10, lost=20))


def test_per_switch_figures_from_the_writer_aggregate():
    from continuity_pipeline import reconcile

    switches = [("r", "swapover#1", 100.0, "dc1", "dc2"), ("r", "failover@105", 105.0, "dc2", "dc1")]

    def row(ledger, site, phase, mask, records, first, accepted=True):
        return {"run_id": "r", "ledger": ledger, "site": site, "_phase": phase, "_rate_mask": mask,
                "records": records, "first_ev_ts": first, "accepted": accepted}

    rows = [row("received", "dc2", 0, 0, 5, 90.0),  # before the first start: not a receive after it
            row("received", "dc2", 1, 0, 3, 100.4),  # between the starts, on the first switch's new site
            row("received", "dc1", 2, 0, 2, 106.0),  # after the second start, on its new site
            row("sent", "dc1", 0, 0b01, 40, 91.0),  # in the first switch's window only
            row("sent", "dc2", 1, 0b10, 30, 101.0),  # in the second switch's window (old site dc2)
            row("sent", "dc1", 0, 0b01, 7, 95.0, accepted=False),  # not confirmed: not a send
            row("received", "dc1", 0, 0b01, 25, 91.0),  # delivered on the first switch's old site in its window
            row("received", "dc2", 1, 0b10, 12, 101.0)]  # the second switch's old site dc2, in its window
    first, rate, deliveries = reconcile._per_switch(rows, switches)
    assert first == [{"run_id": "r", "switch_id": "failover@105", "first_recv_ts": 106.0},
                     {"run_id": "r", "switch_id": "swapover#1", "first_recv_ts": 100.4}]
    assert rate == [{"run_id": "r", "switch_id": "failover@105", "client_send_rate": 3.0},
                    {"run_id": "r", "switch_id": "swapover#1", "client_send_rate": 4.0}]
    # received records over the 10 s before each start on its old site (the 5 on dc2 before the first start are
    # outside both windows, the 3 on dc2 between the starts are outside the failover's)
    assert deliveries == [{"run_id": "r", "switch_id": "failover@105", "client_receive_rate": 1.2},
                          {"run_id": "r", "switch_id": "swapover#1", "client_receive_rate": 2.5}]


def test_a_switch_without_a_receive_before_the_next_has_no_first_receive():
    """A receive on the new site after the NEXT switch measures that switch, not this one (the agent made a 3,081 s
    RTO out of such a receive before issue 19's fix; the pipeline's window had the same gap)."""
    from continuity_pipeline import reconcile

    switches = [("r", "swapover#1", 100.0, "dc1", "dc2"), ("r", "swapover#2", 110.0, "dc2", "dc1"),
                ("r", "failover@120", 120.0, "dc1", "dc2")]
    rows = [{"run_id": "r", "ledger": "received", "site": "dc2", "_phase": 3, "_rate_mask": 0, "records": 4,
             "first_ev_ts": 121.0, "accepted": True}]
    first, _rate, _deliveries = reconcile._per_switch(rows, switches)
    assert first == [{"run_id": "r", "switch_id": "failover@120", "first_recv_ts": 121.0}]


def test_lost_messages_per_switch_and_merged_counts():
    from continuity_pipeline import reconcile

    switches = [("r", "failover@105", 105.0, "dc2", "dc1"), ("r", "swapover#1", 100.0, "dc1", "dc2")]
    dictionary = [{"site_c": 11, "site": "dc1"}, {"site_c": 22, "site": "dc2"}]
    zero = dict.fromkeys(reconcile.COUNT_COLUMNS, 0)

    def row(phase, site_c, lost, first, last, address_c=7):
        return {**zero, "run_id": "r", "address_c": address_c, "lost_phase": phase, "lost_site_c": site_c,
                "lost": lost, "sent_messages": lost, "lost_first_send_ts": first, "lost_last_send_ts": last,
                "rpo_first_send_ts": None, "rpo_last_send_ts": None, "first_send_ts": first, "last_recv_ts": None}

    rows = [row(None, None, 0, None, None) | {"sent_messages": 90, "first_send_ts": 50.0, "last_recv_ts": 120.0},
            row(0, 11, 3, 98.0, 99.5),  # before the swapover, accepted on its old site dc1
            row(0, 22, 1, 97.0, 97.0),  # before the swapover but on dc2: not the swapover's loss
            row(1, 22, 2, 103.0, 104.0, address_c=8),  # between the starts on dc2: the failover's
            row(2, 11, 4, 110.0, 111.0)]  # after the last switch: no switch's
    per = reconcile._lost_per_switch(rows, switches, dictionary)
    assert per[("r", "swapover#1")] == {"rpo_messages_observed": 3, "rpo_seconds_observed": 1.5}
    assert per[("r", "failover@105")] == {"rpo_messages_observed": 2, "rpo_seconds_observed": 1.0}
    merged = {r["address_c"]: r for r in reconcile._merge_counts(rows)}
    assert merged[7]["lost"] == 8 and merged[7]["sent_messages"] == 98 and merged[8]["lost"] == 2
    assert merged[7]["lost_first_send_ts"] == 97.0 and merged[7]["lost_last_send_ts"] == 111.0
    assert merged[7]["first_send_ts"] == 50.0 and merged[7]["last_recv_ts"] == 120.0
    assert "lost_phase" not in merged[7]


def test_failback_that_keeps_the_clients_on_the_survivor_is_not_a_switch():
    """After a failover to dc2, a failback that fences the returning dc1 (which restarts believing it is active)
    and starts it passive leaves the clients on dc2: no switch, no RTO. Moving them back is the next swapover."""
    incidents = [{"run_id": "r", "incident_ts": 5.0, "lost_site": "dc1", "survivor_site": "dc2"}]
    phases = [
        {"run_id": "r", "runbook": "failback", "phase": "fence-and-start", "start_ts": 20.0, "end_ts": 21.0,
         "roles_before": {"dc1": "active", "dc2": "passive"}, "roles_after": {"dc1": "passive", "dc2": "active"}},
        {"run_id": "r", "runbook": "swapover", "phase": "preflight", "start_ts": 30.0, "end_ts": 31.0,
         "roles_before": {"dc1": "passive", "dc2": "active"}, "roles_after": {"dc1": "active", "dc2": "passive"}},
    ]
    sw = analysis.switches(phases, incidents)
    assert [(s["switch_id"], s["old_site"], s["new_site"]) for s in sw] == [
        ("failover@5.000", "dc1", "dc2"), ("swapover#1", "dc2", "dc1")]


def test_report_verdict_banner_names_the_missed_targets():
    from continuity_pipeline import report

    runs = [{"run_id": "r1", "verdict": "FAIL", "checks": {"overall": "FAIL", "rpo_messages": "FAIL",
                                                           "rpo_seconds": "n/a", "rto_seconds": "FAIL"}},
            {"run_id": "r2", "verdict": "PASS", "checks": {"overall": "PASS", "rto_seconds": "PASS"}}]
    assert report._verdict_text({"verdict": "FAIL", "runs": runs, "switches": []}) == \
        "missed target(s) — r1: RPO in messages, RTO"
    unmeasured = [{"run_id": "r3", "verdict": "FAIL", "checks": {"overall": "FAIL", "rpo_seconds": "UNKNOWN",
                                                                "rto_seconds": "PASS"}}]
    assert report._verdict_text({"verdict": "FAIL", "runs": unmeasured, "switches": []}) == \
        "missed target(s) — r3: RPO in seconds (not measured)"
    assert report._verdict_text({"verdict": "PASS", "runs": runs[1:], "switches": [{}]}).startswith(
        "every run met its RPO and RTO targets")
