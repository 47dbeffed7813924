"""Fault injection on the real two-site lab (issue 16): the controller dies at every task boundary of swapover.yml
and inside the switch itself, under traffic, then at every task boundary of failover.yml from its fence on, with a
sampler reading both brokers' client acceptors all along. After each kill the same command is run again and must
converge (then status.yml must report no safety breach); the swapover ledgers must show nothing lost and nothing
delivered twice. Invariants (docs/runbooks.md): (a) never two sites serving, whatever dies when; (c) what a dead run
leaves behind (paused queues, an old site not yet sealed) is visible in status.yml and repaired by the re-run.

"The controller dies" is SIGKILL of ansible-playbook and every process under it (its workers call setsid(), so the
process group is not enough; the collection's modules run in-process in those workers):
tests/integration/faults/kill_at_task.py does it when a named task starts; the in-switch points are watched over
Jolokia and killed from here with the same function. Printed numbers go to benchmarks/README.md.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from runbook_support import ROOT, SITES, VENV_BIN, Lab, RoleSampler, Traffic, reconcile, secrets_in

from ansible_collections.continuity.artemis.plugins.module_utils import objectname

pytestmark = [pytest.mark.slow]

CALLBACKS = Path(__file__).resolve().parent / "faults"


def _kill_tree():
    import importlib.util

    spec = importlib.util.spec_from_file_location("kill_at_task", CALLBACKS / "kill_at_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kill_tree


kill_tree = _kill_tree()
ADDRESS = "faults.orders"
RESULTS: dict = {"kills": []}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    the_lab = Lab(tmp_path_factory.mktemp("faults-lab"))
    try:
        the_lab.up()
        the_lab.ensure_roles("dc1")
        yield the_lab
    finally:
        the_lab.down()


@pytest.fixture(scope="module")
def load(lab, tmp_path_factory):
    """Traffic and the sampler for the whole module: every kill happens under load, and one ledger proves the sum."""
    evidence = tmp_path_factory.mktemp("faults-evidence")
    traffic = Traffic(lab, evidence, "faults", "ft", address=ADDRESS, producers=2, consumers=2, rate=100)
    sampler = RoleSampler(lab, interval=0.05, max_seconds=3600)
    traffic.start()
    sampler.start()
    try:
        yield traffic, sampler, evidence
    finally:
        sampler.stop()
        traffic.stop()


def controller(lab: Lab, playbook: str, extra: dict, kill_at: tuple[str, int] | None = None,
               kill_when=None, task_log: Path | None = None, timeout: float = 300) -> dict:
    """ansible-playbook in its own process group. ``kill_at``: (task name, occurrence) at whose start the callback
    kills the group; ``kill_when``: a predicate polled every 5 ms here, the group is killed once it holds."""
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(lab.inventory), str(ROOT / "playbooks" / playbook),
            "-e", json.dumps(extra)]
    env = {**lab.env, "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_CALLBACKS_ENABLED": "kill_at_task"}
    if kill_at:
        env.update(KILL_AT_TASK=kill_at[0], KILL_AT_OCCURRENCE=str(kill_at[1]))
    if task_log:
        env["KILL_TASK_LOG"] = str(task_log)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    killed = threading.Event()

    def watch() -> None:
        while proc.poll() is None:
            if kill_when():
                kill_tree(proc.pid)
                killed.set()
                return
            time.sleep(0.005)

    if kill_when is not None:
        threading.Thread(target=watch, daemon=True).start()
    out, _ = proc.communicate(timeout=timeout)
    assert not secrets_in(out), f"{playbook} printed secrets {secrets_in(out)}"
    return {"rc": proc.returncode, "out": out, "wall": time.monotonic() - t0,
            "killed": proc.returncode == -signal.SIGKILL or killed.is_set()}


# status.yml's checks that a dead run may break and a re-run must repair (the SLA ones -- lag, backlog -- depend on
# the load of the moment, not on the fault).
SAFETY_CHECKS = {"roles", "reachable", "connected", "restart_safe", "paused_queues", "passive_consumers"}


def breaches(status_out: str) -> set[str]:
    """The names of the checks status.yml reported breached ("SLA: BREACH name (detail); name (detail)")."""
    said = " ".join(status_out.split())
    match = re.search(r"SLA: BREACH (.*?)'", said)
    return set(re.findall(r"(?:^|\); )(\w+) \(", match.group(1))) if match else set()


def reads_true(client, mbean: str, attribute: str):
    """A predicate for ``kill_when``: the attribute reads true (a read that fails this instant is not true)."""
    def check() -> bool:
        try:
            return client.read(mbean, attribute) is True
        except Exception:  # not readable this instant: keep watching
            return False
    return check


def state(lab: Lab) -> tuple[dict, dict]:
    return lab.roles(), {s: lab.persisted_role(s) for s in SITES}


def converge(lab: Lab, to: str, point: str, evidence: Path) -> dict:
    """The same command again, then status.yml: both must pass, the roles must be as asked and restart-safe."""
    again = controller(lab, "swapover.yml", {"continuity_to_site": to, "continuity_evidence_dir": str(evidence)})
    assert again["rc"] == 0, f"re-run after the kill at {point} failed:\n{again['out'][-3000:]}"
    status = controller(lab, "status.yml", {"continuity_evidence_dir": str(evidence)})
    safety = breaches(status["out"]) & SAFETY_CHECKS
    assert not safety, f"status after the re-run ({point}) breached {safety}:\n{status['out'][-2500:]}"
    other = next(s for s in SITES if s != to)
    roles, persisted = state(lab)
    assert roles == {to: "active", other: "passive"} and persisted == roles, (point, roles, persisted)
    return {"rerun_s": round(again["wall"], 1)}


def passive_of(lab: Lab) -> str:
    roles = lab.roles()
    return next(s for s in SITES if roles[s] == "passive")


def test_the_swapover_task_boundaries(lab, load, tmp_path):
    """List the task boundaries once (an undisturbed swapover), then kill the controller at each of them in turn."""
    traffic, sampler, evidence = load
    assert traffic.wait_received(100, timeout=60, site="dc1"), traffic.status()
    log = tmp_path / "tasks.jsonl"
    first = controller(lab, "swapover.yml", {"continuity_to_site": "dc2", "continuity_evidence_dir": str(evidence)},
                       task_log=log)
    assert first["rc"] == 0, first["out"][-3000:]
    boundaries = [(r["task"], r["occurrence"]) for r in map(json.loads, log.read_text().splitlines())]
    assert len(boundaries) >= 15 and ("Quiesce, drain gate and activate in one task (rolls back on a failed gate)", 1) \
        in boundaries, boundaries
    for task, occurrence in boundaries:
        to = passive_of(lab)
        killed = controller(lab, "swapover.yml", {"continuity_to_site": to, "continuity_evidence_dir": str(evidence)},
                            kill_at=(task, occurrence))
        assert killed["killed"], f"the controller was not killed at {task!r}: rc {killed['rc']}"
        roles, persisted = state(lab)
        row = {"point": f"task {task!r} #{occurrence}", "to": to, "roles_after_kill": roles,
               "persisted_after_kill": persisted}
        row.update(converge(lab, to, task, evidence))
        RESULTS["kills"].append(row)
    assert sampler.both_open == [], sampler.both_open[:5]


def test_inside_the_switch_quiesce(lab, load):
    """Killed right after the quiesce paused the old site's client queue: the queue stays paused (status says so)
    until the re-run, which resumes it."""
    traffic, sampler, evidence = load
    old = next(s for s in SITES if lab.roles()[s] == "active")
    to = passive_of(lab)
    client = lab.client(old, timeout=1.0)
    queue = objectname.queue(old, ADDRESS, ADDRESS, "anycast")
    killed = controller(lab, "swapover.yml", {"continuity_to_site": to, "continuity_evidence_dir": str(evidence)},
                        kill_when=reads_true(client, queue, "Paused"))
    assert killed["killed"], killed["out"][-2000:]
    roles, persisted = state(lab)
    status = controller(lab, "status.yml", {"continuity_evidence_dir": str(evidence)})
    said = " ".join(status["out"].split())
    assert "paused_queues" in breaches(status["out"]) and ADDRESS in said, said[-2000:]
    row = {"point": "inside the switch: old site's client queues paused", "to": to, "roles_after_kill": roles,
           "persisted_after_kill": persisted, "status_before_rerun": "breach: paused_queues"}
    row.update(converge(lab, to, "quiesce", evidence))
    assert client.read(queue, "Paused") is False
    RESULTS["kills"].append(row)
    assert traffic.wait_received(50, timeout=60, site=to), traffic.status()
    assert sampler.both_open == [], sampler.both_open[:5]


def test_inside_the_switch_right_after_the_activation_then_the_old_broker_restarts(lab, load):
    """Killed the instant the new site's client acceptor opened (before the seal and the resume): the old site's fence
    is already in its broker.xml, so a restart of the old broker brings it back passive -- not two sites serving
    (issue 16 item 6). The re-run then resumes what the dead run left paused."""
    _traffic, sampler, evidence = load
    old = next(s for s in SITES if lab.roles()[s] == "active")
    to = passive_of(lab)
    opened = reads_true(lab.client(to, timeout=1.0), objectname.acceptor(to, "artemis"), "Started")
    killed = controller(lab, "swapover.yml", {"continuity_to_site": to, "continuity_evidence_dir": str(evidence)},
                        kill_when=opened)
    assert killed["killed"], killed["out"][-2000:]
    roles, persisted = state(lab)
    assert roles == {to: "active", old: "passive"} and persisted[old] == "passive", (roles, persisted)
    # the old broker restarts (kill -9, started again by its service script)
    kill_broker(lab, old)
    restart(lab, old)
    restarted = lab.roles()
    assert restarted == {to: "active", old: "passive"}, restarted
    row = {"point": "inside the switch: new site opened (then the old broker restarted)", "to": to,
           "roles_after_kill": roles, "persisted_after_kill": persisted, "roles_after_old_restart": restarted}
    row.update(converge(lab, to, "activation", evidence))
    RESULTS["kills"].append(row)
    assert sampler.both_open == [], sampler.both_open[:5]


def test_the_ledgers_show_nothing_lost_and_nothing_delivered_twice(lab, load):
    """Every swapover kill above happened under traffic: the re-runs lost nothing and delivered nothing twice. (The
    failover part below kills a broker too, which loses what its mirror had not sent by design: it runs without
    traffic and is judged by the sampler and the convergence only.)"""
    traffic, sampler, _evidence = load
    time.sleep(2)
    traffic.stop()
    summary = reconcile(traffic.run_dir, "ft", "faults").summary()
    RESULTS["ledgers"] = summary
    print(f"\nfault injection, swapover: {len(RESULTS['kills'])} controller kills under 100 msg/s, each followed by a "
          f"re-run; sampler so far {sampler.summary()}; ledgers {summary}")
    assert len(RESULTS["kills"]) >= 17, RESULTS["kills"]
    assert summary["lost"] == 0 and summary["real_duplicates"] == 0, summary
    assert summary["accepted_msgs"] > 1000, summary


def kill_broker(lab: Lab, site: str) -> None:
    """kill -9 of a site's broker, and wait until the process is gone (its service script refuses to start while the
    pid in its pid file is alive)."""
    pid = lab.broker_pid(site)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"{site}'s broker (pid {pid}) still exists 30 s after kill -9")


def restart(lab: Lab, site: str) -> None:
    """Start a killed broker again with its service script and wait until it answers."""
    started = subprocess.run([str(lab.instance(site) / "bin" / "artemis-service"), "start"], capture_output=True,
                             text=True, timeout=60)
    assert started.returncode == 0, f"artemis-service start of {site}: {started.stdout}{started.stderr}"
    deadline = time.monotonic() + 120
    while lab.acceptor_started(site) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert lab.acceptor_started(site) is not None, f"{site} did not come back within 120 s"
    time.sleep(1)  # a 2.43+ broker's first config refresh (a fence written while it was down is already in its file)


def test_failover_killed_at_each_task_then_the_lost_broker_restarts(lab, load):
    """dc1's broker dies; failover.yml is killed at each of its task boundaries from the fence on; then dc1's broker
    starts again (its host was only rebooted, say). Whatever the point, dc1 and dc2 never serve together, and the
    same failover command run again converges (dc2 serving, dc1 fenced now and after a restart). The loop restores
    dc1 as the active site before each point."""
    _traffic, sampler, evidence = load
    extra = {"continuity_lost_site": "dc1", "continuity_loss_probes": 1, "continuity_evidence_dir": str(evidence)}
    log = Path(evidence) / "failover-tasks.jsonl"
    lab.ensure_roles("dc1")
    kill_broker(lab, "dc1")
    first = controller(lab, "failover.yml", extra, task_log=log)
    assert first["rc"] == 0, first["out"][-3000:]
    restart(lab, "dc1")
    tasks = [(r["task"], r["occurrence"]) for r in map(json.loads, log.read_text().splitlines())]
    start = next(i for i, (t, _) in enumerate(tasks) if t.startswith("Fence the lost site"))
    points = tasks[start:]
    assert len(points) >= 8, tasks
    for task, occurrence in points:
        lab.ensure_roles("dc1")
        kill_broker(lab, "dc1")
        killed = controller(lab, "failover.yml", extra, kill_at=(task, occurrence))
        assert killed["killed"], f"the controller was not killed at {task!r}: rc {killed['rc']}"
        restart(lab, "dc1")
        roles, persisted = state(lab)
        assert list(roles.values()).count("active") <= 1, (task, roles)
        again = controller(lab, "failover.yml", extra)
        after, persisted_after = state(lab)
        if roles == {"dc1": "active", "dc2": "passive"}:
            # killed before its fence: dc1 came back serving, so it is not lost and the same command refuses
            said = " ".join(again["out"].split())
            assert again["rc"] != 0 and "it is not lost" in said, (task, said[-1500:])
            assert after == roles, (task, after)
        else:
            assert again["rc"] == 0, f"failover re-run after the kill at {task!r} failed:\n{again['out'][-3000:]}"
            assert after == {"dc1": "passive", "dc2": "active"} and persisted_after == after, \
                (task, after, persisted_after)
        RESULTS["kills"].append({"point": f"failover task {task!r} #{occurrence}",
                                 "roles_after_kill_and_restart": roles, "persisted_after_kill": persisted,
                                 "rerun_s": round(again["wall"], 1)})
    lab.ensure_roles("dc1")
    assert sampler.both_open == [], sampler.both_open[:5]
    print(f"\nfault injection, all: {len(RESULTS['kills'])} controller kills (swapover.yml under traffic, then "
          f"failover.yml with the lost broker restarted after each); sampler {sampler.summary()}")
    for row in RESULTS["kills"]:
        print(f"  {row}")
