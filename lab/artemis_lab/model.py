"""Configuration model of a lab broker instance.

`config_xml.parse_instance(instance_dir)` fills these from the instance's `etc/` files; the broker core
(`artemis_lab.core`) runs from them. Defaults are Artemis' defaults (see ARTEMIS-FACTS.md), so a value left
out of broker.xml behaves as it would on Artemis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALL_PROTOCOLS = frozenset({"CORE", "AMQP", "STOMP", "HORNETQ", "MQTT", "OPENWIRE"})

# Permission types of <security-setting><permission type=.../>, as in Artemis.
PERMISSION_TYPES = frozenset(
    {
        "send",
        "consume",
        "browse",
        "manage",
        "createAddress",
        "deleteAddress",
        "createDurableQueue",
        "deleteDurableQueue",
        "createNonDurableQueue",
        "deleteNonDurableQueue",
        "view",
        "edit",
    }
)


@dataclass
class AcceptorConfig:
    name: str
    uri: str
    host: str
    port: int
    protocols: frozenset[str] = ALL_PROTOCOLS  # `protocols=` URI param; absent means every protocol
    params: dict[str, str] = field(default_factory=dict)


@dataclass
class QueueConfig:
    name: str
    address: str
    routing_type: str = "anycast"  # "anycast" | "multicast", lower case as in ObjectNames
    durable: bool = True
    filter: str | None = None
    max_consumers: int = -1
    purge_on_no_consumers: bool = False


@dataclass
class AddressConfig:
    name: str
    routing_types: frozenset[str] = frozenset({"anycast"})
    queues: list[QueueConfig] = field(default_factory=list)


@dataclass
class AddressSettingConfig:
    match: str  # Artemis wildcard syntax: `#` any words, `*` one word, `.` delimiter
    auto_create_queues: bool = True
    auto_create_addresses: bool = True
    auto_delete_queues: bool = True
    auto_delete_addresses: bool = True
    default_address_routing_type: str = "MULTICAST"
    default_queue_routing_type: str = "MULTICAST"
    max_delivery_attempts: int = 10
    redelivery_delay: int = 0
    dead_letter_address: str | None = None
    expiry_address: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class SecuritySettingConfig:
    match: str
    permissions: dict[str, frozenset[str]] = field(default_factory=dict)  # permission type -> roles


@dataclass
class MirrorConfig:
    message_acknowledgements: bool = True
    queue_creation: bool = True
    queue_removal: bool = True
    durable: bool = True
    sync: bool = False
    address_filter: str | None = None  # comma list of prefixes, `!prefix` excludes; exclusion wins
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class BrokerConnectionConfig:
    name: str
    uri: str  # may hold `#` alternates: tcp://a:5672#tcp://b:5672
    user: str | None = None
    password: str | None = None  # plain text after ENC(...) was decoded
    retry_interval: int = 5000
    reconnect_attempts: int = -1
    auto_start: bool = True
    mirror: MirrorConfig | None = None
    other_elements: list[str] = field(default_factory=list)  # sender/receiver/peer/federation/bridge: recorded only


@dataclass
class BrokerPluginConfig:
    class_name: str
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class HAPolicyConfig:
    # kind: "primary-only" | "live-only" | "replication" | "shared-store" | None (no <ha-policy>)
    kind: str | None = None
    # role: "primary" | "backup" | "master" | "slave" | "colocated" | None
    role: str | None = None


@dataclass
class BrokerConfig:
    name: str
    persistence_enabled: bool = True
    security_enabled: bool = True
    journal_directory: str = "data/journal"
    bindings_directory: str = "data/bindings"
    paging_directory: str = "data/paging"
    large_messages_directory: str = "data/large-messages"
    acceptors: list[AcceptorConfig] = field(default_factory=list)
    addresses: list[AddressConfig] = field(default_factory=list)
    address_settings: list[AddressSettingConfig] = field(default_factory=list)
    security_settings: list[SecuritySettingConfig] = field(default_factory=list)
    broker_connections: list[BrokerConnectionConfig] = field(default_factory=list)
    broker_plugins: list[BrokerPluginConfig] = field(default_factory=list)
    ha_policy: HAPolicyConfig = field(default_factory=HAPolicyConfig)
    # Top-level <core> settings that change mirror behaviour (2.34+): mirror-ack-manager-queue-attempts,
    # mirror-ack-manager-page-attempts, mirror-ack-manager-retry-delay, mirror-page-transaction, ...
    core_settings: dict[str, str] = field(default_factory=dict)
    configuration_file_refresh_period: int = 5000
    unknown_elements: list[str] = field(default_factory=list)  # logged at start, never fatal


@dataclass
class UserRecord:
    name: str
    password_hash: str  # as stored in artemis-users.properties (ENC(...) or plain)
    roles: frozenset[str] = frozenset()


@dataclass
class InstanceConfig:
    """Everything under the instance's etc/ that is not broker.xml."""

    instance_dir: str
    broker: BrokerConfig
    emulated_version: str  # e.g. "2.44.0"
    users: dict[str, UserRecord] = field(default_factory=dict)
    http_host: str = "localhost"
    http_port: int = 8161
    web_enabled: bool = True
    jolokia_allowed_origins: list[str] = field(default_factory=list)  # patterns from jolokia-access.xml
    jolokia_strict_checking: bool = True
    management_roles: frozenset[str] = frozenset({"amq"})  # roles allowed to use Jolokia (HAWTIO_ROLE)
    # login.config GuestLoginModule (`artemis create --allow-anonymous`): a connection without credentials (SASL
    # ANONYMOUS) is this user with this role; None when anonymous access is not configured.
    guest_user: str | None = None
    guest_role: str | None = None
