"""End to end on the lab: playbooks/deploy.yml with inventories/lab builds two mirrored sites from scratch.

Each test module gets its own instance root and a free block of loopback ports, and stops only the brokers it
started. The brokers are real Apache Artemis (the inventory downloads the distribution once into
build/downloads); the same deploy through the WAN emulator is what `lab-up.sh` does (tests/lab/test_lab_up.py).
"""

from __future__ import annotations

import json
import random
import time

import pytest
from deploy_support import ADMIN, PORT_OFFSETS, DeployLab
from runbook_support import free_port_base

pytestmark = [pytest.mark.slow]


class Lab(DeployLab):
    def connections(self, site):
        answer = self.jolokia(site, {"type": "exec", "mbean": f'org.apache.activemq.artemis:broker="{site}"',
                                     "operation": "listBrokerConnections()"})
        assert answer["status"] == 200, answer
        return {c["name"]: c for c in json.loads(answer["value"])}

    def queue_count(self, site, address, queue):
        answer = self.jolokia(site, {
            "type": "read", "attribute": "MessageCount",
            "mbean": f'org.apache.activemq.artemis:broker="{site}",component=addresses,address="{address}",'
                     f'subcomponent=queues,routing-type="anycast",queue="{queue}"'})
        return answer.get("value") if answer["status"] == 200 else None

    def address_exists(self, site, address):
        answer = self.jolokia(site, {
            "type": "read", "attribute": "RoutingTypes",
            "mbean": f'org.apache.activemq.artemis:broker="{site}",component=addresses,address="{address}"'})
        return answer["status"] == 200


def _connected(value):
    return value in (True, "true")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("deploy"), free_port_base())
    yield lab
    lab.stop()


@pytest.fixture(scope="module")
def first_deploy(lab):
    proc = lab.deploy()
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    return proc


def _send(url, address, body):
    from proton import Message
    from proton.utils import BlockingConnection

    conn = BlockingConnection(url, user=ADMIN[0], password=ADMIN[1], allowed_mechs="PLAIN", timeout=20)
    try:
        sender = conn.create_sender(address)
        sender.send(Message(body=body, durable=True))
    finally:
        conn.close()


def _receive(url, address):
    from proton.utils import BlockingConnection

    conn = BlockingConnection(url, user=ADMIN[0], password=ADMIN[1], allowed_mechs="PLAIN", timeout=20)
    try:
        receiver = conn.create_receiver(address)
        msg = receiver.receive(timeout=20)
        receiver.accept()
        return msg.body
    finally:
        conn.close()


def _browse(url, address):
    """Read the first message without consuming it (a browser: what a passive site's guard lets through)."""
    from proton.reactor import Copy
    from proton.utils import BlockingConnection

    conn = BlockingConnection(url, user=ADMIN[0], password=ADMIN[1], allowed_mechs="PLAIN", timeout=20)
    try:
        receiver = conn.create_receiver(address, options=Copy())
        return receiver.receive(timeout=20).body
    finally:
        conn.close()


def _wait(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    return predicate()


def test_deploy_from_scratch_brings_up_both_sites_mirrored(lab, first_deploy):
    for site in PORT_OFFSETS:
        started = lab.jolokia(site, {"type": "read", "mbean": f'org.apache.activemq.artemis:broker="{site}"',
                                     "attribute": "Started"})
        assert started["value"] is True
    assert _connected(lab.connections("dc1")["DC2"].get("connected"))
    assert _connected(lab.connections("dc2")["DC1"].get("connected"))
    # login is required: the anonymous default of `artemis create --silent` must not be in effect
    users = (lab.instance("dc1") / "etc" / "artemis-users.properties").read_text()
    assert "lab-admin-secret" not in users and "ENC(1024:" in users


def test_message_sent_on_dc1_arrives_on_dc2(lab, first_deploy):
    dc1 = f"amqp://127.0.0.1:{lab.base + 616}"
    dc2 = f"amqp://127.0.0.1:{lab.base + 716}"
    body = f"deploy-probe-{random.random()}"
    _send(dc1, "orders", body)
    assert _wait(lambda: (lab.queue_count("dc2", "orders", "orders") or 0) >= 1), "message not mirrored to dc2"
    # dc2 is passive (its continuity plugin refuses consumers): browse it there, consume it on the active dc1,
    # and the consumption is mirrored too
    assert _browse(dc2, "orders") == body
    assert _receive(dc1, "orders") == body
    assert _wait(lambda: lab.queue_count("dc2", "orders", "orders") == 0), "the consumption was not mirrored"


def test_second_run_changes_nothing(lab, first_deploy):
    proc = lab.deploy()
    assert proc.returncode == 0, proc.stdout[-4000:]
    recap = lab.recap(proc.stdout)
    assert set(recap) == {"dc1-artemis", "dc2-artemis"}
    assert all(r["changed"] == 0 for r in recap.values()), proc.stdout[-6000:]


def test_check_mode_shows_the_change_and_changes_nothing(lab, first_deploy):
    before = {site: lab.pid(site) for site in PORT_OFFSETS}
    xml_before = (lab.instance("dc1") / "etc" / "broker.xml").read_text()
    proc = lab.deploy("--check", "--diff", "-e", "mirror_sync=true")
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert 'sync="true"' in proc.stdout and "restart needed: mirror connection DC2 changed" in proc.stdout
    assert (lab.instance("dc1") / "etc" / "broker.xml").read_text() == xml_before
    assert {site: lab.pid(site) for site in PORT_OFFSETS} == before


def test_changed_mirror_flag_restarts_only_that_broker_and_is_live(lab, first_deploy):
    before = {site: lab.pid(site) for site in PORT_OFFSETS}
    host_vars = lab.inventory / "host_vars"
    host_vars.mkdir(exist_ok=True)
    # dc1 now mirrors only addresses starting with "orders" (case-sensitive prefix)
    (host_vars / "dc1-artemis.yml").write_text("---\nmirror_address_filter: orders\n")
    proc = lab.deploy("--diff")
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert 'address-filter="orders"' in proc.stdout  # the diff shows the real change
    recap = lab.recap(proc.stdout)
    assert recap["dc2-artemis"]["changed"] == 0, proc.stdout[-6000:]
    after = {site: lab.pid(site) for site in PORT_OFFSETS}
    assert after["dc1"] != before["dc1"], "dc1 was not restarted"
    assert after["dc2"] == before["dc2"], "dc2 was restarted although its configuration did not change"
    assert _connected(lab.connections("dc1")["DC2"].get("connected"))

    dc1 = f"amqp://127.0.0.1:{lab.base + 616}"
    _send(dc1, "Unfiltered", "stays on dc1")
    _send(dc1, "orders", "crosses")
    assert _wait(lambda: (lab.queue_count("dc2", "orders", "orders") or 0) >= 1)
    assert lab.address_exists("dc1", "Unfiltered")  # auto-created by the send
    assert not lab.address_exists("dc2", "Unfiltered")  # its creation was not mirrored: the new filter is live
