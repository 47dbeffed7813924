"""The six Jolokia modules against a running two-site lab (dc1 <-> dc2 dual mirror through WAN links).

Each module runs the way an operator runs it: `ansible localhost -m continuity.artemis.<module>` with the
collection from build/collections. The lab (real Apache Artemis, deployed by the collection) is the fault suites'
lab of each version of the matrix (conftest.fault_lab: 2.44.0, the newest on Maven Central, and 2.37.0: before the
broker-connection MBean (2.39) and PendingMirrorAcks (2.40), after the SNF queue MBean (2.32)); run-queue.sh runs
this module in each version's fault stream after the fault suites, and alone it gets labs of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fault_support import start_state

ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / "build" / "collections"
PY = ROOT / ".venv" / "bin" / "python"

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def lab(fault_lab):
    """The lab of this version's fault stream (conftest.fault_lab; run-queue.sh runs this module after the fault
    suites, on their brokers), as lab-up leaves it (fault_support.start_state)."""
    assert (COLLECTIONS / "ansible_collections" / "continuity" / "artemis").exists(), \
        "collection not linked into build/collections: run make venv"
    start_state(fault_lab)
    return {"version": fault_lab.version, "env": fault_lab.env, "endpoints": fault_lab.endpoints}


def conn(site: dict[str, Any]) -> dict[str, Any]:
    return {"url": site["jolokia_url"], "username": site["credentials"]["user"],
            "password": site["credentials"]["password"], "broker_name": site["broker_name"]}


def site_args(lab, site_name: str, /, **kw: Any) -> dict[str, Any]:
    args = conn(lab["endpoints"]["sites"][site_name])
    args.update(kw)
    return args


def run(module: str, args: dict[str, Any], check: bool = False, diff: bool = False) -> tuple[bool, dict]:
    """Run a module with `ansible localhost -m`; return (failed, result)."""
    cmd = [str(ROOT / ".venv" / "bin" / "ansible"), "localhost", "-i", "localhost,", "-c", "local",
           "-e", f"ansible_python_interpreter={PY}", "-m", f"continuity.artemis.{module}", "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "ANSIBLE_DEPRECATION_WARNINGS": "0",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, cwd=ROOT)
    text = out.stdout
    marker = text.find("=> {")
    assert marker >= 0, f"no module result in output:\n{out.stdout}\n{out.stderr}"
    result = json.loads(text[marker + 3:])
    failed = "| FAILED!" in text[:marker] or out.returncode != 0
    return failed, result


def wan(lab, link: str, action: str) -> None:
    control = lab["endpoints"]["wan"][link]["control_url"]
    res = subprocess.run([str(PY), "-m", "continuity_lab.wan", "ctl", "--control", control, action],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr


def send(site: dict[str, Any], n: int, address: str = "orders") -> None:
    from proton import Message
    from proton.utils import BlockingConnection

    creds = site["credentials"]
    url = site["amqp_url"].replace("amqp://", f"amqp://{creds['user']}:{creds['password']}@")
    c = BlockingConnection(url, timeout=20, allowed_mechs="PLAIN", allow_insecure_mechs=True)
    try:
        sender = c.create_sender(address)
        for i in range(n):
            sender.send(Message(body=f"integration-{i}", durable=True, creation_time=time.time()))
    finally:
        c.close()


def test_broker_info(lab):
    failed, res = run("broker_info", site_args(lab, "dc1"))
    assert not failed, res
    assert res["broker"]["version"] == lab["version"]
    assert res["broker"]["name"] == "dc1"
    assert set(res["acceptors"]) >= {"artemis", "mirror"}
    assert "DC2" in res["broker_connections"] and res["broker_connections"]["DC2"]["started"] is True
    assert "orders" in res["queues"]
    pending_known = lab["version"] >= "2.40"
    assert (res["broker"]["pending_mirror_acks"] is not None) == pending_known
    assert res["requests"] == 1


def test_mirror_wait_times_out_while_wan_cut_then_passes_after_drain(lab):
    dc1, dc2 = lab["endpoints"]["sites"]["dc1"], lab["endpoints"]["sites"]["dc2"]
    peer = conn(dc2)
    connected = {"connected": True}
    # in sync to start with
    failed, res = run("mirror_wait", site_args(lab, "dc1", peer=peer, max_backlog=0, queues_equal=True,
                                               wait_timeout=30, wait_sleep=0.5, **connected))
    assert not failed, res.get("msg")

    wan(lab, "dc1-dc2", "cut")
    try:
        send(dc1, 25)
        failed, res = run("mirror_wait", site_args(lab, "dc1", peer=peer, direction="outgoing", max_backlog=0,
                                                   queues_equal=True, wait_timeout=3, wait_sleep=0.5, **connected))
        assert failed and res["timed_out"] is True
        assert "mirror_wait timed out after" in res["msg"]
        assert "max_backlog: dc1/DC2 backlog" in res["msg"] and "queues_equal" in res["failed_conditions"]
        assert "connected: dc1/DC2 is not connected" in res["msg"]
        last = res["last"]["directions"][0]
        assert last["backlog"] >= 25  # 25 sends at least (plus any acks)

        failed, info = run("mirror_info", site_args(lab, "dc1", peer=peer, sample_interval=0.5))
        assert not failed, info
        c = info["connections"][0]
        assert c["backlog"] >= 25 and c["lag_seconds"] is None  # not draining: no invented lag
        assert c["rpo_events_est"] >= 25
        diffs = {d["queue"]: d for d in info["queue_comparison"]["diffs"]}
        assert diffs["orders"]["delta"] == 25
    finally:
        wan(lab, "dc1-dc2", "restore")

    gate = dict(peer=peer, max_backlog=0, queues_equal=True, stable_samples=2, wait_timeout=60, wait_sleep=0.5,
                **connected)
    if lab["version"] >= "2.40":
        gate["max_pending_acks"] = 0
    failed, res = run("mirror_wait", site_args(lab, "dc1", **gate))
    assert not failed, res.get("msg")
    assert res["ok"] and res["samples"][-1]["stable_streak"] == 2
    assert all(d["backlog"] == 0 for d in res["last"]["directions"])


def test_acceptor_fences_clients_and_keeps_the_mirror(lab):
    args = site_args(lab, "dc1", name=["artemis"], state="stopped")
    failed, res = run("acceptor", args, check=True)
    assert not failed and res["changed"] is True
    failed, info = run("broker_info", site_args(lab, "dc1"))
    assert info["acceptors"]["artemis"]["started"] is True  # check mode changed nothing
    try:
        failed, res = run("acceptor", args, diff=True)
        assert not failed and res["changed"] is True and res["acceptors"]["artemis"]["started"] is False
        assert res["acceptors"]["mirror"]["started"] is True
        failed, res = run("acceptor", args)
        assert not failed and res["changed"] is False
        # the peer's mirror into dc1 uses the separate mirror acceptor: still connected
        failed, res = run("mirror_wait", site_args(lab, "dc2", connected=True, direction="outgoing",
                                                   wait_timeout=20, wait_sleep=0.5))
        assert not failed, res.get("msg")
    finally:
        failed, res = run("acceptor", dict(args, state="started"))
        assert not failed and res["acceptors"]["artemis"]["started"] is True


def test_destination_pause_resume_and_block(lab):
    args = site_args(lab, "dc2", names=["orders"], state="paused", persist=True)
    failed, res = run("destination", args, diff=True)
    assert not failed, res
    assert res["changed"] is True
    # PersistedPause exists from 2.41 (QueueControl); before, the module reports it as unknown
    persisted = True if lab["version"] >= "2.41" else None
    assert res["destinations"]["orders"]["after"] == {"paused": True, "persisted_pause": persisted}
    failed, res = run("destination", args)
    assert not failed and res["changed"] is False
    failed, res = run("destination", dict(args, state="resumed"))
    assert not failed and res["changed"] is True and res["destinations"]["orders"]["after"]["paused"] is False
    failed, res = run("destination", site_args(lab, "dc2", type="address", names=["orders"], state="blocked"))
    assert not failed and res["unverified"] == ["orders"]
    failed, res = run("destination", site_args(lab, "dc2", type="address", names=["orders"], state="unblocked"))
    assert not failed and res["changed"] is True


def test_broker_connection_stop_start(lab):
    args = site_args(lab, "dc2", name="DC1", state="stopped")
    try:
        failed, res = run("broker_connection", args, diff=True)
        assert not failed, res
        assert res["changed"] is True and res["connection"]["started"] is False
        assert res["method"] == ("mbean" if lab["version"] >= "2.39" else "broker_operation")
        failed, res = run("broker_connection", args)
        assert not failed and res["changed"] is False
        # a stopped connection is "not connected" in every version (connected_source: stopped before 2.39)
        failed, res = run("mirror_wait", site_args(lab, "dc2", connected=False, direction="outgoing", wait=False))
        assert not failed, res.get("msg")
    finally:
        failed, res = run("broker_connection", dict(args, state="started"))
        assert not failed and res["connection"]["started"] is True
    failed, res = run("mirror_wait", site_args(lab, "dc2", connected=True, direction="outgoing",
                                               wait_timeout=30, wait_sleep=0.5))
    assert not failed, res.get("msg")


def test_errors_reach_the_operator(lab):
    failed, res = run("broker_info", site_args(lab, "dc1", password="wrong"))
    assert failed and "rejected the credentials" in res["msg"] and "wrong" not in res["msg"]
    failed, res = run("broker_info", site_args(lab, "dc1", broker_name="dc9"))
    assert failed and "'dc9' does not exist" in res["msg"] and "dc1" in res["msg"]
    failed, res = run("broker_info", site_args(lab, "dc1", origin="http://evil.example.com"))
    assert failed and "jolokia-access.xml" in res["msg"]
