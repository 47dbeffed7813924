"""The Jolokia client: requests, headers, bulk, typed errors, retries, HTTP transport."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from pathlib import Path

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on

ERRORS = json.loads((Path(__file__).parents[2] / "fixtures" / "jolokia" / "errors.json").read_text())


class Scripted:
    """Transport answering canned (status, body) pairs and recording what was sent."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.sent: list[tuple[object, dict, bool]] = []
        self.last_used = 0.0

    def post(self, body, headers, fresh=False):
        self.sent.append((json.loads(body), headers, fresh))
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        status, payload = a
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        return status, {}, data


def canned(key):
    e = ERRORS[key]
    return e["http"], e["body"]


def client(*answers, **kw):
    kw.setdefault("sleep", lambda s: None)
    return jolokia.JolokiaClient("http://dc1:8161/console/jolokia", username="admin", password="pw",
                                 transport=Scripted(*answers), **kw)


OK = {"request": {}, "value": "2.44.0", "status": 200, "timestamp": 1}


class TestHeaders:
    def test_default_origin_from_url_and_basic_auth(self):
        c = client((200, OK))
        assert c.read(on.broker("dc1"), "Version") == "2.44.0"
        body, headers, _ = c.transport.sent[0]
        assert body == [{"type": "read", "mbean": 'org.apache.activemq.artemis:broker="dc1"', "attribute": "Version"}]
        assert headers["Origin"] == "http://dc1:8161"
        assert headers["Authorization"] == "Basic " + base64.b64encode(b"admin:pw").decode()
        assert headers["Content-Type"] == "application/json"

    def test_origin_override_and_none(self):
        c = client((200, OK), origin="https://console.example")
        c.version()
        assert c.transport.sent[0][1]["Origin"] == "https://console.example"
        c = client((200, OK), origin="")
        c.version()
        assert "Origin" not in c.transport.sent[0][1]

    def test_origin_drops_userinfo_and_keeps_port(self):
        c = jolokia.JolokiaClient("https://u@host.example:8443/console/jolokia", transport=Scripted())
        assert c.origin == "https://host.example:8443"

    def test_no_credentials_no_auth_header_and_repr_hides_password(self):
        c = jolokia.JolokiaClient("http://h:8161/j", transport=Scripted((200, OK)))
        c.version()
        assert "Authorization" not in c.transport.sent[0][1]
        assert "pw" not in repr(client())

    def test_bad_url(self):
        with pytest.raises(ValueError):
            jolokia.JolokiaClient("dc1:8161/console/jolokia")


class TestErrors:
    @pytest.mark.parametrize(
        "key,cls,words",
        [
            ("auth_failed", jolokia.AuthenticationError, ["401", "artemis-users.properties"]),
            ("origin_refused", jolokia.OriginRefused, ["http://evil.example.com", "jolokia-access.xml", "origin"]),
            ("origin_missing", jolokia.OriginRefused, ["Origin null", "allow-origin"]),
            ("norole_read", jolokia.PermissionDenied, ["attribute Version", "HAWTIO_ROLE"]),
            ("norole_exec", jolokia.PermissionDenied, ["operation listBrokerConnections", "management.xml"]),
            ("unknown_attribute", jolokia.NotFound, ["No such attribute: NoSuchAttr"]),
            ("unknown_operation", jolokia.BadRequest, ["No operation noSuchOp"]),
            ("overloaded", jolokia.BadRequest, ["overloaded", "pause(boolean)"]),
            ("wrong_arg_type", jolokia.BadRequest, ["abc"]),
            ("broker_exception", jolokia.BrokerError, ["AMQ229017", "ActiveMQNonExistentQueueException"]),
            ("bad_json", jolokia.BrokerError, ["Bad parser state"]),
            ("unknown_type", jolokia.BadRequest, ["HTTP 400", "frobnicate"]),
            ("html_404", jolokia.ProtocolError, ["/console/jolokia"]),
        ],
    )
    def test_error_shapes(self, key, cls, words):
        status, body = canned(key)
        # a single answer object (not a list) is what Jolokia sends when it refuses the whole request;
        # the second answer serves the broker-name search a 404 triggers
        c = client((status, body if isinstance(body, str) or "request" not in body else [body]),
                   (200, [{"value": ['org.apache.activemq.artemis:broker="dc1"'], "status": 200}]))
        with pytest.raises(cls) as info:
            c.read(on.broker("dc1"), "Version")
        for w in words:
            assert w in str(info.value), str(info.value)
        assert "pw" not in str(info.value)

    def test_non_json_answer(self):
        c = client((200, "<html>login</html>"))
        with pytest.raises(jolokia.ProtocolError, match="Not a Jolokia JSON"):
            c.version()

    def test_item_count_mismatch(self):
        c = client((200, [OK, OK]))
        with pytest.raises(jolokia.ProtocolError):
            c.version()

    def test_error_to_dict(self):
        status, body = canned("broker_exception")
        c = client((status, [body]))
        with pytest.raises(jolokia.BrokerError) as info:
            c.exec(on.broker("dc1"), "destroyQueue(java.lang.String)", "no-such-queue")
        d = info.value.to_dict()
        assert d["class"] == "BrokerError" and d["status"] == 500
        assert d["error_type"].endswith("ActiveMQNonExistentQueueException")


class TestBulk:
    def test_per_item_statuses(self):
        status, body = canned("bulk_mixed")
        c = client((status, body))
        q = on.queue("dc1", "orders", "orders")
        res = c.bulk([jolokia.read_request(on.broker("dc1"), "Version"),
                      jolokia.read_request(on.queue("dc1", "nope", "nope"), "MessageCount"),
                      jolokia.exec_request(q, "countMessages()")])
        assert [r.status for r in res] == [200, 404, 200]
        assert res[0].value == "2.44.0" and res[2].value == 0
        assert not res[1].ok
        with pytest.raises(jolokia.NotFound):
            res[1].raise_for_status()
        assert len(c.transport.sent) == 1  # one HTTP request

    def test_raise_errors(self):
        status, body = canned("bulk_mixed")
        c = client((status, body), (200, ["org.apache.activemq.artemis:broker=\"dc1\""]))
        with pytest.raises(jolokia.NotFound):
            c.bulk([{"type": "read", "mbean": "a:b=c"}] * 3, raise_errors=True)

    def test_empty_bulk_sends_nothing(self):
        c = client()
        assert c.bulk([]) == []
        assert c.request_count == 0

    def test_whole_request_refused_raises(self):
        c = client(canned("origin_refused"))
        with pytest.raises(jolokia.OriginRefused):
            c.bulk([jolokia.version_request(), jolokia.version_request()])


class TestRetries:
    def test_safe_requests_retry_with_backoff(self):
        sleeps = []
        c = client(jolokia.ConnectionFailed("refused"), jolokia.ConnectionFailed("refused"), (200, [OK]),
                   retries=2, backoff=0.5, sleep=sleeps.append)
        assert c.read(on.broker("dc1"), "Version") == "2.44.0"
        assert sleeps == [0.5, 1.0]
        assert c.request_count == 3

    def test_safe_requests_give_up(self):
        c = client(*[jolokia.ConnectionFailed("refused")] * 3, retries=2)
        with pytest.raises(jolokia.ConnectionFailed, match="after 3 attempts"):
            c.search(on.all_brokers())

    def test_exec_never_retried_and_uses_fresh_connection_when_idle(self):
        c = client(jolokia.ConnectionFailed("reset"), (200, [OK]), retries=5)
        with pytest.raises(jolokia.ConnectionFailed):
            c.exec(on.broker("dc1"), "stopBrokerConnection", "DC2")
        assert len(c.transport.sent) == 1
        assert c.transport.sent[0][2] is True  # idle connection replaced before a state change

    def test_bulk_with_one_exec_is_unsafe(self):
        c = client(jolokia.ConnectionFailed("reset"), (200, [OK, OK]))
        with pytest.raises(jolokia.ConnectionFailed):
            c.bulk([jolokia.read_request("a:b=c"), jolokia.exec_request("a:b=c", "stop()")])
        assert len(c.transport.sent) == 1

    def test_auth_error_not_retried(self):
        c = client(canned("auth_failed"), (200, [OK]))
        with pytest.raises(jolokia.AuthenticationError):
            c.version()
        assert len(c.transport.sent) == 1


class TestAgainstFakeBroker:
    @pytest.fixture(autouse=True)
    def _helpers(self, jfake):
        global FakeArtemis, FakeTransport, make_client
        FakeArtemis, FakeTransport, make_client = jfake.FakeArtemis, jfake.FakeTransport, jfake.make_client

    def test_unknown_broker_name_lists_existing(self):
        b = FakeArtemis("site-2.44-dc1.json")
        c = make_client(b)
        with pytest.raises(jolokia.NotFound) as info:
            c.read(on.broker("dc9"), "Version")
        msg = str(info.value)
        assert "'dc9' does not exist" in msg and "dc1" in msg and "broker_name" in msg

    def test_unknown_queue_on_existing_broker_keeps_plain_not_found(self):
        c = make_client(FakeArtemis("site-2.44-dc1.json"))
        with pytest.raises(jolokia.NotFound) as info:
            c.read(on.queue("dc1", "nope", "nope"), "MessageCount")
        assert "does not exist" not in str(info.value) and "InstanceNotFound" not in str(info.value)

    def test_discover_broker(self):
        c = make_client(FakeArtemis("site-2.44-dc1.json"))
        assert c.broker_names() == ["dc1"]
        assert c.discover_broker() == "dc1"
        assert c.discover_broker("dc1") == "dc1"
        with pytest.raises(jolokia.NotFound, match="dc1"):
            c.discover_broker("DC1")

    def test_search_allowed_without_role_but_read_denied(self):
        c = make_client(FakeArtemis("site-2.44-dc1.json"), username="norole")
        assert c.broker_names() == ["dc1"]
        with pytest.raises(jolokia.PermissionDenied, match="attribute Version"):
            c.read(on.broker("dc1"), "Version")

    def test_wrong_password(self):
        c = make_client(FakeArtemis("site-2.44-dc1.json"), password="bad")
        with pytest.raises(jolokia.AuthenticationError):
            c.version()

    def test_refused_origin(self):
        c = make_client(FakeArtemis("site-2.44-dc1.json"), origin="http://evil.example.com")
        with pytest.raises(jolokia.OriginRefused, match="evil"):
            c.version()

    def test_pattern_read_returns_map_by_name(self):
        c = make_client(FakeArtemis("site-2.44-dc1.json"))
        v = c.read(on.all_queues("dc1"), ["MessageCount", "NoSuchOnSome"])
        assert all(on.kind(n) == "queue" for n in v)
        assert len(v) == 6

    def test_client_from_options(self):
        c = jolokia.client_from_options({"url": "http://dc1:8161/console/jolokia", "username": "u",
                                         "password": "p", "timeout": 3}, transport=FakeTransport(None))
        assert c.timeout == 3.0 and c.origin == "http://dc1:8161"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list = []

    def do_POST(self):
        length = int(self.headers["Content-Length"])
        req = json.loads(self.rfile.read(length))
        _Handler.seen.append((self.client_address[1], self.headers.get("Origin"), req))
        body = json.dumps([{"request": r, "value": "ok", "status": 200} for r in req]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_http_transport_keep_alive_and_timeout():
    """The real transport reuses one TCP connection for consecutive safe requests (local server)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/console/jolokia"
        c = jolokia.JolokiaClient(url, username="a", password="b", timeout=2)
        _Handler.seen.clear()
        assert c.read("a:b=c", "X") == "ok"
        assert c.search("a:*") == list("ok")  # value passes through as given
        ports = {p for p, _, _ in _Handler.seen}
        assert len(ports) == 1
        assert _Handler.seen[0][1] == f"http://127.0.0.1:{server.server_address[1]}"
        c.close()
    finally:
        server.shutdown()
        server.server_close()


def test_http_transport_connection_refused():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    c = jolokia.JolokiaClient(f"http://127.0.0.1:{port}/console/jolokia", retries=1, backoff=0, timeout=1)
    with pytest.raises(jolokia.ConnectionFailed, match="refused"):
        c.version()


def test_https_requires_valid_certificate_by_default():
    t = jolokia.HttpTransport("https://127.0.0.1:1/x")
    import ssl

    assert t._ssl_context.verify_mode == ssl.CERT_REQUIRED and t._ssl_context.check_hostname
    t = jolokia.HttpTransport("https://127.0.0.1:1/x", validate_certs=False)
    assert t._ssl_context.verify_mode == ssl.CERT_NONE


class TestStartupWindow:
    """What a real Artemis answers while it starts (ARTEMIS-FACTS 7) is 'not ready yet', never a config error."""

    NOT_STARTED = {"error_type": "java.lang.IllegalStateException", "status": 500,
                   "error": "java.lang.IllegalStateException : Broker is not started. It can not be managed yet"}
    NO_MBEAN = {"error_type": "javax.management.InstanceNotFoundException", "status": 404,
                "error": 'javax.management.InstanceNotFoundException : org.apache.activemq.artemis:broker="dc1"'}

    def test_500_not_started_is_not_ready(self):
        c = client((200, [self.NOT_STARTED]))
        with pytest.raises(jolokia.BrokerNotReady, match="not ready") as info:
            c.read(on.broker("dc1"), "Started")
        assert info.value.status == 500

    def test_other_500_stays_a_broker_error(self):
        other = dict(self.NOT_STARTED, error="java.lang.IllegalStateException : queue is closed")
        c = client((200, [other]))
        with pytest.raises(jolokia.BrokerError) as info:
            c.read(on.broker("dc1"), "Started")
        assert not isinstance(info.value, jolokia.BrokerNotReady)

    def test_404_with_no_broker_registered_is_not_ready(self):
        c = client((200, [self.NO_MBEAN]), (200, [{"value": [], "status": 200}]))
        with pytest.raises(jolokia.BrokerNotReady, match="not registered"):
            c.read(on.broker("dc1"), "Started")

    def test_404_for_a_wrong_name_beside_a_running_broker_stays_not_found(self):
        c = client((200, [self.NO_MBEAN]),
                   (200, [{"value": ['org.apache.activemq.artemis:broker="dc2"'], "status": 200}]))
        with pytest.raises(jolokia.NotFound) as info:
            c.read(on.broker("dc1"), "Started")
        assert not isinstance(info.value, jolokia.BrokerNotReady) and "dc2" in str(info.value)

    def test_discovery_with_no_broker_yet_is_not_ready(self):
        c = client((200, [{"value": [], "status": 200}]))
        with pytest.raises(jolokia.BrokerNotReady):
            c.discover_broker("dc1")

    def test_collector_reports_a_starting_broker_as_unreachable(self):
        from ansible_collections.continuity.artemis.plugins.module_utils import site_state

        collector = site_state.SiteCollector(None, broker_name="dc1", site="dc1")
        items = len(site_state.snapshot_requests("dc1"))
        collector.client = client((200, [self.NOT_STARTED] * items))
        snap = collector.collect_or_unreachable()
        assert snap["reachable"] is False and "not ready" in snap["error"]


class TestWebConsoleLogin:
    """The stock web console (hawtio) refuses a wrong login with an empty HTTP 403 and a Hawtio-Forbidden-Reason
    header (seen on a real 2.44 lab), not the 401 of a bare Jolokia agent."""

    class Hawtio(Scripted):
        def post(self, body, headers, fresh=False):
            self.sent.append((json.loads(body), headers, fresh))
            return 403, {"hawtio-forbidden-reason": "NONE"}, b""

    def test_empty_403_with_hawtio_reason_is_an_authentication_error(self):
        c = jolokia.JolokiaClient("http://dc1:8161/console/jolokia", username="admin", password="wrong",
                                  transport=self.Hawtio(), sleep=lambda s: None)
        with pytest.raises(jolokia.AuthenticationError, match="rejected the credentials") as info:
            c.version()
        assert "wrong" not in str(info.value) and "HAWTIO_ROLE" in str(info.value)

    def test_403_without_the_header_stays_a_proxy_refusal(self):
        c = client((403, ""))
        with pytest.raises(jolokia.PermissionDenied, match="proxy"):
            c.version()


class TestStaleKeepAlive:
    """The web console closes idle kept-alive connections (Jetty's idle timeout; seen on the real lab after a
    playbook ran between two reads): a read must not report the broker unreachable because of it."""

    def _server(self):
        import socket as sock

        answers = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                answers.append(1)  # counted before the answer leaves, so the test never races the handler
                body = json.dumps([{"request": {}, "value": True, "status": 200, "timestamp": 1}]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                # then close the connection without saying so, as an idle timeout does
                self.close_connection = True
                self.connection.shutdown(sock.SHUT_RDWR)

            def log_message(self, *args):
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return srv, answers

    def test_a_read_on_a_connection_the_server_closed_goes_out_again(self):
        srv, answers = self._server()
        try:
            c = jolokia.JolokiaClient(f"http://127.0.0.1:{srv.server_address[1]}/console/jolokia", retries=0)
            assert c.read(on.broker("dc1"), "Started") is True
            assert c.read(on.broker("dc1"), "Started") is True  # the kept-alive connection is gone by now
            assert len(answers) == 2
        finally:
            srv.shutdown()

    def test_an_operation_is_never_sent_twice(self):
        srv, answers = self._server()
        try:
            c = jolokia.JolokiaClient(f"http://127.0.0.1:{srv.server_address[1]}/console/jolokia", retries=0,
                                      idle_reconnect=3600)
            c.exec(on.broker("dc1"), "resetAllMessageCounters()")
            with pytest.raises(jolokia.ConnectionFailed):
                c.exec(on.broker("dc1"), "resetAllMessageCounters()")
            assert len(answers) == 1
        finally:
            srv.shutdown()
