"""roles/agent renders the sites from the inventory the runbooks resolve (playbooks/sites.yml's continuity_site_info:
a host's site is its group among mirror_sites): a site with an HA pair becomes a site with `brokers`. Only the
role's site task and its configuration template run here (no install); the agent's own parser checks the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from ansible_collections.continuity.artemis.plugins.filter.continuity import agent_sites
from continuity_agent.config import parse

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = {"all": {"children": {"artemis": {"vars": {"mirror_sites": ["dc1", "dc2"]}, "children": {
    "dc1": {"hosts": {"dc1-artemis": {"broker": "dc1"}, "dc1-backup-artemis": {"broker": "dc1-backup"}}},
    "dc2": {"hosts": {"dc2-artemis": {"broker": "dc2"}}}}}}}}
# What playbooks/sites.yml sets on each broker host (the keys the filter reads), then the role's part.
PLAYBOOK = """
- name: Resolved sites (as playbooks/sites.yml sets them)
  hosts: artemis
  gather_facts: false
  tasks:
    - name: Describe this broker
      ansible.builtin.set_fact:
        continuity_site_info:
          name: "{{ mirror_sites | intersect(group_names) | first }}"
          host: "{{ inventory_hostname }}"
          broker_name: "{{ broker }}"
          jolokia_url: "http://{{ broker }}:8161/console/jolokia"
          username: admin
          password: inventory-pw
          client_acceptors: [artemis]

- name: The agent's configuration
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Sites from the inventory
      ansible.builtin.include_role:
        name: continuity.artemis.agent
        tasks_from: sites.yml
        public: true
      vars:
        agent_sites_from_inventory: true
    - name: Render agent.yml
      ansible.builtin.template:
        src: "{{ collection }}/roles/agent/templates/agent.yml.j2"
        dest: "{{ out }}"
        mode: "0600"
"""


def run(tmp: Path, inventory: dict) -> subprocess.CompletedProcess:
    (tmp / "inv.yml").write_text(yaml.safe_dump(inventory))
    (tmp / "play.yml").write_text(PLAYBOOK)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "build" / "collections"),
           "ANSIBLE_LOCALHOST_WARNING": "false"}
    extra = json.dumps({"collection": str(ROOT), "out": str(tmp / "agent.yml"), "ansible_connection": "local",
                        "ansible_python_interpreter": sys.executable})
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp / "inv.yml"),
                           str(tmp / "play.yml"), "-e", extra], capture_output=True, text=True, env=env, timeout=300)


def test_the_role_renders_an_ha_site_from_the_inventory(tmp_path):
    res = run(tmp_path, INVENTORY)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    cfg = parse(yaml.safe_load((tmp_path / "agent.yml").read_text()))
    dc1, dc2 = cfg.sites["dc1"], cfg.sites["dc2"]
    assert [(b.name, b.jolokia.url) for b in dc1.brokers] == [
        ("dc1", "http://dc1:8161/console/jolokia"), ("dc1-backup", "http://dc1-backup:8161/console/jolokia")]
    assert dc1.brokers[1].jolokia.password == "inventory-pw" and dc1.client_acceptors == ("artemis",)
    assert not dc2.is_pair and dc2.jolokia.url == "http://dc2:8161/console/jolokia" and dc2.broker_name == "dc2"
    assert "inventory-pw" not in res.stdout  # the set_fact is no_log


def test_the_role_stops_when_sites_yml_did_not_run(tmp_path):
    inv = json.loads(json.dumps(INVENTORY))
    inv["all"]["children"]["artemis"]["children"]["dc2"]["hosts"]["dc2-artemis"] = {}  # no broker var: no facts
    res = run(tmp_path, inv)
    assert res.returncode != 0
    assert "agent_sites_from_inventory needs the facts of playbooks/sites.yml" in res.stdout, res.stdout[-2000:]
    assert not (tmp_path / "agent.yml").exists()


def test_agent_sites_filter_keeps_single_sites_flat_and_lists_a_pair():
    infos = [{"name": "dc1", "broker_name": "dc1", "jolokia_url": "u1", "username": "a", "password": "p",
              "client_acceptors": ["artemis"]},
             {"name": "dc2", "broker_name": "dc2", "jolokia_url": "u2", "client_acceptors": ["amqp"]},
             {"name": "dc1", "broker_name": "dc1-backup", "jolokia_url": "u3", "username": "a", "password": "p"}]
    assert agent_sites(infos) == [
        {"name": "dc1", "client_acceptors": ["artemis"], "brokers": [
            {"broker_name": "dc1", "jolokia_url": "u1", "username": "a", "password": "p"},
            {"broker_name": "dc1-backup", "jolokia_url": "u3", "username": "a", "password": "p"}]},
        {"name": "dc2", "client_acceptors": ["amqp"], "broker_name": "dc2", "jolokia_url": "u2"}]
