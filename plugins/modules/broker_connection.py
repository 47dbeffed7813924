#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: broker_connection
short_description: Start or stop an ActiveMQ Artemis broker connection (for example an AMQP mirror)
description:
  - Starts or stops the outgoing broker connection O(name) of a broker.
  - Uses the broker-connection MBean's C(start()) and C(stop()) on Artemis 2.39 and later, and the broker's
    C(startBrokerConnection) and C(stopBrokerConnection) before.
  - Idempotent; the current state is read first (C(Started)), nothing is executed when it already matches.
  - Stopping a mirror connection does NOT stop event capture; the mirror stays installed and its
    C($ACTIVEMQ_ARTEMIS_MIRROR_<name>) queue keeps growing until the connection is started again.
  - On a C(sync) mirror, a stopped connection makes the broker hold every client operation that needs the
    mirror; stop it only as part of a failover that accepts that.
author:
  - continuity.artemis contributors (@continuity-artemis)
extends_documentation_fragment:
  - continuity.artemis.in_process
  - continuity.artemis.jolokia
  - continuity.artemis.attributes
  - continuity.artemis.attributes.actiongroup_jolokia
options:
  name:
    description: Name of the broker connection (the C(name) of the C(amqp-connection) in C(broker.xml)).
    type: str
    required: true
  state:
    description: Desired state.
    type: str
    choices: [started, stopped]
    default: started
attributes:
  check_mode:
    description: Reads the state and reports what would change without executing anything.
    support: full
  diff_mode:
    description: Returns the state before and after.
    support: full
seealso:
  - module: continuity.artemis.mirror_info
'''

EXAMPLES = r'''
- name: Stop dc1's mirror towards dc2
  continuity.artemis.broker_connection:
    url: http://dc1.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    name: DC2
    state: stopped

- name: Start it again (no change when already started)
  continuity.artemis.broker_connection:
    url: http://dc1.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    name: DC2
'''

RETURN = r'''
connection:
  description: The broker connection after the module ran (or as found in check mode).
  returned: success
  type: dict
  contains:
    name:
      description: "Connection name."
      type: str
    started:
      description: "Started."
      type: bool
    connected:
      description: "Connected to the peer (null before 2.39)."
      type: bool
    uri:
      description: "URI (null before 2.39)."
      type: str
  sample: {name: DC2, started: false, connected: false, uri: tcp://dc2:5673}
method:
  description: How the state is read and changed, V(mbean) (2.39+) or V(broker_operation).
  returned: success
  type: str
version:
  description: Artemis version of the broker.
  returned: success
  type: str
'''

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia as j
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on
from ansible_collections.continuity.artemis.plugins.module_utils.jolokia_args import (
    client_from_params,
    fail_on_error,
    jolokia_argument_spec,
)


def read_state(client, broker, name):
    """One bulk read: version, broker-connection list, the connection MBean (absent before 2.39)."""
    res = client.bulk([
        j.read_request(on.broker(broker), "Version"),
        j.exec_request(on.broker(broker), "listBrokerConnections()"),
        j.read_request(on.broker_connection(broker, name), ["Name", "Started", "Connected", "Uri"]),
    ])
    version = client.value_of(res[0])
    rows = client.value_of(res[1])
    rows = json.loads(rows) if isinstance(rows, str) else (rows or [])
    names = [r.get("name") for r in rows]
    row = next((r for r in rows if r.get("name") == name), None)
    if res[2].ok:
        v = res[2].value
        return version, names, {"name": name, "started": v.get("Started"), "connected": v.get("Connected"),
                                "uri": v.get("Uri")}, "mbean"
    if row is None:
        return version, names, None, None
    return version, names, {"name": name, "started": row.get("started"), "connected": row.get("connected"),
                            "uri": row.get("uri")}, "broker_operation"


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    spec = jolokia_argument_spec()
    spec.update(name=dict(type="str", required=True),
                state=dict(type="str", choices=["started", "stopped"], default="started"))
    return dict(argument_spec=spec, supports_check_mode=True)


def run_module(module):
    p = module.params
    name, want_started = p["name"], p["state"] == "started"
    try:
        client = client_from_params(p)
        broker = client.discover_broker(p["broker_name"]) if p["broker_name"] is None else p["broker_name"]
        version, names, before, method = read_state(client, broker, name)
        if before is None:
            module.fail_json(msg="Broker connection %r does not exist on broker %s; existing: %s" % (
                name, broker, ", ".join(n for n in names if n) or "none"))
        changed = bool(before["started"]) != want_started
        after = dict(before)
        if changed and not module.check_mode:
            if method == "mbean":
                client.exec(on.broker_connection(broker, name), "start()" if want_started else "stop()")
            else:
                client.exec(on.broker(broker), "startBrokerConnection" if want_started else "stopBrokerConnection",
                            name)
            _v, _n, after, _m = read_state(client, broker, name)
            if bool(after["started"]) != want_started:
                module.fail_json(msg="Broker connection %s is still %s after the %s operation" % (
                    name, "started" if after["started"] else "stopped", p["state"][:-2]),
                    connection=after, changed=True)
        elif changed:
            after["started"] = want_started
            if not want_started:
                after["connected"] = False
    except j.JolokiaError as exc:
        fail_on_error(module, exc)
    result = dict(changed=changed, connection=after, method=method, version=version)
    if module._diff:
        result["diff"] = {"before": {"name": name, "state": "started" if before["started"] else "stopped"},
                          "after": {"name": name, "state": "started" if after["started"] else "stopped"}}
    module.exit_json(**result)


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
