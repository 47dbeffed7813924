"""Semantic checks, schema lookup in distribution archives and the restart-or-reload decision."""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import broker_xml
from continuity_lab import schemas

SCHEMAS = schemas.root()
schemas.path("2.44.0")  # a clear error at collection when `make schemas` has not run


def _base(**over):
    config = {
        "name": "dc1",
        "acceptors": [{"name": "artemis", "port": 61616}],
        "mirror_acceptor": {"enabled": True, "name": "mirror", "port": 61617},
        "http_port": 8161,
        "admin_user": "admin",
        "admin_role": "amq",
        "users": [{"name": "mirror", "roles": ["mirror"], "has_password": True}],
        "security_settings": [{"match": "#", "permissions": {"send": ["amq"]}}],
        "connections": [
            {
                "name": "DC2",
                "uri": "tcp://dc2:61617",
                "retry_interval": 1000,
                "reconnect_attempts": -1,
                "user": "mirror",
                "has_password": True,
                "mirror": {"address_filter": "Orders.,!Orders.tmp"},
            }
        ],
    }
    config.update(over)
    return config


def test_clean_config_has_no_errors():
    assert broker_xml.semantic_errors(_base(), "2.44.0") == []


def test_numbers_given_as_text_are_numbers():
    """ansible-core before 2.19 renders templated numbers ("{{ base + 616 }}") as text, and so do -e and AWX text
    surveys: the lab deploy on ansible-core 2.16 failed here with "'20616' is not a TCP port" (issue 16)."""
    conn = dict(_base()["connections"][0], retry_interval="1000", reconnect_attempts="-1")
    config = _base(acceptors=[{"name": "artemis", "port": "20616"}], http_port="8161", connections=[conn],
                   mirror_acceptor={"enabled": True, "name": "mirror", "port": "20617"})
    assert broker_xml.semantic_errors(config, "2.44.0") == []
    bad = _base(acceptors=[{"name": "artemis", "port": "616x"}, {"name": "b", "port": True}])
    assert broker_xml.semantic_errors(bad, "2.44.0") == [
        "broker_acceptors[0].port: '616x' is not a TCP port (1-65535)",
        "broker_acceptors[1].port: True is not a TCP port (1-65535)"]


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        (
            {"acceptors": [{"name": "a", "port": 61617}]},
            "broker_mirror_acceptor.port: port 61617 is already used by broker_acceptors[0]",
        ),
        (
            {"acceptors": [{"name": "mirror", "port": 1}]},
            "broker_mirror_acceptor.name: acceptor name 'mirror' is already used",
        ),
        ({"acceptors": [{"name": "a", "port": 70000}]}, "broker_acceptors[0].port: 70000 is not a TCP port"),
        ({"http_port": 61616}, "broker_http_port: port 61616 is already used by broker_acceptors[0]"),
        (
            {"connections": [{"name": "DC2", "uri": "tcp://a:1", "reconnect_attempts": 0}]},
            "broker_connections[0].reconnect_attempts: must be -1",
        ),
        (
            {"connections": [{"name": "DC2", "uri": "tcp://a:1", "retry_interval": 0}]},
            "broker_connections[0].retry_interval: must be a number of milliseconds > 0",
        ),
        (
            {"connections": [{"name": "X", "uri": "tcp://a:1"}, {"name": "X", "uri": "tcp://b:1"}]},
            "broker_connections[1].name: connection name 'X' is already used by broker_connections[0]",
        ),
        ({"connections": [{"name": "X", "uri": "tcp://a:1#b:2"}]}, "broker_connections[0].uri: 'b:2' is not"),
        (
            {"connections": [{"name": "X", "uri": "tcp://a:1", "mirror": {"address_filter": "orders.#"}}]},
            "broker_connections[0].mirror.address_filter: 'orders.#' uses a wildcard",
        ),
        (
            {"security_settings": [{"match": "#", "permissions": {"send": ["ghost"]}}]},
            "broker_security_settings[0].permissions.send: role 'ghost' is held by no user",
        ),
        (
            {"security_settings": [{"match": "#", "permissions": {"write": ["amq"]}}]},
            "broker_security_settings[0].permissions.write: unknown permission type",
        ),
        (
            {"users": [{"name": "admin", "roles": ["x"]}]},
            "broker_users[0].name: user 'admin' is already defined by broker_admin_user",
        ),
        ({"ha_policy": {"type": "replication"}}, "broker_ha_policy.role: replication needs role primary or backup"),
        ({"mirror_tuning": {"page_transaction": True}}, None),
        (
            {
                "addresses": [
                    {"name": "a", "routing_types": ["anycast"], "queues": [{"name": "q", "routing_type": "multicast"}]}
                ]
            },
            "broker_addresses[0].queues[0].routing_type: 'multicast' is not one of the address routing_types",
        ),
        (
            {"plugins": [{"class_name": "P", "jar_url": "http://x/p.jar"}]},
            "broker_plugins[0].jar_checksum: needed with jar_url",
        ),
    ],
)
def test_semantic_errors_name_the_variable(over, expected):
    errors = broker_xml.semantic_errors(_base(**over), "2.44.0")
    if expected is None:
        assert errors == []
    else:
        assert any(e.startswith(expected) for e in errors), errors


@pytest.mark.parametrize(
    ("over", "version", "expected"),
    [
        (
            {"mirror_tuning": {"page_transaction": True}},
            "2.33.0",
            "broker_mirror_tuning.page_transaction: needs Artemis 2.34.0 or later, the target version is 2.33.0",
        ),
        (
            {"mirror_tuning": {"ack_manager_warn_unacked": True}},
            "2.37.0",
            "broker_mirror_tuning.ack_manager_warn_unacked: needs Artemis 2.38.0",
        ),
        (
            {
                "connections": [
                    {"name": "X", "uri": "tcp://a:1", "mirror": {"properties": {"tunnel-core-messages": "false"}}}
                ]
            },
            "2.31.0",
            "broker_connections[0].mirror.properties: needs Artemis 2.32.0",
        ),
    ],
)
def test_features_missing_in_the_target_version(over, version, expected):
    errors = broker_xml.semantic_errors(_base(**over), version)
    assert any(e.startswith(expected) for e in errors), errors


def test_bad_version_is_reported():
    assert broker_xml.semantic_errors(_base(), "latest") == ["broker_version: not an Artemis version: 'latest'"]


XML = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><name>dc1</name>
<broker-connections>{conns}</broker-connections>
<acceptors><acceptor name="a">tcp://0.0.0.0:{port}</acceptor></acceptors>
<addresses><address name="{addr}"><anycast><queue name="{addr}"/></anycast></address></addresses>
</core></configuration>"""
MIRROR = '<amqp-connection uri="tcp://b:1" name="DC2"><mirror sync="{sync}"/></amqp-connection>'
SENDER = '<amqp-connection uri="tcp://c:1" name="OUT"><sender address-match="x"/></amqp-connection>'


def _xml(conns=None, port=1, addr="orders"):
    conns = MIRROR.format(sync="false") if conns is None else conns
    return XML.format(conns=conns, port=port, addr=addr)


def test_no_previous_file_or_no_change_needs_no_restart():
    assert broker_xml.restart_reasons(None, _xml(), "2.44.0") == []
    # formatting and comments alone are no change
    assert broker_xml.restart_reasons(_xml(), _xml().replace("<name>", "<!-- c -->\n   <name>"), "2.44.0") == []


def test_reloadable_changes_need_no_restart():
    assert broker_xml.restart_reasons(_xml(), _xml(addr="invoices"), "2.44.0") == []
    # adding a connection (mirror or not) is applied by the reload from 2.32
    added = _xml(conns=MIRROR.format(sync="false") + SENDER)
    assert broker_xml.restart_reasons(_xml(), added, "2.44.0") == []


def test_changed_or_removed_mirror_needs_a_restart():
    changed = _xml(conns=MIRROR.format(sync="true"))
    assert broker_xml.restart_reasons(_xml(), changed, "2.44.0") == [
        "mirror connection DC2 changed (a reload cannot change a mirror)"
    ]
    assert broker_xml.restart_reasons(_xml(), _xml(conns=SENDER), "2.44.0") == [
        "mirror connection DC2 removed (a reload cannot remove a mirror)"
    ]


def test_connections_before_2_32_always_restart_and_acceptors_always_restart():
    added = _xml(conns=MIRROR.format(sync="false") + SENDER)
    assert broker_xml.restart_reasons(_xml(), added, "2.31.0") == [
        "broker connections changed (Artemis before 2.32 does not reload them)"
    ]
    assert broker_xml.restart_reasons(_xml(), _xml(port=2), "2.44.0") == [
        "<acceptors> changed (not applied by a configuration reload)"
    ]


def _tar(path, members):
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def _jar(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize("layout", ["schema-dir", "server-jar", "zip"])
def test_schema_is_found_in_a_distribution(tmp_path, layout):
    xsds = {p.name: p.read_bytes() for p in (SCHEMAS / "2.44.0").glob("*.xsd")}
    top = "apache-artemis-2.44.0"
    if layout == "schema-dir":
        archive = tmp_path / f"{top}-bin.tar.gz"
        _tar(archive, {f"{top}/schema/{n}": d for n, d in xsds.items()} | {f"{top}/bin/artemis": b"#!/bin/sh\n"})
    elif layout == "server-jar":
        archive = tmp_path / f"{top}-bin.tar.gz"
        jar = _jar({f"schema/{n}": d for n, d in xsds.items()})
        _tar(archive, {f"{top}/lib/artemis-server-2.44.0.jar": jar, f"{top}/lib/other.jar": _jar({"a": b"b"})})
    else:
        archive = tmp_path / f"{top}-bin.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for n, d in xsds.items():
                zf.writestr(f"{top}/schema/{n}", d)
    with broker_xml.SchemaDir(archive=str(archive)) as schema_dir:
        assert broker_xml.schema_errors(_xml(), schema_dir) == []
        assert broker_xml.schema_errors(_xml().replace("<name>", "<nme/><name>"), schema_dir)


def test_archive_without_schema_is_an_error(tmp_path):
    archive = tmp_path / "apache-artemis-2.44.0-bin.tar.gz"
    _tar(archive, {"apache-artemis-2.44.0/bin/artemis": b""})
    with pytest.raises(ValueError, match=r"no artemis-configuration\.xsd"):
        with broker_xml.SchemaDir(archive=str(archive)):
            pass


# ------------------------------------------------------------------------------------ continuity plugin
_ACCEPTORS = [{"name": "artemis", "port": 61616}]
_MIRROR_ACCEPTOR = {"enabled": True, "name": "mirror", "port": 61617}


def _plugin_errors(plugin, plugins=()):
    config = {"name": "dc1", "acceptors": _ACCEPTORS, "mirror_acceptor": _MIRROR_ACCEPTOR,
              "continuity_plugin": dict({"enabled": True, "window_seconds": 60, "max_addresses": 500}, **plugin),
              "plugins": list(plugins)}
    return [e for e in broker_xml.semantic_errors(config, "2.44.0") if "continuity" in e or "plugins" in e]


@pytest.mark.parametrize(("plugin", "needle"), [
    ({}, "broker_continuity_plugin: enabled needs jar_file"),
    ({"jar_file": "/a.jar", "jar_url": "https://h/a.jar", "jar_checksum": "sha256:00"}, "set jar_file or jar_url"),
    ({"jar_url": "https://h/a.jar"}, "broker_continuity_plugin.jar_checksum: needed with jar_url"),
    ({"jar_file": "/a.jar", "window_seconds": 86401}, "broker_continuity_plugin.window_seconds: must be between 6"),
    ({"jar_file": "/a.jar", "max_addresses": 0}, "broker_continuity_plugin.max_addresses: must be between 1"),
    ({"jar_file": "/a.jar", "mirror_acceptors": ["mirorr"]}, "broker_continuity_plugin.mirror_acceptors: no acceptor"),
])
def test_continuity_plugin_errors_name_the_variable(plugin, needle):
    errors = _plugin_errors(plugin)
    assert any(needle in e for e in errors), errors


def test_continuity_plugin_good_and_disabled_configs_pass_and_a_second_copy_is_refused():
    assert _plugin_errors({"jar_file": "/a.jar", "mirror_acceptors": ["mirror"], "mirror_users": ["mirror"]}) == []
    assert _plugin_errors({"enabled": False, "window_seconds": 1}) == []  # disabled: nothing is rendered
    errors = _plugin_errors({"jar_file": "/a.jar"}, [{"class_name": broker_xml.CONTINUITY_PLUGIN_CLASS}])
    assert errors == ["broker_plugins[0].class_name: io.continuity.artemis.plugin.ContinuityPlugin is configured by "
                      "broker_continuity_plugin; remove it from broker_plugins"]


@pytest.mark.parametrize(("params", "defaults", "error"), [
    ({"amqpCredits": 20000}, {"amqpLowCredits": 300}, None),
    ({}, {}, None),  # Artemis's own 1000 / 300
    ({"amqpCredits": 300}, {"amqpLowCredits": 300}, "300 must be a whole number above the mirror acceptor's "
                                                     "amqpLowCredits (300)"),
    ({"amqpCredits": "lots"}, {}, "'lots' must be a whole number"),
    ({"amqpCredits": 5000, "amqpLowCredits": 6000}, {"amqpLowCredits": 300}, "amqpLowCredits (6000)"),
])
def test_the_mirror_acceptors_duplicate_id_window_must_exceed_its_low_credit_mark(params, defaults, error):
    config = _base(mirror_acceptor={"enabled": True, "name": "mirror", "port": 61617, "params": params},
                   acceptor_default_params=defaults)
    errors = broker_xml.semantic_errors(config, "2.44.0")
    if error is None:
        assert errors == []
    else:
        assert len(errors) == 1 and errors[0].startswith("broker_mirror_id_cache_size (or broker_mirror_acceptor"
                                                         ".params.amqpCredits): ") and error in errors[0], errors


def test_a_low_credit_mark_that_is_no_number_is_named_as_such():
    config = _base(mirror_acceptor={"enabled": True, "name": "mirror", "port": 61617, "params": {}},
                   acceptor_default_params={"amqpCredits": 1000, "amqpLowCredits": "few"})
    assert broker_xml.semantic_errors(config, "2.44.0") == [
        "broker_mirror_acceptor.params.amqpLowCredits (or broker_acceptor_default_params.amqpLowCredits): 'few' is "
        "not a whole number"]
