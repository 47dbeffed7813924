"""failover.yml and failback.yml on the two-site lab under traffic: dc1's broker is killed with `kill -9`, the
failover makes dc2 serve and records what was at risk (compared with the ledgers), then the failback restarts
dc1 passive, syncs and hands the active role back, while a sampler checks that the two sites never serve at once.

The two tests run in order on one private lab (module scope); the failback starts from where the failover left
the sites (set up directly if the failover test did not get there). Needs `make venv`; the lab is real Artemis
(downloaded once into build/downloads).
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from fault_support import start_state
from runbook_support import (
    Lab,
    RoleSampler,
    Traffic,
    at_risk_of,
    dead_jolokia_overlay,
    make_agent,
    phases,
    read_jsonl,
    received_details,
    reconcile,
    validate_run_dir,
)

pytestmark = [pytest.mark.slow]

# Numbers the failover test measured, for the failback test's report (late events vs at-risk vs lost).
MEASURED: dict = {}
SAMPLE_INTERVAL = 0.5  # seconds between the at-risk samples of dc1 (the agent's default cadence is similar)


@pytest.fixture(scope="module")
def lab(site_lab):
    """The lab of the 'site' stream (conftest.site_lab), as lab-up leaves it."""
    return start_state(site_lab)


def test_kill_dc1_failover_dc2_serves_and_at_risk_covers_the_loss(lab, tmp_path):
    rid = "failover"
    lab.wan_all("restore")
    # A WAN with latency, so dc1's mirror has a real backlog when it dies (at 0 ms the lab drains in ~ms).
    lab.wan_all("latency", 100)
    lab.ensure_roles("dc1")
    # Producers only while dc1 lives: every message accepted on dc1 must then reach dc2 through the mirror to be
    # received, so the ledgers show exactly what the mirror had not delivered. The consumers start after the
    # failover (they find dc2) and drain the queue there.
    producers = Traffic(lab, tmp_path, rid, "tp", address="rb.failover", producers=2, consumers=0, rate=150)
    consumers = Traffic(lab, tmp_path, rid, "tc", address="rb.failover", producers=0, consumers=2)
    agent = make_agent(lab, tmp_path / "agent-state", rid, SAMPLE_INTERVAL)
    last_known = tmp_path / "agent-state" / "dc1" / "last-known.json"
    producers.start()
    try:
        assert producers.wait_sent(150, "dc1", timeout=90), f"no sends on dc1: {producers.status()}"
        # The agent samples every SAMPLE_INTERVAL; dc1 dies right after a sample, so the last sample is within
        # one interval before the kill.
        for _ in range(5):
            agent.sample_once()
            time.sleep(SAMPLE_INTERVAL)
        agent.sample_once()
        doc = json.loads(last_known.read_text())
        os.kill(lab.broker_pid("dc1"), signal.SIGKILL)
        t_kill = time.time()
        run = lab.playbook("failover.yml", {"continuity_lost_site": "dc1",
                                            "continuity_last_known_file": str(last_known),
                                            "continuity_incident_ts": t_kill}, evidence_dir=tmp_path, run_id=rid)
        roles = lab.roles()
        on_dc2 = producers.wait_sent(150, "dc2", timeout=90)
        consumers.start()
        producers.stop()
        consumers.wait_received(10, timeout=60, site="dc2")
    finally:
        producers.stop()
        consumers.stop()
        agent.close()
    run_dir = tmp_path / rid
    rec = reconcile(run_dir, "tp", rid, recv_prefix="tc")
    incidents = [r for r in read_jsonl(run_dir / "phases.jsonl") if r.get("kind") == "incident"] \
        if (run_dir / "phases.jsonl").exists() else []
    recorded = incidents[0].get("at_risk_events") if incidents else None
    at_risk = at_risk_of(doc)
    lost_recs = [rec.sent_by_id[m] for m in rec.lost]
    lost_sites = sorted({r.get("site") for r in lost_recs})
    ages = [round(t_kill - (r.get("confirm_ts") or 0), 3) for r in lost_recs]
    MEASURED.update(lost=len(rec.lost), at_risk_events=at_risk, runbook_at_risk_events=recorded,
                    sample_age_s=round(t_kill - doc["sample_ts"], 3))
    print(f"\nfailover: agent sample {t_kill - doc['sample_ts']:.3f} s before the kill: at_risk_events "
          f"{doc.get('at_risk_events')}, backlog {[s.get('backlog') for s in doc.get('lag_samples') or []]}, "
          f"at_risk_seconds {doc.get('at_risk_seconds')}; runbook recorded at_risk_events {recorded}; "
          f"ledgers: {rec.summary()}; lost confirmed {min(ages) if ages else None}..{max(ages) if ages else None} "
          f"s before the kill; playbook {run.wall:.1f} s")

    assert run.rc == 0, run.tail()
    assert roles == {"dc1": "unreachable", "dc2": "active"}, roles
    # dc1 comes back passive whenever it restarts: the fence is in its broker.xml.
    assert lab.persisted_role("dc1") == "passive", lab.broker_xml("dc1").read_text()[:2000]
    assert on_dc2, f"producers did not continue on dc2 after the failover: {producers.status()}"
    assert rec.received_by_site["dc2"] > 0, rec.summary()

    checked = validate_run_dir(run_dir)
    assert not checked["problems"], checked
    assert [r["phase"] for r in phases(run_dir, "failover")] == ["confirm-loss", "activate"]
    assert len(incidents) == 1, incidents
    # The ledgers against the agent's last sample: only messages confirmed by dc1 were lost, and no more than
    # the events dc1 had not delivered to dc2 in its last sample before it died.
    assert at_risk is not None, doc
    assert lost_sites in ([], ["dc1"]), f"messages lost that were not accepted on dc1: {lost_sites}"
    assert len(rec.lost) <= at_risk, (f"{len(rec.lost)} lost > {at_risk} at risk; lost confirmed {ages} s "
                                      f"before the kill; {lost_recs[:3]}")
    # The runbook recorded the agent's figure as the data at risk (the last-known.json it was given).
    assert recorded is not None and recorded == at_risk, \
        (f"incident at_risk_events {recorded}, the agent's last-known.json says {at_risk} (keys {sorted(doc)})")
    assert incidents[0].get("at_risk_seconds") == doc.get("at_risk_seconds"), incidents[0]


def queue_count(lab: Lab, site: str, queue: str) -> int | None:
    """MessageCount of an anycast queue (None when the queue does not exist on that site)."""
    from ansible_collections.continuity.artemis.plugins.module_utils import objectname

    try:
        return int(lab.client(site).read(objectname.queue(site, queue, queue, "anycast"), "MessageCount"))
    except Exception:  # a missing queue: nothing arrived
        return None


def test_failback_restarts_dc1_passive_and_hands_back_never_two_active(lab, tmp_path):
    rid = "failback"
    lab.wan_all("restore")
    lab.wan_all("latency", 0)
    # Start from the failover's end state even if that test stopped early: dc1 down (fenced), dc2 active.
    if lab.acceptor_started("dc1") is not None:
        os.kill(lab.broker_pid("dc1"), signal.SIGKILL)
        time.sleep(1)
    from ansible_collections.continuity.artemis.plugins.module_utils import switch

    switch.persist_fence(str(lab.broker_xml("dc1")), ["artemis"], False)
    if not lab.acceptor_started("dc2"):
        lab.set_role("dc2", True)

    traffic = Traffic(lab, tmp_path, rid, "tr", address="rb.failback", producers=2, consumers=2, rate=100)
    sampler = RoleSampler(lab, interval=0.05)
    traffic.start()
    try:
        assert traffic.wait_received(100, timeout=90, site="dc2"), f"no traffic on dc2: {traffic.status()}"
        sampler.start()
        run = lab.playbook("failback.yml", {"continuity_returning_site": "dc1", "continuity_failback_handover": True},
                           evidence_dir=tmp_path, run_id=rid)
        sampler.stop()
        roles = lab.roles()
        back_on_dc1 = traffic.wait_received(100, timeout=90, site="dc1")
    finally:
        sampler.stop()
        traffic.stop()
    run_dir = tmp_path / rid
    recs = phases(run_dir)
    late = [r for r in recs if r.get("runbook") == "failback" and r["phase"] == "late-events"]
    late_events = late[0]["data"].get("late_events") if late else None
    rec = reconcile(run_dir, "tr", rid)
    # What actually arrived late: the failover's consumers emptied rb.failover on dc2 and its producers had
    # stopped, so whatever is in that queue now came from dc1's stale mirror backlog after its restart.
    late_found = queue_count(lab, "dc2", "rb.failover")
    print(f"\nfailback: late messages found on dc2 {late_found}; sampler {sampler.summary()}; "
          f"late events {late_events} (failover measured {MEASURED}); "
          f"ledgers {rec.summary()}; playbook {run.wall:.1f} s")

    # Never two sites serving: not one sample with both client acceptors started, over the whole failback.
    assert sampler.both_open == [], sampler.both_open[:5]
    sampled = [s for s in sampler.samples if s["dc1"] is not None or s["dc2"] is not None]
    assert len(sampled) >= 20, f"too few samples to prove anything: {sampler.summary()}"
    # The sampler saw both ends of the handover (dc2 serving, later dc1 serving).
    first_dc1 = next((i for i, s in enumerate(sampler.samples) if s["dc1"]), None)
    assert any(s["dc2"] for s in sampler.samples[: first_dc1 or len(sampler.samples)]), sampler.summary()
    assert first_dc1 is not None or roles.get("dc1") != "active", "dc1 active but never seen active by the sampler"

    assert run.rc == 0, run.tail()
    assert roles == {"dc1": "active", "dc2": "passive"}, roles
    assert lab.persisted_role("dc1") == "active" and lab.persisted_role("dc2") == "passive"
    assert back_on_dc1, f"traffic did not move back to dc1: {traffic.status()}"

    checked = validate_run_dir(run_dir)
    assert not checked["problems"], checked
    fb = [(r["phase"], r["decision"]) for r in recs if r.get("runbook") == "failback"]
    assert fb == [("fence-and-start", "done"), ("late-events", "done"), ("sync", "pass")], fb
    assert isinstance(late_events, int) and late_events >= 0, late
    MEASURED.update(late_events=late_events, late_found=late_found)
    sw = [r["phase"] for r in recs if r.get("runbook") == "swapover"]
    assert sw == ["preflight", "quiesce", "drain", "activate", "seal", "mirrors_after"], sw
    # The handover is a swapover: nothing of this traffic lost or duplicated.
    assert not rec.lost, f"{len(rec.lost)} lost: {[rec.sent_by_id[m] for m in rec.lost[:3]]}"
    assert not rec.real_dups, received_details(run_dir, "tr", rec.real_dups)


def test_failback_reports_the_late_events_that_arrived(lab):
    """The failback's late_events covers the stale messages of dc1 that demonstrably arrived on dc2 after its
    restart (rb.failover was emptied on dc2 by the failover test's consumers; every message is one event).
    Uses what the failback test above measured."""
    if not MEASURED.get("late_found"):
        # Nothing was lost at the kill this time (the WAN link still delivers bytes dc1 wrote before it died):
        # no late arrival to compare with, and a failure here would be an xfail for the wrong reason.
        pytest.skip(f"no stale message of dc1 arrived on dc2 (found {MEASURED.get('late_found')}): nothing to compare")
    assert MEASURED["late_events"] >= MEASURED["late_found"], \
        f"failback reported {MEASURED['late_events']} late events, {MEASURED['late_found']} stale messages arrived"


def test_failover_when_only_the_lost_sites_jolokia_is_down_never_two_active(lab, tmp_path):
    """Issue 16 item 1: dc1 serves but its Jolokia cannot be reached from the runbooks (an overlay inventory points
    them at a dead port). A file edit alone must not count as a fence.
    - Without force the failover refuses: dc1's client port accepts connections, so dc1 is not lost.
    - With force it writes the fence into dc1's broker.xml and waits: Artemis 2.44 applies it at its next configuration
      reload (the acceptor closes), the port then refuses connections, the fence is proven, and only then dc2 serves.
    A sampler reads both brokers' client acceptors directly all along: never two sites serving."""
    lab.wan_all("restore")
    lab.wan_all("latency", 0)
    if lab.acceptor_started("dc1") is None:  # the tests above stopped early: start from dc1 active, dc2 passive
        lab.up()
    lab.ensure_roles("dc1")
    overlay = dead_jolokia_overlay(tmp_path / "dc1-jolokia-down.yml")
    client_port = lab.amqp_url("dc1").rsplit(":", 1)[1]
    sampler = RoleSampler(lab, interval=0.05)
    sampler.start()
    try:
        refused = lab.playbook("failover.yml", {"continuity_lost_site": "dc1", "continuity_loss_probes": 1},
                               evidence_dir=tmp_path, run_id="fo-refused", overlay=overlay)
        roles_after_refusal = lab.roles()
        persisted_after_refusal = lab.persisted_role("dc1")
        forced = lab.playbook("failover.yml", {"continuity_lost_site": "dc1", "continuity_loss_probes": 1,
                                               "continuity_failover_force": True},
                              evidence_dir=tmp_path, run_id="fo-forced", overlay=overlay)
        time.sleep(1)
    finally:
        sampler.stop()
    said = " ".join(refused.text.split())
    print(f"\nfailover with dc1's Jolokia down: refused rc {refused.rc} in {refused.wall:.1f} s; forced rc {forced.rc} "
          f"in {forced.wall:.1f} s; sampler {sampler.summary()}")
    assert refused.rc != 0 and "it is not lost" in said and f"127.0.0.1:{client_port}" in said, refused.tail()
    assert roles_after_refusal == {"dc1": "active", "dc2": "passive"} and persisted_after_refusal == "active"
    assert forced.rc == 0, forced.tail()
    activate = [p for p in phases(tmp_path / "fo-forced")
                if p.get("runbook") == "failover" and p["phase"] == "activate"]
    assert activate and activate[0]["data"]["fenced"] is True, activate
    assert lab.roles() == {"dc1": "passive", "dc2": "active"}
    assert sampler.both_open == [], sampler.both_open[:5]
    assert len(sampler.samples) >= 20 and any(s["dc1"] for s in sampler.samples), sampler.summary()
    # back to dc1 as the other tests expect it (dc1's Jolokia is fine outside the overlay)
    back = lab.playbook("swapover.yml", {"continuity_to_site": "dc1"}, evidence_dir=tmp_path)
    assert back.rc == 0, back.tail()
