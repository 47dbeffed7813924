"""The broker_config_validate module: rejects with every error named, reports restart vs reload, never
prints the XML (it holds masked passwords)."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.continuity.artemis.plugins.modules import broker_config_validate
from continuity_lab import schemas

SCHEMA = schemas.path("2.44.0")

GOOD = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><name>dc1</name>
<broker-connections><amqp-connection uri="tcp://b:1" name="DC2" user="mirror" password="ENC(-41e444c3ed07d6dd)">
<mirror sync="{sync}"/></amqp-connection></broker-connections>
<acceptors><acceptor name="artemis">tcp://0.0.0.0:61616</acceptor></acceptors></core></configuration>"""
CONFIG = {"name": "dc1", "acceptors": [{"name": "artemis", "port": 61616}], "admin_user": "admin", "admin_role": "amq"}


def _run(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        broker_config_validate.main()
    out = capsys.readouterr().out
    return exc.value.code, json.loads(out), out


def test_valid_config_passes_and_reports_a_mirror_change_as_restart(capsys):
    code, result, out = _run(
        capsys,
        xml=GOOD.format(sync="true"),
        previous_xml=GOOD.format(sync="false"),
        version="2.44.0",
        config=CONFIG,
        schema_dir=str(SCHEMA),
    )
    assert code == 0, result
    assert result["schema_checked"] is True and result["errors"] == []
    assert result["restart_required"] is True
    assert result["restart_reasons"] == ["mirror connection DC2 changed (a reload cannot change a mirror)"]
    assert "ENC(-41e444c3ed07d6dd)" not in out  # no_log options are not echoed back


def test_schema_and_semantic_errors_fail_together(capsys):
    bad = GOOD.format(sync="maybe")
    config = dict(CONFIG, connections=[{"name": "DC2", "uri": "tcp://b:1", "reconnect_attempts": 0}])
    code, result, _ = _run(capsys, xml=bad, version="2.44.0", config=config, schema_dir=str(SCHEMA))
    assert code == 1
    assert result["msg"].startswith("broker configuration rejected before any change")
    assert any(e.startswith("broker_connections[0].reconnect_attempts") for e in result["errors"])
    assert any("sync" in e and "(schema of Artemis 2.44.0)" in e for e in result["errors"])


def test_missing_schema_is_an_error_not_a_silent_pass(capsys, tmp_path):
    code, result, _ = _run(
        capsys, xml=GOOD.format(sync="false"), version="2.44.0", config=CONFIG, schema_dir=str(tmp_path)
    )
    assert code == 1
    assert any("schema of Artemis 2.44.0 not available" in e for e in result["errors"])


def test_documentation_parses_and_matches_the_argument_spec():
    import yaml

    doc = yaml.safe_load(broker_config_validate.DOCUMENTATION)
    yaml.safe_load(broker_config_validate.EXAMPLES)
    yaml.safe_load(broker_config_validate.RETURN)
    assert set(doc["options"]) == {"xml", "version", "config", "schema_dir", "archive", "previous_xml"}
