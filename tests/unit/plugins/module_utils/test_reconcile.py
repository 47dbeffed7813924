"""Message-by-message comparison of two mirrored sites (module_utils/reconcile.py), on messages shaped as
QueueControl.browse() returns them on Artemis 2.44 (annotations under messageAnnotations./extraProperties.)."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on
from ansible_collections.continuity.artemis.plugins.module_utils import reconcile


def own(mid):
    return {"messageID": str(mid), "userID": f"ID:m{mid}", "timestamp": 5}


def copy(mid, origin_mid, origin):
    # both prefixes, as a real 2.44 broker shows a mirrored AMQP message
    return {"messageID": str(mid), "userID": f"ID:m{origin_mid}", "timestamp": 5,
            "LongProperties": {"extraProperties.x-opt-amq-mr-id": origin_mid,
                               "messageAnnotations.x-opt-amq-mr-id": origin_mid},
            "StringProperties": {"extraProperties.x-opt-amq-bkr-id": origin,
                                 "messageAnnotations.x-opt-amq-bkr-id": origin}}


def test_identity_is_the_origin_broker_and_id_on_every_site():
    assert reconcile.identity(own(7), "A") == ("A", "7")
    assert reconcile.identity(copy(90, 7, "A"), "B") == ("A", "7")
    # no annotations at all: the broker's own message
    assert reconcile.identity({"messageID": 3}, "B") == ("B", "3")


def test_compare_sorts_each_difference_by_what_a_switch_would_do_with_it():
    old = [own(1), own(2), copy(10, 55, "B")]              # 1, 2 sent to A; 55 came from B
    new = [copy(100, 1, "A"), copy(101, 9, "A"),          # 9 came from A, A no longer has it: phantom / lost ack
           own(55), own(56)]                               # 55 matches A's copy; 56 sent to B, A never had it
    out = reconcile.compare(old, "A", new, "B")
    assert [m["origin_id"] for m in out["only_new_from_old"]] == ["9"]
    assert [(m["origin_node"], m["origin_id"]) for m in out["only_new_other"]] == [("B", "56")]
    assert [m["origin_id"] for m in out["only_old"]] == ["2"]
    assert out["only_new_from_old"][0] == {"message_id": "101", "user_id": "ID:m9", "origin_node": "A",
                                           "origin_id": "9", "timestamp": 5}


def test_equal_sites_have_no_difference():
    assert reconcile.compare([own(1)], "A", [copy(7, 1, "A")], "B") == {
        "only_new_from_old": [], "only_new_other": [], "only_old": []}


@pytest.mark.parametrize("policy,ok,removes", [("refuse", False, {}), ("keep", True, {}),
                                               ("remove", True, {"q": ["101"]})])
def test_decide_on_copies_from_the_old_site(policy, ok, removes):
    found = {"q": reconcile.compare([own(1)], "A", [copy(100, 1, "A"), copy(101, 9, "A")], "B")}
    decision = reconcile.decide(found, policy, "dc1", "dc2")
    assert (decision["ok"], decision["remove"]) == (ok, removes)
    assert "dc2 holds copies of messages that came from dc1" in decision["reason"] and "q 1" in decision["reason"]


def test_decide_never_passes_a_message_only_the_old_site_holds():
    found = {"q": reconcile.compare([own(1), own(2)], "A", [copy(100, 1, "A")], "B")}
    for policy in reconcile.POLICIES:
        decision = reconcile.decide(found, policy, "dc1", "dc2")
        assert not decision["ok"] and decision["remove"] == {} and "could lose them" in decision["reason"]


def test_decide_rejects_an_unknown_policy():
    with pytest.raises(ValueError, match="refuse, remove, keep"):
        reconcile.decide({}, "delete", "dc1", "dc2")


class Result:
    def __init__(self, value):
        self.value = value


class Client:
    def __init__(self, messages):
        self.messages, self.pages, self.bulks = list(messages), [], []

    def exec(self, mbean, op, page, size):
        assert op == "browse(int,int)"
        self.pages.append(page)
        return self.messages[(page - 1) * size:page * size]

    def bulk(self, reqs, raise_errors=False):
        self.bulks.append(len(reqs))
        out = []
        for r in reqs:
            assert r["operation"] == "removeMessage(long)" and r["type"] == "exec"
            hit = [m for m in self.messages if m["messageID"] == str(r["arguments"][0])]
            self.messages = [m for m in self.messages if m not in hit]
            out.append(Result(bool(hit)))
        return out


def test_browse_reads_page_after_page_and_stops_at_a_short_one():
    client = Client([own(i) for i in range(450)])
    assert len(reconcile.browse(client, "q", page_size=200)) == 450 and client.pages == [1, 2, 3]
    with pytest.raises(ValueError, match="too many to compare"):
        reconcile.browse(Client([own(i) for i in range(600)]), "q", page_size=200, limit=400)


def test_remove_in_bulk_chunks_and_counts_what_the_broker_removed():
    client = Client([own(i) for i in range(5)])
    assert reconcile.remove(client, "q", ["0", "1", "2", "77"], chunk=3) == 3
    assert client.bulks == [3, 1] and [m["messageID"] for m in client.messages] == ["3", "4"]


def test_a_queue_read_by_listqueues_gets_its_mbean_from_the_broker_address_and_routing_type():
    listed = {"broker": "dc1-backup", "queues": {"orders": {"name": "orders", "address": "shop", "mbean": None,
                                                            "routing_type": "multicast"}}}
    assert reconcile.queue_mbean(listed, "orders") == on.queue("dc1-backup", "shop", "orders", "multicast")
    read = {"broker": "dc1", "queues": {"orders": {"mbean": "org.apache.activemq.artemis:broker=\"x\""}}}
    assert reconcile.queue_mbean(read, "orders") == read["queues"]["orders"]["mbean"]
