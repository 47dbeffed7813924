"""The TCP probe of client acceptor endpoints (module_utils/listeners.py) on real sockets of this machine, and the
fence rule that uses it (site_role.fence_proven)."""

from __future__ import annotations

import socket

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import listeners
from ansible_collections.continuity.artemis.plugins.module_utils import site_role as roles


@pytest.fixture
def listening():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.fixture
def closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # bound then closed: nothing listens there now
    return f"127.0.0.1:{port}"


@pytest.mark.parametrize("text, expected", [
    ("10.0.0.5:61616", ("10.0.0.5", 61616)),
    ("amqp://broker.example.com:5672", ("broker.example.com", 5672)),
    ("tcp://[::1]:61616?sslEnabled=true", ("::1", 61616)),
])
def test_parse(text, expected):
    assert listeners.parse(text) == expected


@pytest.mark.parametrize("text", ["", "host", "amqp://host", "host:0", "host:70000"])
def test_parse_refuses(text):
    with pytest.raises(ValueError, match="expected host:port"):
        listeners.parse(text)


def test_open_refused_and_unknown(listening, closed_port):
    found = listeners.probe_all([listening, closed_port, "unresolvable.invalid:61616"], timeout=1.0)
    assert [r["state"] for r in found] == [listeners.OPEN, listeners.REFUSED, listeners.UNKNOWN]
    assert listeners.accepting(found) == [listening]
    assert not listeners.all_refused(found) and listeners.all_refused(found[1:2]) and not listeners.all_refused([])


def test_wait_closed_returns_as_soon_as_nothing_accepts(closed_port):
    slept = []
    found = listeners.wait_closed([closed_port], timeout=30, sleeper=slept.append)
    assert slept == [] and found[0]["state"] == listeners.REFUSED


def test_wait_closed_gives_up_after_the_timeout(listening):
    now = [0.0]
    found = listeners.wait_closed([listening], timeout=2, interval=0.5, clock=lambda: now[0],
                                  sleeper=lambda s: now.__setitem__(0, now[0] + s))
    assert found[0]["state"] == listeners.OPEN and now[0] == 2.0


REFUSED = {"endpoint": "h:1", "state": "refused", "error": "refused"}
OPEN = {"endpoint": "h:2", "state": "open", "error": None}
TIMEOUT = {"endpoint": "h:3", "state": "unknown", "error": "timeout"}


@pytest.mark.parametrize("role, persisted, found, fenced, why", [
    # the case: Jolokia down, file edited, the broker still serves -> not fenced
    (roles.UNREACHABLE, roles.PASSIVE, [OPEN], False, "h:2 accepts client connections"),
    (roles.UNREACHABLE, roles.PASSIVE, [REFUSED, TIMEOUT], False, "unknown: h:3 (timeout)"),
    (roles.UNREACHABLE, roles.PASSIVE, [], False, "no client endpoint"),
    (roles.UNREACHABLE, roles.PASSIVE, [REFUSED], True, "every client endpoint refuses"),
    (roles.UNREACHABLE, roles.ACTIVE, [REFUSED], False, "would open the client acceptors at a restart"),
    (roles.UNREACHABLE, None, [REFUSED], False, "persisted role None"),
    (roles.PASSIVE, roles.PASSIVE, [], True, "client acceptors stopped"),
    (roles.PASSIVE, roles.PASSIVE, [OPEN], False, "accepts client connections"),
    (roles.STANDBY, roles.PASSIVE, [REFUSED], True, "client acceptors stopped"),
    (roles.MIXED, roles.PASSIVE, [], False, "client acceptors are mixed"),
])
def test_fence_proven(role, persisted, found, fenced, why):
    got, reason = roles.fence_proven(role, persisted, found)
    assert got is fenced and why in reason, reason
