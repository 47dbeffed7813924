"""The runbooks the way AWX runs them: `ansible-runner run` with a private data directory, the project and the lab
inventory, extra vars written as AWX writes survey answers (strings: "true", "dc2", "120"), and the results read
from the runner's artifacts (the set_stats data of the playbook_on_stats event, which AWX shows as the job's
artifacts). One private lab (its own root and free port block), torn down at the end.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from fault_support import start_state
from runbook_support import COLLECTIONS, INVENTORY, ROOT, VENV_BIN, Lab

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def lab(site_lab):
    """The lab of the 'site' stream (conftest.site_lab), as lab-up leaves it."""
    return start_state(site_lab)


def runner(lab: Lab, tmp_path: Path, playbook: str, extravars: dict[str, str], ident: str) -> tuple[int, dict, str]:
    """ansible-runner run; returns (rc, the published set_stats data, stdout)."""
    assert all(isinstance(v, str) for v in extravars.values()), "AWX passes survey answers as strings"
    pdd = tmp_path / ident
    (pdd / "env").mkdir(parents=True)
    (pdd / "env" / "extravars").write_text(yaml.safe_dump(extravars))
    envvars = {k: lab.env[k] for k in ("LAB_ROOT", "LAB_PORT_BASE", "LAB_ARTEMIS_VERSION")}
    envvars.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS))
    (pdd / "env" / "envvars").write_text(yaml.safe_dump(envvars))
    res = subprocess.run([str(VENV_BIN / "ansible-runner"), "run", str(pdd), "-p", playbook, "--ident", ident,
                          "--project-dir", str(ROOT), "--inventory", str(INVENTORY)],
                         capture_output=True, text=True, timeout=900, cwd=ROOT,
                         env={**lab.env, "PATH": f"{VENV_BIN}:{lab.env.get('PATH', '')}"})
    artifacts = pdd / "artifacts" / ident
    assert (artifacts / "rc").read_text().strip() == str(res.returncode), res.stdout[-3000:]
    stats = [json.loads(p.read_text()) for p in (artifacts / "job_events").glob("*.json")]
    (end,) = [e for e in stats if e.get("event") == "playbook_on_stats"]
    return res.returncode, end["event_data"].get("artifact_data") or {}, (artifacts / "stdout").read_text()


def test_status_swapover_and_status_again_as_awx_runs_them(lab, tmp_path):
    evidence = str(tmp_path / "evidence")
    lab.ensure_roles("dc1")
    rc, stats, out = runner(lab, tmp_path, "playbooks/status.yml",
                            {"continuity_sla_max_lag_seconds": "5", "continuity_sla_require_connected": "true",
                             "continuity_status_write_evidence": "false", "continuity_evidence_dir": evidence},
                            "status-before")
    assert rc == 0, out[-3000:]
    assert sorted(stats) == ["continuity_status_breach_list", "continuity_status_report", "continuity_status_table"]
    assert stats["continuity_status_breach_list"] == []
    assert {r["site"]: r["role"] for r in stats["continuity_status_table"]} == {"dc1": "active", "dc2": "passive"}
    assert "SLA: ok (10 checks)" in out
    # "false" is a string: read as a boolean, so no lag evidence was written
    assert not (tmp_path / "evidence").exists()

    rc, stats, out = runner(lab, tmp_path, "playbooks/swapover.yml",
                            {"continuity_to_site": "dc2", "continuity_drain_timeout": "120",
                             "continuity_canary_count": "3", "continuity_evidence_dir": evidence},
                            "swapover")
    assert rc == 0, out[-3000:]
    assert stats["continuity_swapover_from"] == "dc1" and stats["continuity_swapover_to"] == "dc2"
    assert stats["continuity_roles_after"] == {"dc1": "passive", "dc2": "active"}
    assert stats["continuity_client_outage_seconds"] is not None
    assert Path(stats["continuity_evidence"]).is_dir()
    # AWX hands these to the next workflow node as extra vars: none of them is an input of status.yml
    rc, stats, out = runner(lab, tmp_path, "playbooks/status.yml",
                            {**{k: json.dumps(v) if not isinstance(v, str) else v for k, v in stats.items()},
                             "continuity_status_write_evidence": "false"}, "status-after")
    assert rc == 0, out[-3000:]
    assert {r["site"]: r["role"] for r in stats["continuity_status_table"]} == {"dc1": "passive", "dc2": "active"}
    lab.ensure_roles("dc1")


def test_a_breach_still_publishes_the_status(lab, tmp_path):
    lab.ensure_roles("dc1")
    rc, stats, out = runner(lab, tmp_path, "playbooks/status.yml",
                            {"continuity_sla_max_backlog": "-1", "continuity_status_write_evidence": "false"},
                            "status-breach")
    assert rc != 0
    assert stats["continuity_status_breach_list"] == ["backlog"], out[-3000:]
    assert "SLA: BREACH backlog" in out


def test_rehearsal_as_awx_runs_it(lab, tmp_path):
    """The weekly rehearsal job template: survey answers as strings, the verdict and the report in the artifacts
    (issue 21). The failover drill stays off, as the shipped schedule has it."""
    evidence = tmp_path / "evidence"
    lab.ensure_roles("dc1")
    rc, stats, out = runner(lab, tmp_path, "playbooks/rehearsal.yml",
                            {"continuity_rehearsal_traffic_seconds": "2", "continuity_rehearsal_rate": "100",
                             "continuity_rehearsal_rpo_seconds": "5.0", "continuity_rehearsal_rto_seconds": "120",
                             "continuity_rehearsal_failover_drill": "false",
                             "continuity_rehearsal_confirm_failover_drill": "",
                             "continuity_evidence_dir": str(evidence), "continuity_run_id": "awx-rehearsal"},
                            "rehearsal")
    assert rc == 0, out[-3000:]
    assert sorted(stats) == sorted(["continuity_last_run_id", "continuity_verdict", "continuity_report",
                                    "continuity_summary", "continuity_swapover_outage_seconds",
                                    "continuity_swapback_outage_seconds", "continuity_failover",
                                    "continuity_failback"]), sorted(stats)
    assert stats["continuity_last_run_id"] == "awx-rehearsal"
    assert stats["continuity_verdict"].lower() == "pass", stats["continuity_summary"]
    assert Path(stats["continuity_report"]).is_file()
    assert stats["continuity_swapover_outage_seconds"] is not None
    assert stats["continuity_failover"] is None  # "false" is a string: read as a boolean, no drill ran
    summary = json.loads((evidence / "awx-rehearsal" / "report" / "summary.json").read_text())
    assert summary["verdict"] == stats["continuity_verdict"]
    assert lab.roles() == {"dc1": "active", "dc2": "passive"}
