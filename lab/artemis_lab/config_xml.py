"""Read an instance's etc/ files into `artemis_lab.model.InstanceConfig`.

`parse_instance()` raises `ConfigurationError` for what Artemis would refuse at start (malformed XML, schema
violations when the archive carries the real xsd files, rules Artemis enforces in code such as
`reconnect-attempts="0"`); elements the lab does not emulate are recorded in `BrokerConfig.unknown_elements`
for the caller to log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from lxml import etree

from artemis_lab import security, versions
from artemis_lab.errors import ConfigurationError
from artemis_lab.model import (
    ALL_PROTOCOLS,
    AcceptorConfig,
    AddressConfig,
    AddressSettingConfig,
    BrokerConfig,
    BrokerConnectionConfig,
    BrokerPluginConfig,
    HAPolicyConfig,
    InstanceConfig,
    MirrorConfig,
    QueueConfig,
    SecuritySettingConfig,
    UserRecord,
)

NS_ROOT = "urn:activemq"
NS_CORE = "urn:activemq:core"

# Core elements the lab reads itself.
_HANDLED = {
    "name", "persistence-enabled", "security-enabled", "journal-directory", "bindings-directory",
    "paging-directory", "large-messages-directory", "acceptors", "addresses", "address-settings",
    "security-settings", "broker-connections", "broker-plugins", "ha-policy",
    "configuration-file-refresh-period",
}
# Core elements that change mirror behaviour: kept verbatim in core_settings.
_CORE_SETTINGS = {
    "mirror-ack-manager-queue-attempts", "mirror-ack-manager-page-attempts", "mirror-ack-manager-retry-delay",
    "mirror-page-transaction", "mirror-ack-manager-warn-unacked", "journal-type", "journal-datasync",
    "journal-file-size", "journal-sync-transactional", "journal-sync-non-transactional", "id-cache-size",
    "persist-id-cache", "max-disk-usage", "global-max-size", "global-max-messages", "message-expiry-scan-period",
}
# Written by `artemis create` and accepted by Artemis; the lab has no equivalent, so they are not worth a log line.
_QUIET = {
    "max-redelivery-records", "purge-page-folders", "journal-pool-files", "journal-min-files",
    "journal-device-block-size", "journal-buffer-timeout", "journal-max-io", "disk-scan-period",
    "critical-analyzer", "critical-analyzer-timeout", "critical-analyzer-check-period", "critical-analyzer-policy",
    "page-sync-timeout", "journal-buffer-size", "jmx-management-enabled", "management-address",
    "management-notification-address", "wildcard-addresses", "connectors", "cluster-connections",
    "cluster-user", "cluster-password", "network-check-list", "network-check-period", "network-check-timeout",
    "network-check-NIC", "network-check-URL-list", "mask-password", "password-codec",
}

_ADDRESS_SETTING_FIELDS = {
    "auto-create-queues": ("auto_create_queues", "bool"),
    "auto-create-addresses": ("auto_create_addresses", "bool"),
    "auto-delete-queues": ("auto_delete_queues", "bool"),
    "auto-delete-addresses": ("auto_delete_addresses", "bool"),
    "default-address-routing-type": ("default_address_routing_type", "str"),
    "default-queue-routing-type": ("default_queue_routing_type", "str"),
    "max-delivery-attempts": ("max_delivery_attempts", "int"),
    "redelivery-delay": ("redelivery_delay", "int"),
    "dead-letter-address": ("dead_letter_address", "str"),
    "expiry-address": ("expiry_address", "str"),
}

_MIRROR_FLAGS = {
    "message-acknowledgements": "message_acknowledgements",
    "queue-creation": "queue_creation",
    "queue-removal": "queue_removal",
    "durable": "durable",
    "sync": "sync",
}


def _local(el: etree._Element) -> str:
    return etree.QName(el).localname


def _children(el: etree._Element) -> Iterable[etree._Element]:
    return (c for c in el if isinstance(c.tag, str))


def _text(el: etree._Element) -> str:
    return (el.text or "").strip()


def _bool(value: str, where: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ConfigurationError(f"{where}: '{value}' is not a boolean")


def _int(value: str, where: str) -> int:
    try:
        return int(value.strip())
    except ValueError as exc:
        raise ConfigurationError(f"{where}: '{value}' must be an integer") from exc


def _child(el: etree._Element, name: str) -> etree._Element | None:
    return next((c for c in _children(el) if _local(c) == name), None)


# --- acceptors ---------------------------------------------------------------------------------------------------
_URI = re.compile(r"^(?P<scheme>[a-z]+)://(?P<host>\[[^\]]+\]|[^:/?]+)(?::(?P<port>\d+))?/?(?:\?(?P<query>.*))?$")


def parse_uri_params(query: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    for part in re.split(r"[;&]", query or ""):
        if part.strip():
            k, _, v = part.partition("=")
            params[k.strip()] = v.strip()
    return params


def parse_acceptor(name: str, uri: str, port_default: int = 61616) -> AcceptorConfig:
    m = _URI.match(uri.strip())
    if not m:
        raise ConfigurationError(f"acceptor {name}: cannot parse URI '{uri}'")
    params = parse_uri_params(m.group("query"))
    host = m.group("host").strip("[]")
    port = int(m.group("port") or params.get("port", port_default))
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"acceptor {name}: invalid port {port}")
    protocols = params.get("protocols")
    protos = frozenset(p.strip().upper() for p in protocols.split(",") if p.strip()) if protocols else ALL_PROTOCOLS
    return AcceptorConfig(name=name, uri=uri.strip(), host=host, port=port, protocols=protos, params=params)


def _acceptors(el: etree._Element) -> list[AcceptorConfig]:
    result: list[AcceptorConfig] = []
    seen_names: set[str] = set()
    seen_ports: dict[tuple[str, int], str] = {}
    for i, acc in enumerate(c for c in _children(el) if _local(c) == "acceptor"):
        name = acc.get("name") or f"acceptor-{i}"  # Artemis names unnamed acceptors itself
        if name in seen_names:
            raise ConfigurationError(f"duplicate acceptor name '{name}'")
        cfg = parse_acceptor(name, _text(acc))
        key = (cfg.host, cfg.port)
        other = seen_ports.get(key) or next(
            (n for (h, p), n in seen_ports.items() if p == cfg.port and cfg.port != 0 and "0.0.0.0" in (h, cfg.host)),
            None,
        )
        if other and cfg.port != 0:
            raise ConfigurationError(f"acceptors '{other}' and '{name}' both bind {cfg.host}:{cfg.port}")
        seen_names.add(name)
        seen_ports[key] = name
        result.append(cfg)
    return result


# --- addresses and settings -------------------------------------------------------------------------------------
def _addresses(el: etree._Element) -> list[AddressConfig]:
    result = []
    for addr in (c for c in _children(el) if _local(c) == "address"):
        name = addr.get("name")
        if not name:
            raise ConfigurationError("<address> without a name")
        routing: set[str] = set()
        queues: list[QueueConfig] = []
        for rt in _children(addr):
            kind = _local(rt)
            if kind not in ("anycast", "multicast"):
                continue
            routing.add(kind)
            for q in (c for c in _children(rt) if _local(c) == "queue"):
                qname = q.get("name")
                if not qname:
                    raise ConfigurationError(f"queue without a name on address {name}")
                durable_el = _child(q, "durable")
                filter_el = _child(q, "filter")
                queues.append(
                    QueueConfig(
                        name=qname,
                        address=name,
                        routing_type=kind,
                        durable=_bool(_text(durable_el), f"queue {qname} durable") if durable_el is not None else True,
                        filter=filter_el.get("string") if filter_el is not None else None,
                        max_consumers=_int(q.get("max-consumers", "-1"), f"queue {qname} max-consumers"),
                        purge_on_no_consumers=_bool(q.get("purge-on-no-consumers", "false"), f"queue {qname}"),
                    )
                )
        result.append(AddressConfig(name=name, routing_types=frozenset(routing or {"anycast"}), queues=queues))
    return result


def _address_settings(el: etree._Element) -> list[AddressSettingConfig]:
    result = []
    for s in (c for c in _children(el) if _local(c) == "address-setting"):
        setting = AddressSettingConfig(match=s.get("match", "#"))
        for child in _children(s):
            key = _local(child)
            field = _ADDRESS_SETTING_FIELDS.get(key)
            value = _text(child)
            if field is None:
                setting.extra[key] = value
            elif field[1] == "bool":
                setattr(setting, field[0], _bool(value, f"address-setting {setting.match} {key}"))
            elif field[1] == "int":
                setattr(setting, field[0], _int(value, f"address-setting {setting.match} {key}"))
            else:
                setattr(setting, field[0], value)
        result.append(setting)
    return result


def _security_settings(el: etree._Element) -> list[SecuritySettingConfig]:
    result = []
    for s in (c for c in _children(el) if _local(c) == "security-setting"):
        perms: dict[str, frozenset[str]] = {}
        for p in (c for c in _children(s) if _local(c) == "permission"):
            roles = frozenset(r.strip() for r in (p.get("roles") or "").split(",") if r.strip())
            perms[p.get("type", "")] = roles
        result.append(SecuritySettingConfig(match=s.get("match", "#"), permissions=perms))
    return result


# --- broker connections -----------------------------------------------------------------------------------------
def _properties(el: etree._Element) -> dict[str, str]:
    return {p.get("key", ""): p.get("value", "") for p in _children(el) if _local(p) == "property"}


def _mirror(el: etree._Element, conn: str, version: str) -> MirrorConfig:
    mirror = MirrorConfig()
    for attr, field in _MIRROR_FLAGS.items():
        if el.get(attr) is not None:
            setattr(mirror, field, _bool(el.get(attr, ""), f"amqp-connection {conn} mirror {attr}"))
    mirror.address_filter = el.get("address-filter")
    props = _properties(el)
    if props and not versions.has_mirror_properties(version):
        raise ConfigurationError(
            f"amqp-connection {conn}: <mirror><property> needs Artemis 2.32 or later (emulating {version})"
        )
    mirror.properties = props
    return mirror


def _broker_connections(el: etree._Element, version: str) -> list[BrokerConnectionConfig]:
    result: list[BrokerConnectionConfig] = []
    names: set[str] = set()
    for c in (c for c in _children(el) if _local(c) == "amqp-connection"):
        name, uri = c.get("name"), c.get("uri")
        if not name or not uri:
            raise ConfigurationError("amqp-connection needs both 'uri' and 'name'")
        if name in names:
            raise ConfigurationError(f"duplicate amqp-connection name '{name}'")
        names.add(name)
        retry = _int(c.get("retry-interval", "5000"), f"amqp-connection {name} retry-interval")
        attempts = _int(c.get("reconnect-attempts", "-1"), f"amqp-connection {name} reconnect-attempts")
        if retry <= 0:
            raise ConfigurationError(f"amqp-connection {name}: retry-interval must be > 0, got {retry}")
        if attempts == 0 or attempts < -1:
            raise ConfigurationError(f"amqp-connection {name}: reconnect-attempts must be -1 or > 0, got {attempts}")
        try:
            password = security.reveal(c.get("password"))
            user = security.reveal(c.get("user"))
        except ValueError as exc:
            raise ConfigurationError(f"amqp-connection {name}: cannot decode ENC(...) value: {exc}") from exc
        conn = BrokerConnectionConfig(
            name=name,
            uri=uri,
            user=user,
            password=password,
            retry_interval=retry,
            reconnect_attempts=attempts,
            auto_start=_bool(c.get("auto-start", "true"), f"amqp-connection {name} auto-start"),
        )
        elements = list(_children(c))
        if not elements:
            raise ConfigurationError(f"amqp-connection {name} needs at least one of sender/receiver/peer/mirror")
        for child in elements:
            kind = _local(child)
            if kind == "mirror":
                if conn.mirror is not None:
                    raise ConfigurationError(f"amqp-connection {name} has more than one <mirror>")
                conn.mirror = _mirror(child, name, version)
            else:
                conn.other_elements.append(kind)
        result.append(conn)
    return result


def _plugins(el: etree._Element) -> list[BrokerPluginConfig]:
    return [
        BrokerPluginConfig(class_name=p.get("class-name", ""), properties=_properties(p))
        for p in _children(el)
        if _local(p) == "broker-plugin"
    ]


def _ha_policy(el: etree._Element) -> HAPolicyConfig:
    kind_el = next(iter(_children(el)), None)
    if kind_el is None:
        return HAPolicyConfig()
    role_el = next(iter(_children(kind_el)), None)
    return HAPolicyConfig(kind=_local(kind_el), role=_local(role_el) if role_el is not None else None)


# --- schema -----------------------------------------------------------------------------------------------------
_SCHEMAS: dict[str, etree.XMLSchema] = {}


def validate_core(core: etree._Element, schema_dir: Path) -> None:
    xsd = schema_dir / "artemis-configuration.xsd"
    if not xsd.exists():
        return
    key = str(xsd)
    if key not in _SCHEMAS:
        _SCHEMAS[key] = etree.XMLSchema(etree.parse(str(xsd)))
    schema = _SCHEMAS[key]
    doc = etree.ElementTree(etree.fromstring(etree.tostring(core)))
    if not schema.validate(doc):
        err = schema.error_log.last_error
        raise ConfigurationError(f"Invalid configuration: broker.xml line {err.line}: {err.message}")


# --- broker.xml -----------------------------------------------------------------------------------------------
def parse_broker_xml(path: Path, version: str, schema_dir: Path | None = None) -> BrokerConfig:
    try:
        tree = etree.parse(str(path), etree.XMLParser(remove_comments=True, resolve_entities=False))
    except (OSError, etree.XMLSyntaxError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from exc
    root = tree.getroot()
    core = root if _local(root) == "core" else next((c for c in _children(root) if _local(c) == "core"), None)
    if _local(root) not in ("configuration", "core") or core is None:
        raise ConfigurationError(f"{path}: expected <configuration xmlns=\"{NS_ROOT}\"><core xmlns=\"{NS_CORE}\">")
    if schema_dir is not None:
        validate_core(core, schema_dir)
    cfg = BrokerConfig(name="localhost")
    for el in _children(core):
        tag = _local(el)
        if tag == "name":
            cfg.name = _text(el)
        elif tag == "persistence-enabled":
            cfg.persistence_enabled = _bool(_text(el), tag)
        elif tag == "security-enabled":
            cfg.security_enabled = _bool(_text(el), tag)
        elif tag in ("journal-directory", "bindings-directory", "paging-directory", "large-messages-directory"):
            setattr(cfg, tag.replace("-", "_"), _text(el))
        elif tag == "configuration-file-refresh-period":
            cfg.configuration_file_refresh_period = _int(_text(el), tag)
        elif tag == "acceptors":
            cfg.acceptors = _acceptors(el)
        elif tag == "addresses":
            cfg.addresses = _addresses(el)
        elif tag == "address-settings":
            cfg.address_settings = _address_settings(el)
        elif tag == "security-settings":
            cfg.security_settings = _security_settings(el)
        elif tag == "broker-connections":
            cfg.broker_connections = _broker_connections(el, version)
        elif tag == "broker-plugins":
            cfg.broker_plugins = _plugins(el)
        elif tag == "ha-policy":
            cfg.ha_policy = _ha_policy(el)
        elif tag in _CORE_SETTINGS:
            if tag.startswith("mirror-") and not versions.has_mirror_ack_manager_settings(version):
                raise ConfigurationError(f"<{tag}> needs Artemis 2.34 or later (emulating {version})")
            cfg.core_settings[tag] = _text(el)
        elif tag not in _QUIET:
            cfg.unknown_elements.append(tag)
    return cfg


# --- the other etc/ files ---------------------------------------------------------------------------------------
def _parse_xml_quiet(path: Path) -> etree._Element | None:
    if not path.exists():
        return None
    try:
        return etree.parse(str(path), etree.XMLParser(remove_comments=True)).getroot()
    except etree.XMLSyntaxError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from exc


def web_binding(etc: Path) -> tuple[bool, str, int]:
    """(web enabled, http host, http port) from bootstrap.xml's <web><binding uri=...>."""
    root = _parse_xml_quiet(etc / "bootstrap.xml")
    if root is None:
        return False, "localhost", 8161
    for el in root.iter():
        if isinstance(el.tag, str) and _local(el) == "binding" and el.get("uri"):
            m = re.match(r"^https?://(?P<host>\[[^\]]+\]|[^:/]+)(?::(?P<port>\d+))?", el.get("uri", ""))
            if m:
                return True, m.group("host").strip("[]"), int(m.group("port") or 80)
        if isinstance(el.tag, str) and _local(el) == "web" and el.get("bind"):  # pre-2.3x single binding form
            m = re.match(r"^https?://([^:/]+)(?::(\d+))?", el.get("bind", ""))
            if m:
                return True, m.group(1), int(m.group(2) or 80)
    return False, "localhost", 8161


def jolokia_access(etc: Path) -> tuple[list[str], bool]:
    root = _parse_xml_quiet(etc / "jolokia-access.xml")
    if root is None:
        return [], False
    origins = [_text(e) for e in root.iter() if isinstance(e.tag, str) and _local(e) == "allow-origin"]
    strict = any(isinstance(e.tag, str) and _local(e) == "strict-checking" for e in root.iter())
    return origins, strict


def profile_vars(etc: Path) -> dict[str, str]:
    result: dict[str, str] = {}
    path = etc / "artemis.profile"
    if path.exists():
        for line in path.read_text().splitlines():
            m = re.match(r"^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)=(['\"]?)(.*)\2\s*$", line)
            if m:
                result[m.group(1)] = m.group(3)
    return result


def management_roles(etc: Path, profile: dict[str, str]) -> frozenset[str]:
    """Roles allowed to invoke anything on the Artemis domain: management.xml `<access method="*">` under
    `<match domain="org.apache.activemq.artemis">`, else HAWTIO_ROLE(S) from artemis.profile, else amq."""
    root = _parse_xml_quiet(etc / "management.xml")
    roles: set[str] = set()
    if root is not None:
        for match in (e for e in root.iter() if isinstance(e.tag, str) and _local(e) == "match"):
            if match.get("domain") == "org.apache.activemq.artemis" and match.get("key") is None:
                for acc in _children(match):
                    if _local(acc) == "access" and acc.get("method") == "*":
                        roles.update(r.strip() for r in (acc.get("roles") or "").split(",") if r.strip())
    if not roles:
        hawtio = profile.get("HAWTIO_ROLES") or profile.get("HAWTIO_ROLE") or "amq"
        roles = {r.strip() for r in hawtio.split(",") if r.strip()}
    return frozenset(roles)


def guest_login(etc: Path) -> tuple[str | None, str | None]:
    """(guest user, guest role) when login.config's `activemq` entry has a GuestLoginModule."""
    path = etc / "login.config"
    if not path.exists():
        return None, None
    text = path.read_text()
    if "GuestLoginModule" not in text:
        return None, None
    guest = text[text.index("GuestLoginModule") :]
    user = re.search(r'org\.apache\.activemq\.jaas\.guest\.user\s*=\s*"([^"]*)"', guest)
    role = re.search(r'org\.apache\.activemq\.jaas\.guest\.role\s*=\s*"([^"]*)"', guest)
    return (user.group(1) if user else "guest"), (role.group(1) if role else "guests")


def parse_instance(
    instance_dir: str | Path, version: str | None = None, schema_dir: Path | None = None, etc_dir: Path | None = None
) -> InstanceConfig:
    instance = Path(instance_dir)
    etc = etc_dir or instance / "etc"
    version = version or versions.emulated_version()
    broker = parse_broker_xml(etc / "broker.xml", version, schema_dir)
    web, host, port = web_binding(etc)
    origins, strict = jolokia_access(etc)
    profile = profile_vars(etc)
    realm = security.PropertiesRealm(etc / "artemis-users.properties", etc / "artemis-roles.properties")
    users = {u: UserRecord(name=u, password_hash=h, roles=r) for u, (h, r) in realm.users().items()}
    guest = guest_login(etc)
    return InstanceConfig(
        instance_dir=str(instance),
        broker=broker,
        emulated_version=version,
        users=users,
        http_host=host,
        http_port=port,
        web_enabled=web,
        jolokia_allowed_origins=origins,
        jolokia_strict_checking=strict,
        management_roles=management_roles(etc, profile),
        guest_user=guest[0],
        guest_role=guest[1],
    )
