"""The DR rehearsal end to end on the lab (issue 11): traffic, swapover and back, the failover drill with
failback, the Spark pipeline; then the verdict, the report files, the evidence, and the report in a browser.

The verdict is asserted from the pipeline's summary.json AND recomputed here from the raw ledgers, so a pipeline
that says PASS over evidence that shows loss fails this test.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from runbook_support import Lab, install_released, lab_secrets, reconcile, secrets_in

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "build" / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    root = tmp_path_factory.mktemp("rehearsal-lab")
    lab = Lab(root / "lab")
    # The whole rehearsal (and the deploy before it) at -vvv: test_no_secret_at_vvv scans what an operator's log
    # would keep at the highest verbosity.
    lab.env["ANSIBLE_VERBOSITY"] = "3"
    # The rehearsal and the status check run as on an operator's fresh controller: the built collection and the
    # pip-installed tools in a new virtualenv, no .pth, no PYTHONPATH (issue 19). The lab itself is deployed from
    # the checkout.
    installed = install_released()
    lab.up()
    evidence = root / "evidence"
    try:
        run = lab.playbook("rehearsal.yml", evidence_dir=evidence, run_id="e2e-rehearsal", timeout=1500,
                           installed=installed, extra={
            "continuity_rehearsal_failover_drill": True,
            "continuity_rehearsal_confirm_failover_drill": "lab",
            "continuity_rehearsal_rate": 100,
            "continuity_rehearsal_traffic_seconds": 3,
        })
        roles = lab.roles()
        status = lab.playbook("status.yml", evidence_dir=evidence, installed=installed)
        lab.logs = {"status.yml -vvv": status.text, "rehearsal.yml -vvv": run.text,
                    **{p.name: p.read_text() for p in sorted(lab.root.glob("*.log"))}}
        # Keep the evidence where the agent's RTO-estimate test (tests/agent, run after this layer) looks for
        # observed swapovers.
        kept = ROOT / "build" / "evidence" / "e2e-rehearsal"
        shutil.rmtree(kept, ignore_errors=True)
        if (evidence / "e2e-rehearsal").is_dir():
            shutil.copytree(evidence / "e2e-rehearsal", kept)
        yield run, evidence / "e2e-rehearsal", roles, lab.logs, installed
    finally:
        lab.down()


def _records(run_dir: Path, prefix: str) -> list[dict]:
    out = []
    for path in sorted(run_dir.glob(prefix + "*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


def test_rehearsal_passes_with_the_failover_drill(rehearsal):
    run, run_dir, roles, _logs, _installed = rehearsal
    assert run.rc == 0, run.tail(80)
    assert roles == {"dc1": "active", "dc2": "passive"}, roles  # handed back after the drill
    summary = json.loads((run_dir / "report" / "summary.json").read_text())
    assert summary["verdict"].lower() == "pass", summary["verdict"]
    for name in ("report.html", "metrics.prom", "summary.json"):
        assert (run_dir / "report" / name).stat().st_size > 0, name
    assert "continuity_" in (run_dir / "report" / "metrics.prom").read_text()


def test_rehearsal_ran_from_the_installed_collection_and_tools(rehearsal):
    """Issue 19: the runbook, its modules and the tools came from the fresh install, found without a .pth file or
    PYTHONPATH of ours."""
    run, _run_dir, _roles, _logs, installed = rehearsal
    venv = installed.parent
    purelib = next((venv / "lib").glob("python3*/site-packages"))
    collection = purelib / "ansible_collections" / "continuity" / "artemis"
    assert (collection / "MANIFEST.json").is_file() and not collection.is_symlink()  # a real install, no link
    assert not [p.name for p in purelib.glob("*.pth") if "continuity" in p.read_text() or "continuity" in p.name]
    assert f"executable location = {installed / 'ansible-playbook'}" in run.text
    # ansible-playbook -vvv names the playbook file it runs: the installed collection's, not the checkout's
    assert f"PLAYBOOK: {collection / 'playbooks' / 'rehearsal.yml'}" in run.text or \
        str(collection / "playbooks" / "rehearsal.yml") in run.text, run.text[:3000]
    for tool in ("continuity-agent", "continuity-traffic", "continuity-pipeline"):
        assert (installed / tool).is_file(), tool


def test_evidence_records_every_step(rehearsal):
    _run, run_dir, _roles, _logs, _installed = rehearsal
    phases = _records(run_dir, "phases")
    swaps = [p["phase"] for p in phases if p.get("runbook") == "swapover"]
    assert swaps.count("activate") == 3, swaps  # out, back, and the failback's handover
    assert [p["phase"] for p in phases if p.get("runbook") == "failover"] == ["confirm-loss", "activate"]
    assert [p["phase"] for p in phases if p.get("runbook") == "failback"] == ["fence-and-start", "late-events", "sync"]
    incident = [p for p in phases if p["kind"] == "incident"]
    assert len(incident) == 1 and incident[0]["lost_site"] == "dc1"
    run_records = _records(run_dir, "run")
    assert [r["event"] for r in run_records] == ["start", "end"]
    assert run_records[-1]["outcome"].lower() == "pass"
    assert _records(run_dir, "lag-agent"), "the agent wrote no lag samples during the rehearsal"


def test_ledgers_agree_with_the_verdict(rehearsal):
    """Recompute loss from the ledgers: every accepted send was received. A message acknowledged twice is allowed
    when the producer itself sent it twice after an in-doubt send at a fence (runbook_support.reconcile's resend
    duplicates, the rule every runbook test uses); any other duplicate only for messages acknowledged on the lost
    site just before the kill (their mirrored acks died with it)."""
    _run, run_dir, _roles, _logs, _installed = rehearsal
    writers = {p.name.split("-", 1)[1].rsplit("-", 1)[0] for p in run_dir.glob("sent-*.jsonl")}
    assert len(writers) == 1, writers  # one traffic process: its producers and consumers share the name
    rec = reconcile(run_dir, writers.pop(), run_dir.name)
    assert len(rec.accepted) > 1000, rec.summary()
    assert not rec.lost, sorted(rec.lost)[:5]
    incident_ts = next(p["incident_ts"] for p in _records(run_dir, "phases") if p["kind"] == "incident")
    received = defaultdict(list)
    for r in _records(run_dir, "received-"):
        if r["kind"] == "received":
            received[r["msg_id"]].append(r)
    outside_drill = [m for m in rec.real_dups if min(x["recv_ts"] for x in received[m]) < incident_ts - 5]
    assert not outside_drill, {m: [(x["site"], x["recv_ts"]) for x in received[m]] for m in outside_drill[:3]}
    print(f"rehearsal ledgers: {rec.summary()}")


def test_report_opens_in_a_browser(rehearsal, tmp_path):
    _run, run_dir, _roles, _logs, _installed = rehearsal
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (make system-deps installs it)")
    url = (run_dir / "report" / "report.html").resolve().as_uri()
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert "data-report-ready" in body and "data-script-error" not in body, body
    assert "PASS" in dom
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / "rehearsal-report.png"
    png.unlink(missing_ok=True)
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'p2'}", f"--screenshot={png}",
                    "--window-size=1280,2000", url], capture_output=True, timeout=120, check=True)
    assert png.stat().st_size > 10_000


def test_no_secret_at_vvv_in_any_output_log_or_evidence(rehearsal):
    """Issue 16 (d): the deploy (roles broker and mirror), the initial roles, the whole rehearsal (swapover, failover,
    failback, the agent, the pipeline) and status.yml, all at -vvv, print no password of the inventory; neither do the
    lab's logs nor the evidence the run wrote. The agent's own configuration (agent.json, mode 0600) holds the
    credentials it needs by design and is the one file not scanned."""
    _run, run_dir, _roles, logs, _installed = rehearsal
    for name in ("rehearsal.yml -vvv", "status.yml -vvv", "deploy.log"):
        assert "task path: " in logs[name], f"{name} was not at -vvv: this scan would prove little"
    files = {str(p.relative_to(run_dir)): p.read_text(errors="replace") for p in sorted(run_dir.rglob("*"))
             if p.is_file() and p.name != "agent.json" and p.suffix in (".jsonl", ".json", ".log", ".html", ".prom")}
    assert len(files) > 5, sorted(files)
    leaks = {name: secrets_in(text) for name, text in {**logs, **files}.items() if secrets_in(text)}
    print(f"secret scan: {len(logs)} outputs/logs ({sum(len(t) for t in logs.values()):,} chars at -vvv) and "
          f"{len(files)} evidence files, {len(lab_secrets())} secrets looked for, {len(leaks)} with a hit")
    assert not leaks, leaks
