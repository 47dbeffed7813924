"""Pure checks used to explain a bad evidence record (no Spark here).

Spark flags a record whose JSON does not fit the explicit schema; this module says which field is wrong, for
the few flagged records only (the explanation runs as a Python UDF after the filter).
"""

from __future__ import annotations

import json
from typing import Any

from continuity_pipeline.layout import LAYOUT, FieldType

# The flat record's field types, derived from the JSON Schema (``layout``): no pyspark needed here.
FIELD_TYPES: dict[str, FieldType] = LAYOUT.types


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
    """Fields of ``obj`` whose JSON type the evidence schema does not allow (null is always allowed here).
    String and free-form JSON fields accept any value: Spark keeps its JSON text."""
    problems: list[str] = []
    for key in sorted(obj):
        ftype = FIELD_TYPES.get(key)
        if ftype is not None and obj[key] is not None:
            problems += _problems(key, obj[key], ftype)
    return problems


def _problems(key: str, value: Any, ftype: FieldType) -> list[str]:
    got = json.dumps(value)[:40]
    if ftype.name == "long" and not _is_int(value):
        return [f"{key} must be an integer, got {got}"]
    if ftype.name == "double" and not _is_number(value):
        return [f"{key} must be a number, got {got}"]
    if ftype.name == "boolean" and not isinstance(value, bool):
        return [f"{key} must be true or false, got {got}"]
    if ftype.name == "string_map" and not (isinstance(value, dict) and all(isinstance(v, str)
                                                                             for v in value.values())):
        return [f"{key} must be an object of strings (such as site -> role)"]
    if ftype.name == "string_list" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return [f"{key} must be a list of strings"]
    if ftype.name == "struct":
        if not isinstance(value, dict):
            return [f"{key} must be an object"]
        return [p for name, sub in ftype.fields if value.get(name) is not None
                for p in _problems(f"{key}.{name}", value[name], sub)]
    return []
