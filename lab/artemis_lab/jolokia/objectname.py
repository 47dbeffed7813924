"""JMX ObjectName parsing, canonical form (keys sorted, values as written) and pattern matching."""

from __future__ import annotations

import re
from dataclasses import dataclass


class MalformedObjectName(ValueError):
    pass


@dataclass(frozen=True)
class ObjectName:
    domain: str
    props: tuple[tuple[str, str], ...]  # sorted (key, raw value incl. quotes)
    property_pattern: bool = False  # trailing `,*`

    @property
    def is_pattern(self) -> bool:
        return self.property_pattern or _has_wildcard(self.domain) or any(_has_wildcard(v) for _, v in self.props)

    @property
    def canonical(self) -> str:
        keys = ",".join(f"{k}={v}" for k, v in self.props)
        if self.property_pattern:
            keys = f"{keys},*" if keys else "*"
        return f"{self.domain}:{keys}"

    def get(self, key: str) -> str | None:
        raw = dict(self.props).get(key)
        return unquote(raw) if raw is not None else None

    def matches(self, name: ObjectName) -> bool:
        """True when the concrete `name` is selected by this (pattern) name."""
        if not _wild_match(self.domain, name.domain):
            return False
        theirs = dict(name.props)
        for key, value in self.props:
            if key not in theirs or not _wild_match(value, theirs[key]):
                return False
        return self.property_pattern or len(theirs) == len(self.props)


def quote(value: str) -> str:
    """javax.management.ObjectName.quote()."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("*", "\\*").replace("?", "\\?")
    return '"' + escaped.replace("\n", "\\n") + '"'


def unquote(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        out, i, inner = [], 0, raw[1:-1]
        while i < len(inner):
            ch = inner[i]
            if ch == "\\" and i + 1 < len(inner):
                nxt = inner[i + 1]
                out.append("\n" if nxt == "n" else nxt)
                i += 2
                continue
            out.append(ch)
            i += 1
        return "".join(out)
    return raw


def _has_wildcard(raw: str) -> bool:
    i = 0
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
            continue
        if raw[i] in "*?":
            return True
        i += 1
    return False


def _wild_match(pattern: str, value: str) -> bool:
    if not _has_wildcard(pattern):
        return pattern == value
    regex, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            regex.append(re.escape(pattern[i : i + 2]))
            i += 2
            continue
        regex.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
        i += 1
    return re.fullmatch("".join(regex), value, re.DOTALL) is not None


def _split_props(text: str) -> list[str]:
    parts, buf, in_quote, i = [], [], False, 0
    while i < len(text):
        ch = text[i]
        if in_quote and ch == "\\" and i + 1 < len(text):
            buf.append(text[i : i + 2])
            i += 2
            continue
        if ch == '"':
            in_quote = not in_quote
        if ch == "," and not in_quote:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    if in_quote:
        raise MalformedObjectName("Unterminated quoted value")
    parts.append("".join(buf))
    return parts


def parse(text: str) -> ObjectName:
    if ":" not in text:
        raise MalformedObjectName(f"Domain part must be specified: {text}")
    domain, _, rest = text.partition(":")
    if not rest:
        raise MalformedObjectName("Key properties cannot be empty")
    props: dict[str, str] = {}
    pattern = False
    for part in _split_props(rest):
        if part == "*":
            pattern = True
            continue
        if "=" not in part:
            raise MalformedObjectName(f"Unterminated key property part: {part}")
        key, _, value = part.partition("=")
        if not key or key in props:
            raise MalformedObjectName(f"Invalid or duplicate key: {key}")
        if value == "":
            raise MalformedObjectName(f"Invalid value for key {key}")
        props[key] = value
    return ObjectName(domain, tuple(sorted(props.items())), pattern)


def build(domain: str, **props: str) -> ObjectName:
    return ObjectName(domain, tuple(sorted(props.items())))
