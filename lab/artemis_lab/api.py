"""The contract between the broker core (`artemis_lab.core`) and the management layer (Jolokia MBeans, CLI).

`artemis_lab.core.broker.Broker` implements `BrokerAPI`. Every method is thread-safe: the core's network loop
runs in its own thread and the Jolokia HTTP server calls these methods from request threads. Methods raise
`artemis_lab.errors.LabArtemisError` subclasses where Artemis throws (unknown queue, unknown broker
connection, ...). Names in dicts are the Artemis MBean attribute names the management layer needs, in
snake_case; the management layer maps them to `MessageCount`, `DeliveringCount`, ...
"""

from __future__ import annotations

from typing import Any, Protocol

from artemis_lab.model import InstanceConfig


class SecurityRealm(Protocol):
    """Implemented by the management side (`artemis_lab.security.PropertiesRealm`) from the instance's
    artemis-users.properties / artemis-roles.properties; the core uses it for SASL PLAIN and
    security-settings checks."""

    def authenticate(self, user: str, password: str) -> frozenset[str] | None:
        """Roles of the user when the password matches, None otherwise."""
        ...


class BrokerAPI(Protocol):
    # --- life cycle -----------------------------------------------------------------------------
    def __init__(self, instance: InstanceConfig, realm: SecurityRealm) -> None: ...

    def start(self) -> None:
        """Replay the journal, open acceptors, start auto-start broker connections. Returns when the
        broker is active (acceptors bound). Raises ConfigurationError for a config Artemis would reject."""

    def stop(self) -> None:
        """Graceful stop: close acceptors and connections, flush the journal."""

    # --- broker -----------------------------------------------------------------------------------
    name: str
    version: str  # what the Version attribute reports, e.g. "2.44.0-lab"
    node_id: str  # stable across restarts (kept in data/)

    def broker_info(self) -> dict[str, Any]:
        """keys: started (bool), active (bool), uptime_ms (int), connection_count, total_message_count,
        total_consumer_count, total_messages_added, total_messages_acknowledged, pending_mirror_acks (int),
        address_names (list[str]), queue_names (list[str]), plugin_class_names (list[str]),
        ha_policy (str, Artemis HAPolicy enum name e.g. "PRIMARY_ONLY"), backup (bool).
        Added by the core: node_id (str)."""

    # --- addresses ---------------------------------------------------------------------------------
    def address_info(self, address: str) -> dict[str, Any]:
        """keys: routing_types (list[str] upper case), queue_names, message_count, paused, internal,
        temporary, number_of_messages (alias of message_count), bytes (int). Raises NonExistentAddress.
        Added by the core: blocked (bool; Artemis has no such attribute, see block_address), auto_created."""

    def create_address(self, address: str, routing_types: list[str]) -> None: ...

    def delete_address(self, address: str, force: bool = False) -> None: ...

    def pause_address(self, address: str, persist: bool = False) -> None: ...

    def resume_address(self, address: str) -> None: ...

    def block_address(self, address: str) -> bool:
        """Producers get no more credit (AMQP) until unblocked. Returns True (as Artemis does)."""

    def unblock_address(self, address: str) -> bool: ...

    def address_blocked(self, address: str) -> bool:
        """Added by the core: whether block_address is in force (False for an unknown address). Artemis
        exposes no such attribute; for lab-side checks and tests only."""

    # --- queues ----------------------------------------------------------------------------------
    def queue_info(self, queue: str) -> dict[str, Any]:
        """keys: address, routing_type ("ANYCAST"/"MULTICAST"), durable, temporary, internal, filter,
        message_count, durable_message_count, delivering_count, scheduled_count, consumer_count,
        messages_added, messages_acknowledged, messages_expired, messages_killed,
        first_message_timestamp (ms epoch or None), first_message_age (ms or None), paused,
        persisted_pause, max_consumers, purge_on_no_consumers, id (int). Raises NonExistentQueue.
        Added by the core: auto_created (bool)."""

    def create_queue(self, address: str, queue: str, routing_type: str, durable: bool = True,
                     filter: str | None = None, ignore_if_exists: bool = False) -> None: ...

    def destroy_queue(self, queue: str, remove_consumers: bool = False) -> None: ...

    def pause_queue(self, queue: str, persist: bool = False) -> None: ...

    def resume_queue(self, queue: str) -> None: ...

    def count_messages(self, queue: str, filter: str | None = None) -> int: ...

    def remove_messages(self, queue: str, filter: str | None = None) -> int: ...

    def browse_messages(self, queue: str, limit: int = 100) -> list[dict[str, Any]]:
        """Message summaries: messageID, address, durable, timestamp, userID, properties (dict)."""

    # --- acceptors -------------------------------------------------------------------------------
    def acceptor_names(self) -> list[str]: ...

    def acceptor_info(self, name: str) -> dict[str, Any]:
        """keys: started (bool), parameters (dict[str, str]), factory_class_name (str).
        Added by the core: bound_port (int, the port actually bound; differs from the configured one when
        that is 0, and stays the same across stop/start)."""

    def start_acceptor(self, name: str) -> None:
        """Bind the port again."""

    def stop_acceptor(self, name: str) -> None:
        """Close the listening socket (port freed: connection refused) and drop every connection that
        came in through it, mirror connections from a peer included."""

    # --- broker connections (mirror) -------------------------------------------------------------
    def broker_connections(self) -> list[dict[str, Any]]:
        """One dict per amqp-connection: name, protocol ("AMQP"), started, connected, uri, user,
        retry_interval, reconnect_attempts, auto_start."""

    def start_broker_connection(self, name: str) -> None:
        """Raises IllegalArgument(f"broker connection {name} not found")."""

    def stop_broker_connection(self, name: str) -> None:
        """Stops sending; the mirror keeps capturing events into its SNF queue (as Artemis does)."""

    # --- connections -----------------------------------------------------------------------------
    def connections(self) -> list[dict[str, Any]]:
        """connectionID, clientAddress, creationTime (ms), sessionCount, protocol, user, acceptor."""

    def close_connections_for_user(self, user: str) -> bool: ...

    def consumers(self) -> list[dict[str, Any]]:
        """consumerID, connectionID, queueName, address, browseOnly, deliveringCount, user."""
