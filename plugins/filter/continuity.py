# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Renderings of runbook results for operators reading a job log (the table itself: module_utils/status_report)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.continuity.artemis.plugins.module_utils.site_role import pair_state
from ansible_collections.continuity.artemis.plugins.module_utils.status_report import (
    number_text,
    roles_text,
    sla_check,
    status_rows,
    status_table,
)


def _num(value, fmt="%.2f"):
    return number_text(value, fmt, missing="n/a")


def status_line(direction):
    """`dc1 -> dc2 [DC2]: connected, backlog 0 events, lag 0.00 s, pending acks 0, 0 queue diffs, RPO ~0.00 s`."""
    d = direction or {}
    head = "%s -> %s" % (d.get("site"), d.get("peer"))
    if not d.get("reachable", True):
        return "%s: UNREACHABLE (%s)" % (head, d.get("error"))
    state = "connected" if d.get("connected") else ("stopped" if d.get("started") is False else "NOT CONNECTED")
    line = "%s [%s]: %s, backlog %s events, lag %s s, pending acks %s, %s queue diffs, RPO ~%s s / %s msgs" % (
        head, d.get("connection"), state, _num(d.get("backlog")), _num(d.get("lag_seconds")),
        _num(d.get("pending_acks")), _num(d.get("queue_diff_count")), _num(d.get("rpo_seconds_est")),
        _num(d.get("rpo_messages_est"), "%.0f"))
    if d.get("passive_consumers"):
        line += ", %s CONSUMERS ON PASSIVE %s" % (d["passive_consumers"], d.get("peer"))
    return line


def check_line(check):
    """`[ok] lag: lag seconds [...] <= 5` / `[BREACH] ...`."""
    c = check or {}
    ok = c.get("ok") in (True, "True", "true")
    return "[%s] %s: %s" % ("ok" if ok else "BREACH", c.get("name"), c.get("detail"))


# Connection keys of a site info (playbooks/sites.yml) the agent's jolokia entry takes as they are: an https site
# (broker_web_tls) brings its origin, CA file and validate_certs along with its URL.
_AGENT_TLS_KEYS = ("origin", "validate_certs", "ca_path")


def _agent_jolokia(s):
    out = {"url": s.get("jolokia_url"), "username": s.get("username"), "password": s.get("password")}
    out.update({k: s[k] for k in _AGENT_TLS_KEYS if s.get(k) is not None})
    return out


def agent_site(site):
    """A runbook site (playbooks/sites.yml) as a continuity agent `sites.<name>` entry (docs/agent.md).

    Given the list of the site's broker hosts' infos (an HA pair, primary first), the entry lists them as
    ``brokers``: the agent reads each one and takes the site's state from the live one."""
    if isinstance(site, (list, tuple)):
        infos = [i or {} for i in site]
        if len(infos) > 1:
            return {"brokers": [{"broker_name": i.get("broker_name"), "jolokia": _agent_jolokia(i)} for i in infos],
                    "client_acceptors": list(infos[0].get("client_acceptors") or [])}
        site = infos[0] if infos else {}
    s = site or {}
    return {"jolokia": _agent_jolokia(s), "broker_name": s.get("broker_name"),
            "client_acceptors": list(s.get("client_acceptors") or [])}


_JOLOKIA_KEYS = ("username", "password", *_AGENT_TLS_KEYS)


def agent_sites(hosts):
    """``roles/agent`` ``agent_sites`` from the runbooks' site resolution: the ``continuity_site_info`` of every
    broker host (playbooks/sites.yml: a host's site is its group among ``mirror_sites``), in inventory order.
    A site with one host gets ``jolokia_url``/``broker_name``; a site with several (an HA pair, primary first)
    gets ``brokers``, each sampled by the agent (docs/agent.md)."""
    sites = {}
    for info in hosts or []:
        info = info or {}
        sites.setdefault(info.get("name"), []).append(info)
    out = []
    for name, infos in sites.items():
        brokers = [dict({"broker_name": i.get("broker_name"), "jolokia_url": i.get("jolokia_url")},
                        **{k: i.get(k) for k in _JOLOKIA_KEYS if i.get(k) is not None}) for i in infos]
        entry = {"name": name, "client_acceptors": list(infos[0].get("client_acceptors") or [])}
        if len(brokers) == 1:
            entry.update(brokers[0])
        else:
            entry["brokers"] = brokers
        out.append(entry)
    return out


def ha_pair(brokers):
    """A site's brokers (``[{"broker": name, "state": the site_role module's result}]``, inventory order) as
    ``site_role.pair_state`` describes the pair: live broker, takeover, standing by, down, site switch needed.
    A host that could not be reached (no ``reachable`` in its result) is down."""
    facts = []
    for b in brokers or []:
        state = dict((b or {}).get("state") or {})
        facts.append({"broker": (b or {}).get("broker"), "reachable": state.get("reachable") is True,
                      "live": state.get("live") is True, "role": state.get("role"), "ha": state.get("ha")})
    return pair_state(facts)


class FilterModule(object):
    def filters(self):
        return {"status_line": status_line, "check_line": check_line, "agent_site": agent_site, "ha_pair": ha_pair,
                "agent_sites": agent_sites,
                "status_table": status_table, "status_rows": status_rows, "roles_text": roles_text,
                "sla_check": sla_check}
