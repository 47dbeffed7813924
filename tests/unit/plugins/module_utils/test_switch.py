"""Swapover logic against a fake two-site world (no HTTP): the sequence, the gates, rollback and resume."""

from __future__ import annotations

import json

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on
from ansible_collections.continuity.artemis.plugins.module_utils import site_role, switch


class FakeResult:
    def __init__(self, ok=True, value=None, status=200, error=None):
        self.ok = ok
        self.value = value
        self.status = status
        self.error = error
        self.error_type = None
        self.request = {}

    def raise_for_status(self):
        if not self.ok:
            raise RuntimeError("item failed")
        return self


class World:
    """Two brokers whose mirrors drain by `drain_per_sample` events per snapshot once quiesced."""

    def __init__(self, version="2.44.0", backlog=5, drain_per_sample=2, orders=(10, 10), stuck=False):
        self.version = version
        self.backlog = {"dc1": backlog, "dc2": 0}
        self.drain = drain_per_sample
        self.orders = {"dc1": orders[0], "dc2": orders[1]}
        self.acceptors = {"dc1": {"artemis": True, "mirror": True}, "dc2": {"artemis": False, "mirror": True}}
        self.stuck = stuck  # the mirror never drains (a cut WAN link)
        self.cut_on_quiesce = False
        self.paused = {"dc1": False, "dc2": False}
        self.delivering = {"dc1": 0, "dc2": 0}  # messages handed to consumers and not acknowledged yet
        self.stuck_consumer = False
        self.guard = {"dc1": None, "dc2": None}  # the continuity plugin's role; None = plugin not installed
        self.calls: list = []
        self.reloads = 0
        self.messages: dict | None = None  # {site: [browsed message]}: then they define the counts of "orders"
        # reads that miss the client acceptor while the broker recreates it (Artemis 2.43+ applying broker.xml)
        self.recreating = {"dc1": 0, "dc2": 0}
        # the client acceptor's autoStart in the broker.xml each broker applied last (at start, on a reload or by
        # its periodic file scan): its Parameters, and what a reload compares the file with
        self.applied = {"dc1": True, "dc2": False}

    def apply_file(self, site):
        """What Artemis 2.43+ does on a reload and on its periodic file scan: an acceptor whose entry differs
        from the one applied last is recreated (started when autoStart is true); an unchanged one is left as it
        is, stopped or not."""
        wanted = self.file_auto_start(site)
        if wanted != self.applied[site]:
            self.applied[site] = wanted
            self.acceptors[site]["artemis"] = wanted

    def snapshot(self, site):
        self.calls.append(("snapshot", site))
        if not self.stuck:
            for s in self.backlog:
                self.backlog[s] = max(0, self.backlog[s] - self.drain)
        peer = "DC2" if site == "dc1" else "DC1"
        connected = not self.stuck
        if self.paused[site] and not self.stuck_consumer and self.delivering[site]:
            self.delivering[site] -= 1  # consumers acknowledge what they hold once nothing new arrives
        listed = dict(self.acceptors[site])
        if self.recreating[site]:
            self.recreating[site] -= 1
            listed.pop("artemis")
        return {
            "site": site, "broker": site, "reachable": True, "ts": float(len(self.calls)),
            "version": self.version, "features": {"pending_mirror_acks": True}, "node_id": "node-" + site,
            "status": {"configuration": {"properties": {}}},
            "pending_mirror_acks": 0,
            "acceptors": {n: {"name": n, "started": st} for n, st in listed.items()},
            "connections": {peer: {"name": peer, "started": True, "connected": connected, "mirror": True}},
            "mirrors": {peer: {"snf": {"message_count": self.backlog[site], "messages_added": 0,
                                       "messages_acknowledged": 0, "delivering_count": 0}}},
            "queues": {"orders": {"address": "orders", "consumer_count": 0,
                                  "message_count": len(self.messages[site]) if self.messages else self.orders[site],
                                  "internal": False, "temporary": False, "paused": self.paused[site],
                                  "delivering_count": self.delivering[site], "messages_added": 100,
                                  "routing_type": "anycast", "name": "orders",
                                  # a snapshot read with listQueues names no MBean (site_state._list_entry)
                                  "mbean": None if self.messages else on.queue(site, "orders", "orders")}},
        }


class FakeClient:
    def __init__(self, world, site):
        self.world, self.site = world, site

    def bulk(self, requests, raise_errors=False):
        out = []
        for req in requests:
            _d, props = on.parse(req["mbean"])
            if req.get("operation") == "removeMessage(long)":
                assert req["mbean"] == on.queue(self.site, "orders", "orders"), req["mbean"]
                found = [m for m in self.world.messages[self.site] if m["messageID"] == str(req["arguments"][0])]
                self.world.messages[self.site] = [m for m in self.world.messages[self.site] if m not in found]
                self.world.calls.append(("removeMessage", self.site, req["arguments"][0]))
                out.append(FakeResult(value=bool(found)))
                continue
            if props.get("component") == "continuity":  # the plugin's SiteRole read
                role = self.world.guard[self.site]
                out.append(FakeResult(value=role) if role else FakeResult(False, status=404, error="not found"))
                continue
            if props.get("component") != "acceptors":  # address block/unblock, queue pause/resume
                self.world.calls.append((req["operation"], self.site, props.get("queue") or props.get("address")))
                if req["operation"] == "pause()":
                    self.world.paused[self.site] = True
                elif req["operation"] == "resume()":
                    self.world.paused[self.site] = False
                out.append(FakeResult())
                continue
            started = req["operation"] == "start()"
            self.world.acceptors[self.site][props["name"]] = started
            if not started and self.world.cut_on_quiesce:
                self.world.stuck = True  # the WAN link goes down during the drain
            self.world.calls.append((req["operation"], self.site, props["name"]))
            out.append(FakeResult())
        return out

    def request(self, req):
        """The settle sample (listQueues filtered by the broker on deliveringCount > 0) or the plugin's
        setSiteRole."""
        if req["operation"] == "setSiteRole(java.lang.String)":
            assert self.world.guard[self.site] is not None, "setSiteRole on a broker without the plugin"
            self.world.guard[self.site] = req["arguments"][0]
            self.world.calls.append(("guard", self.site, req["arguments"][0]))
            return None
        assert req["operation"] == "listQueues(java.lang.String,int,int)"
        options = json.loads(req["arguments"][0])
        assert (options["field"], options["operation"], options["value"]) == ("deliveringCount", "GREATER_THAN", "0")
        self.world.calls.append(("in_flight", self.site))
        w = self.world
        if w.paused[self.site] and not w.stuck_consumer and w.delivering[self.site]:
            w.delivering[self.site] -= 1  # consumers acknowledge what they hold once nothing new arrives
        rows = [{"name": "orders", "address": "orders", "deliveringCount": str(w.delivering[self.site])},
                {"name": "$ACTIVEMQ_ARTEMIS_MIRROR_peer", "address": "$ACTIVEMQ_ARTEMIS_MIRROR_peer",
                 "deliveringCount": "7", "internalQueue": "true"}]
        rows = [r for r in rows if int(r["deliveringCount"]) > 0]
        return json.dumps({"data": rows, "count": len(rows)})

    def read(self, mbean, attrs):
        assert mbean == on.all_acceptors(self.site) and attrs in (["Started"], ["Started", "Parameters"]), attrs
        self.world.calls.append(("read acceptors", self.site))
        listed = dict(self.world.acceptors[self.site])
        if self.world.recreating[self.site]:
            self.world.recreating[self.site] -= 1
            listed.pop("artemis")
        params = {"artemis": {"protocols": "AMQP", "autoStart": str(self.world.applied[self.site]).lower()},
                  "mirror": {"protocols": "AMQP"}}
        return {on.acceptor(self.site, n): {"Started": st, "Parameters": params[n]} if "Parameters" in attrs
                else {"Started": st} for n, st in listed.items()}

    def exec(self, mbean, op, *args):
        if op == "browse(int,int)":
            assert mbean == on.queue(self.site, "orders", "orders"), mbean
            page, size = args
            self.world.calls.append(("browse", self.site, page))
            return self.world.messages[self.site][(page - 1) * size:page * size]
        assert op == "reloadConfigurationFile()"
        self.world.reloads += 1
        self.world.calls.append(("reload", self.site))
        self.world.apply_file(self.site)


class FakeCollector:
    def __init__(self, world, site):
        self.world, self.site = world, site
        self.client = FakeClient(world, site)

    def resolve_broker(self):
        return self.site

    def collect(self):
        return self.world.snapshot(self.site)

    def collect_or_unreachable(self):
        return self.collect()


XML = '<configuration><core><acceptors><acceptor name="artemis">tcp://127.0.0.1:61616?protocols=AMQP{}</acceptor>' \
      '<acceptor name="mirror">tcp://127.0.0.1:61617?protocols=AMQP</acceptor></acceptors></core></configuration>'


@pytest.fixture
def world(tmp_path):
    w = World()
    files = {"dc1": tmp_path / "dc1.xml", "dc2": tmp_path / "dc2.xml"}
    files["dc1"].write_text(XML.format(""))
    files["dc2"].write_text(XML.format(";autoStart=false"))

    def file_auto_start(site):
        return "autoStart=false" not in files[site].read_text()

    w.file_auto_start = file_auto_start
    w.files = files
    return w


def sites(world, with_files=True):
    mk = lambda name: switch.Site(name, FakeCollector(world, name), ["artemis"],  # noqa: E731
                                  str(world.files[name]) if with_files else None)
    return mk("dc1"), mk("dc2")


def run(world, **kw):
    old, new = sites(world)
    return switch.swapover(old, new, wait_sleep=0, sleeper=lambda s: None, **kw)


def test_swapover_fences_drains_then_activates_by_reload_on_2_43_plus(world):
    res = run(world, stable_samples=2)
    assert res["changed"] is True
    assert [p["phase"] for p in res["phases"]] == ["preflight", "quiesce", "drain", "activate", "seal",
                                                   "mirrors_after"]
    assert [p["decision"] for p in res["phases"]] == ["pass", "done", "pass", "done", "done", "pass"]
    assert res["mirrors_connected_after"] is True
    # the old site's fence is written before the activation (issue 16 item 6); the seal then finds it there
    assert res["old_fence_persisted"] is True and res["phases"][3]["data"]["old_fence_written_first"] is True
    assert res["phases"][4]["data"]["fence_written"] is False
    assert world.acceptors == {"dc1": {"artemis": False, "mirror": True}, "dc2": {"artemis": True, "mirror": True}}
    # The fence is in the files: a restarted dc1 stays passive, dc2 comes up active.
    assert "autoStart=false" in world.files["dc1"].read_text()
    assert "autoStart=true" in world.files["dc2"].read_text()
    assert world.reloads == 1  # 2.44: activation by reload, no later bounce
    assert res["phases"][3]["data"]["method"] == "reload"
    drain = res["phases"][2]
    assert drain["gate_samples"][-1]["ok"] and drain["gate_samples"][-1]["stable_streak"] == 2
    # dc1's acceptor was stopped before dc2's was opened: never two sites serving.
    order = [c for c in world.calls if c[0] in ("stop()", "reload", "start()")]
    assert order[0] == ("stop()", "dc1", "artemis") and order[-1] == ("reload", "dc2")
    assert res["roles_after"] == {"dc1": "passive", "dc2": "active"}
    assert res["client_outage_seconds"] is not None and res["client_outage_seconds"] >= 0


def test_switches_faster_than_the_file_scan_open_the_acceptor_the_reload_leaves_stopped(world, fake_clock):
    """Seen on 2.44 (benchmarks/runbooks.md): dc1 -> dc2 -> dc1 seconds apart. dc1's fence was written at the
    first switch and lifted at the second before dc1's broker scanned its file, so the broker still applies an
    open acceptor: the reload recreates nothing and leaves it stopped. The activation starts it at once instead
    of waiting out the activation timeout (a 30 s outage)."""
    dc1, dc2 = sites(world)
    first = switch.swapover(dc1, dc2, wait_sleep=0, clock=fake_clock, sleeper=fake_clock.sleep)
    assert first["phases"][3]["data"]["method"] == "reload"  # dc2 had applied its fence: the reload opens it
    assert world.applied["dc1"] is True and "autoStart=false" in world.files["dc1"].read_text()
    back = switch.swapover(dc2, dc1, wait_sleep=0.05, clock=fake_clock, sleeper=fake_clock.sleep)
    activation = back["phases"][3]
    assert activation["data"]["method"] == "reload+start"
    assert world.acceptors["dc1"]["artemis"] is True and back["roles_after"] == {"dc2": "passive", "dc1": "active"}
    assert fake_clock.t < 1.0  # no wait for a recreation that never comes (the activation timeout is 30 s)
    # the reload ran first (a broker that had applied the fence recreates the acceptor itself), then start()
    calls = [c for c in world.calls if c[0] in ("reload", "start()")]
    assert calls[-2:] == [("reload", "dc1"), ("start()", "dc1", "artemis")]
    # the broker's next file scan finds the file it already applies: nothing bounces the new clients
    world.apply_file("dc1")
    assert world.acceptors["dc1"]["artemis"] is True


def test_pre_2_43_activates_with_start(world):
    world.version = "2.33.0"
    res = run(world)
    assert res["phases"][3]["data"]["method"] == "start"
    assert world.reloads == 0
    assert world.acceptors["dc2"]["artemis"] is True


def test_drain_gate_timeout_rolls_back_to_old_site(world):
    world.cut_on_quiesce = True
    with pytest.raises(switch.SwitchError) as err:
        run(world, drain_timeout=0)
    msg = str(err.value)
    assert "drain gate failed" in msg and "rolled back: dc1 is active again" in msg
    assert "connected: dc1/DC2 is not connected" in msg
    assert [p["phase"] for p in err.value.phases] == ["preflight", "quiesce", "drain", "rollback"]
    assert [p["decision"] for p in err.value.phases] == ["pass", "done", "fail", "rollback"]
    assert world.acceptors["dc1"]["artemis"] is True and world.acceptors["dc2"]["artemis"] is False
    assert "autoStart=false" not in world.files["dc1"].read_text()


def test_preflight_refuses_when_mirror_disconnected_and_changes_nothing(world):
    world.stuck = True
    with pytest.raises(switch.SwitchError, match="preflight failed, nothing was changed"):
        run(world, preflight_max_backlog=100)
    assert world.acceptors["dc1"]["artemis"] is True
    assert not [c for c in world.calls if c[0] in ("stop()", "start()", "reload")]


def test_preflight_reads_again_while_an_acceptor_is_being_recreated(world):
    # seen on 2.44: the swapover started while the passive site's broker applied the fence just written
    world.recreating["dc2"] = 3
    res = run(world)
    assert res["changed"] is True and res["roles_before"] == {"dc1": "active", "dc2": "passive"}
    assert world.recreating["dc2"] == 0


def test_preflight_names_an_acceptor_that_stays_missing_and_changes_nothing(world, fake_clock):
    world.recreating["dc2"] = 10 ** 6
    clock = fake_clock
    old, new = sites(world)
    with pytest.raises(ValueError, match=r"client acceptor\(s\) artemis not found on the broker; acceptors that "
                                         r"exist: mirror"):
        switch.swapover(old, new, wait_sleep=0, clock=clock, sleeper=clock.sleep)
    assert clock.t >= switch.ACCEPTOR_RECREATE_SECONDS  # it waited the whole bound before saying so
    assert world.acceptors["dc1"]["artemis"] is True
    assert not [c for c in world.calls if c[0] in ("stop()", "start()", "reload")]


def test_an_acceptor_read_after_a_change_waits_for_the_recreated_acceptor_with_the_cheap_read(world):
    # the site_role module's read after it fenced or opened a site: one pattern read per try, no snapshot
    world.recreating["dc1"] = 2
    dc1, _dc2 = sites(world)
    assert dc1.settled_acceptors(sleeper=lambda s: None) == {"artemis": True, "mirror": True}
    assert world.calls == [("read acceptors", "dc1")] * 3


def test_an_acceptor_read_gives_up_after_the_bound_and_returns_what_it_saw(world, fake_clock):
    world.recreating["dc1"] = 10 ** 6
    clock = fake_clock
    dc1, _dc2 = sites(world)
    seen = dc1.settled_acceptors(clock=clock, sleeper=clock.sleep)
    assert seen == {"mirror": True} and clock.t >= switch.ACCEPTOR_RECREATE_SECONDS
    with pytest.raises(ValueError, match=r"client acceptor\(s\) artemis not found"):
        site_role.derive_role(seen, dc1.client_acceptors)


def test_unequal_queue_counts_block_the_switch(world):
    world.orders = {"dc1": 10, "dc2": 9}  # e.g. a dropped mirrored ack: PendingMirrorAcks is back to 0
    with pytest.raises(switch.SwitchError, match=r"queues_equal: 1 queue\(s\) differ: orders 10!=9"):
        run(world, drain_timeout=0)
    assert world.acceptors["dc1"]["artemis"] is True


def test_rerun_after_success_is_a_no_op(world):
    run(world)
    calls = len(world.calls)
    res = run(world)
    assert res["changed"] is False and res["phases"][0]["decision"] == "skipped"
    assert not [c for c in world.calls[calls:] if c[0] in ("stop()", "start()", "reload")]


def test_resume_after_interruption_between_quiesce_and_activate(world):
    world.acceptors["dc1"]["artemis"] = False  # a previous run stopped dc1 and died
    res = run(world)
    assert res["resumed"] is True and res["changed"] is True
    assert world.acceptors["dc2"]["artemis"] is True
    assert "resuming an interrupted swapover" in res["phases"][0]["reason"]


def test_refuses_when_both_sites_serve(world):
    world.acceptors["dc2"]["artemis"] = True
    with pytest.raises(switch.SwitchError, match="both sites serve clients"):
        run(world)


def test_check_mode_changes_nothing(world):
    old, new = sites(world)
    res = switch.swapover(old, new, check_mode=True)
    assert res["changed"] is True and res["roles_after"]["dc2"] == "active"
    assert world.acceptors["dc1"]["artemis"] is True and world.acceptors["dc2"]["artemis"] is False
    assert "autoStart=false" in world.files["dc2"].read_text()


def test_config_errors_found_in_status():
    status = {"configuration": {"properties": {"broker.xml": {"alder32": "1", "errors": "AMQ229xxx bad element"}}}}
    assert switch.config_errors(status) == ["configuration.properties.broker.xml.errors: AMQ229xxx bad element"]
    assert switch.config_errors({"configuration": {"properties": {"x": {"alder32": "1"}}}}) == []


def test_drain_conditions_skip_pending_acks_before_2_40():
    old = {"features": {"pending_mirror_acks": False}}
    new = {"features": {"pending_mirror_acks": True}}
    assert "max_pending_acks" not in switch.drain_conditions(old, new)
    assert switch.drain_conditions(new, new)["max_pending_acks"] == 0


def test_quiesce_waits_for_outstanding_deliveries_before_the_fence(world):
    world.delivering["dc1"] = 3
    res = run(world)
    ops = [c for c in world.calls if c[0] in ("pause()", "stop()", "resume()")]
    assert [c[0] for c in ops] == ["pause()", "stop()", "resume()"]
    stop_at = world.calls.index(("stop()", "dc1", "artemis"))
    # every delivery was acknowledged before the acceptor stopped
    assert world.delivering["dc1"] == 0
    assert stop_at > world.calls.index(("pause()", "dc1", "orders"))
    assert ("resume()", "dc1", "orders") in world.calls[stop_at:]
    quiesce = res["phases"][1]["data"]
    assert quiesce["settled"] is True and quiesce["outstanding_deliveries"] == 0
    assert world.paused["dc1"] is False  # the fenced site is not left paused


def test_quiesce_gives_up_after_settle_timeout_and_reports_the_outstanding_deliveries(world):
    world.delivering["dc1"] = 2
    world.stuck_consumer = True  # a consumer that never acknowledges
    res = run(world, settle_timeout=0)
    quiesce = res["phases"][1]["data"]
    assert quiesce["settled"] is False and quiesce["outstanding_deliveries"] == 2
    assert world.acceptors["dc1"]["artemis"] is False and world.paused["dc1"] is False


def test_quiesce_builds_queue_names_when_the_snapshot_has_none(world):
    """Queues read through listQueues (pre-2.32 fallback) carry no MBean name: the pause must still happen."""
    original = world.snapshot

    def without_mbeans(site):
        snap = original(site)
        for q in snap["queues"].values():
            q["mbean"] = None
        return snap

    world.snapshot = without_mbeans
    world.delivering["dc1"] = 1
    res = run(world)
    assert ("pause()", "dc1", "orders") in world.calls
    assert res["phases"][1]["data"]["paused_queues"] == 1 and world.delivering["dc1"] == 0


def test_queues_the_mirror_does_not_copy_are_left_out_with_the_address_filter(world):
    original = world.snapshot

    def with_local_queue(site):
        snap = original(site)
        snap["queues"]["local.scratch"] = {"address": "local.scratch", "message_count": 7 if site == "dc1" else 0,
                                           "consumer_count": 0, "internal": False, "temporary": False,
                                           "paused": False, "delivering_count": 0, "messages_added": 7,
                                           "mbean": on.queue(site, "local.scratch", "local.scratch")}
        return snap

    world.snapshot = with_local_queue
    with pytest.raises(switch.SwitchError, match=r"local\.scratch 7!=0"):
        run(world, drain_timeout=0)
    res = run(world, address_filter="orders,!local.")
    assert res["changed"] is True and world.acceptors["dc2"]["artemis"] is True


def test_the_plugin_guard_follows_the_switch_passive_after_the_fence_active_before_the_opening(world):
    world.guard = {"dc1": "active", "dc2": "passive"}
    run(world)
    assert world.guard == {"dc1": "passive", "dc2": "active"}
    calls = world.calls
    # clients are disconnected by the stopped acceptor, not refused send by send
    assert calls.index(("stop()", "dc1", "artemis")) < calls.index(("guard", "dc1", "passive"))
    assert calls.index(("guard", "dc2", "active")) < calls.index(("reload", "dc2"))


def test_a_rollback_gives_the_old_site_its_active_guard_back(world):
    world.guard = {"dc1": "active", "dc2": "passive"}
    world.cut_on_quiesce = True  # the WAN link goes down during the drain
    with pytest.raises(switch.SwitchError, match="rolled back"):
        run(world, drain_timeout=0)
    assert world.guard == {"dc1": "active", "dc2": "passive"}
    # dc1 is sealed (guard passive) only after a successful switch: a rollback has nothing to undo there
    assert not [c for c in world.calls if c[0] == "guard"]
    assert err_free_reopen(world)


def err_free_reopen(world):
    """dc1's client acceptor is open again and was opened by start() (the file was never changed)."""
    return world.acceptors["dc1"]["artemis"] is True and ("start()", "dc1", "artemis") in world.calls


def test_without_the_plugin_no_guard_is_set(world):
    run(world)
    assert not [c for c in world.calls if c[0] == "guard"]


def test_the_old_site_is_sealed_and_resumed_after_the_activation_outside_the_outage(world):
    world.delivering["dc1"] = 1
    run(world)
    calls = world.calls
    assert calls.index(("reload", "dc2")) < calls.index(("resume()", "dc1", "orders"))
    assert "autoStart=false" in world.files["dc1"].read_text()


def test_an_old_fence_that_cannot_be_written_stops_before_the_activation_and_rolls_back(world, tmp_path):
    """A restart of an old site whose broker.xml still opens its client acceptors would make it serve next to the new
    one: the switch does not happen, the old site serves again (opened directly, its file being unusable)."""
    world.files["dc1"] = tmp_path / "missing" / "dc1.xml"  # the old site's broker.xml cannot be written
    with pytest.raises(switch.SwitchError, match="fence of dc1 could not be written") as err:
        run(world)
    names = [(p["phase"], p["decision"]) for p in err.value.phases]
    assert names[-2:] == [("activate", "fail"), ("rollback", "rollback")], names
    assert world.acceptors["dc1"]["artemis"] is True and world.acceptors["dc2"]["artemis"] is False
    assert world.paused["dc1"] is False and world.reloads == 0


def test_the_fence_is_in_the_old_file_before_the_new_site_opens(world, monkeypatch):
    """A controller killed right after the activation leaves dc1 fenced in its file (issue 16 item 6)."""
    seen = []
    original = world.snapshot

    def watch(site):
        seen.append((site, world.acceptors["dc2"]["artemis"], "autoStart=false" in world.files["dc1"].read_text()))
        return original(site)

    world.snapshot = watch
    real_exec = FakeClient.exec

    def exec_watch(self, mbean, op, *args):
        seen.append(("reload", self.site, "autoStart=false" in self.world.files["dc1"].read_text()))
        return real_exec(self, mbean, op, *args)

    monkeypatch.setattr(FakeClient, "exec", exec_watch)
    run(world)
    assert ("reload", "dc2", True) in seen  # dc1's file was fenced when dc2's reload opened it
    assert all(fenced for site, dc2_open, fenced in seen if site != "reload" and dc2_open), seen


def test_client_queues_left_paused_are_resumed_where_no_client_sees_it(world):
    """Issue 16 item 5: a swapover interrupted between its quiesce and its resume left client queues paused. The
    next swapover resumes the new site's while that site is still passive, and the old site's once it is passive."""
    world.paused["dc2"] = True  # left by an interrupted swap dc2 -> dc1
    world.paused["dc1"] = True  # and on the old site, e.g. paused by hand
    res = run(world)
    assert res["resumed_left_paused"] == {"dc2": ["orders"], "dc1": ["orders"]}
    assert world.paused == {"dc1": False, "dc2": False}
    resume_dc2 = world.calls.index(("resume()", "dc2", "orders"))
    stop_dc1 = world.calls.index(("stop()", "dc1", "artemis"))
    reload_dc2 = world.calls.index(("reload", "dc2"))
    resume_dc1 = world.calls.index(("resume()", "dc1", "orders"))
    assert resume_dc2 < stop_dc1 < reload_dc2 < resume_dc1, world.calls


def test_a_pause_on_the_old_site_stays_when_the_switch_rolls_back(world):
    world.paused["dc1"] = True  # the operator's pause on the active site
    world.cut_on_quiesce = True  # the WAN link goes down during the drain: the gate fails, rollback
    with pytest.raises(switch.SwitchError, match="rolled back"):
        run(world, drain_timeout=0.5)
    assert world.paused["dc1"] is True and world.acceptors["dc1"]["artemis"] is True


def test_a_rerun_after_the_activation_seals_the_old_site_and_resumes_its_queues(world):
    """The controller died after the activation and before the seal and the resume: the re-run of the same command
    finds the switch done, writes the old site's fence, and resumes the queues left paused there."""
    world.acceptors["dc1"]["artemis"], world.acceptors["dc2"]["artemis"] = False, True
    world.files["dc2"].write_text(XML.format(""))
    world.paused["dc1"] = True
    res = run(world)
    assert res["changed"] is True and res["old_fence_persisted"] is True
    assert res["phases"][0]["decision"] == "skipped" and "resumed the client queues left paused on dc1: orders" \
        in res["phases"][0]["reason"]
    assert "autoStart=false" in world.files["dc1"].read_text() and world.paused["dc1"] is False
    again = run(world)
    assert again["changed"] is False


@pytest.mark.parametrize("version, lifted", [("2.37.0", True), ("2.44.0", False)])
def test_a_rerun_lifts_a_fence_left_in_the_new_sites_file_before_2_43(world, version, lifted):
    """Before 2.43 the activation start()s the acceptors and lifts the file after: a controller killed between
    leaves dc2 serving with a fenced broker.xml (passive after a restart). The re-run lifts it; from 2.43 the file
    is lifted before the reload that opens the acceptors, so the re-run writes nothing there."""
    world.version = version
    world.acceptors["dc1"]["artemis"], world.acceptors["dc2"]["artemis"] = False, True
    world.files["dc1"].write_text(XML.format(";autoStart=false"))  # dc2's file keeps its fence (the fixture's)
    res = run(world)
    assert res["phases"][0]["decision"] == "skipped"
    assert ("autoStart=false" not in world.files["dc2"].read_text()) is lifted
    assert res["changed"] is lifted and ("lifted the fence" in res["phases"][0]["reason"]) is lifted
    assert world.acceptors["dc2"]["artemis"] is True and world.reloads == 0
    assert run(world)["changed"] is False


def test_a_mirror_down_right_after_the_switch_is_reported_for_the_runbook_to_wait_on(world):
    original = world.snapshot

    def cut_after_activation(site):
        if world.reloads:  # dc2 is open: the WAN link drops now
            world.stuck = True
        return original(site)

    world.snapshot = cut_after_activation
    res = run(world)
    look = res["phases"][-1]
    assert (look["phase"], look["decision"]) == ("mirrors_after", "fail") and "not connected" in look["reason"]
    assert res["mirrors_connected_after"] is False and res["roles_after"]["dc2"] == "active"


def test_a_passing_drain_sample_is_confirmed_sooner_than_the_drain_is_polled(world):
    slept = []
    world.backlog["dc1"] = 14  # the first drain samples still see a backlog (2 events drain per read)
    old, new = sites(world)
    switch.swapover(old, new, wait_sleep=0.2, stable_samples=2, confirm_sleep=0.05, sleeper=slept.append)
    drain_sleeps = [s for s in slept if s in (0.2, 0.05)]
    assert 0.2 in drain_sleeps and drain_sleeps[-1] == 0.05, slept


def test_two_sites_that_are_one_broker_are_refused_before_any_change(world):
    original = world.snapshot

    def both_urls_reach_dc2(site):
        snap = original(site)
        snap["node_id"] = "node-dc2"  # dc1's URL was pointed at dc2's broker by mistake
        return snap

    world.snapshot = both_urls_reach_dc2
    with pytest.raises(switch.SwitchError, match="same broker") as err:
        run(world)
    assert [(p["phase"], p["decision"]) for p in err.value.phases] == [("preflight", "fail")]
    assert not [c for c in world.calls if c[0] != "snapshot"]  # nothing paused, stopped or opened


# ---------------------------------------------------------------------- quiet sites whose counts differ
def own(mid):
    """A message as browsed on the broker it was sent to."""
    return {"messageID": str(mid), "userID": f"ID:m{mid}", "timestamp": 1}


def mirrored(mid, origin_mid, origin):
    """A copy the mirror delivered: the origin broker and id in its annotations."""
    return {"messageID": str(mid), "userID": f"ID:m{origin_mid}", "timestamp": 1,
            "LongProperties": {"messageAnnotations.x-opt-amq-mr-id": origin_mid},
            "StringProperties": {"messageAnnotations.x-opt-amq-bkr-id": origin}}


def phantom_world(world):
    """dc1 (HA pair taken over by its backup) holds 2 messages; dc2 holds their copies plus 3 copies of messages
    that came from dc1 which dc1 no longer has (the phantoms of docs/ha.md)."""
    world.messages = {"dc1": [own(100), own(101)],
                      "dc2": [mirrored(500, 100, "node-dc1"), mirrored(501, 101, "node-dc1"),
                              mirrored(502, 97, "node-dc1"), mirrored(503, 98, "node-dc1"),
                              mirrored(504, 99, "node-dc1")]}
    return world


def test_quiet_sites_whose_counts_differ_are_compared_at_once_and_refused_by_default(world):
    phantom_world(world)
    with pytest.raises(switch.SwitchError) as err:
        run(world, drain_timeout=3600, quiet_seconds=0)  # the comparison, not the 1 h timeout, ends the gate
    msg = str(err.value)
    assert "dc2 holds copies of messages that came from dc1 and that dc1 no longer has" in msg and "orders 3" in msg
    assert "continuity_mirror_extras=remove" in msg and "rolled back: dc1 is active again" in msg
    rec = next(p for p in err.value.phases if p["phase"] == "reconcile")
    assert rec["decision"] == "fail" and rec["data"]["queues"]["orders"]["only_new_from_old"]["count"] == 3
    assert [m["origin_id"] for m in rec["data"]["queues"]["orders"]["only_new_from_old"]["first"]] == ["97", "98", "99"]
    assert len(world.messages["dc2"]) == 5 and world.acceptors["dc1"]["artemis"] is True


def test_remove_takes_out_only_the_copies_that_came_from_the_old_site_then_switches(world):
    phantom_world(world)
    res = run(world, drain_timeout=3600, quiet_seconds=0, mirror_extras="remove")
    rec = next(p for p in res["phases"] if p["phase"] == "reconcile")
    assert rec["decision"] == "pass" and rec["data"]["removed"] == {"orders": 3}
    assert [m["messageID"] for m in world.messages["dc2"]] == ["500", "501"]
    assert [p["phase"] for p in res["phases"]][2:5] == ["reconcile", "drain", "activate"]
    assert res["roles_after"] == {"dc1": "passive", "dc2": "active"}


def test_keep_switches_with_the_extra_copies_and_nothing_else(world):
    phantom_world(world)
    res = run(world, drain_timeout=3600, quiet_seconds=0, mirror_extras="keep")
    rec = next(p for p in res["phases"] if p["phase"] == "reconcile")
    assert rec["decision"] == "pass" and rec["data"]["kept"] == 3 and len(world.messages["dc2"]) == 5
    assert res["roles_after"]["dc2"] == "active"


def test_a_message_only_the_old_site_holds_refuses_whatever_the_setting(world):
    phantom_world(world)
    world.messages["dc1"].append(own(102))  # never reached dc2: a switch would lose it
    for policy in ("remove", "keep"):
        with pytest.raises(switch.SwitchError, match="dc1 holds messages dc2 does not: orders 1"):
            run(world, drain_timeout=3600, quiet_seconds=0, mirror_extras=policy)
        assert len(world.messages["dc2"]) == 5 and world.acceptors["dc2"]["artemis"] is False


def test_remove_never_removes_a_message_the_new_site_holds_from_elsewhere(world):
    phantom_world(world)
    world.messages["dc2"].append(own(600))  # sent to dc2 itself: it may be the only copy
    with pytest.raises(switch.SwitchError, match="dc2 holds messages dc1 never had: orders 1"):
        run(world, drain_timeout=3600, quiet_seconds=0, mirror_extras="remove")
    assert len(world.messages["dc2"]) == 6


def test_counts_still_moving_on_quiet_sites_are_waited_for_not_compared(world):
    """Acks still being applied on the new site (before 2.40 nothing else shows them) move its counts: the
    comparison starts only once the same counts have differed for quiet_seconds, so a gate whose counts are
    converging passes with no reconcile phase."""
    phantom_world(world)
    world.messages["dc2"] += [mirrored(600 + i, i, "node-dc1") for i in range(20)]
    seen = world.snapshot

    def applying_one_ack_per_read(site):
        if site == "dc2" and len(world.messages["dc2"]) > len(world.messages["dc1"]):
            world.messages["dc2"].pop()  # one late ack reaches dc2 on every read
        return seen(site)

    world.snapshot = applying_one_ack_per_read
    ticks = iter(range(100000))
    res = run(world, drain_timeout=3600, quiet_seconds=1.5, mirror_extras="refuse",
              clock=lambda: float(next(ticks)))  # one second per clock read: 1.5 s quiet is never reached
    assert "reconcile" not in [p["phase"] for p in res["phases"]]
    assert res["roles_after"] == {"dc1": "passive", "dc2": "active"}
