"""Fault injection on the real two-site lab (issue 16): the controller dies at every task boundary of swapover.yml
and inside the switch itself, under traffic, then at every task boundary of failover.yml from its fence on, with a
sampler reading both brokers' client acceptors all along. After each swapover kill the old site's broker restarts
(artemis-service stop and start: it must come back in the role its broker.xml gives it, never next to the new
site); after each failover kill the lost broker starts again. Then the same command is run again and must
converge (then status.yml must report no safety breach); the swapover ledgers must show nothing lost and nothing
delivered twice that a broker restart does not explain. Invariants (docs/runbooks.md): (a) never two sites
serving, whatever dies when; (c) what a dead run leaves behind (paused queues, an old site not yet sealed) is
visible in status.yml and repaired by the re-run.

"The controller dies": fault_support.run (SIGKILL of ansible-playbook and every process under it) at a task start, or
when a broker state watched over Jolokia holds (the in-switch points). Printed numbers go to benchmarks/README.md.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fault_support import (
    SAFETY_CHECKS,
    STATS,
    breaches,
    kill_broker,
    reads_true,
    restart_broker,
    restart_duplicates,
    run,
    start_broker,
    state,
)
from runbook_support import SITES, Lab, RoleSampler, Traffic, received_details, reconcile

from ansible_collections.continuity.artemis.plugins.module_utils import objectname

pytestmark = [pytest.mark.slow]

ADDRESS = "faults.orders"
RESULTS: dict = {"kills": [], "restarts": []}


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


def converge(lab: Lab, to: str, point: str, evidence: Path) -> dict:
    """The same command again, then status.yml: both must pass, the roles must be as asked and restart-safe."""
    again = run(lab, "swapover.yml", {"continuity_to_site": to, "continuity_evidence_dir": str(evidence)})
    assert again["rc"] == 0, f"re-run after the kill at {point} failed:\n{again['out'][-3000:]}"
    status = run(lab, "status.yml", {"continuity_evidence_dir": str(evidence)})
    safety = breaches(status["out"]) & SAFETY_CHECKS
    assert not safety, f"status after the re-run ({point}) breached {safety}:\n{status['out'][-2500:]}"
    other = next(s for s in SITES if s != to)
    roles, persisted = state(lab)
    assert roles == {to: "active", other: "passive"} and persisted == roles, (point, roles, persisted)
    return {"rerun_s": again["wall"]}


def passive_of(lab: Lab) -> str:
    roles = lab.roles()
    return next(s for s in SITES if roles[s] == "passive")


def test_the_swapover_task_boundaries(lab, load, tmp_path):
    """List the task boundaries once (an undisturbed swapover), then kill the controller at each of them in turn."""
    traffic, sampler, evidence = load
    assert traffic.wait_received(100, timeout=60, site="dc1"), traffic.status()
    log = tmp_path / "tasks.jsonl"
    first = run(lab, "swapover.yml", {"continuity_to_site": "dc2", "continuity_evidence_dir": str(evidence)},
                task_log=log)
    assert first["rc"] == 0, first["out"][-3000:]
    boundaries = [(r["task"], r["occurrence"]) for r in map(json.loads, log.read_text().splitlines())]
    assert len(boundaries) >= 15 and ("Quiesce, drain gate and activate in one task (rolls back on a failed gate)", 1) \
        in boundaries, boundaries
    for task, occurrence in boundaries:
        to = passive_of(lab)
        old = next(s for s in SITES if s != to)
        killed = run(lab, "swapover.yml", {"continuity_to_site": to, "continuity_evidence_dir": str(evidence)},
                     kill_at=(task, occurrence))
        assert killed["killed"], f"the controller was not killed at {task!r}: rc {killed['rc']}"
        roles, persisted = state(lab)
        assert list(roles.values()).count("active") <= 1, (task, roles)
        # then the old site's broker restarts (an operator, a host reboot): it comes back with what its broker.xml
        # says -- passive once the dead run wrote the fence, which it does before it opens the new site
        RESULTS["restarts"].append(restart_broker(lab, old))
        restarted = lab.roles()
        assert restarted == {old: persisted[old], to: roles[to]}, (task, roles, persisted, restarted)
        row = {"point": f"task {task!r} #{occurrence}", "to": to, "roles_after_kill": roles,
               "persisted_after_kill": persisted, "roles_after_old_restart": restarted}
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
    killed = run(lab, "swapover.yml", {"continuity_to_site": to, "continuity_evidence_dir": str(evidence)},
                        when=reads_true(client, queue, "Paused"))
    assert killed["killed"], killed["out"][-2000:]
    roles, persisted = state(lab)
    status = run(lab, "status.yml", {"continuity_evidence_dir": str(evidence)})
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
    killed = run(lab, "swapover.yml", {"continuity_to_site": to, "continuity_evidence_dir": str(evidence)},
                        when=opened)
    assert killed["killed"], killed["out"][-2000:]
    roles, persisted = state(lab)
    assert roles == {to: "active", old: "passive"} and persisted[old] == "passive", (roles, persisted)
    # the old broker restarts (kill -9, started again by its service script)
    kill_broker(lab, old)
    start_broker(lab, old)
    restarted = lab.roles()
    assert restarted == {to: "active", old: "passive"}, restarted
    row = {"point": "inside the switch: new site opened (then the old broker restarted)", "to": to,
           "roles_after_kill": roles, "persisted_after_kill": persisted, "roles_after_old_restart": restarted}
    row.update(converge(lab, to, "activation", evidence))
    RESULTS["kills"].append(row)
    assert sampler.both_open == [], sampler.both_open[:5]


def test_the_ledgers_show_nothing_lost_and_nothing_delivered_twice_but_by_a_broker_restart(lab, load):
    """Every swapover kill above happened under traffic: nothing was lost, and no message was delivered twice except
    where a restart of the old broker explains it (acknowledged on that broker while it was stopping, delivered
    again after it came back: restart_duplicates). (The failover part below kills a broker too, which loses what
    its mirror had not sent by design: it runs without traffic and is judged by the sampler and the convergence
    only.)"""
    traffic, sampler, _evidence = load
    time.sleep(2)
    traffic.stop()
    rec = reconcile(traffic.run_dir, "ft", "faults")
    summary = rec.summary()
    receipts = received_details(traffic.run_dir, "ft", rec.real_dups, limit=len(rec.real_dups))
    by_restart, unexplained = restart_duplicates(receipts, RESULTS["restarts"])
    RESULTS["ledgers"] = dict(summary, duplicates_by_old_broker_restarts=len(by_restart))
    print(f"\nfault injection, swapover: {len(RESULTS['kills'])} controller kills under 100 msg/s, each followed by a "
          f"restart of the old broker and a re-run; sampler so far {sampler.summary()}; ledgers {summary}; "
          f"delivered twice: {len(by_restart)} explained by the {len(RESULTS['restarts'])} broker restarts, "
          f"{len(unexplained)} not")
    assert len(RESULTS["kills"]) >= 17, RESULTS["kills"]
    assert summary["lost"] == 0, summary
    assert not unexplained, (unexplained[:10], received_details(traffic.run_dir, "ft", unexplained, limit=10))
    assert summary["accepted_msgs"] > 1000, summary


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
    first = run(lab, "failover.yml", extra, task_log=log)
    assert first["rc"] == 0, first["out"][-3000:]
    start_broker(lab, "dc1")
    tasks = [(r["task"], r["occurrence"]) for r in map(json.loads, log.read_text().splitlines())]
    start = next(i for i, (t, _) in enumerate(tasks) if t.startswith("Fence the lost site"))
    points = tasks[start:]
    assert len(points) >= 8, tasks
    for task, occurrence in points:
        lab.ensure_roles("dc1")
        kill_broker(lab, "dc1")
        killed = run(lab, "failover.yml", extra, kill_at=(task, occurrence))
        assert killed["killed"], f"the controller was not killed at {task!r}: rc {killed['rc']}"
        start_broker(lab, "dc1")
        roles, persisted = state(lab)
        assert list(roles.values()).count("active") <= 1, (task, roles)
        again = run(lab, "failover.yml", extra)
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
    print(f"\nfault injection, all: {len(RESULTS['kills'])} controller kills in {STATS['runs']} runbook runs "
          f"(swapover.yml under traffic, the old broker restarted after each, then "
          f"failover.yml with the lost broker restarted after each); sampler {sampler.summary()}")
    for row in RESULTS["kills"]:
        print(f"  {row}")
