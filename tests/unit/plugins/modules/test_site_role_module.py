"""site_role on a broker that cannot be reached: the fence goes to the host's files, the continuity plugin's
state file included, so the broker comes back passive on both counts."""

from __future__ import annotations

import socket

from ansible_collections.continuity.artemis.plugins.modules import site_role


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

BROKER_XML = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
      <journal-directory>data/journal</journal-directory>
      <acceptors>
         <acceptor name="artemis">tcp://0.0.0.0:61616?protocols=CORE,AMQP</acceptor>
         <acceptor name="mirror">tcp://0.0.0.0:61617?protocols=AMQP</acceptor>
      </acceptors>
%s
</core></configuration>
"""
PLUGIN = """      <broker-plugins>
         <broker-plugin class-name="io.continuity.artemis.plugin.ContinuityPlugin">
            <property key="initial-role" value="active"/>
            <property key="mirror-users" value="mirror"/>
         </broker-plugin>
      </broker-plugins>"""


def _run(jfake, tmp_path, plugin, check_mode=False):
    instance = tmp_path / "dc1"
    (instance / "etc").mkdir(parents=True, exist_ok=True)
    (instance / "etc" / "broker.xml").write_text(BROKER_XML % (PLUGIN if plugin else ""))
    # a port nothing listens on: the connection is refused at once (a down broker on a reachable host)
    args = {"url": f"http://127.0.0.1:{free_port()}/console/jolokia", "username": "admin", "password": "x",
            "timeout": 2, "broker_name": "dc1", "client_acceptors": ["artemis"], "state": "passive",
            "allow_unreachable": True, "broker_xml": str(instance / "etc" / "broker.xml")}
    return jfake.run_module(site_role, args, check_mode=check_mode), instance


def test_unreachable_broker_gets_its_plugin_state_file_fenced(jfake, tmp_path):
    res, instance = _run(jfake, tmp_path, plugin=True, check_mode=True)
    assert not res.failed and res.result["changed"] is True and res.result["plugin_role"] == "passive"
    assert not (instance / "data" / "continuity-site-role").exists()  # check mode writes nothing
    res, instance = _run(jfake, tmp_path, plugin=True)
    r = res.result
    assert not res.failed and r["role"] == "unreachable" and r["persisted_role"] == "passive", r
    assert r["plugin_state_file"] == str(instance / "data" / "continuity-site-role")
    assert "role=passive" in (instance / "data" / "continuity-site-role").read_text()
    assert "autoStart=false" in (instance / "etc" / "broker.xml").read_text()


def test_unreachable_broker_without_the_plugin_is_fenced_as_before(jfake, tmp_path):
    res, instance = _run(jfake, tmp_path, plugin=False)
    r = res.result
    assert not res.failed and r["changed"] is True and r["plugin_role"] is None and "plugin_state_file" not in r
    assert not (instance / "data").exists()
