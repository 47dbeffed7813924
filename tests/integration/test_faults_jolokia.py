"""Fault injection on the real two-site lab, on Artemis 2.44.0 and 2.37.0 (issue 16): one site's Jolokia down at each
phase of a swapover (preflight, quiesce, drain gate, activate, seal, post-gates) and of a failback, under traffic for
the swapover. (The controller killed at every task boundary, failback included, is tests/integration/test_faults.py.)

The broker keeps serving AMQP; only its management endpoint is unreachable: each site's Jolokia is reached through a
lab WAN link (continuity_lab.wan, in this process) and the runbooks are pointed at it by an overlay inventory
(continuity_jolokia_url, continuity_jolokia_origin: the broker's jolokia-access.xml checks the Origin header against
its own web server). The link is cut when the phase starts (a task start, through the kill_at_task callback, or a
broker state watched over the real Jolokia every 5 ms for the phases inside the one swapover task) and restored
after the run. The run must complete or stop with a message naming both sites' roles; then the same command
converges and status.yml reports no safety breach.

A sampler reads both brokers' client acceptors directly (not through the links) every 50 ms all along: never two
sites serving. The swapover ledgers must show nothing lost. Each parametrized case runs on one of the versions in
turn (case_per_version: conftest deselects it on the other; FAULTS_EVERY_VERSION=1 runs it on both). Printed numbers
go to benchmarks/README.md.

The lab is the one test_faults.py ran on before (conftest.fault_lab: one per version for both suites);
FAULTS_LAB_ROOT / FAULTS_LAB_BASE (/ FAULTS_LAB_VERSION) point both suites at a lab already up (development).
"""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path

import pytest
from fault_support import (
    FAST,
    LOAD_RATE,
    SAFETY_CHECKS,
    breaches,
    converge_status,
    failure_message,
    kill_broker,
    lose,
    reads_true,
    roles_now,
    run,
    said_roles,
    state,
)
from runbook_support import HTTP_OFFSET, SITES, Lab, RoleSampler, Traffic, phases, reconcile

from ansible_collections.continuity.artemis.plugins.module_utils import objectname

pytestmark = [pytest.mark.slow]

ADDRESS = "faultsj.orders"
RESULTS: dict = {}  # per lab (version): the cases and the ledgers


# ---------------------------------------------------------------------- lab, Jolokia links, overlay
@pytest.fixture(scope="module")
def lab(fault_lab):
    """The fault suites' lab of this version (conftest.fault_lab, shared with test_faults.py), dc1 serving."""
    RESULTS.clear()
    RESULTS.update(jolokia=[], version=fault_lab.version)
    fault_lab.ensure_roles("dc1")
    return fault_lab


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JolokiaLinks:
    """One WAN link per site in front of its Jolokia port, with a control endpoint (POST /cut, /restore)."""

    def __init__(self, lab: Lab, root: Path):
        from continuity_lab.wan import WanLink, serve_control

        self.lab, self.links, self.controls, self.httpd = lab, {}, {}, []
        for site in SITES:
            link = WanLink(("127.0.0.1", lab.base + HTTP_OFFSET[site]), ("127.0.0.1", free_port()),
                           f"jolokia-{site}").start()
            httpd = serve_control(link)
            self.links[site] = link
            self.controls[site] = f"http://127.0.0.1:{httpd.server_address[1]}"
            self.httpd.append(httpd)
        self.overlay = root / "jolokia-through-links.yml"
        hosts = "".join(
            f"        {site}:\n          hosts:\n            {site}-artemis:\n"
            f"              continuity_jolokia_url: http://127.0.0.1:{self.links[site].port}/console/jolokia\n"
            f"              continuity_jolokia_origin: http://127.0.0.1:{lab.base + HTTP_OFFSET[site]}\n"
            for site in SITES)
        self.overlay.write_text("all:\n  children:\n    artemis:\n      children:\n" + hosts)

    def url(self, site: str) -> str:
        return f"http://127.0.0.1:{self.links[site].port}/console/jolokia"

    def cut(self, site: str) -> None:
        self.links[site].cut()

    def restore(self, site: str | None = None) -> None:
        for s in [site] if site else SITES:
            self.links[s].restore()

    def stop(self) -> None:
        for httpd in self.httpd:
            httpd.shutdown()
        for link in self.links.values():
            link.stop()


@pytest.fixture(scope="module")
def links(lab, tmp_path_factory):
    the_links = JolokiaLinks(lab, tmp_path_factory.mktemp("faults-fj-links"))
    yield the_links
    the_links.stop()


@pytest.fixture(scope="module")
def sampler(lab):
    """Both brokers' client acceptors read directly (not through the links) every 50 ms for the whole module."""
    the_sampler = RoleSampler(lab, interval=0.05, max_seconds=3600)
    the_sampler.start()
    yield the_sampler
    the_sampler.stop()


@pytest.fixture(scope="module")
def load(lab, sampler, tmp_path_factory):
    evidence = tmp_path_factory.mktemp("faults-fj-evidence")
    traffic = Traffic(lab, evidence, "faults-jolokia", "fj", address=ADDRESS, producers=2, consumers=2, rate=LOAD_RATE)
    traffic.start()
    try:
        yield traffic, evidence
    finally:
        traffic.stop()


def phases_of(evidence: Path, out: str) -> list:
    """The phase records of the run whose output is ``out`` (its run id from the evidence path it printed)."""
    found = re.findall(r"((?:swapover|failback)-\d{8}T\d{6}Z)", out)
    return phases(evidence / found[-1]) if found else []


# ---------------------------------------------------------------------- 1. Jolokia of one site down (swapover)
def test_the_overlay_reaches_both_brokers_through_the_links_with_their_own_origin(lab, links, load):
    """The links pass Jolokia as it is; the broker accepts the proxied calls only with its own Origin
    (continuity_jolokia_origin), which status.yml gets from the overlay."""
    from ansible_collections.continuity.artemis.plugins.module_utils import jolokia

    traffic, evidence = load
    assert traffic.wait_received(100, timeout=90, site="dc1"), traffic.status()
    wrong = jolokia.JolokiaClient(links.url("dc1"), "admin", "lab-admin-secret", timeout=5, retries=0)
    with pytest.raises(jolokia.JolokiaError):  # Origin = the link's address: refused by jolokia-access.xml
        wrong.read(objectname.broker("dc1"), "Version")
    status = run(lab, "status.yml", {"continuity_evidence_dir": str(evidence)}, overlay=links.overlay)
    assert status["rc"] == 0 and not breaches(status["out"]) & SAFETY_CHECKS, status["out"][-2500:]
    assert all(link.accepted > 0 for link in links.links.values()), {s: k.accepted for s, k in links.links.items()}


def queue_paused(lab: Lab, site: str):
    return reads_true(lab.client(site, timeout=1.0), objectname.queue(site, ADDRESS, ADDRESS, "anycast"), "Paused")


def acceptor_reads(lab: Lab, site: str, value: bool):
    client, mbean = lab.client(site, timeout=1.0), objectname.acceptor(site, "artemis")

    def check() -> bool:
        try:
            return client.read(mbean, "Started") is value
        except Exception:  # not readable this instant
            return False
    return check


def fence_written(lab: Lab, site: str):
    return lambda: lab.persisted_role(site) == "passive"


# (phase, which site's Jolokia goes down: "old" or "new", trigger kind)
SWAPOVER_CASES = [
    ("preflight", "old", "before"),
    ("preflight", "new", "before"),
    ("quiesce", "old", "old queue paused"),
    ("drain gate", "old", "drain"),
    ("drain gate", "new", "drain"),
    ("activate", "new", "old fence written"),
    ("seal", "old", "new acceptor started"),
    ("post-gates", "new", "task"),
    ("post-gates", "old", "task"),
]


@pytest.mark.case_per_version
@pytest.mark.parametrize("phase,down,trigger", SWAPOVER_CASES, ids=[f"{p}-{d}" for p, d, _ in SWAPOVER_CASES])
def test_swapover_with_one_sites_jolokia_down(lab, links, load, sampler, phase, down, trigger):
    _traffic, evidence = load
    links.restore()
    old, new = roles_now(lab)
    site = old if down == "old" else new
    extra = {"continuity_to_site": new, "continuity_evidence_dir": str(evidence), **FAST}
    kw: dict = {}
    cut = lambda: links.cut(site)  # noqa: E731
    assert not queue_paused(lab, old)(), f"{ADDRESS} is paused on {old} before the case"
    if trigger == "drain":
        # the drain gate starts once the old site's acceptor stopped; 20 stable samples keep it going >= 1 s, and the
        # cut lands 0.3 s into it (the failed phase in the evidence shows where it landed)
        extra["continuity_stable_samples"] = 20
        kw["when"] = acceptor_reads(lab, old, False)
        kw["then"] = lambda: (time.sleep(0.3), cut())
    elif trigger == "before":
        cut()
    elif trigger == "task":
        kw["fault_at"] = ("Post-gates on the new active site", 1, links.controls[site] + "/cut")
    else:
        kw["when"] = {"old queue paused": queue_paused(lab, old),
                      "old acceptor stopped": acceptor_reads(lab, old, False),
                      "old fence written": fence_written(lab, old),
                      "new acceptor started": acceptor_reads(lab, new, True)}[trigger]
        kw["then"] = cut
    first = run(lab, "swapover.yml", extra, overlay=links.overlay, **kw)
    roles, persisted = state(lab)
    links.restore()
    message = failure_message(first["out"]) if first["rc"] else ""
    failed = [f"{p['phase']}:{p['decision']}" for p in phases_of(evidence, first["out"])
              if p.get("decision") in ("fail", "rollback")]
    row = {"case": f"swapover {old}->{new}, {site}'s Jolokia down at {phase}", "rc": first["rc"], "failed": failed,
           "wall_s": first["wall"], "cut": trigger == "before" or first["fired"] or "Post-gates" in first["out"],
           "roles_after": roles, "persisted_after": persisted, "message": message[:600]}
    RESULTS["jolokia"].append(row)
    print(f"\n{row}")
    assert row["cut"], f"the link was never cut ({trigger}):\n{first['out'][-2000:]}"
    assert list(roles.values()).count("active") <= 1, roles
    # Where the cut landed, by the failed phase in the evidence. The seal takes milliseconds after the new acceptor
    # opens, so a cut triggered by that opening may land in the steps after it (release, mirrors_after): still a
    # cut of the old site after the activation, which is what that case is about.
    expected = {"quiesce": ("quiesce",), "drain gate": ("drain",), "activate": ("activate",),
                "seal": ("seal", "release", "mirrors_after")}.get(phase)
    if expected:
        assert any(f.split(":")[0] in expected for f in failed), f"the cut did not land in {phase}: {failed}"
    if first["rc"]:
        # it stopped: its message names both sites' roles, and says them as they are (an unreachable one aside)
        told = said_roles(message)
        assert set(told) == set(SITES), f"the message does not say both sites' roles: {message}"
        wrong = {s: (told[s], roles[s]) for s in SITES if told[s] not in (roles[s], "unreachable", "unknown")}
        assert not wrong, f"the message says {told}, the brokers are {roles}: {message}"
    again = run(lab, "swapover.yml", extra, overlay=links.overlay)
    assert again["rc"] == 0, f"re-run after {site}'s Jolokia was down at {phase} failed:\n{again['out'][-3000:]}"
    roles, persisted = state(lab)
    assert roles == {new: "active", old: "passive"} and persisted == roles, (roles, persisted)
    converge_status(lab, evidence, f"{phase}/{down}", overlay=links.overlay)
    row["rerun_s"] = again["wall"]
    assert sampler.both_open == [], sampler.both_open[:5]


def test_swapover_ledgers_nothing_lost(lab, load, sampler):
    traffic, _evidence = load
    assert traffic.wait_received(50, timeout=60), traffic.status()
    time.sleep(2)
    traffic.stop()
    summary = reconcile(traffic.run_dir, "fj", "faults-jolokia").summary()
    RESULTS["ledgers"] = summary
    print(f"\nArtemis {RESULTS['version']}, Jolokia down, swapover: {len(RESULTS['jolokia'])} cases "
          f"under {LOAD_RATE} msg/s; "
          f"ledgers {summary}; "
          f"sampler {sampler.summary()}")
    assert summary["lost"] == 0 and summary["real_duplicates"] == 0, summary
    assert summary["accepted_msgs"] > 500, summary


# ---------------------------------------------------------------------- 2. failback
def test_failback_with_the_returning_sites_jolokia_down_until_it_is_restored(lab, links, sampler, tmp_path):
    """dc1 is lost (its broker killed), failover.yml makes dc2 serve. failback.yml starts while dc1's Jolokia link is
    cut: the fence is written to its broker.xml, the broker started, and the wait for its Jolokia goes on until the
    link is restored 20 s later; then the failback completes (dc1 passive and in sync)."""
    links.restore()
    lab.ensure_roles("dc1")
    kill_broker(lab, "dc1")
    failover = run(lab, "failover.yml", {"continuity_lost_site": "dc1", "continuity_loss_probes": 1,
                                         "continuity_evidence_dir": str(tmp_path)})
    assert failover["rc"] == 0, failover["out"][-3000:]
    assert lab.roles() == {"dc1": "unreachable", "dc2": "active"}
    links.cut("dc1")
    timer = threading.Timer(20, links.restore, args=("dc1",))
    timer.start()
    try:
        back = run(lab, "failback.yml", {"continuity_returning_site": "dc1", "continuity_evidence_dir": str(tmp_path),
                                         **FAST}, overlay=links.overlay)
    finally:
        timer.cancel()
        links.restore()
    roles, persisted = state(lab)
    RESULTS["jolokia"].append({"case": "failback of dc1, its Jolokia down from the start, restored after 20 s",
                               "rc": back["rc"], "wall_s": back["wall"], "roles_after": roles,
                               "message": failure_message(back["out"])[:600] if back["rc"] else ""})
    print(f"\n{RESULTS['jolokia'][-1]}")
    assert back["rc"] == 0, back["out"][-3000:]
    assert roles == {"dc1": "passive", "dc2": "active"} and persisted == roles, (roles, persisted)
    converge_status(lab, tmp_path, "failback, returning Jolokia down", overlay=links.overlay)
    assert sampler.both_open == [], sampler.both_open[:5]


FAILBACK_JOLOKIA_CASES = [
    # (task at whose start the link is cut, which site, handover)
    ("Make sure every mirror connection runs again (a failover stops a sync mirror)", "dc2", False),
    ("Wait for the stale backlog to reach the active site", "dc1", False),
    ("Both directions caught up (connected, backlog and queue differences within the steady-state bounds)", "dc2",
     False),
    ("Hand the active role back", "dc1", True),
]


@pytest.mark.case_per_version
@pytest.mark.parametrize("task,site,handover", FAILBACK_JOLOKIA_CASES,
                         ids=["mirrors-active", "stale-backlog-returning", "sync-active", "handover-returning"])
def test_failback_with_one_sites_jolokia_down_at_a_phase(lab, links, sampler, tmp_path, task, site, handover):
    links.restore()
    lose(lab, "dc1")
    extra = {"continuity_returning_site": "dc1", "continuity_failback_handover": handover,
             "continuity_evidence_dir": str(tmp_path), **FAST}
    # a gate behind the cut link cannot pass: it fails after this timeout instead of FAST's 30 s (the re-run keeps 30)
    first = run(lab, "failback.yml", {**extra, "continuity_run_id": "fbj-first", "continuity_sync_timeout": 10},
                overlay=links.overlay, fault_at=(task, 1, links.controls[site] + "/cut"))
    roles, persisted = state(lab)
    links.restore()
    message = failure_message(first["out"]) if first["rc"] else ""
    row = {"case": f"failback of dc1{' with handover' if handover else ''}, {site}'s Jolokia down at {task!r}",
           "rc": first["rc"], "wall_s": first["wall"], "roles_after": roles, "persisted_after": persisted,
           "message": message[:600]}
    RESULTS["jolokia"].append(row)
    print(f"\n{row}")
    assert list(roles.values()).count("active") <= 1, roles
    if first["rc"]:
        told = said_roles(message)
        assert set(told) == set(SITES), f"the message does not say both sites' roles: {message}"
        wrong = {s: (told[s], roles[s]) for s in SITES if told[s] not in (roles[s], "unreachable", "unknown")}
        assert not wrong, f"the message says {told}, the brokers are {roles}: {message}"
    if first["rc"] == 0:
        # completed: then its sync gate passed on a sample that passed (not on a timeout)
        sync = [p for p in phases(tmp_path / "fbj-first") if p.get("phase") == "sync"]
        assert sync and sync[-1]["decision"] == "pass" and (sync[-1].get("gate_samples") or [{}])[-1].get("ok"), \
            f"the failback completed without a passing sync gate: {sync}"
    again = run(lab, "failback.yml", extra, overlay=links.overlay)
    assert again["rc"] == 0, f"re-run after {site}'s Jolokia was down at {task!r} failed:\n{again['out'][-3000:]}"
    want = {"dc1": "active", "dc2": "passive"} if handover else {"dc1": "passive", "dc2": "active"}
    roles, persisted = state(lab)
    assert roles == want and persisted == roles, (roles, persisted)
    converge_status(lab, tmp_path, task, overlay=links.overlay)
    row["rerun_s"] = again["wall"]
    assert sampler.both_open == [], sampler.both_open[:5]
