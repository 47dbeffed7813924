# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Shared Jolokia connection options of the modules (documented in doc_fragments/jolokia.py) and the helpers
that build a client / site collector from module parameters. The only module_utils file here that knows
about AnsibleModule."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia
from ansible_collections.continuity.artemis.plugins.module_utils.site_state import SiteCollector

CONNECTION_KEYS = ("url", "username", "password", "broker_name", "validate_certs", "ca_path", "origin", "timeout")


def jolokia_argument_spec():
    """Connection options; keep in sync with ``doc_fragments/jolokia.py`` (validate-modules checks it)."""
    return dict(
        url=dict(type="str", required=True),
        username=dict(type="str"),
        password=dict(type="str", no_log=True),
        broker_name=dict(type="str"),
        validate_certs=dict(type="bool", default=True),
        ca_path=dict(type="path"),
        origin=dict(type="str"),
        timeout=dict(type="float", default=10.0),
    )


def peer_argument_spec():
    """The ``peer`` option: the other site, with its own connection options."""
    return dict(type="dict", options=jolokia_argument_spec())


def client_from_params(params, **overrides):
    """A :class:`jolokia.JolokiaClient` from module params (or a ``peer`` sub-dict)."""
    return jolokia.client_from_options(params, **overrides)


def collector_from_params(params, site=None, **overrides):
    """A :class:`SiteCollector` for the site the params describe; the broker name is discovered when omitted."""
    return SiteCollector(client_from_params(params, **overrides), broker_name=params.get("broker_name"), site=site)


def fail_on_error(module, exc, what=None, **extra):
    """``fail_json`` with the operator-facing message of a typed Jolokia error and its details."""
    msg = str(exc) if not what else "%s: %s" % (what, exc)
    details = exc.to_dict() if isinstance(exc, jolokia.JolokiaError) else {"class": type(exc).__name__}
    module.fail_json(msg=msg, error=details, **extra)
