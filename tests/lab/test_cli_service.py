"""bin/artemis-service and bin/artemis run/stop of a created instance, on the engine chosen by conftest."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from conftest import LabInstance, create_instance, jolokia_up, run_artemis, wait_for


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_service_start_returns_before_broker_answers_then_stop(lab_home: Path, tmp_path: Path) -> None:
    inst: LabInstance = create_instance(lab_home, tmp_path / "svc")
    t0 = time.monotonic()
    started = inst.service("start")
    took = time.monotonic() - t0
    try:
        assert started.returncode == 0, started.stderr
        assert took < 1.0  # returns at once, like the real script
        pid = inst.pid()
        assert pid and _alive(pid)
        assert inst.service("status").returncode == 0
        wait_for(lambda: jolokia_up(inst.jolokia), timeout=30)
        log = inst.log()
        assert "AMQ221007" in log and "emulating Artemis 2.44.0" in log and "Apache" not in log
    finally:
        stopped = inst.service("stop")
    assert stopped.returncode == 0
    wait_for(lambda: not _alive(pid), timeout=10)
    assert inst.service("status").returncode != 0
    assert not (inst.path / "data" / "artemis.pid").exists()
    assert not (inst.path / "etc" / "STOP_ME").exists()


def test_run_foreground_and_artemis_stop_via_stop_me(lab_home: Path, tmp_path: Path) -> None:
    inst = create_instance(lab_home, tmp_path / "fg")
    proc = subprocess.Popen([str(inst.path / "bin" / "artemis"), "run"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, **inst.env})
    try:
        wait_for(lambda: jolokia_up(inst.jolokia), timeout=30)
        assert run_artemis(inst.path, "stop", env=inst.env).returncode == 0
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_force_stop_kills(lab_home: Path, tmp_path: Path) -> None:
    inst = create_instance(lab_home, tmp_path / "fs")
    assert inst.service("start").returncode == 0
    pid = inst.pid()
    assert pid
    wait_for(lambda: jolokia_up(inst.jolokia), timeout=30)
    assert inst.service("force-stop").returncode == 0
    wait_for(lambda: not _alive(pid), timeout=10)


def _broken(lab_home: Path, tmp_path: Path, old: str, new: str) -> tuple[int, str]:
    inst = create_instance(lab_home, tmp_path / "bad")
    broker_xml = inst.path / "etc" / "broker.xml"
    text = broker_xml.read_text()
    assert old in text
    broker_xml.write_text(text.replace(old, new, 1))
    result = subprocess.run([str(inst.path / "bin" / "artemis"), "run"], capture_output=True, text=True,
                            env={**os.environ, **inst.env}, timeout=60)
    return result.returncode, inst.log()


def test_malformed_broker_xml_refuses_to_start(lab_home: Path, tmp_path: Path) -> None:
    rc, log = _broken(lab_home, tmp_path, "</core>", "</kore>")
    assert rc != 0 and "ERROR" in log and "refused to start" in log


def test_reconnect_attempts_zero_refuses_to_start(lab_home: Path, tmp_path: Path) -> None:
    bad = ('<broker-connections><amqp-connection uri="tcp://127.0.0.1:1" name="DC2" reconnect-attempts="0">'
           "<mirror/></amqp-connection></broker-connections>\n      <acceptors>")
    rc, log = _broken(lab_home, tmp_path, "<acceptors>", bad)
    assert rc != 0 and "reconnect-attempts" in log


def test_schema_violation_refuses_but_element_is_named(lab_home: Path, tmp_path: Path) -> None:
    if not (lab_home / "schema" / "artemis-configuration.xsd").exists():
        import pytest

        pytest.skip("archive built without the Artemis xsd files")
    rc, log = _broken(lab_home, tmp_path, "<max-disk-usage>", "<no-such-setting>1</no-such-setting><max-disk-usage>")
    assert rc != 0 and "Invalid configuration" in log and "no-such-setting" in log


def test_instance_with_separate_etc_directory(lab_home: Path, tmp_path: Path) -> None:
    etc = tmp_path / "conf"
    inst = create_instance(lab_home, tmp_path / "sep", extra_args=("--etc", str(etc)))
    assert (etc / "broker.xml").exists() and not (inst.path / "etc").exists()
    assert inst.service("start").returncode == 0
    try:
        wait_for(lambda: jolokia_up(inst.jolokia), timeout=30)
    finally:
        assert inst.service("stop").returncode == 0
