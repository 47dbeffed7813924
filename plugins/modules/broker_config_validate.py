#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: broker_config_validate
short_description: Check a rendered Artemis broker.xml and the variables behind it before any host changes
description:
  - "Runs on the controller (C(delegate_to: localhost)). Validates the rendered C(broker.xml) against the XML
    schema of the target Artemis version, taken from the distribution archive (C(<top>/schema/) or
    C(lib/artemis-server-<version>.jar)) or from a schema directory."
  - Runs semantic checks the schema cannot express on the role's structured variables (unique acceptor names and
    ports, unique mirror connection names, C(retry-interval) > 0, C(reconnect-attempts) != 0, roles that exist,
    features the target version lacks). Each error names the variable, for example
    C(broker_acceptors[1].port) C(port 61616 is already used by broker_acceptors[0]).
  - With I(previous_xml) (the file currently on the host) it reports whether the change needs a broker restart
    or is applied by the broker's configuration reload.
  - Never changes anything; supports check mode.
version_added: 0.1.0
author:
  - continuity.artemis contributors (@continuity-artemis)
extends_documentation_fragment:
  - continuity.artemis.in_process
options:
  xml:
    description: The rendered broker.xml.
    type: str
    required: true
  version:
    description: Target Artemis version, for example C(2.44.0) or C(2.44.0-lab).
    type: str
    required: true
  config:
    description:
      - The structured configuration without secrets (see the broker role's C(broker__validate_config) fact),
        with the keys C(name), C(acceptors), C(mirror_acceptor), C(http_port), C(connections), C(users), C(extra_users),
        C(admin_user), C(admin_role), C(security_settings), C(extra_security_settings), C(addresses),
        C(ha_policy), C(plugins), C(continuity_plugin), C(mirror_tuning), C(management_roles).
    type: dict
    default: {}
  schema_dir:
    description: Directory holding C(artemis-server.xsd) (or C(artemis-configuration.xsd)) of the target version.
    type: path
  archive:
    description: Artemis distribution archive to take the schema from when I(schema_dir) is not given.
    type: path
  previous_xml:
    description: The broker.xml currently on the host, to decide between restart and reload.
    type: str
requirements:
  - lxml
notes:
  - Both I(xml) and I(previous_xml) are kept out of logs because they hold (masked) connection passwords.
"""

EXAMPLES = r"""
- name: Validate broker.xml on the controller
  continuity.artemis.broker_config_validate:
    xml: "{{ lookup('ansible.builtin.template', 'broker.xml.j2') }}"
    version: 2.44.0
    archive: /srv/cache/apache-artemis-2.44.0-bin.tar.gz
    config: "{{ broker__validate_config }}"
  delegate_to: localhost
"""

RETURN = r"""
errors:
  description: Every problem found; empty on success.
  returned: always
  type: list
  elements: str
restart_required:
  description: True when the change from I(previous_xml) cannot be applied by a configuration reload.
  returned: always
  type: bool
restart_reasons:
  description: Why a restart is required.
  returned: always
  type: list
  elements: str
schema_checked:
  description: Whether a schema was found and used.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import lxml  # noqa: F401  pylint: disable=unused-import  # only probed: module_utils.broker_xml uses it

    HAS_LXML = True
except ImportError:
    HAS_LXML = False

from ansible_collections.continuity.artemis.plugins.module_utils import broker_xml


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    return dict(
        argument_spec=dict(
            xml=dict(type="str", required=True, no_log=True),
            version=dict(type="str", required=True),
            config=dict(type="dict", default={}),
            schema_dir=dict(type="path"),
            archive=dict(type="path"),
            previous_xml=dict(type="str", no_log=True),
        ),
        required_one_of=[("schema_dir", "archive")],
        supports_check_mode=True,
    )


def run_module(module):
    if not HAS_LXML:
        module.fail_json(msg=missing_required_lib("lxml"))
    p = module.params
    result = dict(changed=False, errors=[], restart_required=False, restart_reasons=[], schema_checked=False)

    errors = broker_xml.semantic_errors(p["config"], p["version"])
    try:
        with broker_xml.SchemaDir(schema_dir=p["schema_dir"], archive=p["archive"]) as schema_dir:
            schema = broker_xml.schema_errors(p["xml"], schema_dir)
            result["schema_checked"] = True
    except (ValueError, OSError) as exc:
        schema = ["schema of Artemis %s not available: %s" % (p["version"], exc)]
    errors += ["%s (schema of Artemis %s)" % (e, p["version"]) for e in schema]
    result["errors"] = errors
    if errors:
        module.fail_json(msg="broker configuration rejected before any change:\n- " + "\n- ".join(errors), **result)

    reasons = broker_xml.restart_reasons(p["previous_xml"], p["xml"], p["version"])
    result["restart_reasons"] = reasons
    result["restart_required"] = bool(reasons)
    module.exit_json(**result)


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
