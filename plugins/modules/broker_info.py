#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: broker_info
short_description: Read the state of an ActiveMQ Artemis broker over Jolokia
description:
  - Reads version, name, node id, active/backup state, HA policy, uptime, the C(Status) document (configuration
    reload checksums and errors), acceptors, addresses and queues with message counts, and broker connections with
    their state, in one bulk Jolokia request whatever the number of queues.
  - Reads the continuity broker plugin's MBean in the same request (docs/plugin.md) and returns it as
    RV(continuity_plugin); on a broker without the plugin that is V(null) with a note in RV(notes), never an error.
  - Detects the features of the broker's Artemis release (for example the broker-connection MBean since 2.39 and
    C(PendingMirrorAcks) since 2.40). A value a release cannot give is returned as V(null) with a note, never as 0.
author:
  - continuity.artemis contributors (@continuity-artemis)
extends_documentation_fragment:
  - continuity.artemis.in_process
  - continuity.artemis.jolokia
  - continuity.artemis.attributes.info_module
  - continuity.artemis.attributes.actiongroup_jolokia
options:
  name_regex:
    description:
      - Only return addresses and queues whose name matches this regular expression (Python C(re.search)).
    type: str
  include_internal:
    description:
      - Also return internal queues (for example the mirror store-and-forward queues C($ACTIVEMQ_ARTEMIS_MIRROR_*))
        and temporary queues.
    type: bool
    default: false
  wait:
    description:
      - Wait until the broker answers Jolokia with C(Started=true) before reading it (the broker role's readiness
        after a start or restart).
      - "Every answer of a broker's startup window means not ready yet and is retried: a refused connection, a web
        server that does not serve the console yet, JSON 404 for a broker MBean not registered yet, JSON 500
        C(Broker is not started)."
      - Wrong credentials, a refused origin, missing permissions and an unverifiable TLS certificate fail at once.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait with O(wait=true) before failing with the last answer.
    type: float
    default: 120.0
  wait_sleep:
    description: Seconds between two attempts with O(wait=true).
    type: float
    default: 1.0
seealso:
  - module: continuity.artemis.mirror_info
'''

EXAMPLES = r'''
- name: Read the dc1 broker
  continuity.artemis.broker_info:
    url: http://dc1.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
  register: dc1

- name: Fail when the last configuration reload reported errors
  ansible.builtin.assert:
    that: dc1.broker.status is not search('error', ignorecase=True)

- name: Wait up to 2 minutes until the broker started, then read it (https, certificate checked with a CA file)
  continuity.artemis.broker_info:
    url: https://dc1.example.com:8443/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    ca_path: /etc/pki/artemis-ca.pem
    wait: true
    wait_timeout: 120

- name: Only the orders queues
  continuity.artemis.broker_info:
    url: https://dc2.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    ca_path: /etc/pki/artemis-ca.pem
    name_regex: '^orders\.'
'''

RETURN = r'''
broker:
  description: Broker attributes.
  returned: success
  type: dict
  contains:
    name:
      description: "Broker name."
      type: str
      sample: dc1
    version:
      description: "Artemis version."
      type: str
      sample: 2.44.0
    node_id:
      description: "Node id."
      type: str
    active:
      description: "The broker is active (not a waiting backup)."
      type: bool
    started:
      description: "The broker is started."
      type: bool
    backup:
      description: "Configured as backup."
      type: bool
    ha_policy:
      description: "HA policy."
      type: str
      sample: Primary Only
    uptime:
      description: "Uptime text."
      type: str
    uptime_millis:
      description: "Uptime in ms."
      type: int
    status:
      description: "Decoded C(Status) JSON (configuration reload state and errors)."
      type: raw
    pending_mirror_acks:
      description: "Mirrored acks waiting to be applied on this broker; null before 2.40."
      type: int
    connection_count:
      description: "Client connections."
      type: int
    total_message_count:
      description: "Messages in all queues."
      type: int
    total_consumer_count:
      description: "Consumers on all queues."
      type: int
features:
  description: Feature flags detected from the version (see docs/modules.md).
  returned: success
  type: dict
  sample: {broker_connection_mbean: true, pending_mirror_acks: true, snf_queue_mbean: true}
acceptors:
  description: Acceptors by name with C(started) and C(parameters).
  returned: success
  type: dict
addresses:
  description: Addresses by name with C(paused), C(routing_types), C(message_count), C(queue_names).
  returned: success
  type: dict
queues:
  description: >-
    Queues by name with C(address), C(routing_type), C(message_count), C(delivering_count), C(consumer_count),
    C(messages_added), C(messages_acknowledged), C(paused), C(persisted_pause), C(internal), C(temporary).
  returned: success
  type: dict
broker_connections:
  description: >-
    Broker connections by name with C(started), C(connected) (null before 2.39 unless inferred from the mirror
    queue consumer, see C(connected_source)), C(uri) (null before 2.39), C(mirror).
  returned: success
  type: dict
continuity_plugin:
  description:
    - The continuity broker plugin (docs/plugin.md) -- site role of its passive guard, ack model, replication latency
      on this broker as mirror target. V(null) when the plugin is not installed (see RV(notes)).
    - Latencies and ages are seconds, V(null) when the plugin has no sample in its window.
  returned: success
  type: dict
  contains:
    mbean:
      description: "ObjectName of the plugin's MBean."
      type: str
    site_role:
      description: "Role of the passive-site guard, V(active) or V(passive)."
      type: str
      sample: passive
    site_role_since:
      description: "When the role was set (ISO-8601)."
      type: str
    state_file:
      description: "File the role is persisted in (a restart keeps it)."
      type: str
    mirror_users:
      description: "Users the guard never refuses."
      type: list
      elements: str
    mirror_acceptors:
      description: "Acceptors whose connections the guard never refuses."
      type: list
      elements: str
    window_seconds:
      description: "Sliding window behind every rate and percentile."
      type: int
    statistics_since:
      description: "Start of the statistics (plugin start or last reset)."
      type: str
    plugin_version:
      description: "Version of the plugin jar."
      type: str
    passive_guard:
      description: "C(refusals), C(refused_sends), C(refused_consumers), C(refused_clients) since start or reset."
      type: dict
    ack_model:
      description: >-
        C(unacked_deliveries) (in flight now), C(deliveries_per_second), C(acks_per_second), C(acks_per_ack_call)
        (batching factor), C(ack_latency_p50_seconds), C(ack_latency_p99_seconds), C(transacted_share),
        C(client_ack_share), C(auto_ack_share), C(unclassified_share), C(tracked_consumers), and C(addresses) (the
        plugin's per-address C(AckModel) table).
      type: dict
    replication:
      description: >-
        This broker as mirror target: C(latency_p50_seconds), C(latency_p99_seconds), C(latency_max_seconds)
        (arrival here minus send time on the other site), C(samples_in_window), C(mirrored_per_second),
        C(mirrored_messages_total), C(newest_event_age_seconds), C(last_arrival_age_seconds),
        C(clock_skew_samples), and C(addresses) (the per-address C(ReplicationLatency) table).
      type: dict
notes:
  description: What could not be read and why.
  returned: success
  type: list
  elements: str
requests:
  description: HTTP requests the module made.
  returned: success
  type: int
waited:
  description: Seconds the module waited for C(Started=true) (O(wait=true)); 0 without O(wait).
  returned: success
  type: float
'''

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.jolokia import JolokiaError, wait_started
from ansible_collections.continuity.artemis.plugins.module_utils.jolokia_args import (
    collector_from_params,
    fail_on_error,
    jolokia_argument_spec,
)

_BROKER_KEYS = ("name", "version", "node_id", "active", "started", "backup", "ha_policy", "uptime", "uptime_millis",
                "status", "pending_mirror_acks", "connection_count", "total_message_count", "total_consumer_count")


def _strip(entry):
    return {k: v for k, v in entry.items() if k != "mbean"}


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    spec = jolokia_argument_spec()
    spec.update(name_regex=dict(type="str"), include_internal=dict(type="bool", default=False),
                wait=dict(type="bool", default=False), wait_timeout=dict(type="float", default=120.0),
                wait_sleep=dict(type="float", default=1.0))
    return dict(argument_spec=spec, supports_check_mode=True)


def run_module(module):
    rx = None
    if module.params["name_regex"]:
        try:
            rx = re.compile(module.params["name_regex"])
        except re.error as exc:
            module.fail_json(msg="name_regex is not a valid regular expression: %s" % exc)
    p = module.params
    if p["wait_timeout"] < 0 or p["wait_sleep"] < 0:
        module.fail_json(msg="wait_timeout and wait_sleep must be >= 0 seconds")
    waited = 0.0
    try:
        collector = collector_from_params(module.params)
        if p["wait"]:
            ready = wait_started(collector.client, p["broker_name"], timeout=p["wait_timeout"], sleep=p["wait_sleep"])
            collector.broker_name, waited = ready["broker_name"], ready["elapsed"]
        snap = collector.collect(include_addresses=True, include_plugin_tables=True)
    except JolokiaError as exc:
        fail_on_error(module, exc)
    incl = module.params["include_internal"]

    def keep(name, entry=None):
        if rx is not None and not rx.search(name):
            return False
        if not incl and entry is not None and (entry.get("internal") or entry.get("temporary")):
            return False
        return True

    queues = {n: _strip(q) for n, q in snap["queues"].items() if keep(n, q)}
    addresses = {n: _strip(a) for n, a in (snap["addresses"] or {}).items() if keep(n)}
    if not incl:
        addresses = {n: a for n, a in addresses.items() if not n.startswith("$ACTIVEMQ_ARTEMIS_MIRROR_")}
    module.exit_json(
        changed=False,
        broker={k: snap.get(k) for k in _BROKER_KEYS},
        features=snap["features"],
        acceptors={n: _strip(a) for n, a in snap["acceptors"].items()},
        addresses=addresses,
        queues=queues,
        broker_connections={n: _strip(c) for n, c in snap["connections"].items()},
        continuity_plugin=snap["continuity_plugin"],
        notes=snap["notes"],
        requests=collector.client.request_count,
        waited=round(waited, 3),
    )


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
