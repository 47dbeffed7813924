"""The continuity broker plugin wired into the collection, on the real two-site lab (Artemis 2.44.0).

The lab is deployed by the collection's roles with `broker_continuity_plugin` enabled (inventories/lab) in a
private LAB_ROOT on free ports, then given its initial roles (dc1 active, dc2 passive). These tests prove, through
the operator's surfaces (modules run with `ansible localhost -m`, a plain AMQP client, the traffic tool):

* the plugin is loaded on both brokers by the role, with each site's initial role;
* broker_info reads the plugin's MBean and site_role reports the guard's role;
* site_role state=passive sets the plugin's SiteRole, and then a client producer pointed at the passive site's
  MIRROR acceptor (which the fence never stops) is refused, while the same producer was accepted before;
* while traffic flows on dc1, dc2 (the mirror target) reports a positive replication latency, and mirror_info
  turns it into an RPO and a duplicates-at-risk estimate.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fault_support import start_state
from runbook_support import ADMIN_PASSWORD, ADMIN_USER, Lab, Traffic

pytestmark = [pytest.mark.slow]

GUARD_ADDRESS = "continuity.plugin.guard"


@pytest.fixture(scope="module")
def lab(site_lab):
    """The lab of the 'site' stream (conftest.site_lab), as lab-up leaves it."""
    return start_state(site_lab)


def plugin_of(lab: Lab, site: str) -> dict:
    failed, res = lab.module("broker_info", lab.site_args(site))
    assert not failed, res
    return res


def mirror_url(lab: Lab, site: str) -> str:
    return f"amqp://127.0.0.1:{lab.endpoints['sites'][site]['acceptors']['mirror']}"


def send_one(url: str, body: str, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> str:
    """Send one durable message (by default as the lab's admin, a client, not the mirror user): 'accepted' or
    'rejected'."""
    from proton import Delivery, Message
    from proton.utils import BlockingConnection, SendException

    conn = BlockingConnection(url, user=user, password=password, allowed_mechs="PLAIN", timeout=20)
    try:
        sender = conn.create_sender(GUARD_ADDRESS)
        try:
            sender.send(Message(body=body, durable=True), timeout=20)
        except SendException as exc:
            return "rejected" if exc.state == Delivery.REJECTED else f"send failed: state {exc.state}"
        return "accepted"
    finally:
        conn.close()


def test_plugin_is_loaded_on_both_sites_with_their_initial_roles(lab):
    for site, role in (("dc1", "active"), ("dc2", "passive")):
        res = plugin_of(lab, site)
        p = res["continuity_plugin"]
        assert p is not None, res["notes"]
        assert p["mbean"] == f'org.apache.activemq.artemis:broker="{site}",component=continuity'
        assert p["site_role"] == role and p["plugin_version"] == "0.1.0"
        assert p["mirror_users"] == ["mirror"] and p["mirror_acceptors"] == []
        assert Path(p["state_file"]) == lab.instance(site) / "data" / "continuity-site-role"
        assert not any("continuity plugin" in n for n in res["notes"]), res["notes"]
        # the jar the role copied, and the broker's own start line
        assert (lab.instance(site) / "lib" / "continuity-artemis-plugin-0.1.0.jar").is_file()
        log = (lab.instance(site) / "log" / "artemis.log").read_text(errors="replace")
        assert f"continuity plugin: site role {role}" in log


def test_site_role_passive_sets_the_guard_and_the_mirror_port_refuses_clients(lab):
    from ansible_collections.continuity.artemis.plugins.module_utils import continuity_plugin

    # set-up: the guard of dc2 open (its client acceptor stays fenced); a client on the mirror port gets through
    continuity_plugin.set_role(lab.client("dc2"), "dc2", "active")
    failed, query = lab.module("site_role", lab.site_args("dc2", client_acceptors=["artemis"]))
    assert not failed and (query["role"], query["plugin_role"]) == ("passive", "active"), query
    assert send_one(mirror_url(lab, "dc2"), "before the guard") == "accepted"
    refusals_before = plugin_of(lab, "dc2")["continuity_plugin"]["passive_guard"]["refusals"]

    # the thing under test: the module an operator and the runbooks use to fence a site
    failed, res = lab.module("site_role", lab.site_args("dc2", client_acceptors=["artemis"], state="passive",
                                                        broker_xml=str(lab.broker_xml("dc2"))))
    assert not failed, res
    assert res["changed"] is True and (res["plugin_role_before"], res["plugin_role"]) == ("active", "passive")
    assert res["role"] == "passive" and res["persisted_role"] == "passive"
    state = (lab.instance("dc2") / "data" / "continuity-site-role").read_text()
    assert "role=passive" in state

    assert send_one(mirror_url(lab, "dc2"), "after the guard") == "rejected"
    log = (lab.instance("dc2") / "log" / "artemis.log").read_text(errors="replace")
    assert (f"Site of broker 'dc2' is PASSIVE (continuity site role, state file {lab.instance('dc2')}/data/"
            f"continuity-site-role): refused send to address '{GUARD_ADDRESS}'") in log
    assert "user=admin" in log and "acceptor=mirror" in log
    guard = plugin_of(lab, "dc2")["continuity_plugin"]["passive_guard"]
    assert guard["refusals"] == refusals_before + 1 and guard["refused_sends"] >= 1

    # a second run changes nothing; the mirror (dc1 -> dc2) still connects through that port
    failed, again = lab.module("site_role", lab.site_args("dc2", client_acceptors=["artemis"], state="passive",
                                                          broker_xml=str(lab.broker_xml("dc2"))))
    assert not failed and again["changed"] is False and again["plugin_role"] == "passive", again
    failed, mirror = lab.module("mirror_info", lab.site_args("dc1", sample_interval=0))
    assert not failed and all(c["connected"] for c in mirror["connections"]), mirror


def test_replication_latency_is_measured_on_the_passive_site_while_traffic_flows(lab, tmp_path):
    traffic = Traffic(lab, tmp_path / "evidence", "plugin-latency", "latency", "orders", producers=1, consumers=1,
                      rate=100, extra=["--ack-mode", "batch", "--batch-size", "10"])
    traffic.start()
    try:
        assert traffic.wait_received(200, timeout=60), traffic.status()
        deadline = time.monotonic() + 60
        while True:
            repl = plugin_of(lab, "dc2")["continuity_plugin"]["replication"]
            if (repl["samples_in_window"] or 0) >= 100 or time.monotonic() > deadline:
                break
            time.sleep(1)
        failed, mirror = lab.module("mirror_info", lab.site_args(
            "dc1", sample_interval=1, peer=lab.site_args("dc2")))
    finally:
        traffic.stop()
    assert repl["samples_in_window"] >= 100, repl
    assert repl["latency_p50_seconds"] > 0 and repl["latency_p99_seconds"] >= repl["latency_p50_seconds"], repl
    assert repl["latency_max_seconds"] >= repl["latency_p99_seconds"] and repl["mirrored_per_second"] > 0, repl
    assert repl["addresses"]["orders"]["window"]["latencySamples"] > 0, repl
    assert not failed, mirror
    est = next(c for c in mirror["connections"] if c["name"] == "DC2")["plugin_estimates"]
    assert est is not None and est["replication_latency_p99_seconds"] > 0, est
    assert (est["source_role"], est["target_role"]) == ("active", "passive")
    assert est["rpo_seconds_est"] is not None and est["rpo_basis"] in ("empty", "replication_latency_p99"), est
    assert est["duplicates_at_risk_est"] is not None and est["in_flight_deliveries"] is not None, est
    assert mirror["site"]["continuity_plugin"]["site_role"] == "active"


def test_the_mirror_user_cannot_use_a_client_acceptor(lab):
    """Issue 16: the mirror user may send to and consume from every mirrored address. Through the active site's client
    acceptor it gets no session (the role renders mirror-user-acceptors=mirror), so it can neither inject nor read
    application messages; the mirrors, which log in as that user through the mirror acceptors, keep flowing."""
    import yaml

    mirror_password = yaml.safe_load((Path(__file__).resolve().parents[2] / "inventories" / "lab" / "group_vars"
                                      / "artemis.yml").read_text())["mirror_password"]
    client_url = lab.amqp_url("dc1")
    with pytest.raises(Exception) as refused:  # proton's exception type depends on where the refusal lands
        send_one(client_url, "injected", user="mirror", password=mirror_password)
    print(f"\nmirror user on dc1's client acceptor: {type(refused.value).__name__}: {refused.value}")
    log = (lab.instance("dc1") / "log" / "artemis.log").read_text(errors="replace")
    assert "user 'mirror' is a mirror user and may only come in through mirror" in log
    assert send_one(client_url, "from a client") == "accepted"  # the application is not affected
    failed, mirror = lab.module("mirror_info", lab.site_args("dc1", sample_interval=0))
    assert not failed and all(c["connected"] for c in mirror["connections"]), mirror


def test_replication_latency_follows_a_wan_delay_and_returns(lab, tmp_path):
    """Issue 17: the replication latency the plugin measures on the mirror target is true end to end. A 300 ms delay
    on the dc1 -> dc2 WAN link shows in dc2's age of the newest mirrored event within seconds and in its window
    p99, and the age returns to its baseline once the delay is removed."""
    import statistics

    def ages(n: int = 5) -> list:
        out = []
        for _ in range(n):
            repl = plugin_of(lab, "dc2")["continuity_plugin"]["replication"]
            out.append(repl["newest_event_age_seconds"])
            time.sleep(0.5)
        return [a for a in out if a is not None]

    traffic = Traffic(lab, tmp_path / "evidence", "plugin-wan", "wan", "orders", producers=1, consumers=1, rate=100)
    traffic.start()
    try:
        assert traffic.wait_received(200, timeout=60), traffic.status()
        before = ages()
        lab.wan("dc1-dc2", "latency", ms=300)
        try:
            time.sleep(3)
            delayed = ages()
            time.sleep(5)
            window = plugin_of(lab, "dc2")["continuity_plugin"]["replication"]
        finally:
            lab.wan("dc1-dc2", "latency", ms=0)
        time.sleep(3)
        after = ages()
    finally:
        traffic.stop()
    print(f"\nnewest mirrored event age on dc2 at 100 msg/s: before {before}, with 300 ms on dc1->dc2 {delayed}, "
          f"after {after}; window p99 with the delay {window['latency_p99_seconds']} s")
    assert len(before) >= 3 and len(delayed) >= 3 and len(after) >= 3, (before, delayed, after)
    base, slow, back = statistics.median(before), statistics.median(delayed), statistics.median(after)
    assert slow >= base + 0.25, (before, delayed)
    assert window["latency_p99_seconds"] is not None and window["latency_p99_seconds"] >= 0.3, window
    assert back <= base + 0.1, (before, after)


def test_duplicates_at_risk_before_a_kill_are_the_duplicates_after_the_failover(lab, tmp_path):
    """Issue 17: the agent's duplicates-at-risk estimate for dc1 (the plugin's deliveries in flight plus acks not yet
    replicated), taken just before a kill -9 of dc1 under load with batched acknowledgements, is within one sample
    interval's traffic of the messages the ledgers count as delivered twice after the failover to dc2. Last test of
    the module: dc1 stays down.

    Then the Spark pipeline runs on that evidence as after a rehearsal (the traffic ledgers, the failover runbook's
    incident and phases, the agent's lag samples): its summary.json holds, for the failover, the same estimate (the
    agent's last dc1 sample before the kill), the duplicates it observed across the switch (recounted here from the
    raw received records) and the judgement within one sample interval's traffic."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from runbook_support import at_risk_of, make_agent, reconcile

    from ansible_collections.continuity.artemis.plugins.module_utils import evidence

    interval, rate, rid = 1.0, 200, "dup-at-risk"
    lab.ensure_roles("dc1")
    traffic = Traffic(lab, tmp_path, rid, "dr", "dup.orders", producers=1, consumers=2, rate=rate,
                      extra=["--ack-mode", "batch", "--batch-size", "50"])
    agent = make_agent(lab, tmp_path / "agent-state", rid, interval)
    traffic.start()
    try:
        assert traffic.wait_received(1000, timeout=90, site="dc1"), traffic.status()
        for _ in range(3):
            agent.sample_once()
            time.sleep(interval)
        agent.sample_once()
        doc = json.loads((tmp_path / "agent-state" / "dc1" / "last-known.json").read_text())
        os.kill(lab.broker_pid("dc1"), signal.SIGKILL)
        t_kill = time.time()
        run = lab.playbook("failover.yml", {"continuity_lost_site": "dc1", "continuity_incident_ts": t_kill},
                           evidence_dir=tmp_path, run_id=rid)
        assert run.rc == 0, run.tail()
        assert traffic.wait_received(1000, timeout=90, site="dc2"), traffic.status()
    finally:
        traffic.stop()
        agent.close()
    rec = reconcile(tmp_path / rid, "dr", rid)
    summary = rec.summary()
    lost_recs = [rec.sent_by_id[m] for m in rec.lost]
    estimate = doc.get("duplicates_at_risk")
    # delivered twice: acknowledged twice (real duplicates), or received on dc1 in an ack batch that dc1 never got
    # (its ledger record has no ack) and delivered again by dc2
    duplicated = summary["real_duplicates"] + summary["unacked_redeliveries"]
    print(f"\nduplicates at risk on dc1 {t_kill - doc['sample_ts']:.2f} s before the kill -9 ({rate} msg/s, acks "
          f"in batches of 50): estimate {estimate}, delivered twice by the ledgers {duplicated}; {summary}")
    # A kill -9 of an asynchronously mirrored site may lose what dc1 confirmed and had not sent to dc2 yet (its RPO;
    # seen once: 1 message). Only dc1's, and no more than its last sample's events at risk plus what one sample
    # interval brings; test_runbooks_failover measures that bound with a real backlog.
    assert {r.get("site") for r in lost_recs} <= {"dc1"}, lost_recs[:3]
    assert at_risk_of(doc) is not None, doc
    assert len(lost_recs) <= at_risk_of(doc) + rate * interval, (len(lost_recs), at_risk_of(doc), lost_recs[:3])
    assert estimate is not None, doc
    assert abs(duplicated - estimate) <= rate * interval, (estimate, duplicated, summary)

    # --- the pipeline on the same evidence: the comparison per switch in summary.json
    agent_dir = tmp_path / "agent-state" / "evidence" / rid
    assert sorted(agent_dir.glob("lag-agent-*.jsonl")), "the agent wrote no lag samples"
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "continuity_pipeline", "run", "--evidence", str(tmp_path / rid),
                           str(agent_dir), "--out", str(out), "--master", "local[2]"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]  # 2/3: bad input, pipeline error
    result = json.loads((out / "summary.json").read_text())
    switches = result["switches"]
    assert [(s["kind"], s["old_site"], s["new_site"]) for s in switches] == [("failover", "dc1", "dc2")], switches
    fo = switches[0]
    assert fo["start_ts"] == pytest.approx(t_kill, abs=1e-3)
    # the agent's last dc1 sample before the kill is the one last-known.json was written from
    assert fo["sample_ts"] == pytest.approx(doc["sample_ts"], abs=1e-3), (fo["sample_ts"], doc["sample_ts"])
    assert fo["duplicates_at_risk_estimated"] == pytest.approx(estimate), fo
    # recount from the raw received records: first received on dc1 before the switch, again after it
    deliveries: dict = {}
    for path in sorted((tmp_path / rid).glob("received-dr-*.jsonl")):
        for rec in evidence.read_records(str(path)):
            if rec.get("kind") == "received":
                deliveries.setdefault(rec["msg_id"], []).append(rec)
    across = 0
    for recs in deliveries.values():
        recs.sort(key=lambda r: r["recv_ts"])
        across += (len(recs) > 1 and recs[0]["site"] == "dc1" and recs[0]["recv_ts"] < fo["start_ts"]
                   and recs[-1]["recv_ts"] >= fo["start_ts"])
    assert fo["duplicates_observed"] == across, (fo, across)
    # one sample interval's traffic: the agent's sampling interval (plus its read time) x dc1's delivery rate
    assert interval <= fo["sample_interval_seconds"] <= 3 * interval, fo
    assert 0.5 * rate <= fo["client_receive_rate"] <= 1.5 * rate, fo
    assert fo["duplicates_tolerance_messages"] == pytest.approx(
        fo["sample_interval_seconds"] * fo["client_receive_rate"], rel=1e-6)
    assert fo["duplicates_error"] == pytest.approx(estimate - across, abs=1e-3)
    assert fo["duplicates_within_tolerance"] is True, fo["duplicates_judgement"]
    assert abs(estimate - across) <= fo["duplicates_tolerance_messages"]
    print(f"pipeline, failover dc1 -> dc2: estimated {fo['duplicates_at_risk_estimated']:.1f}, observed "
          f"{fo['duplicates_observed']} ({fo['duplicates_observed_distinct']} distinct, "
          f"{fo['duplicates_observed_redelivery']} redelivered), ack-batching bound "
          f"{fo['duplicates_at_risk_ack_batching']}: {fo['duplicates_judgement']}")
