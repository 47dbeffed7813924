#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: swapover
short_description: Move the active role between two mirrored Artemis sites with zero loss, or roll back
description:
  - A planned switch, consistency first, done in ONE task so the time clients cannot send stays as short as the
    brokers allow (every extra Ansible task would add its start-up time to the outage).
  - 1. Preflight (nothing is changed when it fails) - both sites readable, O(old_site) active and O(new_site)
    passive, mirrors connected both ways, backlog under O(preflight_max_backlog), no consumers on O(new_site), no
    configuration reload errors in either broker's C(Status).
  - 2. Quiesce - pause the client queues of O(old_site) until the deliveries in flight are acknowledged (at most
    O(settle_timeout)), then stop its client acceptors. Clients are disconnected and cannot reconnect there; the
    mirror acceptor stays up. A delivery still unacknowledged at the fence would be delivered again on O(new_site);
    sends in flight at the fence are in doubt for the client, which resends them.
  - 3. Drain gate - both mirror backlogs 0, C(PendingMirrorAcks) 0 where the release has it (2.40+) and equal
    per-queue message counts, for O(stable_samples) consecutive samples within O(drain_timeout) (O(wait_sleep)
    apart while the backlog drains; a sample that passed is confirmed 0.05 s after it, since clients are waiting).
    Equal counts are required because real Artemis drops a mirrored acknowledgement it cannot apply while
    C(PendingMirrorAcks) returns to 0. If the gate fails, O(old_site) is re-activated (rollback), nothing was
    lost, and the task fails with the reason.
  - 4. Activate O(new_site) - the point of no return. First the fence of O(old_site) is written to
    O(old_site.broker_xml) when given, so a controller that dies at any later instant leaves an old site that comes
    back passive if its broker restarts; a file that cannot be written rolls the switch back. On Artemis 2.43+
    with O(new_site.broker_xml) the fence is lifted in broker.xml and the C(reloadConfigurationFile) operation
    opens the acceptors; otherwise the acceptors' C(start) operation. When the broker runs the continuity plugin,
    its passive-site guard turns active first.
  - 5. Seal O(old_site), after the activation so clients do not wait for it - the continuity plugin's guard (when
    installed) turns passive, the fence is written to O(old_site.broker_xml) when given (RV(old_fence_persisted)),
    and the queues the quiesce paused are resumed. A seal that fails is recorded as a failed C(seal) phase; the
    switch stands.
  - Client queues left paused by an interrupted swapover (or paused by hand on the site that stops serving) are
    resumed where no client sees it - those of O(new_site) before the quiesce, while it is still passive, those of
    O(old_site) after the activation (RV(resumed_left_paused)); otherwise their consumers would get nothing the day
    that site serves again. Pauses are not mirrored, so none follows the clients to the other site. A rollback
    leaves the old site's pauses as they were.
  - 6. One look at both sites after the switch tells whether the mirrors are connected both ways
    (RV(mirrors_connected_after)).
  - Re-running converges - a swapover already done reports no change, unless the old site still needs its seal or
    has client queues left paused, or (before Artemis 2.43, where the file is lifted after the acceptors start)
    O(new_site.broker_xml) still fences the serving site (all are then done); one interrupted after the quiesce
    resumes at the drain gate.
    At no moment do both sites serve clients.
  - Run the task on the host of O(new_site) when its O(new_site.broker_xml) is set (the file is edited locally).
author:
  - continuity.artemis contributors (@continuity-artemis)
extends_documentation_fragment:
  - continuity.artemis.in_process
options:
  old_site:
    description: The site that is active now.
    type: dict
    required: true
    suboptions: &site
      name:
        description: Site name used in results and evidence (for example V(dc1)).
        type: str
        required: true
      url:
        description: Jolokia endpoint of the site's broker.
        type: str
        required: true
      username:
        description: Jolokia user (a role in C(HAWTIO_ROLE)); defaults to O(username).
        type: str
      password:
        description: Password of the Jolokia user; defaults to O(password).
        type: str
      broker_name:
        description: Broker name; discovered when omitted.
        type: str
      validate_certs:
        description: Verify the TLS certificate of an C(https) URL.
        type: bool
        default: true
      ca_path:
        description: CA bundle for the TLS verification.
        type: path
      origin:
        description: C(Origin) header; derived from the URL when omitted.
        type: str
      timeout:
        description: Seconds to wait for one HTTP response.
        type: float
        default: 10
      client_acceptors:
        description: Acceptors that serve clients (never the mirror acceptor).
        type: list
        elements: str
        required: true
      broker_xml:
        description: Path of the site's broker.xml on the host the task runs on, to persist the fence.
        type: path
  new_site:
    description: The site that becomes active.
    type: dict
    required: true
    suboptions: *site
  username:
    description: Default Jolokia user for both sites.
    type: str
  password:
    description: Default Jolokia password for both sites.
    type: str
  drain_timeout:
    description: Seconds the drain gate may take before the swapover is rolled back.
    type: float
    default: 120
  wait_sleep:
    description: Seconds between drain gate samples.
    type: float
    default: 0.2
  stable_samples:
    description: Consecutive samples every drain condition must hold.
    type: int
    default: 2
  preflight_max_backlog:
    description: Largest mirror backlog (events) accepted before quiescing; unset means not checked.
    type: int
  address_filter:
    description:
      - The mirror's C(address-filter) (comma list of prefixes, C(!) excludes). Queues on addresses the mirror does
        not copy are left out of the queue comparison, since they legitimately differ between the sites.
    type: str
  queue_tolerance:
    description: Allowed difference of per-queue message counts (keep 0 for a zero-loss claim).
    type: int
    default: 0
  mirror_extras:
    description:
      - What the drain gate does when both sites are quiet (connected, backlog 0, no pending acks) for
        O(quiet_seconds) and a queue's counts still differ. The differing queues are then compared message by
        message (each message's origin broker and id, from the mirror's C(x-opt-amq-bkr-id)/C(x-opt-amq-mr-id)
        annotations). A message only O(old_site) holds always stops the swapover (a switch could lose it).
      - C(refuse) stops and says what was found. C(remove) removes from O(new_site) the copies of messages that came
        from O(old_site) and that O(old_site) no longer holds (phantoms or lost acknowledgements after an HA takeover
        on the old site or a restart of the new site's broker, see docs/ha.md), then the gate runs again. C(keep)
        switches with the extra copies (clients of O(new_site) receive them after the switch). Either way the
        reconcile phase of the evidence lists them.
    type: str
    choices: [refuse, remove, keep]
    default: refuse
  quiet_seconds:
    description: Seconds both sites must be quiet with differing counts before the queues are compared one by one.
    type: float
    default: 3
  rollback:
    description: Re-activate O(old_site) when the drain gate fails. Without it no site serves after a failed gate.
    type: bool
    default: true
  settle_timeout:
    description:
      - Seconds the quiesce waits for the deliveries in flight to be acknowledged before the fence. The number still
        outstanding is returned in the quiesce phase (C(outstanding_deliveries)).
    type: float
    default: 5
  activation_timeout:
    description:
      - Seconds to wait for the client acceptors to open after a configuration reload; past it they are started
        directly. An acceptor the reload cannot recreate (its broker never applied the fence) is started at once.
    type: float
    default: 30
  evidence_dir:
    description: Directory of the evidence runs; the phases are appended to C(<evidence_dir>/<run_id>/phases.jsonl).
    type: path
  run_id:
    description: Run id of the evidence records; required with O(evidence_dir).
    type: str
attributes:
  check_mode:
    description: Runs the preflight only.
    support: full
  diff_mode:
    description: Nothing to diff; the phases are returned.
    support: none
seealso:
  - module: continuity.artemis.site_role
  - module: continuity.artemis.mirror_wait
'''

EXAMPLES = r'''
- name: Swap the active role from dc1 to dc2
  continuity.artemis.swapover:
    username: admin
    password: "{{ artemis_admin_password }}"
    old_site:
      name: dc1
      url: http://dc1.example.com:8161/console/jolokia
      client_acceptors: [artemis, amqp]
    new_site:
      name: dc2
      url: http://localhost:8161/console/jolokia
      client_acceptors: [artemis, amqp]
      broker_xml: /var/lib/artemis/dc2/etc/broker.xml
    drain_timeout: 60
    evidence_dir: /var/lib/continuity/evidence
    run_id: "{{ continuity_run_id }}"
  delegate_to: "{{ groups['dc2'][0] }}"
  register: swap
'''

RETURN = r'''
phases:
  description: One entry per phase (preflight, quiesce, drain, rollback, activate, seal, mirrors_after).
    Each is shaped as an evidence C(phase) record.
  returned: always
  type: list
  elements: dict
roles_before:
  description: Role of each site before the task.
  returned: always
  type: dict
  sample: {dc1: active, dc2: passive}
roles_after:
  description: Role of each site after the task.
  returned: always
  type: dict
client_outage_seconds:
  description: Seconds from the quiesce to the activation (clients could not send); null when resumed or not done.
  returned: always
  type: float
resumed:
  description: The task resumed an interrupted swapover.
  returned: always
  type: bool
old_fence_persisted:
  description:
    - The fence of O(old_site) was written to (or found in) its O(old_site.broker_xml) by this task, so a restart of
      that broker keeps it passive. False when the file was not given (the task runs on another host) or nothing
      was switched; the runbooks then persist it on the old site's own host.
  returned: always
  type: bool
resumed_left_paused:
  description:
    - Per site, the client queues found paused before the switch and resumed by it (see the description). Empty
      lists when there were none.
  returned: when the switch ran
  type: dict
  sample: {dc1: [], dc2: [orders]}
mirrors_connected_after:
  description:
    - Both mirrors were connected in one look at the two sites right after the switch (phase C(mirrors_after)).
      The runbooks skip their own mirrors-connected post-gate when true and wait for it when false.
    - Null when nothing was switched.
  returned: always
  type: bool
evidence_file:
  description: File the phase records were appended to.
  returned: when O(evidence_dir) is set
  type: str
'''

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from ansible_collections.continuity.artemis.plugins.module_utils import jolokia
from ansible_collections.continuity.artemis.plugins.module_utils import switch
from ansible_collections.continuity.artemis.plugins.module_utils.jolokia_args import (
    collector_from_params, jolokia_argument_spec)

# One site = the shared Jolokia connection options + what the switch needs to know about the site.
SITE_SPEC = dict(
    jolokia_argument_spec(),
    name=dict(type="str", required=True),
    client_acceptors=dict(type="list", elements="str", required=True),
    broker_xml=dict(type="path"),
)


def _site(params, defaults):
    opts = dict(params)
    for key in ("username", "password"):
        if opts.get(key) is None:
            opts[key] = defaults.get(key)
    return switch.Site(opts["name"], collector_from_params(opts, site=opts["name"]), opts["client_acceptors"],
                       opts.get("broker_xml"))


def _write_evidence(params, phases):
    if not params["evidence_dir"]:
        return None
    path = os.path.join(evidence.run_dir(params["evidence_dir"], params["run_id"]), "phases.jsonl")
    writer = evidence.EvidenceWriter(path, validate=True, flush_interval=0)
    try:
        for ph in phases:
            writer.write(evidence.phase_record(params["run_id"], **ph))
    finally:
        writer.close()
    return path


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    return dict(
        argument_spec=dict(
            old_site=dict(type="dict", required=True, options=SITE_SPEC),
            new_site=dict(type="dict", required=True, options=SITE_SPEC),
            username=dict(type="str"),
            password=dict(type="str", no_log=True),
            drain_timeout=dict(type="float", default=120.0),
            wait_sleep=dict(type="float", default=0.2),
            stable_samples=dict(type="int", default=2),
            preflight_max_backlog=dict(type="int"),
            queue_tolerance=dict(type="int", default=0),
            address_filter=dict(type="str"),
            mirror_extras=dict(type="str", default="refuse", choices=["refuse", "remove", "keep"]),
            quiet_seconds=dict(type="float", default=3.0),
            rollback=dict(type="bool", default=True),
            activation_timeout=dict(type="float", default=30.0),
            settle_timeout=dict(type="float", default=5.0),
            evidence_dir=dict(type="path"),
            run_id=dict(type="str"),
        ),
        required_by={"evidence_dir": ["run_id"]},
        supports_check_mode=True,
    )


def _roles_now(old, new):
    """Each site's role read now; ``unreachable`` for a site that cannot be read."""
    try:
        return dict((site.name, switch.role_of(site.settled_snapshot(reachable_or_not=True), site.client_acceptors))
                    for site in (old, new))
    except Exception:  # pylint: disable=broad-except  # best effort: the failure message must still be given
        return None


def run_module(module):
    p = module.params
    if p["old_site"]["name"] == p["new_site"]["name"]:
        module.fail_json(msg="old_site and new_site are both named %r: name two different sites"
                         % p["old_site"]["name"])
    if p["stable_samples"] < 1 or p["drain_timeout"] < 0 or p["wait_sleep"] < 0 or p["quiet_seconds"] < 0:
        module.fail_json(msg="stable_samples must be >= 1 and drain_timeout, wait_sleep, quiet_seconds >= 0")
    if p["evidence_dir"]:
        try:
            evidence.check_run_id(p["run_id"])
        except evidence.EvidenceError as exc:
            module.fail_json(msg="run_id: %s" % exc)
    try:
        old, new = _site(p["old_site"], p), _site(p["new_site"], p)
    except ValueError as exc:
        module.fail_json(msg=str(exc))

    try:
        res = switch.swapover(old, new, drain_timeout=p["drain_timeout"], wait_sleep=p["wait_sleep"],
                              stable_samples=p["stable_samples"], preflight_max_backlog=p["preflight_max_backlog"],
                              queue_tolerance=p["queue_tolerance"], rollback=p["rollback"],
                              check_mode=module.check_mode, activation_timeout=p["activation_timeout"],
                              settle_timeout=p["settle_timeout"], address_filter=p["address_filter"] or None,
                              mirror_extras=p["mirror_extras"], quiet_seconds=p["quiet_seconds"])
    except switch.SwitchError as exc:
        path = None if module.check_mode else _write_evidence(p, exc.phases)
        # A switch that stopped before its roles were known (quiesce, activation or rollback failed) reports the
        # roles as the brokers give them now: the runbook's message says what state both sites are in.
        module.fail_json(msg=str(exc), phases=exc.phases, roles_before=exc.state.get("roles_before"),
                         roles_after=exc.state.get("roles_after") or _roles_now(old, new), evidence_file=path)
    except (jolokia.JolokiaError, ValueError) as exc:
        module.fail_json(msg="swapover stopped before any change could be proven: %s" % exc)
    path = None if module.check_mode else _write_evidence(p, res["phases"])
    module.exit_json(changed=res["changed"], phases=res["phases"], roles_before=res["roles_before"],
                     roles_after=res["roles_after"], client_outage_seconds=res["client_outage_seconds"],
                     resumed=res["resumed"], old_fence_persisted=res["old_fence_persisted"],
                     mirrors_connected_after=res["mirrors_connected_after"], evidence_file=path,
                     resumed_left_paused=res.get("resumed_left_paused"))


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
