"""lab-up / lab-down: two sites, dual mirror through the WAN emulator, endpoints.json, everything stopped by pid."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, Jolokia, wait_for
from proton import Message
from proton.utils import BlockingConnection

from artemis_lab import wan

SITE_KEYS = {"broker_name", "jolokia_url", "jolokia_origin", "amqp_url", "credentials", "mirror_credentials",
             "acceptors", "client_acceptors", "mirror_acceptor", "mirror_connection", "instance_dir", "pid"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def lab(lab_home: Path, dist_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("lab2")
    env = {**os.environ, "LAB_ROOT": str(root), "LAB_PORT_BASE": "auto", "LAB_DIST_DIR": str(dist_dir)}
    up = subprocess.run(["bash", str(REPO / "lab" / "lab-up.sh")], capture_output=True, text=True, env=env,
                        timeout=180)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        endpoints = json.loads((root / "endpoints.json").read_text())
        yield {"root": root, "env": env, "endpoints": endpoints}
    finally:
        down = subprocess.run(["bash", str(REPO / "lab" / "lab-down.sh")], capture_output=True, text=True, env=env,
                              timeout=120)
        assert down.returncode == 0, down.stderr


def _jolokia(site: dict[str, Any]) -> Jolokia:
    return Jolokia(site["jolokia_url"], site["credentials"]["user"], site["credentials"]["password"],
                   site["jolokia_origin"], broker=site["broker_name"])


def _count(site: dict[str, Any], queue: str = "orders") -> int:
    j = _jolokia(site)
    return int(j.value({"type": "read", "mbean": j.qname(queue), "attribute": "MessageCount"}))


def _send(site: dict[str, Any], n: int) -> None:
    url = site["amqp_url"].replace("amqp://", f"amqp://{site['credentials']['user']}:"
                                              f"{site['credentials']['password']}@")
    conn = BlockingConnection(url, timeout=10, allowed_mechs="PLAIN", allow_insecure_mechs=True)
    try:
        sender = conn.create_sender("orders")
        for i in range(n):
            sender.send(Message(body=f"m{i}", durable=True))
    finally:
        conn.close()


def test_endpoints_file_format(lab: dict[str, Any]) -> None:
    e = lab["endpoints"]
    assert e["format"] == 1 and e["artemis_version"] == "2.44.0" and e["broker_version"] == "2.44.0-lab"
    assert set(e["sites"]) == {"dc1", "dc2"}
    for name, site in e["sites"].items():
        assert set(site) == SITE_KEYS
        assert site["broker_name"] == name and site["jolokia_url"].endswith("/console/jolokia")
        assert site["mirror_connection"] == {"dc1": "DC2", "dc2": "DC1"}[name]
        assert site["acceptors"]["artemis"] != site["acceptors"]["mirror"]  # separate mirror acceptor
        assert Path(site["instance_dir"]).name == name and _alive(site["pid"])
    assert set(e["wan"]) == {"dc1-dc2", "dc2-dc1"}
    for link in e["wan"].values():
        assert {"from", "to", "listen", "target", "control_url", "pid"} <= set(link)
        assert link["target"].endswith(f":{e['sites'][link['to']]['acceptors']['mirror']}")


def test_mirror_goes_through_the_wan_and_is_connected(lab: dict[str, Any]) -> None:
    e = lab["endpoints"]
    for name, site in e["sites"].items():
        j = _jolokia(site)
        conn = j.value({"type": "read", "mbean": j.cname(site["mirror_connection"])})
        assert conn["Connected"] is True and conn["Started"] is True
        peer = "dc2" if name == "dc1" else "dc1"
        assert conn["Uri"] == f"tcp://{e['wan'][f'{name}-{peer}']['listen']}"
        assert wan.control(e["wan"][f"{name}-{peer}"]["control_url"], "status")["connections"] >= 1


def test_messages_flow_to_peer_and_wan_cut_is_observed(lab: dict[str, Any]) -> None:
    e = lab["endpoints"]
    dc1, dc2 = e["sites"]["dc1"], e["sites"]["dc2"]
    base = _count(dc2)
    _send(dc1, 5)
    wait_for(lambda: _count(dc2) == base + 5, timeout=20)
    link = e["wan"]["dc1-dc2"]["control_url"]
    j1 = _jolokia(dc1)
    wan.control(link, "cut")
    try:
        wait_for(lambda: j1.value({"type": "read", "mbean": j1.cname("DC2"), "attribute": "Connected"}) is False,
                 timeout=20)
        _send(dc1, 3)
        snf = j1.qname("$ACTIVEMQ_ARTEMIS_MIRROR_DC2")
        wait_for(lambda: j1.value({"type": "read", "mbean": snf, "attribute": "MessageCount"}) >= 3, timeout=10)
        assert _count(dc2) == base + 5
    finally:
        wan.control(link, "restore")
    wait_for(lambda: j1.value({"type": "read", "mbean": j1.cname("DC2"), "attribute": "Connected"}) is True,
             timeout=30)
    wait_for(lambda: _count(dc2) == base + 8, timeout=30)


def test_lab_down_stops_every_process(lab_home: Path, dist_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "LAB_ROOT": str(tmp_path), "LAB_PORT_BASE": "auto", "LAB_DIST_DIR": str(dist_dir)}
    up = subprocess.run(["bash", str(REPO / "lab" / "lab-up.sh")], capture_output=True, text=True, env=env,
                        timeout=180)
    assert up.returncode == 0, up.stderr
    endpoints = json.loads((tmp_path / "endpoints.json").read_text())
    pids = [s["pid"] for s in endpoints["sites"].values()] + [w["pid"] for w in endpoints["wan"].values()]
    assert all(_alive(p) for p in pids)
    down = subprocess.run(["bash", str(REPO / "lab" / "lab-down.sh")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert down.returncode == 0, down.stderr
    wait_for(lambda: not any(_alive(p) for p in pids), timeout=15)
    assert not (tmp_path / "endpoints.json").exists()
