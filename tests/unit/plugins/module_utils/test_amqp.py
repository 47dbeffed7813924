"""Unit tests for plugins/module_utils/amqp.py: pure helpers, and ManagedClient against the in-process broker."""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from proton.reactor import Container

from ansible_collections.continuity.artemis.plugins.module_utils import amqp

sys.path.insert(0, str(Path(__file__).parent))
from amqp_support import MiniBroker

# --- pure helpers ---------------------------------------------------------------------------------------------

def test_parse_endpoints():
    eps = amqp.parse_endpoints(["dc1=amqp://a.example:5673", "amqps://b.example", "c:1234,dc2=d"])
    assert [(e.site, e.url) for e in eps] == [
        ("dc1", "amqp://a.example:5673"), ("b.example:5671", "amqps://b.example:5671"),
        ("c:1234", "amqp://c:1234"), ("dc2", "amqp://d:5672")]
    assert eps[1].tls and not eps[0].tls
    assert amqp.parse_endpoints("x:1", default_site="dc9")[0].site == "dc9"
    assert amqp.parse_endpoint("amqp://[::1]:5672").host == "[::1]"


@pytest.mark.parametrize("bad, needle", [
    ("", "invalid"), ("http://h:80", "unsupported scheme"), ("amqp://h:99999", "invalid port"),
    ("amqp://user:s3cret@h:5672", "credentials in the URL"),
])
def test_parse_endpoint_errors(bad, needle):
    with pytest.raises(amqp.AmqpError) as info:
        amqp.parse_endpoint(bad)
    assert needle in str(info.value) and info.value.kind == amqp.CONFIG
    assert "s3cret" not in str(info.value)


def test_parse_endpoints_empty():
    with pytest.raises(amqp.AmqpError):
        amqp.parse_endpoints([])


def test_redact_url():
    assert amqp.redact_url("amqps://u:pw@h:1") == "amqps://***@h:1"


def test_endpoint_cycle_fails_over_then_backs_off():
    eps = amqp.parse_endpoints(["dc1=a:1", "dc2=b:1"])
    cyc = amqp.EndpointCycle(eps, initial=0.1, factor=2, maximum=0.3)
    seq = [cyc.next_attempt() for _ in range(7)]
    assert [(e.site, d) for e, d in seq] == [
        ("dc1", 0.0), ("dc2", 0.0), ("dc1", 0.1), ("dc2", 0.0), ("dc1", 0.2), ("dc2", 0.0), ("dc1", 0.3)]
    cyc.connected()  # connected to dc1: losing it moves on to dc2 at once, then back-off for dc1
    assert [(e.site, d) for e, d in (cyc.next_attempt(), cyc.next_attempt())] == [("dc2", 0.0), ("dc1", 0.1)]


@pytest.mark.parametrize("name, desc, kind", [
    ("amqp:unauthorized-access", "Authentication failed [mech=PLAIN]", amqp.AUTH),
    ("amqp:unauthorized-access", "Authentication failed [mech=none]", amqp.AUTH),
    ("amqp:not-found", "AMQ119017: Queue orders does not exist", amqp.NOT_FOUND),
    ("amqp:unauthorized-access", "AMQ229032: User: app does not have permission='SEND' on address x",
     amqp.FORBIDDEN),
    ("proton.pythonio", "Connection refused to all addresses", amqp.UNREACHABLE),
    ("proton:io", "Connection refused - on read from 127.0.0.1:5672", amqp.UNREACHABLE),
    ("proton:io", "Name or service not known - on connect", amqp.UNREACHABLE),
    ("proton:io", "Connection reset by peer - on read", amqp.DISCONNECTED),
    ("amqp:connection:forced", "Broker stopped", amqp.DISCONNECTED),
    ("amqp:resource-limit-exceeded", "Address is full", amqp.RESOURCE),
    ("proton:ssl", "certificate verify failed", amqp.TLS),
    ("amqp:internal-error2", "", amqp.PROTOCOL),
    (None, None, amqp.PROTOCOL),
])
def test_classify_condition(name, desc, kind):
    got, message = amqp.classify_condition(name, desc, "dc1 (amqp://h:1)")
    assert got == kind
    assert message.startswith("dc1 (amqp://h:1): ")


def test_connect_kwargs_sasl_and_no_proton_reconnect():
    ep = amqp.parse_endpoint("dc1=amqp://h:1")
    plain = amqp.connect_kwargs(ep, amqp.ClientOptions(user="app", password="pw", heartbeat=5))
    assert plain["allowed_mechs"] == "PLAIN" and plain["user"] == "app" and plain["reconnect"] is False
    assert plain["heartbeat"] == 5.0
    anon = amqp.connect_kwargs(ep, amqp.ClientOptions())
    assert anon["allowed_mechs"] == "ANONYMOUS" and "user" not in anon and "ssl_domain" not in anon
    tls = amqp.connect_kwargs(amqp.parse_endpoint("amqps://h"), amqp.ClientOptions(verify=False))
    assert tls["ssl_domain"] is not None
    assert "pw" not in repr(amqp.ClientOptions(user="app", password="pw"))


def test_tls_with_missing_ca_is_a_clear_error(tmp_path):
    with pytest.raises(amqp.AmqpError) as info:
        amqp.connect_kwargs(amqp.parse_endpoint("amqps://h"), amqp.ClientOptions(ca=str(tmp_path / "none.pem")))
    assert info.value.kind == amqp.TLS and "none.pem" in info.value.message


def test_make_message_always_has_creation_time():
    before = time.time()
    msg = amqp.make_message("x", "id-1", properties={"seq": 1}, durable=False)
    assert before - 0.01 <= msg.creation_time <= time.time() + 0.01
    assert msg.id == "id-1" and msg.properties == {"seq": 1} and msg.durable is False
    assert amqp.make_message("x", "i", creation_time=5.0).creation_time == 5.0
    assert len(amqp.payload(100, "seed")) == 100 and amqp.payload(0) == ""


# --- ManagedClient against the in-process broker ----------------------------------------------------------------

class Sender(amqp.ManagedClient):
    """Sends one message per connection and records what happened."""

    def __init__(self, endpoints, options, address="q", **kw):
        super().__init__(endpoints, options, **kw)
        self.address = address
        self.sites: list[str] = []
        self.lost: list[amqp.AmqpError] = []
        self.failed: amqp.AmqpError | None = None
        self.done = threading.Event()

    def on_ready(self, event):
        self.sent = False
        self.sender = event.container.create_sender(self.connection, self.address)

    def on_sendable(self, event):
        if event.link.credit and not self.sent:
            self.sent = True
            event.link.send(amqp.make_message("hi", "m-1"))

    def on_accepted(self, event):
        self.sites.append(self.endpoint.site)
        self.done.set()
        self.stop()

    def on_lost(self, err):
        self.lost.append(err)

    def on_failed(self, err):
        self.failed = err
        self.done.set()


def run_client(client, timeout=10.0):
    class Boot:
        def on_reactor_init(self, event):
            client.start(event.container)

    container = Container(Boot())
    container.container_id = "test-client"
    t = threading.Thread(target=container.run, daemon=True)
    t.start()
    assert client.done.wait(timeout), "client neither succeeded nor failed in time (hang)"
    container.stop()
    t.join(5)
    return client


def test_failover_to_next_site_when_first_is_fenced():
    with MiniBroker(["dc1", "dc2"]) as b:
        b.fence("dc1")
        eps = amqp.parse_endpoints([f"dc1={b.url('dc1')}", f"dc2={b.url('dc2')}"])
        c = run_client(Sender(eps, amqp.ClientOptions(connect_timeout=3)))
        assert c.failed is None and c.sites == ["dc2"]
        assert c.lost and c.lost[0].kind == amqp.UNREACHABLE and c.lost[0].site == "dc1"
        assert b.depth("dc2", "q") == 1 and b.depth("dc1", "q") == 0


def test_missing_address_is_reported_as_not_found():
    with MiniBroker(["dc1"], auto_create=False) as b:
        eps = amqp.parse_endpoints([f"dc1={b.url('dc1')}"])
        c = run_client(Sender(eps, amqp.ClientOptions(), address="nope", reconnect=False))
        assert c.failed is not None and c.failed.kind == amqp.NOT_FOUND
        assert "nope" in c.failed.message and "dc1" in c.failed.message


def test_refused_credentials_are_reported_as_auth():
    # The in-process broker only offers ANONYMOUS, so a PLAIN client is refused exactly like bad credentials
    # (amqp:unauthorized-access); real PLAIN checks run against the lab broker (tests/traffic/test_lab_*.py).
    with MiniBroker(["dc1"]) as b:
        eps = amqp.parse_endpoints([f"dc1={b.url('dc1')}"])
        c = run_client(Sender(eps, amqp.ClientOptions(user="app", password="wrong"), reconnect=False))
        assert c.failed is not None and c.failed.kind == amqp.AUTH
        assert "wrong" not in c.failed.message


def test_silent_host_times_out_instead_of_hanging():
    # A socket that accepts TCP but never speaks AMQP: what a cut link in front of a live port looks like.
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(5)
        eps = amqp.parse_endpoints([f"dc1=amqp://127.0.0.1:{srv.getsockname()[1]}"])
        start = time.monotonic()
        c = run_client(Sender(eps, amqp.ClientOptions(connect_timeout=1.0), reconnect=False), timeout=5)
        assert c.failed is not None and c.failed.kind == amqp.TIMEOUT
        assert time.monotonic() - start < 3


def test_unreachable_gives_up_after_max_failures():
    port = MiniBroker.__init__.__globals__["free_port"]()
    eps = amqp.parse_endpoints([f"dc1=amqp://127.0.0.1:{port}"])
    c = run_client(Sender(eps, amqp.ClientOptions(), max_failures=3, backoff=(0.05, 2, 0.1)))
    assert c.failed is not None and c.failed.kind == amqp.UNREACHABLE and len(c.lost) == 3
