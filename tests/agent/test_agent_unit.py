"""Unit tests of the agent's sampling, metrics, evidence and last-known logic against two fake Artemis sites."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from continuity_agent import metrics, model, output
from continuity_agent.config import SlaSettings


def scrape(agent) -> dict[tuple, float]:
    """{(name, frozenset(labels)): value} of one exposition."""
    out = {}
    for fam in text_string_to_metric_families(generate_latest(agent.registry).decode()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def val(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, frozenset(labels.items())))


D12 = {"site": "dc1", "peer": "dc2", "connection": "DC2"}
D21 = {"site": "dc2", "peer": "dc1", "connection": "DC1"}


def cut_mirror(two_sites, added: int) -> None:
    """dc1's mirror to dc2 disconnected while ``added`` more events were captured."""
    snf = two_sites.snf(two_sites.dc1)
    two_sites.dc1.connections[0]["Connected"] = False
    snf["MessagesAdded"] += added
    snf["MessageCount"] += added
    snf["ConsumerCount"] = 0


def test_in_sync_sites(make_agent, two_sites):
    agent = make_agent(rto={"overhead_seconds": 2.5})
    agent.sample_once()
    two_sites.clock.advance(1)
    cycle = agent.sample_once()
    assert {d.connection for d in cycle.directions} == {"DC2", "DC1"}
    s = scrape(agent)
    assert val(s, "continuity_site_reachable", site="dc1") == 1
    assert val(s, "continuity_site_role", site="dc1", role="active") == 1
    assert val(s, "continuity_site_role", site="dc2", role="passive") == 1
    assert val(s, "continuity_site_role", site="dc2", role="active") == 0
    assert val(s, "continuity_mirror_connected", **D12) == 1
    assert val(s, "continuity_mirror_backlog_events", **D12) == 0
    assert val(s, "continuity_mirror_lag_seconds", **D12) == 0
    assert val(s, "continuity_mirror_rpo_messages_estimate", **D12) == 0
    assert val(s, "continuity_mirror_rto_seconds_estimate", **D12) == 2.5  # empty backlog: overhead only
    assert val(s, "continuity_agent_rto_overhead_seconds", source="config") == 2.5
    assert val(s, "continuity_mirror_queue_differences", **D12) == 0
    assert val(s, "continuity_site_consumers_on_passive", site="dc2") == 0
    assert all(val(s, "continuity_mirror_sla_breach", **D12, target=t) == 0
               for t in ("rpo_seconds", "rpo_messages", "rto_seconds", "lag_seconds"))
    assert val(s, "continuity_agent_cycles_total") == 2
    # each site cost exactly one bulk HTTP request per cycle (plus nothing for discovery: names are known)
    assert two_sites.dc1.http_requests == 2 + 1  # +1: broker name discovery (search) on the first cycle


def test_paused_client_queues_are_counted_per_site(make_agent, two_sites):
    """Issue 16 (c): a queue an interrupted swapover left paused is visible (and alerted on, alerts.yml)."""
    agent = make_agent()
    agent.sample_once()
    s = scrape(agent)
    assert val(s, "continuity_site_paused_client_queues", site="dc1") == 0
    client = next(q for q in two_sites.dc2.queues if not q.get("InternalQueue") and not q["Name"].startswith("$"))
    client["Paused"] = True
    two_sites.clock.advance(1)
    cycle = agent.sample_once()
    assert cycle.sites["dc2"].paused_client_queues == [client["Name"]]
    s = scrape(agent)
    assert val(s, "continuity_site_paused_client_queues", site="dc2") == 1
    assert val(s, "continuity_site_paused_client_queues", site="dc1") == 0


def test_cut_mirror_backlog_grows_and_rpo_rises(make_agent, two_sites):
    agent = make_agent()
    agent.sample_once()
    for step in range(1, 4):
        two_sites.clock.advance(2)
        cut_mirror(two_sites, added=100)
        cycle = agent.sample_once()
        d = next(x for x in cycle.directions if x.connection == "DC2")
        assert d.connected is False and d.backlog == 100 * step
        assert d.rpo_events_est == 100 * step
    # disconnected for 4 s (first seen disconnected at the second cut sample's predecessor)
    assert d.disconnected_seconds == pytest.approx(4.0)
    assert d.rpo_basis == "disconnected" and d.rpo_seconds_est >= 4.0
    assert d.lag_unbounded and d.lag_seconds is None
    s = scrape(agent)
    assert val(s, "continuity_mirror_connected", **D12) == 0
    assert val(s, "continuity_mirror_lag_seconds", **D12) == math.inf
    assert val(s, "continuity_mirror_backlog_events", **D12) == 300
    assert val(s, "continuity_mirror_sla_breach", **D12, target="rpo_messages") == 1   # 300 > 100
    assert val(s, "continuity_mirror_sla_breach", **D12, target="lag_seconds") == 1    # unbounded
    assert val(s, "continuity_mirror_sla_breach", **D12, target="rto_seconds") == 1    # no drain rate: unknown
    # the other direction is untouched
    assert val(s, "continuity_mirror_connected", **D21) == 1
    assert val(s, "continuity_mirror_sla_breach", **D21, target="rpo_messages") == 0


def test_draining_gives_rates_lag_and_rto(make_agent, two_sites):
    agent = make_agent(rto={"overhead_seconds": 1.0})
    snf = two_sites.snf(two_sites.dc1)
    snf.update(MessageCount=1000, MessagesAdded=5000, MessagesAcknowledged=4000)
    agent.sample_once()
    two_sites.clock.advance(2)
    # 2 s later: 200 added, 800 confirmed -> add 100/s, drain 400/s, backlog 400
    snf.update(MessageCount=400, MessagesAdded=5200, MessagesAcknowledged=4800)
    cycle = agent.sample_once()
    d = next(x for x in cycle.directions if x.connection == "DC2")
    assert d.add_rate == pytest.approx(100) and d.drain_rate == pytest.approx(400)
    assert d.lag_seconds == pytest.approx(400 / 400)     # FIFO: 400 waiting, 400/s drained
    assert d.rto_seconds_est == pytest.approx(400 / 400 + 1.0)  # quiesced drain + overhead
    assert d.rpo_seconds_est == pytest.approx(400 / 100)
    assert d.sla_breach == {"rpo_seconds": False, "rpo_messages": True, "rto_seconds": False,
                            "lag_seconds": False}


def test_consumer_on_passive_site_raises_the_flag(make_agent, two_sites):
    agent = make_agent()
    agent.sample_once()
    s = scrape(agent)
    assert val(s, "continuity_site_consumers_on_passive", site="dc2") == 0
    two_sites.queue(two_sites.dc2, "orders")["ConsumerCount"] = 2
    cycle = agent.sample_once()
    s = scrape(agent)
    assert val(s, "continuity_site_consumers_on_passive", site="dc2") == 1
    assert val(s, "continuity_site_client_consumers", site="dc2") == 2
    # dc1 is active: its consumer is normal
    assert val(s, "continuity_site_consumers_on_passive", site="dc1") == 0
    d12 = next(x for x in cycle.directions if x.connection == "DC2")
    d21 = next(x for x in cycle.directions if x.connection == "DC1")
    assert d12.lag_sample["passive_consumers"] == 2     # dc2 is the passive target of dc1 -> dc2
    assert d21.lag_sample["passive_consumers"] == 0     # dc1 is active


def test_role_mixed_and_unknown(make_agent, two_sites):
    two_sites.dc1.acceptors["artemis"]["Started"] = False
    agent = make_agent(sites={
        "dc1": {"jolokia": {"url": "http://dc1:8161/console/jolokia", "username": "admin", "password": "secret"},
                "client_acceptors": ["amqp", "artemis"]},
        "dc2": {"jolokia": {"url": "http://dc2:8161/console/jolokia", "username": "admin",
                            "password": "secret"}}})
    cycle = agent.sample_once()
    assert cycle.sites["dc1"].role == "mixed"
    assert cycle.sites["dc2"].role == "unknown"
    assert any("no client_acceptors" in n for n in cycle.sites["dc2"].notes)
    assert cycle.sites["dc2"].consumers_on_passive is None
    # unknown peer role: consumers on the peer count as passive consumers, like mirror_info
    two_sites.queue(two_sites.dc2, "orders")["ConsumerCount"] = 1
    cycle = agent.sample_once()
    assert next(x for x in cycle.directions if x.connection == "DC2").lag_sample["passive_consumers"] == 1


def test_unreachable_site_keeps_last_known_backlog(make_agent, two_sites, tmp_path):
    agent = make_agent()
    agent.sample_once()
    two_sites.clock.advance(1)
    cut_mirror(two_sites, added=250)
    agent.sample_once()
    lk_path = tmp_path / "state" / "dc1" / "last-known.json"
    before = json.loads(lk_path.read_text())
    assert before["at_risk_events"] == 250 and before["role"] == "active"
    two_sites.clock.advance(1)
    two_sites.dc1.fail_connections = 10 ** 6   # dc1 is gone
    cycle = agent.sample_once()
    assert cycle.sites["dc1"].reachable is False and "Connection" in (cycle.sites["dc1"].error or "")
    assert cycle.sites["dc2"].reachable is True
    s = scrape(agent)
    assert val(s, "continuity_site_reachable", site="dc1") == 0
    assert val(s, "continuity_site_role", site="dc1", role="unreachable") == 1
    assert val(s, "continuity_mirror_up", **D12) == 0
    assert val(s, "continuity_mirror_backlog_events", **D12) == 250       # last known
    assert val(s, "continuity_mirror_rpo_events_estimate", **D12) == 250
    assert val(s, "continuity_mirror_connected", **D12) == 0
    assert val(s, "continuity_mirror_lag_seconds", **D12) is None          # no live mirror: no lag
    assert val(s, "continuity_mirror_sla_breach", **D12, target="rpo_messages") == 1
    assert val(s, "continuity_mirror_sla_breach", **D12, target="lag_seconds") is None
    assert val(s, "continuity_site_sample_errors_total", site="dc1") == 1
    # the other site is still sampled; its view of the dead peer is reported
    d21 = next(x for x in cycle.directions if x.connection == "DC1")
    assert d21.stale is False and any("peer unreachable" in n for n in d21.lag_sample["notes"])
    # last-known.json of dc1 still holds the state before the loss
    assert json.loads(lk_path.read_text()) == before
    # evidence: a lag_sample with reachable false and the last known backlog
    recs = [r for p in sorted((tmp_path / "evidence" / "agent-test").glob("*.jsonl"))
            for r in evidence.read_records(str(p))]
    last_dc1 = [r for r in recs if r["site"] == "dc1"][-1]
    assert last_dc1["reachable"] is False and last_dc1["backlog"] == 250 and last_dc1["connected"] is None
    # back again: live values, the flag goes up
    two_sites.dc1.fail_connections = 0
    two_sites.clock.advance(1)
    agent.sample_once()
    s = scrape(agent)
    assert val(s, "continuity_site_reachable", site="dc1") == 1 and val(s, "continuity_mirror_up", **D12) == 1


def test_never_reachable_site_is_reported(make_agent, two_sites, tmp_path):
    two_sites.dc2.fail_connections = 10 ** 6
    agent = make_agent()
    cycle = agent.sample_once()
    assert cycle.sites["dc2"].reachable is False
    recs = output.Outputs(None, "x", 4096, 1, None).records(cycle)
    dc2 = [r for r in recs if r["site"] == "dc2"]
    assert len(dc2) == 1 and dc2[0]["reachable"] is False and dc2[0]["backlog"] is None
    assert not (tmp_path / "state" / "dc2").exists()


def test_evidence_records_are_schema_valid(make_agent, two_sites, tmp_path):
    pytest.importorskip("jsonschema", reason="schema validation needs jsonschema")
    agent = make_agent()
    agent.sample_once()
    two_sites.clock.advance(1)
    cut_mirror(two_sites, 10)
    two_sites.queue(two_sites.dc1, "orders")["MessageCount"] = 9   # a queue difference
    agent.sample_once()
    s = scrape(agent)
    assert val(s, "continuity_queue_count_difference", site="dc2", peer="dc1", address="orders",
               queue="orders") == -4
    two_sites.dc1.fail_connections = 10 ** 6
    agent.sample_once()
    assert val(scrape(agent), "continuity_queue_count_difference", site="dc2", peer="dc1", address="orders",
               queue="orders") is None  # no comparison against an unreachable peer
    agent.outputs.evidence.writer.flush()
    files = sorted((tmp_path / "evidence" / "agent-test").glob("lag-agent-*.jsonl"))
    recs = [r for p in files for r in evidence.read_records(str(p))]
    assert len(recs) == 6
    for rec in recs:
        assert evidence.validate(rec, backend="jsonschema") == [], rec
        assert rec["source"] == "agent"
    diffs = [r for r in recs if r["site"] == "dc1" and r["queue_diff_count"]]
    assert diffs and diffs[0]["queue_diffs"][0] == {"queue": "orders", "local": 9, "peer": 5, "delta": 4,
                                                    "address": "orders"}


def test_evidence_rotation_keeps_newest_files(tmp_path):
    rot = output.RotatingEvidence(str(tmp_path), "rot", max_bytes=4096, keep=3)
    rec = evidence.lag_sample_record("rot", "agent", "dc1", True, notes=["x" * 500])
    for _ in range(60):
        rot.write([rec])
    rot.close()
    files = sorted((tmp_path / "rot").glob("lag-agent-*.jsonl"))
    assert len(files) == 3
    assert files[-1].name > files[0].name
    line = len(json.dumps(rec, separators=(",", ":"))) + 1
    assert all(f.stat().st_size < 4096 + line for f in files)  # rotated right after crossing the limit
    # a restart continues numbering in a new file instead of appending to a possibly torn one
    rot2 = output.RotatingEvidence(str(tmp_path), "rot", max_bytes=4096, keep=3)
    assert Path(rot2.path).name > files[-1].name
    rot2.close()


def test_last_known_is_replaced_atomically(tmp_path):
    path = tmp_path / "s" / "dc1" / "last-known.json"
    output.atomic_write_json(str(path), {"a": 1})
    output.atomic_write_json(str(path), {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["last-known.json"]  # no temp files left
    assert oct(path.stat().st_mode & 0o777) == "0o640"
    with pytest.raises(ValueError):
        output.atomic_write_json(str(path), {"a": float("nan")})
    assert json.loads(path.read_text()) == {"a": 2}


def test_last_known_content(make_agent, two_sites, tmp_path):
    agent = make_agent()
    agent.sample_once()
    doc = json.loads((tmp_path / "state" / "dc2" / "last-known.json").read_text())
    assert doc["schema"] == output.LAST_KNOWN_SCHEMA and doc["site"] == "dc2" and doc["role"] == "passive"
    assert doc["at_risk_events"] == 0 and len(doc["lag_samples"]) == 1
    assert doc["lag_samples"][0]["connection"] == "DC1" and doc["lag_samples"][0]["kind"] == "lag_sample"


@pytest.mark.parametrize("values,stale,expected", [
    ({"backlog": 0, "rpo_seconds_est": 0.0, "lag_seconds": 0.0, "rto_seconds_est": 1.0, "pending_acks": 3}, False,
     {"rpo_seconds": False, "lag_seconds": False, "rto_seconds": False, "pending_acks": False}),
    ({"backlog": 10, "rpo_seconds_est": 9.0, "lag_seconds": None, "rto_seconds_est": None, "pending_acks": 11}, False,
     {"rpo_seconds": True, "lag_seconds": True, "rto_seconds": True, "pending_acks": True}),
    # nothing measured (no SNF queue reading): nothing can be proven within target, every target breaches
    ({"backlog": None, "rpo_seconds_est": None, "lag_seconds": None, "rto_seconds_est": None}, False,
     {"rpo_seconds": True, "lag_seconds": True, "rto_seconds": True, "pending_acks": True}),
    # pending acks unknown (Artemis < 2.40) with a pending_acks target: a breach too (one rule for unknown)
    ({"backlog": 0, "rpo_seconds_est": 0.0, "lag_seconds": 0.0, "rto_seconds_est": 1.0, "pending_acks": None}, False,
     {"rpo_seconds": False, "lag_seconds": False, "rto_seconds": False, "pending_acks": True}),
    # a stale (unreachable) source: only the last known RPO is judged, lag/RTO/pending acks do not apply
    ({"backlog": 10, "rpo_seconds_est": 1.0, "lag_seconds": None, "rto_seconds_est": None}, True,
     {"rpo_seconds": False}),
    ({"backlog": 10, "rpo_seconds_est": None, "lag_seconds": None, "rto_seconds_est": None}, True,
     {"rpo_seconds": True}),
])
def test_sla_rules(values, stale, expected):
    sla = SlaSettings(rpo_seconds=5, lag_seconds=5, rto_seconds=30, pending_acks=10)
    assert model.sla_breaches(values, sla, stale) == expected


def test_metric_names_are_documented_and_exported(make_agent, two_sites):
    agent = make_agent()
    agent.sample_once()
    cut_mirror(two_sites, 5)
    two_sites.clock.advance(1)
    agent.sample_once()
    exported = {name for name, _ in scrape(agent)}
    assert exported <= metrics.exposed_names()
    missing = {m.name for m in metrics.METRICS} - exported
    # pending acks are exported (2.44 fixture); absent: a queue difference, canaries (off here), and the continuity
    # plugin's values (these fixture sites have no plugin: only continuity_plugin_up, 0, is exported for them)
    assert val(scrape(agent), "continuity_plugin_up", site="dc1") == 0
    # and the per-broker series of a site with several brokers (tests/agent/test_agent_ha.py exports them)
    assert missing <= {"continuity_queue_count_difference"} | {m.name for m in metrics.METRICS
                                                               if m.name.startswith("continuity_canary_")
                                                               or m.name in PLUGIN_VALUE_METRICS
                                                               or "broker" in m.labels
                                                               or m.name == "continuity_site_ha_takeover"}, missing
    doc = (Path(__file__).resolve().parents[2] / "docs" / "agent.md")
    if doc.exists():
        text = doc.read_text()
        undocumented = [m.name for m in metrics.METRICS if m.name not in text]
        assert undocumented == [], f"metrics missing from docs/agent.md: {undocumented}"


def test_no_password_in_metrics_evidence_or_logs(make_agent, two_sites, tmp_path, caplog):
    caplog.set_level("DEBUG")
    agent = make_agent()
    two_sites.dc1.fail_connections = 10 ** 6
    agent.sample_once()
    agent.outputs.evidence.writer.flush()
    blobs = [generate_latest(agent.registry).decode(), caplog.text, repr(agent.cfg)]
    blobs += [p.read_text() for p in (tmp_path / "evidence").rglob("*.jsonl")]
    blobs += [p.read_text() for p in (tmp_path / "state").rglob("*.json")]
    assert not any("secret" in b for b in blobs)
    assert os.path.exists(tmp_path / "state" / "dc2" / "last-known.json")


# ------------------------------------------------------------------------------------ continuity plugin
FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "continuity_plugin"
PLUGIN_VALUE_METRICS = {m.name for m in metrics.METRICS
                        if (m.name.startswith("continuity_plugin_") and m.name != "continuity_plugin_up")
                        or m.name in ("continuity_mirror_plugin_rpo_seconds_estimate",
                                      "continuity_mirror_plugin_rpo_messages_estimate",
                                      "continuity_mirror_duplicates_at_risk_estimate",
                                      "continuity_mirror_unreplicated_acks_estimate")}


def _captured_plugin(name: str) -> dict:
    """A plugin read recorded on the real lab (2.44.0, traffic on dc1: dc1 active with consumers, dc2 passive
    receiving the mirror), parsed by the collection's one parser."""
    from ansible_collections.continuity.artemis.plugins.module_utils import continuity_plugin

    body = json.loads((FIXTURES / name).read_text())
    return continuity_plugin.parse(body["value"], body["request"]["mbean"])


def test_plugin_values_are_exported_per_site_and_direction(make_agent, two_sites):
    agent = make_agent()
    plugins = {"dc1": _captured_plugin("read-2.44-dc1-active-under-traffic.json"),
               "dc2": _captured_plugin("read-2.44-dc2-passive-mirror-target.json")}
    collect = agent._collect

    def with_plugin(name):
        snap = collect(name)
        snap["continuity_plugin"] = plugins[name]
        return snap

    agent._collect = with_plugin
    agent.sample_once()
    two_sites.clock.advance(1)
    cut_mirror(two_sites, added=30)  # dc1 -> dc2 has a backlog: the estimates are not the "empty" case
    cycle = agent.sample_once()
    s = scrape(agent)
    assert val(s, "continuity_plugin_up", site="dc1") == 1 and val(s, "continuity_plugin_up", site="dc2") == 1
    assert val(s, "continuity_plugin_site_role", site="dc2", role="passive") == 1
    assert val(s, "continuity_plugin_site_role", site="dc2", role="active") == 0
    assert val(s, "continuity_plugin_site_role", site="dc1", role="active") == 1
    assert val(s, "continuity_plugin_unacked_deliveries", site="dc1") == 40
    assert val(s, "continuity_plugin_replication_latency_seconds", site="dc2", quantile="0.99") == 2.883583
    assert val(s, "continuity_plugin_replication_latency_seconds", site="dc2", quantile="0.5") == 1.048575
    assert val(s, "continuity_plugin_passive_guard_refusals_total", site="dc2") == 0
    # dc1 -> dc2: disconnected with a backlog -> the age of the newest event dc2 applied is the RPO;
    # duplicates = dc1's 40 deliveries in flight + its ack rate x that RPO, capped by the 30-event backlog
    assert val(s, "continuity_mirror_plugin_rpo_seconds_estimate", **D12) == 0.112
    assert val(s, "continuity_mirror_unreplicated_acks_estimate", **D12) == pytest.approx(34.637457888232404 * 0.112)
    assert val(s, "continuity_mirror_duplicates_at_risk_estimate", **D12) == pytest.approx(
        40 + 34.637457888232404 * 0.112)
    # dc2 -> dc1: its backlog is empty, so nothing is at risk whatever dc1 measured
    assert val(s, "continuity_mirror_plugin_rpo_seconds_estimate", **D21) == 0.0
    d12 = next(d for d in cycle.directions if d.connection == "DC2")
    assert d12.plugin_estimates["rpo_basis"] == "newest_mirrored_event"


def test_lag_samples_carry_the_plugin_estimates_and_null_without_the_plugin(make_agent, two_sites, tmp_path):
    """Issue 17: the evidence lag_sample of a direction holds the plugin's duplicates-at-risk estimate and the p99
    replication latency the peer measured (the same numbers as the metrics), so the pipeline can compare them
    with the duplicates a switch caused; null without the plugin, and null in a stale (unreachable) sample."""
    agent = make_agent()
    plugins = {"dc1": _captured_plugin("read-2.44-dc1-active-under-traffic.json"),
               "dc2": _captured_plugin("read-2.44-dc2-passive-mirror-target.json")}
    collect = agent._collect
    enabled = {"on": False}

    def with_plugin(name):
        snap = collect(name)
        if enabled["on"]:
            snap["continuity_plugin"] = plugins[name]
        return snap

    agent._collect = with_plugin
    agent.sample_once()  # no plugin yet
    enabled["on"] = True
    two_sites.clock.advance(1)
    cut_mirror(two_sites, added=30)
    agent.sample_once()
    s = scrape(agent)
    two_sites.dc1.fail_connections = 10 ** 6  # dc1 unreachable: its direction is the stale last known one
    two_sites.clock.advance(1)
    agent.sample_once()
    agent.outputs.evidence.writer.flush()
    files = sorted((tmp_path / "evidence" / "agent-test").glob("lag-agent-*.jsonl"))
    recs = [r for p in files for r in evidence.read_records(str(p)) if r["site"] == "dc1"]
    assert len(recs) == 3, recs
    without, with_plugin_rec, stale = recs
    assert without["duplicates_at_risk_est"] is None and without["replication_latency_p99_seconds"] is None
    assert with_plugin_rec["duplicates_at_risk_est"] == pytest.approx(
        val(s, "continuity_mirror_duplicates_at_risk_estimate", **D12))
    assert with_plugin_rec["duplicates_at_risk_est"] == pytest.approx(40 + 34.637457888232404 * 0.112)
    assert with_plugin_rec["replication_latency_p99_seconds"] == 2.883583  # measured on dc2, the peer
    assert stale["reachable"] is False
    assert stale["duplicates_at_risk_est"] is None and stale["replication_latency_p99_seconds"] is None
    for rec in recs:
        assert evidence.validate(rec) == [], rec
