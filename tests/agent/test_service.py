"""The agent as a process: --check, HTTP endpoint (/metrics, /healthz), pidfile, SIGTERM, restart."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import base_config

from ansible_collections.continuity.artemis.plugins.module_utils import evidence


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def write_config(tmp_path: Path, port: int, dead: int) -> Path:
    # Both sites point at a port nobody listens on: the agent must run, report them unreachable and stay healthy.
    cfg = base_config(interval=0.2, listen={"address": "127.0.0.1", "port": port},
                      evidence={"dir": str(tmp_path / "ev"), "run_id": "svc"}, state_dir=str(tmp_path / "state"))
    for site in cfg["sites"].values():
        site["jolokia"]["url"] = f"http://127.0.0.1:{dead}/console/jolokia"
        site["jolokia"]["timeout"] = 1
    path = tmp_path / "agent.yml"
    path.write_text(json.dumps(cfg))
    path.chmod(0o600)
    return path


def run_agent(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "continuity_agent", *args], capture_output=True, text=True,
                          timeout=60, **kw)


def test_check_reports_config_errors_with_the_key(tmp_path):
    path = write_config(tmp_path, free_port(), free_port())
    ok = run_agent("--config", str(path), "--check")
    assert ok.returncode == 0 and "2 sites" in ok.stdout
    bad = json.loads(path.read_text())
    bad["sites"]["dc2"]["jolokia"]["timeout"] = "soon"
    path.write_text(json.dumps(bad))
    res = run_agent("--config", str(path), "--check")
    assert res.returncode == 2 and "sites.dc2.jolokia.timeout: must be a number" in res.stderr
    assert "secret" not in res.stderr + res.stdout


def start(path: Path, pidfile: Path, log: Path) -> subprocess.Popen:
    with open(log, "ab") as fh:
        return subprocess.Popen([sys.executable, "-m", "continuity_agent", "--config", str(path), "--pidfile",
                                 str(pidfile)], stdout=fh, stderr=subprocess.STDOUT)


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "agent exited early"
        try:
            status, body = get(f"http://127.0.0.1:{port}/healthz")
            if status == 200:
                return json.loads(body)
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("agent never became healthy")


def test_process_serves_metrics_and_stops_on_sigterm(tmp_path):
    port = free_port()
    path = write_config(tmp_path, port, free_port())
    pidfile, log = tmp_path / "agent.pid", tmp_path / "agent.log"
    for round_ in (1, 2):   # the second round is a restart over the files of the first
        proc = start(path, pidfile, log)
        try:
            health = wait_healthy(port, proc)
            assert health["sites"]["dc1"] == {"reachable": False, "role": "unreachable"}
            assert int(pidfile.read_text()) == proc.pid
            status, text = get(f"http://127.0.0.1:{port}/metrics")
            assert status == 200
            assert 'continuity_site_reachable{site="dc1"} 0.0' in text
            assert "continuity_agent_cycles_total" in text
            assert get(f"http://127.0.0.1:{port}/nope")[0] == 404
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert not pidfile.exists()
        files = sorted((tmp_path / "ev" / "svc").glob("lag-agent-*.jsonl"))
        assert len(files) == round_   # a restart opens a new file
        recs = evidence.read_records(str(files[-1]))   # a clean stop leaves no torn line
        assert recs and all(r["reachable"] is False for r in recs)
    text = log.read_text()
    assert "stopped" in text and "secret" not in text


def test_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        path = write_config(tmp_path, port, free_port())
        res = run_agent("--config", str(path))
    assert res.returncode == 3 and f"cannot listen on 127.0.0.1:{port}" in res.stderr


def test_world_readable_config_warns(tmp_path):
    path = write_config(tmp_path, free_port(), free_port())
    path.chmod(0o644)
    res = run_agent("--config", str(path), "--check")
    assert res.returncode == 0 and "chmod 600" in res.stderr
