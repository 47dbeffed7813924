"""Helpers for the lab broker engine tests: an in-memory realm, InstanceConfig builders, proton clients."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from proton import Message
from proton.utils import BlockingConnection

from artemis_lab.core.broker import Broker
from artemis_lab.model import (
    AcceptorConfig,
    AddressConfig,
    AddressSettingConfig,
    BrokerConfig,
    BrokerConnectionConfig,
    InstanceConfig,
    MirrorConfig,
    QueueConfig,
    SecuritySettingConfig,
)

ALL_PERMS = ("send", "consume", "browse", "manage", "createAddress", "deleteAddress", "createDurableQueue",
             "deleteDurableQueue", "createNonDurableQueue", "deleteNonDurableQueue")
USERS = {"admin": ("secret", frozenset({"amq"})), "reader": ("readpw", frozenset({"readers"}))}


class DictRealm:
    def __init__(self, users: dict[str, tuple[str, frozenset[str]]] | None = None):
        self.users = users if users is not None else USERS

    def authenticate(self, user: str, password: str) -> frozenset[str] | None:
        entry = self.users.get(user)
        if entry is None or entry[0] != password:
            return None
        return entry[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def instance(tmp_path: Any, name: str = "lab1", port: int = 0, *, queues: tuple[str, ...] = ("orders",),
             mirror_to: list[BrokerConnectionConfig] | None = None, version: str = "2.44.0",
             core_settings: dict[str, str] | None = None, extra_acceptors: dict[str, int] | None = None
             ) -> InstanceConfig:
    perms = {p: frozenset({"amq"}) for p in ALL_PERMS}
    perms["browse"] = frozenset({"amq", "readers"})
    acceptors = [AcceptorConfig(name="amqp", uri=f"tcp://127.0.0.1:{port}", host="127.0.0.1", port=port)]
    for acc_name, acc_port in (extra_acceptors or {}).items():
        acceptors.append(AcceptorConfig(name=acc_name, uri=f"tcp://127.0.0.1:{acc_port}", host="127.0.0.1",
                                        port=acc_port))
    broker = BrokerConfig(
        name=name,
        acceptors=acceptors,
        addresses=[AddressConfig(name=q, routing_types=frozenset({"anycast"}),
                                 queues=[QueueConfig(name=q, address=q)]) for q in queues],
        address_settings=[AddressSettingConfig(match="#")],
        security_settings=[SecuritySettingConfig(match="#", permissions=perms)],
        broker_connections=mirror_to or [],
        core_settings=core_settings or {},
    )
    inst_dir = tmp_path / name
    inst_dir.mkdir(parents=True, exist_ok=True)
    return InstanceConfig(instance_dir=str(inst_dir), broker=broker, emulated_version=version)


def mirror_connection(name: str, port: int, **mirror: Any) -> BrokerConnectionConfig:
    return BrokerConnectionConfig(name=name, uri=f"tcp://127.0.0.1:{port}", user="admin", password="secret",
                                  retry_interval=200, mirror=MirrorConfig(**mirror))


def start(inst: InstanceConfig) -> Broker:
    b = Broker(inst, DictRealm())
    b.start()
    return b


def port_of(b: Broker, acceptor: str = "amqp") -> int:
    return int(b.acceptor_info(acceptor)["bound_port"])


def url(port: int, user: str = "admin", password: str = "secret") -> str:
    return f"amqp://{user}:{password}@127.0.0.1:{port}"


def connect(port: int, user: str = "admin", password: str = "secret", timeout: float = 5) -> BlockingConnection:
    return BlockingConnection(url(port, user, password), timeout=timeout, allowed_mechs="PLAIN",
                              allow_insecure_mechs=True)


def send(port: int, address: str, bodies: list[Any], durable: bool = True, **kw: Any) -> None:
    conn = connect(port)
    try:
        snd = conn.create_sender(address, **kw)
        for body in bodies:
            snd.send(Message(body=body, durable=durable))
    finally:
        conn.close()


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


class TargetCapability:
    """Link option: put a capability (e.g. `queue`, `topic`) on the link's target terminus (a sender)."""

    def __init__(self, capability: str):
        self.capability = capability

    def apply(self, link: Any) -> None:
        from proton import symbol

        link.target.capabilities.put_object(symbol(self.capability))

    def test(self, link: Any) -> bool:
        return bool(link.is_sender)


class SourceCapability(TargetCapability):
    def apply(self, link: Any) -> None:
        from proton import symbol

        link.source.capabilities.put_object(symbol(self.capability))

    def test(self, link: Any) -> bool:
        return bool(link.is_receiver)


def flush(conn: BlockingConnection, address: str = "orders") -> None:
    """Blocking clients only do I/O inside wait(): a link attach round trip pushes out pending frames (e.g.
    an accept) and returns once the broker has processed them (frames are handled in order)."""
    import uuid

    conn.create_sender(address, name=f"barrier-{uuid.uuid4()}").close()


def _serve_forever(instance_parent: str, name: str, port: int, mirror_port: int | None = None) -> None:
    """Subprocess entry point for crash tests: run one broker (optionally mirroring to a peer) until killed."""
    import pathlib
    import sys

    mirrors = [mirror_connection("PEER", mirror_port)] if mirror_port else None
    b = start(instance(pathlib.Path(instance_parent), name=name, port=port, mirror_to=mirrors))
    print("READY", port_of(b), flush=True)
    sys.stdin.read()  # block until killed (or stdin closed)
    b.stop()


if __name__ == "__main__":
    import sys

    _serve_forever(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None)
