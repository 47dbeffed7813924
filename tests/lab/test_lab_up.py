"""The lab itself, end to end: lab-up.sh deploys two real Apache Artemis brokers with the collection, mirrors
through the WAN emulator, converges on a second run, survives the real startup window, and lab-down stops it all.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, wait_for

from continuity_lab import labctl, wan

pytestmark = [pytest.mark.slow]
PY = REPO / ".venv" / "bin" / "python"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab-up")
    env = {**os.environ, "LAB_ROOT": str(root), "LAB_PORT_BASE": "auto"}
    up = subprocess.run(["bash", str(REPO / "lab" / "lab-up.sh")], capture_output=True, text=True, env=env,
                        timeout=900, cwd=REPO)
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        yield {"root": root, "env": env, "up": up, "endpoints": json.loads((root / "endpoints.json").read_text())}
    finally:
        subprocess.run(["bash", str(REPO / "lab" / "lab-down.sh")], capture_output=True, text=True, env=env,
                       timeout=300, cwd=REPO)


def client(site: dict):
    from ansible_collections.continuity.artemis.plugins.module_utils import jolokia

    return jolokia.JolokiaClient(site["jolokia_url"], username=site["credentials"]["user"],
                                 password=site["credentials"]["password"], timeout=3, retries=0)


def test_the_lab_is_real_artemis_deployed_by_the_collection(lab):
    ep = lab["endpoints"]
    assert ep["broker_version"] == labctl.DEFAULT_VERSION  # what the broker reports, no qualifier
    assert "Apache Artemis" in lab["up"].stdout
    for name, site in ep["sites"].items():
        cmdline = Path(f"/proc/{site['pid']}/cmdline").read_bytes().split(b"\0")
        assert b"org.apache.activemq.artemis.boot.Artemis" in cmdline, (name, cmdline[:3])
        assert client(site).read(f'org.apache.activemq.artemis:broker="{name}"', "Started") is True
    # the collection deployed it: the rendered broker.xml, its pinned distribution, the initial roles
    xml = (Path(ep["sites"]["dc1"]["instance_dir"]) / "etc" / "broker.xml").read_text()
    assert "Rendered by the continuity.artemis.broker role" in xml
    assert "<journal-buffer-timeout>" in xml  # what artemis create measured on this machine is kept
    assert Path(ep["artemis_home"]).name == f"apache-artemis-{labctl.DEFAULT_VERSION}"
    acceptor = 'org.apache.activemq.artemis:broker="{}",component=acceptors,name="artemis"'
    assert client(ep["sites"]["dc1"]).read(acceptor.format("dc1"), "Started") is True
    assert client(ep["sites"]["dc2"]).read(acceptor.format("dc2"), "Started") is False


def test_the_mirror_goes_through_the_wan_emulator(lab):
    ep = lab["endpoints"]
    link = ep["wan"]["dc1-dc2"]
    conn = 'org.apache.activemq.artemis:broker="dc1",component=broker-connections,name="DC2"'
    dc1 = client(ep["sites"]["dc1"])
    assert dc1.read(conn, "Uri").endswith(link["listen"].split(":")[1])
    wan.control(link["control_url"], "cut")
    try:
        wait_for(lambda: dc1.read(conn, "Connected") is False, 30)
    finally:
        wan.control(link["control_url"], "restore")
    wait_for(lambda: dc1.read(conn, "Connected") is True, 60)


def test_a_second_lab_up_converges_without_restarting_a_broker(lab):
    before = {s: info["pid"] for s, info in lab["endpoints"]["sites"].items()}
    again = subprocess.run(["bash", str(REPO / "lab" / "lab-up.sh")], capture_output=True, text=True,
                           env=lab["env"], timeout=900, cwd=REPO)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    deploy_log = (lab["root"] / "deploy.log").read_text()
    recap = re.findall(r"^(dc\d-artemis)\s+:.*?changed=(\d+)", deploy_log, re.M)
    assert sorted(recap) == [("dc1-artemis", "0"), ("dc2-artemis", "0")], deploy_log[-3000:]
    after = json.loads((lab["root"] / "endpoints.json").read_text())
    assert {s: info["pid"] for s, info in after["sites"].items()} == before


def test_waits_treat_the_real_startup_window_as_not_ready(lab):
    """kill -9 dc2, start it again and read it while it starts, as failback's wait does: every answer of the
    startup window (refused, 404 no broker, 500 not started) is 'not reachable yet', never an error."""
    from ansible_collections.continuity.artemis.plugins.module_utils import site_state

    site = lab["endpoints"]["sites"]["dc2"]
    instance = Path(site["instance_dir"])
    pid = int((instance / "data" / "artemis.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not _alive(pid), 20)
    subprocess.run([str(instance / "bin" / "artemis-service"), "start"], check=True, capture_output=True,
                   timeout=60)
    collector = site_state.SiteCollector(client(site), broker_name="dc2", site="dc2")
    seen: Counter = Counter()
    deadline = time.monotonic() + 120
    snap: dict = {}
    while time.monotonic() < deadline:
        snap = collector.collect_or_unreachable()  # raises on anything that is not "not up yet"
        if snap["reachable"]:
            break
        seen[snap["error"].split(":")[0][:60]] += 1
        time.sleep(0.05)
    print(f"startup window of dc2: {dict(seen)}")
    assert snap.get("reachable"), f"dc2 did not come back within 120 s: {snap.get('error')}"
    assert seen, "the first read after the start already succeeded: the startup window was not observed"
    # the module the failback runs, right after another restart: it reports, it does not fail
    pid = int((instance / "data" / "artemis.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not _alive(pid), 20)
    subprocess.run([str(instance / "bin" / "artemis-service"), "start"], check=True, capture_output=True,
                   timeout=60)
    args = {"url": site["jolokia_url"], "username": "admin", "password": "lab-admin-secret", "broker_name": "dc2",
            "client_acceptors": ["artemis"], "state": "passive", "allow_unreachable": True, "timeout": 5}
    results = []
    for _ in range(90):
        out = subprocess.run(
            [str(REPO / ".venv" / "bin" / "ansible"), "localhost", "-i", "localhost,", "-c", "local",
             "-e", f"ansible_python_interpreter={PY}", "-m", "continuity.artemis.site_role", "-a", json.dumps(args)],
            capture_output=True, text=True, timeout=60, cwd=REPO,
            env={**lab["env"], "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
                 "ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections")})
        assert out.returncode == 0, out.stdout[-2000:]
        result = json.loads(out.stdout[out.stdout.find("=> {") + 3:])
        results.append(result["reachable"])
        if result["reachable"]:
            assert result["role"] == "passive"
            break
    assert results and results[-1] is True, results
    subprocess.run([str(PY), "-m", "continuity_lab.labctl", "register"], check=True, capture_output=True,
                   env=lab["env"], timeout=180, cwd=REPO)


def test_lab_down_stops_every_process(lab):
    state = json.loads((lab["root"] / "lab-state.json").read_text())
    pids = [p["pid"] for p in state["processes"]]
    assert len(pids) == 4  # two brokers, two WAN links
    down = subprocess.run(["bash", str(REPO / "lab" / "lab-down.sh")], capture_output=True, text=True,
                          env=lab["env"], timeout=300, cwd=REPO)
    assert down.returncode == 0, down.stderr
    assert not [p for p in pids if _alive(p)]
    assert not (lab["root"] / "endpoints.json").exists()
