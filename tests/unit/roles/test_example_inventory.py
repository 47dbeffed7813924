"""The example inventory for real hosts renders a broker.xml per host that passes the semantic checks and the
2.44.0 schema (the mirror connection is computed as the mirror role does: peer site, primary first)."""

from __future__ import annotations

import json
import re
import subprocess

from ansible_collections.continuity.artemis.plugins.filter.artemis import artemis_mirror_endpoints
from ansible_collections.continuity.artemis.plugins.module_utils import broker_xml
from continuity_lab import schemas

from .render import ROOT, context, render

SCHEMA = schemas.path("2.44.0")


def _inventory():
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-inventory"), "-i",
                          str(ROOT / "inventories" / "example" / "hosts.yml"), "--list"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return json.loads(out)


def test_example_inventory_renders_valid_broker_xml():
    inv = _inventory()
    hostvars = inv["_meta"]["hostvars"]
    groups = {g: inv[g].get("hosts", []) for g in ("dc1", "dc2")}
    for host, hv in hostvars.items():
        site = "dc1" if host in groups["dc1"] else "dc2"
        peer = "dc2" if site == "dc1" else "dc1"
        endpoints = artemis_mirror_endpoints(groups[peer], hostvars)
        conn = {"name": peer.upper(), "uri": "#".join("tcp://" + e for e in endpoints), "user": "mirror",
                "password": "x", "mirror": {"address_filter": hv["mirror_address_filter"],
                                            "properties": hv["mirror_properties"]}}
        facts = {"broker__version": "2.44.0", "inventory_hostname": host, "groups": groups,
                 "group_names": ["artemis", site], "hostvars": hostvars, "mirror_sites": ["dc1", "dc2"],
                 "broker_connections": [conn]}
        variables = {k: v for k, v in hv.items() if k.startswith("broker_") or k.startswith("vault_")}
        xml = render("broker", "broker.xml.j2", variables, facts)
        config = context("broker", variables, facts)["broker__validate_config"]
        assert broker_xml.semantic_errors(config, "2.44.0") == [], host
        assert broker_xml.schema_errors(xml, str(SCHEMA)) == [], host
        if site == "dc1":  # the HA pair of dc2: primary first, the backup is the # alternate
            assert conn["uri"] == "tcp://dc2-a.example.net:61617#tcp://dc2-b.example.net:61617"
        else:  # the pair replicates over its own TLS cluster acceptor, to the other host of dc2
            other = next(h for h in groups["dc2"] if h != host)
            assert '<acceptor name="cluster">tcp://' in xml and "61618?protocols=CORE;" in xml
            assert "sslEnabled=true" in xml
            assert f"tcp://{other}:61618?sslEnabled=true;trustStorePassword=" in xml, xml


def test_the_runbooks_resolve_the_example_topology_to_two_sites_one_an_ha_pair(tmp_path):
    """Three broker hosts (dc1-a; dc2-a + dc2-b, an HA pair) are two sites for the runbooks: status.yml on the example
    inventory, run here where none of its hosts exists, reports dc1 and dc2 (dc2 described by its primary, since no
    broker of the pair answers) and says the pair does not serve. No broker is contacted successfully: the test
    covers site resolution and the operator's output, not a deployment."""
    broker_xml = tmp_path / "broker.xml"
    broker_xml.write_text('<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><acceptors>'
                          '<acceptor name="artemis">tcp://0.0.0.0:61616?protocols=CORE,AMQP</acceptor>'
                          '</acceptors></core></configuration>\n')
    out = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(ROOT / "inventories" / "example" / "hosts.yml"),
         str(ROOT / "playbooks" / "status.yml"), "-e", "ansible_connection=local",
         "-e", f"ansible_python_interpreter={ROOT / '.venv' / 'bin' / 'python'}",
         "-e", f"continuity_broker_xml={broker_xml}", "-e", f"continuity_evidence_dir={tmp_path / 'evidence'}"],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
    said = " ".join(out.stdout.split())
    assert "Two sites are needed" in said and "ok: [localhost]" in said, out.stdout[-3000:]
    rows = re.findall(r"- (\S+) +unreachable \(active after a restart\) +UNREACHABLE", said)
    assert rows == ["dc1", "dc2"], said[-3000:]
    assert "Cannot resolve dc2-a.example.net" in said  # the primary describes dc2 while no broker of it is live
    assert "dc2: no broker of the pair serves (dc2, dc2-backup): the site is down, see the failover runbook" in said
    assert out.returncode != 0 and "SLA breached" in out.stdout + out.stderr  # nothing answers: a breach, as it should


def test_a_runbook_refuses_an_inventory_whose_fence_would_cut_the_mirror(tmp_path):
    """Issue 16: listing the mirror acceptor among the client acceptors (or having no mirror acceptor) would make the
    fence stop the peer's incoming mirror. Every runbook refuses such an inventory in sites.yml, before any change,
    naming the variable."""
    base = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(ROOT / "inventories" / "example" / "hosts.yml"),
            str(ROOT / "playbooks" / "swapover.yml"), "-e", "ansible_connection=local",
            "-e", f"ansible_python_interpreter={ROOT / '.venv' / 'bin' / 'python'}",
            "-e", f"continuity_evidence_dir={tmp_path / 'evidence'}"]
    for extra, needle in (
            ('{"continuity_client_acceptors": ["artemis", "mirror"]}',
             "continuity_client_acceptors lists the mirror acceptor mirror: fencing this site would stop it"),
            ('{"broker_mirror_acceptor": {"enabled": false}}',
             "broker_mirror_acceptor.enabled is false, so the mirror of the peer site comes in through a client")):
        out = subprocess.run([*base, "-e", extra], capture_output=True, text=True, cwd=ROOT, timeout=300)
        said = " ".join(out.stdout.split())
        assert out.returncode != 0 and needle in said and "Nothing was changed" in said, said[-2500:]
        assert not (tmp_path / "evidence").exists()  # stopped before the runbook recorded anything
