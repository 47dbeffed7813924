"""Issue 16's invariants on the oldest Artemis the suite deploys (2.37.0, before 2.43, whose configuration reload
does not apply a changed acceptor to a running broker), on a private two-site lab deployed by the roles:

* a swapover there and back under traffic: 0 lost, never two sites serving (a sampler reads both brokers' client
  acceptors all along);
* the failover's fence rule, the version-dependent one: dc1 serves while the runbooks cannot reach its Jolokia.
  Without force the failover refuses (dc1's client port is open). With force it writes the fence into dc1's
  broker.xml, but 2.37 does not close the running acceptor, so the fence is never proven: the failover must stop
  without activating dc2. On 2.44 the same forced run proves the fence and activates dc2
  (test_runbooks_failover.py): the difference is the version, and the runbook must tell it from evidence.
* a wrong inventory (both sites at one broker) is refused before any change, as on 2.44;
* the controller killed at the swapover's and the failover's version-dependent points inside the switch (the old
  site's fence written, the new site opened), each followed by a restart of the old site's broker and the same
  command again (the task-boundary kills run on both versions in test_faults.py, one Jolokia down at each phase in
  test_faults_jolokia.py).
"""

from __future__ import annotations

import time

import pytest
from fault_support import (
    converge_status,
    kill_broker,
    reads_true,
    restart_broker,
    run,
    start_broker,
    state,
)
from runbook_support import Lab, RoleSampler, Traffic, dead_jolokia_overlay, reconcile

from ansible_collections.continuity.artemis.plugins.module_utils import objectname

pytestmark = [pytest.mark.slow]

VERSION = "2.37.0"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab-2.37"), version=VERSION).running() as the_lab:
        yield the_lab


def test_swapover_there_and_back_under_traffic(lab, tmp_path):
    traffic = Traffic(lab, tmp_path, "old-swap", "os", "old.orders", producers=2, consumers=2, rate=100)
    sampler = RoleSampler(lab, interval=0.05)
    sampler.start()
    traffic.start()
    try:
        assert traffic.wait_received(300, timeout=60, site="dc1"), traffic.status()
        out = lab.playbook("swapover.yml", {"continuity_to_site": "dc2"}, evidence_dir=tmp_path)
        assert out.rc == 0, out.tail()
        assert traffic.wait_received(300, timeout=60, site="dc2"), traffic.status()
        back = lab.playbook("swapover.yml", {"continuity_to_site": "dc1"}, evidence_dir=tmp_path)
        assert back.rc == 0, back.tail()
        assert traffic.wait_received(300, timeout=60, site="dc1"), traffic.status()
    finally:
        traffic.stop()
        sampler.stop()
    summary = reconcile(tmp_path / "old-swap", "os", "old-swap").summary()
    print(f"\nArtemis {VERSION}: swapover there and back at 100 msg/s: {summary}; sampler {sampler.summary()}")
    assert summary["lost"] == 0 and summary["real_duplicates"] == 0, summary
    assert sampler.both_open == [], sampler.both_open[:5]
    assert lab.roles() == {"dc1": "active", "dc2": "passive"}


def test_two_sites_pointing_at_one_broker_are_refused_before_any_change(lab):
    """A wrong inventory (both sites' Jolokia at dc2): the swapover module reads one NodeID and changes nothing."""
    lab.ensure_roles("dc1")
    digests = lab.file_digests()
    failed, res = lab.swapover_with_both_sites_at("dc2")
    assert failed and "same broker" in res.get("msg", ""), res
    assert lab.roles() == {"dc1": "active", "dc2": "passive"} and lab.file_digests() == digests, lab.read_errors


def test_a_fence_the_running_broker_does_not_apply_is_never_taken_as_proven(lab, tmp_path):
    lab.ensure_roles("dc1")
    overlay = dead_jolokia_overlay(tmp_path / "dc1-jolokia-down.yml")
    sampler = RoleSampler(lab, interval=0.05)
    sampler.start()
    try:
        refused = lab.playbook("failover.yml", {"continuity_lost_site": "dc1", "continuity_loss_probes": 1},
                               evidence_dir=tmp_path, run_id="old-refused", overlay=overlay)
        forced = lab.playbook("failover.yml", {"continuity_lost_site": "dc1", "continuity_loss_probes": 1,
                                               "continuity_failover_force": True},
                              evidence_dir=tmp_path, run_id="old-forced", overlay=overlay)
        time.sleep(1)
        roles = lab.roles()
    finally:
        sampler.stop()
    print(f"\nArtemis {VERSION}, dc1 serving with its Jolokia unreachable: refused rc {refused.rc} in "
          f"{refused.wall:.1f} s; forced rc {forced.rc} in {forced.wall:.1f} s, roles after {roles}, dc1's broker.xml "
          f"{lab.persisted_role('dc1')}; sampler {sampler.summary()}\n{forced.tail(6)}")
    assert refused.rc != 0 and "it is not lost" in " ".join(refused.text.split()), refused.tail()
    # forced: the fence is written, the running 2.37 broker keeps its acceptor open, so it is not proven: dc2 stays
    # passive and the run stops saying so
    assert forced.rc != 0, forced.tail()
    assert roles == {"dc1": "active", "dc2": "passive"}, roles
    assert sampler.both_open == [], sampler.both_open[:5]
    said = " ".join(forced.text.split())
    assert "fence" in said and "dc1" in said, forced.tail()
    # the written fence: dc1 comes back passive after any restart, a safe state for the operator to finish
    assert lab.persisted_role("dc1") == "passive"


def test_a_dead_controller_then_a_restarted_broker_never_gives_two_serving_sites(lab, tmp_path):
    """The controller dies at the points where 2.37 differs from 2.43+ (a fence in broker.xml reaches a running 2.37
    broker only at its next start), then the old site's broker restarts; each time the same command converges.

    1. swapover dc1 -> dc2 killed the instant dc2's acceptor opens (dc1's fence written, dc1 stopped at run time):
       dc1 restarted comes back passive.
    2. swapover dc2 -> dc1 killed the instant dc2's fence is in its broker.xml, before dc1 opens: dc2 restarted
       comes back passive; no site serves until the re-run opens dc1.
    3. dc1's broker dies; failover.yml is killed when it starts to activate dc2 (dc1's fence written while dc1 was
       down); dc1 starts again: passive, dc2 serving after the re-run.
    A sampler reads both client acceptors every 50 ms all along."""
    lab.ensure_roles("dc1")
    evidence = {"continuity_evidence_dir": str(tmp_path)}
    sampler = RoleSampler(lab, interval=0.05)
    sampler.start()
    rows = []
    try:
        opened = reads_true(lab.client("dc2", timeout=1.0), objectname.acceptor("dc2", "artemis"), "Started")
        killed = run(lab, "swapover.yml", {"continuity_to_site": "dc2", **evidence}, when=opened)
        assert killed["killed"], killed["out"][-2000:]
        rows.append(("swapover to dc2, dead when dc2 opened", *state(lab)))
        # (dc2's own broker.xml may still hold its fence: before 2.43 the file is lifted after start())
        assert rows[-1][1] == {"dc1": "passive", "dc2": "active"} and rows[-1][2]["dc1"] == "passive", rows[-1]
        restart_broker(lab, "dc1")
        assert lab.roles() == {"dc1": "passive", "dc2": "active"}
        assert run(lab, "swapover.yml", {"continuity_to_site": "dc2", **evidence})["rc"] == 0
        converge_status(lab, tmp_path, "2.37 swapover, dead at the activation")

        fenced = lambda: lab.persisted_role("dc2") == "passive"  # noqa: E731
        killed = run(lab, "swapover.yml", {"continuity_to_site": "dc1", **evidence}, when=fenced)
        assert killed["killed"], killed["out"][-2000:]
        rows.append(("swapover to dc1, dead when dc2's fence was written", *state(lab)))
        assert rows[-1][2]["dc2"] == "passive" and rows[-1][1]["dc1"] == "passive", rows[-1]
        restart_broker(lab, "dc2")
        assert lab.roles()["dc2"] == "passive"
        assert run(lab, "swapover.yml", {"continuity_to_site": "dc1", **evidence})["rc"] == 0
        assert state(lab) == ({"dc1": "active", "dc2": "passive"}, {"dc1": "active", "dc2": "passive"})
        converge_status(lab, tmp_path, "2.37 swapover, dead after the old site's fence")

        failover = {"continuity_lost_site": "dc1", "continuity_loss_probes": 1, **evidence}
        kill_broker(lab, "dc1")
        killed = run(lab, "failover.yml", failover, kill_at=("Activate the survivor", 1))
        assert killed["killed"], killed["out"][-2000:]
        start_broker(lab, "dc1")
        rows.append(("failover from dc1, dead at the activation, dc1 started again", *state(lab)))
        assert rows[-1][1] == {"dc1": "passive", "dc2": "passive"} and rows[-1][2]["dc1"] == "passive", rows[-1]
        again = run(lab, "failover.yml", failover)
        assert again["rc"] == 0, again["out"][-3000:]
        assert state(lab) == ({"dc1": "passive", "dc2": "active"}, {"dc1": "passive", "dc2": "active"})
        converge_status(lab, tmp_path, "2.37 failover, dead at the activation")
    finally:
        sampler.stop()
    print(f"\nArtemis {VERSION}, controller killed then the old broker restarted: {rows}; sampler {sampler.summary()}")
    assert sampler.both_open == [], sampler.both_open[:5]
    lab.ensure_roles("dc1")
