"""Site-role model: role derivation and the broker.xml fence."""

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import site_role

BROKER_XML = """<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <acceptors>
      <!-- clients -->
      <acceptor name="artemis">tcp://127.0.0.1:61616?protocols=CORE,AMQP;amqpCredits=1000</acceptor>
      <acceptor name="amqp">tcp://127.0.0.1:5672?protocols=AMQP;autoStart=false</acceptor>
      <acceptor name="mirror">tcp://127.0.0.1:5673?protocols=AMQP</acceptor>
    </acceptors>
  </core>
</configuration>
"""


def test_derive_role_active_passive_mixed():
    assert site_role.derive_role({"artemis": True, "amqp": True, "mirror": True}, ["artemis", "amqp"]) == "active"
    assert site_role.derive_role({"artemis": False, "amqp": False, "mirror": True}, ["artemis", "amqp"]) == "passive"
    assert site_role.derive_role({"artemis": True, "amqp": False}, ["artemis", "amqp"]) == "mixed"


def test_derive_role_names_missing_acceptors():
    with pytest.raises(ValueError, match=r"client acceptor\(s\) clients not found.*amqp, mirror"):
        site_role.derive_role({"amqp": True, "mirror": True}, ["clients"])


def test_set_uri_param_keeps_other_params_in_order():
    uri = "tcp://h:1?a=1;autoStart=true;b=2"
    assert site_role.set_uri_param(uri, "autoStart", "false") == "tcp://h:1?a=1;autoStart=false;b=2"
    assert site_role.set_uri_param("tcp://h:1", "autoStart", "false") == "tcp://h:1?autoStart=false"


def test_fence_edits_only_named_acceptors_and_is_idempotent():
    text, changed = site_role.set_acceptors_auto_start(BROKER_XML, ["artemis", "amqp"], False)
    assert changed == ["artemis"]  # amqp already had autoStart=false
    uris = site_role.acceptor_uris(text)
    assert uris["artemis"] == "tcp://127.0.0.1:61616?protocols=CORE,AMQP;amqpCredits=1000;autoStart=false"
    assert uris["mirror"] == "tcp://127.0.0.1:5673?protocols=AMQP"
    assert "<!-- clients -->" in text  # comments and layout survive
    again, changed_again = site_role.set_acceptors_auto_start(text, ["artemis", "amqp"], False)
    assert again == text and changed_again == []
    assert site_role.persisted_role(text, ["artemis", "amqp"]) == "passive"
    active, changed = site_role.set_acceptors_auto_start(text, ["artemis", "amqp"], True)
    assert sorted(changed) == ["amqp", "artemis"]
    assert site_role.persisted_role(active, ["artemis", "amqp"]) == "active"


def test_fence_refuses_unknown_acceptor():
    with pytest.raises(ValueError, match=r"acceptor\(s\) clients not found in broker.xml"):
        site_role.set_acceptors_auto_start(BROKER_XML, ["clients"], False)


def test_persisted_role_of_the_sample_is_mixed():
    assert site_role.persisted_role(BROKER_XML, ["artemis", "amqp"]) == "mixed"


@pytest.mark.parametrize(
    ("version", "method"),
    [((2, 42, 0), "start"), ((2, 43, 0), "reload"), ((2, 44, 0), "reload"), ((2, 30, 0), "start"), (None, "start")],
)
def test_activation_method_by_version(version, method):
    assert site_role.activation_method(version) == method


# --- HA (docs/ha.md): a backup standing by is not a site role ------------------------------------------------------
def test_a_backup_that_is_not_live_is_standby_and_its_site_is_read_elsewhere():
    from ansible_collections.continuity.artemis.plugins.module_utils import switch

    standby = {"reachable": True, "backup": True, "active": False, "acceptors": {},
               "ha_policy": "Replication Backup w/quorum voting"}
    assert site_role.is_standby(standby) is True
    # no acceptors on a standby backup: without the rule derive_role would raise on the missing client acceptor
    assert switch.role_of(standby, ["artemis"]) == site_role.STANDBY
    assert site_role.ha_state(standby) == {"policy": "Replication Backup w/quorum voting", "backup": True,
                                           "active": False, "replica_sync": None}


@pytest.mark.parametrize("snapshot", [
    {"reachable": True, "backup": False, "active": True},    # a primary, or a backup that took over
    {"reachable": True, "backup": None, "active": True},     # no HA at all
    {"reachable": False, "backup": True, "active": False},   # unknown: reported unreachable, not standby
])
def test_live_brokers_and_unreachable_ones_are_not_standby(snapshot):
    assert site_role.is_standby(snapshot) is False


# --- pair_state: the one rule status.yml (filter ha_pair) and the agent use for a site with several brokers --------
PRIMARY_LIVE = {"reachable": True, "backup": False, "active": True, "ha_policy": "Replication Primary w/quorum voting",
                "replica_sync": True}
BACKUP_STANDING_BY = {"reachable": True, "backup": True, "active": False,
                      "ha_policy": "Replication Backup w/quorum voting", "replica_sync": True}
BACKUP_LIVE = {"reachable": True, "backup": False, "active": True, "ha_policy": "Replication Backup w/quorum voting",
               "replica_sync": False}
DOWN = {"reachable": False, "error": "connection refused"}


def _pair(*snaps):
    return site_role.pair_state([site_role.broker_facts(name, snap)
                                 for name, snap in zip(("dc1", "dc1-backup", "dc1-third"), snaps, strict=False)])


def test_a_pair_in_order_is_served_by_its_primary_and_the_backup_stands_by_in_sync():
    assert _pair(PRIMARY_LIVE, BACKUP_STANDING_BY) == {
        "live_broker": "dc1", "serving": True, "takeover": False, "standby": ["dc1-backup"],
        "in_sync": {"dc1-backup": True}, "shared_store": [], "down": [], "switch_needed": False}


def test_a_backup_that_took_over_serves_the_site_and_no_switch_is_needed():
    state = _pair(DOWN, BACKUP_LIVE)
    assert state["live_broker"] == "dc1-backup" and state["serving"] and state["takeover"]
    assert state["down"] == ["dc1"] and state["standby"] == [] and state["switch_needed"] is False


def test_a_pair_where_nothing_serves_needs_a_site_switch():
    # both down: described by the first broker listed (as the runbooks do), not serving
    assert _pair(DOWN, DOWN) == {"live_broker": "dc1", "serving": False, "takeover": False, "standby": [],
                                 "in_sync": {}, "shared_store": [], "down": ["dc1-backup"], "switch_needed": True}
    # the primary dead and its backup still standing by (not yet voted live): nothing serves either
    state = _pair(DOWN, BACKUP_STANDING_BY)
    assert state["serving"] is False and state["switch_needed"] is True
    assert state["standby"] == ["dc1-backup"] and state["live_broker"] == "dc1"


def test_a_backup_not_yet_in_sync_is_reported_and_unknown_sync_stays_unknown():
    assert _pair(PRIMARY_LIVE, dict(BACKUP_STANDING_BY, replica_sync=False))["in_sync"] == {"dc1-backup": False}
    assert _pair(PRIMARY_LIVE, dict(BACKUP_STANDING_BY, replica_sync=None))["in_sync"] == {"dc1-backup": None}


# A shared-store pair (Artemis 2.44 on the lab, LAB_TOPOLOGY=ha-shared): the standing-by backup reads ReplicaSync false
# (it copies nothing: it loads the pair's one store when it takes over); its HAPolicy is the configured policy's name,
# so the backup that took over still reads "Shared Store Backup".
SHARED_PRIMARY_LIVE = {"reachable": True, "backup": False, "active": True, "ha_policy": "Shared Store Primary",
                       "replica_sync": False}
SHARED_BACKUP_STANDING_BY = {"reachable": True, "backup": True, "active": False, "ha_policy": "Shared Store Backup",
                             "replica_sync": False}
SHARED_BACKUP_LIVE = {"reachable": True, "backup": False, "active": True, "ha_policy": "Shared Store Backup",
                      "replica_sync": False}


def test_a_shared_store_backup_standing_by_is_on_the_shared_store_not_out_of_sync():
    state = _pair(SHARED_PRIMARY_LIVE, SHARED_BACKUP_STANDING_BY)
    assert state == {"live_broker": "dc1", "serving": True, "takeover": False, "standby": ["dc1-backup"],
                     "in_sync": {}, "shared_store": ["dc1-backup"], "down": [], "switch_needed": False}
    # a replicating backup in the same site is still judged by its ReplicaSync
    mixed = _pair(SHARED_PRIMARY_LIVE, SHARED_BACKUP_STANDING_BY, dict(BACKUP_STANDING_BY, replica_sync=False))
    assert mixed["in_sync"] == {"dc1-third": False} and mixed["shared_store"] == ["dc1-backup"]


def test_a_shared_store_backup_that_took_over_serves_the_site_and_no_switch_is_needed():
    state = _pair(DOWN, SHARED_BACKUP_LIVE)
    assert state["live_broker"] == "dc1-backup" and state["serving"] and state["takeover"]
    assert state["down"] == ["dc1"] and state["shared_store"] == [] and state["switch_needed"] is False
    # the primary took the store back (allow-failback): not a takeover, the backup stands by again
    back = _pair(SHARED_PRIMARY_LIVE, SHARED_BACKUP_STANDING_BY)
    assert back["takeover"] is False and back["live_broker"] == "dc1"


def test_a_primary_that_came_back_live_is_not_a_takeover_and_an_empty_site_has_no_pair():
    # allow-failback: the primary is live again, the backup went back to standing by
    # the live broker is the first LIVE one, wherever it is listed
    assert _pair(BACKUP_STANDING_BY, PRIMARY_LIVE)["live_broker"] == "dc1-backup"
    state = _pair(PRIMARY_LIVE, BACKUP_STANDING_BY, DOWN)
    assert state["takeover"] is False and state["down"] == ["dc1-third"]
    assert site_role.pair_state([]) is None


def test_broker_facts_match_the_site_role_module_result():
    assert site_role.broker_facts("dc1", DOWN) == {"broker": "dc1", "reachable": False, "live": False, "role": None,
                                                   "ha": None}
    facts = site_role.broker_facts("dc1-backup", BACKUP_STANDING_BY)
    assert facts["live"] is False and facts["role"] == site_role.STANDBY and facts["ha"]["replica_sync"] is True
