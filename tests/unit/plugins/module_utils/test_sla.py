"""The one SLA rule (module_utils/sla.py), the status runbook's sla_check filter, and the agent, the pipeline and
status.yml agreeing on it (issue 19)."""

from __future__ import annotations

import math

import pytest

from ansible_collections.continuity.artemis.plugins.filter.continuity import FilterModule
from ansible_collections.continuity.artemis.plugins.module_utils import sla
from ansible_collections.continuity.artemis.plugins.module_utils.status_report import sla_check


@pytest.mark.parametrize("value,target,verdict", [
    (1.0, 5, sla.PASS), (5, 5.0, sla.PASS), (5.01, 5, sla.FAIL), (math.inf, 5, sla.FAIL),
    (None, 5, sla.UNKNOWN), (math.nan, 5, sla.UNKNOWN), ("1", 5, sla.UNKNOWN), (True, 5, sla.UNKNOWN),
    (None, None, sla.NOT_JUDGED), (100, None, sla.NOT_JUDGED), (0, 0, sla.PASS),
])
def test_judge(value, target, verdict):
    assert sla.judge(value, target) == verdict


def test_unknown_is_a_breach_and_not_judged_is_not():
    assert [sla.breached(v) for v in (sla.PASS, sla.FAIL, sla.UNKNOWN, sla.NOT_JUDGED)] == [False, True, True, False]
    assert sla.overall([sla.PASS, sla.UNKNOWN]) == sla.FAIL
    assert sla.overall([sla.PASS, sla.NOT_JUDGED]) == sla.PASS
    assert sla.overall([sla.NOT_JUDGED]) == sla.overall([]) == sla.NO_TARGET


def test_judge_all_and_not_applicable():
    got = sla.judge_all({"a": 1, "b": None}, {"a": 2, "b": 2, "c": None}, not_applicable=("a",))
    assert got == {"a": sla.NOT_JUDGED, "b": sla.UNKNOWN, "c": sla.NOT_JUDGED}


def test_direction_verdicts_leave_live_only_targets_out_on_an_unread_site():
    targets = {"rpo_seconds": 5, "lag_seconds": 5, "rto_seconds": 30, "pending_acks": 10, "backlog": 100,
               "not_a_target": 1}
    d = {"backlog": 10, "rpo_seconds_est": 1.0, "lag_seconds": None, "rto_seconds_est": 31.0, "pending_acks": 2}
    assert sla.direction_verdicts(d, targets) == {"rpo_seconds": sla.PASS, "lag_seconds": sla.UNKNOWN,
                                                  "rto_seconds": sla.FAIL, "pending_acks": sla.PASS,
                                                  "backlog": sla.PASS}
    for unread in ({**d, "reachable": False}, {**d, "stale": True}):
        got = sla.direction_verdicts(unread, targets)
        assert {k for k, v in got.items() if v == sla.NOT_JUDGED} == set(sla.LIVE_ONLY)
        assert got["rpo_seconds"] == sla.PASS and got["backlog"] == sla.PASS


def _d(site, peer, **kw):
    return {"site": site, "peer": peer, "reachable": True, "backlog": 0, "lag_seconds": 0.0, "rpo_seconds_est": 0.0,
            **kw}


def test_sla_check_texts_and_unknown_values():
    ok = [_d("dc1", "dc2", backlog=12, lag_seconds=0.25), _d("dc2", "dc1")]
    assert sla_check(ok, "backlog", 100) == {"name": "backlog", "ok": True, "detail": "max backlog 12 events <= 100"}
    assert sla_check(ok, "lag_seconds", "5", name="lag") == {"name": "lag", "ok": True,
                                                             "detail": "max lag 0.25 s <= 5 s"}
    assert sla_check(ok, "lag_seconds", 0.1)["ok"] is False
    # an RPO nobody measured was counted as 0 by status.yml's Jinja: now it is a breach naming the direction
    unknown = [_d("dc1", "dc2", rpo_seconds_est=None), _d("dc2", "dc1")]
    assert sla_check(unknown, "rpo_seconds", 5, name="rpo") == {
        "name": "rpo", "ok": False, "detail": "RPO at risk unknown (not measured for dc1 -> dc2) <= 5 s"}
    # an unreadable site: its RPO/backlog are unknown (a breach), its lag is not judged (reachable says why)
    lost = [{"site": "dc1", "peer": "dc2", "reachable": False, "error": "refused"}, _d("dc2", "dc1")]
    assert sla_check(lost, "rpo_seconds", 5)["ok"] is False and sla_check(lost, "backlog", 5)["ok"] is False
    assert sla_check(lost, "lag_seconds", 5) == {"name": "lag_seconds", "ok": True, "detail": "max lag 0.0 s <= 5 s"}
    assert sla_check(lost[:1], "lag_seconds", 5)["detail"] == "max lag not judged (no mirror read now) <= 5 s"
    assert sla_check(unknown, "rpo_seconds", None) == {"name": "rpo_seconds", "ok": True,
                                                       "detail": "RPO at risk not judged: no target"}
    with pytest.raises(ValueError, match="unknown SLA target"):
        sla_check(ok, "rpo_minutes", 1)
    assert FilterModule().filters()["sla_check"] is sla_check


CASES = [
    # (rpo_seconds, rpo_messages, rto_seconds) values, with targets 5 s, 100 messages, 60 s
    (1.0, 10.0, 30.0),
    (1.0, None, 30.0),      # one value unknown
    (6.0, 10.0, 30.0),      # one value above its target
    (None, None, None),     # nothing measured
]


@pytest.mark.parametrize("values", CASES)
def test_agent_pipeline_and_status_filter_give_the_same_verdict(values):
    """The same values and targets judged by the agent (estimates of a direction), the pipeline (observations of
    a run) and status.yml's sla_check filter: the same breaches, an unknown value included."""
    from continuity_agent import model
    from continuity_agent.config import SlaSettings
    from continuity_pipeline import analysis

    rpo_s, rpo_m, rto = values
    targets = {"rpo_seconds": 5.0, "rpo_messages": 100.0, "rto_seconds": 60.0}
    direction = _d("dc1", "dc2", backlog=10, rpo_seconds_est=rpo_s, rpo_messages_est=rpo_m, rto_seconds_est=rto)

    agent = model.sla_breaches(direction, SlaSettings(**targets))
    checks = analysis.verdict({"rpo_seconds_observed": rpo_s, "rpo_messages_observed": rpo_m,
                               "rto_seconds_observed": rto}, targets)
    pipeline = {t: checks[t] in ("FAIL", "UNKNOWN") for t in targets}
    status = {t: not sla_check([direction], t, limit)["ok"] for t, limit in targets.items()}

    expected = {t: v is None or v > targets[t] for t, v in zip(targets, values, strict=True)}
    assert agent == pipeline == status == expected
    assert (checks["overall"] == "FAIL") == any(expected.values())
