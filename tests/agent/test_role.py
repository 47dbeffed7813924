"""roles/agent on this host in process mode (no systemd here): install, idempotence, 0600 config, running
agent, upgrade in place (new code -> restart), stop."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = """
- name: Install the continuity agent
  hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: continuity.artemis.agent
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def system_python() -> str:
    """A Python whose system site-packages hold the agent's requirements, so the role's pip step needs no
    network; skip otherwise (the role itself would pip-install them from the index)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.path.exists(candidate):
            continue
        ok = subprocess.run([candidate, "-c", "import sys, yaml, prometheus_client.registry; "
                             "assert sys.version_info >= (3, 10)"], capture_output=True)
        if ok.returncode == 0:
            return candidate
    pytest.skip("no system Python 3.10+ with PyYAML and prometheus-client (apt-get install python3-yaml "
                "python3-prometheus-client): the role test does not download packages")


def snapshot_collection(dest: Path) -> Path:
    """A frozen copy of the parts the role installs: other developers edit the checkout while this runs, and an
    edit between two runs would (rightly) look like an upgrade."""
    coll = dest / "ansible_collections" / "continuity" / "artemis"
    for part in ("galaxy.yml", "meta", "roles/agent", "plugins/module_utils", "agent", "schemas"):
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, coll / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            (coll / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, coll / part)
    return coll


class Role:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.collection = snapshot_collection(tmp / "collections")
        self.port = free_port()
        (tmp / "site.yml").write_text(PLAYBOOK)
        self.vars = {
            "agent_install_dir": str(tmp / "opt"), "agent_config_dir": str(tmp / "etc"),
            "agent_state_dir": str(tmp / "state"), "agent_log_dir": str(tmp / "log"),
            "agent_user": pwd.getpwuid(os.getuid()).pw_name, "agent_group": grp.getgrgid(os.getgid()).gr_name,
            "ansible_python_interpreter": sys.executable,
            "agent_create_user": False, "agent_service_mode": "process", "agent_python": system_python(),
            "agent_venv_system_site_packages": True, "agent_interval": 0.5, "agent_listen_port": self.port,
            "agent_sla": {"rpo_seconds": 10}, "agent_canaries": {"enabled": False, "every": 30},
            "agent_sites": [
                {"name": "dc1", "jolokia_url": f"http://127.0.0.1:{free_port()}/console/jolokia",
                 "username": "admin", "password": "role-test-pw", "timeout": 1, "client_acceptors": ["artemis"],
                 "amqp": {"urls": ["amqp://127.0.0.1:5672"], "username": "app", "password": "role-test-pw"}},
                {"name": "dc2", "jolokia_url": f"http://127.0.0.1:{free_port()}/console/jolokia",
                 "username": "admin", "password": "role-test-pw", "timeout": 1},
            ],
        }

    def run(self, **over) -> subprocess.CompletedProcess:
        extra = self.tmp / "vars.json"
        extra.write_text(json.dumps({**self.vars, **over}))
        env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
               "ANSIBLE_COLLECTIONS_PATH": str(self.tmp / "collections"), "ANSIBLE_NOCOLOR": "1",
               "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
        return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,",
                               str(self.tmp / "site.yml"), "-e", f"@{extra}"], capture_output=True, text=True,
                              env=env, timeout=300)

    def ctl(self, action: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.tmp / "opt" / "bin" / "continuity-agentctl"), action], capture_output=True,
                              text=True, timeout=60)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as resp:
            return resp.read().decode()

    def pid(self) -> int:
        return int((self.tmp / "state" / "agent.pid").read_text())


def recap(out: str) -> dict:
    line = [x for x in out.splitlines() if x.startswith("localhost")][-1]
    return {k: int(v) for k, v in (part.split("=") for part in line.split(":", 1)[1].split())}


@pytest.fixture(scope="module")
def role(tmp_path_factory):
    if shutil.which("runuser") is None and os.getuid() != 0:
        pytest.skip("process mode switches users with runuser")
    r = Role(tmp_path_factory.mktemp("agent-role"))
    yield r
    r.ctl("stop")


def test_install_and_run(role):
    res = role.run()
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert recap(res.stdout)["failed"] == 0
    assert "role-test-pw" not in res.stdout + res.stderr
    cfg = role.tmp / "etc" / "agent.yml"
    assert oct(cfg.stat().st_mode & 0o777) == "0o600"
    assert "role-test-pw" in cfg.read_text()   # the agent needs it; only the service user can read it
    assert role.ctl("status").returncode == 0
    text = role.metrics()
    assert 'continuity_site_reachable{site="dc1"} 0.0' in text
    assert 'continuity_sla_target{target="rpo_seconds"} 10.0' in text
    # the agent and the core in the agent's own virtualenv, found without a .pth file (issue 19)
    purelib = Path(subprocess.run([str(role.tmp / "opt" / "venv" / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    assert not [p.name for p in purelib.glob("*.pth") if "continuity" in p.name]
    assert (purelib / "continuity_agent" / "service.py").is_file()
    installed = purelib / "ansible_collections" / "continuity" / "artemis"
    assert sorted(p.name for p in (installed / "plugins" / "module_utils").glob("*.py")) == \
        sorted(p.name for p in (ROOT / "plugins" / "module_utils").glob("*.py"))
    assert (installed / "schemas" / "evidence-v1.schema.json").exists()


def test_second_run_changes_nothing(role):
    pid = role.pid()
    res = role.run()
    assert res.returncode == 0, res.stdout[-4000:]
    assert recap(res.stdout)["changed"] == 0, res.stdout[-4000:]
    assert role.pid() == pid   # not restarted


def test_upgrade_in_place_restarts_with_new_code_and_config(role):
    pid = role.pid()
    # a new release of the collection: a changed agent package, and a configuration change
    init = role.collection / "agent" / "continuity_agent" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9.9.9-upgrade+'))
    res = role.run(agent_sla={"rpo_seconds": 20})
    assert res.returncode == 0, res.stdout[-4000:]
    assert role.pid() != pid
    text = role.metrics()
    assert 'continuity_sla_target{target="rpo_seconds"} 20.0' in text
    assert 'version="9.9.9-upgrade+' in text


def test_invalid_configuration_is_refused_before_it_replaces_the_file(role):
    before = (role.tmp / "etc" / "agent.yml").read_text()
    bad_sites = [dict(role.vars["agent_sites"][0], jolokia_url="ftp://nowhere"), role.vars["agent_sites"][1]]
    res = role.run(agent_sites=bad_sites)
    assert res.returncode != 0
    assert (role.tmp / "etc" / "agent.yml").read_text() == before
    assert role.ctl("status").returncode == 0


def test_argument_spec_rejects_a_site_without_url(role):
    res = role.run(agent_sites=[{"name": "dc1"}])
    assert res.returncode != 0 and "jolokia_url" in res.stdout


def test_stop(role):
    pid = role.pid()
    res = role.run(agent_state="stopped")
    assert res.returncode == 0, res.stdout[-4000:]
    assert role.ctl("status").returncode == 3
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
