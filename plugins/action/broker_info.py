# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin of ``continuity.artemis.broker_info``: on a local connection the module\'s code runs in the
controller\'s task worker (plugins/plugin_utils/in_process.py); elsewhere the module runs on the target."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.continuity.artemis.plugins.modules import broker_info as module
from ansible_collections.continuity.artemis.plugins.plugin_utils.in_process import InProcessModuleAction


class ActionModule(InProcessModuleAction):
    MODULE = module
