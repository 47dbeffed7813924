# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Artemis JMX ObjectName builders and a parser for the names Jolokia returns.

Artemis registers its MBeans with QUOTED values (``broker="dc1"``) and lower-case routing types
(ARTEMIS-FACTS section 4). Quoting follows ``javax.management.ObjectName.quote``: the value is wrapped in
double quotes and ``"``, ``\\``, ``*``, ``?`` and newline are backslash-escaped, so names such as
``$ACTIVEMQ_ARTEMIS_MIRROR_DC2`` or ``a*b`` are never read as patterns. Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from typing import Dict, Optional, Tuple

DOMAIN = "org.apache.activemq.artemis"

ROUTING_TYPES = ("anycast", "multicast")

_QUOTE_ESCAPES = {'"': '\\"', "\\": "\\\\", "*": "\\*", "?": "\\?", "\n": "\\n"}
_UNQUOTE_ESCAPES = {'"': '"', "\\": "\\", "*": "*", "?": "?", "n": "\n"}


class ObjectNameError(ValueError):
    """A name that cannot be parsed or a value that cannot be used in an ObjectName."""


def quote(value: str) -> str:
    """Quote an ObjectName value like ``ObjectName.quote``."""
    if value is None:
        raise ObjectNameError("ObjectName value must not be None")
    return '"' + "".join(_QUOTE_ESCAPES.get(ch, ch) for ch in str(value)) + '"'


def unquote(value: str) -> str:
    """Reverse :func:`quote`; an unquoted value is returned unchanged."""
    if len(value) < 2 or not (value.startswith('"') and value.endswith('"')):
        return value
    out = []
    body = value[1:-1]
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            if i + 1 >= len(body) or body[i + 1] not in _UNQUOTE_ESCAPES:
                raise ObjectNameError("bad escape in quoted ObjectName value %r" % value)
            out.append(_UNQUOTE_ESCAPES[body[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _routing(routing_type: str) -> str:
    rt = (routing_type or "").lower()
    if rt not in ROUTING_TYPES:
        raise ObjectNameError("routing type must be anycast or multicast, not %r" % routing_type)
    return rt


def broker(broker_name: str) -> str:
    """``org.apache.activemq.artemis:broker="<B>"``"""
    return "%s:broker=%s" % (DOMAIN, quote(broker_name))


def address(broker_name: str, address_name: str) -> str:
    """Address MBean name."""
    return "%s,component=addresses,address=%s" % (broker(broker_name), quote(address_name))


def queue(broker_name: str, address_name: str, queue_name: str, routing_type: str = "anycast") -> str:
    """Queue MBean name (routing type lower-case, as Artemis registers it)."""
    return "%s,subcomponent=queues,routing-type=%s,queue=%s" % (
        address(broker_name, address_name), quote(_routing(routing_type)), quote(queue_name))


def acceptor(broker_name: str, acceptor_name: str) -> str:
    """Acceptor MBean name."""
    return "%s,component=acceptors,name=%s" % (broker(broker_name), quote(acceptor_name))


def broker_connection(broker_name: str, connection_name: str) -> str:
    """Outgoing broker-connection MBean name (Artemis 2.39+)."""
    return "%s,component=broker-connections,name=%s" % (broker(broker_name), quote(connection_name))


def continuity(broker_name: str) -> str:
    """The continuity broker plugin's MBean (plugin/, docs/plugin.md)."""
    return "%s,component=continuity" % broker(broker_name)


# Patterns for search and wildcard reads. ``,*`` makes a property-list pattern (more keys allowed); without it
# the key set must match exactly, which keeps the address pattern from also matching queue MBeans.
def all_brokers() -> str:
    return "%s:broker=*" % DOMAIN


def all_addresses(broker_name: str) -> str:
    return "%s,component=addresses,address=*" % broker(broker_name)


def all_queues(broker_name: str) -> str:
    return "%s,component=addresses,address=*,subcomponent=queues,*" % broker(broker_name)


def all_acceptors(broker_name: str) -> str:
    return "%s,component=acceptors,name=*" % broker(broker_name)


def all_broker_connections(broker_name: str) -> str:
    return "%s,component=broker-connections,name=*" % broker(broker_name)


def parse(name: str) -> Tuple[str, Dict[str, str]]:
    """Split ``domain:k=v,k2="quoted, value"`` into ``(domain, {key: unquoted value})``.

    Commas and ``=`` inside quoted values are respected; keys keep their order of appearance (Jolokia
    returns canonical names with keys sorted, the builders above use Artemis' registration order).
    """
    if ":" not in name:
        raise ObjectNameError("not an ObjectName (no domain): %r" % name)
    domain, rest = name.split(":", 1)
    props: Dict[str, str] = {}
    i = 0
    n = len(rest)
    while i < n:
        eq = rest.find("=", i)
        if eq < 0:
            if rest[i:] == "*":  # property-list pattern marker
                break
            raise ObjectNameError("key without value in %r" % name)
        key = rest[i:eq]
        j = eq + 1
        if j < n and rest[j] == '"':
            k = j + 1
            while k < n:
                if rest[k] == "\\":
                    k += 2
                    continue
                if rest[k] == '"':
                    break
                k += 1
            if k >= n:
                raise ObjectNameError("unterminated quoted value in %r" % name)
            raw = rest[j:k + 1]
            props[key] = unquote(raw)
            i = k + 1
        else:
            k = rest.find(",", j)
            k = n if k < 0 else k
            props[key] = rest[j:k]
            i = k
        if i < n:
            if rest[i] != ",":
                raise ObjectNameError("expected ',' at %d in %r" % (i, name))
            i += 1
    return domain, props


def kind(name: str) -> Optional[str]:
    """Classify an Artemis ObjectName: broker, address, queue, acceptor, broker-connection, continuity (the
    continuity plugin), or ``None``."""
    try:
        domain, props = parse(name)
    except ObjectNameError:
        return None
    if domain != DOMAIN or "broker" not in props:
        return None
    component = props.get("component")
    if component is None and len(props) == 1:
        return "broker"
    if component == "addresses":
        if props.get("subcomponent") == "queues" and "queue" in props:
            return "queue"
        if set(props) == {"broker", "component", "address"}:
            return "address"
        return None
    if component == "acceptors" and "name" in props:
        return "acceptor"
    if component == "broker-connections" and "name" in props:
        return "broker-connection"
    if component == "continuity" and len(props) == 2:
        return "continuity"
    return None
