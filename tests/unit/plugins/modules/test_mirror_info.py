"""mirror_info: rates and lag from two samples, peer comparison, version fallbacks, request counts."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import evidence, site_state
from ansible_collections.continuity.artemis.plugins.modules import mirror_info

URL1 = "http://dc1:8161/console/jolokia"
URL2 = "http://dc2:8161/console/jolokia"


def args(**kw):
    a = {"url": URL1, "username": "admin", "password": "secret", "broker_name": "dc1",
         "peer": {"url": URL2, "username": "admin", "password": "secret", "broker_name": "dc2"}}
    a.update(kw)
    return a


@pytest.fixture
def pair(jolokia_sites):
    def make(gen="2.44"):
        return (jolokia_sites.add(f"site-{gen}-dc1.json", URL1), jolokia_sites.add(f"site-{gen}-dc2.json", URL2))
    return make


def test_in_sync_2_44(pair, jfake, fake_time):
    dc1, dc2 = pair()
    r = jfake.run_module(mirror_info, args(), check_mode=True)
    assert not r.failed, r.result
    res = r.result
    assert res["changed"] is False
    (c,) = res["connections"]
    assert c["name"] == "DC2" and c["connected"] is True and c["uri"] == "tcp://dc2:5673"
    assert c["backlog"] == 0 and c["lag_seconds"] == 0.0 and c["pending_acks"] == 0
    assert c["add_rate"] == 0.0 and c["drain_rate"] == 0.0
    assert res["queue_comparison"]["equal"] is True and res["queue_comparison"]["compared"] == 4
    assert res["passive_consumers"] == 0
    # constant requests: 2 samples of the site, 1 of the peer (broker names given)
    assert dc1.http_requests == 2 and dc2.http_requests == 1
    assert fake_time.sleeps == [1.0]


def test_outage_backlog_rates_and_no_made_up_lag(pair, jfake, fake_time):
    dc1, dc2 = pair()
    snf = dc1.queues[-1]
    dc1.connections[0]["Connected"] = False
    snf.update(MessageCount=3000, MessagesAdded=10_000, MessagesAcknowledged=7000,
               FirstMessageAge=1_795_314_000_000, FirstMessageTimestamp=0)

    def grow(seconds):
        snf.update(MessageCount=5000, MessagesAdded=12_000)
    fake_time.on_sleep = grow
    dc2.queues[2]["MessageCount"] = 1  # orders differs: 5 vs 1
    res = jfake.run_module(mirror_info, args(sample_interval=2, assumed_drain_rate=20_000.0,
                                             overhead_seconds=5)).result
    (c,) = res["connections"]
    assert c["connected"] is False and c["backlog"] == 5000
    assert c["add_rate"] == pytest.approx(1000.0) and c["drain_rate"] == 0.0
    assert c["lag_seconds"] is None and c["first_message_age_seconds"] is None
    assert c["rpo_events_est"] == 5000 and c["rpo_seconds_est"] == pytest.approx(5.0)
    assert c["rto_seconds_est"] == pytest.approx(5000 / 20_000 + 5)
    assert res["queue_comparison"]["diffs"] == [{"queue": "orders", "local": 5, "peer": 1, "delta": 4}]
    assert c["queue_diff_count"] == 1


def test_named_connection_uses_a_light_first_sample(pair, jfake, fake_time):
    dc1, dc2 = pair()
    snf = dc1.queues[-1]
    snf.update(MessageCount=100, MessagesAdded=1000, MessagesAcknowledged=900)
    fake_time.on_sleep = lambda s: snf.update(MessageCount=50, MessagesAdded=1100, MessagesAcknowledged=1050)
    res = jfake.run_module(mirror_info, args(connection="DC2")).result
    (c,) = res["connections"]
    assert c["drain_rate"] == pytest.approx(150.0) and c["lag_seconds"] == pytest.approx(50 / 150)  # FIFO lag
    light = [call for call in dc1.calls if call[0] == "read" and "MIRROR_DC2" in call[1]]
    assert light  # exact read of the SNF queue, not a wildcard
    assert dc1.http_requests == 2 and dc2.http_requests == 1


def test_lag_sample_is_valid_evidence(pair, jfake, fake_time):
    pair()
    res = jfake.run_module(mirror_info, args()).result
    fields = res["connections"][0]["lag_sample"]
    record = evidence.lag_sample_record("run-1", **fields)
    evidence.check(record)
    assert record["site"] == "dc1" and record["peer"] == "dc2" and record["connection"] == "DC2"


def test_pre_2_39_generation(pair, jfake, fake_time):
    pair("2.33")
    res = jfake.run_module(mirror_info, args(sample_interval=0)).result
    (c,) = res["connections"]
    assert c["pending_acks"] is None and c["uri"] is None
    assert c["connected"] is True and c["connected_source"] == "snf_consumer_count"
    assert any("PendingMirrorAcks unknown" in n for n in c["notes"])
    assert fake_time.sleeps == []


def test_2_30_without_peer(jolokia_sites, jfake, fake_time):
    dc1 = jolokia_sites.add("site-2.30-dc1.json", URL1)
    a = args(sample_interval=0.5)
    del a["peer"]
    res = jfake.run_module(mirror_info, a).result
    (c,) = res["connections"]
    assert c["backlog"] is None and c["lag_seconds"] is None  # no SNF queue visible before 2.32: unknown, not 0
    assert res["queue_comparison"] is None and c["pending_acks"] is None
    assert any("no peer given" in n for n in c["notes"])
    assert any("2.32" in n for n in res["notes"])
    assert dc1.http_requests == 2  # 2 samples x 1 bulk


def test_unknown_connection_and_peer_failure(pair, jfake, fake_time):
    _, dc2 = pair()
    res = jfake.run_module(mirror_info, args(connection="NOPE", sample_interval=0)).result
    assert res["connections"][0]["exists"] is False
    assert "no broker connection named 'NOPE'" in res["connections"][0]["notes"][0]
    dc2.users = {}
    r = jfake.run_module(mirror_info, args(sample_interval=0))
    assert r.failed and r.result["msg"].startswith("peer http://dc2:8161")
    assert "HTTP 401" in r.result["msg"]


def test_negative_interval_rejected(pair, jfake, fake_time):
    pair()
    r = jfake.run_module(mirror_info, args(sample_interval=-1))
    assert r.failed and "sample_interval" in r.result["msg"]


def test_paused_client_queues_are_named_for_both_sites(pair, jfake, fake_time):
    dc1, _dc2 = pair()
    assert site_state.paused_client_queues({"queues": None}) is None
    r = jfake.run_module(mirror_info, args(), check_mode=True)
    assert r.result["site"]["paused_queues"] == [] and r.result["peer_site"]["paused_queues"] == []
    client = next(q for q in dc1.queues if not q.get("InternalQueue") and not q["Name"].startswith("$"))
    client["Paused"] = True
    r = jfake.run_module(mirror_info, args(), check_mode=True)
    assert r.result["site"]["paused_queues"] == [client["Name"]]
    assert r.result["peer_site"]["paused_queues"] == []
