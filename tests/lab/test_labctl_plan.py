"""labctl's port plan agrees with the lab inventory (no broker started)."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml
from conftest import REPO

from continuity_lab import labctl


def test_documented_port_layout() -> None:
    plan = labctl.make_plan({"LAB_ROOT": "/tmp/x", "LAB_PORT_BASE": "20000"})
    assert (plan.sites["dc1"].http, plan.sites["dc1"].client, plan.sites["dc1"].mirror) == (20161, 20616, 20617)
    assert (plan.sites["dc2"].http, plan.sites["dc2"].client, plan.sites["dc2"].mirror) == (20261, 20716, 20717)
    assert plan.wan_listen == {"dc1": 20900, "dc2": 20901} and plan.wan_control == {"dc1": 20910, "dc2": 20911}
    assert plan.version == labctl.DEFAULT_VERSION


def test_auto_base_gives_a_free_numeric_block_the_inventory_can_use(tmp_path) -> None:
    # a fresh lab root: the default one (build/lab) keeps the block of a lab that is up there (make lab-up)
    plan = labctl.make_plan({"LAB_PORT_BASE": "auto", "LAB_ROOT": str(tmp_path / "lab")})
    assert plan.base % 1000 == 0 and 21000 <= plan.base < 31500
    assert labctl.plan_env(plan)["LAB_PORT_BASE"] == str(plan.base)
    ports = labctl.block_ports(plan.base)
    # 3 broker slots (dc1, dc2, an HA backup) x (http, client, mirror, cluster) + 3 WAN links x (listen, control)
    assert len(set(ports)) == len(ports) == 18


def test_auto_base_stays_in_the_share_runs_side_by_side_were_given(tmp_path) -> None:
    # two pytest runs side by side (tests/run-side-by-side.sh) each draw from their own half
    halves = [labctl.share_range(i, 2) for i in range(2)]
    assert halves[0][1] <= halves[1][0] and all(hi - lo >= labctl.BLOCK_SIZE for lo, hi in halves)
    for i, (lo, hi) in enumerate(halves):
        for n in range(3):
            plan = labctl.make_plan({"LAB_PORT_BASE": "auto", "LAB_PORT_SHARE": f"{i}/2",
                                     "LAB_ROOT": str(tmp_path / f"lab-{i}-{n}")})
            assert lo <= plan.base < hi, (i, plan.base)


def test_running_stops_the_lab_after_the_block_and_after_a_failed_up(tmp_path, monkeypatch) -> None:
    plan = labctl.make_plan({"LAB_ROOT": str(tmp_path / "lab"), "LAB_PORT_BASE": "20000"})
    calls = []
    monkeypatch.setattr(labctl, "up", lambda p, timeout=900: calls.append(("up", p)) or {"sites": {}})
    monkeypatch.setattr(labctl, "down", lambda p: calls.append(("down", p)) or [])
    with labctl.running(plan) as endpoints:
        assert endpoints == {"sites": {}} and calls == [("up", plan)]
    assert calls == [("up", plan), ("down", plan)]

    def broken_up(p, timeout=900):
        raise SystemExit("lab: dc2 did not start")

    calls.clear()
    monkeypatch.setattr(labctl, "up", broken_up)
    with pytest.raises(SystemExit, match="dc2 did not start"), labctl.running(plan):
        pass
    assert calls == [("down", plan)]  # what the half-started lab left is stopped


def test_inventory_offsets_match_the_plan() -> None:
    """The inventory computes ports from LAB_PORT_BASE with its own arithmetic: both must give the same block."""
    group = yaml.safe_load((REPO / "inventories/lab/group_vars/artemis.yml").read_text())
    offsets = {k: yaml.safe_load((REPO / f"inventories/lab/group_vars/{k}.yml").read_text())["broker_port_offset"]
               for k in labctl.SITES}
    assert offsets == {"dc1": 0, "dc2": labctl.SITE_STEP}
    assert f"+ {labctl.HTTP}" in group["broker_http_port"]
    client = next(a for a in group["broker_acceptors"] if a["name"] == "artemis")
    assert f"+ {labctl.CLIENT}" in client["port"]
    assert f"+ {labctl.MIRROR}" in group["broker_mirror_acceptor"]["port"]
    assert group["lab_wan_ports"] == {"dc1": f"{{{{ lab_port_base | int + {labctl.WAN_LISTEN} }}}}",
                                      "dc2": f"{{{{ lab_port_base | int + {labctl.WAN_LISTEN + 1} }}}}"}


def test_every_lab_version_has_a_pinned_checksum() -> None:
    group = yaml.safe_load((REPO / "inventories/lab/group_vars/artemis.yml").read_text())
    sums = group["lab_artemis_sha512"]
    assert labctl.DEFAULT_VERSION in sums
    assert all(len(v) == 128 and int(v, 16) >= 0 for v in sums.values())


def test_auto_base_is_kept_by_a_lab_root(tmp_path) -> None:
    """A second `up` (or `down`) of the same LAB_ROOT must address the ports the lab was deployed on."""
    first = labctl.make_plan({"LAB_ROOT": str(tmp_path), "LAB_PORT_BASE": "auto"})
    labctl._save_state(tmp_path, {"processes": [], "port_base": first.base})
    again = labctl.make_plan({"LAB_ROOT": str(tmp_path), "LAB_PORT_BASE": "auto"})
    assert again.base == first.base


def test_ha_topology_adds_dc1s_backup_on_the_third_slot_as_the_ha_inventory_says() -> None:
    plan = labctl.make_plan({"LAB_ROOT": "/tmp/x", "LAB_PORT_BASE": "20000", "LAB_TOPOLOGY": "ha"})
    site, ports, listen, control = plan.backups["dc1-backup"]
    assert (site, ports.http, ports.client, ports.mirror, listen, control) == (
        "dc1", 20361, 20816, 20817, 20902, 20912)
    assert plan.inventory.name == "ha.yml" and list(plan.brokers()) == ["dc1", "dc2", "dc1-backup"]
    inv = yaml.safe_load((REPO / "inventories/lab/ha.yml").read_text())["all"]["children"]["artemis"]
    backup = inv["children"]["dc1"]["hosts"]["dc1-backup-artemis"]
    assert backup["broker_name"] == "dc1-backup" and backup["broker_port_offset"] == 2 * labctl.SITE_STEP
    assert f"+ {labctl.CLUSTER}" in inv["vars"]["broker_cluster_acceptor"]["port"]
    dc2 = inv["children"]["dc2"]["hosts"]["dc2-artemis"]["mirror_peer_endpoints"]
    assert f"+ {labctl.WAN_LISTEN})" in dc2 and f"+ {listen - plan.base})" in dc2
    assert labctl.plan_env(plan)["LAB_TOPOLOGY"] == "ha"


def test_unknown_topology_is_refused_with_the_choices() -> None:
    import pytest

    with pytest.raises(SystemExit, match=r"LAB_TOPOLOGY='three'.*two-site, ha"):
        labctl.make_plan({"LAB_ROOT": "/tmp/x", "LAB_TOPOLOGY": "three"})


def test_ha_shared_topology_has_the_ha_ports_and_one_store_for_both_brokers_of_dc1() -> None:
    plan = labctl.make_plan({"LAB_ROOT": "/tmp/x", "LAB_PORT_BASE": "20000", "LAB_TOPOLOGY": "ha-shared"})
    ha = labctl.make_plan({"LAB_ROOT": "/tmp/x", "LAB_PORT_BASE": "20000", "LAB_TOPOLOGY": "ha"})
    assert plan.backups == ha.backups and plan.inventory.name == "ha-shared.yml"
    assert list(plan.brokers()) == ["dc1", "dc2", "dc1-backup"] and "ha-shared" in labctl.SHARED_STORE_TOPOLOGIES
    inv = yaml.safe_load((REPO / "inventories/lab/ha-shared.yml").read_text())["all"]["children"]["artemis"]
    dc1 = inv["children"]["dc1"]
    assert dc1["vars"]["broker_data_dir"].startswith("{{ lab_root }}/")  # one directory for the pair, in the lab root
    policies = {h: v["broker_ha_policy"] for h, v in dc1["hosts"].items()}
    assert {h: (p["type"], p["role"]) for h, p in policies.items()} == {
        "dc1-artemis": ("shared-store", "primary"), "dc1-backup-artemis": ("shared-store", "backup")}
    assert dc1["hosts"]["dc1-backup-artemis"]["broker_port_offset"] == 2 * labctl.SITE_STEP
    assert policies["dc1-backup-artemis"]["options"] == {"allow-failback": True, "restart-backup": True}
    # the rest is the replicated lab's: cluster acceptor, dc2's mirror into the primary then the backup
    ha_inv = yaml.safe_load((REPO / "inventories/lab/ha.yml").read_text())["all"]["children"]["artemis"]
    assert inv["vars"] == ha_inv["vars"] and inv["children"]["dc2"] == ha_inv["children"]["dc2"]


@pytest.mark.parametrize(("env_value", "expected"), [
    (None, ["-XX:TieredStopAtLevel=1"]),
    ("none", []),
    ("-XX:+UseG1GC -Xlog:gc", ["-XX:+UseG1GC", "-Xlog:gc"]),
])
def test_lab_broker_jvm_options_default_to_the_client_compiler_and_follow_the_variable(
        env_value, expected) -> None:
    """What the broker role receives as broker_java_options, rendered by Ansible itself from the lab inventory."""
    env = {k: v for k, v in os.environ.items() if k != "LAB_BROKER_JAVA_OPTIONS"}
    if env_value is not None:
        env["LAB_BROKER_JAVA_OPTIONS"] = env_value
    out = subprocess.run(
        [str(REPO / ".venv/bin/ansible"), "-i", str(REPO / "inventories/lab/hosts.yml"), "dc1-artemis",
         "-m", "ansible.builtin.debug", "-a", "var=broker_java_options"],
        cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout
    assert yaml.safe_load(out.split("=>", 1)[1])["broker_java_options"] == expected, out
