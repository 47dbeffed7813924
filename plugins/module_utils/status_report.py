# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""What an operator reads about the two sites: the status runbook's table and one-line role summaries.

Pure functions (standard library only) used by the collection's filters (plugins/filter/continuity.py); the
status runbook prints the table in its task output and publishes the rows with set_stats.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.continuity.artemis.plugins.module_utils import sla

UNKNOWN = "unknown"
COLUMNS = ("site", "role", "broker", "mirror out", "backlog", "lag s", "paused")


def _text(value):
    if value is None or value == "":
        return UNKNOWN
    return str(value)


def number_text(value, fmt="%.2f", missing="-"):
    """A value of a status line or table: floats with ``fmt``, ``missing`` for None."""
    if value is None:
        return missing
    if isinstance(value, float):
        return fmt % value
    return str(value)


def roles_text(roles):
    """`dc1 active, dc2 passive`; a site without a known role is `dc1 unknown`; no roles at all is `unknown`."""
    if not roles:
        return UNKNOWN
    return ", ".join("%s %s" % (site, _text(role)) for site, role in sorted(roles.items()))


def _mirror_state(d):
    if not d.get("reachable", True):
        return "unreadable"
    if d.get("connected"):
        return "connected"
    if d.get("started") is False:
        return "stopped"
    return "NOT CONNECTED"


def _broker(d, role, ha=None):
    if not d:  # no mirror read of this site: only its role says whether it answered
        return "UNREACHABLE" if role == "unreachable" else "-"
    if not d.get("reachable", True):
        return "UNREACHABLE"
    text = "up " + d["broker_version"] if d.get("broker_version") else "up"
    if ha:  # an HA pair: name the broker that serves the site
        text = "%s %s%s" % (ha.get("live_broker"), text, " (backup)" if ha.get("takeover") else "")
    return text


def ha_lines(status):
    """One line per site that is an HA pair (docs/ha.md): which broker serves it, the other's state, and whether a
    site switch is needed (not when a backup took over: the site still serves and mirrors)."""
    lines = []
    for site, ha in sorted(((status or {}).get("ha") or {}).items()):
        live, others = ha.get("live_broker"), ", ".join(ha.get("standby") or []) or None
        down = ", ".join(ha.get("down") or []) or None
        if ha.get("serving") is False:
            text = "%s: no broker of the pair serves (%s): the site is down, see the failover runbook" % (
                site, ", ".join([live, *(ha.get("standby") or []), *(ha.get("down") or [])]))
        elif ha.get("takeover"):
            text = "%s: its backup %s serves (%s down): the site did not fail, no site switch needed" % (
                site, live, down or "the primary")
        else:
            text = "%s: %s serves" % (site, live)
            if others:
                text += ", %s stands by" % others
                sync = ha.get("in_sync") or {}
                if any(v is False for v in sync.values()):  # ReplicaSync false: not a full copy yet
                    text += " (not in sync: %s)" % ", ".join(b for b, v in sorted(sync.items()) if v is False)
                elif sync and all(v is True for v in sync.values()):
                    text += " in sync"
                if ha.get("shared_store"):  # nothing to synchronise: it loads the pair's one store
                    text += " on the shared store"
            if down:
                text += ", %s does not answer (no backup now)" % down
        lines.append(text)
    return lines


def status_rows(status):
    """One row per site of a status report (playbooks/status.yml `continuity_status`): its role now and after a
    restart, whether its broker answers, its outgoing mirror to the peer with backlog, lag and RPO exposure, the
    client queues left paused on it, and the consumers on the peer when the peer is passive."""
    status = status or {}
    roles = status.get("roles") or {}
    persisted = status.get("persisted_roles") or {}
    by_site = {}
    for d in status.get("directions") or []:
        by_site.setdefault(d.get("site"), []).append(d)
    rows = []
    for site in sorted(set(roles) | set(by_site)):
        directions = by_site.get(site) or [{}]
        for d in directions:
            reachable = bool(d) and d.get("reachable", True)
            paused = d.get("paused_queues")
            rows.append({
                "site": site,
                "role": _text(roles.get(site)),
                "after_restart": _text(persisted.get(site)),
                "broker": _broker(d, roles.get(site), (status.get("ha") or {}).get(site)),
                "peer": d.get("peer"),
                "mirror": ("-> %s %s" % (d.get("peer"), _mirror_state(d))) if d else "-",
                "backlog": d.get("backlog") if reachable else None,
                "lag": d.get("lag_seconds") if reachable else None,
                "rpo": d.get("rpo_seconds_est") if reachable else None,
                "paused": None if paused is None else len(paused),
                "paused_queues": paused,
                "passive_consumers": d.get("passive_consumers"),
                "error": d.get("error") if d and not reachable else None,
            })
    return rows


#: SLA target -> how its check's detail names the value, the value's unit and the target's unit.
_SLA_WORDING = {
    "backlog": ("max backlog", " events", ""),
    "lag_seconds": ("max lag", " s", " s"),
    "rpo_seconds": ("RPO at risk", " s", " s"),
    "rpo_messages": ("RPO at risk", " msgs", " msgs"),
    "rto_seconds": ("max RTO estimate", " s", " s"),
    "pending_acks": ("max pending acks", "", ""),
}


def sla_check(directions, target, limit, name=None):
    """One SLA check of the status runbook (``{name, ok, detail}``): every direction's value of ``target`` (a
    name of ``sla.DIRECTION_FIELDS``) judged against ``limit`` by the collection's one rule (``sla.judge``).

    A direction whose value the target covers and nobody measured is a breach (``unknown``, never 0); a live-only
    target (lag, RTO, pending acks) is not judged on a direction whose site could not be read (the reachable
    check reports that site). ``limit`` may be text (``-e name=5``); None or empty means no target."""
    if target not in _SLA_WORDING:
        raise ValueError("unknown SLA target %r (one of %s)" % (target, ", ".join(sorted(_SLA_WORDING))))
    label, unit, limit_unit = _SLA_WORDING[target]
    wanted = None if limit is None or limit == "" else float(limit)
    judged = []
    for d in directions or []:
        verdict = sla.direction_verdicts(d or {}, {target: wanted})[target]
        if verdict != sla.NOT_JUDGED:
            judged.append((d or {}, verdict))
    unknown = ["%s -> %s" % (d.get("site"), d.get("peer")) for d, v in judged if v == sla.UNKNOWN]
    if wanted is None:
        return {"name": name or target, "ok": True, "detail": "%s not judged: no target" % label}
    if unknown:
        value = "unknown (not measured for %s)" % ", ".join(unknown)
    elif judged:
        value = "%s%s" % (max(d.get(sla.DIRECTION_FIELDS[target]) for d, _v in judged), unit)
    else:
        value = "not judged (no mirror read now)"
    return {"name": name or target, "ok": not any(sla.breached(v) for _d, v in judged),
            "detail": "%s %s <= %s%s" % (label, value, limit, limit_unit)}


def _sla_line(checks):
    checks = checks or []
    breaches = [c for c in checks if c.get("ok") not in (True, "True", "true")]
    if not checks:
        return "SLA: not judged"
    if not breaches:
        return "SLA: ok (%d checks)" % len(checks)
    return "SLA: BREACH %s" % "; ".join("%s (%s)" % (c.get("name"), c.get("detail")) for c in breaches)


def status_table(status, checks=None):
    """The status report as aligned text lines: a header, one row per site (its role, and its role after a restart
    when that differs; its broker; its outgoing mirror with backlog and lag; its paused client queues), the errors
    of unreadable sites, then the SLA verdict (the RPO and consumer checks are in it; status_rows has every value)."""
    rows = status_rows(status)
    cells = [list(COLUMNS)]
    for r in rows:
        role = r["role"]
        if r["after_restart"] != r["role"]:
            role += " (%s after a restart)" % r["after_restart"]
        paused = number_text(r["paused"])
        if r["paused"]:
            paused += " (%s%s)" % (", ".join(r["paused_queues"][:3]), ", ..." if r["paused"] > 3 else "")
        cells.append([_text(r["site"]), role, r["broker"], r["mirror"], number_text(r["backlog"]),
                      number_text(r["lag"]), paused])
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in cells]
    for r in rows:
        if r["error"]:
            lines.append("%s: %s" % (r["site"], r["error"]))
    lines.extend(ha_lines(status))
    lines.append(_sla_line(checks))
    return lines
