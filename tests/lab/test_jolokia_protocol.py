"""Jolokia protocol fidelity (HTTP shapes, auth, Origin, request forms, error texts) against the lab's Jolokia
layer over the in-memory FakeBroker; shapes are compared with the recorded Artemis 2.44.0 exchanges."""

from __future__ import annotations

import re
from email.utils import parsedate_to_datetime

from conftest import VIEWER, VIEWER_PW, FakeLab, recorded

JSON_HEADERS = ("Content-type", "Access-control-allow-origin", "Access-control-allow-credentials", "Expires",
                "Cache-control")


def _rec_body(name: str) -> dict:
    return recorded(name)["response"]["body"]


def test_success_headers_match_recorded(fake_lab: FakeLab) -> None:
    rec = recorded("06-read-broker-version-get.json")["response"]
    reply = fake_lab.jolokia.post({"type": "read", "mbean": fake_lab.jolokia.bname(), "attribute": "Version"})
    assert reply.status == rec["status_code"] == 200
    for name in JSON_HEADERS:
        assert name in rec["headers"] and reply.header(name) is not None, name
    assert reply.header("Content-type") == rec["headers"]["Content-type"]
    assert reply.header("Access-control-allow-origin") == fake_lab.jolokia.origin
    assert set(reply.json) == set(_rec_body("06-read-broker-version-get.json")) == {"request", "value", "status"}
    assert reply.json["value"] == "2.44.0-lab"
    # Same header set as the recording (names compared case-insensitively), Expires one hour before Date.
    assert {k.lower() for k in reply.headers} == {k.lower() for k in rec["headers"]}
    assert (parsedate_to_datetime(reply.header("Date")) - parsedate_to_datetime(reply.header("Expires"))
            ).total_seconds() == 3600


def test_wrong_password_and_no_auth_are_empty_401(fake_lab: FakeLab) -> None:
    rec = recorded("81-err-wrong-password.json")["response"]
    body = {"type": "read", "mbean": fake_lab.jolokia.bname(), "attribute": "Version"}
    for kw in ({"password": "wrong"}, {"user": None}, {"user": "nobody", "password": "x"}):
        reply = fake_lab.jolokia.post(body, **kw)
        assert reply.status == rec["status_code"] == 401
        assert reply.raw == b""
        assert reply.header("WWW-Authenticate") == rec["headers"]["Www-authenticate"]
        assert {k.lower() for k in reply.headers} == {k.lower() for k in rec["headers"]}
    assert fake_lab.jolokia.get("/version", user=None).status == 401


def test_missing_and_foreign_origin_refused_like_recorded(fake_lab: FakeLab) -> None:
    body = {"type": "read", "mbean": fake_lab.jolokia.bname(), "attribute": "Version"}
    missing = fake_lab.jolokia.post(body, origin=None)
    assert missing.status == 200
    assert missing.json == _rec_body("78-err-no-origin-post.json")
    assert missing.header("Access-control-allow-origin") is None
    rec_headers = recorded("78-err-no-origin-post.json")["response"]["headers"]
    assert {k.lower() for k in missing.headers} == {k.lower() for k in rec_headers}
    assert fake_lab.jolokia.get("/version", origin=None).json == _rec_body("79-err-no-origin-get.json")
    evil = fake_lab.jolokia.post(body, origin="http://evil.example.com")
    assert evil.json == _rec_body("80-err-bad-origin.json")


def test_user_without_role_reads_refused_but_version_and_search_work(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    read = j.call({"type": "read", "mbean": j.bname(), "attribute": "Version"}, user=VIEWER, password=VIEWER_PW)
    rec = _rec_body("84-err-norole-read.json")
    assert {k: read[k] for k in ("error_type", "error", "status")} == {k: rec[k] for k in ("error_type", "error",
                                                                                           "status")}
    exe = j.call({"type": "exec", "mbean": j.bname(), "operation": "listBrokerConnections()"}, user=VIEWER,
                 password=VIEWER_PW)
    assert exe["error"] == _rec_body("85-err-norole-exec.json")["error"]
    assert j.call({"type": "version"}, user=VIEWER, password=VIEWER_PW)["status"] == 200
    found = j.call({"type": "search", "mbean": "org.apache.activemq.artemis:*"}, user=VIEWER, password=VIEWER_PW)
    assert found["status"] == 200 and j.bname() in found["value"]


def test_unknown_mbean_404_echoes_canonical_name(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    sent = j.qname("nope")
    body = j.call({"type": "read", "mbean": sent})
    rec = _rec_body("88-err-unknown-mbean.json")
    assert body["status"] == rec["status"] == 404
    assert body["error_type"] == rec["error_type"]
    assert body["error"] == f"javax.management.InstanceNotFoundException : {sent}"
    assert body["request"]["mbean"] == rec["request"]["mbean"]  # fake_lab is named dc1, like the recording
    got = j.get("/read/" + sent.replace('"', "%22") + "/MessageCount").json
    assert got["status"] == 404 and got["request"]["attribute"] == "MessageCount"


def test_unknown_attribute_alone_and_in_list(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    one = j.call({"type": "read", "mbean": j.bname(), "attribute": "NoSuchAttr"})
    assert {k: one[k] for k in ("error_type", "error", "status")} == {
        k: _rec_body("90-err-unknown-attribute.json")[k] for k in ("error_type", "error", "status")}
    listed = j.call({"type": "read", "mbean": j.bname(), "attribute": ["Version", "NoSuchAttr"]})
    assert listed["status"] == 404 and "value" not in listed


def test_overloaded_operation_without_signature_is_400_with_exact_text(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    for op, rec_file in (("pause", "54-exec-queue-pause-nosig.json"), ("countMessages",
                                                                     "72-exec-countMessages-nosig.json")):
        body = j.call({"type": "exec", "mbean": j.qname("orders"), "operation": op})
        rec = _rec_body(rec_file)
        assert body["status"] == rec["status"] == 400
        assert body["error_type"] == rec["error_type"]
        assert body["error"] == rec["error"].replace('broker="dc1"', f'broker="{j.broker}"')


def test_unknown_operation_and_wrong_argument_count_and_type(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    assert j.call({"type": "exec", "mbean": j.bname(), "operation": "noSuchOp()"})["error"] == \
        _rec_body("92-err-unknown-operation.json")["error"]
    assert j.call({"type": "exec", "mbean": j.bname(), "operation": "stopBrokerConnection", "arguments": []}
                  )["error"] == _rec_body("93-err-wrong-arg-count.json")["error"]
    assert j.call({"type": "exec", "mbean": j.bname(), "operation": "listQueues(java.lang.String,int,int)",
                   "arguments": ["{}"]})["error"] == _rec_body("94-err-wrong-arg-count-2.json")["error"]
    typed = j.call(recorded("95-err-wrong-arg-type.json")["http"]["body"])
    rec = _rec_body("95-err-wrong-arg-type.json")
    assert (typed["status"], typed["error_type"], typed["error"]) == (rec["status"], rec["error_type"], rec["error"])


def test_unknown_request_type_is_http_400_text(fake_lab: FakeLab) -> None:
    rec = recorded("98-err-unknown-type.json")["response"]
    reply = fake_lab.jolokia.post({"type": "frobnicate", "mbean": fake_lab.jolokia.bname()})
    assert reply.status == rec["status_code"] == 400
    assert reply.header("Content-type") == rec["headers"]["Content-type"]
    assert reply.raw.decode() == rec["body"]
    assert {k.lower() for k in reply.headers} == {k.lower() for k in rec["headers"]}


def test_bad_json_is_json_500(fake_lab: FakeLab) -> None:
    rec = _rec_body("97-err-bad-json.json")
    reply = fake_lab.jolokia.request("POST", "/", b'{"type": "read", ')
    assert reply.status == 200
    body = reply.json
    assert set(body) == set(rec) and body["status"] == 500 and body["error_type"] == rec["error_type"]
    assert body["error"].startswith("java.lang.IllegalStateException : Bad parser state, EOF")


def test_exception_inside_broker_is_500_with_artemis_class(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    body = j.call(recorded("99-err-exec-with-error.json")["http"]["body"] | {"mbean": j.bname()})
    rec = _rec_body("99-err-exec-with-error.json")
    assert {k: body[k] for k in ("error_type", "error", "status")} == {k: rec[k] for k in ("error_type", "error",
                                                                                           "status")}
    unknown = j.call({"type": "exec", "mbean": j.bname(), "operation": "stopBrokerConnection", "arguments": ["NOPE"]})
    assert unknown["error"] == _rec_body("49-exec-stopBrokerConnection-unknown.json")["error"]
    assert unknown["status"] == 400


def test_bulk_post_keeps_order_and_per_item_status(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    body = recorded("96-err-bulk-mixed.json")["http"]["body"]
    payload = [dict(item, mbean=item["mbean"].replace('"dc1"', f'"{j.broker}"')) for item in body]
    got = j.call(payload)
    assert [item["status"] for item in got] == [item["status"] for item in _rec_body("96-err-bulk-mixed.json")]


def test_void_exec_returns_null_and_echo_drops_empty_arguments(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    body = j.call({"type": "exec", "mbean": j.qname("orders"), "operation": "resume()", "arguments": []})
    assert body["value"] is None and body["status"] == 200
    assert "arguments" not in body["request"]
    assert body["request"]["mbean"] == (f'org.apache.activemq.artemis:address="orders",broker="{j.broker}",'
                                        'component=addresses,queue="orders",routing-type="anycast",'
                                        "subcomponent=queues")


def test_single_element_attribute_list_echo_and_value(fake_lab: FakeLab) -> None:
    rec = _rec_body("65-read-acceptor-amqp-started.json")
    j = fake_lab.jolokia
    body = j.call({"type": "read", "mbean": j.accname("artemis"), "attribute": ["Started"]})
    assert body["request"]["attribute"] == rec["request"]["attribute"] == "Started"
    assert body["value"] == {"Started": True} and isinstance(rec["value"], dict)


def test_get_forms_version_root_read_exec_search(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    assert j.get("/version").json["request"] == {"type": "version"}
    assert j.get("/").json["value"]["agent"] == _rec_body("03-version-get-root.json")["value"]["agent"]
    got = j.get("/read/org.apache.activemq.artemis:broker=%22" + j.broker + "%22/Version").json
    assert got["value"] == "2.44.0-lab" and got["request"]["attribute"] == "Version"
    listed = j.get("/exec/org.apache.activemq.artemis:broker=%22" + j.broker + "%22/listBrokerConnections()").json
    assert listed["status"] == 200 and isinstance(listed["value"], str)
    found = j.get("/search/org.apache.activemq.artemis:*").json
    assert j.bname() in found["value"]
    # `!/` escapes a slash inside a path element (Jolokia escaping): a queue named a/b
    fake_lab.broker.create_queue("a/b", "a/b", "ANYCAST")
    esc = j.get("/read/" + j.qname("a!/b").replace('"', "%22") + "/MessageCount").json
    assert esc["status"] == 200 and esc["value"] == 0


def test_version_value_shape_matches_recorded_but_says_lab(fake_lab: FakeLab) -> None:
    rec = _rec_body("02-version-post.json")["value"]
    got = fake_lab.jolokia.value({"type": "version"})
    assert set(got) == set(rec) and set(got["details"]) == set(rec["details"])
    assert set(got["config"]) == set(rec["config"])
    assert got["details"]["server_version"] == "2.44.0-lab"
    assert "Apache" not in got["details"]["server_vendor"]


def test_wildcard_read_returns_map_by_canonical_name(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    pattern = f'org.apache.activemq.artemis:broker="{j.broker}",component=addresses,address=*,subcomponent=queues,*'
    body = j.call({"type": "read", "mbean": pattern, "attribute": ["MessageCount", "ConsumerCount"]})
    assert body["status"] == 200
    assert body["request"]["mbean"] == _rec_body("10-search-queues.json")["request"]["mbean"].replace(
        '"dc1"', f'"{j.broker}"')
    canonical_orders = j.call({"type": "read", "mbean": j.qname("orders")})["request"]["mbean"]
    assert body["value"][canonical_orders] == {"MessageCount": 0, "ConsumerCount": 0}
    assert all(set(v) == {"MessageCount", "ConsumerCount"} for v in body["value"].values())
    none = j.call({"type": "read", "mbean": 'org.apache.activemq.artemis:broker="nope",*'})
    assert none["status"] == 404


def test_list_max_depth_cuts_with_string_one(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    depth1 = j.value({"type": "list", "path": "org.apache.activemq.artemis", "config": {"maxDepth": 1}})
    assert depth1[f'broker="{j.broker}"'] == "1"
    depth2 = j.value({"type": "list", "path": "org.apache.activemq.artemis", "config": {"maxDepth": 2}})
    broker = depth2[f'broker="{j.broker}"']
    rec = _rec_body("14-list-domain-depth2.json")["value"]['broker="dc1"']
    assert broker == rec  # op/attr cut to "1", class and desc kept
    op = j.value({"type": "list", "path": f'org.apache.activemq.artemis/broker="{j.broker}"/op/listQueues'})
    assert op == _rec_body("18-list-op-listQueues.json")["value"]


def test_write_rw_attribute_returns_old_value(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    old = j.value({"type": "write", "mbean": j.bname(), "attribute": "MessageCounterSamplePeriod", "value": 5000})
    assert old == 10000
    assert j.value({"type": "read", "mbean": j.bname(), "attribute": "MessageCounterSamplePeriod"}) == 5000
    ro = j.call({"type": "write", "mbean": j.bname(), "attribute": "Version", "value": "x"})
    assert ro["status"] != 200


def test_error_text_is_class_colon_message(fake_lab: FakeLab) -> None:
    j = fake_lab.jolokia
    body = j.call({"type": "read", "mbean": j.bname(), "attribute": "NoSuchAttr"})
    assert re.fullmatch(r"[\w.$]+ : .+", body["error"]) and body["error"].startswith(body["error_type"])
    assert "stacktrace" not in body  # no stacktrace key anywhere in Jolokia 2.3 answers
