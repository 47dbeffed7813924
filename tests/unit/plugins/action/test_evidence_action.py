"""The evidence action plugin: records written in the controller's process on a local connection, the module
run as usual anywhere else."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.playbook.play_context import PlayContext

from ansible_collections.continuity.artemis.plugins.action.evidence import ActionModule


def make(args, transport="local", check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.async_val = 0
    task.environment = []
    connection = mock.MagicMock()
    connection.transport = transport
    connection._shell.tmpdir = None
    play_context = PlayContext()
    play_context.check_mode = check_mode
    action = ActionModule(task, connection, play_context, loader=None, templar=None, shared_loader_obj=None)
    action._execute_module = mock.MagicMock(return_value={"changed": True, "written": 1, "remote": True})
    return action


def test_local_connection_writes_in_process(tmp_path):
    action = make({"evidence_dir": str(tmp_path), "run_id": "r1", "file": "run.jsonl",
                   "records": [{"kind": "run", "event": "start", "scenario": "swapover"}]})
    result = action.run(task_vars={})
    assert result["changed"] is True and result["written"] == 1
    action._execute_module.assert_not_called()
    line = json.loads((tmp_path / "r1" / "run.jsonl").read_text())
    assert (line["kind"], line["event"], line["run_id"]) == ("run", "start", "r1")


def test_invalid_record_fails_with_the_module_message_and_writes_nothing(tmp_path):
    action = make({"evidence_dir": str(tmp_path), "run_id": "r1", "records": [{"kind": "run", "event": "x"}]})
    result = action.run(task_vars={})
    assert result["failed"] is True and result["msg"].startswith("invalid evidence record: records[0] (run)")
    assert not (tmp_path / "r1").exists()


def test_bad_argument_type_is_refused_like_the_module(tmp_path):
    action = make({"evidence_dir": str(tmp_path), "run_id": "r1", "records": "not a list of dicts"})
    with pytest.raises(AnsibleActionFail, match="records"):
        action.run(task_vars={})


def test_check_mode_writes_nothing(tmp_path):
    action = make({"evidence_dir": str(tmp_path), "run_id": "r1",
                   "records": [{"kind": "run", "event": "start", "scenario": "s"}]}, check_mode=True)
    result = action.run(task_vars={})
    assert result["changed"] is False and result["written"] == 1 and not (tmp_path / "r1").exists()


def test_other_connections_run_the_module_on_the_host(tmp_path):
    args = {"evidence_dir": "/var/lib/continuity/evidence", "run_id": "r1",
            "records": [{"kind": "run", "event": "start", "scenario": "s"}]}
    action = make(args, transport="ssh")
    result = action.run(task_vars={})
    action._execute_module.assert_called_once()
    assert action._execute_module.call_args.kwargs["module_name"] == "continuity.artemis.evidence"
    assert result["remote"] is True
