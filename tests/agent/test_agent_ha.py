"""A site with several brokers (an HA pair, docs/ha.md) in the agent: configuration, the choice of the live broker
(site_role.pair_state, the rule status.yml uses too) and the per-broker metrics, against fake Artemis brokers."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from conftest import base_config, fakes
from test_agent_unit import D12, D21, scrape, val

from continuity_agent import metrics, model
from continuity_agent.config import ConfigError, parse
from continuity_agent.service import Agent

BACKUP = "dc1-backup"
HA_METRICS = {"continuity_site_live_broker", "continuity_site_ha_takeover", "continuity_broker_up",
              "continuity_broker_ha_backup", "continuity_broker_ha_replica_sync", "continuity_broker_ha_shared_store"}
J = {"username": "admin", "password": "secret"}


def pair_config(**over):
    cfg = base_config(**over)
    cfg["sites"]["dc1"] = {"brokers": [
        {"broker_name": "dc1", "jolokia": dict(J, url="http://dc1:8161/console/jolokia")},
        {"broker_name": "dc1-backup", "jolokia": dict(J, url="http://dc1-backup:8161/console/jolokia")}],
        "client_acceptors": ["amqp"]}
    return cfg


# --- configuration ------------------------------------------------------------------------------------------------
def test_a_site_lists_its_brokers_primary_first():
    cfg = parse(pair_config())
    dc1 = cfg.sites["dc1"]
    assert dc1.is_pair and [b.name for b in dc1.brokers] == ["dc1", "dc1-backup"]
    assert dc1.brokers[1].jolokia.url == "http://dc1-backup:8161/console/jolokia"
    assert dc1.jolokia.url == "http://dc1:8161/console/jolokia" and dc1.broker_name == "dc1"  # the primary's
    assert not cfg.sites["dc2"].is_pair and cfg.sites["dc2"].brokers == ()
    assert "secret" not in repr(cfg)


@pytest.mark.parametrize("change,key", [
    (lambda s: s.update(jolokia={"url": "http://x:1/console/jolokia"}), "sites.dc1.jolokia"),
    (lambda s: s["brokers"][1].pop("broker_name"), "sites.dc1.brokers[1].broker_name"),
    (lambda s: s["brokers"][1].update(broker_name="dc1"), "sites.dc1.brokers"),
    (lambda s: s["brokers"][0].update(url="http://x"), "sites.dc1.brokers[0].url"),
    (lambda s: s["brokers"][0]["jolokia"].pop("password"), "sites.dc1.brokers[0].jolokia.password"),
    (lambda s: s.update(brokers=[]), "sites.dc1.brokers"),
])
def test_broker_list_errors_name_the_key(change, key):
    cfg = pair_config()
    change(cfg["sites"]["dc1"])
    with pytest.raises(ConfigError) as err:
        parse(cfg)
    assert err.value.key == key, str(err.value)
    assert "secret" not in str(err.value)


# --- the live broker (pure, fake snapshots) -----------------------------------------------------------------------
def snap(broker, **over):
    s = {"broker": broker, "reachable": True, "ts": 100.0, "backup": False, "active": True,
         "ha_policy": "Replication Primary w/quorum voting", "replica_sync": True, "url": f"http://{broker}:8161"}
    s.update(over)
    return s


STANDING_BY = {"backup": True, "active": False, "ha_policy": "Replication Backup w/quorum voting"}


def test_select_live_reads_the_site_from_the_live_broker():
    primary, backup = snap("dc1"), snap("dc1-backup", **STANDING_BY)
    site, state = model.select_live("dc1", [("dc1", primary), ("dc1-backup", backup)])
    assert site is primary and state["live_broker"] == "dc1" and not state["switch_needed"]
    assert [(b.broker, b.up, b.live, b.backup, b.replica_sync) for b in state["brokers"]] == [
        ("dc1", True, True, False, True), ("dc1-backup", True, False, True, True)]


SHARED_PRIMARY = {"ha_policy": "Shared Store Primary", "replica_sync": False}
SHARED_STANDING_BY = {"backup": True, "active": False, "ha_policy": "Shared Store Backup", "replica_sync": False}


def test_select_live_keeps_no_replica_sync_for_a_backup_on_a_shared_store():
    """pair_state lists a shared-store backup under shared_store (Artemis reads ReplicaSync false on it: nothing to
    synchronise): the agent takes that judgement and keeps no ReplicaSync for it; a replicated backup keeps its own."""
    primary, backup = snap("dc1", **SHARED_PRIMARY), snap(BACKUP, **SHARED_STANDING_BY)
    _site, state = model.select_live("dc1", [("dc1", primary), (BACKUP, backup)])
    assert state["shared_store"] == [BACKUP] and state["in_sync"] == {}
    assert [(b.broker, b.backup, b.replica_sync, b.shared_store) for b in state["brokers"]] == [
        ("dc1", False, False, False), (BACKUP, True, None, True)]
    _site, state = model.select_live("dc1", [("dc1", snap("dc1")),
                                             (BACKUP, snap(BACKUP, **STANDING_BY, replica_sync=False))])
    assert [(b.broker, b.replica_sync, b.shared_store) for b in state["brokers"]] == [
        ("dc1", True, False), (BACKUP, False, False)]
    # a broker that does not answer: unknown, not "not shared"
    down = {"broker": BACKUP, "reachable": False, "ts": 101.0, "error": "Connection refused"}
    _site, state = model.select_live("dc1", [("dc1", primary), (BACKUP, down)])
    assert state["brokers"][1].shared_store is None and state["brokers"][1].replica_sync is None


def test_select_live_after_the_primary_died_is_the_backup_and_no_switch_is_needed():
    down = {"broker": "dc1", "reachable": False, "ts": 101.0, "error": "Connection refused"}
    took_over = snap("dc1-backup", ha_policy="Replication Backup w/quorum voting", replica_sync=False)
    site, state = model.select_live("dc1", [("dc1", down), ("dc1-backup", took_over)])
    assert site is took_over and state["takeover"] and state["switch_needed"] is False
    assert state["brokers"][0].error == "Connection refused" and state["brokers"][0].backup is None


def test_select_live_with_nothing_serving_makes_the_site_unreachable():
    down = {"broker": "dc1", "reachable": False, "ts": 101.0, "error": "Connection refused"}
    site, state = model.select_live("dc1", [("dc1", down), ("dc1-backup", snap("dc1-backup", ts=102.0, **STANDING_BY))])
    assert state["switch_needed"] is True and site["reachable"] is False and site["ts"] == 102.0
    assert site["error"] == "no broker of the site serves: dc1 down (Connection refused), dc1-backup stands by"


# --- the agent against fake brokers -------------------------------------------------------------------------------
class Pair:
    """dc1 as a primary (the unit fixture) and its backup standing by; dc2 a single passive broker."""

    def __init__(self, two_sites):
        self.t = two_sites
        data = fakes.load_fixture("site-2.44-dc1.json")
        standby = dict(copy.deepcopy(data), name="dc1-backup", acceptors={}, broker_connections=[], queues=[],
                       addresses={})
        standby["broker"] = dict(data.get("broker") or {}, Backup=True, Active=False, ReplicaSync=True,
                                 HAPolicy="Replication Backup w/quorum voting")
        self.backup = fakes.FakeArtemis(standby, "http://dc1-backup:8161/console/jolokia")
        self.backup.allowed_origins = ["http://dc1-backup:8161"]
        two_sites.dc1.broker_attrs.update(HAPolicy="Replication Primary w/quorum voting", ReplicaSync=True)

    def clients(self):
        return {"dc1/dc1": fakes.make_client(self.t.dc1), "dc1/dc1-backup": fakes.make_client(self.backup),
                "dc2": fakes.make_client(self.t.dc2)}

    def kill_primary_backup_takes_over(self):
        """kill -9 of the primary; the backup becomes live with the primary's state (replicated journal)."""
        self.t.dc1.fail_connections = 10 ** 6
        p = self.t.dc1
        self.backup.acceptors = copy.deepcopy(p.acceptors)
        self.backup.connections = copy.deepcopy(p.connections)
        self.backup.queues = copy.deepcopy(p.queues)
        self.backup.addresses = copy.deepcopy(p.addresses)
        # a broker that started again counts from 0: rates across the switch would be made up
        for q in self.backup.queues:
            q["MessagesAdded"] = q["MessagesAcknowledged"] = 0
        self.backup.broker_attrs.update(Backup=False, Active=True, ReplicaSync=False)


@pytest.fixture
def pair(two_sites, tmp_path):
    p = Pair(two_sites)
    agent = Agent(parse(pair_config(evidence={"dir": str(tmp_path / "ev"), "run_id": "ha"},
                                    state_dir=str(tmp_path / "state"))),
                  clients=p.clients(), clock=two_sites.clock)
    p.agent = agent
    yield p
    agent.close()


def test_a_pair_in_order_exports_the_live_primary_and_the_backup_in_sync(pair):
    pair.agent.sample_once()
    m = scrape(pair.agent)
    assert val(m, "continuity_site_live_broker", site="dc1", broker="dc1") == 1
    assert val(m, "continuity_site_live_broker", site="dc1", broker="dc1-backup") == 0
    assert val(m, "continuity_broker_up", site="dc1", broker="dc1-backup") == 1
    assert val(m, "continuity_broker_ha_backup", site="dc1", broker="dc1-backup") == 1
    assert val(m, "continuity_broker_ha_backup", site="dc1", broker="dc1") == 0
    assert val(m, "continuity_broker_ha_replica_sync", site="dc1", broker="dc1-backup") == 1
    assert val(m, "continuity_site_ha_takeover", site="dc1") == 0
    assert val(m, "continuity_site_switch_needed", site="dc1") == 0
    assert val(m, "continuity_site_switch_needed", site="dc2") == 0
    # the site is read from the primary: role, mirror; the single-broker dc2 has no per-broker series
    assert val(m, "continuity_site_role", site="dc1", role="active") == 1
    assert val(m, "continuity_mirror_connected", **D12) == 1 and val(m, "continuity_mirror_connected", **D21) == 1
    assert not [k for k in m if k[0] in HA_METRICS and ("site", "dc2") in k[1]]
    health = pair.agent.health()[1]["sites"]
    assert health["dc1"] == {"reachable": True, "role": "active", "live_broker": "dc1", "switch_needed": False}
    assert health["dc2"] == {"reachable": True, "role": "passive"}


def test_a_shared_store_backup_standing_by_exports_no_replica_sync_and_says_its_store_is_shared(pair):
    """Artemis reads ReplicaSync false on a shared-store backup; exported as 0 it would read 'not in sync' (and fire
    ContinuityHaBackupNotInSync). The agent follows site_role.pair_state: no replica_sync series for it,
    continuity_broker_ha_shared_store 1 instead."""
    pair.t.dc1.broker_attrs.update(HAPolicy="Shared Store Primary", ReplicaSync=False)
    pair.backup.broker_attrs.update(HAPolicy="Shared Store Backup", ReplicaSync=False)
    pair.agent.sample_once()
    m = scrape(pair.agent)
    assert val(m, "continuity_broker_ha_backup", site="dc1", broker=BACKUP) == 1
    assert val(m, "continuity_broker_ha_replica_sync", site="dc1", broker=BACKUP) is None
    assert not [k for k in m if k[0] == "continuity_broker_ha_replica_sync" and ("broker", BACKUP) in k[1]]
    assert val(m, "continuity_broker_ha_shared_store", site="dc1", broker=BACKUP) == 1
    assert val(m, "continuity_broker_ha_shared_store", site="dc1", broker="dc1") == 0
    assert val(m, "continuity_site_live_broker", site="dc1", broker="dc1") == 1
    assert val(m, "continuity_site_switch_needed", site="dc1") == 0
    # the same pair replicated: the backup's ReplicaSync false is exported as 0 (it is behind), shared_store 0
    pair.backup.broker_attrs.update(HAPolicy="Replication Backup w/quorum voting")
    pair.agent.sample_once()
    m = scrape(pair.agent)
    assert val(m, "continuity_broker_ha_replica_sync", site="dc1", broker=BACKUP) == 0
    assert val(m, "continuity_broker_ha_shared_store", site="dc1", broker=BACKUP) == 0


def test_the_primary_killed_the_backup_serves_and_no_site_switch_is_needed(pair):
    pair.agent.sample_once()
    pair.t.clock.advance(1)
    pair.kill_primary_backup_takes_over()
    cycle = pair.agent.sample_once()
    m = scrape(pair.agent)
    assert val(m, "continuity_site_live_broker", site="dc1", broker="dc1-backup") == 1
    assert val(m, "continuity_site_live_broker", site="dc1", broker="dc1") == 0
    assert val(m, "continuity_broker_up", site="dc1", broker="dc1") == 0
    assert val(m, "continuity_broker_ha_backup", site="dc1", broker="dc1") is None  # unknown: absent, not 0
    assert val(m, "continuity_site_ha_takeover", site="dc1") == 1
    assert val(m, "continuity_site_switch_needed", site="dc1") == 0
    assert val(m, "continuity_site_reachable", site="dc1") == 1
    assert val(m, "continuity_site_role", site="dc1", role="active") == 1
    assert val(m, "continuity_mirror_up", **D12) == 1 and val(m, "continuity_mirror_connected", **D12) == 1
    # the counters of another broker are not a rate: no made-up (negative) rate right after the switch
    assert val(m, "continuity_mirror_add_rate_events_per_second", **D12) is None
    assert cycle.sites["dc1"].broker == "dc1-backup"
    assert any("no site switch needed" in n for n in cycle.sites["dc1"].notes)
    pair.t.clock.advance(1)
    pair.t.snf(pair.backup)["MessagesAdded"] += 10
    pair.t.snf(pair.backup)["MessagesAcknowledged"] += 10
    pair.agent.sample_once()
    assert val(scrape(pair.agent), "continuity_mirror_add_rate_events_per_second", **D12) == 10


def test_no_broker_serving_needs_a_site_switch_and_keeps_the_last_known_backlog(pair):
    pair.agent.sample_once()
    backlog = val(scrape(pair.agent), "continuity_mirror_backlog_events", **D12)
    pair.t.clock.advance(1)
    pair.t.dc1.fail_connections = 10 ** 6          # primary dead, backup still standing by (no vote yet)
    cycle = pair.agent.sample_once()
    m = scrape(pair.agent)
    assert val(m, "continuity_site_switch_needed", site="dc1") == 1
    assert val(m, "continuity_site_reachable", site="dc1") == 0
    assert val(m, "continuity_site_live_broker", site="dc1", broker="dc1") == 0
    assert val(m, "continuity_site_live_broker", site="dc1", broker="dc1-backup") == 0
    assert val(m, "continuity_broker_up", site="dc1", broker="dc1-backup") == 1
    assert val(m, "continuity_mirror_up", **D12) == 0
    assert val(m, "continuity_mirror_backlog_events", **D12) == backlog
    assert "dc1-backup stands by" in cycle.sites["dc1"].error
    pair.backup.fail_connections = 10 ** 6
    pair.t.clock.advance(1)
    pair.agent.sample_once()
    m = scrape(pair.agent)
    assert val(m, "continuity_broker_up", site="dc1", broker="dc1-backup") == 0
    assert val(m, "continuity_site_switch_needed", site="dc1") == 1


def test_a_single_broker_site_needs_a_switch_only_when_it_cannot_be_read(make_agent, two_sites):
    agent = make_agent()
    agent.sample_once()
    assert val(scrape(agent), "continuity_site_switch_needed", site="dc2") == 0
    two_sites.dc2.fail_connections = 10 ** 6
    agent.sample_once()
    m = scrape(agent)
    assert val(m, "continuity_site_switch_needed", site="dc2") == 1
    assert not [k for k in m if k[0] in HA_METRICS]  # no per-broker series for single-broker sites


def test_ha_metrics_are_in_the_metric_list_and_documented():
    assert HA_METRICS | {"continuity_site_switch_needed"} <= set(metrics.BY_NAME)
    text = (Path(__file__).resolve().parents[2] / "docs" / "agent.md").read_text()
    assert [n for n in HA_METRICS if f"`{n}`" not in text] == []


def test_the_agent_site_filter_gives_a_pair_the_agent_parses():
    from ansible_collections.continuity.artemis.plugins.filter.continuity import agent_site

    infos = [{"jolokia_url": f"http://{b}:8161/console/jolokia", "username": "admin", "password": "pw",
              "broker_name": b, "client_acceptors": ["artemis"]} for b in ("dc1", "dc1-backup")]
    cfg = base_config()
    cfg["sites"]["dc1"] = agent_site(infos)
    dc1 = parse(cfg).sites["dc1"]
    assert [b.name for b in dc1.brokers] == ["dc1", "dc1-backup"] and dc1.client_acceptors == ("artemis",)


def test_once_prints_the_brokers_of_a_pair_as_data(tmp_path):
    import json
    import subprocess
    import sys

    cfg = {"listen": {"enabled": False}, "sites": {
        "dc1": {"brokers": [{"broker_name": b, "jolokia": {"url": f"http://127.0.0.1:{p}/console/jolokia",
                                                           "timeout": 0.5}} for b, p in (("dc1", 1), (BACKUP, 2))]},
        "dc2": {"jolokia": {"url": "http://127.0.0.1:3/console/jolokia", "timeout": 0.5}}}}
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(cfg))
    path.chmod(0o600)
    res = subprocess.run([sys.executable, "-m", "continuity_agent", "--config", str(path), "--once"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    dc1 = json.loads(res.stdout)["sites"]["dc1"]
    assert [(b["broker"], b["up"]) for b in dc1["ha"]["brokers"]] == [("dc1", False), (BACKUP, False)]
    assert dc1["switch_needed"] is True and dc1["error"].startswith("no broker of the site serves: dc1 down")
