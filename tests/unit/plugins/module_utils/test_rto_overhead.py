"""Runbook executions and the RTO overhead (module_utils/rto_overhead.py), shared by the agent and the pipeline."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import rto_overhead as ro

A, P = "active", "passive"


def ph(run_id, runbook, phase, start, end=None, decision="pass", before=None, after=None):
    return {"run_id": run_id, "runbook": runbook, "phase": phase, "start_ts": start,
            "end_ts": start + 1.0 if end is None else end, "decision": decision,
            "roles_before": before, "roles_after": after}


def test_a_repeated_phase_name_starts_the_next_execution_per_run_and_runbook():
    phases = [ph("r", "swapover", "activate", 3.0), ph("r", "swapover", "preflight", 1.0),
              ph("r", "failover", "promote", 5.0), ph("r", "swapover", "preflight", 10.0),
              ph("q", "swapover", "preflight", 2.0), ph("r", "swapover", "drain", 1.0),
              {"run_id": "r", "runbook": "swapover", "phase": "x", "start_ts": None}]
    got = [(e["run_id"], e["runbook"], e["execution"], [p["phase"] for p in e["phases"]])
           for e in ro.executions(phases)]
    assert got == [("q", "swapover", 1, ["preflight"]),
                   ("r", "failover", 1, ["promote"]),
                   ("r", "swapover", 1, ["drain", "preflight", "activate"]),   # same start: by name
                   ("r", "swapover", 2, ["preflight"])]


def test_completed_and_sites_switched():
    e = {"phases": [ph("r", "swapover", "a", 1.0, before={"dc1": A, "dc2": P}),
                    ph("r", "swapover", "b", 2.0, after={"dc1": P, "dc2": A}),
                    ph("r", "swapover", "c", 3.0, after={"dc1": A, "dc2": A})]}   # two active: not known
    assert ro.completed(e) and ro.sites_switched(e) == ("dc1", "dc2")
    assert not ro.completed({"phases": [ph("r", "swapover", "a", 1.0, decision="rollback")]})
    unfinished = ph("r", "swapover", "a", 1.0)
    unfinished["end_ts"] = None
    assert not ro.completed({"phases": [unfinished]})
    assert ro.active_site({"dc1": P}) is None and ro.active_site(None) is None


def test_overhead_is_observed_rto_minus_drain_and_the_largest_of_the_newest_three():
    assert ro.switch_overhead(4.0, 2.5) == pytest.approx(1.5)
    assert ro.switch_overhead(1.0, 2.5) == 0.0          # drain over-estimated: never negative
    assert ro.switch_overhead(1.0, None) == 1.0
    assert ro.switch_overhead(None, 1.0) is None        # no receive on the new site: nothing observed
    assert ro.overhead_estimate([9.0, 1.0, 3.0, 2.0]) == 3.0   # 9.0 is older than the newest three
    assert ro.overhead_estimate([9.0, 1.0, None, 3.0, 2.0], recent=4) == 9.0
    assert ro.overhead_estimate([None]) is None and ro.overhead_estimate([]) is None
