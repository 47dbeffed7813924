# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attributes the modules share, written once (as community.general's attributes fragment does). A module
    # that differs sets its own entry, which wins over the fragment's.

    # Modules that change broker state through Jolokia.
    DOCUMENTATION = r'''
attributes:
  check_mode:
    description: Reads the state and reports what would change without executing anything.
    support: full
  diff_mode:
    description: Returns the states before and after.
    support: full
'''

    # Read-only modules.
    INFO_MODULE = r'''
attributes:
  check_mode:
    description: Read-only; runs the same in check mode.
    support: full
  diff_mode:
    description: Read-only; nothing to diff.
    support: N/A
'''

    # Members of the action group continuity.artemis.jolokia (meta/runtime.yml).
    ACTIONGROUP_JOLOKIA = r'''
attributes:
  action_group:
    description: Use C(group/continuity.artemis.jolokia) in C(module_defaults) to set the connection options.
    support: full
    membership:
      - continuity.artemis.jolokia
'''
