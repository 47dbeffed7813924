# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Does anything accept connections on a site's client acceptor ports? A plain TCP connect, no protocol.

Jolokia can be down while the broker serves (a web server that failed, a management port firewalled): the role a
site reports over Jolokia then says nothing about its clients. A client acceptor that accepts a TCP connection can
serve clients; one that refuses it (the host answered, nothing listens) cannot. A connect that times out or fails
otherwise proves neither: the port may be filtered on this path only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import socket
import time

OPEN = "open"          # something accepted the connection: the acceptor can serve clients
REFUSED = "refused"    # the host answered and nothing listens there
UNKNOWN = "unknown"    # timed out, unreachable, unresolvable: no evidence either way

_ENDPOINT_RE = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*://)?(?:[^@/]*@)?(?P<host>\[[^\]]+\]|[^:/?]+):(?P<port>\d+)")


def parse(endpoint):
    """``host:port``, ``[v6]:port`` or ``scheme://host:port[/...]`` -> (host, port). ValueError otherwise."""
    match = _ENDPOINT_RE.match(str(endpoint or "").strip())
    if not match or not 0 < int(match.group("port")) < 65536:
        raise ValueError("client endpoint %r: expected host:port or scheme://host:port" % endpoint)
    return match.group("host").strip("[]"), int(match.group("port"))


def probe(endpoint, timeout=2.0):
    """One TCP connect to ``endpoint``: {"endpoint", "state" (open|refused|unknown), "error"}."""
    host, port = parse(endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return {"endpoint": endpoint, "state": OPEN, "error": None}
    except ConnectionRefusedError as exc:
        return {"endpoint": endpoint, "state": REFUSED, "error": str(exc)}
    except (OSError, socket.timeout) as exc:
        return {"endpoint": endpoint, "state": UNKNOWN, "error": "%s: %s" % (type(exc).__name__, exc)}


def probe_all(endpoints, timeout=2.0):
    return [probe(e, timeout) for e in endpoints or []]


def accepting(results):
    """The endpoints that accepted a connection."""
    return [r["endpoint"] for r in results or [] if r.get("state") == OPEN]


def all_refused(results):
    """Every endpoint refused: nothing listens on any client port (False when there is no endpoint)."""
    results = list(results or [])
    return bool(results) and all(r.get("state") == REFUSED for r in results)


def wait_closed(endpoints, timeout, interval=0.5, connect_timeout=2.0, clock=time.monotonic, sleeper=time.sleep):
    """Probe until no endpoint accepts connections or ``timeout`` passed; the last probe's results."""
    deadline = clock() + max(0.0, float(timeout))
    while True:
        results = probe_all(endpoints, connect_timeout)
        if not accepting(results) or clock() >= deadline:
            return results
        sleeper(interval)
