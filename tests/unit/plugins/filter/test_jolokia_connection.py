"""filter jolokia_connection: a site of continuity_sites -> the jolokia action group's options (issue 19)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.filter.connection import jolokia_connection

SITE = {"name": "dc1", "host": "dc1", "jolokia_url": "https://b1:8161/console/jolokia", "username": "admin",
        "password": "pw", "broker_name": "dc1", "origin": "https://b1:8161", "validate_certs": True,
        "ca_path": "/ctl/ca.pem", "host_ca_path": "/opt/artemis/dc1/etc/web-ca.pem",
        "client_acceptors": ["artemis"], "broker_xml": "/opt/artemis/dc1/etc/broker.xml"}


def test_the_connection_options_only():
    assert jolokia_connection(SITE) == {
        "url": "https://b1:8161/console/jolokia", "username": "admin", "password": "pw", "broker_name": "dc1",
        "origin": "https://b1:8161", "validate_certs": True, "ca_path": "/ctl/ca.pem"}


def test_on_its_own_broker_host_the_ca_file_is_the_hosts_copy():
    assert jolokia_connection(SITE, on_host=True)["ca_path"] == "/opt/artemis/dc1/etc/web-ca.pem"


def test_a_task_on_a_broker_host_names_the_ca_file_there():
    assert jolokia_connection(SITE, ca_path="/opt/artemis/dc2/etc/web-ca.pem")["ca_path"] == \
        "/opt/artemis/dc2/etc/web-ca.pem"
    assert jolokia_connection(SITE, ca_path=None)["ca_path"] == "/ctl/ca.pem"


def test_options_the_site_lacks_are_left_to_the_module_defaults():
    plain = {k: SITE[k] for k in ("name", "jolokia_url", "username", "password", "broker_name")}
    assert jolokia_connection(plain) == {"url": SITE["jolokia_url"], "username": "admin", "password": "pw",
                                         "broker_name": "dc1"}
    assert "ca_path" not in jolokia_connection({**plain, "ca_path": None})


def test_a_site_without_endpoint_or_credentials_is_named():
    with pytest.raises(AnsibleFilterError, match=r"site dc1 has no jolokia_url, password"):
        jolokia_connection({"name": "dc1", "username": "admin", "broker_name": "dc1"})
    with pytest.raises(AnsibleFilterError, match="expects a site"):
        jolokia_connection("dc1")
