"""The client and the snapshot parser against responses recorded from a real Artemis 2.44.0 pair.

The recordings are the project's own: raw HTTP exchanges with the lab's dc1 (stock web console), recorded by
`make record` (lab/continuity_lab/record.py) into tests/unit/fixtures/recorded/2.44.0/; a missing one fails with a
message to record them. Each recorded HTTP answer (status, headers and body) is replayed through the client's real
decoding, so the typed errors are checked against Artemis' own shapes, not only against our fixtures.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia, lag
from ansible_collections.continuity.artemis.plugins.module_utils import site_state as ss


class Replay:
    """Transport answering with one recorded response, then a broker-name search (for 404 enrichment)."""

    def __init__(self, capture):
        resp = capture["response"]
        body = resp["body"]
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        search = json.dumps([{"value": ['org.apache.activemq.artemis:broker="dc1"'], "status": 200}]).encode()
        recorded_headers = {k: v for k, v in resp["headers"].items() if v is not None}  # dropped values stay out
        self.answers = [(resp["status_code"], recorded_headers, data), (200, {}, search)]
        self.sent = []
        self.last_used = 0.0

    def post(self, body, headers, fresh=False):
        self.sent.append(json.loads(body))
        return self.answers.pop(0)


def replay(capture):
    """Send the recorded request through a client whose transport answers with the recorded response."""
    client = jolokia.JolokiaClient("http://127.0.0.1:8161/console/jolokia", username="admin", password="x",
                                   transport=Replay(capture), sleep=lambda s: None)
    req = capture["http"]["body"]
    if isinstance(req, list):
        return client, client.bulk(req)
    return client, client.request(req)


@pytest.mark.parametrize(
    "name,cls,words",
    [
        # The stock web console refuses a failed login with an empty HTTP 403 + Hawtio-Forbidden-Reason (not 401)...
        ("81-err-wrong-password.json", jolokia.AuthenticationError, ["HTTP 403", "Hawtio-Forbidden-Reason: NONE"]),
        ("80-err-bad-origin.json", jolokia.OriginRefused, ["http://evil.example.com", "jolokia-access.xml"]),
        ("78-err-no-origin-post.json", jolokia.OriginRefused, ["Origin null"]),
        # ...and a valid login without a role in HAWTIO_ROLES the same way, before Jolokia sees the request.
        ("84-err-norole-read.json", jolokia.AuthenticationError, ["HTTP 403", "HAWTIO_ROLE"]),
        ("85-err-norole-exec.json", jolokia.AuthenticationError, ["HTTP 403", "HAWTIO_ROLE"]),
        ("88-err-unknown-mbean.json", jolokia.NotFound, ["Not found"]),
        ("91-err-unknown-attribute-in-list.json", jolokia.NotFound, ["NoSuchAttr"]),
        ("92-err-unknown-operation.json", jolokia.BadRequest, ["noSuchOp"]),
        ("54-exec-queue-pause-nosig.json", jolokia.BadRequest, ["overloaded", "pause(boolean)"]),
        ("49-exec-stopBrokerConnection-unknown.json", jolokia.BadRequest, ["broker connection NOPE not found"]),
        ("95-err-wrong-arg-type.json", jolokia.BadRequest, ["abc"]),
        ("99-err-exec-with-error.json", jolokia.BrokerError, ["AMQ229017", "ActiveMQNonExistentQueueException"]),
        ("98-err-unknown-type.json", jolokia.BadRequest, ["frobnicate"]),
    ],
)
def test_recorded_error_shapes(recorded_capture, name, cls, words):
    capture = recorded_capture(name)
    with pytest.raises(cls) as info:
        replay(capture)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_recorded_bulk_per_item_statuses(recorded_capture):
    _, results = replay(recorded_capture("96-err-bulk-mixed.json"))
    assert [r.status for r in results] == [200, 404, 200]
    assert results[0].value == "2.44.0"


def test_recorded_list_broker_connections_outage(recorded_capture):
    _, value = replay(recorded_capture("26-list-bconns-down-post.json"))
    rows = json.loads(value)
    # the mirror goes through the WAN link into dc2 (port base+901; recordings use the default base 20000)
    assert rows == [{"name": "DC2", "protocol": "AMQP", "started": True, "uri": "tcp://127.0.0.1:20901",
                     "connected": False}]


def test_recorded_list_queues_parses_with_snf(recorded_capture):
    capture = recorded_capture("67-exec-listQueues-sig.json")
    queues, total = ss.queues_from_list(capture["response"]["body"]["value"])
    assert total == len(queues) == 5
    snf = queues["$ACTIVEMQ_ARTEMIS_MIRROR_DC2"]
    assert snf["internal"] is True and isinstance(snf["message_count"], int)
    assert queues["$sys.mqtt.sessions"]["internal"] is True  # the broker's own MQTT session store
    cmp = lag.compare_queues(queues, queues)
    assert cmp.compared == 3 and cmp.excluded == 2  # SNF and $sys.mqtt.sessions excluded; DLQ/ExpiryQueue/orders


def test_recorded_snf_outage_sample(recorded_capture):
    steady = recorded_capture("21-snf-steady-all.json")["response"]["body"]["value"]
    outage = recorded_capture("23-snf-outage-all.json")["response"]["body"]["value"]
    a = lag.SnfSample.from_attributes(0.0, steady)
    b = lag.SnfSample.from_attributes(2.0, outage)
    assert a.message_count == 0 and b.message_count > 0
    assert steady["ConsumerCount"] == 1 and outage["ConsumerCount"] == 0  # the pre-2.39 'connected' inference
    r = lag.compute_rates(a, b)
    assert r.add_rate is not None and r.add_rate > 0


def test_recorded_epoch_sized_first_message_age_is_not_lag(recorded_capture):
    capture = recorded_capture("36-orders-firstmessageage-ms.json")
    value = capture["response"]["body"]["value"]
    age = value.get("FirstMessageAge") if isinstance(value, dict) else value
    ts = value.get("FirstMessageTimestamp") if isinstance(value, dict) else None
    got = lag.plausible_age_seconds(age, ts, capture_ms(capture))
    assert got is not None and 0 < got < 60  # a message with a creation time: a real, small age


def capture_ms(capture):
    from datetime import datetime

    return datetime.fromisoformat(capture["captured_at"]).timestamp() * 1000.0


def test_recorded_outage_epoch_age_is_rejected(recorded_capture):
    """Real 2.44 during the outage: SNF FirstMessageAge is the epoch in ms (timestamp 0) - never a lag."""
    capture = recorded_capture("23-snf-outage-all.json")
    value = capture["response"]["body"]["value"]
    assert value["FirstMessageTimestamp"] == 0 and value["FirstMessageAge"] > 1e12
    assert lag.plausible_age_seconds(value["FirstMessageAge"], value["FirstMessageTimestamp"],
                                     capture_ms(capture)) is None
    # even without the timestamp the size alone gives it away
    assert lag.plausible_age_seconds(value["FirstMessageAge"], None, capture_ms(capture)) is None
    a = lag.assess(None, lag.SnfSample.from_attributes(capture_ms(capture) / 1000.0, value), connected=False)
    assert a["lag_seconds"] is None and a["first_message_age_seconds"] is None and a["backlog"] == 5
