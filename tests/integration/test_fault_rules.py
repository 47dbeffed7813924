"""The rules the fault suites judge by (fault_support), on hand-made records: a rule that explains a copy or a
duplicate by a broker restart must also refuse the ones a restart does not explain; and the share of kill points each
Artemis version runs leaves none out."""

from __future__ import annotations

from fault_support import VERSIONS, restart_duplicates, restart_lost_ack_problems, share

RESTARTS = [{"site": "dc1", "began": 100.0, "stopped": 103.0}]


def copy(seq: int) -> dict:
    return {"user_id": f"ID:faults:ft-p0:{seq}", "message_id": str(seq)}


def received(seq: int, site: str, ack: float) -> dict:
    return {f"faults:ft-p0:{seq}": [{"msg_id": f"faults:ft-p0:{seq}", "site": site, "recv_ts": ack - 0.01,
                                     "ack_ts": ack}]}


def test_a_copy_acknowledged_on_the_peer_while_the_holder_stopped_is_explained():
    # the 2.44.0 case: acknowledged on dc2 0.04 s before dc1's stop began, dc1 kept its copy
    assert restart_lost_ack_problems([copy(1)], received(1, "dc2", 99.96), RESTARTS, "dc1") == []


def test_a_copy_acknowledged_outside_the_stop_or_on_the_holder_or_never_is_not():
    for ledger, why in ((received(2, "dc2", 90.0), "acknowledged on dc2 at 90.000"),
                        (received(3, "dc1", 101.0), "acknowledged on dc1"),
                        ({}, "never received")):
        problems = restart_lost_ack_problems([copy(2 if "90" in why else 3)], ledger, RESTARTS, "dc1")
        assert len(problems) == 1 and why in problems[0], problems
    # a restart of the other site explains nothing on this one
    assert restart_lost_ack_problems([copy(1)], received(1, "dc2", 99.96), RESTARTS, "dc2")


def test_a_duplicate_is_explained_only_by_an_ack_on_the_stopping_broker_and_a_later_delivery():
    again = {"msg_id": "m", "site": "dc2", "recv_ts": 110.0, "ack_ts": 110.0}
    explained, other = restart_duplicates([{"msg_id": "m", "site": "dc1", "recv_ts": 101.0, "ack_ts": 101.5}, again],
                                          RESTARTS)
    assert (explained, other) == (["m"], [])
    explained, other = restart_duplicates([{"msg_id": "m", "site": "dc1", "recv_ts": 50.0, "ack_ts": 50.0}, again],
                                          RESTARTS)
    assert (explained, other) == ([], ["m"])


def test_every_kill_point_runs_on_one_version_and_the_fence_points_on_each():
    points = [{"task": t, "occurrence": 1} for t in ("Fence the lost site", "Read a", "Write b", "Write c", "Write d",
                                                     "Persist the fence of the old site", "Write e")]
    always = ("Fence the lost site", "Persist the fence")
    shares = {v: share(points, v, always) for v in VERSIONS}
    for p in points:
        on = [v for v in VERSIONS if p in shares[v]]
        assert on == (list(VERSIONS) if p["task"].startswith(always) else on[:1]) and on, (p, on)
    # the others alternate: each version gets half of them, in the suite's order
    assert [len(shares[v]) - 2 for v in VERSIONS] == [3, 2], shares
