"""Pure checks used to explain a bad evidence record (no Spark here).

Spark flags a record whose JSON does not fit the explicit schema; this module says which field is wrong, for
the few flagged records only (the explanation runs as a Python UDF after the filter).
"""

from __future__ import annotations

import json
from typing import Any

# Type names of schemas.RECORD_FIELDS, kept as plain strings so this module imports without pyspark.
LONG_FIELDS = frozenset({
    "seq", "attempt", "size", "delivery_count", "records", "backlog", "pending_acks", "queue_diff_count",
    "passive_consumers", "at_risk_events",
})
DOUBLE_FIELDS = frozenset({
    "ts", "send_ts", "confirm_ts", "recv_ts", "ack_ts", "add_rate", "drain_rate", "lag_seconds",
    "rpo_messages_est", "rpo_seconds_est", "rto_seconds_est", "sent_ts", "seen_ts", "latency_seconds",
    "start_ts", "end_ts", "incident_ts", "detected_ts", "at_risk_seconds",
})
BOOL_FIELDS = frozenset({"durable", "redelivered", "clean", "reachable", "started", "connected"})
ROLE_FIELDS = frozenset({"roles_before", "roles_after"})
TARGET_FIELDS = {"rpo_seconds": "number", "rpo_messages": "integer", "rto_seconds": "number"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def explain(text: str | None) -> str:
    """Why a JSON line does not parse into the evidence schema, as one sentence."""
    if text is None:
        return "empty record"
    try:
        obj = json.loads(text)
    except ValueError as exc:
        return f"not valid JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(obj, dict):
        return f"not a JSON object (a JSON {type(obj).__name__})"
    problems = type_problems(obj)
    return "; ".join(problems) if problems else "does not fit the evidence schema"


def type_problems(obj: dict[str, Any]) -> list[str]:
    """Fields of ``obj`` whose JSON type the evidence schema does not allow (null is always allowed here)."""
    problems: list[str] = []
    for key in sorted(obj):
        value = obj[key]
        if value is None:
            continue
        if key in LONG_FIELDS and not _is_int(value):
            problems.append(f"{key} must be an integer, got {json.dumps(value)[:40]}")
        elif key in DOUBLE_FIELDS and not _is_number(value):
            problems.append(f"{key} must be a number, got {json.dumps(value)[:40]}")
        elif key in BOOL_FIELDS and not isinstance(value, bool):
            problems.append(f"{key} must be true or false, got {json.dumps(value)[:40]}")
        elif key in ROLE_FIELDS and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            problems.append(f"{key} must be an object of site -> role")
        elif key == "notes" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            problems.append("notes must be a list of strings")
        elif key == "targets":
            if not isinstance(value, dict):
                problems.append("targets must be an object")
            else:
                for tkey, ttype in TARGET_FIELDS.items():
                    tval = value.get(tkey)
                    if tval is not None and not (_is_int(tval) if ttype == "integer" else _is_number(tval)):
                        problems.append(f"targets.{tkey} must be an {ttype}")
    return problems
