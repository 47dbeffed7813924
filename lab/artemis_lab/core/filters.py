"""A small subset of Artemis filter (JMS selector) syntax for count/remove operations:
`key = 'text'`, `key = 42`, `key <> ...`, joined with AND / OR (no parentheses). Anything else is refused
rather than silently matched."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from artemis_lab import errors
from artemis_lab.core import codec

_TERM = re.compile(r"^\s*([A-Za-z_$][\w.$]*)\s*(=|<>)\s*('(?:[^']|'')*'|-?\d+(?:\.\d+)?|TRUE|FALSE)\s*$", re.I)


def _value(token: str) -> Any:
    if token.startswith("'"):
        return token[1:-1].replace("''", "'")
    if token.upper() in ("TRUE", "FALSE"):
        return token.upper() == "TRUE"
    return float(token) if "." in token else int(token)


def _term(text: str) -> Callable[[dict], bool]:
    m = _TERM.match(text)
    if not m:
        raise errors.IllegalArgument(f"lab filter subset cannot parse: {text}")
    key, op, raw = m.group(1), m.group(2), _value(m.group(3))
    if op == "=":
        return lambda props: key in props and props[key] == raw
    return lambda props: key in props and props[key] != raw


def compile_filter(text: str | None) -> Callable[[Any], bool]:
    if not text or not text.strip():
        return lambda _msg: True
    alternatives = []
    for alt in re.split(r"\s+OR\s+", text, flags=re.I):
        alternatives.append([_term(t) for t in re.split(r"\s+AND\s+", alt, flags=re.I)])

    def match(msg: Any) -> bool:
        props = {str(k): v for k, v in codec.application_properties(msg.raw).items()}
        return any(all(t(props) for t in terms) for terms in alternatives)

    return match
