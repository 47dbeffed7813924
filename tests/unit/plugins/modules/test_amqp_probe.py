"""amqp_probe against the in-process two-site test broker (mirror with a configurable delay, cut, fence).

The same module against the lab broker (SASL PLAIN, the WAN emulator) is tested in
tests/traffic/test_lab_probe.py.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from ansible_collections.continuity.artemis.plugins.modules import amqp_probe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils"))
from amqp_support import MiniBroker, free_port


def run_module(args: dict, capsys) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        amqp_probe.main()
    return json.loads(capsys.readouterr().out)


def sites(b: MiniBroker, **kw) -> dict:
    args = {"origin_urls": [b.url("dc1")], "origin_site": "dc1", "target_urls": [b.url("dc2")],
            "target_site": "dc2", "address": "canary", "count": 3, "interval": 0.02, "timeout": 5}
    args.update(kw)
    return args


def test_latency_measured_canaries_removed_on_both_sites_and_evidence_written(tmp_path, capsys):
    ev_file = tmp_path / "run" / "canaries.jsonl"
    with MiniBroker(["dc1", "dc2"], mirror=True, mirror_delay=0.2) as b:
        out = run_module(sites(b, evidence_file=str(ev_file), run_id="r1", verify_removal=True), capsys)
        assert b.depth("dc1", "canary") == 0 and b.depth("dc2", "canary") == 0
    assert not out.get("failed"), out
    assert out["ok"] and out["sent"] == 3 and out["seen"] == 3 and out["removed"] == 3
    assert out["changed"] is False and out["removal_verified"] is True
    lat = out["latency"]
    assert 0.2 <= lat["min"] <= lat["p50"] <= lat["p95"] <= lat["max"] < 0.6, lat
    assert [c["outcome"] for c in out["canaries"]] == ["seen"] * 3
    recs = evidence.read_records(ev_file)
    assert [r["kind"] for r in recs] == ["canary"] * 3
    assert all(evidence.validate(r, backend="jsonschema") == [] for r in recs)
    assert {r["run_id"] for r in recs} == {"r1"} and recs[0]["origin_site"] == "dc1"
    assert recs[0]["latency_seconds"] == pytest.approx(out["canaries"][0]["latency_seconds"])


def test_broker_without_selectors_falls_back_to_client_side_filtering(capsys):
    with MiniBroker(["dc1", "dc2"], mirror=True, mirror_delay=0.05, selectors=False) as b:
        out = run_module(sites(b, verify_removal=True), capsys)
        assert b.depth("dc1", "canary") == 0 and b.depth("dc2", "canary") == 0
    assert out["ok"] and out["seen"] == 3 and out["removed"] == 3, out
    assert any("refused the selector" in n for n in out["notes"])


def test_reported_latency_follows_the_mirror_delay(capsys):
    p50 = {}
    for delay in (0.05, 0.5):
        with MiniBroker(["dc1", "dc2"], mirror=True, mirror_delay=delay) as b:
            out = run_module(sites(b), capsys)
        assert out["ok"], out
        p50[delay] = out["latency"]["p50"]
    assert p50[0.5] - p50[0.05] >= 0.4, p50


def test_cut_mirror_fails_clearly_within_the_timeout_and_cleans_up(tmp_path, capsys):
    ev_file = tmp_path / "c.jsonl"
    with MiniBroker(["dc1", "dc2"], mirror=True) as b:
        b.cut_mirror()
        start = time.monotonic()
        out = run_module(sites(b, timeout=3, evidence_file=str(ev_file)), capsys)
        took = time.monotonic() - start
        assert b.depth("dc1", "canary") == 0  # removed on the origin before giving up
    assert out["failed"] and took < 3.5, (took, out)
    assert "3 of 3 canaries not seen on dc2 within 3.0s" in out["msg"]
    assert out["error"]["kind"] == "timeout" and out["removed"] == 3
    assert [r["outcome"] for r in evidence.read_records(ev_file)] == ["timeout"] * 3


def test_timeout_without_failing(capsys):
    with MiniBroker(["dc1", "dc2"], mirror=True) as b:
        b.cut_mirror()
        out = run_module(sites(b, timeout=1.5, fail_on_timeout=False), capsys)
    assert not out.get("failed") and out["ok"] is False and out["seen"] == 0


def test_missing_address(capsys):
    with MiniBroker(["dc1", "dc2"], mirror=True, auto_create=False) as b:
        out = run_module(sites(b, address="nope"), capsys)
    assert out["failed"] and out["error"]["kind"] == "not_found"
    assert "address nope" in out["msg"] and out["sent"] == 0


def test_unreachable_target_fails_fast_without_sending(capsys):
    with MiniBroker(["dc1", "dc2"], mirror=True) as b:
        b.fence("dc2")
        start = time.monotonic()
        out = run_module(sites(b, timeout=10), capsys)
        assert b.depth("dc1", "canary") == 0
    assert out["failed"] and out["error"]["kind"] == "unreachable" and "dc2" in out["msg"]
    assert out["sent"] == 0 and time.monotonic() - start < 3


def test_silent_target_times_out(capsys):
    import socket

    with socket.socket() as srv, MiniBroker(["dc1"]) as b:
        srv.bind(("127.0.0.1", 0))
        srv.listen(5)
        start = time.monotonic()
        out = run_module({"origin_urls": [b.url("dc1")], "target_urls": [f"amqp://127.0.0.1:{srv.getsockname()[1]}"],
                          "timeout": 2}, capsys)
    assert out["failed"] and out["error"]["kind"] == "timeout" and time.monotonic() - start < 3


def test_refused_credentials(capsys):
    # The test broker offers only ANONYMOUS: PLAIN is refused with amqp:unauthorized-access, as a wrong password is.
    with MiniBroker(["dc1", "dc2"], mirror=True) as b:
        out = run_module(sites(b, user="probe", password="hunter2-secret"), capsys)
    assert out["failed"] and out["error"]["kind"] == "auth"
    assert "authentication failed" in out["msg"]
    assert "hunter2-secret" not in json.dumps(out)


def test_check_mode_sends_nothing(capsys):
    with MiniBroker(["dc1", "dc2"], mirror=True) as b:
        out = run_module(dict(sites(b, count=4), _ansible_check_mode=True), capsys)
        assert b.depth("dc1", "canary") == 0 and b.depth("dc2", "canary") == 0
        assert b.call(lambda: b.sites["dc1"].accepted_sends) == 0
    assert out["changed"] is False and out["sent"] == 0 and out["would"]["send"] == 4


@pytest.mark.parametrize("bad, needle", [
    ({"count": 0}, "count"), ({"origin_urls": ["http://x"]}, "unsupported scheme"),
    ({"run_id": "a/b"}, "run_id"), ({"password": "x"}, "password needs user"),
])
def test_bad_arguments(bad, needle, capsys):
    args = {"origin_urls": [f"amqp://127.0.0.1:{free_port()}"], "target_urls": ["amqp://127.0.0.1:1"]}
    args.update(bad)
    out = run_module(args, capsys)
    assert out["failed"] and needle in out["msg"]


def test_documentation_matches_argument_spec():
    doc = yaml.safe_load(amqp_probe.DOCUMENTATION)
    spec = amqp_probe.argument_spec()
    assert set(doc["options"]) == set(spec)
    for name, opt in doc["options"].items():
        assert opt.get("type", "str") == spec[name].get("type", "str"), name
        assert opt.get("default") == spec[name].get("default"), name
        assert bool(opt.get("required")) == bool(spec[name].get("required")), name
        assert opt.get("aliases", []) == spec[name].get("aliases", []), name
    assert spec["password"]["no_log"] is True
    yaml.safe_load(amqp_probe.EXAMPLES)
    yaml.safe_load(amqp_probe.RETURN)
