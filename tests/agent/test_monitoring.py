"""docs/monitoring: alert rules and Grafana dashboard checked against the metrics the agent exports.

promtool (Debian package `prometheus`) checks the rules and runs their unit tests (alerts.test.yml) when it is
installed; the structural checks run always.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from continuity_agent import metrics

MON = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
# Series Prometheus itself provides (scrape health, functions' implicit names are not series).
PROMETHEUS_SERIES = {"up"}
PROMQL_WORDS = {"and", "or", "unless", "on", "ignoring", "by", "without", "group_left", "group_right", "bool",
                "offset", "time", "deriv", "rate", "irate", "increase", "absent", "sum", "max", "min", "avg",
                "count", "label_values", "humanizeDuration", "inf", "nan", "max_over_time", "min_over_time",
                "avg_over_time", "vector"}


def referenced_metrics(expr: str) -> set[str]:
    """Names in a PromQL expression that can only be series names (label matchers and strings removed)."""
    text = re.sub(r"\{[^}]*\}", " ", expr)          # label matchers
    text = re.sub(r'"[^"]*"', " ", text)            # strings
    text = re.sub(r"\[[^\]]*\]", " ", text)         # range selectors
    text = re.sub(r"\b(on|ignoring|by|without|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for token in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        if token.lower() in PROMQL_WORDS or re.fullmatch(r"\d+[smhdwy]?", token):
            continue
        names.add(token)
    return names


def known() -> set[str]:
    return metrics.exposed_names() | PROMETHEUS_SERIES


def rules() -> list[dict]:
    doc = yaml.safe_load((MON / "alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_required_alerts_exist():
    names = {r["alert"] for r in rules()}
    for required in ("ContinuityMirrorDisconnected", "ContinuityMirrorLagOverSla", "ContinuityPendingAcksGrowing",
                     "ContinuityConsumersOnPassiveSite", "ContinuityAgentDown",
                     # the continuity broker plugin (docs/plugin.md)
                     "ContinuityPluginMissing", "ContinuityPluginGuardClosedOnActiveSite",
                     "ContinuityPluginGuardOpenOnPassiveSite", "ContinuityPassiveGuardRefusals",
                     "ContinuityReplicationLatencyHigh", "ContinuityDuplicatesAtRiskHigh"):
        assert required in names


def test_alert_expressions_use_exported_metrics_only():
    for rule in rules():
        refs = referenced_metrics(rule["expr"])
        assert refs, rule["alert"]
        unknown = refs - known()
        assert not unknown, f"{rule['alert']} references metrics the agent does not export: {unknown}"
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]


def test_reference_checker_catches_a_typo():
    # the structural check would be worthless if it accepted anything
    assert referenced_metrics('continuity_mirror_conected == 0 and on(site) up{job="x"} == 1') == {
        "continuity_mirror_conected", "up"}
    assert "continuity_mirror_conected" not in known()


def test_dashboard_queries_use_exported_metrics_only():
    dash = json.loads((MON / "grafana-dashboard.json").read_text())
    assert dash["uid"] and dash["title"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    # label_values(metric, label): only the metric is a series name
    exprs += [re.sub(r"label_values\((\w+),\s*\w+\)", r"\1", v["definition"])
              for v in dash["templating"]["list"] if v.get("definition")]
    used: set[str] = set()
    for expr in exprs:
        refs = referenced_metrics(expr)
        assert refs and not refs - known(), (expr, refs - known())
        used |= refs
    for needed in ("continuity_mirror_connected", "continuity_mirror_backlog_events", "continuity_mirror_lag_seconds",
                   "continuity_mirror_rpo_messages_estimate", "continuity_mirror_rto_seconds_estimate",
                   "continuity_site_consumers_on_passive", "continuity_mirror_pending_acks"):
        assert needed in used
    # every metric of the continuity plugin has a panel
    per_direction = ("continuity_mirror_plugin_rpo_seconds_estimate", "continuity_mirror_plugin_rpo_messages_estimate",
                     "continuity_mirror_duplicates_at_risk_estimate", "continuity_mirror_unreplicated_acks_estimate")
    plugin = {m.name for m in metrics.METRICS if m.name.startswith("continuity_plugin_") or m.name in per_direction}
    assert len(plugin) >= 15 and not plugin - used, plugin - used
    for panel in dash["panels"]:
        assert panel["title"] and (panel["type"] != "timeseries" or panel["fieldConfig"]["defaults"].get("unit"))
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian: apt-get install prometheus): structural checks only")
    return path


def test_promtool_check_rules(promtool):
    res = subprocess.run([promtool, "check", "rules", "alerts.yml"], cwd=MON, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(rules())} rules found" in res.stdout


def test_promtool_unit_tests_every_alert(promtool):
    tests = yaml.safe_load((MON / "alerts.test.yml").read_text())
    tested = {t["alertname"] for case in tests["tests"] for t in case["alert_rule_test"] if t.get("exp_alerts")}
    untested = {r["alert"] for r in rules()} - tested
    assert not untested, f"alerts without a firing test in alerts.test.yml: {untested}"
    res = subprocess.run([promtool, "test", "rules", "alerts.test.yml"], cwd=MON, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_agent_exposition_passes_promtool_check_metrics(promtool, make_agent, two_sites):
    from prometheus_client import generate_latest

    agent = make_agent()
    agent.sample_once()
    two_sites.clock.advance(1)
    agent.sample_once()
    res = subprocess.run([promtool, "check", "metrics"], input=generate_latest(agent.registry), capture_output=True,
                         timeout=60)
    # promtool exits 0 when the exposition parses; lint findings (if any) are printed and shown here
    assert res.returncode == 0, (res.stdout + res.stderr).decode()
