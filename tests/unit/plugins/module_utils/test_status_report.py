"""The status runbook's table and role texts (module_utils/status_report.py, filters status_table/rows, roles_text)."""

from __future__ import annotations

from ansible_collections.continuity.artemis.plugins.filter.continuity import FilterModule
from ansible_collections.continuity.artemis.plugins.module_utils.status_report import (
    roles_text,
    status_rows,
    status_table,
)


def _direction(site, peer, **kw):
    d = {"site": site, "peer": peer, "reachable": True, "connection": peer.upper(), "started": True,
         "connected": True, "backlog": 0, "lag_seconds": 0.0, "rpo_seconds_est": 0.0, "paused_queues": [],
         "passive_consumers": None, "broker_version": "2.44.0"}
    d.update(kw)
    return d


HEALTHY = {
    "roles": {"dc1": "active", "dc2": "passive"},
    "persisted_roles": {"dc1": "active", "dc2": "passive"},
    "active_site": "dc1",
    "directions": [_direction("dc1", "dc2", passive_consumers=0), _direction("dc2", "dc1", backlog=12,
                                                                            lag_seconds=0.25)],
}
OK_CHECKS = [{"name": "roles", "ok": True, "detail": "x"}, {"name": "lag", "ok": "True", "detail": "y"}]


def test_roles_text():
    assert roles_text({"dc2": "passive", "dc1": "active"}) == "dc1 active, dc2 passive"
    assert roles_text({"dc1": None, "dc2": ""}) == "dc1 unknown, dc2 unknown"
    assert roles_text({}) == "unknown"
    assert roles_text(None) == "unknown"


def test_healthy_table_has_one_row_per_site_and_the_verdict():
    lines = status_table(HEALTHY, OK_CHECKS)
    assert lines[0].split() [:2] == ["site", "role"]
    assert lines[1].split()[:5] == ["dc1", "active", "up", "2.44.0", "->"]
    assert "-> dc2 connected" in lines[1]
    assert lines[2].split()[:5] == ["dc2", "passive", "up", "2.44.0", "->"]
    assert max(len(line) for line in lines) <= 80, "fits a job log without wrapping"
    assert " 12 " in lines[2] and "0.25" in lines[2]
    assert lines[-1] == "SLA: ok (2 checks)"
    assert len(lines) == 4
    # columns line up: every row starts its mirror column where the header's starts
    col = lines[0].index("mirror out")
    assert all(line[col:].startswith("->") for line in lines[1:3])


def test_no_python_reprs_in_the_table():
    text = "\n".join(status_table(HEALTHY, OK_CHECKS))
    for bad in ("None", "{", "[", "'"):
        assert bad not in text, bad


def test_unreachable_site_and_unknown_roles():
    status = {"roles": {"dc1": "active", "dc2": "unreachable"}, "persisted_roles": {"dc1": "active", "dc2": None},
              "directions": [_direction("dc1", "dc2", connected=False),
                             {"site": "dc2", "peer": "dc1", "reachable": False, "error": "connection refused"}]}
    checks = [{"name": "reachable", "ok": False, "detail": "unreachable: dc2"}, {"name": "roles", "ok": True}]
    lines = status_table(status, checks)
    dc2 = next(line for line in lines if line.startswith("dc2 "))
    assert dc2.split()[:4] == ["dc2", "unreachable", "(unknown", "after"]
    assert "UNREACHABLE" in dc2
    assert "-> dc1 unreadable" in dc2
    assert "-> dc2 NOT CONNECTED" in lines[1]
    assert "dc2: connection refused" in lines
    assert lines[-1] == "SLA: BREACH reachable (unreachable: dc2)"
    rows = status_rows(status)
    assert rows[1]["backlog"] is None and rows[1]["broker"] == "UNREACHABLE"


def test_paused_queues_and_consumers_on_the_passive_site():
    status = dict(HEALTHY, directions=[_direction("dc1", "dc2", paused_queues=["orders", "invoices"],
                                                  passive_consumers=2), _direction("dc2", "dc1", started=False,
                                                                                   connected=False)])
    rows = status_rows(status)
    assert rows[0]["paused"] == 2 and rows[0]["passive_consumers"] == 2
    lines = status_table(status)
    assert "2 (orders, invoices)" in lines[1]
    assert "-> dc1 stopped" in lines[2]
    assert lines[-1] == "SLA: not judged"


def test_a_site_without_directions_still_has_a_row():
    rows = status_rows({"roles": {"dc1": "active", "dc2": "passive"}, "directions": []})
    assert [r["site"] for r in rows] == ["dc1", "dc2"]
    assert rows[0]["mirror"] == "-" and rows[0]["after_restart"] == "unknown"


def test_filters_are_registered():
    filters = FilterModule().filters()
    assert filters["status_table"] is status_table
    assert filters["status_rows"] is status_rows
    assert filters["roles_text"] is roles_text


def test_a_site_served_by_its_backup_needs_no_site_switch():
    status = dict(HEALTHY, ha={"dc1": {"live_broker": "dc1-backup", "takeover": True, "standby": [],
                                       "down": ["dc1"]}})
    lines = status_table(status, OK_CHECKS)
    dc1 = next(line for line in lines if line.startswith("dc1 "))
    assert "dc1-backup up 2.44.0 (backup)" in dc1
    assert "dc1: its backup dc1-backup serves (dc1 down): the site did not fail, no site switch needed" in lines
    assert lines[-1] == "SLA: ok (2 checks)"


def test_a_pair_in_order_names_the_live_broker_and_the_one_standing_by():
    status = dict(HEALTHY, ha={"dc1": {"live_broker": "dc1", "takeover": False, "standby": ["dc1-backup"],
                                       "down": []}})
    lines = status_table(status, OK_CHECKS)
    assert "dc1: dc1 serves, dc1-backup stands by" in lines
    broken = dict(HEALTHY, ha={"dc1": {"live_broker": "dc1", "takeover": False, "standby": [],
                                       "down": ["dc1-backup"]}})
    assert "dc1: dc1 serves, dc1-backup does not answer (no backup now)" in status_table(broken, OK_CHECKS)
    # single-broker sites say nothing more
    assert not any("serves" in line for line in status_table(HEALTHY, OK_CHECKS))


def test_a_pair_with_no_broker_serving_says_the_site_is_down():
    status = dict(HEALTHY, ha={"dc2": {"live_broker": "dc2", "serving": False, "takeover": False, "standby": [],
                                       "down": ["dc2-backup"]}})
    lines = status_table(status, OK_CHECKS)
    assert "dc2: no broker of the pair serves (dc2, dc2-backup): the site is down, see the failover runbook" in lines
    assert not any(line.startswith("dc2: dc2 serves") for line in lines)


def test_the_backup_standing_by_is_said_in_sync_or_not_only_when_known():
    def line(in_sync):
        ha = {"dc1": {"live_broker": "dc1", "takeover": False, "standby": ["dc1-backup"], "down": [],
                      "in_sync": in_sync}}
        return next(x for x in status_table(dict(HEALTHY, ha=ha), OK_CHECKS) if x.startswith("dc1: "))

    assert line({"dc1-backup": True}) == "dc1: dc1 serves, dc1-backup stands by in sync"
    assert line({"dc1-backup": False}) == "dc1: dc1 serves, dc1-backup stands by (not in sync: dc1-backup)"
    assert line({"dc1-backup": None}) == "dc1: dc1 serves, dc1-backup stands by"


def test_a_shared_store_backup_standing_by_is_said_on_the_shared_store_never_out_of_sync():
    """Its ReplicaSync reads false on Artemis (nothing to copy): pair_state leaves it out of in_sync."""
    from ansible_collections.continuity.artemis.plugins.filter.continuity import ha_pair

    primary = {"role": "active", "reachable": True, "live": True,
               "ha": {"policy": "Shared Store Primary", "backup": False, "active": True, "replica_sync": False}}
    standby = {"role": "standby", "reachable": True, "live": False,
               "ha": {"policy": "Shared Store Backup", "backup": True, "active": False, "replica_sync": False}}
    ha = {"dc1": ha_pair([{"broker": "dc1", "state": primary}, {"broker": "dc1-backup", "state": standby}])}
    lines = status_table(dict(HEALTHY, ha=ha), OK_CHECKS)
    assert "dc1: dc1 serves, dc1-backup stands by on the shared store" in lines, lines
    assert not any("not in sync" in x for x in lines)


def test_the_ha_pair_filter_reads_site_role_results_like_status_yml_did():
    from ansible_collections.continuity.artemis.plugins.filter.continuity import ha_pair

    backup_live = {"role": "active", "reachable": True, "live": True,
                   "ha": {"policy": "Replication Backup w/quorum voting", "backup": False, "active": True}}
    # a host Ansible could not reach has no `reachable` in its result: it is down
    state = ha_pair([{"broker": "dc1", "state": {"unreachable": True}}, {"broker": "dc1-backup", "state": backup_live}])
    assert state["live_broker"] == "dc1-backup" and state["takeover"] and state["down"] == ["dc1"]
    assert state["switch_needed"] is False
    standby = {"role": "standby", "reachable": True, "live": False,
               "ha": {"policy": "Replication Backup w/quorum voting", "backup": True, "active": False,
                      "replica_sync": True}}
    both_unreadable = ha_pair([{"broker": "dc1", "state": {"reachable": False}},
                               {"broker": "dc1-backup", "state": standby}])
    assert both_unreadable["serving"] is False and both_unreadable["switch_needed"] is True
    assert both_unreadable["standby"] == ["dc1-backup"] and both_unreadable["in_sync"] == {"dc1-backup": True}
    text = " ".join(status_table(dict(HEALTHY, ha={"dc1": both_unreadable}), OK_CHECKS))
    assert "no broker of the pair serves" in text


def test_agent_site_filter_lists_the_brokers_of_a_pair_and_keeps_one_broker_flat():
    from ansible_collections.continuity.artemis.plugins.filter.continuity import agent_site

    primary = {"jolokia_url": "u1", "username": "a", "password": "p", "broker_name": "dc1",
               "client_acceptors": ["artemis"]}
    backup = dict(primary, jolokia_url="u2", broker_name="dc1-backup")
    flat = {"jolokia": {"url": "u1", "username": "a", "password": "p"}, "broker_name": "dc1",
            "client_acceptors": ["artemis"]}
    assert agent_site(primary) == flat and agent_site([primary]) == flat
    assert agent_site([primary, backup]) == {
        "brokers": [{"broker_name": "dc1", "jolokia": {"url": "u1", "username": "a", "password": "p"}},
                    {"broker_name": "dc1-backup", "jolokia": {"url": "u2", "username": "a", "password": "p"}}],
        "client_acceptors": ["artemis"]}
