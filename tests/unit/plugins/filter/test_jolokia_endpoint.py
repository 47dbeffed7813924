"""The one Jolokia endpoint rule (filter artemis_jolokia_endpoint) and the web binding edit of bootstrap.xml
(filter artemis_web_binding) that makes the broker's web server serve https (issues 16, 19)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.filter.artemis import (
    FilterModule,
    artemis_jolokia_endpoint,
    artemis_web_binding,
)


def test_defaults_are_the_stock_web_console():
    assert artemis_jolokia_endpoint({}) == {
        "scheme": "http", "host": "localhost", "port": 8161, "url": "http://localhost:8161/console/jolokia",
        "origin": "http://localhost:8161", "tls": False}


def test_port_offset_and_strings_as_awx_passes_them():
    ep = artemis_jolokia_endpoint({"host": "127.0.0.1", "port": "20161", "port_offset": "100", "tls": "False"})
    assert ep["url"] == "http://127.0.0.1:20261/console/jolokia"
    assert ep["origin"] == "http://127.0.0.1:20261"
    assert ep["port"] == 20261 and ep["tls"] is False


@pytest.mark.parametrize("tls", [True, "true", "True", "yes", 1])
def test_tls_gives_https(tls):
    ep = artemis_jolokia_endpoint({"host": "dc1.example.com", "port": 8443, "tls": tls})
    assert ep["scheme"] == "https"
    assert ep["url"] == "https://dc1.example.com:8443/console/jolokia"
    assert ep["origin"] == "https://dc1.example.com:8443"


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", ""])
def test_wildcard_bind_is_reached_at_the_connect_host(bind):
    assert artemis_jolokia_endpoint({"host": bind})["host"] == "127.0.0.1"
    ep = artemis_jolokia_endpoint({"host": bind, "connect_host": "10.0.0.5", "tls": True})
    assert ep["url"] == "https://10.0.0.5:8161/console/jolokia"


def test_ipv6_host_is_bracketed():
    ep = artemis_jolokia_endpoint({"host": "fd00::5", "port": 8161})
    assert ep["url"] == "http://[fd00::5]:8161/console/jolokia"
    assert ep["origin"] == "http://[fd00::5]:8161"


def test_explicit_url_wins_and_gives_the_origin_the_modules_send():
    ep = artemis_jolokia_endpoint({"url": "https://jolokia.example.com:9443/console/jolokia/", "host": "x",
                                   "tls": False})
    assert ep == {"scheme": "https", "host": "jolokia.example.com", "port": 9443,
                  "url": "https://jolokia.example.com:9443/console/jolokia",
                  "origin": "https://jolokia.example.com:9443", "tls": True}
    # no port in the URL: the client's default Origin is scheme://netloc (jolokia.py), so is ours
    ep = artemis_jolokia_endpoint({"url": "https://proxy.example.com/jolokia"})
    assert ep["port"] == 443 and ep["origin"] == "https://proxy.example.com"


def test_same_origin_as_the_client_builds():
    from ansible_collections.continuity.artemis.plugins.module_utils.jolokia import JolokiaClient

    for broker in ({"host": "127.0.0.1", "port": 20161, "tls": True}, {"host": "::", "port": 8161},
                   {"url": "http://h.example.com:8161/console/jolokia"}):
        ep = artemis_jolokia_endpoint(broker)
        assert JolokiaClient(ep["url"]).origin == ep["origin"]


def test_bad_input_is_a_clear_error():
    with pytest.raises(AnsibleFilterError, match="url must be"):
        artemis_jolokia_endpoint({"url": "ftp://x/y"})
    with pytest.raises(AnsibleFilterError, match="must be integers"):
        artemis_jolokia_endpoint({"port": "eighty"})


def test_registered():
    filters = FilterModule().filters()
    assert filters["artemis_jolokia_endpoint"] is artemis_jolokia_endpoint
    assert filters["artemis_web_binding"] is artemis_web_binding


# bootstrap.xml as artemis create 2.44 writes it (plain, and with --ssl-key / --ssl-key-password, which writes the
# password unescaped)
PLAIN = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<broker xmlns="http://activemq.apache.org/schema">
   <jaas-security domain="activemq"/>
   <server configuration="file:/lab/dc1/etc//broker.xml"/>
   <!-- The web server is only bound to localhost by default -->
   <web path="web" rootRedirectLocation="console">
       <binding name="artemis" uri="http://127.0.0.1:20161">
           <app name="console" url="console" war="console.war"/>
       </binding>
   </web>
</broker>
"""
CREATED_TLS = PLAIN.replace(
    '<binding name="artemis" uri="http://127.0.0.1:20161">',
    '<binding name="artemis" uri="https://127.0.0.1:20161" keyStorePath="/ks/broker.p12" keyStorePassword="se"c<r&t">')
TLS = {"enabled": True, "keystore_path": "/ks/broker.p12", "keystore_password": 'se"c<r&t'}


def _binding(text):
    root = ET.fromstring(text.encode())
    return root.find("{http://activemq.apache.org/schema}web/{http://activemq.apache.org/schema}binding")


def test_binding_switched_to_https_keeps_everything_else():
    out = artemis_web_binding(PLAIN, TLS)
    b = _binding(out)
    assert b.get("uri") == "https://127.0.0.1:20161"
    assert b.get("keyStorePath") == "/ks/broker.p12"
    assert b.get("keyStorePassword") == 'se"c<r&t'  # escaped in the file, the same value for the broker
    assert b.get("name") == "artemis" and b.find("{http://activemq.apache.org/schema}app").get("war") == "console.war"
    assert out.replace(out[out.index("<binding"):out.index(">", out.index("keyStorePassword")) + 1], "") == \
        PLAIN.replace('<binding name="artemis" uri="http://127.0.0.1:20161">', "")
    assert artemis_web_binding(out, TLS) == out  # idempotent


def test_binding_create_wrote_with_a_raw_password_is_repaired():
    out = artemis_web_binding(CREATED_TLS, TLS)
    assert _binding(out).get("keyStorePassword") == 'se"c<r&t'
    assert out == artemis_web_binding(PLAIN, TLS)


def test_binding_back_to_http_drops_the_keystore():
    tls = dict(TLS, keystore_password="ENC(1a2b)", keystore_type="PKCS12")
    https = artemis_web_binding(PLAIN, tls)
    assert _binding(https).get("keyStoreType") == "PKCS12"
    assert artemis_web_binding(https, {"enabled": False}) == PLAIN
    assert artemis_web_binding(PLAIN, None) == PLAIN
    assert artemis_web_binding("", TLS) == ""


def test_binding_other_attributes_stay():
    text = PLAIN.replace('uri="http://127.0.0.1:20161"', 'uri="http://127.0.0.1:20161" sniHostCheck="false"')
    b = _binding(artemis_web_binding(text, dict(TLS, enabled="true")))
    assert b.get("sniHostCheck") == "false" and b.get("uri").startswith("https://")


def test_binding_errors_name_what_is_missing():
    with pytest.raises(AnsibleFilterError, match="keystore_path and keystore_password"):
        artemis_web_binding(PLAIN, {"enabled": True, "keystore_path": "/ks"})
    with pytest.raises(AnsibleFilterError, match="no <binding>"):
        artemis_web_binding("<broker/>", TLS)
