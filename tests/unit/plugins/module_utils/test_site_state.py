"""Site snapshots: constant request count, version fallbacks, parsing."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import continuity_plugin as plugin
from ansible_collections.continuity.artemis.plugins.module_utils import jolokia
from ansible_collections.continuity.artemis.plugins.module_utils import site_state as ss


def extra_queues(n):
    return [{"Name": f"q{i:04d}", "Address": f"q{i:04d}", "MessageCount": i % 7} for i in range(n)]


@pytest.fixture
def snap_of(jfake):
    def _snap(fixture, broker_name="dc1", mutate=None, **kw):
        b = jfake.FakeArtemis(fixture)
        if mutate:
            mutate(b)
        client = jfake.make_client(b)
        col = ss.SiteCollector(client, broker_name=broker_name, site="dc1")
        return col.collect(**kw), b, col
    return _snap


@pytest.mark.parametrize("n", [0, 10, 1000])
def test_one_bulk_request_whatever_the_queue_count(snap_of, n):
    snap, broker, _ = snap_of("site-2.44-dc1.json", mutate=lambda b: b.queues.extend(extra_queues(n)))
    assert snap["requests"] == 1 and broker.http_requests == 1
    assert len(snap["queues"]) == 6 + n


def test_discovery_costs_one_search_once(snap_of):
    snap, broker, col = snap_of("site-2.44-dc1.json", broker_name=None)
    assert snap["broker"] == "dc1" and broker.http_requests == 2
    col.collect()
    assert broker.http_requests == 3


def test_snapshot_2_44(snap_of):
    snap, _, _ = snap_of("site-2.44-dc1.json", include_addresses=True)
    assert snap["version"] == "2.44.0" and snap["features"]["pending_mirror_acks"]
    assert snap["pending_mirror_acks"] == 0
    conn = snap["connections"]["DC2"]
    # listBrokerConnections carries uri/connected on 2.39+: no MBean wildcard read needed
    assert conn["source"] == "listBrokerConnections" and conn["connected"] is True
    assert conn["uri"] == "tcp://dc2:5673" and conn["mirror"] is True
    assert snap["mirrors"]["DC2"]["snf"]["message_count"] == 0
    assert snap["acceptors"]["amqp"]["started"] is True
    q = snap["queues"]["orders"]
    assert (q["address"], q["routing_type"], q["message_count"], q["consumer_count"]) == ("orders", "anycast", 5, 1)
    assert snap["status"]["server"]["state"] == "STARTED"  # Status JSON string decoded
    assert "orders" in snap["addresses"] and snap["addresses"]["orders"]["paused"] is False
    # this broker has no continuity plugin: null plus one note, never an error
    assert snap["continuity_plugin"] is None
    assert snap["notes"] == [plugin.ABSENT_NOTE % 'org.apache.activemq.artemis:broker="dc1",component=continuity']


def test_connection_mbeans_on_request_and_no_acceptors(snap_of):
    snap, _, _ = snap_of("site-2.44-dc1.json", include_connection_mbeans=True, include_acceptors=False)
    conn = snap["connections"]["DC2"]
    assert conn["source"] == "mbean" and conn["retry_interval"] == 5000 and conn["user"] == "mirror"
    assert snap["acceptors"] is None  # not read, which is not the same as "no acceptors"


def test_light_counters_sample(snap_of):
    _, broker, col = snap_of("site-2.44-dc1.json")
    before = broker.http_requests
    light = col.collect_counters(["DC2", "NOPE"])
    assert broker.http_requests == before + 1 and light["requests"] == 1
    assert ss.snf_sample(light, "DC2").messages_added == 1000
    assert ss.snf_sample(light, "NOPE") is None
    light = col.collect_counters()  # all mirrors, one filtered listQueues
    assert set(light["mirrors"]) == {"DC2"} and ss.snf_sample(light, "DC2").message_count == 0
    assert broker.http_requests == before + 2


def test_snapshot_2_33_reports_missing_features_as_null(snap_of):
    snap, _, _ = snap_of("site-2.33-dc1.json")
    assert snap["pending_mirror_acks"] is None
    conn = snap["connections"]["DC2"]
    assert conn["source"] == "listBrokerConnections" and conn["uri"] is None
    # connected inferred from the SNF consumer (1 while connected)
    assert conn["connected"] is True and conn["connected_source"] == "snf_consumer_count"
    assert any("2.40" in n for n in snap["notes"]) and any("2.39" in n for n in snap["notes"])


def test_snapshot_2_33_outage_infers_disconnected(snap_of):
    def cut(b):
        snf = b.queues[-1]
        snf["ConsumerCount"] = 0
        snf["MessageCount"] = 5
    snap, _, _ = snap_of("site-2.33-dc1.json", mutate=cut)
    assert snap["connections"]["DC2"]["connected"] is False
    assert snap["mirrors"]["DC2"]["snf"]["message_count"] == 5


def test_snapshot_2_30_snf_not_listed_backlog_unknown(snap_of):
    snap, broker, _ = snap_of("site-2.30-dc1.json")
    assert snap["requests"] == 1 and broker.http_requests == 1
    assert "$ACTIVEMQ_ARTEMIS_MIRROR_DC2" not in snap["queues"]  # no SNF in the management view before 2.32
    # the fake's broker QueueNames still names the SNF queue, so the mirror is known, its counters are not
    assert snap["mirrors"]["DC2"]["snf"] is None and ss.snf_sample(snap, "DC2") is None
    assert any("2.32" in n and "else null" in n for n in snap["notes"])
    assert snap["queues"]["orders"]["source"] == "listQueues" and snap["queues"]["orders"]["message_count"] == 5


def test_mbeans_source_2_30_tries_list_queues_for_the_snf(snap_of):
    snap, _, _ = snap_of("site-2.30-dc1.json", queue_source="mbeans")
    assert snap["requests"] == 2  # still constant: one extra listQueues
    assert snap["mirrors"]["DC2"]["snf"] is None
    assert any("does not list a mirror SNF queue" in n for n in snap["notes"])


def test_mbeans_source_reads_first_message_age(snap_of):
    def age(b):
        b.queues[-1].update(FirstMessageAge=1500, FirstMessageTimestamp=1_795_313_998_500)
    snap, _, _ = snap_of("site-2.44-dc1.json", queue_source="mbeans", mutate=age)
    assert ss.snf_sample(snap, "DC2").first_message_age_ms == 1500
    assert snap["queues"]["orders"]["mbean"].startswith("org.apache.activemq.artemis:")


def test_list_and_mbeans_sources_agree(snap_of):
    a, _, _ = snap_of("site-2.44-dc1.json")
    b, _, _ = snap_of("site-2.44-dc1.json", queue_source="mbeans")
    keys = ("message_count", "delivering_count", "consumer_count", "messages_added", "messages_acknowledged",
            "paused", "persisted_pause", "internal", "temporary", "address", "routing_type")
    assert set(a["queues"]) == set(b["queues"])
    for name in a["queues"]:
        assert {k: a["queues"][name][k] for k in keys} == {k: b["queues"][name][k] for k in keys}, name


def test_snapshot_list_queues_denied(snap_of):
    def mutate(b):
        b.handle_item = _deny_list_queues(b.handle_item)
    snap, _, _ = snap_of("site-2.44-dc1.json", mutate=mutate)
    assert snap["queues"] == {} and ss.snf_sample(snap, "DC2") is None
    assert any("listQueues failed" in n and "Permission denied" in n for n in snap["notes"])


def _deny_list_queues(handle):
    def wrapped(req, roles):
        if str(req.get("operation", "")).startswith("listQueues"):
            return {"request": req, "status": 403, "error_type": "java.lang.Exception",
                    "error": "java.lang.Exception : User not authorized to access operation: listQueues"}
        return handle(req, roles)
    return wrapped


def test_lab_version_qualifier(snap_of):
    snap, _, _ = snap_of("site-2.44-lab-dc1.json")
    assert snap["version"] == "2.44.0-lab" and snap["features"]["broker_connection_mbean"]


def test_unknown_broker_name_names_existing(snap_of):
    with pytest.raises(jolokia.NotFound, match="dc1"):
        snap_of("site-2.44-dc1.json", broker_name="dc7")


def test_unreachable(jfake):
    b = jfake.FakeArtemis("site-2.44-dc1.json")
    b.fail_connections = 10
    col = ss.SiteCollector(jfake.make_client(b, retries=1), broker_name="dc1", site="dc1", clock=lambda: 42.0)
    snap = col.collect_or_unreachable()
    assert snap["reachable"] is False and snap["ts"] == 42.0 and "refused" in snap["error"]


def test_derived_views(snap_of):
    snap, _, _ = snap_of("site-2.44-dc1.json")
    s = ss.snf_sample(snap, "DC2")
    assert s.message_count == 0 and s.messages_added == 1000
    assert ss.mirror_connections(snap) == ["DC2"] and ss.mirror_connections(snap, "X") == ["X"]
    cq = ss.client_queues(snap)
    assert "orders" in cq and "$ACTIVEMQ_ARTEMIS_MIRROR_DC2" not in cq and "notif.sub" not in cq
    assert ss.consumers_on(snap) == {"orders": 1}
    assert ss.consumers_on(snap, prefix="inv") == {}
    assert ss.select_names(["a1", "a2", "b1"], ["b1"], "a1", r"2$") == ["a1", "a2", "b1"]


def test_compare_sites(jfake):
    a = ss.SiteCollector(jfake.make_client(jfake.FakeArtemis("site-2.44-dc1.json")), "dc1").collect()
    peer = jfake.FakeArtemis("site-2.44-dc2.json", url="http://dc2:8161/console/jolokia")
    peer.allowed_origins = ["http://dc2:8161"]
    peer.queues[2]["MessageCount"] = 4  # orders
    b = ss.SiteCollector(jfake.make_client(peer), "dc2").collect()
    cmp = ss.compare_sites(a, b)
    assert not cmp.equal and cmp.diffs == [{"queue": "orders", "local": 5, "peer": 4, "delta": 1}]
    assert ss.compare_sites(a, b, tolerance=1).equal


def test_parse_snapshot_raises_when_broker_read_fails():
    req = jolokia.read_request('org.apache.activemq.artemis:broker="x"', ["Version"])
    bad = jolokia.Result(req, {"status": 403, "error_type": "java.lang.Exception",
                               "error": "java.lang.Exception : User not authorized to access attribute: Name"})
    with pytest.raises(jolokia.PermissionDenied):
        ss.parse_snapshot("x", {"broker": bad, "status": bad, "pending": bad, "queues": bad, "bconn_list": bad}, 1.0)


def test_pattern_read_without_matching_attributes_is_empty_not_an_error(jfake):
    """Jolokia answers 400 "No matching attributes" when the MBeans exist but lack every attribute asked."""
    from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on

    b = jfake.FakeArtemis("site-2.44-dc1.json")
    client = jfake.make_client(b)
    res = client.bulk([jolokia.read_request(on.all_acceptors("dc1"), ["NoSuchAttr"])])[0]
    assert res.status == 400 and "No matching attributes" in res.error
    notes: list = []
    assert ss._pattern_value(res, notes, "acceptors") == {} and notes == []


def test_acceptors_learnt_once_then_read_by_exact_name(jfake):
    b = jfake.FakeArtemis("site-2.44-dc1.json")
    col = ss.SiteCollector(jfake.make_client(b), "dc1", acceptor_refresh=3)

    def wildcard_reads():
        return sum(1 for c in b.calls if c[0] == "read" and "component=acceptors,name=*" in c[1])

    first = col.collect()
    assert wildcard_reads() == 1 and set(first["acceptors"]) == {"amqp", "artemis", "mirror"}
    b.acceptors["amqp"]["Started"] = False
    second = col.collect()
    assert wildcard_reads() == 1 and second["acceptors"]["amqp"]["started"] is False
    assert second["requests"] == 1
    col.collect()
    col.collect()  # every 3rd snapshot looks for new acceptors again
    assert wildcard_reads() == 2
    del b.acceptors["mirror"]  # a known acceptor disappears: note it and re-learn next time
    snap = col.collect()
    assert snap["acceptors_stale"] is True and any("acceptor mirror" in n for n in snap["notes"])
    assert set(snap["acceptors"]) == {"amqp", "artemis"}
    snap = col.collect()
    assert wildcard_reads() == 3 and snap["acceptors_stale"] is False


def test_read_pair_returns_both_reads_in_order_the_second_from_another_thread():
    import threading

    from ansible_collections.continuity.artemis.plugins.module_utils.site_state import read_pair

    main = threading.get_ident()
    first, second = read_pair(lambda: ("dc1", threading.get_ident()), lambda: ("dc2", threading.get_ident()))
    assert first == ("dc1", main) and second[0] == "dc2" and second[1] != main
