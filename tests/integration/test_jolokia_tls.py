"""Jolokia over TLS from the broker role, on real Artemis (issue 16).

A private two-site lab (its own LAB_ROOT and free port block): dc1 is created with broker_web_tls (`artemis create
--ssl-key --ssl-key-password`, keystore from the controller, self-signed by `keytool`), dc2 is created plain and then
switched to https on the existing instance (the role rewrites the bootstrap.xml binding and restarts it). Jolokia
answers over https with the CA and refuses without it; the runbooks' site resolution (playbooks/sites.yml) gives the
https URL with ca_path, and broker_info reads through it; the mirror role's checks ran over https in every deploy.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from deploy_support import PORT_OFFSETS, ROOT, VERSION, DeployLab
from runbook_support import free_port_base

STOREPASS = 'se"c<r&t-web'  # needs XML escaping in bootstrap.xml (artemis create writes it raw)

pytestmark = [pytest.mark.slow]


def _keystore(where: Path):
    """A self-signed PKCS12 keystore for 127.0.0.1/localhost and its certificate as PEM (the CA file)."""
    ks, ca = where / "web.p12", where / "web-ca.pem"
    subprocess.run(["keytool", "-genkeypair", "-alias", "web", "-keyalg", "RSA", "-keysize", "2048", "-validity", "30",
                    "-dname", "CN=localhost", "-ext", "SAN=dns:localhost,ip:127.0.0.1", "-keystore", str(ks),
                    "-storetype", "PKCS12", "-storepass", STOREPASS, "-keypass", STOREPASS],
                   check=True, capture_output=True, timeout=60)
    subprocess.run(["keytool", "-exportcert", "-rfc", "-alias", "web", "-keystore", str(ks), "-storepass", STOREPASS,
                    "-file", str(ca)], check=True, capture_output=True, timeout=60)
    return ks, ca


def _tls_vars(ks, ca):
    return (f"---\nbroker_web_tls:\n  enabled: true\n  keystore_file: {ks}\n"
            f"  keystore_password: {json.dumps(STOREPASS)}\n  keystore_type: PKCS12\n  ca_path: {ca}\n")


class Lab(DeployLab):
    scheme = "https"

    def __init__(self, root: Path, base: int):
        super().__init__(root, base)
        self.keystore, self.ca = _keystore(root)

    def set_tls(self, host):
        host_vars = self.inventory / "host_vars"
        host_vars.mkdir(exist_ok=True)
        (host_vars / f"{host}.yml").write_text(_tls_vars(self.keystore, self.ca))

    def started(self, site, **kw):
        return self.jolokia(site, {"type": "read", "mbean": f'org.apache.activemq.artemis:broker="{site}"',
                                   "attribute": "Started"}, **kw)["value"]

    def connected(self, site, peer, **kw):
        answer = self.jolokia(site, {"type": "exec", "mbean": f'org.apache.activemq.artemis:broker="{site}"',
                                     "operation": "listBrokerConnections()"}, **kw)
        return {c["name"]: c for c in json.loads(answer["value"])}[peer.upper()].get("connected") in (True, "true")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("jolokia-tls"), free_port_base())
    yield lab
    lab.stop()


@pytest.fixture(scope="module")
def deployed(lab):
    lab.set_tls("dc1-artemis")  # dc1: https from `artemis create` on; dc2: created plain
    proc = lab.deploy()
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    return proc


def _ca_context(lab):
    return ssl.create_default_context(cafile=str(lab.ca))


def test_created_with_tls_jolokia_answers_https_with_the_ca_and_refuses_without(lab, deployed):
    assert lab.started("dc1", context=_ca_context(lab)) is True
    with pytest.raises(urllib.error.URLError) as info:  # the system trust store does not know the lab's CA
        lab.started("dc1", context=ssl.create_default_context())
    assert isinstance(info.value.reason, ssl.SSLCertVerificationError)
    assert "certificate verify failed" in str(info.value.reason)
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):  # no http there
        lab.started("dc1", scheme="http")
    assert lab.started("dc2", scheme="http") is True
    bootstrap = (lab.instance("dc1") / "etc" / "bootstrap.xml").read_text()
    assert f'uri="https://127.0.0.1:{lab.base + 161}"' in bootstrap
    assert 'keyStorePassword="ENC(' in bootstrap and STOREPASS not in bootstrap  # masked, not create's raw text
    etc = lab.instance("dc1") / "etc"
    assert (etc / "web-web.p12").exists() and (etc / "web-ca.pem").exists()
    # the mirror role checked dc1's mirror over https and it is connected both ways
    assert lab.connected("dc1", "dc2", context=_ca_context(lab))
    assert lab.connected("dc2", "dc1", scheme="http")


def test_sites_give_https_with_the_ca_and_broker_info_reads_through_it(lab, deployed, tmp_path):
    out = tmp_path / "out.json"
    play = tmp_path / "read.yml"
    play.write_text(f"""---
- name: Resolve the sites
  ansible.builtin.import_playbook: {ROOT / 'playbooks' / 'sites.yml'}

- name: Read dc1 through the site info
  hosts: dc1-artemis
  gather_facts: false
  tasks:
    - name: With the CA
      continuity.artemis.broker_info:
        url: "{{{{ continuity_site_info.jolokia_url }}}}"
        username: "{{{{ continuity_site_info.username }}}}"
        password: "{{{{ continuity_site_info.password }}}}"
        ca_path: "{{{{ continuity_site_info.ca_path }}}}"
        validate_certs: "{{{{ continuity_site_info.validate_certs }}}}"
        name_regex: "^orders$"
      register: with_ca
    - name: Without the CA
      continuity.artemis.broker_info:
        url: "{{{{ continuity_site_info.jolokia_url }}}}"
        username: "{{{{ continuity_site_info.username }}}}"
        password: "{{{{ continuity_site_info.password }}}}"
      register: without_ca
      ignore_errors: true
    - name: Keep what was seen
      ansible.builtin.copy:
        content: "{{{{ {{'info': continuity_site_info | combine({{'password': ''}}), 'role': continuity_site_role,
                      'with_ca': with_ca, 'without_ca': without_ca}} | to_json }}}}"
        dest: {out}
        mode: "0600"
      delegate_to: localhost
""")
    proc = lab.playbook(play)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    seen = json.loads(out.read_text())
    info = seen["info"]
    assert info["jolokia_url"] == f"https://127.0.0.1:{lab.base + 161}/console/jolokia"
    assert info["origin"] == f"https://127.0.0.1:{lab.base + 161}"
    assert info["ca_path"] == str(lab.ca) and info["validate_certs"] is True
    assert seen["role"]["reachable"] is True and seen["role"]["role"] == "active", seen["role"]
    assert seen["with_ca"]["broker"]["started"] is True and seen["with_ca"]["broker"]["version"] == VERSION
    assert "orders" in seen["with_ca"]["queues"]
    assert seen["without_ca"]["failed"] is True
    assert "could not be verified" in seen["without_ca"]["msg"] and "ca_path" in seen["without_ca"]["msg"]


def test_existing_instance_switched_to_https_then_nothing_changes(lab, deployed):
    before = {site: lab.pid(site) for site in PORT_OFFSETS}
    lab.set_tls("dc2-artemis")
    proc = lab.deploy()
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "restart needed: bootstrap.xml web binding changed (http/https)" in proc.stdout, proc.stdout[-6000:]
    after = {site: lab.pid(site) for site in PORT_OFFSETS}
    assert after["dc2"] != before["dc2"] and after["dc1"] == before["dc1"]
    assert lab.started("dc2", context=_ca_context(lab)) is True
    assert lab.connected("dc1", "dc2", context=_ca_context(lab))
    assert lab.connected("dc2", "dc1", context=_ca_context(lab))
    proc = lab.deploy()
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert all(r["changed"] == 0 for r in lab.recap(proc.stdout).values()), proc.stdout[-6000:]


def test_runbooks_run_over_https(lab, deployed, tmp_path):
    """Both sites serve Jolokia over https (after the switch above): the runbooks pass each site's CA file to the
    modules through module_defaults (filter jolokia_connection; the broker role's copy on a broker host), so the
    initial roles, status and a swapover there and back work with certificate verification on (issue 16)."""
    evidence = ["-e", f"continuity_evidence_dir={tmp_path / 'evidence'}"]
    proc = lab.playbook(ROOT / "playbooks" / "initial_roles.yml", "-e", "continuity_initial_active_site=dc1")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    proc = lab.playbook(ROOT / "playbooks" / "status.yml", *evidence)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "SLA: ok" in proc.stdout, proc.stdout[-3000:]
    for to_site in ("dc2", "dc1"):
        proc = lab.playbook(ROOT / "playbooks" / "swapover.yml", "-e", f"continuity_to_site={to_site}", *evidence)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    # dc1 is active again: its client acceptor serves, read over https with the CA
    answer = lab.jolokia("dc1", {"type": "read", "mbean": 'org.apache.activemq.artemis:broker="dc1",'
                                 'component=acceptors,name="artemis"', "attribute": "Started"},
                         context=_ca_context(lab))
    assert answer["value"] is True
