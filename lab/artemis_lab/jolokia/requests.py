"""Jolokia request forms: GET path -> request dict (with Jolokia's `!` escaping), argument conversion."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

KNOWN_TYPES = ("read", "write", "exec", "search", "list", "version")


class UnknownType(Exception):
    """Jolokia answers these with HTTP 400 text/plain."""

    def __init__(self, name: str):
        super().__init__(f"No type with name '{name}' exists")


def split_path(path: str) -> list[str]:
    """Split on `/` except `!/`; `!!` is a literal `!` (Jolokia path escaping)."""
    parts, buf, i = [], [], 0
    while i < len(path):
        ch = path[i]
        if ch == "!" and i + 1 < len(path):
            buf.append(path[i + 1])
            i += 2
            continue
        if ch == "/":
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    parts.append("".join(buf))
    return parts


def _get_arg(text: str) -> Any:
    if text == "[null]":
        return None
    if text == '""':
        return ""
    return text


def from_get_path(path: str, query: dict[str, str]) -> dict[str, Any]:
    parts = [p for p in split_path(unquote(path))]
    while parts and parts[-1] == "":
        parts.pop()
    while parts and parts[0] == "":
        parts.pop(0)
    if not parts:
        return {"type": "version"}
    kind, rest = parts[0], parts[1:]
    req: dict[str, Any] = {"type": kind}
    if kind == "read":
        if rest:
            req["mbean"] = rest[0]
        if len(rest) > 1:
            attrs = rest[1].split(",")
            req["attribute"] = attrs if len(attrs) > 1 else attrs[0]
        if len(rest) > 2:
            req["path"] = "/".join(rest[2:])
    elif kind == "write":
        req.update(zip(("mbean", "attribute", "value"), rest[:3], strict=False))
        if len(rest) > 3:
            req["path"] = "/".join(rest[3:])
    elif kind == "exec":
        req.update(zip(("mbean", "operation"), rest[:2], strict=False))
        req["arguments"] = [_get_arg(a) for a in rest[2:]]
    elif kind == "search":
        if rest:
            req["mbean"] = rest[0]
    elif kind == "list":
        if rest:
            req["path"] = "/".join(p.replace("/", "!/") for p in rest)
    elif kind != "version":
        raise UnknownType(kind)
    if "maxDepth" in query:
        req.setdefault("config", {})["maxDepth"] = query["maxDepth"]
    return req


def parse_body(body: bytes) -> Any:
    return json.loads(body.decode("utf-8"))


class ArgumentError(Exception):
    def __init__(self, java_class: str, message: str):
        super().__init__(message)
        self.java_class = java_class
        self.message = message


def convert(value: Any, java_type: str) -> Any:
    """JSON argument -> Python value for a Java parameter type, failing like Jolokia's converters."""
    if value is None:
        if java_type in ("int", "long", "boolean", "double", "float", "short"):
            raise ArgumentError("java.lang.IllegalArgumentException",
                                f"Cannot convert null to primitive type {java_type}")
        return None
    if java_type in ("int", "long", "short", "java.lang.Integer", "java.lang.Long"):
        if isinstance(value, bool):
            raise ArgumentError("java.lang.NumberFormatException", f'For input string: "{str(value).lower()}"')
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        try:
            return int(str(value).strip())
        except ValueError:
            raise ArgumentError("java.lang.NumberFormatException", f'For input string: "{value}"') from None
    if java_type in ("double", "float", "java.lang.Double"):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ArgumentError("java.lang.NumberFormatException", f'For input string: "{value}"') from None
    if java_type in ("boolean", "java.lang.Boolean"):
        if isinstance(value, bool):
            return value
        return str(value).strip().lower() == "true"  # Boolean.parseBoolean
    if java_type == "java.lang.String":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, dict | list):
            return json.dumps(value)
        return str(value)
    return value
