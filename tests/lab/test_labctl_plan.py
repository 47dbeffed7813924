"""labctl's port plan and broker.xml rewrite (no processes)."""

from __future__ import annotations

from pathlib import Path

from artemis_lab import config_xml, instance, labctl, security


def test_documented_port_layout() -> None:
    plan = labctl.make_plan({"LAB_ROOT": "/tmp/x", "LAB_PORT_BASE": "20000"})
    assert (plan.sites["dc1"].http, plan.sites["dc1"].client, plan.sites["dc1"].mirror) == (20161, 20616, 20617)
    assert (plan.sites["dc2"].http, plan.sites["dc2"].client, plan.sites["dc2"].mirror) == (20261, 20716, 20717)
    assert plan.wan_listen == {"dc1": 20900, "dc2": 20901} and plan.wan_control == {"dc1": 20910, "dc2": 20911}
    assert plan.version == "2.44.0"


def test_auto_ports_are_distinct() -> None:
    plan = labctl.make_plan({"LAB_PORT_BASE": "auto", "LAB_ARTEMIS_VERSION": "2.33.0"})
    ports = [p for s in plan.sites.values() for p in (s.http, s.client, s.mirror)]
    ports += list(plan.wan_listen.values()) + list(plan.wan_control.values())
    assert len(set(ports)) == len(ports) and plan.version == "2.33.0"


def test_configure_site_writes_mirror_through_wan(tmp_path: Path) -> None:
    plan = labctl.make_plan({"LAB_ROOT": str(tmp_path), "LAB_PORT_BASE": "20000"})
    opts = instance.CreateOptions(directory=str(tmp_path / "dc1"), user="admin", password="pw", require_login=True,
                                  name="dc1", host="127.0.0.1", http_host="127.0.0.1", http_port=20161,
                                  default_port=20616, no_amqp_acceptor=True, no_mqtt_acceptor=True,
                                  no_stomp_acceptor=True, no_hornetq_acceptor=True)
    path = instance.create_instance(opts, tmp_path / "home", "2.44.0")
    labctl.configure_site(path, "dc1", plan)
    cfg = config_xml.parse_instance(path, "2.44.0")
    assert [(a.name, a.port, sorted(a.protocols)) for a in cfg.broker.acceptors] == [
        ("artemis", 20616, ["AMQP", "CORE"]), ("mirror", 20617, ["AMQP"])]
    (conn,) = cfg.broker.broker_connections
    assert (conn.name, conn.uri, conn.user, conn.password) == ("DC2", "tcp://127.0.0.1:20901", "mirror",
                                                               labctl.MIRROR_PASSWORD)
    assert conn.mirror is not None
    assert cfg.broker.security_settings[0].permissions["send"] == frozenset({"amq", "mirror"})
    assert "orders" in {a.name for a in cfg.broker.addresses}
    assert security.is_masked(
        next(line for line in (path / "etc" / "broker.xml").read_text().splitlines() if "amqp-connection uri" in line)
        .split('password="')[1].split('"')[0])
