"""The example inventory for real hosts renders a broker.xml per host that passes the semantic checks and the
2.44.0 schema (the mirror connection is computed as the mirror role does: peer site, primary first)."""

from __future__ import annotations

import json
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
                 "broker_connections": [conn]}
        variables = {k: v for k, v in hv.items() if k.startswith("broker_") or k.startswith("vault_")}
        xml = render("broker", "broker.xml.j2", variables, facts)
        config = context("broker", variables, facts)["broker__validate_config"]
        assert broker_xml.semantic_errors(config, "2.44.0") == [], host
        assert broker_xml.schema_errors(xml, str(SCHEMA)) == [], host
        if site == "dc1":  # the HA pair of dc2: primary first, the backup is the # alternate
            assert conn["uri"] == "tcp://dc2-a.example.net:61617#tcp://dc2-b.example.net:61617"
