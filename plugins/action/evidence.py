# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of ``continuity.artemis.evidence``.

Runbooks write their evidence on the controller (``hosts: localhost``). There the records are built and appended
in the controller's process, by the same code and argument spec as the module, instead of starting a module:
every runbook writes several records, and each module start-up costs most of a second of runbook time on a busy
machine. On any other connection (a remote host, ``delegate_to``) the module runs there as usual.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from ansible_collections.continuity.artemis.plugins.modules.evidence import ARGUMENT_SPEC


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # not used
        if self._connection.transport != "local":
            result.update(self._execute_module(module_name="continuity.artemis.evidence",
                                               module_args=self._task.args, task_vars=task_vars))
            return result
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        check_mode = bool(self._play_context.check_mode)
        try:
            out = evidence.append_records(args["evidence_dir"], args["run_id"], args["file"], args["records"],
                                          check_mode)
        except evidence.EvidenceError as exc:
            result.update(failed=True, msg="invalid evidence record: %s" % exc)
            return result
        result.update(changed=not check_mode, **out)
        return result
