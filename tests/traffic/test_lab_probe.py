"""amqp_probe against the real two-site lab: SASL PLAIN, canaries sent on the active dc1 and browsed on the passive
dc2 through its mirror acceptor (its client acceptor is fenced), the mirror through the WAN emulator (latency, cut)."""

from __future__ import annotations

import json
import time

import pytest
from ansible.module_utils.testing import patch_module_args
from support import wait_for

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from ansible_collections.continuity.artemis.plugins.modules import amqp_probe

ADDRESS = "orders"  # exists on both lab sites (anycast) and is mirrored
# Artemis applies a durable acknowledgement to the queue's counters once its journal write completes, a few
# milliseconds after the accept frame: a count read the instant the probe returns can still include canaries it
# removed. The count must reach 0 within this; canaries left behind for good still fail.
ACK_SETTLE_SECONDS = 5.0


def emptied(lab, site: str, address: str) -> bool:
    wait_for(lambda: lab.queue_count(site, address) == 0, ACK_SETTLE_SECONDS,
             what=f"{address} on {site} to hold no canary")
    return True


def probe(lab, capsys, **kw) -> dict:
    args = {"origin_urls": [lab.url("dc1")], "origin_site": "dc1", "target_urls": [lab.mirror_url("dc2")],
            "target_site": "dc2", "address": ADDRESS, "user": lab.user, "password": lab.password, "count": 5,
            "interval": 0.05, "timeout": 10}
    args.update(kw)
    with patch_module_args(args), pytest.raises(SystemExit):
        amqp_probe.main()
    return json.loads(capsys.readouterr().out)


def test_probe_with_plain_credentials_and_evidence(lab, capsys, tmp_path):
    ev_file = tmp_path / "canaries.jsonl"
    out = probe(lab, capsys, evidence_file=str(ev_file), run_id="lab-probe", verify_removal=True)
    assert not out.get("failed"), out
    assert out["ok"] and out["seen"] == 5 and out["removed"] == 5 and out["removal_verified"] is True
    assert 0 < out["latency"]["p50"] < 2.0
    recs = evidence.read_records(ev_file)
    assert len(recs) == 5 and all(evidence.validate(r, backend="jsonschema") == [] for r in recs)
    assert emptied(lab, "dc1", ADDRESS) and emptied(lab, "dc2", ADDRESS)


def test_latency_rises_when_the_wan_adds_latency(lab, capsys):
    base = probe(lab, capsys)
    assert base["ok"], base
    lab.wan("latency", ms=300, direction="forward")  # dc1 -> dc2 mirror traffic
    try:
        slow = probe(lab, capsys)
    finally:
        lab.wan("latency", ms=0, direction="both")
    assert slow["ok"], slow
    assert slow["latency"]["p50"] - base["latency"]["p50"] >= 0.25, (base["latency"], slow["latency"])
    assert slow["latency"]["min"] >= 0.3


def test_cut_link_fails_clearly_within_the_timeout(lab, capsys):
    lab.wan("cut")
    try:
        start = time.monotonic()
        out = probe(lab, capsys, timeout=4)
        took = time.monotonic() - start
        assert emptied(lab, "dc1", ADDRESS)  # canaries removed on the origin before giving up
    finally:
        lab.wan("restore")
    assert out["failed"] and took < 4.5, (took, out)
    assert out["error"]["kind"] == "timeout" and "not seen on dc2 within 4.0s" in out["msg"]
    # once the link is back the mirror catches up: the probe passes again and dc2 holds no stale canaries
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and lab.queue_count("dc2", ADDRESS) != 0:
        time.sleep(0.2)
    again = probe(lab, capsys)
    assert again["ok"], again


def test_wrong_password_is_refused_clearly(lab, capsys):
    out = probe(lab, capsys, password="not-the-password", timeout=5)
    assert out["failed"] and out["error"]["kind"] == "auth"
    assert "authentication failed" in out["msg"] and "not-the-password" not in json.dumps(out)


def test_new_address_is_auto_created_as_an_anycast_queue(lab, capsys):
    # The probe asks for the `queue` capability: on a broker that auto-creates (Artemis' default, and the lab's)
    # a new canary address becomes an ANYCAST queue on both sites instead of a MULTICAST address with a
    # subscription per browser. (A missing address with auto-create off is tested against the unit test broker.)
    out = probe(lab, capsys, address="continuity.canary.auto", timeout=8)
    assert out["ok"], out
    assert emptied(lab, "dc1", "continuity.canary.auto")
    assert emptied(lab, "dc2", "continuity.canary.auto")
