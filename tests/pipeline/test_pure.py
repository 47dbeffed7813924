"""Pure parts (no JVM): explanations, switches, verdicts, ledger truncation, Prometheus text, generator."""

from __future__ import annotations

import glob
import json

import pytest

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
    assert analysis.verdict(obs, {"rpo_messages": 5, "rpo_seconds": None, "rto_seconds": 1.0}) == {
        "overall": "PASS", "rpo_messages": "PASS", "rpo_seconds": "n/a", "rto_seconds": "n/a"}
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
