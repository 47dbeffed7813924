"""The continuity agent on the real HA lab (issue 18, docs/agent.md "A site with an HA pair"): dc1 a replicated
primary/backup pair, dc2 one broker. The agent reads both brokers of dc1 every cycle; after `kill -9` of dc1's
primary its metrics must show the backup live, no site switch needed, and the mirror dc1 -> dc2 connected from the
backup. The times are printed (-s)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from fault_support import ha_start_state
from prometheus_client.parser import text_string_to_metric_families
from runbook_support import ADMIN_PASSWORD, ADMIN_USER, CLIENT_ACCEPTOR, Lab, until

BACKUP = "dc1-backup"


@pytest.fixture(scope="module")
def lab(ha_lab):
    """The HA lab (conftest.ha_lab, after test_ha_lab in run-queue.sh's 'ha' stream) as its deploy leaves it."""
    return ha_start_state(ha_lab)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AgentProcess:
    def __init__(self, lab: Lab, tmp) -> None:
        self.port = free_port()
        jol = {"username": ADMIN_USER, "password": ADMIN_PASSWORD, "timeout": 2}
        cfg = {"interval": 0.5, "listen": {"address": "127.0.0.1", "port": self.port},
               "sites": {"dc1": {"brokers": [
                   {"broker_name": "dc1", "jolokia": dict(jol, url=lab.jolokia_url("dc1"))},
                   {"broker_name": BACKUP, "jolokia": dict(jol, url=lab.jolokia_url(BACKUP))}],
                   "client_acceptors": [CLIENT_ACCEPTOR]},
                   "dc2": {"jolokia": dict(jol, url=lab.jolokia_url("dc2")), "broker_name": "dc2",
                           "client_acceptors": [CLIENT_ACCEPTOR]}},
               "state_dir": str(tmp / "state"), "log_level": "INFO"}
        path = tmp / "agent.json"
        path.write_text(json.dumps(cfg))
        os.chmod(path, 0o600)
        self.log = open(tmp / "agent.log", "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "continuity_agent", "--config", str(path)],
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def samples(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        return {(s.name, frozenset(s.labels.items())): s.value
                for fam in text_string_to_metric_families(text) for s in fam.samples}

    def value(self, name: str, **labels):
        try:
            return self.samples().get((name, frozenset(labels.items())))
        except OSError:
            return None

    def health(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        finally:
            self.log.close()


def test_agent_follows_the_takeover_of_dc1_by_its_backup(lab, tmp_path):
    agent = AgentProcess(lab, tmp_path)
    try:
        v = agent.value
        assert until(lambda: (v("continuity_agent_cycles_total") or 0) >= 2, 60) is not None, "agent never sampled"
        # in order: the primary serves dc1, its backup stands by in sync; nothing needs a site switch
        assert until(lambda: v("continuity_site_live_broker", site="dc1", broker="dc1") == 1, 30) is not None
        m = agent.samples()

        def at(name, **labels):
            return m.get((name, frozenset(labels.items())))

        assert at("continuity_site_live_broker", site="dc1", broker=BACKUP) == 0
        assert at("continuity_broker_up", site="dc1", broker=BACKUP) == 1
        assert at("continuity_broker_ha_backup", site="dc1", broker=BACKUP) == 1
        assert at("continuity_broker_ha_replica_sync", site="dc1", broker=BACKUP) == 1
        assert at("continuity_site_ha_takeover", site="dc1") == 0
        assert at("continuity_site_switch_needed", site="dc1") == 0
        assert at("continuity_site_switch_needed", site="dc2") == 0
        assert at("continuity_site_role", site="dc1", role="active") == 1
        assert at("continuity_mirror_connected", site="dc1", peer="dc2", connection="DC2") == 1

        # status.yml reads the pair with the same rule (site_role.pair_state through the ha_pair filter)
        status = lab.playbook("status.yml", evidence_dir=tmp_path)
        said = " ".join(status.text.split())  # the YAML callback folds long lines
        assert "dc1: dc1 serves, dc1-backup stands by in sync" in said, status.tail()

        # kill -9 of the primary: the agent must show the backup serving dc1, and no site switch needed
        os.kill(lab.broker_pid("dc1"), signal.SIGKILL)
        t_kill = time.monotonic()
        switch_seen = []

        def backup_serves() -> bool:
            if v("continuity_site_switch_needed", site="dc1") == 1:
                switch_seen.append(time.monotonic() - t_kill)  # the seconds before the backup is live
            return (v("continuity_site_live_broker", site="dc1", broker=BACKUP) == 1
                    and v("continuity_site_switch_needed", site="dc1") == 0)

        live = until(backup_serves, 120)
        assert live is not None, f"the agent never showed {BACKUP} live: {agent.health()}"
        assert v("continuity_broker_up", site="dc1", broker="dc1") == 0
        assert v("continuity_site_live_broker", site="dc1", broker="dc1") == 0
        assert v("continuity_site_ha_takeover", site="dc1") == 1
        assert v("continuity_site_reachable", site="dc1") == 1
        # the backup serves in the site's role once its client acceptor is started (a moment after it is live)
        roles = []

        def active() -> bool:
            now = {dict(labels)["site"]: dict(labels)["role"] for (n, labels), x in agent.samples().items()
                   if n == "continuity_site_role" and x == 1}
            roles.append(now)
            return now.get("dc1") == "active"

        role_active = until(active, 60, 0.25)
        assert role_active is not None, f"dc1 never active on its backup: roles seen {roles[-5:]}"
        mirror = until(lambda: v("continuity_mirror_connected", site="dc1", peer="dc2", connection="DC2") == 1, 120)
        assert mirror is not None, "the mirror dc1 -> dc2 was never seen connected from the backup"
        assert v("continuity_site_switch_needed", site="dc1") == 0
        health = agent.health()
        assert health["sites"]["dc1"]["live_broker"] == BACKUP and health["sites"]["dc1"]["switch_needed"] is False
        status = lab.playbook("status.yml", evidence_dir=tmp_path)
        said = " ".join(status.text.split())
        assert "dc1: its backup dc1-backup serves (dc1 down): the site did not fail, no site switch needed" \
            in said, status.tail()
        last_known = json.loads((tmp_path / "state" / "dc1" / "last-known.json").read_text())
        assert last_known["broker"] == BACKUP
        print(f"\nagent on the HA lab: {BACKUP} shown live {live:.2f} s after kill -9 of dc1, dc1 active on it "
              f"+{role_active:.2f} s (roles seen meanwhile: {sorted({r['dc1'] for r in roles if 'dc1' in r})}), "
              f"mirror dc1->dc2 "
              f"connected from it +{mirror:.2f} s; switch_needed 1 seen "
              + (f"until +{max(switch_seen):.2f} s" if switch_seen else "never") + " (primary dead, backup not live)")
    finally:
        agent.stop()
    assert agent.proc.returncode == 0
