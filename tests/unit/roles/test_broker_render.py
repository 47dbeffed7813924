"""broker.xml rendered through the role's real template validates against the Artemis schema of every version
that supports the features it uses, and is rejected (by the schema and by the semantic check, naming the
variable) on versions that lack them."""

from __future__ import annotations

import pytest
from lxml import etree

from ansible_collections.continuity.artemis.plugins.module_utils import broker_xml

from .render import VARS_DIR, context, load_vars, render, schema_versions

VERSIONS = schema_versions()
CASES = sorted(p.name for p in VARS_DIR.glob("*.yml"))
NS = {"c": "urn:activemq:core"}


def _supported(features, version):
    return all(broker_xml.supports(version, f) for f in features)


def _render(case, version):
    spec = load_vars(case)
    facts = {"broker__version": version}
    xml = render("broker", "broker.xml.j2", spec["vars"], facts)
    config = context("broker", spec["vars"], facts)["broker__validate_config"]
    return spec, xml, config


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_render_validates_where_supported(case, version):
    spec, xml, config = _render(case, version)
    schema = broker_xml.schema_errors(xml, str(_schema_dir(version)))
    semantic = broker_xml.semantic_errors(config, version)
    if _supported(spec["features"], version):
        assert schema == [], "\n".join(schema)
        assert semantic == [], "\n".join(semantic)
    else:
        assert schema, "schema {} accepted a feature it lacks ({})".format(version, spec["features"])
        assert any("needs Artemis" in e for e in semantic), semantic


def _schema_dir(version):
    from continuity_lab import schemas

    return schemas.path(version)


def test_every_feature_case_is_unsupported_somewhere():
    """Guard against a vacuous matrix: each feature case must hit at least one version that rejects it."""
    for case in CASES:
        features = load_vars(case)["features"]
        if features:
            assert not all(_supported(features, v) for v in VERSIONS), case


@pytest.mark.parametrize("case", CASES)
def test_render_is_deterministic(case):
    spec = load_vars(case)
    a = render("broker", "broker.xml.j2", spec["vars"], {"broker__version": "2.44.0"})
    b = render("broker", "broker.xml.j2", spec["vars"], {"broker__version": "2.44.0"})
    assert a == b


def _doc(xml):
    return etree.fromstring(xml.encode())


def test_dual_mirror_attributes_are_kept_exactly():
    _spec, xml, _ = _render("dual_mirror_ha.yml", "2.44.0")
    doc = _doc(xml)
    conn = doc.find(".//c:amqp-connection", NS)
    assert conn.get("uri") == "tcp://dc2a.example.net:5673#tcp://dc2b.example.net:5673"
    assert conn.get("name") == "DC2"
    assert conn.get("retry-interval") == "1000"
    assert conn.get("reconnect-attempts") == "-1"
    assert conn.get("password").startswith("ENC(") and "mirror-secret" not in xml
    from ansible_collections.continuity.artemis.plugins.filter.artemis import artemis_unmask

    assert artemis_unmask(conn.get("password")) == "mirror-secret"
    mirror = conn.find("c:mirror", NS)
    # The reference collection drops sync and lower-cases values: we keep both.
    assert mirror.get("sync") == "true"
    assert mirror.get("queue-removal") == "false"
    assert mirror.get("address-filter") == "Orders.,!Orders.Tmp"
    assert [(p.get("key"), p.get("value")) for p in mirror.findall("c:property", NS)] == [
        ("tunnel-core-messages", "true")]
    names = [a.get("name") for a in doc.findall(".//c:acceptor", NS)]
    assert names == ["artemis", "amqp", "mirror"]
    assert doc.find(".//c:mirror-ack-manager-queue-attempts", NS).text == "8"


def test_mirror_without_properties_is_self_closed_for_old_versions():
    _, xml, _ = _render("dual_mirror_legacy.yml", "2.30.0")
    mirror = _doc(xml).find(".//c:mirror", NS)
    assert mirror.text is None and len(mirror) == 0
    assert mirror.get("durable") == "false"


@pytest.mark.parametrize(
    ("case", "version", "path"),
    [
        ("ha_primary_only.yml", "2.30.0", "c:ha-policy/c:live-only"),
        ("ha_primary_only.yml", "2.33.0", "c:ha-policy/c:primary-only"),
        ("ha_replication_primary.yml", "2.30.0", "c:ha-policy/c:replication/c:master"),
        ("ha_replication_backup.yml", "2.30.0", "c:ha-policy/c:replication/c:slave"),
        ("ha_replication_primary.yml", "2.33.0", "c:ha-policy/c:replication/c:primary"),
        ("ha_shared_store_backup.yml", "2.44.0", "c:ha-policy/c:shared-store/c:backup"),
        ("ha_shared_store_primary.yml", "2.31.0", "c:ha-policy/c:shared-store/c:master"),
    ],
)
def test_ha_policy_names_follow_the_version(case, version, path):
    _, xml, _ = _render(case, version)
    core = _doc(xml).find("c:core", NS)
    assert core.find(path, NS) is not None, xml


def test_plugins_render_class_and_sorted_properties():
    _, xml, _ = _render("plugins.yml", "2.44.0")
    plugins = _doc(xml).findall(".//c:broker-plugin", NS)
    assert [p.get("class-name") for p in plugins] == [
        "org.apache.activemq.artemis.core.server.plugin.impl.LoggingActiveMQServerPlugin",
        "com.example.NoPropertiesPlugin"]
    assert [(p.get("key"), p.get("value")) for p in plugins[0]] == [
        ("LOG_CONNECTION_EVENTS", "true"), ("LOG_SESSION_EVENTS", "false")]


def test_port_offset_applies_to_acceptors():
    xml = render("broker", "broker.xml.j2", {"broker_admin_password": "x", "broker_port_offset": 100},
                 {"broker__version": "2.44.0"})
    uris = [a.text for a in _doc(xml).findall(".//c:acceptor", NS)]
    assert uris[0].startswith("tcp://0.0.0.0:61716?") and uris[1].startswith("tcp://0.0.0.0:61717?")


def test_security_settings_merge_by_match():
    _, xml, _ = _render("dual_mirror_ha.yml", "2.44.0")
    settings = _doc(xml).findall(".//c:security-setting", NS)
    matches = [s.get("match") for s in settings]
    assert matches.count("#") == 1  # a duplicate match would make Artemis drop one of them
    hash_setting = settings[matches.index("#")]
    perms = {p.get("type"): p.get("roles") for p in hash_setting}
    assert perms["send"] == "amq,app,mirror"
    assert perms["createAddress"] == "mirror"


def test_fence_written_by_a_runbook_survives_a_render():
    from ansible_collections.continuity.artemis.plugins.filter.artemis import artemis_acceptor_params

    fenced = render("broker", "broker.xml.j2", {"broker_admin_password": "x"},
                    {"broker__version": "2.44.0", "broker__fence": {"artemis": "false"}})
    params = artemis_acceptor_params(fenced)
    assert params["artemis"]["autoStart"] == "false"
    assert "autoStart" not in params["mirror"]  # the mirror acceptor is never fenced
    unfenced = render("broker", "broker.xml.j2", {"broker_admin_password": "x", "broker_preserve_fence": False},
                      {"broker__version": "2.44.0", "broker__fence": {"artemis": "false"}})
    assert "autoStart" not in artemis_acceptor_params(unfenced)["artemis"]


def test_narrow_mirror_grant_keeps_the_broad_roles():
    """Artemis applies only the most specific match: a mirror grant on orders.# must not take send/consume on
    orders.* away from the roles the # setting gives."""
    from ansible_collections.continuity.artemis.plugins.filter.artemis import artemis_merge_security

    base = [{"match": "#", "permissions": {"send": ["amq"], "consume": ["amq"], "manage": ["amq"]}},
            {"match": "audit.#", "permissions": {"browse": ["auditor"]}}]
    extra = [{"match": "orders.#", "permissions": {"send": ["mirror"]}},
             {"match": "audit.x", "permissions": {"send": ["mirror"]}}]
    merged = {s["match"]: s["permissions"] for s in artemis_merge_security(base, extra)}
    assert merged["orders.#"] == {"consume": ["amq"], "manage": ["amq"], "send": ["amq", "mirror"]}
    # audit.x is covered by both # and audit.#
    assert merged["audit.x"]["browse"] == ["auditor"] and merged["audit.x"]["send"] == ["amq", "mirror"]
    assert merged["#"] == base[0]["permissions"]


CREATED = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
  <journal-type>NIO</journal-type><journal-buffer-timeout>148000</journal-buffer-timeout>
  <journal-max-io>1</journal-max-io><critical-analyzer>true</critical-analyzer>
  <critical-analyzer-policy>HALT</critical-analyzer-policy><page-sync-timeout>148000</page-sync-timeout>
  <global-max-messages>-1</global-max-messages></core></configuration>"""


def test_what_artemis_create_tuned_is_kept():
    """journal-buffer-timeout comes from create's disk sync test on the host: the render keeps it (and the other
    tuned settings); a value the variables set wins."""
    from ansible_collections.continuity.artemis.plugins.filter.artemis import artemis_create_tuning

    tuning = artemis_create_tuning(CREATED)
    assert tuning == {"journal-buffer-timeout": "148000", "journal-max-io": "1", "critical-analyzer": "true",
                      "critical-analyzer-policy": "HALT", "page-sync-timeout": "148000"}
    xml = render("broker", "broker.xml.j2", {"broker_admin_password": "x"},
                 {"broker__version": "2.44.0", "broker__create_tuning": tuning})
    core = _doc(xml).find("{urn:activemq:core}core")
    values = {el.tag.split("}")[1]: el.text for el in core}
    assert {k: values.get(k) for k in tuning} == tuning
    own = render("broker", "broker.xml.j2", {"broker_admin_password": "x", "broker_journal": {
        "type": "NIO", "buffer_timeout": 500000}}, {"broker__version": "2.44.0", "broker__create_tuning": tuning})
    assert own.count("<journal-buffer-timeout>") == 1 and "<journal-buffer-timeout>500000<" in own
    assert artemis_create_tuning("") == {} and artemis_create_tuning("<not xml") == {}


def test_a_fence_written_by_a_runbook_equals_the_next_render():
    """A passive site's broker.xml (fenced by site_role) and the role's next render must be the same text and
    need no restart: otherwise every re-deploy restarts the passive broker (seen on the real lab)."""
    from ansible_collections.continuity.artemis.plugins.filter.artemis import artemis_fence
    from ansible_collections.continuity.artemis.plugins.module_utils import site_role

    plain = render("broker", "broker.xml.j2", {"broker_admin_password": "x"}, {"broker__version": "2.44.0"})
    fenced, changed = site_role.set_acceptors_auto_start(plain, ["artemis"], False)
    assert changed == ["artemis"]
    again = render("broker", "broker.xml.j2", {"broker_admin_password": "x"},
                   {"broker__version": "2.44.0", "broker__fence": artemis_fence(fenced, ["artemis"])})
    assert again == fenced


def test_parameter_order_alone_needs_no_restart():
    from ansible_collections.continuity.artemis.plugins.module_utils import broker_xml

    xml = ('<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><acceptors>'
           '<acceptor name="a">tcp://h:1?{}</acceptor></acceptors></core></configuration>')
    one, two = xml.format("protocols=AMQP;autoStart=false;b=1"), xml.format("b=1;autoStart=false;protocols=AMQP")
    assert broker_xml.restart_reasons(one, two, "2.44.0") == []
    three = xml.format("protocols=AMQP;autoStart=true;b=1")
    assert broker_xml.restart_reasons(one, three, "2.44.0") != []


CONTINUITY_CLASS = "io.continuity.artemis.plugin.ContinuityPlugin"


def _continuity_entry(overrides):
    xml = render("broker", "broker.xml.j2", dict({"broker_admin_password": "x"}, **overrides),
                 {"broker__version": "2.44.0"})
    found = [p for p in _doc(xml).findall(".//c:broker-plugin", NS) if p.get("class-name") == CONTINUITY_CLASS]
    return {p.get("key"): p.get("value") for p in found[0]} if found else None


def test_continuity_plugin_renders_every_property_as_the_plugin_reads_it():
    _, xml, config = _render("continuity_plugin.yml", "2.44.0")
    plugins = _doc(xml).findall(".//c:broker-plugin", NS)
    assert [p.get("class-name") for p in plugins] == [
        "org.apache.activemq.artemis.core.server.plugin.impl.LoggingActiveMQServerPlugin", CONTINUITY_CLASS]
    assert {p.get("key"): p.get("value") for p in plugins[1]} == {
        "mirror-users": "mirror,bridge", "mirror-acceptors": "", "mirror-user-acceptors": "mirror",
        "initial-role": "passive", "window-seconds": "30", "max-addresses": "500", "latency-origin": "timestamp",
        "include-internal-queues": "false"}
    # the jar goes to lib/ with the other plugin jars (tasks/plugins.yml loops over broker__plugins)
    ctx = context("broker", load_vars("continuity_plugin.yml")["vars"], {"broker__version": "2.44.0"})
    entries = ctx["broker__plugins"]
    assert entries[1]["jar_file"] == "/srv/jars/continuity-artemis-plugin-0.1.0.jar" and "jar_url" not in entries[1]
    assert config["continuity_plugin"]["enabled"] is True


def test_continuity_plugin_disabled_renders_nothing_and_state_file_only_when_set():
    assert _continuity_entry({}) is None
    assert _continuity_entry({"broker_continuity_plugin": {"enabled": False, "jar_file": "/x.jar"}}) is None
    props = _continuity_entry({"broker_continuity_plugin": {"enabled": True, "jar_url": "https://h/p.jar",
                                                            "jar_checksum": "sha256:ab", "state_file": "/d/role",
                                                            "latency_origin": "ingress"}})
    assert props["state-file"] == "/d/role" and props["latency-origin"] == "ingress"
    # the mirror users come in only through the mirror acceptor by default; [] allows any acceptor
    assert props["mirror-user-acceptors"] == "mirror"
    props = _continuity_entry({"broker_continuity_plugin": {"enabled": True, "jar_url": "https://h/p.jar",
                                                            "jar_checksum": "sha256:ab", "mirror_user_acceptors": []}})
    assert props["mirror-user-acceptors"] == ""
    assert props["initial-role"] == "active"  # the default of meta/argument_specs.yml


def test_site_role_finds_the_plugin_state_file_in_the_rendered_broker_xml(tmp_path):
    """An unreachable broker is fenced through its host: site_role writes "passive" where the plugin reads its role
    at start (same rule as the plugin: state-file, else next to the journal directory, relative to the instance)."""
    from ansible_collections.continuity.artemis.plugins.module_utils import continuity_plugin

    instance = tmp_path / "dc1"
    (instance / "etc").mkdir(parents=True)
    xml_path = instance / "etc" / "broker.xml"
    xml_path.write_text(_render("continuity_plugin.yml", "2.44.0")[1])
    assert continuity_plugin.state_file_of(xml_path.read_text(), str(instance)) == str(
        instance / "data" / "continuity-site-role")
    done = continuity_plugin.persist_role(str(xml_path), "passive", "2026-11-24T00:00:00Z")
    assert done == {"path": str(instance / "data" / "continuity-site-role"), "role_before": None, "role": "passive",
                    "changed": True}
    text = (instance / "data" / "continuity-site-role").read_text()
    assert "role=passive\nchanged=2026-11-24T00:00:00Z\n" in text
    assert continuity_plugin.persist_role(str(xml_path), "passive", "later")["changed"] is False
    # state-file given (relative: against the instance), and a broker.xml without the plugin
    custom = _continuity_entry({"broker_continuity_plugin": {"enabled": True, "jar_file": "/p.jar",
                                                             "state_file": "var/role"}})
    assert custom["state-file"] == "var/role"
    xml = render("broker", "broker.xml.j2", {"broker_admin_password": "x", "broker_continuity_plugin": {
        "enabled": True, "jar_file": "/p.jar", "state_file": "var/role"}}, {"broker__version": "2.44.0"})
    assert continuity_plugin.state_file_of(xml, "/i") == "/i/var/role"
    plain = render("broker", "broker.xml.j2", {"broker_admin_password": "x"}, {"broker__version": "2.44.0"})
    assert continuity_plugin.state_file_of(plain, "/i") is None


def test_ha_pair_gets_its_cluster_acceptor_connectors_and_cluster_connection_from_the_inventory():
    _, xml, _ = _render("ha_replication_pair_auto.yml", "2.44.0")
    core = _doc(xml).find("c:core", NS)
    acceptors = {a.get("name"): a.text for a in core.findall("c:acceptors/c:acceptor", NS)}
    # its own CORE acceptor, apart from the client acceptors a runbook fences
    assert acceptors["cluster"] == "tcp://0.0.0.0:61718?protocols=CORE"
    connectors = {c.get("name"): c.text for c in core.findall("c:connectors/c:connector", NS)}
    assert connectors == {"dc1-backup": "tcp://10.0.1.12:61718", "dc1": "tcp://10.0.1.11:61618"}
    cc = core.find("c:cluster-connections/c:cluster-connection", NS)
    assert cc.get("name") == "ha" and cc.find("c:connector-ref", NS).text == "dc1-backup"
    assert [r.text for r in cc.findall("c:static-connectors/c:connector-ref", NS)] == ["dc1"]
    assert cc.find("c:message-load-balancing", NS).text == "OFF"
    assert core.find("c:ha-policy/c:replication/c:backup/c:allow-failback", NS).text == "true"


def test_explicit_cluster_connections_win_over_the_derived_pair():
    _, xml, _ = _render("ha_replication_primary.yml", "2.44.0")
    core = _doc(xml).find("c:core", NS)
    assert [c.get("name") for c in core.findall("c:connectors/c:connector", NS)] == ["self", "peer"]
    assert core.find("c:cluster-connections/c:cluster-connection", NS).get("name") == "site"


DATA_ELEMENTS = ("paging-directory", "bindings-directory", "journal-directory", "large-messages-directory")


def _data_dirs(xml):
    core = _doc(xml).find("c:core", NS)
    return {el: core.find(f"c:{el}", NS).text for el in DATA_ELEMENTS}


def test_without_broker_data_dir_the_data_stays_in_the_instance_as_artemis_create_writes_it():
    """The default renders exactly what every existing instance has (no broker.xml change, no restart)."""
    _, xml, _ = _render("minimal.yml", "2.44.0")
    assert _data_dirs(xml) == {"paging-directory": "data/paging", "bindings-directory": "data/bindings",
                               "journal-directory": "data/journal", "large-messages-directory": "data/large-messages"}


@pytest.mark.parametrize("version", ["2.37.0", "2.44.0"])
def test_a_shared_store_pair_keeps_every_data_directory_in_broker_data_dir(version):
    """Both brokers of the pair name the same four directories (the store's server.lock sits in the journal's), and
    the shared-store options of the lab's backup are the schema's own elements (checked against every schema by
    test_render_validates_where_supported)."""
    _, xml, _ = _render("ha_shared_store_pair_auto.yml", version)
    assert _data_dirs(xml) == {"paging-directory": "/srv/artemis/dc1-store/paging",
                               "bindings-directory": "/srv/artemis/dc1-store/bindings",
                               "journal-directory": "/srv/artemis/dc1-store/journal",
                               "large-messages-directory": "/srv/artemis/dc1-store/large-messages"}
    backup = _doc(xml).find("c:core/c:ha-policy/c:shared-store/c:backup", NS)
    assert {el.tag.split("}")[1]: el.text for el in backup} == {
        "allow-failback": "true", "failback-delay": "5000", "failover-on-shutdown": "false", "restart-backup": "true"}
    assert broker_xml.schema_errors(xml, str(_schema_dir(version))) == []
    # the continuity plugin and the site_role module would keep the role next to the journal: one file for the pair
    from ansible_collections.continuity.artemis.plugins.module_utils import continuity_plugin

    plugin = render("broker", "broker.xml.j2", {"broker_admin_password": "x", "broker_data_dir": "/srv/s",
                                                "broker_continuity_plugin": {"enabled": True, "jar_file": "/p.jar"}},
                    {"broker__version": version})
    assert continuity_plugin.state_file_of(plugin, "/i") == "/srv/s/continuity-site-role"


def test_broker_data_dir_on_the_host_is_absolute_or_under_the_instance():
    ctx = context("broker", {"broker_admin_password": "x", "broker_instance_dir": "/var/lib/artemis/b"})
    assert ctx["broker__data_dir"] == "/var/lib/artemis/b/data"
    ctx = context("broker", {"broker_admin_password": "x", "broker_instance_dir": "/var/lib/artemis/b",
                             "broker_data_dir": "/srv/store//"})
    assert ctx["broker__data_dir"] == "/srv/store"
    ctx = context("broker", {"broker_admin_password": "x", "broker_instance_dir": "/var/lib/artemis/b",
                             "broker_data_dir": "store"})
    assert ctx["broker__data_dir"] == "/var/lib/artemis/b/store"


NETWORK_CHECK = {"network-check-list": "10.0.0.1,fd00::1",
                 "network-check-URL-list": "http://10.0.0.1/health,https://gw.example.net/ping",
                 "network-check-period": "5000", "network-check-timeout": "800", "network-check-NIC": "eth0",
                 "network-check-ping-command": "ping -c 1 -W %d %s", "network-check-ping6-command": "ping -6 -c 1 %2$s"}


def _network_check(xml):
    core = _doc(xml).find("c:core", NS)
    return {el.tag.split("}")[1]: el.text for el in core if el.tag.split("}")[1].startswith("network-check-")}


def test_network_check_renders_every_option_as_the_core_element_artemis_reads():
    """Each broker_network_check key lands in its own <core> element (the schemas of the matrix validate the case
    in test_render_validates_where_supported); lists are comma-joined as Artemis splits them."""
    _, xml, _ = _render("network_check.yml", "2.44.0")
    assert _network_check(xml) == NETWORK_CHECK


@pytest.mark.parametrize("case", sorted(set(CASES) - {"network_check.yml"}))
def test_without_broker_network_check_nothing_is_rendered_and_broker_xml_is_unchanged(case):
    """Unset (the default), empty, or all keys null: no network-check element and the same bytes, so an existing
    broker.xml does not change (no restart)."""
    spec = load_vars(case)
    assert "broker_network_check" not in spec["vars"]
    facts = {"broker__version": "2.44.0"}
    default = render("broker", "broker.xml.j2", spec["vars"], facts)
    assert "network-check" not in default
    for empty in ({}, None, {"list": None, "urls": [], "period": None, "nic": ""}):
        assert render("broker", "broker.xml.j2", {**spec["vars"], "broker_network_check": empty}, facts) == default


def test_network_check_with_urls_only_renders_only_what_is_set():
    xml = render("broker", "broker.xml.j2", {"broker_admin_password": "x",
                                             "broker_network_check": {"urls": ["http://127.0.0.1:8080/gw"],
                                                                      "period": "1000"}},
                 {"broker__version": "2.30.0"})
    assert _network_check(xml) == {"network-check-URL-list": "http://127.0.0.1:8080/gw", "network-check-period": "1000"}
    assert broker_xml.schema_errors(xml, str(_schema_dir("2.30.0"))) == []


def test_adding_the_network_check_restarts_the_broker():
    """Artemis reads the network check at the start only (ActiveMQServerImpl.reloadNetworkHealthCheck from start()),
    so the role must restart, not reload, when it appears or changes."""
    base = {"broker_admin_password": "x"}
    facts = {"broker__version": "2.44.0"}
    before = render("broker", "broker.xml.j2", base, facts)
    after = render("broker", "broker.xml.j2", {**base, "broker_network_check": {"list": ["10.0.0.1"]}}, facts)
    assert broker_xml.restart_reasons(before, after, "2.44.0") == [
        "<network-check-list> changed (not applied by a configuration reload)"]


def test_the_mirror_acceptor_carries_the_duplicate_id_window_as_its_amqp_credits():
    """Artemis's mirror target sizes its per-source duplicate-ID cache by the amqpCredits of the acceptor the mirror
    came in on (docs/ha.md "Copies the mirror routed twice"): only the mirror acceptor gets the window."""
    def uris(over):
        xml = render("broker", "broker.xml.j2", {"broker_admin_password": "x", **over}, {"broker__version": "2.44.0"})
        return {a.get("name"): a.text for a in _doc(xml).findall(".//c:acceptor", NS)}

    default = uris({})
    assert ";amqpCredits=20000;" in default["mirror"] and ";amqpCredits=1000;" in default["artemis"], default
    assert ";amqpCredits=50000;" in uris({"broker_mirror_id_cache_size": 50000})["mirror"]
    own = {"broker_mirror_acceptor": {"port": 61617, "params": {"amqpCredits": 7000}}}
    assert ";amqpCredits=7000;" in uris(own)["mirror"]  # the acceptor's own params win
