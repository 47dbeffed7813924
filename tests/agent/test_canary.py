"""Canaries through the shared probe interface (amqp.CanaryProbe), with a fake probe: scheduling by role,
metrics, evidence records, failures; the config rules that go with them."""

from __future__ import annotations

import pytest
from conftest import base_config
from test_agent_unit import scrape, val

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from continuity_agent import canary, config

AMQP = {"dc1": {"urls": ["amqp://127.0.0.1:5672"], "username": "app", "password": "app-pw"},
        "dc2": {"urls": ["amqp://127.0.0.1:5673"], "target_urls": ["amqp://127.0.0.1:6673"], "username": "app",
                "password": "app-pw"}}


def with_canaries(**extra) -> dict:
    cfg = base_config(canaries={"enabled": True, "every": 5, "count": 2, "timeout": 3}, **extra)
    for name, a in AMQP.items():
        cfg["sites"][name]["amqp"] = dict(a)
    return cfg


class FakeProbe:
    def __init__(self, latency=0.05, fail=None):
        self.calls = []
        self.latency = latency
        self.fail = fail

    def __call__(self, origin, target, address, origin_options, target_options, count, timeout, selector=True):
        self.calls.append({"origin": [e.url for e in origin], "target": [e.url for e in target], "count": count,
                           "user": origin_options.user, "address": address})
        if self.fail:
            raise self.fail
        cans = [{"canary_id": f"c{i}", "sent_ts": 100.0 + i, "seen_ts": 100.0 + i + self.latency,
                 "latency_seconds": self.latency, "outcome": "seen", "error": None} for i in range(count)]
        cans.append({"canary_id": "late", "sent_ts": 110.0, "seen_ts": None, "latency_seconds": None,
                     "outcome": None, "error": None})
        return {"sent": count + 1, "seen": count, "canaries": cans, "error": None,
                "latency": {"p50": self.latency, "max": self.latency}}


def test_config_requires_amqp_with_canaries():
    cfg = base_config(canaries={"enabled": True})
    with pytest.raises(config.ConfigError, match=r"^sites\.dc1\.amqp: required"):
        config.parse(cfg)
    bad = with_canaries()
    bad["sites"]["dc1"]["amqp"]["urls"] = ["amqp://u:p@h:5672"]
    with pytest.raises(config.ConfigError, match=r"^sites\.dc1\.amqp\.urls\[0\]"):
        config.parse(bad)
    parsed = config.parse(with_canaries())
    assert parsed.canaries.count == 2 and parsed.sites["dc2"].amqp.target_urls == ("amqp://127.0.0.1:6673",)
    assert "app-pw" not in repr(parsed)


def test_only_sites_that_take_traffic_originate_canaries(make_agent, two_sites, tmp_path):
    probe = FakeProbe()
    agent = make_agent(canaries=with_canaries()["canaries"], sites=with_canaries()["sites"])
    agent.canaries.probe = probe
    agent.sample_once()                      # dc1 active, dc2 passive (fixture)
    results = agent.canaries.run_once()
    assert [(r.site, r.peer) for r in results] == [("dc1", "dc2")]      # the fenced dc2 sends nothing
    assert probe.calls[0]["origin"] == ["amqp://127.0.0.1:5672"]
    assert probe.calls[0]["target"] == ["amqp://127.0.0.1:6673"]         # peer's target_urls
    assert probe.calls[0]["user"] == "app" and probe.calls[0]["address"] == "continuity.canary"
    s = scrape(agent)
    assert val(s, "continuity_canary_latency_seconds", site="dc1", peer="dc2") == pytest.approx(0.05)
    assert val(s, "continuity_canary_seen_ratio", site="dc1", peer="dc2") == pytest.approx(2 / 3)
    assert val(s, "continuity_canary_latency_seconds", site="dc2", peer="dc1") is None
    agent.outputs.evidence.writer.flush()
    recs = [r for p in (tmp_path / "evidence").rglob("*.jsonl") for r in evidence.read_records(str(p))
            if r["kind"] == "canary"]
    assert [r["outcome"] for r in recs] == ["seen", "seen", "timeout"]
    assert all(evidence.builtin_problems(r) == [] for r in recs)
    assert recs[0]["origin_site"] == "dc1" and recs[0]["target_site"] == "dc2"


def test_canary_browser_is_not_a_passive_consumer(make_agent, two_sites):
    two_sites.dc2.addresses["continuity.canary"] = {}
    two_sites.dc2.queues.append({"Name": "continuity.canary", "Address": "continuity.canary", "MessageCount": 2,
                                 "ConsumerCount": 1})
    agent = make_agent(canaries=with_canaries()["canaries"], sites=with_canaries()["sites"])
    cycle = agent.sample_once()
    assert cycle.sites["dc2"].consumers_on_passive is False
    two_sites.queue(two_sites.dc2, "orders")["ConsumerCount"] = 1
    assert agent.sample_once().sites["dc2"].consumers_on_passive is True


def test_probe_failure_is_reported_not_raised(make_agent, two_sites):
    agent = make_agent(canaries=with_canaries()["canaries"], sites=with_canaries()["sites"])
    agent.canaries.probe = FakeProbe(fail=RuntimeError("boom"))
    agent.sample_once()
    (result,) = agent.canaries.run_once()
    assert result.error == "boom" and result.seen_ratio is None
    s = scrape(agent)
    assert val(s, "continuity_canary_last_timestamp_seconds", site="dc1", peer="dc2") is not None
    assert val(s, "continuity_canary_latency_seconds", site="dc1", peer="dc2") is None


def test_result_from_probe_is_pure():
    res = canary.result_from_probe("r", "a", "b", "x", {"sent": 0, "seen": 0, "canaries": [],
                                                        "error": {"message": "refused"}}, 5.0)
    assert (res.error, res.records, res.ts) == ("refused", [], 5.0)
