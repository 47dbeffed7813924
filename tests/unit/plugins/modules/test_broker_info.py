"""broker_info against fake 2.44 / 2.33 / 2.30 brokers."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.modules import broker_info

URL = "http://dc1:8161/console/jolokia"
AUTH = {"url": URL, "username": "admin", "password": "secret"}


@pytest.mark.parametrize("check_mode", [False, True])
def test_2_44(jolokia_sites, jfake, check_mode):
    jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(broker_info, AUTH, check_mode=check_mode)
    assert not r.failed, r.result
    res = r.result
    assert res["changed"] is False
    assert res["broker"]["version"] == "2.44.0" and res["broker"]["name"] == "dc1"
    assert res["broker"]["pending_mirror_acks"] == 0
    assert res["features"]["broker_connection_mbean"] is True
    assert res["broker_connections"]["DC2"]["connected"] is True
    assert res["queues"]["orders"]["message_count"] == 5
    assert "$ACTIVEMQ_ARTEMIS_MIRROR_DC2" not in res["queues"]
    assert "$ACTIVEMQ_ARTEMIS_MIRROR_DC1" not in res["addresses"]
    assert res["acceptors"]["mirror"]["started"] is True
    assert res["requests"] == 2  # discovery search + one bulk
    assert "secret" not in repr(res)


def test_2_33_nulls_with_notes(jolokia_sites, jfake):
    jolokia_sites.add("site-2.33-dc1.json", URL)
    res = jfake.run_module(broker_info, dict(AUTH, broker_name="dc1")).result
    assert res["broker"]["pending_mirror_acks"] is None
    assert res["broker_connections"]["DC2"]["uri"] is None
    assert any("PendingMirrorAcks needs Artemis 2.40+" in n for n in res["notes"])
    assert res["requests"] == 1


def test_filter_and_internal(jolokia_sites, jfake):
    jolokia_sites.add("site-2.30-dc1.json", URL)
    res = jfake.run_module(broker_info, dict(AUTH, name_regex="^(orders|\\$ACT)", include_internal=True)).result
    assert set(res["queues"]) == {"orders"}  # no SNF queue MBean on 2.30
    assert set(res["addresses"]) == {"orders", "$ACTIVEMQ_ARTEMIS_MIRROR_DC2", "$ACTIVEMQ_ARTEMIS_MIRROR_DC1"}


@pytest.mark.parametrize(
    "change,args,words",
    [
        ({}, {"password": "wrong"}, ["HTTP 401", "artemis-users.properties"]),
        ({}, {"username": "norole"}, ["Permission denied", "HAWTIO_ROLE"]),
        ({"allowed_origins": ["http://other"]}, {}, ["Origin http://dc1:8161 is not allowed", "jolokia-access.xml"]),
        ({}, {"broker_name": "dc9"}, ["'dc9' does not exist", "dc1"]),
        ({}, {"url": "http://nowhere:8161/console/jolokia"}, ["Connection refused"]),
        ({}, {"name_regex": "("}, ["name_regex"]),
    ],
)
def test_errors_tell_what_to_do(jolokia_sites, jfake, change, args, words):
    b = jolokia_sites.add("site-2.44-dc1.json", URL)
    for k, v in change.items():
        setattr(b, k, v)
    r = jfake.run_module(broker_info, dict(AUTH, **args))
    assert r.failed
    for w in words:
        assert w in r.result["msg"], r.result["msg"]
    assert "wrong" not in r.result["msg"] and "secret" not in repr(r.result)


def test_wait_reads_a_started_broker_at_once(jolokia_sites, jfake):
    jolokia_sites.add("site-2.44-dc1.json", URL)
    r = jfake.run_module(broker_info, dict(AUTH, broker_name="dc1", wait=True, wait_timeout=5, wait_sleep=0.1))
    assert not r.failed, r.result
    assert r.result["broker"]["started"] is True and r.result["waited"] < 1
    assert r.result["requests"] == 2  # the Started read + one bulk


def test_wait_gives_up_with_the_last_answer(jfake):
    r = jfake.run_module(broker_info, dict(AUTH, url="http://127.0.0.1:1/console/jolokia", wait=True,
                                           wait_timeout=0.2, wait_sleep=0.1, timeout=0.5))
    assert r.failed and "Broker not ready at http://127.0.0.1:1/console/jolokia" in r.result["msg"]
    assert "refused" in r.result["msg"]


def test_wait_options_must_not_be_negative(jfake):
    r = jfake.run_module(broker_info, dict(AUTH, wait=True, wait_timeout=-1))
    assert r.failed and "wait_timeout" in r.result["msg"]
