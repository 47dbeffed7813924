"""Configuration reload of acceptors and the `autoStart` fence, per emulated release (through public surfaces).

Artemis 2.43+ recreates a changed acceptor on reload and starts it only with autoStart=true; before 2.43 a
reload leaves acceptors alone. On every release autoStart=false keeps an acceptor closed at start-up: that is
how a fenced (passive) site stays fenced across a restart.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from conftest import LabInstance, create_instance, home_for, jolokia_up, wait_for


def _set_auto_start(inst: LabInstance, acceptor: str, value: str) -> None:
    path = inst.path / "etc" / "broker.xml"
    text = path.read_text()
    pattern = re.compile(rf'(<acceptor name="{re.escape(acceptor)}">)([^<]*)(</acceptor>)')
    m = pattern.search(text)
    assert m, f"acceptor {acceptor} not in broker.xml"
    uri = re.sub(r";?autoStart=[a-z]+", "", m.group(2))
    uri += (";" if "?" in uri else "?") + "autoStart=" + value
    path.write_text(text[: m.start(2)] + uri + text[m.end(2):])


def _started(inst: LabInstance, acceptor: str) -> bool:
    return inst.jolokia.value({"type": "read", "mbean": inst.jolokia.accname(acceptor), "attribute": "Started"})


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _reload(inst: LabInstance) -> None:
    inst.jolokia.value({"type": "exec", "mbean": inst.jolokia.bname(), "operation": "reloadConfigurationFile()"})


@pytest.fixture
def broker_for(tmp_path_factory: pytest.TempPathFactory, dist_dir: Path):
    started: list[LabInstance] = []

    def make(version: str) -> LabInstance:
        home = home_for(version, tmp_path_factory, dist_dir)
        inst = create_instance(home, tmp_path_factory.mktemp("reload") / "b", name="lab")
        # Slow periodic scan: the test drives reloads through the operation.
        xml = inst.path / "etc" / "broker.xml"
        text = xml.read_text()
        if "configuration-file-refresh-period" not in text:
            text = text.replace("<persistence-enabled>", "<configuration-file-refresh-period>600000"
                                "</configuration-file-refresh-period>\n      <persistence-enabled>", 1)
            xml.write_text(text)
        _start(inst)
        started.append(inst)
        return inst

    yield make
    for inst in started:
        inst.service("stop")
        if inst.pid():
            inst.service("force-stop")


def _start(inst: LabInstance) -> None:
    res = inst.service("start")
    assert res.returncode == 0, res.stdout + res.stderr
    wait_for(lambda: jolokia_up(inst.jolokia), timeout=30)


def _restart(inst: LabInstance) -> None:
    inst.service("stop")
    wait_for(lambda: not _port_open(inst.amqp_port), timeout=30)
    _start(inst)


def test_2_44_reload_applies_the_acceptor_fence_and_lifts_it(broker_for):
    inst = broker_for("2.44.0")
    assert _started(inst, "artemis") and _port_open(inst.amqp_port)
    _set_auto_start(inst, "artemis", "false")
    _reload(inst)
    assert wait_for(lambda: not _started(inst, "artemis"), timeout=10)
    assert not _port_open(inst.amqp_port)
    _set_auto_start(inst, "artemis", "true")
    _reload(inst)
    assert wait_for(lambda: _started(inst, "artemis"), timeout=10)
    assert _port_open(inst.amqp_port)


def test_2_33_reload_leaves_acceptors_but_restart_honours_auto_start(broker_for):
    inst = broker_for("2.33.0")
    _set_auto_start(inst, "artemis", "false")
    _reload(inst)
    assert _started(inst, "artemis"), "before 2.43 a reload must not touch acceptors"
    _restart(inst)
    assert not _started(inst, "artemis")
    assert not _port_open(inst.amqp_port)


def test_fence_survives_restart_on_2_44(broker_for):
    inst = broker_for("2.44.0")
    inst.jolokia.value({"type": "exec", "mbean": inst.jolokia.accname("artemis"), "operation": "stop()"})
    _set_auto_start(inst, "artemis", "false")
    _restart(inst)
    assert not _started(inst, "artemis") and not _port_open(inst.amqp_port)
