"""plugins/plugin_utils/in_process.py: the collection's modules run in the controller's task worker on a local
connection, with the module's own argument spec, checks and results; as modules everywhere else."""

from __future__ import annotations

import importlib
import socket
import types
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.playbook.play_context import PlayContext

from ansible_collections.continuity.artemis.plugins.plugin_utils.in_process import InProcessModuleAction

ACTIONS = ("acceptor", "amqp_probe", "broker_config_validate", "broker_connection", "broker_info", "destination",
           "evidence", "mirror_info", "mirror_wait", "site_role", "swapover")


def make(action_class, args, transport="local", check_mode=False, become=False, environment=None, async_val=0):
    task = mock.MagicMock()
    task.args = args
    task.async_val = async_val
    task.environment = environment or []
    connection = mock.MagicMock()
    connection.transport = transport
    connection._shell.tmpdir = None
    play_context = PlayContext()
    play_context.check_mode = check_mode
    play_context.become = become
    action = action_class(task, connection, play_context, loader=None, templar=None, shared_loader_obj=None)
    action._execute_module = mock.MagicMock(return_value={"changed": False, "remote": True})
    return action


def fake_module(run):
    """A module file's two entry points around ``run(module)``: one str option, one secret."""
    mod = types.ModuleType("ansible_collections.continuity.artemis.plugins.modules.fake")
    mod.module_kwargs = lambda: dict(argument_spec=dict(name=dict(type="str", required=True),
                                                        secret=dict(type="str", no_log=True)),
                                     supports_check_mode=True)
    mod.run_module = run
    return mod


def action_for(run):
    return type("Fake", (InProcessModuleAction,), {"MODULE": fake_module(run)})


@pytest.mark.parametrize("name", ACTIONS)
def test_each_action_runs_its_module_the_same_way(name):
    action_module = importlib.import_module("ansible_collections.continuity.artemis.plugins.action." + name)
    module = importlib.import_module("ansible_collections.continuity.artemis.plugins.modules." + name)
    assert action_module.ActionModule.MODULE is module
    assert callable(module.run_module) and "argument_spec" in module.module_kwargs()


@pytest.mark.parametrize("kind", ["ssh", "become", "environment", "async"])
def test_the_module_runs_on_the_target_when_in_process_would_change_its_meaning(kind):
    from ansible_collections.continuity.artemis.plugins.action.site_role import ActionModule

    opts = {"ssh": dict(transport="ssh"), "become": dict(become=True),
            "environment": dict(environment=[{"HTTPS_PROXY": "http://proxy:3128"}]), "async": dict(async_val=30)}[kind]
    action = make(ActionModule, {"url": "http://127.0.0.1:1/console/jolokia", "client_acceptors": ["artemis"]}, **opts)
    result = action.run(task_vars={})
    assert result["remote"] is True
    assert action._execute_module.call_args.kwargs["module_name"] == "continuity.artemis.site_role"


def test_site_role_in_process_reports_an_unreachable_broker_without_starting_a_module():
    from ansible_collections.continuity.artemis.plugins.action.site_role import ActionModule

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    action = make(ActionModule, {"url": f"http://127.0.0.1:{port}/console/jolokia", "username": "admin",
                                 "password": "s3cret-pw", "client_acceptors": ["artemis"],
                                 "allow_unreachable": True})
    result = action.run(task_vars={})
    action._execute_module.assert_not_called()
    assert result["role"] == "unreachable" and result["reachable"] is False and not result.get("failed")
    assert "s3cret-pw" not in repr(result)


def test_site_role_in_process_refuses_a_bad_choice_with_the_module_message():
    from ansible_collections.continuity.artemis.plugins.action.site_role import ActionModule

    action = make(ActionModule, {"url": "http://127.0.0.1:1/console/jolokia", "client_acceptors": ["artemis"],
                                 "state": "fenced"})
    with pytest.raises(AnsibleActionFail, match=r"state.*active, passive"):
        action.run(task_vars={})


def test_fail_json_is_a_failed_result_with_the_message_and_no_secret():
    def run(module):
        try:
            module.fail_json(msg=f"login as {module.params['name']} failed with {module.params['secret']}",
                             detail=module.params["secret"])
        except Exception:  # a module's own error handling must not swallow the exit
            raise AssertionError("fail_json was caught by except Exception") from None

    result = make(action_for(run), {"name": "admin", "secret": "hunter2-pw"}).run(task_vars={})
    assert result["failed"] is True and result["msg"].startswith("login as admin failed with ")
    assert "hunter2-pw" not in repr(result)


def test_exit_json_carries_the_warnings_and_check_mode_reaches_the_module():
    seen = {}

    def run(module):
        seen["check_mode"] = module.check_mode
        module.warn("guard and acceptors disagree")
        module.exit_json(changed=False, role="passive")

    result = make(action_for(run), {"name": "dc1"}, check_mode=True).run(task_vars={})
    assert seen["check_mode"] is True
    assert result["role"] == "passive" and result["warnings"] == ["guard and acceptors disagree"]


def test_a_module_that_returns_without_exit_is_reported_as_a_defect():
    with pytest.raises(AnsibleActionFail, match="ended without a result"):
        make(action_for(lambda module: None), {"name": "dc1"}).run(task_vars={})


def test_every_module_has_its_in_process_action():
    from pathlib import Path

    folder = Path(__file__).resolve().parents[4] / "plugins" / "modules"
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    assert modules == set(ACTIONS)


BROKER_XML = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><acceptors>
<acceptor name="artemis">tcp://127.0.0.1:61616?protocols=CORE,AMQP</acceptor>
<acceptor name="mirror">tcp://127.0.0.1:61617?protocols=AMQP</acceptor>
</acceptors></core></configuration>
"""


def test_site_role_persist_only_writes_the_fence_of_a_broker_that_is_down(tmp_path):
    """The other broker of an HA pair (docs/ha.md): its file follows the site's role, nothing over Jolokia (the
    URL answers nothing here)."""
    from ansible_collections.continuity.artemis.plugins.action.site_role import ActionModule

    xml = tmp_path / "broker.xml"
    xml.write_text(BROKER_XML)
    args = {"url": "http://127.0.0.1:1/console/jolokia", "client_acceptors": ["artemis"], "broker_xml": str(xml),
            "state": "passive", "persist_only": True}
    result = make(ActionModule, args).run(task_vars={})
    assert result["changed"] is True and result["persisted_role"] == "passive" and not result.get("failed")
    assert "autoStart=false" in xml.read_text() and "61617?protocols=AMQP<" in xml.read_text()
    again = make(ActionModule, {**args, "state": "active"}).run(task_vars={})
    assert again["changed"] is True and again["persisted_role"] == "active"


def test_site_role_persist_only_needs_a_file_and_a_role():
    from ansible_collections.continuity.artemis.plugins.action.site_role import ActionModule

    result = make(ActionModule, {"url": "http://127.0.0.1:1/console/jolokia", "client_acceptors": ["artemis"],
                                 "persist_only": True}).run(task_vars={})
    assert result["failed"] is True
    assert "persist_only needs broker_xml and state=active or state=passive" in result["msg"]
