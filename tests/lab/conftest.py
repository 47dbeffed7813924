"""Fixtures of the lab broker's fidelity suite.

Everything here talks to the lab through public surfaces: the built archive's bin/artemis, the instance's
bin/artemis-service, HTTP JSON to /console/jolokia (urllib, no client library). Ports are always free ports.
The engine under the management layer is the real core (`artemis_lab.core.broker`) when it is importable, else
the in-memory FakeBroker; LAB_TEST_ENGINE=fake|core forces one.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from artemis_lab import dist, engine

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO.parent / "shared" / "artemis-recorded" / "2.44.0"
SCHEMAS = REPO.parent / "shared" / "artemis-schema"
FAKE_ENGINE = "artemis_lab.testing.fake_broker:FakeBroker"
ADMIN, ADMIN_PW = "admin", "s3cret!"
VIEWER, VIEWER_PW = "viewer", "viewpw"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def engine_for_tests() -> str:
    choice = os.environ.get("LAB_TEST_ENGINE")
    if choice == "fake" or (choice is None and not engine.core_available()):
        return FAKE_ENGINE
    return engine.DEFAULT_ENGINE


def recorded(name: str) -> dict[str, Any]:
    """One recorded request/response pair of the real Artemis 2.44.0 pair; skips when the folder is absent."""
    path = RECORDED / name
    if not path.exists():
        pytest.skip(f"recorded Artemis responses not available at {RECORDED}")
    return json.loads(path.read_text())


# --- HTTP -------------------------------------------------------------------------------------------------------
@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.raw)

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


@dataclass
class Jolokia:
    url: str  # .../console/jolokia
    user: str | None = ADMIN
    password: str | None = ADMIN_PW
    origin: str | None = None
    broker: str = "lab"
    extra: dict[str, Any] = field(default_factory=dict)

    def _headers(self, user: str | None, password: str | None, origin: str | None) -> dict[str, str]:
        headers = {}
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        if origin is not None:
            headers["Origin"] = origin
        return headers

    def request(self, method: str, path: str = "/", body: bytes | None = None, **kw: Any) -> Reply:
        user = kw.get("user", self.user)
        password = kw.get("password", self.password)
        origin = kw.get("origin", self.origin)
        headers = self._headers(user, password, origin)
        if body is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return Reply(resp.status, dict(resp.headers.items()), resp.read())
        except urllib.error.HTTPError as err:
            return Reply(err.code, dict(err.headers.items()), err.read())

    def post(self, payload: Any, **kw: Any) -> Reply:
        return self.request("POST", "/", json.dumps(payload).encode(), **kw)

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def call(self, payload: Any, **kw: Any) -> Any:
        reply = self.post(payload, **kw)
        assert reply.status == 200, reply
        return reply.json

    def value(self, payload: dict[str, Any]) -> Any:
        body = self.call(payload)
        assert body["status"] == 200, body
        return body["value"]

    # ObjectNames as ARTEMIS-FACTS section 4 writes them
    def bname(self) -> str:
        return f'org.apache.activemq.artemis:broker="{self.broker}"'

    def qname(self, queue: str, address: str | None = None, rt: str = "anycast") -> str:
        return (f'org.apache.activemq.artemis:broker="{self.broker}",component=addresses,'
                f'address="{address or queue}",subcomponent=queues,routing-type="{rt}",queue="{queue}"')

    def aname(self, address: str) -> str:
        return f'org.apache.activemq.artemis:broker="{self.broker}",component=addresses,address="{address}"'

    def accname(self, name: str) -> str:
        return f'org.apache.activemq.artemis:broker="{self.broker}",component=acceptors,name="{name}"'

    def cname(self, name: str) -> str:
        return f'org.apache.activemq.artemis:broker="{self.broker}",component=broker-connections,name="{name}"'


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (OSError, urllib.error.URLError, ConnectionError):
            last = None
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last: {last!r})")


# --- distribution and instances ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def dist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lab-dist")


@pytest.fixture(scope="session")
def lab_home(tmp_path_factory: pytest.TempPathFactory, dist_dir: Path) -> Path:
    """The 2.44.0 archive, built once per session and unpacked."""
    archive = dist.build(dist_dir, "2.44.0")
    return dist.extract(archive, tmp_path_factory.mktemp("home"))


def home_for(version: str, tmp_path_factory: pytest.TempPathFactory, dist_dir: Path) -> Path:
    archive = dist_dir / f"lab-artemis-{version}-bin.tar.gz"
    if not archive.exists():
        dist.build(dist_dir, version)
    return dist.extract(archive, tmp_path_factory.mktemp(f"home-{version}"))


def run_artemis(home_or_instance: Path, *args: str, env: dict[str, str] | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([str(home_or_instance / "bin" / "artemis"), *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


@dataclass
class LabInstance:
    path: Path
    jolokia: Jolokia
    amqp_port: int
    env: dict[str, str]

    def service(self, action: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.path / "bin" / "artemis-service"), action], capture_output=True, text=True,
                              env={**os.environ, **self.env}, timeout=timeout)

    def pid(self) -> int | None:
        pid_file = self.path / "data" / "artemis.pid"
        return int(pid_file.read_text().strip()) if pid_file.exists() else None

    def log(self) -> str:
        return (self.path / "log" / "artemis.log").read_text(errors="replace")


def create_instance(home: Path, target: Path, name: str = "lab", extra_args: tuple[str, ...] = ()) -> LabInstance:
    amqp_port, http_port = free_port(), free_port()
    env = {"ARTEMIS_LAB_ENGINE": engine_for_tests()}
    result = run_artemis(
        home, "create", str(target), "--user", ADMIN, "--password", ADMIN_PW, "--role", "amq", "--require-login",
        "--name", name, "--host", "127.0.0.1", "--http-host", "127.0.0.1", "--http-port", str(http_port),
        "--default-port", str(amqp_port), "--no-amqp-acceptor", "--no-mqtt-acceptor", "--no-stomp-acceptor",
        "--no-hornetq-acceptor", "--silent", *extra_args, env=env)
    assert result.returncode == 0, result.stderr
    add = run_artemis(target, "user", "add", "--user", VIEWER, "--password", VIEWER_PW, "--role", "view", env=env)
    assert add.returncode == 0, add.stderr
    jolokia = Jolokia(f"http://127.0.0.1:{http_port}/console/jolokia", origin=f"http://127.0.0.1:{http_port}",
                      broker=name)
    return LabInstance(target, jolokia, amqp_port, env)


def jolokia_up(j: Jolokia) -> bool:
    reply = j.post({"type": "read", "mbean": j.bname(), "attribute": "Started"})
    return reply.status == 200 and reply.json.get("value") is True


@pytest.fixture(scope="module")
def running(lab_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInstance]:
    """A lab broker started through bin/artemis-service, stopped at the end of the module."""
    inst = create_instance(lab_home, tmp_path_factory.mktemp("inst") / "broker1")
    started = inst.service("start")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        wait_for(lambda: jolokia_up(inst.jolokia), timeout=30)
        yield inst
    finally:
        inst.service("stop")
        if inst.pid():
            inst.service("force-stop")


@pytest.fixture
def fresh_dir(tmp_path: Path) -> Path:
    target = tmp_path / "instance"
    yield target
    shutil.rmtree(target, ignore_errors=True)


# --- in-process Jolokia over the FakeBroker (fast protocol tests) -----------------------------------------------
MIRROR_XML = """
      <broker-connections>
         <amqp-connection uri="tcp://127.0.0.1:1" name="DC2" user="mirror" password="{pw}" retry-interval="1000"
                          reconnect-attempts="-1" auto-start="true">
            <mirror/>
         </amqp-connection>
      </broker-connections>
"""
ORDERS_XML = """         <address name="orders">
            <anycast>
               <queue name="orders" />
            </anycast>
         </address>
      </addresses>"""


@dataclass
class FakeLab:
    jolokia: Jolokia
    broker: Any
    server: Any
    instance: Path


def start_fake_lab(root: Path, version: str = "2.44.0", name: str = "dc1") -> FakeLab:
    from artemis_lab import config_xml, instance, security
    from artemis_lab.jolokia.server import JolokiaServer
    from artemis_lab.testing.fake_broker import FakeBroker

    opts = instance.CreateOptions(directory=str(root / name), user=ADMIN, password=ADMIN_PW, require_login=True,
                                  name=name, host="127.0.0.1", http_host="127.0.0.1", http_port=0,
                                  no_amqp_acceptor=False, no_mqtt_acceptor=True, no_stomp_acceptor=True,
                                  no_hornetq_acceptor=True, default_port=free_port())
    path = instance.create_instance(opts, REPO / "lab", version)
    broker_xml = path / "etc" / "broker.xml"
    mirror = MIRROR_XML.format(pw=security.encode_two_way("mirrorpw"))
    text = broker_xml.read_text().replace("      <acceptors>", mirror + "      <acceptors>")
    broker_xml.write_text(text.replace("      </addresses>", ORDERS_XML))
    instance.add_user(path / "etc", VIEWER, VIEWER_PW, ["view"])
    config = config_xml.parse_instance(path, version)
    realm = security.PropertiesRealm.for_instance(path)
    broker = FakeBroker(config, realm)
    broker.start()
    server = JolokiaServer(broker, config, realm, port=0)
    server.start()
    jolokia = Jolokia(server.url, origin=f"http://127.0.0.1:{server.port}", broker=name)
    return FakeLab(jolokia, broker, server, path)


@pytest.fixture(scope="module")
def fake_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeLab]:
    lab = start_fake_lab(tmp_path_factory.mktemp("fake"))
    yield lab
    lab.server.stop()


# --- a lab broker on the configured engine: acceptors artemis + amqp, queue orders, mirror DC2 to a closed port
ENGINE_MIRROR_XML = """      <broker-connections>
         <amqp-connection uri="tcp://127.0.0.1:{port}" name="DC2" user="admin" password="x" retry-interval="500"
                          reconnect-attempts="-1">
            <mirror/>
         </amqp-connection>
      </broker-connections>
      <acceptors>
         <acceptor name="amqp">tcp://127.0.0.1:{amqp}?protocols=AMQP;amqpCredits=1000</acceptor>"""
ENGINE_ORDERS_XML = """         <address name="orders"><anycast><queue name="orders"/></anycast></address>
      </addresses>"""


@pytest.fixture(scope="module")
def engine_lab(lab_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInstance]:
    inst = create_instance(lab_home, tmp_path_factory.mktemp("mb") / "dc1", name="dc1")
    xml = inst.path / "etc" / "broker.xml"
    # The peer port is closed: the mirror stays Started=true, Connected=false (retrying), as with a peer down.
    mirror = ENGINE_MIRROR_XML.format(port=free_port(), amqp=free_port())
    xml.write_text(xml.read_text().replace("      <acceptors>", mirror)
                   .replace("      </addresses>", ENGINE_ORDERS_XML))
    assert inst.service("start").returncode == 0
    try:
        wait_for(lambda: jolokia_up(inst.jolokia), timeout=30)
        yield inst
    finally:
        inst.service("stop")
