# Fault injection for tests/integration/test_faults*.py: the controller dies (SIGKILL of ansible-playbook and every
# process under it) when a given task starts, or a URL is POSTed to (a lab WAN link's /cut: a site's Jolokia goes
# down) when a given task starts, before that task runs. Not part of the collection.
from __future__ import annotations

import json
import os
import signal
import urllib.request

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: kill_at_task
type: aggregate
short_description: kill the controller when a task starts (test fault injection)
description:
  - KILL_AT_TASK names the task; KILL_AT_OCCURRENCE (default 1) which start of it. Every task start is appended as
    a JSON line to KILL_TASK_LOG when set (task, occurrence, action), and each host result after it (status, and
    the changed flag for a reader of the log), so a test can list the task boundaries of a runbook and tell which
    tasks were skipped or failed.
  - FAULT_AT_TASK / FAULT_AT_OCCURRENCE / FAULT_POST_URL - at that start of that task, POST {} to the URL (for example
    a WAN link's control endpoint /cut) and wait for its answer before the task runs.
"""


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc). Ansible's workers call setsid(), so a process group kill misses
    them: a worker would go on running its module (a whole switch) after the controller died."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(pid: int) -> None:
    """SIGSTOP the tree first (nothing forks or finishes meanwhile), then SIGKILL every process of it; the calling
    process, when it is in the tree (the callback), is stopped by nothing and killed last."""
    me = os.getpid()
    tree = [p for p in [pid, *descendants(pid)] if p != me]
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for p in tree:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    if me == pid:
        os.kill(me, signal.SIGKILL)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kill_at_task"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.target = os.environ.get("KILL_AT_TASK") or None
        self.occurrence = int(os.environ.get("KILL_AT_OCCURRENCE") or 1)
        self.log = os.environ.get("KILL_TASK_LOG") or None
        self.fault = os.environ.get("FAULT_AT_TASK") or None
        self.fault_occurrence = int(os.environ.get("FAULT_AT_OCCURRENCE") or 1)
        self.fault_url = os.environ.get("FAULT_POST_URL") or None
        self.seen: dict[str, int] = {}
        self.current: dict | None = None

    def _write(self, record: dict) -> None:
        if self.log:
            with open(self.log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")

    def _outcome(self, result, status: str) -> None:
        """One line per host result of the current task: its status and whether it reported a change."""
        if self.current is not None:
            self._write({**self.current, "status": status, "changed": bool(result._result.get("changed"))})

    def v2_playbook_on_task_start(self, task, is_conditional):
        name = task.get_name().strip()
        self.seen[name] = self.seen.get(name, 0) + 1
        self.current = {"task": name, "occurrence": self.seen[name]}
        self._write({**self.current, "action": task.action})
        if name == self.fault and self.seen[name] == self.fault_occurrence and self.fault_url:
            req = urllib.request.Request(self.fault_url, data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                resp.read()
        if name == self.target and self.seen[name] == self.occurrence:
            kill_tree(os.getpid())

    v2_playbook_on_handler_task_start = v2_playbook_on_task_start

    def v2_runner_on_ok(self, result):
        self._outcome(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._outcome(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._outcome(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._outcome(result, "unreachable")
