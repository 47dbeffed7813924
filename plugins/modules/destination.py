#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: destination
short_description: Pause, resume, block or unblock ActiveMQ Artemis queues and addresses
description:
  - Selects queues or addresses by O(names), O(prefix) and/or O(regex) (the union of the selectors) and brings them
    to O(state).
  - V(paused) and V(resumed) use C(pause(boolean)) and C(resume()) on queues or addresses. A paused queue keeps
    accepting messages but delivers none. They are idempotent - the C(Paused) (and for queues C(PersistedPause),
    readable from Artemis 2.41; before that RV(destinations) shows C(persisted_pause=null) and a queue that is
    already paused is left as it is)
    attribute of every selected destination is read in one request and only destinations in the wrong state are
    changed, all in one request.
  - V(blocked) and V(unblocked) apply to addresses only (C(block()) stops producers, C(unblock()) lets them send
    again). Artemis offers no attribute to read the blocked state back - C(block()) changes no attribute of the
    address MBean. The module therefore executes the operation on every selected address every time, reports
    C(changed=true) for each of them (it cannot prove otherwise) and lists them in RV(unverified). Prefer stopping
    client acceptors (M(continuity.artemis.acceptor)) or pausing when a verifiable state is needed.
  - Internal queues and addresses (including the mirror's C($ACTIVEMQ_ARTEMIS_MIRROR_*)) are never selected unless
    O(include_internal=true); pausing a mirror queue stops the mirror.
author:
  - continuity.artemis contributors (@continuity-artemis)
extends_documentation_fragment:
  - continuity.artemis.in_process
  - continuity.artemis.jolokia
  - continuity.artemis.attributes
  - continuity.artemis.attributes.actiongroup_jolokia
options:
  type:
    description: Select queues or addresses.
    type: str
    choices: [queue, address]
    default: queue
  names:
    description: Exact names to select. A name that does not exist fails the module.
    type: list
    elements: str
  prefix:
    description: Select every destination whose name starts with this.
    type: str
  regex:
    description: Select every destination whose name matches this regular expression (Python C(re.search)).
    type: str
  state:
    description: Desired state. V(blocked)/V(unblocked) need O(type=address).
    type: str
    choices: [paused, resumed, blocked, unblocked]
    required: true
  persist:
    description:
      - With O(state=paused), persist the pause in the journal so it survives a broker restart.
      - A queue paused without persistence is paused again with persistence (a change); a persisted pause is kept
        when O(persist=false).
    type: bool
    default: false
  include_internal:
    description: Allow internal and mirror queues/addresses to be selected.
    type: bool
    default: false
  allow_empty:
    description: Succeed without change when the selectors match nothing (default is to fail).
    type: bool
    default: false
attributes:
  check_mode:
    description: Reads the state and reports what would change without executing anything.
    support: full
  diff_mode:
    description: Returns the states before and after (block state reported as V(unknown) before).
    support: full
'''

EXAMPLES = r'''
- name: Pause every orders queue on the passive site, surviving restarts
  continuity.artemis.destination:
    url: http://dc2.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    prefix: orders.
    state: paused
    persist: true

- name: Resume two queues
  continuity.artemis.destination:
    url: http://dc2.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    names: [orders.eu, orders.us]
    state: resumed

- name: Block producers on the invoice addresses (executed every time, not readable back)
  continuity.artemis.destination:
    url: http://dc1.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    type: address
    regex: '^invoices(\.|$)'
    state: blocked
'''

RETURN = r'''
selected:
  description: Names the selectors matched.
  returned: success
  type: list
  elements: str
changed_destinations:
  description: Destinations changed (or in check mode to be changed).
  returned: success
  type: list
  elements: str
unverified:
  description: Destinations whose state cannot be read back (block/unblock of addresses).
  returned: success
  type: list
  elements: str
destinations:
  description: Per selected destination, C(before) and C(after) state (C(paused), C(persisted_pause)).
  returned: success
  type: dict
'''

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia as j
from ansible_collections.continuity.artemis.plugins.module_utils import lag
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on
from ansible_collections.continuity.artemis.plugins.module_utils.jolokia_args import (
    client_from_params,
    fail_on_error,
    jolokia_argument_spec,
)
from ansible_collections.continuity.artemis.plugins.module_utils.site_state import select_names


def read_destinations(client, broker, kind):
    """name -> {"mbean", "paused", "persisted_pause", "internal"} for every queue or address (one request)."""
    if kind == "queue":
        value = _pattern(client, on.all_queues(broker), ["Paused", "PersistedPause", "InternalQueue", "Temporary"])
        key = "queue"
    else:
        value = _pattern(client, on.all_addresses(broker), ["Paused", "Internal", "Temporary"])
        key = "address"
    out = {}
    for mbean, attrs in value.items():
        _domain, props = on.parse(mbean)
        name = props[key]
        internal = lag.is_excluded_queue(name, attrs.get("InternalQueue") or attrs.get("Internal"),
                                         attrs.get("Temporary"))
        out[name] = {"mbean": mbean, "paused": attrs.get("Paused"), "persisted_pause": attrs.get("PersistedPause"),
                     "internal": internal}
    return out


def _pattern(client, pattern, attrs):
    try:
        return client.read(pattern, attrs) or {}
    except j.NotFound:
        return {}


def _state(entry, kind, state):
    if state in ("blocked", "unblocked"):
        return {"blocked": "unknown"}
    out = {"paused": entry["paused"]}
    if kind == "queue":
        out["persisted_pause"] = entry["persisted_pause"]
    return out


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    spec = jolokia_argument_spec()
    spec.update(
        type=dict(type="str", choices=["queue", "address"], default="queue"),
        names=dict(type="list", elements="str"),
        prefix=dict(type="str"),
        regex=dict(type="str"),
        state=dict(type="str", choices=["paused", "resumed", "blocked", "unblocked"], required=True),
        persist=dict(type="bool", default=False),
        include_internal=dict(type="bool", default=False),
        allow_empty=dict(type="bool", default=False),
    )
    return dict(argument_spec=spec, supports_check_mode=True,
                required_one_of=[("names", "prefix", "regex")])


def run_module(module):
    p = module.params
    kind, state = p["type"], p["state"]
    if state in ("blocked", "unblocked") and kind != "address":
        module.fail_json(msg="state=%s applies to addresses (block() is an address operation): set type=address, or "
                             "pause the queues instead" % state)
    if p["regex"]:
        try:
            re.compile(p["regex"])
        except re.error as exc:
            module.fail_json(msg="regex is not a valid regular expression: %s" % exc)
    try:
        client = client_from_params(p)
        broker = client.discover_broker(p["broker_name"]) if p["broker_name"] is None else p["broker_name"]
        current = read_destinations(client, broker, kind)
        missing = [n for n in (p["names"] or []) if n not in current]
        if missing:
            module.fail_json(msg="%s(s) %s do not exist on broker %s" % (kind.capitalize(), ", ".join(missing), broker))
        pool = [n for n, e in current.items() if p["include_internal"] or not e["internal"]]
        explicit_internal = [n for n in (p["names"] or []) if n not in pool]
        if explicit_internal:
            module.fail_json(msg="%s(s) %s are internal (mirror/management); set include_internal=true to touch them"
                             % (kind.capitalize(), ", ".join(explicit_internal)))
        selected = select_names(pool, p["names"], p["prefix"], p["regex"])
        if not selected and not p["allow_empty"]:
            module.fail_json(msg="No %s matches names=%s prefix=%s regex=%s on broker %s (set allow_empty=true to "
                                 "accept)" % (kind, p["names"], p["prefix"], p["regex"], broker))
        ops = []
        for n in selected:
            e = current[n]
            if state == "paused":
                # PersistedPause is readable from Artemis 2.41 (None before): an existing pause then counts as done.
                if not e["paused"] or (kind == "queue" and p["persist"] and e["persisted_pause"] is False):
                    ops.append((n, "pause(boolean)", [p["persist"]]))
            elif state == "resumed":
                if e["paused"]:
                    ops.append((n, "resume()", []))
            else:
                ops.append((n, "block()" if state == "blocked" else "unblock()", []))
        after = {n: dict(current[n]) for n in selected}
        if ops and not module.check_mode:
            results = client.bulk([j.exec_request(current[n]["mbean"], op, *args) for n, op, args in ops])
            bad = [r for r in results if not r.ok]
            if bad:
                raise j.error_from_item(bad[0].request, bad[0].status, bad[0].error_type, bad[0].error)
            if state in ("paused", "resumed"):
                fresh = read_destinations(client, broker, kind)
                after = {n: dict(fresh.get(n, current[n])) for n in selected}
        elif ops:
            for n, _op, _args in ops:
                if state == "paused":
                    after[n]["paused"] = True
                    after[n]["persisted_pause"] = bool(p["persist"] or current[n]["persisted_pause"])
                elif state == "resumed":
                    after[n]["paused"] = False
                    after[n]["persisted_pause"] = False
    except j.JolokiaError as exc:
        fail_on_error(module, exc)
    if state in ("paused", "resumed") and not module.check_mode:
        wrong = [n for n in selected if bool(after[n]["paused"]) != (state == "paused")]
        if wrong:
            module.fail_json(msg="%s(s) %s did not reach state %s" % (kind.capitalize(), ", ".join(wrong), state),
                             changed=bool(ops))
    changed_names = [n for n, _op, _args in ops]
    destinations = {n: {"before": _state(current[n], kind, state), "after": _state(after[n], kind, state)}
                    for n in selected}
    if state in ("blocked", "unblocked"):
        for n in changed_names:
            destinations[n]["after"] = {"blocked": state == "blocked"}
    result = dict(changed=bool(ops), selected=selected, changed_destinations=changed_names,
                  unverified=changed_names if state in ("blocked", "unblocked") else [], destinations=destinations)
    if module._diff:
        result["diff"] = {"before": {n: d["before"] for n, d in destinations.items()},
                          "after": {n: d["after"] for n, d in destinations.items()}}
    module.exit_json(**result)


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
