"""The continuity plugin's MBean as the collection reads it: parsing of real reads, absent-plugin degradation, the
RPO and duplicates-at-risk estimates built on it, and the site-role calls.

The two reads in tests/unit/fixtures/continuity_plugin were recorded from the real lab (Artemis 2.44.0, plugin
0.1.0 installed by the broker role, 200 msg/s of traffic on dc1 with batched acks): dc1 active with consumers,
dc2 passive receiving the mirror.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import continuity_plugin as plugin
from ansible_collections.continuity.artemis.plugins.module_utils import jolokia, lag, site_state
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "continuity_plugin"
DC1 = "read-2.44-dc1-active-under-traffic.json"
DC2 = "read-2.44-dc2-passive-mirror-target.json"


def recorded(name):
    return json.loads((FIXTURES / name).read_text())


def result_of(name, attrs=None):
    body = recorded(name)
    if attrs is not None:
        body = dict(body, value={k: v for k, v in body["value"].items() if k in attrs})
    return jolokia.Result(body["request"], body)


# ------------------------------------------------------------------------------------------ requests
def test_read_request_names_the_mbean_and_leaves_the_tables_out_by_default():
    req = plugin.read_request("dc2")
    assert req["mbean"] == 'org.apache.activemq.artemis:broker="dc2",component=continuity' == on.continuity("dc2")
    assert "SiteRole" in req["attribute"] and "AckModel" not in req["attribute"]
    assert {"AckModel", "ReplicationLatency"} <= set(plugin.read_request("dc2", include_tables=True)["attribute"])
    assert on.kind(on.continuity("dc2")) == "continuity"


def test_set_role_request_and_bad_role():
    req = plugin.set_role_request("dc1", "passive")
    assert req == {"type": "exec", "mbean": on.continuity("dc1"), "operation": "setSiteRole(java.lang.String)",
                   "arguments": ["passive"]}
    with pytest.raises(ValueError, match="active, passive"):
        plugin.set_role_request("dc1", "standby")


# ------------------------------------------------------------------------------------------ parsing
def test_parse_a_passive_mirror_target():
    notes = []
    p = plugin.from_result(result_of(DC2), notes)
    assert notes == []
    assert p["mbean"] == on.continuity("dc2") and p["site_role"] == "passive" and p["plugin_version"] == "0.1.0"
    assert p["mirror_users"] == ["mirror"] and p["mirror_acceptors"] == [] and p["window_seconds"] == 60
    assert p["state_file"].endswith("/dc2/data/continuity-site-role")
    r = p["replication"]
    assert (r["latency_p50_seconds"], r["latency_p99_seconds"], r["latency_max_seconds"]) == (1.048575, 2.883583, 3.003)
    assert r["samples_in_window"] == 2134 and r["newest_event_age_seconds"] == 0.112
    # the per-address table was read: its own rate (over the elapsed part of the window) is the mirrored rate
    assert r["addresses"]["orders"]["window"]["messages"] == 2134
    assert r["mirrored_per_second"] == pytest.approx(202.236543)
    # nothing consumed on the passive site: -1 ("no sample") is None, never 0
    assert p["ack_model"]["ack_latency_p50_seconds"] is None and p["ack_model"]["unacked_deliveries"] == 0
    assert p["passive_guard"] == {"refusals": 0, "refused_sends": 0, "refused_consumers": 0, "refused_clients": 0}


def test_parse_an_active_site_with_consumers():
    p = plugin.from_result(result_of(DC1), [])
    a = p["ack_model"]
    assert p["site_role"] == "active"
    assert a["unacked_deliveries"] == 40 and a["acks_per_second"] == pytest.approx(34.637457888232404)
    assert a["acks_per_ack_call"] == 1.0 and a["tracked_consumers"] == 2
    assert "orders" in a["addresses"]
    # dc1 is the source of what was sent: nothing was mirrored into it
    assert p["replication"]["latency_p99_seconds"] is None and p["replication"]["newest_event_age_seconds"] is None


def test_rate_without_the_table_uses_the_elapsed_part_of_a_young_window():
    body = recorded(DC2)["value"]
    headline = {k: v for k, v in body.items() if k in plugin.HEADLINE_ATTRS}
    since = plugin.epoch_of(body["StatisticsSince"])
    young = plugin.parse(headline, now=since + 10.552)["replication"]["mirrored_per_second"]
    assert young == pytest.approx(2134 / 10.552)
    assert plugin.parse(headline, now=since + 600)["replication"]["mirrored_per_second"] == pytest.approx(2134 / 60)
    assert plugin.parse(headline)["replication"]["mirrored_per_second"] == pytest.approx(2134 / 60)


def test_epoch_of_java_instants():
    assert plugin.epoch_of("1970-01-01T00:00:01.5Z") == 1.5
    assert plugin.epoch_of("2026-11-24T00:21:24.765566725Z") == pytest.approx(1795479684.7655668)
    assert plugin.epoch_of("yesterday") is None and plugin.epoch_of(None) is None


def test_absent_plugin_is_null_with_a_note_and_other_errors_say_why():
    notes = []
    missing = jolokia.Result(plugin.read_request("dc1"), {
        "status": 404, "error_type": "javax.management.InstanceNotFoundException",
        "error": 'javax.management.InstanceNotFoundException : org.apache.activemq.artemis:broker="dc1",'
                 'component=continuity'})
    assert plugin.is_absent(missing) and plugin.from_result(missing, notes) is None
    assert notes == [plugin.ABSENT_NOTE % on.continuity("dc1")]
    denied = jolokia.Result(plugin.read_request("dc1"), {"status": 403, "error_type": "java.lang.Exception",
                                                          "error": "User not authorized to access attribute"})
    notes = []
    assert not plugin.is_absent(denied) and plugin.from_result(denied, notes) is None
    assert notes and notes[0].startswith("continuity plugin MBean not readable: Permission denied")


# ------------------------------------------------------------------------------------------ estimates
@pytest.mark.parametrize(("args", "seconds", "messages", "basis"), [
    ((2.9, 0.1, 200.0, 0), 0.0, 0.0, "empty"),
    ((2.9, 0.1, 200.0, 500), 2.9, 580.0, "replication_latency_p99"),
    ((2.9, 12.0, 200.0, 500, False), 12.0, 2400.0, "newest_mirrored_event"),
    ((None, 7.5, None, 10), 7.5, None, "newest_mirrored_event"),
    ((None, None, None, 10), None, None, None),
    ((1.5, None, 10.0, None), 1.5, 15.0, "replication_latency_p99"),
])
def test_replication_rpo(args, seconds, messages, basis):
    est = lag.replication_rpo(*args)
    assert (est.seconds, est.messages, est.basis) == (seconds, messages, basis)
    if seconds is None or args[3] is None:
        assert est.notes  # why it is unknown or approximate


@pytest.mark.parametrize(("args", "total", "unreplicated", "basis"), [
    ((40, 35.0, 2.0), 110.0, 70.0, "ack_rate_x_latency"),
    ((40, 35.0, 2.0, 30), 70.0, 30.0, "backlog"),          # at most what the mirror has not confirmed
    ((40, 35.0, 2.0, 0), 40.0, 0.0, "empty"),              # all acks replicated: in-flight deliveries remain
    ((40, None, 2.0), 40.0, None, None),
    ((None, 35.0, 2.0), None, 70.0, "ack_rate_x_latency"),
])
def test_duplicates_at_risk(args, total, unreplicated, basis):
    est = lag.duplicates_at_risk(*args)
    assert (est.total, est.unreplicated_acks, est.basis) == (total, unreplicated, basis)


def test_plugin_estimates_of_a_direction_use_the_source_ack_model_and_the_target_latency():
    dc1 = {"reachable": True, "continuity_plugin": plugin.from_result(result_of(DC1), [])}
    dc2 = {"reachable": True, "continuity_plugin": plugin.from_result(result_of(DC2), [])}
    est = site_state.plugin_estimates(dc1, dc2, backlog=500, connected=True)
    assert est["rpo_seconds_est"] == 2.883583 and est["rpo_basis"] == "replication_latency_p99"
    assert est["rpo_messages_est"] == pytest.approx(2.883583 * 202.236543)
    assert est["in_flight_deliveries"] == 40
    assert est["duplicates_at_risk_est"] == pytest.approx(40 + 34.637457888232404 * 2.883583)
    assert (est["source_role"], est["target_role"]) == ("active", "passive")
    # without the plugin on either side: None; on one side only: the missing half is said
    assert site_state.plugin_estimates({"reachable": True, "continuity_plugin": None},
                                       {"reachable": True, "continuity_plugin": None}) is None
    half = site_state.plugin_estimates(dc1, {"reachable": True, "continuity_plugin": None}, backlog=5)
    assert half["rpo_seconds_est"] is None and any("target" in n for n in half["notes"])
    assert site_state.plugin_estimates(dc1, {"reachable": False}, backlog=5)["replication_latency_p99_seconds"] is None


# ------------------------------------------------------------------------------------------ site role
class Recorder:
    """Records the Jolokia requests a call makes (no broker behind it: only the request shapes are checked)."""

    def __init__(self):
        self.sent = []

    def request(self, req):
        self.sent.append(req)
        return req["arguments"][0]


@pytest.mark.parametrize(("current", "role", "sent", "changed", "check_mode"), [
    (None, "passive", 0, False, False),       # no plugin: nothing to do, nothing sent
    ("passive", "passive", 0, False, False),  # already there
    ("active", "passive", 1, True, False),
    ("passive", "active", 1, True, False),
    ("active", "passive", 0, True, True),     # check mode: reported, not sent
])
def test_apply_role(current, role, sent, changed, check_mode):
    client = Recorder()
    done = plugin.apply_role(client, "dc2", role, current, check_mode)
    assert len(client.sent) == sent and done["changed"] is changed
    assert done["present"] is (current is not None)
    assert done["role"] == (None if current is None else role)
    if sent:
        assert client.sent == [plugin.set_role_request("dc2", role)]
