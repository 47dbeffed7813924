#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: mirror_info
short_description: Report AMQP mirror state, backlog, lag, RPO/RTO estimates and queue differences of a site
description:
  - For each broker connection of a site (or the one named by O(connection)) reports whether it is started and
    connected, its URI, the mirror store-and-forward (SNF) queue backlog (C(MessageCount), C(DeliveringCount)),
    the event add and drain rates from two samples O(sample_interval) apart, the lag in seconds derived from the
    backlog and the drain rate, and RPO/RTO estimates.
  - The SNF C(FirstMessageAge) is not a lag signal (on real Artemis it is null while events are in flight and
    epoch-sized when the oldest event has no timestamp) and is not read; RV(connections[].first_message_age_seconds)
    stays null.
  - With O(peer), also reports the peer's C(PendingMirrorAcks) (mirrored acks the target could not apply yet) and
    compares the message count of every queue between the two sites, listing the differences (internal,
    management, notification and C($ACTIVEMQ_ARTEMIS_MIRROR_*) queues excluded).
  - Every sample is one bulk Jolokia request per site whatever the number of queues (queues come from one
    C(listQueues) call). The first of the two samples reads only the mirror queues' counters; the second sample of
    the site and the peer's sample are taken concurrently.
  - Before 2.32 the SNF queue has no MBean; when C(listQueues) does not list it either (the lab does not), the
    backlog and the rates are null.
  - When the continuity broker plugin is installed (docs/plugin.md), each connection also carries
    RV(connections[].plugin_estimates) -- RPO in seconds from the replication latency the peer measured, and the
    duplicates a failover now would cause (deliveries in flight plus acks not yet replicated on this site) -- and
    C(continuity_plugin) in RV(site) and RV(peer_site) holds the plugin's headline values. Without the
    plugin these are V(null) with a note.
  - A value the broker's release cannot give (C(PendingMirrorAcks) before 2.40, C(connected) and C(uri) before
    2.39, the SNF queue before 2.32) is null with a note, never a made-up zero. Before 2.39 C(connected) is
    inferred from the SNF queue's consumer count (see C(connected_source)).
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
    description:
      - Name of the broker connection to report. Default is every mirror connection of the site (every broker
        connection when no mirror queue can be seen).
    type: str
  sample_interval:
    description:
      - Seconds between the two samples used for rates and lag. V(0) takes one sample; rates are then null and
        the lag is known only when the backlog is empty.
    type: float
    default: 1.0
  queue_tolerance:
    description:
      - Count difference per queue that is not reported (messages in flight at the sample instant).
    type: int
    default: 0
  exclude_prefixes:
    description:
      - More queue name prefixes to leave out of the comparison.
    type: list
    elements: str
    default: []
  address_filter:
    description:
      - The mirror's C(address-filter) (comma-separated prefixes, C(!) excludes). Queues on addresses it does not
        mirror are left out of the comparison.
    type: str
  overhead_seconds:
    description:
      - Measured runbook overhead (quiesce, gates, activation) added to the drain time for the RTO estimate.
    type: float
    default: 0.0
  assumed_drain_rate:
    description:
      - Events per second used for the RTO estimate when no drain rate can be measured (mirror idle or
        disconnected), for example the rate measured at the last rehearsal.
    type: float
seealso:
  - module: continuity.artemis.mirror_wait
  - module: continuity.artemis.broker_info
'''

EXAMPLES = r'''
- name: Mirror state of dc1 towards dc2, compared with dc2
  continuity.artemis.mirror_info:
    url: http://dc1.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    broker_name: dc1
    sample_interval: 2
    peer:
      url: http://dc2.example.com:8161/console/jolokia
      username: admin
      password: "{{ artemis_admin_password }}"
      broker_name: dc2
  register: mirror

- name: Show backlog and lag
  ansible.builtin.debug:
    msg: "{{ item.name }}: backlog {{ item.backlog }} events, lag {{ item.lag_seconds }} s"
  loop: "{{ mirror.connections }}"
'''

RETURN = r'''
connections:
  description: One entry per looked-at broker connection.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: "Broker connection name."
      type: str
      sample: DC2
    uri:
      description: "Connection URI (null before 2.39)."
      type: str
    exists:
      description: "The connection exists on the broker."
      type: bool
    started:
      description: "Started (auto-start or started by an operator)."
      type: bool
    connected:
      description: "Connected to the peer; inferred before 2.39 (see connected_source)."
      type: bool
    connected_source:
      description: Where C(connected) came from, V(mbean), V(listBrokerConnections), V(snf_consumer_count), V(stopped).
      type: str
    snf_queue:
      description: "Name of the mirror SNF queue."
      type: str
      sample: $ACTIVEMQ_ARTEMIS_MIRROR_DC2
    backlog:
      description: "SNF MessageCount, events not confirmed by the peer (null when unknown)."
      type: int
    delivering:
      description: "SNF DeliveringCount, events sent and not yet confirmed."
      type: int
    add_rate:
      description: "Events captured per second between the samples."
      type: float
    drain_rate:
      description: "Events confirmed by the peer per second between the samples."
      type: float
    lag_seconds:
      description: "Backlog / effective drain rate; 0 when empty; null when not draining."
      type: float
    first_message_age_seconds:
      description: "Always null here (FirstMessageAge is not read); kept for the shape shared with the agent."
      type: float
    pending_acks:
      description: "Peer's PendingMirrorAcks (null without peer or before 2.40)."
      type: int
    rpo_events_est:
      description: "Events at risk if the site were lost now."
      type: int
    rpo_messages_est:
      description: "Client messages at risk (upper bound when the send share is unknown)."
      type: float
    rpo_seconds_est:
      description: "Seconds of traffic at risk."
      type: float
    rto_seconds_est:
      description: "Drain time plus O(overhead_seconds)."
      type: float
    queue_diff_count:
      description: "Queues whose counts differ (null without peer)."
      type: int
    queue_diffs:
      description: "The differences, C(queue), C(local), C(peer), C(delta)."
      type: list
      elements: dict
    lag_sample:
      description:
        - "The same data as an evidence C(lag_sample) record's fields."
        - "With the continuity plugin it carries C(duplicates_at_risk_est) and C(replication_latency_p99_seconds)
          of C(plugin_estimates) (null without the plugin), so the pipeline can compare them with the duplicates
          a switch caused."
      type: dict
    plugin_estimates:
      description:
        - From the continuity plugin (null when neither site has it), for this direction (site -> peer)
          C(replication_latency_p50_seconds), C(replication_latency_p99_seconds), C(newest_event_age_seconds) measured
          on the peer; C(rpo_seconds_est), C(rpo_messages_est), C(rpo_basis) (V(empty), V(replication_latency_p99),
          V(newest_mirrored_event)); C(duplicates_at_risk_est) = C(in_flight_deliveries) + C(unreplicated_acks_est),
          C(duplicates_basis); C(acks_per_ack_call) on the site; C(source_role), C(target_role) of the plugins'
          passive guards; C(notes).
        - Needs O(peer) for the replication latency (it is measured on the target).
      type: dict
    notes:
      description: "Why a value is null or approximate."
      type: list
      elements: str
queue_comparison:
  description: Per-queue comparison with the peer (null without O(peer)).
  returned: success
  type: dict
  contains:
    equal:
      description: "No difference beyond O(queue_tolerance)."
      type: bool
    compared:
      description: "Queues compared."
      type: int
    diff_count:
      description: "Queues that differ."
      type: int
    diffs:
      description: "C(queue), C(local), C(peer), C(delta) per differing queue."
      type: list
      elements: dict
    only_local:
      description: "Queues only on this site."
      type: list
      elements: str
    only_peer:
      description: "Queues only on the peer."
      type: list
      elements: str
passive_consumers:
  description: Consumers on the peer's client queues (null without peer).
  returned: success
  type: int
site:
  description: >-
    C(broker), C(version), C(features) of the site, C(requests) it took, C(continuity_plugin) (the plugin's
    values as in M(continuity.artemis.broker_info) without the per-address tables; null without the plugin), and
    C(paused_queues) (names of the paused client queues -- not internal, temporary or the mirror's; null when the
    queues could not be read).
  returned: success
  type: dict
peer_site:
  description: >-
    C(broker), C(version), C(features), C(pending_mirror_acks), C(requests), C(continuity_plugin), C(paused_queues)
    of the peer (null without peer).
  returned: success
  type: dict
notes:
  description: Site-level notes (missing features, unreadable items).
  returned: success
  type: list
  elements: str
elapsed:
  description: Seconds spent in the module's sampling.
  returned: success
  type: float
'''

import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.jolokia import JolokiaError
from ansible_collections.continuity.artemis.plugins.module_utils.jolokia_args import (
    collector_from_params,
    fail_on_error,
    jolokia_argument_spec,
    peer_argument_spec,
)
from ansible_collections.continuity.artemis.plugins.module_utils import site_state
from ansible_collections.continuity.artemis.plugins.module_utils.site_state import assess_mirrors


class SiteError(Exception):
    def __init__(self, what, error):
        super().__init__(str(error))
        self.what = what
        self.error = error


def collect_pair(site, peer):
    """Snapshots of the site and the peer, taken concurrently (the module's time is the slower of the two)."""
    def one(collector, what):
        try:
            return collector.collect(include_acceptors=False)
        except JolokiaError as exc:
            raise SiteError(what, exc) from exc

    if peer is None:
        return one(site, "site %s" % site.client.url), None
    with ThreadPoolExecutor(max_workers=2) as pool:
        fs = pool.submit(one, site, "site %s" % site.client.url)
        fp = pool.submit(one, peer, "peer %s" % peer.client.url)
        return fs.result(), fp.result()


def _site_summary(snap, collector):
    return {"broker": snap.get("broker"), "version": snap.get("version"), "features": snap.get("features"),
            "pending_mirror_acks": snap.get("pending_mirror_acks"), "requests": collector.client.request_count,
            "continuity_plugin": snap.get("continuity_plugin"),
            "paused_queues": site_state.paused_client_queues(snap)}


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    spec = jolokia_argument_spec()
    spec.update(
        peer=peer_argument_spec(),
        connection=dict(type="str"),
        sample_interval=dict(type="float", default=1.0),
        queue_tolerance=dict(type="int", default=0),
        exclude_prefixes=dict(type="list", elements="str", default=[]),
        address_filter=dict(type="str"),
        overhead_seconds=dict(type="float", default=0.0),
        assumed_drain_rate=dict(type="float"),
    )
    return dict(argument_spec=spec, supports_check_mode=True)


def run_module(module):
    p = module.params
    if p["sample_interval"] < 0:
        module.fail_json(msg="sample_interval must be >= 0")
    started = time.monotonic()
    site = collector_from_params(p, site=p.get("broker_name"))
    peer = collector_from_params(p["peer"], site=p["peer"].get("broker_name")) if p["peer"] else None
    try:
        first = None
        if p["sample_interval"] > 0:
            # The first sample only feeds the rates: read just the SNF queues' counters (cheap).
            first = site.collect_counters([p["connection"]] if p["connection"] else None)
            time.sleep(p["sample_interval"])
        current, peer_snap = collect_pair(site, peer)
    except SiteError as exc:
        fail_on_error(module, exc.error, exc.what)
    except JolokiaError as exc:
        fail_on_error(module, exc, "site %s" % p["url"])
    result = assess_mirrors(current, previous=first, peer=peer_snap, connection=p["connection"],
                            overhead_seconds=p["overhead_seconds"], assumed_drain_rate=p["assumed_drain_rate"],
                            queue_tolerance=p["queue_tolerance"], exclude_prefixes=p["exclude_prefixes"],
                            address_filter=p["address_filter"])
    notes = list(current["notes"])
    if peer_snap is not None:
        notes += ["peer: %s" % n for n in peer_snap["notes"]]
    module.exit_json(
        changed=False,
        connections=result["connections"],
        queue_comparison=result["comparison"],
        passive_consumers=result["passive_consumers"],
        site=_site_summary(current, site),
        peer_site=_site_summary(peer_snap, peer) if peer_snap is not None else None,
        notes=notes,
        elapsed=time.monotonic() - started,
    )


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
