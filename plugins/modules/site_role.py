#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: site_role
short_description: Read or set the role (active or passive) of an Artemis site
description:
  - A site is C(active) when its client acceptors are started and C(passive) when they are stopped. The mirror keeps
    its own acceptor, which this module never touches, so a passive site still receives the peer's mirror.
  - The role is read from the broker itself (acceptor C(Started)), so every runbook can work out where it stands.
  - With O(broker_xml) the fence is also written to broker.xml as the acceptor parameter C(autoStart=false)
    (Artemis 2.16+), so a restarted passive broker does not start serving. Run the task on the broker host for that.
  - On Artemis 2.43+ a configuration reload recreates a changed acceptor, so activation there writes
    C(autoStart=true) and calls the C(reloadConfigurationFile) operation; before 2.43 it calls the acceptors'
    C(start) operation.
  - When the broker runs the continuity broker plugin (docs/plugin.md), the plugin's passive-site guard follows the
    role too -- O(state=passive) calls its C(setSiteRole("passive")) once the client acceptors are stopped (clients
    are then refused even through the mirror acceptor; the plugin persists the role in its state file) and
    O(state=active) calls C(setSiteRole("active")) before the acceptors open. The guard's role is returned as
    RV(plugin_role). Without the plugin nothing else changes.
  - A site whose Jolokia cannot be reached is reported as C(unreachable). With O(allow_unreachable) and
    O(state=passive) the fence is still written to O(broker_xml), which is how a failover fences a site whose broker
    is down but whose host is reachable; when that broker.xml configures the continuity plugin, V(passive) is also
    written into the plugin's state file, so its guard starts passive.
  - A file edit alone never counts as a fence. With O(client_endpoints) the module also tries a TCP connection to
    each client acceptor, reports the ones that accept (RV(accepting_clients)) and, with O(state=passive), returns
    RV(fenced) true only when the site is proven unable to serve -- see RV(fenced).
author:
  - continuity.artemis contributors (@continuity-artemis)
extends_documentation_fragment:
  - continuity.artemis.in_process
  - continuity.artemis.jolokia
  - continuity.artemis.attributes
  - continuity.artemis.attributes.actiongroup_jolokia
options:
  client_acceptors:
    description:
      - Names of the acceptors that serve clients. Never include the mirror acceptor.
    type: list
    elements: str
    required: true
  state:
    description:
      - V(query) only reads the role; V(active) opens the client acceptors; V(passive) stops them (fences the site).
    type: str
    choices: [query, active, passive]
    default: query
  broker_xml:
    description:
      - Path of the broker's C(etc/broker.xml) on the host the task runs on. When set, the fence is persisted there
        and the role the broker would come up with after a restart is returned as RV(persisted_role).
    type: path
  allow_unreachable:
    description:
      - Return RV(role=unreachable) instead of failing when Jolokia cannot be reached; with O(state=passive) and
        O(broker_xml) the fence is written to the file anyway.
    type: bool
    default: false
  persist_only:
    description:
      - Only write the role into O(broker_xml) (C(autoStart) of the client acceptors) and into the continuity
        plugin's state file when that broker.xml configures the plugin; the broker is not read or changed over
        Jolokia. For the other broker of an HA pair (docs/ha.md), which takes the role from these files when it
        becomes live -- also while it is down. Needs O(broker_xml) and O(state=active) or O(state=passive).
    type: bool
    default: false
  client_endpoints:
    description:
      - C(host:port) (or C(scheme://host:port)) of every client acceptor of this broker, as clients reach it. Each is
        tried with a plain TCP connection, because a broker whose Jolokia does not answer may still serve clients; an
        endpoint that accepts a connection shows it. Never list the mirror acceptor.
    type: list
    elements: str
    default: []
  wait_timeout:
    description:
      - Seconds to wait for the acceptors to start after a configuration reload (Artemis 2.43+).
      - With O(state=passive) and O(client_endpoints), also the seconds to wait for the client endpoints to stop
        accepting connections after the fence (on 2.43+ the broker applies a persisted fence at its next
        configuration reload even when its Jolokia does not answer).
    type: float
    default: 30
attributes:
  check_mode:
    description: Reports what would change; nothing is stopped, started or written.
    support: full
  diff_mode:
    description: Shows the broker.xml change when O(broker_xml) is set.
    support: full
seealso:
  - module: continuity.artemis.swapover
  - module: continuity.artemis.acceptor
'''

EXAMPLES = r'''
- name: Where does dc2 stand?
  continuity.artemis.site_role:
    url: http://dc2.example.com:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    client_acceptors: [artemis, amqp]
  register: dc2_role

- name: Fence dc1 (stop client acceptors, keep the mirror acceptor, persist across restarts)
  continuity.artemis.site_role:
    url: http://localhost:8161/console/jolokia
    username: admin
    password: "{{ artemis_admin_password }}"
    client_acceptors: [artemis, amqp]
    broker_xml: /var/lib/artemis/dc1/etc/broker.xml
    state: passive
    allow_unreachable: true
'''

RETURN = r'''
role:
  description:
    - Role after the task (V(active), V(passive), V(mixed) for a half-done switch, V(unreachable), V(standby) for an
      HA backup that is not live).
    - A V(standby) backup has no acceptors; O(state=active) or O(state=passive) only write its O(broker_xml) fence
      (and its continuity plugin's state file), which decide how it serves once it becomes live (docs/ha.md).
  returned: always
  type: str
  sample: passive
role_before:
  description: Role before the task.
  returned: always
  type: str
persisted_role:
  description: Role the broker would come up with after a restart, from O(broker_xml).
  returned: when O(broker_xml) is set
  type: str
reachable:
  description: Whether Jolokia answered.
  returned: always
  type: bool
live:
  description:
    - Whether this broker is the one serving its site -- reachable and not an HA backup standing by. The runbooks
      describe a site with an HA pair by its live broker.
  returned: always
  type: bool
ha:
  description: HA facts of the broker (C(policy) as Artemis names it, C(backup), C(active)); null when unreachable.
  returned: always
  type: dict
  sample: {policy: Replication Backup w/quorum voting, backup: true, active: false}
version:
  description: Artemis version reported by the broker.
  returned: when reachable
  type: str
acceptors:
  description: C(Started) of every acceptor after the task.
  returned: when reachable
  type: dict
  sample: {artemis: false, mirror: true}
method:
  description:
    - How the acceptors were opened. V(reload) on 2.43+ (broker.xml, then C(reloadConfigurationFile())); V(start)
      before 2.43, or when the file already opened them; V(reload+start) when the reload left an acceptor stopped
      because its broker had never applied the fence (it was lifted again within seconds), so it was started.
  returned: when O(state=active) changed something
  type: str
plugin_role:
  description:
    - Role of the continuity plugin's passive-site guard after the task (V(active) or V(passive)); V(null) when the
      broker has no continuity plugin or cannot be reached. A query warns when it differs from RV(role).
  returned: always
  type: str
  sample: passive
plugin_role_before:
  description: Role of the plugin's guard before the task (V(null) without the plugin).
  returned: always
  type: str
plugin_state_file:
  description:
    - The continuity plugin's state file written with V(passive) because the broker could not be reached
      (O(state=passive), O(allow_unreachable) and O(broker_xml) configuring the plugin); the guard starts passive.
  returned: when that file was written or checked
  type: str
error:
  description: Why the site was unreachable.
  returned: when unreachable
  type: str
listeners:
  description: The TCP probe of each O(client_endpoints) entry after the task (C(state) open, refused or unknown).
  returned: when O(client_endpoints) is set
  type: list
  elements: dict
  sample: [{endpoint: "10.0.1.5:61616", state: refused, error: "[Errno 111] Connection refused"}]
accepting_clients:
  description: The O(client_endpoints) that accepted a TCP connection after the task (the site can serve there).
  returned: when O(client_endpoints) is set
  type: list
  elements: str
fenced:
  description:
    - With O(state=passive) and O(broker_xml), whether the site is proven unable to serve clients, now and after a
      restart. It needs autoStart=false persisted, and either the broker reporting its client acceptors stopped or,
      when its Jolokia does not answer, every O(client_endpoints) entry refusing connections (the host answers,
      nothing listens). A persisted file with a broker that cannot be read and endpoints that time out is not a
      fence -- the failover runbook then asks the operator to confirm.
  returned: when O(state=passive) and O(broker_xml) are set
  type: bool
fence_reason:
  description: Why RV(fenced) is true or false.
  returned: when RV(fenced) is returned
  type: str
'''

import datetime

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils import continuity_plugin
from ansible_collections.continuity.artemis.plugins.module_utils import jolokia
from ansible_collections.continuity.artemis.plugins.module_utils import listeners
from ansible_collections.continuity.artemis.plugins.module_utils import site_role as roles
from ansible_collections.continuity.artemis.plugins.module_utils import switch
from ansible_collections.continuity.artemis.plugins.module_utils.jolokia_args import (
    collector_from_params, fail_on_error, jolokia_argument_spec)


def _persisted(path, acceptors):
    with open(path, "r", encoding="utf-8") as fh:
        return roles.persisted_role(fh.read(), acceptors)


def _plugin_role(snap):
    """Role of the continuity plugin's guard in a snapshot; None without the plugin (or unreachable)."""
    return (snap.get("continuity_plugin") or {}).get("site_role")


def _persist_plugin_role(module, broker_xml, result, role=roles.PASSIVE):
    """A broker that cannot be reached, or an HA backup standing by: write ``role`` into its continuity plugin's
    state file (when its broker.xml configures the plugin), so the guard starts in that role, as autoStart keeps
    the client acceptors closed or opens them."""
    changed = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    done = continuity_plugin.persist_role(broker_xml, role, changed, module.check_mode)
    if done is not None:
        result["plugin_role"] = done["role"]
        result["plugin_state_file"] = done["path"]
        result["changed"] = result["changed"] or done["changed"]


def _warn_on_disagreement(module, result):
    role, guard = result.get("role"), result.get("plugin_role")
    if guard is not None and role in (roles.ACTIVE, roles.PASSIVE) and guard != role:
        module.warn("the client acceptors make this site %s but the continuity plugin's guard is %s: run site_role "
                    "with state=%s to align them" % (role, guard, role))


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    spec = jolokia_argument_spec()
    spec.update(
        client_acceptors=dict(type="list", elements="str", required=True),
        state=dict(type="str", choices=["query", "active", "passive"], default="query"),
        broker_xml=dict(type="path"),
        allow_unreachable=dict(type="bool", default=False),
        persist_only=dict(type="bool", default=False),
        client_endpoints=dict(type="list", elements="str", default=[]),
        wait_timeout=dict(type="float", default=30.0),
    )
    return dict(argument_spec=spec, supports_check_mode=True)


def run_module(module):
    p = module.params
    acceptors = p["client_acceptors"]
    if not acceptors:
        module.fail_json(msg="client_acceptors must name at least one acceptor that serves clients")
    for endpoint in p["client_endpoints"]:
        try:
            listeners.parse(endpoint)
        except ValueError as exc:
            module.fail_json(msg="client_endpoints: %s" % exc)
    if p["wait_timeout"] < 0:
        module.fail_json(msg="wait_timeout must be >= 0 seconds (got %s)" % p["wait_timeout"])
    site = switch.Site(p.get("broker_name") or "site", collector_from_params(p), acceptors, p["broker_xml"])
    result = dict(changed=False)
    diff = None
    if p["persist_only"]:
        _persist_only(module, result)

    try:
        snap = site.settled_snapshot(reachable_or_not=True)
        role_before = switch.role_of(snap, acceptors)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    except jolokia.JolokiaError as exc:
        fail_on_error(module, exc, "reading the acceptors")
    plugin_before = _plugin_role(snap)
    standby = roles.is_standby(snap)
    result.update(role_before=role_before, role=role_before, reachable=snap.get("reachable", True),
                  plugin_role_before=plugin_before, plugin_role=plugin_before, ha=roles.ha_state(snap))
    result["live"] = result["reachable"] and not standby
    if not result["reachable"]:
        result["error"] = snap.get("error")
    else:
        result["version"] = snap.get("version")
        result["acceptors"] = switch.acceptor_states(snap)

    try:
        if not result["reachable"]:
            if not p["allow_unreachable"]:
                module.fail_json(msg="Jolokia at %s cannot be reached: %s (set allow_unreachable to report the site "
                                     "as unreachable, and with state=passive to fence it in broker_xml)"
                                     % (p["url"], snap.get("error")), **result)
            if p["state"] == "active":
                module.fail_json(msg="cannot activate a site whose broker cannot be reached", **result)
            if p["state"] == "passive" and p["broker_xml"]:
                fence = switch.persist_fence(p["broker_xml"], acceptors, False, module.check_mode)
                result["changed"] = fence["changed"]
                diff = fence
                _persist_plugin_role(module, p["broker_xml"], result)
        elif standby:
            # An HA backup standing by has no acceptor to stop or start: the fence in its broker.xml (and its
            # plugin's state file) decides whether it serves when it becomes live (docs/ha.md).
            if p["state"] != "query" and p["broker_xml"]:
                fence = switch.persist_fence(p["broker_xml"], acceptors, p["state"] == "active", module.check_mode)
                result["changed"] = fence["changed"]
                diff = fence
                _persist_plugin_role(module, p["broker_xml"], result, p["state"])
        elif p["state"] == "passive":
            # switch.deactivate: the acceptors first (their clients are disconnected, the failure clients fail over
            # on), then the guard, which refuses clients that reach the site through an acceptor left open
            done = switch.deactivate(site, result["acceptors"], module.check_mode, snapshot=snap)
            result["changed"] = result["changed"] or done["changed"]
            result["plugin_role"] = done["guard"]["role"]
            diff = done["fence"]
            result["role"] = roles.PASSIVE
        elif p["state"] == "active":
            # the guard turns active first (switch.activate): the first client through the opened acceptors must not
            # be refused
            done = switch.activate(site, result["acceptors"], switch.version_tuple(snap), p["wait_timeout"],
                                   check_mode=module.check_mode, snapshot=snap)
            result["changed"] = result["changed"] or done["changed"]
            result["plugin_role"] = done["guard"]["role"]
            if done["started"]:
                result["method"] = done["method"]
            diff = done["fence"]
            result["role"] = roles.ACTIVE
        if result["reachable"] and not standby and result["changed"] and not module.check_mode:
            result["acceptors"] = site.settled_acceptors()
            result["role"] = roles.derive_role(result["acceptors"], acceptors)
        if p["broker_xml"]:
            result["persisted_role"] = (roles.persisted_role(diff["after"], acceptors) if diff
                                        else _persisted(p["broker_xml"], acceptors))
    except (OSError, ValueError) as exc:
        module.fail_json(msg="broker.xml %s: %s" % (p["broker_xml"], exc), **result)
    except jolokia.JolokiaError as exc:
        fail_on_error(module, exc, "changing the client acceptors", **result)

    if p["client_endpoints"]:
        _probe_listeners(module, result)
    if p["state"] == "passive" and p["broker_xml"]:
        role = result["role"] if result["reachable"] else roles.UNREACHABLE
        result["fenced"], result["fence_reason"] = roles.fence_proven(role, result.get("persisted_role"),
                                                                      result.get("listeners"))
    if p["state"] == "query":
        _warn_on_disagreement(module, result)
    if module._diff and diff and diff["changed"]:
        result["diff"] = dict(before=diff["before"], after=diff["after"],
                              before_header=diff["path"], after_header=diff["path"])
    module.exit_json(**result)


def _probe_listeners(module, result):
    """Who accepts connections on the client endpoints now; after a passive fence, wait (wait_timeout) for them to
    close -- a 2.43+ broker applies a persisted fence at its next configuration reload -- and judge the fence."""
    p = module.params
    connect_timeout = min(float(p["timeout"]), 5.0)
    fencing = p["state"] == "passive" and not module.check_mode
    if fencing:
        found = listeners.wait_closed(p["client_endpoints"], p["wait_timeout"], connect_timeout=connect_timeout)
    else:
        found = listeners.probe_all(p["client_endpoints"], connect_timeout)
    result["listeners"] = found
    result["accepting_clients"] = listeners.accepting(found)


def _persist_only(module, result):
    """persist_only: the role in broker.xml and the plugin's state file, nothing over Jolokia."""
    p = module.params
    if p["state"] == "query" or not p["broker_xml"]:
        module.fail_json(msg="persist_only needs broker_xml and state=active or state=passive (got state=%s, "
                             "broker_xml=%s)" % (p["state"], p["broker_xml"]))
    try:
        fence = switch.persist_fence(p["broker_xml"], p["client_acceptors"], p["state"] == "active", module.check_mode)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="broker.xml %s: %s" % (p["broker_xml"], exc))
    result.update(changed=fence["changed"], role=None, role_before=None, reachable=None, live=None, ha=None,
                  plugin_role=None, plugin_role_before=None,
                  persisted_role=roles.persisted_role(fence["after"], p["client_acceptors"]))
    _persist_plugin_role(module, p["broker_xml"], result, p["state"])
    if module._diff and fence["changed"]:
        result["diff"] = dict(before=fence["before"], after=fence["after"], before_header=fence["path"],
                              after_header=fence["path"])
    module.exit_json(**result)


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
