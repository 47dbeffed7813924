# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Runbook executions and the runbook overhead the RTO estimate adds to the drain time (``lag.rto_estimate``).

The agent and the pipeline both call this module, so they estimate the RTO on the same overhead:

* :func:`executions` groups phase records into runbook executions (phase records carry no execution id).
* :func:`switch_overhead`: one switch's overhead is its OBSERVED RTO (switch start to the first message
  received on the new active site, the RTO the SLA targets) minus the drain time its backlog needed. Not the
  runbook's phase span: phases that run after clients are served again (sealing the old site, checks) would
  count, and a client's reconnect delay after the last phase would not, so a span predicts another number than
  the RTO it is compared with.
* :func:`overhead_estimate`: the overhead in use is the LARGEST of the :data:`RECENT_SWITCHES` newest switches of
  the kind. Runbook overhead varies from run to run (a quiesce that waits for clients took 4-5 s in one
  rehearsal and 0.05 s in others); an RTO estimate for an SLA must not rest on the luckiest run (a median
  would), and only the newest count, so a runbook made faster shows within three switches.

Pure logic, standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

#: How many of the newest switches of a kind the overhead is taken from.
RECENT_SWITCHES = 3


def executions(phases: Iterable[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Phase records grouped into executions: ``[{"run_id", "runbook", "execution", "phases"}]``.

    Per run and runbook, phases in start order (then by name); a phase name seen again starts the next execution
    (a rehearsal runs the swapover there and back). ``execution`` counts from 1 per run and runbook. Phases
    without ``start_ts`` are not part of any execution. Sorted by run, runbook, execution.
    """
    by_key: Dict[tuple, list] = {}
    for p in phases:
        if p.get("start_ts") is not None:
            by_key.setdefault((p.get("run_id") or "", p.get("runbook") or ""), []).append(p)
    out: List[Dict[str, Any]] = []
    for (run_id, runbook), items in sorted(by_key.items()):
        groups: list = [[]]
        for p in sorted(items, key=lambda r: (float(r["start_ts"]), r.get("phase") or "")):
            if any(q.get("phase") == p.get("phase") for q in groups[-1]):
                groups.append([])
            groups[-1].append(p)
        out.extend({"run_id": run_id, "runbook": runbook, "execution": n, "phases": g}
                   for n, g in enumerate(groups, 1))
    return out


def completed(execution: Mapping[str, Any]) -> bool:
    """Every phase ended and none failed or rolled back: the execution measured a complete switch."""
    return all(p.get("end_ts") is not None and p.get("decision") not in ("fail", "rollback")
               for p in execution["phases"])


def active_site(roles: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The one site whose role is ``active``, else None (none, or two: an interrupted switch)."""
    active = sorted(site for site, role in (roles or {}).items() if role == "active")
    return active[0] if len(active) == 1 else None


def sites_switched(execution: Mapping[str, Any]) -> tuple:
    """``(old, new)`` active site of an execution: the first known in its phases' ``roles_before``, the last known
    in their ``roles_after`` (None when unknown)."""
    phases = execution["phases"]
    before = next((active_site(p.get("roles_before")) for p in phases if active_site(p.get("roles_before"))), None)
    after = next((active_site(p.get("roles_after")) for p in reversed(phases) if active_site(p.get("roles_after"))),
                 None)
    return before, after


def switch_overhead(rto_seconds: Optional[float], drain_seconds: Optional[float]) -> Optional[float]:
    """One switch's runbook overhead: its observed RTO minus the drain time it started with (never below 0);
    None when the RTO was not observed (no message received on the new site)."""
    if rto_seconds is None:
        return None
    return max(0.0, float(rto_seconds) - float(drain_seconds or 0.0))


def overhead_estimate(history: Sequence[Optional[float]], recent: int = RECENT_SWITCHES) -> Optional[float]:
    """The overhead to add to a drain time: the largest of the ``recent`` newest observed overheads (``history``
    oldest first; unobserved ones, None, are skipped). None without any observation."""
    observed = [float(h) for h in history if h is not None]
    return max(observed[-recent:]) if observed else None
