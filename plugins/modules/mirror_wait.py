#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: mirror_wait
short_description: Wait until the AMQP mirror between two sites meets gate conditions
description:
  - The gate of the runbooks. Samples the site (and the O(peer)) every O(wait_sleep) seconds until every given
    condition held for O(stable_samples) consecutive samples, or fails after O(wait_timeout) seconds with the last
    sample and the conditions that failed.
  - Conditions are checked for the site's outgoing mirror connection(s) and, with O(peer) and O(direction=both),
    the peer's outgoing mirror(s) as well (in sync both ways).
  - A condition whose data cannot be read (for example O(max_pending_acks) on Artemis before 2.40, where
    C(PendingMirrorAcks) does not exist) never passes; the reason says so.
  - "A zero-loss claim needs O(queues_equal): real Artemis drops a mirrored ack it cannot apply (the message was
    held by a consumer on the target) and C(PendingMirrorAcks) returns to 0 while the sites differ."
  - Each sample is one bulk Jolokia request per site. An unreachable site fails the sample, not the module, until
    the timeout; wrong credentials, refused origin and permission errors fail at once.
author:
  - continuity.artemis contributors (@continuity-artemis)
extends_documentation_fragment:
  - continuity.artemis.in_process
  - continuity.artemis.jolokia
  - continuity.artemis.jolokia.peer
  - continuity.artemis.attributes.info_module
  - continuity.artemis.attributes.actiongroup_jolokia
options:
  connection:
    description: Broker connection of the site to check. Default is every mirror connection of the site.
    type: str
  peer_connection:
    description: Broker connection of the peer to check (O(direction=both)). Default is every mirror connection.
    type: str
  direction:
    description:
      - V(both) checks the mirrors of the site and of the peer, V(outgoing) only the site's.
    type: str
    choices: [both, outgoing]
    default: both
  connected:
    description: Every checked mirror connection is started and connected (V(true)) or not connected (V(false)).
    type: bool
  max_backlog:
    description: Every checked mirror's backlog (SNF C(MessageCount), events) is at most this.
    type: int
  max_lag:
    description:
      - Every checked mirror's lag (backlog / drain rate, seconds) is at most this. An empty backlog is 0 s; a
        non-empty backlog needs two samples to know the drain rate.
    type: float
  max_pending_acks:
    description: The C(PendingMirrorAcks) of each mirror target is at most this (needs O(peer); Artemis 2.40+).
    type: int
  queues_equal:
    description: Every queue has the same message count on both sites (within O(queue_tolerance)); needs O(peer).
    type: bool
  queue_tolerance:
    description: Count difference per queue still considered equal.
    type: int
    default: 0
  exclude_prefixes:
    description: More queue name prefixes left out of O(queues_equal).
    type: list
    elements: str
    default: []
  address_filter:
    description: The mirror's C(address-filter); queues on addresses it does not mirror are left out of O(queues_equal).
    type: str
  no_consumers_on:
    description: No consumer on the selected client queues of a site (the passive site must have none).
    type: dict
    suboptions:
      site:
        description: Which site to check.
        type: str
        choices: [peer, site, both]
        default: peer
      queues:
        description:
          - Queue names to check.
          - With neither O(no_consumers_on.queues) nor O(no_consumers_on.prefix), all client queues are checked.
        type: list
        elements: str
      prefix:
        description: Queue name prefix to check.
        type: str
  stable_samples:
    description: Consecutive samples in which every condition must hold.
    type: int
    default: 1
  wait:
    description: Wait for the conditions. V(false) evaluates one sample and fails if a condition does not hold.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait before failing.
    type: float
    default: 120
  wait_sleep:
    description: Seconds between samples.
    type: float
    default: 1
seealso:
  - module: continuity.artemis.mirror_info
'''

EXAMPLES = r'''
- name: Drain gate of a swapover - in sync both ways, nothing pending, same counts, for 3 samples
  continuity.artemis.mirror_wait:
    url: http://dc1.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    broker_name: dc1
    peer:
      url: http://dc2.example.com:8161/console/jolokia
      username: admin
      password: "{{ artemis_admin_password }}"
      broker_name: dc2
    connected: true
    max_backlog: 0
    max_pending_acks: 0
    queues_equal: true
    no_consumers_on:
      site: peer
    stable_samples: 3
    wait_timeout: 60
    wait_sleep: 0.5
  register: gate

- name: Preflight - mirror connected and lag under 5 s, one look
  continuity.artemis.mirror_wait:
    url: http://dc1.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    connected: true
    max_lag: 5
    direction: outgoing
    wait: false
'''

RETURN = r'''
ok:
  description: Every condition held for O(stable_samples) consecutive samples.
  returned: always
  type: bool
elapsed:
  description: Seconds from the first sample to the decision.
  returned: always
  type: float
samples:
  description: >-
    Every sample (the first and the most recent 1000 when there are more), each with C(ts) (epoch s), C(elapsed),
    C(ok), C(stable_streak), C(failed) (condition names), C(conditions) (per condition C(ok), C(value), C(limit),
    C(reason)) and C(directions) (per mirror C(site), C(connection), C(connected), C(backlog), C(lag_seconds),
    C(pending_acks), rates, notes).
  returned: always
  type: list
  elements: dict
last:
  description: The last sample.
  returned: always
  type: dict
failed_conditions:
  description: Conditions that did not hold in the last sample (empty on success).
  returned: always
  type: list
  elements: str
timed_out:
  description: The module gave up at O(wait_timeout).
  returned: always
  type: bool
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils import gates
from ansible_collections.continuity.artemis.plugins.module_utils.site_state import read_pair
from ansible_collections.continuity.artemis.plugins.module_utils.jolokia import JolokiaError
from ansible_collections.continuity.artemis.plugins.module_utils.jolokia_args import (
    collector_from_params,
    fail_on_error,
    jolokia_argument_spec,
    peer_argument_spec,
)


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    spec = jolokia_argument_spec()
    spec.update(
        peer=peer_argument_spec(),
        connection=dict(type="str"),
        peer_connection=dict(type="str"),
        direction=dict(type="str", choices=["both", "outgoing"], default="both"),
        connected=dict(type="bool"),
        max_backlog=dict(type="int"),
        max_lag=dict(type="float"),
        max_pending_acks=dict(type="int"),
        queues_equal=dict(type="bool"),
        queue_tolerance=dict(type="int", default=0),
        exclude_prefixes=dict(type="list", elements="str", default=[]),
        address_filter=dict(type="str"),
        no_consumers_on=dict(type="dict", options=dict(
            site=dict(type="str", choices=["peer", "site", "both"], default="peer"),
            queues=dict(type="list", elements="str"),
            prefix=dict(type="str"),
        )),
        stable_samples=dict(type="int", default=1),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="float", default=120),
        wait_sleep=dict(type="float", default=1),
    )
    return dict(argument_spec=spec, supports_check_mode=True)


def run_module(module):
    p = module.params
    conditions = {name: p[name] for name in gates.CONDITION_NAMES if p.get(name) is not None}
    if p.get("queues_equal") is False:
        conditions.pop("queues_equal")  # "not equal" is no gate anyone needs; false means "do not check"
    if not conditions:
        module.fail_json(msg="give at least one condition: %s" % ", ".join(gates.CONDITION_NAMES))
    if p["stable_samples"] < 1 or p["wait_timeout"] < 0 or p["wait_sleep"] <= 0:
        module.fail_json(msg="stable_samples must be >= 1, wait_timeout >= 0 and wait_sleep > 0")
    needs_peer = [n for n in ("max_pending_acks", "queues_equal") if n in conditions]
    if "no_consumers_on" in conditions and conditions["no_consumers_on"].get("site") in ("peer", "both"):
        needs_peer.append("no_consumers_on")
    if needs_peer and not p["peer"]:
        module.fail_json(msg="%s need(s) the peer site: set 'peer'" % ", ".join(needs_peer))

    site = collector_from_params(p, site=p.get("broker_name") or "site")
    peer = collector_from_params(p["peer"], site=p["peer"].get("broker_name") or "peer") if p["peer"] else None

    def take():
        # unreachable sites become failed samples (a restart or WAN cut may be what we are waiting out);
        # both sites are read at the same time so a sample is one round trip, not two
        if peer is None:
            return site.collect_or_unreachable(include_acceptors=False), None
        return read_pair(lambda: site.collect_or_unreachable(include_acceptors=False),
                         lambda: peer.collect_or_unreachable(include_acceptors=False))

    def evaluate(sample, previous):
        s, ps = sample
        prev_s, prev_p = previous if previous is not None else (None, None)
        return gates.evaluate(conditions, s, ps, prev_site=prev_s, prev_peer=prev_p, connection=p["connection"],
                              peer_connection=p["peer_connection"], direction=p["direction"],
                              queue_tolerance=p["queue_tolerance"], exclude_prefixes=p["exclude_prefixes"],
                              address_filter=p["address_filter"])

    try:
        res = gates.wait_until(take, evaluate, p["wait_timeout"], p["wait_sleep"], p["stable_samples"],
                               wait=p["wait"], clock=time.monotonic, wall=time.time, sleeper=time.sleep)
    except JolokiaError as exc:
        fail_on_error(module, exc)
    out = dict(ok=res["ok"], elapsed=res["elapsed"], samples=res["samples"], last=res["last"],
               failed_conditions=res["failed"], timed_out=res["timed_out"])
    if res["ok"]:
        module.exit_json(changed=False, **out)
    if res["timed_out"]:
        msg = "mirror_wait timed out after %.1f s (%d samples); failing: %s" % (
            res["elapsed"], len(res["samples"]), res["reason"])
    else:
        msg = "mirror gate not met: %s" % res["reason"]
    module.fail_json(msg=msg, **out)


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
