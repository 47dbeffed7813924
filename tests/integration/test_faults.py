"""Fault injection on the real two-site lab, on Artemis 2.44.0 and 2.37.0 (issue 16): the controller dies at every task
boundary of swapover.yml and inside the switch itself, under traffic, then at every task boundary of failover.yml
from its fence on, then of failback.yml (tasks/failback.yml: fence, start, wait, pair roles, mirror connections,
stale backlog, sync; then the handover) from its fence on, with and without the handover, with a sampler reading both
brokers' client acceptors all along. Boundaries with no change between them leave the same state behind, so one kill
stands for each such run of them (fault_support.kill_points: the boundaries after a task that may have changed
anything). After each swapover kill the old site's broker restarts (artemis-service stop and start: it must come back
in the role its broker.xml gives it, never next to the new site); after each failover kill the lost broker starts
again; a failback point finds the returning broker down before the run's start task and running after it. Then the
same command is run again and must converge (a failback: the returning site passive and in sync, or active after a
handover), and then status.yml must report no safety breach; the swapover ledgers must show nothing lost and nothing
delivered twice that a broker restart does not explain. Invariants (docs/runbooks.md): (a) never two sites serving,
whatever dies when; (c) what a dead run leaves behind (paused queues, an old site not yet sealed) is visible in
status.yml and repaired by the re-run.

"The controller dies": fault_support.run (SIGKILL of ansible-playbook and every process under it) at a task start, or
when a broker state watched over Jolokia holds (the in-switch points). Each kill point runs on one of the versions in
turn, those where a fence is written or the active role moves on both (ON_EVERY_VERSION; fault_support.share says
why; FAULTS_EVERY_VERSION=1: every point on both). Printed numbers go to benchmarks/README.md.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fault_support import (
    FAST,
    LOAD_RATE,
    SAFETY_CHECKS,
    STATS,
    breaches,
    converge_status,
    kill_broker,
    kill_points,
    lose,
    reads_true,
    restart_broker,
    restart_duplicates,
    restart_lost_ack_problems,
    run,
    share,
    start_broker,
    state,
    task_boundaries,
)
from runbook_support import (
    SITES,
    Lab,
    RoleSampler,
    Traffic,
    browse_all,
    ledger_by_msg_id,
    read_jsonl,
    received_details,
    reconcile,
    remove_messages,
    until,
)

from ansible_collections.continuity.artemis.plugins.module_utils import objectname
from ansible_collections.continuity.artemis.plugins.module_utils import reconcile as mirror_reconcile

pytestmark = [pytest.mark.slow]

ADDRESS = "faults.orders"
RESULTS: dict = {}  # per lab (version): the kills and restarts, for the ledger test and the printed totals

# The kill points that run on every version, not in turn (fault_support.share): where a fence is written or takes
# effect, which before Artemis 2.43 reaches a running broker only at its next start (fault_support.VERSIONS).
ON_EVERY_VERSION = ("Swap the active role", "Persist the fence of the old site", "Fence the lost site",
                    "Fence the returning site", "Hand the active role back")


@pytest.fixture(scope="module")
def lab(fault_lab):
    """The fault suites' lab of this version (conftest.fault_lab, shared with test_faults_jolokia.py)."""
    RESULTS.clear()
    RESULTS.update(kills=[], restarts=[], lost_acks=[], version=fault_lab.version)
    fault_lab.ensure_roles("dc1")
    return fault_lab


@pytest.fixture(scope="module")
def load(lab, tmp_path_factory):
    """Traffic and the sampler for the whole module: every kill happens under load, and one ledger proves the sum."""
    evidence = tmp_path_factory.mktemp("faults-evidence")
    traffic = Traffic(lab, evidence, "faults", "ft", address=ADDRESS, producers=2, consumers=2, rate=LOAD_RATE)
    sampler = RoleSampler(lab, interval=0.05, max_seconds=3600)
    RESULTS["ledger_dir"] = traffic.run_dir
    traffic.start()
    sampler.start()
    try:
        yield traffic, sampler, evidence
    finally:
        sampler.stop()
        traffic.stop()


LOST_ACKS = "holds copies of messages that came from"


def swapover(lab: Lab, to: str, evidence: Path, **fault) -> dict:
    """swapover.yml to ``to`` (``fault``: fault_support.run's kill_at / when). When its drain gate refuses copies
    ``to`` keeps of messages the old site no longer has, the test does what docs/ha.md tells an operator: each copy
    is checked against the consumers' ledgers (restart_lost_ack_problems: an acknowledgement a restart of ``to``
    lost), then the same command runs with continuity_mirror_extras=remove. Any other copy fails the test."""
    extra = {"continuity_to_site": to, "continuity_evidence_dir": str(evidence)}
    done = run(lab, "swapover.yml", extra, **fault)
    if done["killed"] or done["rc"] == 0 or LOST_ACKS not in " ".join(done["out"].split()):
        return done
    found = refused_copies(evidence)
    assert set(found) == {ADDRESS} and not found[ADDRESS]["only_old"]["count"] \
        and not found[ADDRESS]["only_new_other"]["count"], found
    copies = found[ADDRESS]["only_new_from_old"]
    assert copies["count"] == len(copies["first"]), copies  # all of them listed: each one is checked
    _sent, received = ledger_by_msg_id(RESULTS["ledger_dir"], "ft")
    problems = restart_lost_ack_problems(copies["first"], received, RESULTS["restarts"], holder=to)
    assert not problems, f"{to} keeps copies no restart explains: {problems}"
    RESULTS["lost_acks"].extend(dict(c, site=to) for c in copies["first"])
    return run(lab, "swapover.yml", dict(extra, continuity_mirror_extras="remove"), **fault)


def refused_copies(evidence: Path) -> dict:
    """The reconcile phase of the newest swapover evidence: {queue: {only_new_from_old, only_new_other, only_old}}."""
    newest = sorted(evidence.glob("swapover-*"))[-1]
    phase = next(r for r in read_jsonl(newest / "phases.jsonl", validate=False) if r.get("phase") == "reconcile")
    return phase["data"]["queues"]


def converge(lab: Lab, to: str, point: str, evidence: Path) -> dict:
    """The same command again, then status.yml: both must pass, the roles must be as asked and restart-safe."""
    again = swapover(lab, to, evidence)
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
    """List the task boundaries once (an undisturbed swapover), then kill the controller at each of them that leaves
    a distinct state, in turn."""
    traffic, sampler, evidence = load
    assert traffic.wait_received(100, timeout=60, site="dc1"), traffic.status()
    log = tmp_path / "tasks.jsonl"
    first = run(lab, "swapover.yml", {"continuity_to_site": "dc2", "continuity_evidence_dir": str(evidence)},
                task_log=log)
    assert first["rc"] == 0, first["out"][-3000:]
    boundaries = task_boundaries(log)
    assert len(boundaries) >= 15 and "Quiesce, drain gate and activate in one task (rolls back on a failed gate)" \
        in [b["task"] for b in boundaries], boundaries
    every, folded = kill_points(boundaries)
    # the switch task itself and the fence after it change the sites: kills right before and right after them
    assert {"Swap the active role (quiesce, drain gate, activate; rollback on a failed gate)",
            "Persist the fence of the old site on its host (a restart keeps it passive)"} <= \
        {p["task"] for p in every}, every
    points = share(every, lab.version, ON_EVERY_VERSION)
    RESULTS["swapover_boundaries"] = (len(boundaries), folded, len(every), len(points))
    for task, occurrence in ((p["task"], p["occurrence"]) for p in points):
        to = passive_of(lab)
        old = next(s for s in SITES if s != to)
        killed = swapover(lab, to, evidence, kill_at=(task, occurrence))
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
    killed = swapover(lab, to, evidence, when=reads_true(client, queue, "Paused"))
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
    killed = swapover(lab, to, evidence, when=opened)
    assert killed["killed"], killed["out"][-2000:]
    roles, persisted = state(lab)
    assert roles == {to: "active", old: "passive"} and persisted[old] == "passive", (roles, persisted)
    # the old broker restarts (kill -9, started again by its service script)
    RESULTS["restarts"].append(kill_broker(lab, old))
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
    lost_acks = settle_lost_acks(lab)
    rec = reconcile(traffic.run_dir, "ft", "faults")
    summary = rec.summary()
    receipts = received_details(traffic.run_dir, "ft", rec.real_dups, limit=len(rec.real_dups))
    by_restart, unexplained = restart_duplicates(receipts, RESULTS["restarts"])
    RESULTS["ledgers"] = dict(summary, duplicates_by_old_broker_restarts=len(by_restart))
    total, folded, distinct, here = RESULTS["swapover_boundaries"]
    print(f"\nfault injection on Artemis {RESULTS['version']}, swapover: {len(RESULTS['kills'])} controller kills "
          f"under {LOAD_RATE} msg/s ({total} task boundaries, {folded} of them leaving the state an earlier one "
          f"leaves; {here} of the {distinct} kill points on this version), "
          f"each followed by a restart of the old broker and a re-run; sampler so far {sampler.summary()}; "
          f"ledgers {summary}; "
          f"delivered twice: {len(by_restart)} explained by the {len(RESULTS['restarts'])} broker restarts, "
          f"{len(unexplained)} not; copies a restarted broker kept after their acknowledgement on its peer "
          f"(removed): {len(RESULTS['lost_acks'])} found by a drain gate, {len(lost_acks)} after the traffic")
    assert len(RESULTS["kills"]) == here + 2 and here >= 3, RESULTS["kills"]  # its share and the two in the switch
    assert summary["lost"] == 0, summary
    assert not unexplained, (unexplained[:10], received_details(traffic.run_dir, "ft", unexplained, limit=10))
    assert summary["accepted_msgs"] > 1000, summary


def settle_lost_acks(lab: Lab) -> list:
    """Once the traffic stopped: the two sites' copies of ADDRESS must be the same messages, but for copies a
    restarted broker kept after their acknowledgement on its peer (restart_lost_ack_problems), which are removed as
    docs/ha.md does it by hand, so the failover and failback below start from sites that agree. Returns them."""
    def counts() -> dict:
        return {s: lab.client(s).read(objectname.queue(s, ADDRESS, ADDRESS, "anycast"), "MessageCount") for s in SITES}

    until(lambda: len(set(counts().values())) == 1, 30, 0.2)  # the mirrors carry the last sends and acks
    nodes = {s: lab.client(s).read(objectname.broker(s), "NodeID") for s in SITES}
    held = {s: browse_all(lab, s, ADDRESS) for s in SITES}
    _sent, received = ledger_by_msg_id(RESULTS["ledger_dir"], "ft")
    removed = []
    for holder in SITES:
        peer = next(s for s in SITES if s != holder)
        diff = mirror_reconcile.compare(held[peer], nodes[peer], held[holder], nodes[holder])
        assert not diff["only_new_other"], f"{holder} holds messages {peer} never had: {diff['only_new_other'][:10]}"
        copies = diff["only_new_from_old"]
        problems = restart_lost_ack_problems(copies, received, RESULTS["restarts"], holder)
        assert not problems, f"{holder} keeps copies no restart explains: {problems[:10]}"
        if copies:
            assert remove_messages(lab, holder, ADDRESS, [c["user_id"] for c in copies]) == len(copies), copies
            removed += [dict(c, site=holder) for c in copies]
    assert until(lambda: len(set(counts().values())) == 1, 30, 0.2) is not None, counts()
    return removed


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
    boundaries = task_boundaries(log)
    start = next(i for i, b in enumerate(boundaries) if b["task"].startswith("Fence the lost site"))
    assert len(boundaries) - start >= 8, boundaries
    every, folded = kill_points(boundaries, start)
    points = share(every, lab.version, ON_EVERY_VERSION)
    for task, occurrence in ((p["task"], p["occurrence"]) for p in points):
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
    print(f"\nfailover.yml: {len(points)} of {len(every)} kill points on this version, {folded} boundaries after a "
          "task that changes nothing folded")
    print(f"\nfault injection on Artemis {RESULTS['version']}, all: {len(RESULTS['kills'])} controller kills in "
          f"{STATS['runs']} runbook runs "
          f"(swapover.yml under traffic, the old broker restarted after each, then "
          f"failover.yml with the lost broker restarted after each); sampler {sampler.summary()}")
    for row in RESULTS["kills"]:
        print(f"  {row}")


def failback_points(lab: Lab, tmp_path: Path, handover: bool) -> tuple[list, int]:
    """An undisturbed failback of dc1 with the task log on: its task boundaries from the fence on (tasks/
    failback.yml), or from the handover on (the rest is the same with and without it), those that leave a distinct
    state (fault_support.kill_points), each with whether the returning broker's start task ran before it; and how
    many boundaries were folded."""
    lose(lab, "dc1")
    log = tmp_path / f"failback-{handover}-tasks.jsonl"
    first = run(lab, "failback.yml", {"continuity_returning_site": "dc1", "continuity_failback_handover": handover,
                                      "continuity_evidence_dir": str(tmp_path), **FAST}, task_log=log)
    assert first["rc"] == 0, first["out"][-3000:]
    boundaries = task_boundaries(log)
    begin = "Hand the active role back" if handover else "Fence the returning site"
    start = next(i for i, b in enumerate(boundaries) if b["task"].startswith(begin))
    assert len(boundaries) - start >= (8 if handover else 12), boundaries
    every, folded = kill_points(boundaries, start)
    for p in every:
        at = boundaries.index(p)
        p["started"] = any(b["task"].startswith("Start the returning broker") for b in boundaries[:at])
    return every, folded


def failback_killed_at_each_task(lab: Lab, sampler, tmp_path: Path, handover: bool) -> None:
    every, folded = failback_points(lab, tmp_path, handover)
    points = share(every, lab.version, ON_EVERY_VERSION)
    print(f"\nfailback (handover {handover}): {len(points)} of {len(every)} kill points on this version, {folded} "
          "boundaries folded")
    extra = {"continuity_returning_site": "dc1", "continuity_failback_handover": handover,
             "continuity_evidence_dir": str(tmp_path), **FAST}
    want = {"dc1": "active", "dc2": "passive"} if handover else {"dc1": "passive", "dc2": "active"}
    for point in points:
        task, occurrence = point["task"], point["occurrence"]
        # before the start task, dc1 is down (lost); after it, the killed run would have started it in any case (with
        # the handover the start is behind: every point finds it running, as the re-run does)
        lose(lab, "dc1", keep_running=handover or point["started"])
        killed = run(lab, "failback.yml", extra, kill_at=(task, occurrence))
        assert killed["killed"], f"not killed at {task!r}: rc {killed['rc']}\n{killed['out'][-2000:]}"
        roles, persisted = state(lab)
        assert list(roles.values()).count("active") <= 1, (task, roles)
        again = run(lab, "failback.yml", extra)
        assert again["rc"] == 0, f"failback re-run after the kill at {task!r} failed:\n{again['out'][-3000:]}"
        after, persisted_after = state(lab)
        assert after == want and persisted_after == after, (task, after, persisted_after)
        converge_status(lab, tmp_path, f"failback kill at {task}")
        RESULTS["kills"].append({"point": f"failback{' (handover)' if handover else ''} task {task!r} #{occurrence}",
                                 "roles_after_kill": roles, "persisted_after_kill": persisted,
                                 "rerun_s": again["wall"]})
        print(f"\n{RESULTS['kills'][-1]}")
        assert sampler.both_open == [], sampler.both_open[:5]


def test_failback_killed_at_each_task_boundary(lab, load, tmp_path):
    failback_killed_at_each_task(lab, load[1], tmp_path, handover=False)


def test_failback_with_handover_killed_at_each_task_boundary(lab, load, tmp_path):
    sampler = load[1]
    failback_killed_at_each_task(lab, sampler, tmp_path, handover=True)
    lab.ensure_roles("dc1")
    print(f"\nfault injection on Artemis {RESULTS['version']}: {len(RESULTS['kills'])} controller kills (swapover, "
          f"failover, failback), {STATS['runs']} runbook runs in the session; sampler {sampler.summary()}")
    for row in RESULTS["kills"]:
        print(f"  {row}")
