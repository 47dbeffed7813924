# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Run one of the collection's modules inside the controller's task worker when the task's connection is local.

Why: the runbooks run on ``localhost`` (and, in a lab or on a controller that is also the broker host, on local
broker hosts). Starting a module there means building an AnsiballZ payload and a new Python interpreter that
imports the collection again: 0.5-0.9 s per task on an idle machine, 1.5-2.5 s on a loaded one, which is most of
a swapover runbook's time beyond its gates. The module's own code does the same work in the worker Ansible has
already forked for the task.

The module's code is the one home of its behaviour: a module exposes ``module_kwargs()`` (the keyword arguments of
its ``AnsibleModule``) and ``run_module(module)``; its ``main()`` runs ``run_module(AnsibleModule(...))`` and this
action runs ``run_module(ControllerModule(...))`` with the same argument spec, the same checks and the same
results. ``no_log`` values are removed from the result as ``AnsibleModule`` removes them.

The module runs as usual (on the target, through the connection) whenever in-process would change its meaning:
a connection that is not ``local``, ``become``, a task ``environment`` or ``async``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase

# What AnsibleModule(**kwargs) accepts that ArgumentSpecValidator understands too.
_VALIDATION_KEYS = ("mutually_exclusive", "required_together", "required_one_of", "required_if", "required_by")


class ModuleExit(BaseException):
    """Raised by ``exit_json``/``fail_json``: like ``SystemExit`` for a module, not caught by ``except Exception``."""

    def __init__(self, result):
        super(ModuleExit, self).__init__(result.get("msg", ""))
        self.result = result


class ControllerModule:
    """The part of ``AnsibleModule`` the collection's modules use, over arguments already validated."""

    def __init__(self, params, check_mode, diff, no_log_values):
        self.params = params
        self.check_mode = check_mode
        self._diff = diff
        self._no_log_values = no_log_values
        self._warnings = []

    def warn(self, warning):
        self._warnings.append(warning)

    def exit_json(self, **result):
        raise ModuleExit(self._finish(result))

    def fail_json(self, msg, **result):
        result.pop("exception", None)  # a traceback string: shown by Ansible only at -vvv, not needed here
        result.update(failed=True, msg=msg)
        raise ModuleExit(self._finish(result))

    def _finish(self, result):
        result = remove_values(result, self._no_log_values)
        if self._warnings:
            result["warnings"] = list(self._warnings)
        return result


def runs_in_process(action):
    """Whether the task can run its module in the controller's worker without changing what it does."""
    task = action._task
    return (action._connection.transport == "local" and not action._play_context.become
            and not any(task.environment or []) and not task.async_val)  # Ansible's default environment is [{}]


class InProcessModuleAction(ActionBase):
    """Base of the collection's action plugins: set ``MODULE`` to the imported module (``plugins/modules/x.py``)."""

    MODULE = None
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = True

    def module_name(self):
        return "continuity.artemis." + self.MODULE.__name__.rsplit(".", 1)[-1]

    def run(self, tmp=None, task_vars=None):
        result = super(InProcessModuleAction, self).run(tmp, task_vars)
        del tmp  # not used
        if not runs_in_process(self):
            result.update(self._execute_module(module_name=self.module_name(), module_args=self._task.args,
                                               task_vars=task_vars, wrap_async=self._task.async_val))
            return result
        kwargs = self.MODULE.module_kwargs()
        validation, args = self.validate_argument_spec(
            argument_spec=kwargs["argument_spec"], **{k: kwargs[k] for k in _VALIDATION_KEYS if k in kwargs})
        module = ControllerModule(args, bool(self._play_context.check_mode), bool(self._play_context.diff),
                                  validation._no_log_values)
        try:
            self.MODULE.run_module(module)
        except ModuleExit as done:
            result.update(done.result)
            return result
        raise AnsibleActionFail("%s ended without a result (a defect of the module)" % self.module_name())
