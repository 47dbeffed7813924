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


def phase(run_id, name, start, end, decision="pass"):
    return evidence.phase_record(run_id, "swapover", name, start, end, decision)


def lag(ts, backlog, drain_rate, site="dc1", connection="DC2"):
    return evidence.lag_sample_record("x", "runbook", site, True, ts=ts, backlog=backlog, drain_rate=drain_rate,
                                      connection=connection)


def test_swapover_overhead_from_phases_and_lag_samples():
    recs = [
        phase("r1", "quiesce", 100.0, 100.4), phase("r1", "drain", 100.4, 103.4), phase("r1", "activate", 103.4, 104.0),
        lag(99.0, 5000, 2000.0), lag(98.0, 1, 1.0), lag(99.5, 0, 0.0, site="dc2", connection="DC1"),
        phase("r2", "quiesce", 200.0, 200.2), phase("r2", "drain", 200.2, 200.7),
        phase("r2", "activate", 200.7, 201.0),
        lag(120.0, 999, 1.0),                       # older than 60 s before r2: ignored
        phase("r3", "quiesce", 300.0, 300.1), phase("r3", "drain", 300.1, 301.0, decision="rollback"),
        phase("r4", "quiesce", 400.0, None),
        evidence.phase_record("r5", "failover", "promote", 500.0, 501.0, "pass"),
    ]
    runs = rto.swapover_runs(recs)
    assert [r.run_id for r in runs] == ["r1", "r2"]        # failed, unfinished and non-swapover runs skipped
    # r1 started with 5000 events draining at 2000/s: 2.5 s of its 4 s were drain
    assert runs[0].duration == pytest.approx(4.0) and runs[0].drain_seconds == pytest.approx(2.5)
    assert runs[0].overhead == pytest.approx(1.5)
    # r2 had no recent lag sample: the whole run is overhead (the pessimistic side)
    assert runs[1].drain_seconds == 0.0 and runs[1].overhead == pytest.approx(1.0)


def test_several_swapovers_in_one_run_are_separate():
    recs = [phase("reh", "preflight", 10.0, 10.1), phase("reh", "drain", 10.1, 10.4),
            phase("reh", "activate", 10.4, 10.5),
            evidence.phase_record("reh", "failover", "activate", 20.0, 25.0, "done"),
            phase("reh", "preflight", 90.0, 90.1), phase("reh", "drain", 90.1, 90.3),
            phase("reh", "activate", 90.3, 91.0)]
    runs = rto.swapover_runs(recs)
    assert [r.run_id for r in runs] == ["reh", "reh#2"]
    assert [round(r.duration, 3) for r in runs] == [0.5, 1.0]
    # the overhead in use is the largest of the newest three (pessimistic on purpose)
    assert rto.overhead_of(runs) == pytest.approx(1.0)
    assert rto.overhead_of(runs, recent=1) == pytest.approx(1.0) and rto.overhead_of(runs[:1]) == pytest.approx(0.5)


def test_overhead_source_prefers_evidence_then_summary_then_config(tmp_path):
    src = rto.OverheadSource(fixed=3.0)
    assert src.current() == (3.0, "config")
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"runs": [{"rto_seconds_observed": 9.0, "end_ts": 1},
                                            {"rto_seconds_observed": 2.5, "end_ts": 2}]}))
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
    value, source = src.current()
    assert source == "evidence" and value == pytest.approx(2.2)
    assert rto.overhead_from_summary({"rto_seconds_observed": None}) is None
