#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: acceptor
short_description: Start or stop ActiveMQ Artemis acceptors (fence clients)
description:
  - Starts or stops the acceptors named in O(name) through their acceptor MBeans (C(start()), C(stop())).
  - Stopping a client acceptor closes its port; connected clients are dropped within milliseconds and new
    connections are refused. This fences a site's clients while a separate mirror acceptor stays up.
  - Stopping the acceptor a peer's mirror connects through also drops that mirror (the peer then retries and its
    backlog grows); give the mirror its own acceptor. The module warns when no acceptor would stay started.
  - Idempotent; the state of every acceptor is read in one request and only acceptors in the wrong state are
    changed, all in one request.
author:
  - continuity.artemis contributors (@continuity-artemis)
extends_documentation_fragment:
  - continuity.artemis.in_process
  - continuity.artemis.jolokia
  - continuity.artemis.attributes
  - continuity.artemis.attributes.actiongroup_jolokia
options:
  name:
    description: Acceptor name(s) (the C(name) of the C(acceptor) element in C(broker.xml)).
    type: list
    elements: str
    required: true
    aliases: [names]
  state:
    description: Desired state.
    type: str
    choices: [started, stopped]
    default: started
'''

EXAMPLES = r'''
- name: Fence dc1's clients, keep the mirror acceptor up
  continuity.artemis.acceptor:
    url: http://dc1.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    name: [artemis, amqp]
    state: stopped

- name: Serve clients on dc2
  continuity.artemis.acceptor:
    url: http://dc2.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    name: [artemis, amqp]
    state: started
'''

RETURN = r'''
acceptors:
  description: Every acceptor of the broker with C(started) after the module ran (as found in check mode).
  returned: success
  type: dict
  sample: {amqp: {started: false}, artemis: {started: false}, mirror: {started: true}}
changed_acceptors:
  description: Acceptors whose state was (or in check mode would be) changed.
  returned: success
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia as j
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on
from ansible_collections.continuity.artemis.plugins.module_utils import switch
from ansible_collections.continuity.artemis.plugins.module_utils.jolokia_args import (
    client_from_params,
    fail_on_error,
    jolokia_argument_spec,
)


def read_acceptors(client, broker):
    """All acceptors of the broker with ``started`` (one wildcard read)."""
    return {name: {"started": bool(started)} for name, started in switch.acceptors_started(client, broker).items()}


def _states(acceptors, names):
    return {n: ("started" if acceptors[n]["started"] else "stopped") for n in names}


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    spec = jolokia_argument_spec()
    spec.update(name=dict(type="list", elements="str", required=True, aliases=["names"]),
                state=dict(type="str", choices=["started", "stopped"], default="started"))
    return dict(argument_spec=spec, supports_check_mode=True)


def run_module(module):
    p = module.params
    want = p["state"] == "started"
    names = list(dict.fromkeys(p["name"]))
    try:
        client = client_from_params(p)
        broker = client.discover_broker(p["broker_name"]) if p["broker_name"] is None else p["broker_name"]
        try:
            before = read_acceptors(client, broker)
        except j.NotFound:
            before = {}
        missing = [n for n in names if n not in before]
        if missing:
            module.fail_json(msg="Acceptor(s) %s do not exist on broker %s; existing: %s" % (
                ", ".join(missing), broker, ", ".join(sorted(before)) or "none"))
        to_change = [n for n in names if before[n]["started"] != want]
        after = {n: dict(v) for n, v in before.items()}
        if to_change and not module.check_mode:
            results = client.bulk([j.exec_request(on.acceptor(broker, n), "start()" if want else "stop()")
                                   for n in to_change])
            errors = [r for r in results if not r.ok]
            after = read_acceptors(client, broker)
            if errors:
                first = errors[0]
                raise j.error_from_item(first.request, first.status, first.error_type, first.error)
        else:
            for n in to_change:
                after[n]["started"] = want
    except j.JolokiaError as exc:
        fail_on_error(module, exc)
    wrong = [n for n in names if after[n]["started"] != want]
    if wrong:
        module.fail_json(msg="Acceptor(s) %s did not reach state %s" % (", ".join(wrong), p["state"]),
                         acceptors=after, changed=bool(to_change))
    if not want and not any(v["started"] for v in after.values()):
        module.warn("No acceptor of broker %s is started: the peer's mirror cannot connect to this broker. Give "
                    "the mirror its own acceptor and stop only the client acceptors." % broker)
    result = dict(changed=bool(to_change), acceptors=after, changed_acceptors=to_change)
    if module._diff:
        result["diff"] = {"before": _states(before, names), "after": _states(after, names)}
    module.exit_json(**result)


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
