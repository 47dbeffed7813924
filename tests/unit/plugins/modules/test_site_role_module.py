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


def _run(jfake, tmp_path, plugin, check_mode=False, **extra):
    instance = tmp_path / "dc1"
    (instance / "etc").mkdir(parents=True, exist_ok=True)
    (instance / "etc" / "broker.xml").write_text(BROKER_XML % (PLUGIN if plugin else ""))
    # a port nothing listens on: the connection is refused at once (a down broker on a reachable host)
    args = {"url": f"http://127.0.0.1:{free_port()}/console/jolokia", "username": "admin", "password": "x",
            "timeout": 2, "broker_name": "dc1", "client_acceptors": ["artemis"], "state": "passive",
            "allow_unreachable": True, "broker_xml": str(instance / "etc" / "broker.xml"), **extra}
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


def test_a_file_edit_alone_is_not_a_fence(jfake, tmp_path):
    """Issue 16 item 1: Jolokia does not answer but a client port still accepts connections (the broker runs): the
    fence is written to broker.xml, and the module says the site is NOT fenced, naming the port."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        endpoint = f"127.0.0.1:{server.getsockname()[1]}"
        res, instance = _run(jfake, tmp_path, plugin=False, client_endpoints=[endpoint], wait_timeout=0.5)
    r = res.result
    assert not res.failed and r["persisted_role"] == "passive" and "autoStart=false" in \
        (instance / "etc" / "broker.xml").read_text()
    assert r["fenced"] is False and r["accepting_clients"] == [endpoint], r
    assert f"{endpoint} accepts client connections" in r["fence_reason"]


def test_unreachable_broker_is_fenced_when_every_client_port_refuses(jfake, tmp_path):
    endpoint = f"127.0.0.1:{free_port()}"
    res, _instance = _run(jfake, tmp_path, plugin=False, client_endpoints=[endpoint])
    r = res.result
    assert not res.failed and r["fenced"] is True and r["listeners"][0]["state"] == "refused", r
    assert r["accepting_clients"] == []


def test_unreachable_broker_without_endpoints_is_not_proven_fenced(jfake, tmp_path):
    res, _instance = _run(jfake, tmp_path, plugin=False)
    assert res.result["fenced"] is False and "no client endpoint" in res.result["fence_reason"], res.result


def test_bad_client_endpoint_is_refused_before_any_change(jfake, tmp_path):
    res, instance = _run(jfake, tmp_path, plugin=False, client_endpoints=["nohostport"])
    assert res.failed and "client_endpoints" in res.result["msg"] and "expected host:port" in res.result["msg"]
    assert "autoStart=false" not in (instance / "etc" / "broker.xml").read_text()
