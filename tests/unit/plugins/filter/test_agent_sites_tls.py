"""The agent's sites from playbooks/sites.yml keep an https site's origin, CA file and validate_certs (issue 16)."""

from __future__ import annotations

from ansible_collections.continuity.artemis.plugins.filter.continuity import agent_site, agent_sites

TLS = {"name": "dc1", "broker_name": "dc1", "jolokia_url": "https://127.0.0.1:8161/console/jolokia",
       "origin": "https://127.0.0.1:8161", "ca_path": "/etc/pki/artemis-ca.pem", "validate_certs": True,
       "username": "a", "password": "p", "client_acceptors": ["artemis"]}


def test_agent_sites_carry_the_tls_keys():
    plain = {"name": "dc2", "broker_name": "dc2", "jolokia_url": "http://127.0.0.1:8261/console/jolokia",
             "ca_path": None, "validate_certs": True, "client_acceptors": ["artemis"]}
    assert agent_sites([TLS, plain]) == [
        {"name": "dc1", "client_acceptors": ["artemis"], "broker_name": "dc1", "jolokia_url": TLS["jolokia_url"],
         "username": "a", "password": "p", "origin": "https://127.0.0.1:8161", "validate_certs": True,
         "ca_path": "/etc/pki/artemis-ca.pem"},
        {"name": "dc2", "client_acceptors": ["artemis"], "broker_name": "dc2", "jolokia_url": plain["jolokia_url"],
         "validate_certs": True}]


def test_agent_site_of_a_pair_carries_them_per_broker():
    backup = dict(TLS, broker_name="dc1-backup", jolokia_url="https://127.0.0.1:8361/console/jolokia",
                  origin="https://127.0.0.1:8361")
    entry = agent_site([TLS, backup])
    assert [b["jolokia"]["ca_path"] for b in entry["brokers"]] == ["/etc/pki/artemis-ca.pem"] * 2
    assert entry["brokers"][1]["jolokia"]["origin"] == "https://127.0.0.1:8361"
    assert agent_site(TLS)["jolokia"]["validate_certs"] is True
