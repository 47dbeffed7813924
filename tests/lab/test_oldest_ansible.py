"""The oldest ansible-core the collection claims (meta/runtime.yml requires_ansible >= 2.16): the lab is deployed from
scratch by it (the lab orchestration run with that venv's Python runs that venv's ansible-playbook), a second deploy
changes nothing, and a swapover there and back passes. The suite's own .venv runs the newest supported release, so
both ends of the claim are exercised (issue 16). `make venv-oldest` builds the venv (test-lab depends on it).

Found this way: ansible-core 2.16 renders templated numbers as text, which the broker.xml checks refused
("'20616' is not a TCP port").
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml
from conftest import REPO

OLDEST = REPO / "build" / "venv-oldest-ansible"


def _claimed_minimum() -> str:
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    return re.match(r">=\s*(\d+\.\d+)", runtime["requires_ansible"]).group(1)


@pytest.fixture(scope="module")
def oldest_lab(tmp_path_factory):
    python = OLDEST / "bin" / "python"
    if not python.exists():
        raise AssertionError(f"{OLDEST} is missing: run `make venv-oldest` (make test-lab does)")
    version = subprocess.run([str(OLDEST / "bin" / "ansible-playbook"), "--version"], capture_output=True, text=True,
                             check=True).stdout.splitlines()[0]
    assert f"[core {_claimed_minimum()}." in version, (version, _claimed_minimum())
    sys_path = subprocess.run([str(python), "-c", "import sys; print(sys.path)"], capture_output=True, text=True)
    # nothing of the suite's venv leaks in (the checkout's own path may contain any word: compare paths)
    assert str(REPO / ".venv") not in sys_path.stdout, sys_path.stdout
    root = tmp_path_factory.mktemp("oldest-ansible-lab")
    from continuity_lab import labctl

    env = {"PATH": f"{OLDEST / 'bin'}:/usr/bin:/bin", "HOME": str(root), "LAB_ROOT": str(root / "lab"),
           "LAB_PORT_BASE": str(labctl.free_port_base()), "LAB_TOPOLOGY": "two-site",
           "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections"),
           "ANSIBLE_NOCOLOR": "1"}

    def labctl_cmd(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-m", "continuity_lab.labctl", *args], capture_output=True, text=True,
                              env=env, cwd=REPO, timeout=900)

    up = labctl_cmd("up")
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        yield env, root / "lab", labctl_cmd, version
    finally:
        labctl_cmd("down")


def _playbook(env: dict, name: str, extra: dict) -> subprocess.CompletedProcess:
    inventory = REPO / "inventories" / "lab" / "hosts.yml"
    argv = [str(OLDEST / "bin" / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / name),
            "-e", json.dumps(extra)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def test_oldest_ansible_deploys_the_lab_and_converges(oldest_lab):
    _env, root, labctl_cmd, version = oldest_lab
    pids = {s: i["pid"] for s, i in json.loads((root / "endpoints.json").read_text())["sites"].items()}
    again = labctl_cmd("up")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    recap = re.findall(r"^(dc\d-artemis)\s+:.*?changed=(\d+).*?failed=(\d+)", (root / "deploy.log").read_text(), re.M)
    assert sorted(recap) == [("dc1-artemis", "0", "0"), ("dc2-artemis", "0", "0")], recap
    after = {s: i["pid"] for s, i in json.loads((root / "endpoints.json").read_text())["sites"].items()}
    assert after == pids
    print(f"\n{version}: lab deployed from scratch, second deploy changed=0, brokers not restarted")


def test_oldest_ansible_swaps_over_and_back(oldest_lab):
    env, root, _labctl, version = oldest_lab
    evidence = root / "evidence"
    there = _playbook(env, "swapover.yml", {"continuity_to_site": "dc2", "continuity_evidence_dir": str(evidence)})
    assert there.returncode == 0, there.stdout[-3000:]
    status = _playbook(env, "status.yml", {"continuity_evidence_dir": str(evidence)})
    assert status.returncode == 0 and "dc2   active" in status.stdout, status.stdout[-2000:]
    back = _playbook(env, "swapover.yml", {"continuity_to_site": "dc1", "continuity_evidence_dir": str(evidence)})
    assert back.returncode == 0, back.stdout[-3000:]
    print(f"\n{version}: swapover dc1 -> dc2 -> dc1 and status.yml passed")
