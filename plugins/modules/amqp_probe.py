#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: amqp_probe
short_description: Measure AMQP mirror replication latency with canary messages
description:
  - Sends O(count) canary messages, each with a unique id and an AMQP creation time, to O(address) on the origin
    site, and watches them arrive on the target site by browsing (distribution mode copy), so the target keeps
    every message. The time from send to first sight on the target is the end-to-end replication latency.
  - Then consumes the canaries on the origin (only its own, by a selector on the probe id), so their removal is
    mirrored too; with O(verify_removal=true) it also waits until they are gone from the target.
  - Fails clearly and never hangs. Everything, cleanup included, ends within O(timeout) seconds. Refused
    credentials, a missing address, an unreachable host and canaries that never reach the target (mirror link
    cut) each give their own message.
  - Use an address dedicated to canaries that exists on both sites and is mirrored. On a broker without
    selector support the probe releases other messages it is handed, untouched.
  - Requires python-qpid-proton on the host that runs the module.
author:
  - continuity.artemis contributors (@continuity-artemis)
requirements:
  - python-qpid-proton
attributes:
  check_mode:
    description: In check mode nothing is sent; the module reports what it would do.
    support: full
  diff_mode:
    description: Nothing to diff; the probe leaves no lasting change.
    support: none
extends_documentation_fragment:
  - continuity.artemis.in_process
options:
  origin_urls:
    description:
      - Client URLs of the origin site, tried in order (C(amqp://host:port) or C(amqps://host:port)).
    type: list
    elements: str
    required: true
    aliases: [origin_url]
  target_urls:
    description:
      - Client URLs of the target (peer) site where the canaries must appear.
    type: list
    elements: str
    required: true
    aliases: [target_url]
  origin_site:
    description: Name of the origin site in results and evidence.
    type: str
    default: origin
  target_site:
    description: Name of the target site in results and evidence.
    type: str
    default: target
  address:
    description: Address (anycast queue of the same name) the canaries are sent to.
    type: str
    default: continuity.canary
  count:
    description: Number of canaries.
    type: int
    default: 5
  interval:
    description: Seconds between two canaries.
    type: float
    default: 0.1
  timeout:
    description:
      - Seconds for the whole probe, removal included. Canaries not seen by then fail the probe.
    type: float
    default: 30
  user:
    description: SASL PLAIN user for both sites. Without it the probe uses SASL ANONYMOUS.
    type: str
  password:
    description: Password of O(user).
    type: str
  ca_cert:
    description: CA bundle to verify the brokers' certificates (amqps:// URLs).
    type: path
  validate_certs:
    description: Verify the broker certificate and host name on amqps:// URLs.
    type: bool
    default: true
  client_cert:
    description: Client certificate (PEM) for amqps:// URLs.
    type: path
  client_key:
    description: Key of O(client_cert) (PEM).
    type: path
  durable:
    description: Send durable canaries.
    type: bool
    default: true
  remove:
    description: Consume the canaries on the origin afterwards (their removal is mirrored).
    type: bool
    default: true
  verify_removal:
    description: After removing them, wait (within O(timeout)) until the canaries are gone from the target.
    type: bool
    default: false
  browse_refresh:
    description:
      - Re-open the target browser after this many quiet seconds while a sent canary is unseen (for brokers whose
        browsers show a snapshot of the queue and do not follow new messages, as the lab broker's). It bounds
        the latency resolution in that case.
    type: float
    default: 0.05
  fail_on_timeout:
    description:
      - Fail when a canary is not seen in time. With V(false) the module returns C(ok=false) instead.
    type: bool
    default: true
  evidence_file:
    description:
      - Append one C(canary) evidence record per canary to this JSON lines file (docs/evidence.md).
    type: path
  run_id:
    description: Run id of the evidence records. Default is a new id.
    type: str
  probe_id:
    description: Id of this probe (prefix of the canary ids). Default is random.
    type: str
notes:
  - The probe opens its own connections from the host running the module to each site, so the measured latency is
    the mirror's, not the probe host's network to one site.
seealso:
  - name: Evidence format
    description: docs/evidence.md in the collection.
    link: https://github.com/continuity/artemis/blob/main/docs/evidence.md
'''

EXAMPLES = r'''
- name: Replication latency dc1 -> dc2
  continuity.artemis.amqp_probe:
    origin_urls: ["amqp://dc1-broker:5672"]
    origin_site: dc1
    target_urls: ["amqp://dc2-broker:5672"]
    target_site: dc2
    user: probe
    password: "{{ vault_probe_password }}"
    count: 10
    timeout: 20
    evidence_file: "{{ evidence_dir }}/{{ run_id }}/canaries.jsonl"
    run_id: "{{ run_id }}"
  register: probe

- name: Gate on the 95th percentile
  ansible.builtin.assert:
    that: probe.latency.p95 < 2.0
'''

RETURN = r'''
ok:
  description: Every canary was seen on the target (and removed when O(remove)).
  returned: always
  type: bool
probe_id:
  description: Id of this probe.
  returned: always
  type: str
run_id:
  description: Run id of the evidence records.
  returned: always
  type: str
sent:
  description: Canaries sent.
  returned: always
  type: int
seen:
  description: Canaries seen on the target.
  returned: always
  type: int
removed:
  description: Canaries consumed on the origin afterwards.
  returned: always
  type: int
latency:
  description: Latency summary of the canaries seen, in seconds (nearest-rank percentiles; null when none).
  returned: always
  type: dict
  contains:
    count: {description: Canaries with a latency., type: int, returned: always}
    min: {description: Smallest latency., type: float, returned: always}
    p50: {description: Median., type: float, returned: always}
    p95: {description: 95th percentile., type: float, returned: always}
    p99: {description: 99th percentile., type: float, returned: always}
    max: {description: Largest latency., type: float, returned: always}
    mean: {description: Mean latency., type: float, returned: always}
canaries:
  description: One entry per canary.
  returned: always
  type: list
  elements: dict
  sample:
    - {canary_id: probe-1a2b-0, sent_ts: 1763790000.1, seen_ts: 1763790000.15, latency_seconds: 0.05,
       outcome: seen, error: null}
removal_seconds:
  description: Seconds from the start of the removal until it was seen on the target (O(verify_removal)).
  returned: always
  type: float
removal_verified:
  description: The canaries were gone from the target before the timeout (null when not checked).
  returned: always
  type: bool
error:
  description: What went wrong (kind, message, site), or null.
  returned: always
  type: dict
evidence_file:
  description: The evidence file written, or null.
  returned: always
  type: str
elapsed:
  description: Seconds the probe took.
  returned: always
  type: float
would:
  description: In check mode, what the probe would do.
  returned: check mode
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.continuity.artemis.plugins.module_utils import amqp, evidence


def argument_spec():
    return dict(
        origin_urls=dict(type='list', elements='str', required=True, aliases=['origin_url']),
        target_urls=dict(type='list', elements='str', required=True, aliases=['target_url']),
        origin_site=dict(type='str', default='origin'),
        target_site=dict(type='str', default='target'),
        address=dict(type='str', default='continuity.canary'),
        count=dict(type='int', default=5),
        interval=dict(type='float', default=0.1),
        timeout=dict(type='float', default=30),
        user=dict(type='str'),
        password=dict(type='str', no_log=True),
        ca_cert=dict(type='path'),
        validate_certs=dict(type='bool', default=True),
        client_cert=dict(type='path'),
        client_key=dict(type='path', no_log=False),
        durable=dict(type='bool', default=True),
        remove=dict(type='bool', default=True),
        verify_removal=dict(type='bool', default=False),
        browse_refresh=dict(type='float', default=0.05),
        fail_on_timeout=dict(type='bool', default=True),
        evidence_file=dict(type='path'),
        run_id=dict(type='str'),
        probe_id=dict(type='str'),
    )


def canary_records(run_id, result):
    """Evidence records (kind canary) for a probe result (pure)."""
    records = []
    for c in result["canaries"]:
        outcome = c["outcome"] if c["outcome"] in evidence.CANARY_OUTCOMES else "error"
        records.append(evidence.canary_record(
            run_id, c["canary_id"], result["origin_site"], result["target_site"], result["address"], c["sent_ts"],
            c["seen_ts"], outcome, latency_seconds=c["latency_seconds"], error=c["error"]))
    return records


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    return dict(argument_spec=argument_spec(), supports_check_mode=True,
                required_together=[('client_cert', 'client_key')])


def run_module(module):
    p = module.params
    if not amqp.HAS_PROTON:
        module.fail_json(msg=missing_required_lib('python-qpid-proton'), exception=amqp.PROTON_IMPORT_ERROR)
    for name, low in (('count', 1), ('timeout', 0.5)):
        if p[name] < low:
            module.fail_json(msg='%s must be >= %s' % (name, low))
    if p['interval'] < 0 or p['browse_refresh'] <= 0:
        module.fail_json(msg='interval must be >= 0 and browse_refresh > 0')
    if p['run_id'] is not None and not evidence.is_valid_run_id(p['run_id']):
        module.fail_json(msg='run_id %r: use 1-128 characters [A-Za-z0-9._-]' % p['run_id'])
    if p['password'] and not p['user']:
        module.fail_json(msg='password needs user')
    try:
        origin = amqp.parse_endpoints(p['origin_urls'], default_site=p['origin_site'])
        target = amqp.parse_endpoints(p['target_urls'], default_site=p['target_site'])
    except amqp.AmqpError as exc:
        module.fail_json(msg=exc.message)
    run_id = p['run_id'] or evidence.new_run_id('probe')
    probe_id = p['probe_id'] or 'probe-%s' % amqp.uuid_hex()

    if module.check_mode:
        module.exit_json(
            changed=False, ok=True, probe_id=probe_id, run_id=run_id, sent=0, seen=0, removed=0,
            latency=amqp.percentiles([]), canaries=[], removal_seconds=None, removal_verified=None, error=None,
            evidence_file=None, elapsed=0.0,
            would=dict(send=p['count'], address=p['address'], origin=[e.url for e in origin],
                       target=[e.url for e in target], remove=p['remove'], timeout=p['timeout']))

    options = amqp.ClientOptions(user=p['user'], password=p['password'], ca=p['ca_cert'],
                                 verify=p['validate_certs'], cert=p['client_cert'], key=p['client_key'],
                                 connect_timeout=min(10.0, p['timeout']))
    probe = amqp.CanaryProbe(origin, target, p['address'], options, count=p['count'], interval=p['interval'],
                             timeout=p['timeout'], probe_id=probe_id, remove=p['remove'],
                             verify_removal=p['verify_removal'], durable=p['durable'],
                             browse_refresh=p['browse_refresh'])
    result = probe.run()
    result['run_id'] = run_id
    result['evidence_file'] = None
    if p['evidence_file'] and result['canaries']:
        writer = evidence.EvidenceWriter(p['evidence_file'], validate=True, flush_interval=0)
        try:
            writer.write_many(canary_records(run_id, result))
        finally:
            writer.close()
        result['evidence_file'] = p['evidence_file']
    # The canaries are removed again: no lasting change (changed=false), like a check.
    result['changed'] = False
    err = result['error']
    if err and (err['kind'] != amqp.TIMEOUT or p['fail_on_timeout']):
        module.fail_json(msg=err['message'], **result)
    module.exit_json(**result)


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == '__main__':
    main()
