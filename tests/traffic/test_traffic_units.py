"""Pure parts of the traffic tool: pacing, resend delays, configuration checks, display, argv handling."""

from __future__ import annotations

import pytest

from continuity_traffic import cli, display
from continuity_traffic.config import ConfigError, TrafficConfig, validate
from continuity_traffic.engine import TICK_MAX, TICK_MIN, Pacer, message_id, next_tick, resend_delay


def test_pacer_holds_the_rate():
    p = Pacer(100.0, start=0.0)
    total = 0
    for step in range(1, 101):  # 1 s in 10 ms steps
        n = p.allowance(step / 100)
        p.took(n)
        total += n
    assert total == 100


def test_pacer_does_not_burst_after_a_stall():
    p = Pacer(1000.0, start=0.0, max_burst_seconds=0.5)
    assert p.allowance(10.0) == 500  # 10 s without a connection: at most half a second of catch-up
    p.took(500)
    assert p.allowance(10.0) == 0
    assert p.allowance(10.1) == 100


def test_unlimited_rate():
    assert Pacer(0, start=0).allowance(0.0) > 10**6
    assert Pacer(0, start=0).due_in(5.0) == 0.0


def test_pacer_says_when_the_next_message_is_due():
    p = Pacer(25.0, start=0.0)  # one message every 40 ms
    assert p.due_in(0.0) == pytest.approx(0.04)
    assert p.due_in(0.03) == pytest.approx(0.01)
    assert p.allowance(0.04) == 1 and p.due_in(0.05) == 0.0  # due and not yet taken: now
    p.took(1)
    assert p.due_in(0.05) == pytest.approx(0.03)


def test_the_timer_wakes_when_work_is_due_within_its_bounds():
    assert next_tick([None, 0.02, 0.04]) == pytest.approx(0.02)  # the earliest due client
    assert next_tick([0.0, None]) == TICK_MIN  # due now, or overdue: not a busy loop
    assert next_tick([None, None]) == TICK_MAX == next_tick([])  # nothing due: a stop request is still seen soon
    assert next_tick([3.0]) == TICK_MAX


def test_resend_delay():
    assert [resend_delay(a, 0.2, 1.0) for a in (1, 2, 3, 4, 5)] == [0.0, 0.2, 0.4, 0.8, 1.0]


def test_message_id_is_unique_per_run_producer_seq():
    ids = {message_id("r", p, s) for p in ("a", "b") for s in range(3)}
    assert len(ids) == 6


def cfg(**kw):
    base = {"urls": ["dc1=amqp://h:1"], "run_id": "r1", "name": "t"}
    base.update(kw)
    return TrafficConfig(**base)


@pytest.mark.parametrize("kw, needle", [
    ({"urls": ["ftp://x"]}, "--url"),
    ({"producers": 0, "consumers": 0}, "nothing to do"),
    ({"rate": -1}, "--rate"),
    ({"ack_mode": "auto"}, "--ack-mode"),
    ({"ack_mode": "batch", "batch_size": 200, "prefetch": 100}, "--batch-size"),
    ({"run_id": "../x"}, "--run-id"),
    ({"password": "pw"}, "--password needs --user"),
    ({"duration": 0}, "--duration"),
])
def test_validate_rejects(kw, needle):
    with pytest.raises(ConfigError, match=needle.replace("-", r"\-")):
        validate(cfg(**kw))


def test_config_derived_and_public():
    c = validate(cfg(producers=2, consumers=1, user="app", password="pw", evidence_dir="/e"))
    assert c.producer_names() == ["t-p0", "t-p1"] and c.consumer_names() == ["t-c0"]
    assert c.run_dir == "/e/r1"
    assert c.public()["password"] == "***" and "pw" not in repr(c)
    assert TrafficConfig(urls=["h:1"]).run_id.startswith("traffic-")


def snap(elapsed, accepted, received, **extra):
    base = {"run_id": "r", "state": "running", "elapsed": elapsed, "duration": None, "sent": {"accepted": accepted},
            "in_flight": 3, "resends": 0, "received": received, "acked": received, "redelivered": 0,
            "backlog_estimate": accepted - received, "sites": {"p0": "dc1", "c0": None}, "disconnects": 1,
            "errors": []}
    base.update(extra)
    return base


def test_display():
    a, b = snap(1.0, 100, 90), snap(3.0, 1100, 1090, errors=[{"client": "c0", "message": "dc1: refused"}])
    assert display.rates(a, b) == (500.0, 500.0)
    line = display.log_line(a, b)
    assert "sent=1100 (500/s)" in line and "clients@-:1 dc1:1" in line and "last_error=dc1: refused" in line
    block = display.live_block(a, b, width=60)
    assert all(len(x) <= 60 for x in block) and any("c0: dc1: refused" in x for x in block)


def test_strip_options_for_the_background_child():
    argv = ["--url", "u", "--run-id", "x", "--name=n", "--rate", "5", "--wait", "3"]
    assert cli._strip(argv, {"--run-id", "--name", "--wait"}) == ["--url", "u", "--rate", "5"]


def test_password_never_on_the_command_line():
    parser = cli.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--url", "h:1", "--password", "x"])
