# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""The one SLA rule: a value against its target.

The continuity agent judges each mirror direction's estimates with it, the pipeline judges each run's and
switch's observations, and the status runbook judges its directions through the ``sla_check`` filter.

One treatment of "unknown": a value the SLA covers that nobody measured is :data:`UNKNOWN`, and UNKNOWN is a
breach. It cannot be proven to be within target, and an operator must never read "RPO within target" when the
RPO was not measured (an unknown value is never counted as 0). Only a missing target, or a target that does
not apply (the lag of a site that cannot be read), is :data:`NOT_JUDGED`.

Pure logic, standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
from typing import Any, Dict, Iterable, Mapping, Optional

PASS = "PASS"
FAIL = "FAIL"
UNKNOWN = "UNKNOWN"  # the target applies, the value is unknown: cannot prove it is met, so a breach
NOT_JUDGED = "n/a"   # no target, or the target does not apply
NO_TARGET = "NO-TARGET"

#: SLA target -> the field of a mirror direction (agent direction, lag_sample, status.yml direction) it judges.
DIRECTION_FIELDS = {
    "rpo_seconds": "rpo_seconds_est",
    "rpo_messages": "rpo_messages_est",
    "rto_seconds": "rto_seconds_est",
    "lag_seconds": "lag_seconds",
    "pending_acks": "pending_acks",
    "backlog": "backlog",
}

#: Targets that describe a live mirror: not judged on a direction whose source site cannot be read (a lost site
#: drains nothing and has no lag). Its backlog and RPO are what a failover would lose: those are judged.
LIVE_ONLY = ("rto_seconds", "lag_seconds", "pending_acks")


def _number(value: Any) -> Optional[float]:
    """A measured number, or None (None, a bool, text, NaN are not measurements)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return float(value)


def judge(value: Any, target: Any) -> str:
    """PASS (value <= target), FAIL (above), UNKNOWN (a target and no value: a breach), NOT_JUDGED (no target)."""
    limit = _number(target)
    if limit is None:
        return NOT_JUDGED
    measured = _number(value)
    if measured is None:
        return UNKNOWN
    return PASS if measured <= limit else FAIL


def breached(verdict: str) -> bool:
    """FAIL and UNKNOWN are breaches; PASS and NOT_JUDGED are not."""
    return verdict in (FAIL, UNKNOWN)


def judge_all(values: Mapping[str, Any], targets: Mapping[str, Any],
              not_applicable: Iterable[str] = ()) -> Dict[str, str]:
    """Target name -> verdict for every name in ``targets``; ``values`` holds the value under the same name.
    Names in ``not_applicable`` are NOT_JUDGED whatever their value."""
    skip = set(not_applicable)
    return {name: NOT_JUDGED if name in skip else judge(values.get(name), limit)
            for name, limit in targets.items()}


def overall(verdicts: Iterable[str]) -> str:
    """FAIL when any verdict is a breach, PASS when at least one passed, else NO_TARGET."""
    verdicts = list(verdicts)
    if any(breached(v) for v in verdicts):
        return FAIL
    return PASS if PASS in verdicts else NO_TARGET


def direction_live(direction: Mapping[str, Any]) -> bool:
    """Whether a direction's source site was read now (``reachable`` not false, not ``stale`` last-known values)."""
    return direction.get("reachable", True) is not False and not direction.get("stale", False)


def direction_verdicts(direction: Mapping[str, Any], targets: Mapping[str, Any]) -> Dict[str, str]:
    """Verdict per target (names of :data:`DIRECTION_FIELDS`) for one mirror direction. On a direction whose
    source site cannot be read, the :data:`LIVE_ONLY` targets are NOT_JUDGED."""
    values = {name: direction.get(field) for name, field in DIRECTION_FIELDS.items()}
    skip = () if direction_live(direction) else LIVE_ONLY
    return judge_all(values, {k: v for k, v in targets.items() if k in DIRECTION_FIELDS}, skip)
