"""Configuration validation (errors name the key) and the RTO overhead taken from rehearsal evidence."""

from __future__ import annotations

import json

import pytest
from conftest import base_config

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from continuity_agent import config, rto


def test_valid_yaml_and_json(tmp_path):
    import yaml

    y = tmp_path / "a.yml"
    y.write_text(yaml.safe_dump(base_config(listen={"address": "127.0.0.1", "port": 9999})))
    j = tmp_path / "a.json"
    j.write_text(json.dumps(base_config()))
    for path in (y, j):
        cfg = config.load(str(path))
        assert list(cfg.sites) == ["dc1", "dc2"]
        assert cfg.sites["dc1"].peer == "dc2" and cfg.sites["dc2"].peer == "dc1"   # two sites: the other one
        assert cfg.sites["dc1"].client_acceptors == ("amqp",)
        assert cfg.sla.targets() == {"rpo_seconds": 5.0, "rpo_messages": 100.0, "rto_seconds": 60.0,
                                     "lag_seconds": 5.0}
    assert config.load(str(y)).listen.port == 9999
    assert "secret" not in repr(config.load(str(j)))


@pytest.mark.parametrize("mutate,key", [
    (lambda c: c["sites"]["dc1"]["jolokia"].pop("url"), "sites.dc1.jolokia.url"),
    (lambda c: c["sites"]["dc1"]["jolokia"].pop("password"), "sites.dc1.jolokia.password"),
    (lambda c: c["sites"]["dc2"]["jolokia"].update(url="ftp://x"), "sites.dc2.jolokia.url"),
    (lambda c: c["sites"]["dc2"]["jolokia"].update(url="http://u:p@x/console/jolokia"), "sites.dc2.jolokia.url"),
    (lambda c: c["sites"]["dc1"].update(peer="dc9"), "sites.dc1.peer"),
    (lambda c: c["sites"]["dc1"].update(colour="red"), "sites.dc1.colour"),
    (lambda c: c["sites"]["dc1"].update(client_acceptors="amqp"), "sites.dc1.client_acceptors"),
    (lambda c: c.update(interval=0), "interval"),
    (lambda c: c.update(interval="5"), "interval"),
    (lambda c: c["sla"].update(rpo_seconds=-1), "sla.rpo_seconds"),
    (lambda c: c["sla"].update(rpo_minutes=1), "sla.rpo_minutes"),
    (lambda c: c.update(listen={"port": 70000}), "listen.port"),
    (lambda c: c.update(evidence={"run_id": "../x"}), "evidence.run_id"),
    (lambda c: c.update(rto={"overhead_seconds": "1s"}), "rto.overhead_seconds"),
    (lambda c: c.update(log_level="LOUD"), "log_level"),
    (lambda c: c.update(sites={}), "sites"),
])
def test_errors_name_the_key(mutate, key):
    cfg = base_config()
    cfg["sites"]["dc1"]["jolokia"]["password"] = "hunter2-secret"
    mutate(cfg)
    with pytest.raises(config.ConfigError) as err:
        config.parse(cfg)
    assert err.value.key == key
    assert str(err.value).startswith(key + ":")
    assert "hunter2" not in str(err.value)


def test_three_sites_need_peers():
    cfg = base_config()
    cfg["sites"]["dc3"] = dict(cfg["sites"]["dc2"])
    with pytest.raises(config.ConfigError, match=r"^sites\.dc1\.peer: required"):
        config.parse(cfg)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(config.ConfigError, match="cannot read"):
        config.load(str(tmp_path / "nope.yml"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(config.ConfigError, match="invalid JSON"):
        config.load(str(bad))


TO_DC2 = ({"dc1": "active", "dc2": "passive"}, {"dc1": "passive", "dc2": "active"})
TO_DC1 = (TO_DC2[1], TO_DC2[0])


def phase(run_id, name, start, end, decision="pass", roles=TO_DC2):
    """A swapover phase; the first phase of a run gives roles_before, every phase roles_after (as the runbook)."""
    return evidence.phase_record(run_id, "swapover", name, start, end, decision, roles_before=roles[0],
                                 roles_after=roles[1])


def lag(ts, backlog, drain_rate, site="dc1", connection="DC2"):
    return evidence.lag_sample_record("x", "runbook", site, True, ts=ts, backlog=backlog, drain_rate=drain_rate,
                                      connection=connection)


def received(run_id, site, ts):
    return evidence.received_record(run_id, "c0", f"m{ts}", "orders", site, ts, ts, 0)


def test_swapover_overhead_is_observed_rto_minus_drain():
    recs = [
        phase("r1", "quiesce", 100.0, 100.4), phase("r1", "drain", 100.4, 103.4), phase("r1", "activate", 103.4, 104.0),
        lag(99.0, 5000, 2000.0), lag(98.0, 1, 1.0), lag(99.5, 700, 1.0, site="dc2", connection="DC1"),
        received("r1", "dc1", 101.0), received("r1", "dc2", 104.5), received("r1", "dc2", 104.2),
        received("r1", "dc2", 106.0),
        phase("r2", "quiesce", 200.0, 200.2, roles=TO_DC1), phase("r2", "drain", 200.2, 200.7, roles=TO_DC1),
        phase("r2", "activate", 200.7, 201.0, roles=TO_DC1), received("r2", "dc1", 201.2),
        lag(120.0, 999, 1.0),                       # older than 60 s before r2: ignored
        phase("r3", "quiesce", 300.0, 300.1), phase("r3", "drain", 300.1, 301.0, decision="rollback"),
        phase("r4", "quiesce", 400.0, None),
        evidence.phase_record("r5", "failover", "promote", 500.0, 501.0, "pass"),
    ]
    runs = rto.swapover_runs(recs)
    assert [r.run_id for r in runs] == ["r1", "r2"]        # failed, unfinished and non-swapover runs skipped
    assert [(r.old_site, r.new_site) for r in runs] == [("dc1", "dc2"), ("dc2", "dc1")]
    # r1: first receive on dc2 at 104.2 (dc1's receive before it does not count): RTO 4.2; it started with 5000
    # events on dc1 draining at 2000/s (dc2's backlog is not what the swapover drains): 2.5 s of drain
    assert runs[0].rto_observed == pytest.approx(4.2) and runs[0].drain_seconds == pytest.approx(2.5)
    assert runs[0].overhead == pytest.approx(1.7)
    assert runs[0].duration == pytest.approx(4.0)      # the phase span is not the RTO
    # r2 had no recent lag sample: the whole RTO is overhead (the pessimistic side)
    assert runs[1].drain_seconds == 0.0 and runs[1].overhead == pytest.approx(1.2)
    assert rto.overhead_of(runs) == pytest.approx(1.7)


def test_a_swapover_without_a_receive_on_its_new_site_has_no_overhead():
    recs = [phase("a", "quiesce", 10.0, 10.5), phase("a", "activate", 10.5, 11.0),
            phase("b", "quiesce", 20.0, 20.5, roles=TO_DC1), phase("b", "activate", 20.5, 21.0, roles=TO_DC1),
            phase("c", "quiesce", 30.0, 30.5), phase("c", "activate", 30.5, 31.0),
            received("c", "dc2", 31.5)]   # c's first receive, not a's (another run)
    runs = rto.swapover_runs(recs)
    assert [r.rto_observed for r in runs] == [None, None, pytest.approx(1.5)]
    assert [r.overhead for r in runs][:2] == [None, None]
    assert rto.overhead_of(runs) == pytest.approx(1.5) and rto.overhead_of(runs[:2]) is None


def test_a_receive_of_another_run_or_after_the_next_switch_is_not_this_swapovers():
    """Seen on real evidence before the fix: a rehearsal whose swapover had no receive on its new site took the first
    receive on that site of a run 51 minutes later, an observed RTO (and an overhead) of 3,081 s."""
    recs = [phase("old", "quiesce", 10.0, 10.5), phase("old", "activate", 10.5, 11.0),
            received("new", "dc2", 3091.0),                                      # another run's traffic
            phase("drill", "quiesce", 5000.0, 5000.5), phase("drill", "activate", 5000.5, 5001.0),
            evidence.phase_record("drill", "failover", "activate", 5100.0, 5105.0, "done"),
            received("drill", "dc2", 5106.0)]                                    # after the next execution began
    runs = rto.swapover_runs(recs)
    assert [r.rto_observed for r in runs] == [None, None]
    assert rto.overhead_of(runs) is None


def test_several_swapovers_in_one_run_are_separate():
    recs = [phase("reh", "preflight", 10.0, 10.1), phase("reh", "drain", 10.1, 10.4),
            phase("reh", "activate", 10.4, 10.5), received("reh", "dc2", 10.7),
            evidence.phase_record("reh", "failover", "activate", 20.0, 25.0, "done"),
            phase("reh", "preflight", 90.0, 90.1, roles=TO_DC1), phase("reh", "drain", 90.1, 90.3, roles=TO_DC1),
            phase("reh", "activate", 90.3, 91.0, roles=TO_DC1), received("reh", "dc1", 91.2)]
    runs = rto.swapover_runs(recs)
    assert [r.run_id for r in runs] == ["reh", "reh#2"]
    assert [round(r.rto_observed, 3) for r in runs] == [0.7, 1.2]
    # the overhead in use is the largest of the newest three (pessimistic on purpose)
    assert rto.overhead_of(runs) == pytest.approx(1.2)
    assert rto.overhead_of(runs, recent=1) == pytest.approx(1.2) and rto.overhead_of(runs[:1]) == pytest.approx(0.7)


def test_overhead_source_prefers_evidence_then_summary_then_config(tmp_path):
    src = rto.OverheadSource(fixed=3.0)
    assert src.current() == (3.0, "config")
    summary = tmp_path / "summary.json"
    # the pipeline's switches carry rto_overhead_observed (same definition): the largest of the newest three
    summary.write_text(json.dumps({"runs": [{"rto_seconds_observed": 9.0, "end_ts": 1}], "switches": [
        {"kind": "swapover", "start_ts": 1.0, "rto_overhead_observed": 9.0},
        {"kind": "swapover", "start_ts": 5.0, "rto_overhead_observed": 2.0},
        {"kind": "failover", "start_ts": 6.0, "rto_overhead_observed": 30.0},
        {"kind": "swapover", "start_ts": 3.0, "rto_overhead_observed": 1.0},
        {"kind": "swapover", "start_ts": 7.0, "rto_overhead_observed": 2.5},
        {"kind": "swapover", "start_ts": 8.0, "rto_overhead_observed": None}]}))
    src = rto.OverheadSource(fixed=3.0, summary_file=str(summary), evidence_dir=str(tmp_path / "ev"))
    assert src.current() == (2.5, "summary")
    run_dir = tmp_path / "ev" / "rehearsal-1"
    with evidence.EvidenceWriter(str(run_dir / "phases.jsonl"), flush_interval=0) as w:
        for rec in (phase("x", "quiesce", 10.0, 10.3), phase("x", "drain", 10.3, 12.0),
                    phase("x", "activate", 12.0, 12.2)):
            w.write(rec)
    clock = [0.0]
    src = rto.OverheadSource(fixed=3.0, summary_file=str(summary), evidence_dir=str(tmp_path / "ev"),
                             refresh=60, clock=lambda: clock[0])
    assert src.current() == (2.5, "summary")   # no receive in the evidence: no observed RTO, the summary stays
    with evidence.EvidenceWriter(str(run_dir / "received.jsonl"), flush_interval=0) as w:
        w.write(received("x", "dc2", 12.4))
    clock[0] = 61.0
    value, source = src.current()
    assert source == "evidence" and value == pytest.approx(2.4)
    assert rto.overhead_from_summary({"rto_seconds_observed": 1.0}) is None
