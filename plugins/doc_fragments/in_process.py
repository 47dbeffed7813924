# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The `action` attribute of the modules that have an in-process action plugin (plugins/plugin_utils/in_process.py).
    DOCUMENTATION = r'''
attributes:
  action:
    description:
      - On a C(local) connection (the runbooks' C(localhost) tasks; a broker host that is the controller) the module's
        code runs in the controller's task worker, with the same argument spec, checks and results, instead of
        starting a module process (0.5-2.5 s each). It runs as a module on the target with any other connection,
        with C(become), a task C(environment) or C(async).
    support: full
'''
