"""jolokia.wait_started: the readiness rule the broker role uses through broker_info(wait=true) (issue 19).

The answers are what a real Artemis 2.44 gives while it starts (ARTEMIS-FACTS 7, jolokia.BrokerNotReady): refused
connection, JSON 404 with no broker MBean registered, JSON 500 "Broker is not started", then Started=true."""

from __future__ import annotations

import json
import ssl

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia

URL = "http://dc1:8161/console/jolokia"
NOT_STARTED = {"error_type": "java.lang.IllegalStateException", "status": 500,
               "error": "java.lang.IllegalStateException : Broker is not started. It can not be managed yet"}
NO_BROKERS = {"value": [], "status": 200}
BROKERS = {"value": ['org.apache.activemq.artemis:broker="dc1"'], "status": 200}


def started(value=True):
    return {"request": {}, "value": value, "status": 200}


class Scripted:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.sent = []
        self.last_used = 0.0

    def post(self, body, headers, fresh=False):
        self.sent.append(json.loads(body))
        a = self.answers.pop(0)
        if isinstance(a, BaseException):
            raise a
        return 200, {}, json.dumps(a).encode()


def refused():
    exc = jolokia.ConnectionFailed(f"Connection refused by {URL}")
    exc.stale = False
    return exc


def client(*answers):
    return jolokia.JolokiaClient(URL, username="admin", password="pw", retries=0, sleep=lambda s: None,
                                 transport=Scripted(*answers))


def test_the_whole_startup_window_is_waited_through(fake_clock):
    clock = fake_clock
    c = client(refused(), [NO_BROKERS], [NOT_STARTED], [NOT_STARTED], [started(False)], [started()])
    out = jolokia.wait_started(c, "dc1", timeout=30, sleep=1, clock=clock, pause=clock.sleep)
    assert out == {"broker_name": "dc1", "elapsed": 5.0, "attempts": 6}
    assert clock.sleeps == [1, 1, 1, 1, 1]
    assert c.transport.sent[-1] == [{"type": "read", "mbean": 'org.apache.activemq.artemis:broker="dc1"',
                                     "attribute": "Started"}]


def test_the_broker_name_is_discovered_when_not_given(fake_clock):
    clock = fake_clock
    c = client([NO_BROKERS], [BROKERS], [started()])
    out = jolokia.wait_started(c, None, timeout=30, sleep=2, clock=clock, pause=clock.sleep)
    assert out["broker_name"] == "dc1" and out["attempts"] == 2 and out["elapsed"] == 2.0


def test_timeout_raises_the_last_answer_with_the_time_waited(fake_clock):
    clock = fake_clock
    c = client(*([[NOT_STARTED]] * 4))
    with pytest.raises(jolokia.BrokerNotReady, match=r"after 3 s \(4 attempts\).*not started") as info:
        jolokia.wait_started(c, "dc1", timeout=3.5, sleep=1, clock=clock, pause=clock.sleep)
    assert info.value.status == 500
    c = client(refused(), refused())
    with pytest.raises(jolokia.ConnectionFailed, match="Connection refused"):
        jolokia.wait_started(c, "dc1", timeout=1, sleep=1, clock=clock, pause=clock.sleep)


def test_errors_no_wait_cures_fail_at_once(fake_clock):
    clock = fake_clock
    denied = {"status": 403, "error_type": "java.lang.Exception",
              "error": "java.lang.Exception : Origin http://dc1:8161 is not allowed to call this agent"}
    c = client([denied])
    with pytest.raises(jolokia.OriginRefused):
        jolokia.wait_started(c, "dc1", timeout=60, sleep=1, clock=clock, pause=clock.sleep)
    assert clock.sleeps == []


def test_an_unverifiable_certificate_fails_at_once(fake_clock):
    clock = fake_clock
    cause = ssl.SSLCertVerificationError(1, "certificate verify failed: self-signed certificate")
    failed = jolokia.ConnectionFailed("TLS certificate of https://dc1:8161/ could not be verified")
    failed.__cause__ = cause
    failed.stale = False
    c = client(failed)
    with pytest.raises(jolokia.ConnectionFailed, match="could not be verified"):
        jolokia.wait_started(c, "dc1", timeout=60, sleep=1, clock=clock, pause=clock.sleep)
    assert clock.sleeps == []
    assert jolokia.is_certificate_failure(failed)
    assert not jolokia.is_certificate_failure(refused())
