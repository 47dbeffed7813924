"""broker.xml / etc parsing: what Artemis accepts is read into InstanceConfig, what it rejects is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import RECORDED, SCHEMAS

from artemis_lab import config_xml, security
from artemis_lab.errors import ConfigurationError

HEAD = '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
TAIL = "</core></configuration>"


def _xml(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "broker.xml"
    path.write_text(HEAD + body + TAIL)
    return path


def _parse(tmp_path: Path, body: str, version: str = "2.44.0", schema: bool = False) -> config_xml.BrokerConfig:
    schema_dir = SCHEMAS / version if schema else None
    if schema and not (schema_dir / "artemis-configuration.xsd").exists():
        pytest.skip(f"Artemis {version} xsd not available at {schema_dir}")
    return config_xml.parse_broker_xml(_xml(tmp_path, body), version, schema_dir)


def test_recorded_real_broker_xml_parses_and_validates() -> None:
    path = RECORDED / "instance-etc" / "broker.xml"
    if not path.exists() or not (SCHEMAS / "2.44.0").is_dir():
        pytest.skip("recorded instance files or 2.44.0 schema not available")
    cfg = config_xml.parse_broker_xml(path, "2.44.0", SCHEMAS / "2.44.0")
    assert cfg.name == "dc1"
    assert [(a.name, a.port, sorted(a.protocols)) for a in cfg.acceptors] == [
        ("artemis", 61616, ["AMQP", "CORE"]), ("amqp", 5672, ["AMQP"])]
    assert cfg.acceptors[0].params["amqpCredits"] == "1000"
    (conn,) = cfg.broker_connections
    assert (conn.name, conn.uri, conn.user, conn.password, conn.retry_interval, conn.reconnect_attempts) == (
        "DC2", "tcp://127.0.0.1:5772", "admin", "admin", 1000, -1)
    assert conn.mirror is not None and conn.mirror.message_acknowledgements and not conn.mirror.sync
    assert {a.name for a in cfg.addresses} == {"DLQ", "ExpiryQueue", "orders"}
    assert cfg.security_settings[0].permissions["send"] == frozenset({"amq"})
    assert [s.match for s in cfg.address_settings] == ["activemq.management.#", "#"]
    assert cfg.address_settings[1].auto_delete_queues is False
    assert cfg.unknown_elements == []


def test_mirror_attributes_properties_and_enc_password(tmp_path: Path) -> None:
    masked = security.encode_two_way("mirror-secret")
    cfg = _parse(tmp_path, f"""<broker-connections>
      <amqp-connection uri="tcp://a:5672#tcp://b:5672" name="DC2" user="mirror" password="{masked}"
                       retry-interval="250" reconnect-attempts="7" auto-start="false">
        <mirror message-acknowledgements="false" queue-creation="false" queue-removal="true" durable="true"
                sync="true" address-filter="orders.,!orders.tmp">
          <property key="tunnel-core-messages" value="false"/>
        </mirror>
      </amqp-connection></broker-connections>""", schema=True)
    (c,) = cfg.broker_connections
    assert (c.uri, c.password, c.retry_interval, c.reconnect_attempts, c.auto_start) == (
        "tcp://a:5672#tcp://b:5672", "mirror-secret", 250, 7, False)
    assert c.mirror is not None
    assert (c.mirror.message_acknowledgements, c.mirror.queue_creation, c.mirror.sync) == (False, False, True)
    assert c.mirror.address_filter == "orders.,!orders.tmp"
    assert c.mirror.properties == {"tunnel-core-messages": "false"}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ('<broker-connections><amqp-connection uri="tcp://x:1" name="A" reconnect-attempts="0"><mirror/>'
         "</amqp-connection></broker-connections>", "reconnect-attempts"),
        ('<broker-connections><amqp-connection uri="tcp://x:1" name="A" retry-interval="0"><mirror/>'
         "</amqp-connection></broker-connections>", "retry-interval"),
        ('<broker-connections><amqp-connection name="A"><mirror/></amqp-connection></broker-connections>', "uri"),
        ('<broker-connections><amqp-connection uri="tcp://x:1"><mirror/></amqp-connection></broker-connections>',
         "name"),
        ('<broker-connections><amqp-connection uri="tcp://x:1" name="A"/></broker-connections>', "at least one"),
        ('<acceptors><acceptor name="a">tcp://127.0.0.1:5000</acceptor><acceptor name="a">tcp://127.0.0.1:5001'
         "</acceptor></acceptors>", "duplicate acceptor"),
        ('<acceptors><acceptor name="a">tcp://127.0.0.1:5000</acceptor><acceptor name="b">tcp://127.0.0.1:5000'
         "</acceptor></acceptors>", "both bind"),
        ("<persistence-enabled>maybe</persistence-enabled>", "boolean"),
    ],
)
def test_config_artemis_rejects_is_refused(tmp_path: Path, body: str, needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        _parse(tmp_path, body)


def test_mirror_property_before_2_32_refused(tmp_path: Path) -> None:
    body = ('<broker-connections><amqp-connection uri="tcp://x:1" name="A"><mirror>'
            '<property key="tunnel-core-messages" value="true"/></mirror></amqp-connection></broker-connections>')
    with pytest.raises(ConfigurationError, match=r"2\.32"):
        _parse(tmp_path, body, version="2.30.0")
    assert _parse(tmp_path, body, version="2.33.0").broker_connections[0].mirror is not None


def test_mirror_ack_manager_settings_need_2_34(tmp_path: Path) -> None:
    body = "<mirror-ack-manager-queue-attempts>7</mirror-ack-manager-queue-attempts>"
    with pytest.raises(ConfigurationError, match=r"2\.34"):
        _parse(tmp_path, body, version="2.33.0")
    assert _parse(tmp_path, body).core_settings["mirror-ack-manager-queue-attempts"] == "7"


def test_malformed_xml_refused(tmp_path: Path) -> None:
    path = tmp_path / "broker.xml"
    path.write_text(HEAD + "<name>x</name>")
    with pytest.raises(ConfigurationError, match="cannot read"):
        config_xml.parse_broker_xml(path, "2.44.0")


def test_unknown_element_logged_without_schema_fatal_with_schema(tmp_path: Path) -> None:
    cfg = _parse(tmp_path, "<name>b</name><frobnicator>1</frobnicator>")
    assert cfg.unknown_elements == ["frobnicator"]
    with pytest.raises(ConfigurationError, match="Invalid configuration"):
        _parse(tmp_path, "<name>b</name><frobnicator>1</frobnicator>", schema=True)


def test_2_30_schema_rejects_mirror_with_whitespace_content(tmp_path: Path) -> None:
    body = ('<broker-connections><amqp-connection uri="tcp://x:1" name="A"><mirror> </mirror>'
            "</amqp-connection></broker-connections>")
    with pytest.raises(ConfigurationError):
        _parse(tmp_path, body, version="2.30.0", schema=True)
    assert _parse(tmp_path, body.replace("<mirror> </mirror>", "<mirror/>"), version="2.30.0", schema=True)


def test_ha_policy_plugins_and_queue_details(tmp_path: Path) -> None:
    cfg = _parse(tmp_path, """
      <ha-policy><replication><primary/></replication></ha-policy>
      <broker-plugins><broker-plugin class-name="com.example.P"><property key="k" value="v"/></broker-plugin>
      </broker-plugins>
      <addresses><address name="events"><multicast><queue name="sub1" max-consumers="2">
        <durable>false</durable><filter string="color='red'"/></queue></multicast></address></addresses>""")
    assert (cfg.ha_policy.kind, cfg.ha_policy.role) == ("replication", "primary")
    assert cfg.broker_plugins[0].class_name == "com.example.P" and cfg.broker_plugins[0].properties == {"k": "v"}
    (addr,) = cfg.addresses
    (q,) = addr.queues
    assert addr.routing_types == frozenset({"multicast"})
    assert (q.routing_type, q.durable, q.filter, q.max_consumers) == ("multicast", False, "color='red'", 2)


def test_instance_files_recorded_jolokia_access_and_management() -> None:
    etc = RECORDED / "instance-etc"
    if not etc.is_dir():
        pytest.skip(f"recorded instance files not available at {etc}")
    origins, strict = config_xml.jolokia_access(etc)
    assert origins == ["*://127.0.0.1*", "*://localhost*"] and strict
    profile = config_xml.profile_vars(etc)
    assert profile["HAWTIO_ROLES"] == "amq"
    assert config_xml.management_roles(etc, profile) == frozenset({"amq"})


# --- passwords and realm ------------------------------------------------------------------------------------------
def test_two_way_codec_matches_artemis_documented_values() -> None:
    # Values from the Artemis user manual (masking passwords); decoding them proves the codec is the real one.
    assert security.decode_two_way("ENC(-5a2376c61c668aaf)") == "keypass"
    assert security.decode_two_way("ENC(3d617352d12839eb71208edf41d66b34)") == "trustpass"
    assert security.decode_two_way(security.encode_two_way("some password")) == "some password"
    assert security.encode_two_way("keypass") == "ENC(-5a2376c61c668aaf)"


def test_one_way_hash_verifies_and_rejects() -> None:
    stored = security.hash_password("pw", salt=bytes(32))
    assert stored.startswith("ENC(1024:" + "00" * 32 + ":")
    assert security.verify_password("pw", stored) and not security.verify_password("pW", stored)
    assert security.verify_password("plain", "plain") and not security.verify_password("plain", "other")
    assert security.verify_password("keypass", "ENC(-5a2376c61c668aaf)")


def test_realm_reads_roles_and_reloads(tmp_path: Path) -> None:
    users, roles = tmp_path / "u.properties", tmp_path / "r.properties"
    users.write_text(f"# c\nadmin = {security.hash_password('a')}\nbob=plainpw\n")
    roles.write_text("amq = admin,bob\nview=bob\n")
    realm = security.PropertiesRealm(users, roles)
    assert realm.authenticate("admin", "a") == frozenset({"amq"})
    assert realm.authenticate("bob", "plainpw") == frozenset({"amq", "view"})
    assert realm.authenticate("bob", "x") is None and realm.authenticate("nobody", "x") is None
    import os

    roles.write_text("amq = admin\n")
    os.utime(roles, (1, 1))  # a different mtime triggers the reload, as JAAS reload=true does
    assert realm.authenticate("bob", "plainpw") == frozenset()


def test_allow_anonymous_instance_records_guest_login(tmp_path: Path) -> None:
    from artemis_lab import instance

    base = {"user": "admin", "password": "pw", "host": "127.0.0.1", "no_amqp_acceptor": True,
            "no_mqtt_acceptor": True, "no_stomp_acceptor": True, "no_hornetq_acceptor": True}
    anon = instance.create_instance(instance.CreateOptions(directory=str(tmp_path / "a"), require_login=False,
                                                           **base), tmp_path, "2.44.0")
    cfg = config_xml.parse_instance(anon, "2.44.0")
    assert (cfg.guest_user, cfg.guest_role) == ("admin", "amq")
    strict = instance.create_instance(instance.CreateOptions(directory=str(tmp_path / "s"), require_login=True,
                                                             **base), tmp_path, "2.44.0")
    assert config_xml.parse_instance(strict, "2.44.0").guest_user is None
