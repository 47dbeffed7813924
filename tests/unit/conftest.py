"""Shared unit-test helpers: a fake Jolokia endpoint that serves synthesised Artemis state.

`FakeArtemis` holds one broker's MBeans (built from a fixture in tests/unit/fixtures/jolokia/) and answers
Jolokia JSON requests the way Artemis 2.x + Jolokia do (shapes as the project's own recordings of real Artemis
2.44.0 in its lab show them: tests/unit/fixtures/recorded/, `make record`): HTTP 200 with per-item statuses,
canonical (sorted-key) names in search and pattern reads, 403 for a refused Origin (one object, no `request` key),
404 for unknown MBeans and attributes, 400 for overloaded operations without a signature and for unknown broker
connections, 500 for exceptions inside Artemis. For a refused login it answers like the bare Jolokia agent (HTTP 401
with an empty body; JSON 403 "User not authorized to access ..." without the role); the stock console the lab
records answers both a wrong password and a login without a HAWTIO_ROLES role with an empty HTTP 403 and
`Hawtio-Forbidden-Reason` (recordings 81, 84, 85). Version-dependent MBeans/attributes follow ARTEMIS-FACTS
section 5.

`FakeTransport` plugs a FakeArtemis into JolokiaClient; `jolokia_sites` patches the client's HttpTransport so
modules built from options reach the fake whose URL they name.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia, objectname

FIXTURES = Path(__file__).parent / "fixtures" / "jolokia"
# Raw Jolokia exchanges the project recorded from its own lab (real Artemis 2.44.0): `make record`
# (lab/continuity_lab/record.py). $ARTEMIS_RECORDED may point at another folder holding <version>/ recordings.
RECORDED = Path(os.environ.get("ARTEMIS_RECORDED") or Path(__file__).parent / "fixtures" / "recorded") / "2.44.0"

DOMAIN = objectname.DOMAIN


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def recorded(name: str) -> dict:
    """A recorded real Artemis 2.44.0 exchange (read-only use). The recordings are committed with the project, so a
    missing one is a failure (never a skip): record them again from the lab."""
    path = RECORDED / name
    if not path.exists():
        pytest.fail(f"recorded Artemis exchange {path} is missing: run `make record` (RECORD_VERSION=2.44.0) to "
                    "record it from the project's lab (lab/continuity_lab/record.py)", pytrace=False)
    return json.loads(path.read_text())


def _vt(v: str) -> tuple:
    return tuple(int(x) for x in v.split("-")[0].split(".")[:3])


def canonical(name: str) -> str:
    """Jolokia echoes names with keys sorted (javax.management canonical form)."""
    domain, props = objectname.parse(name)
    return domain + ":" + ",".join(f"{k}={_requote(k, v)}" for k, v in sorted(props.items()))


_UNQUOTED_KEYS = {"component", "subcomponent"}


def _requote(key: str, value: str) -> str:
    return value if key in _UNQUOTED_KEYS else objectname.quote(value)


def _pattern_match(pattern: str, name: str) -> bool:
    pdomain, _ = pattern.split(":", 1)
    ndomain, nprops = objectname.parse(name)
    if pdomain != ndomain:
        return False
    rest = pattern.split(":", 1)[1]
    list_pattern = rest == "*" or rest.endswith(",*")
    if list_pattern:
        rest = rest[:-2] if rest.endswith(",*") else ""
    _, pprops = objectname.parse(pdomain + ":" + rest) if rest else (pdomain, {})
    for k, v in pprops.items():
        if k not in nprops:
            return False
        if v != "*" and nprops[k] != v:
            return False
    if not list_pattern and set(pprops) != set(nprops):
        return False
    return True


def _is_pattern(name: str) -> bool:
    rest = name.split(":", 1)[1] if ":" in name else name
    return rest == "*" or rest.endswith(",*") or "=*" in rest


class FakeArtemis:
    """One broker behind a fake Jolokia endpoint. State is plain dicts so tests can mutate it."""

    def __init__(self, fixture: dict | str, url: str = "http://dc1:8161/console/jolokia"):
        data = load_fixture(fixture) if isinstance(fixture, str) else copy.deepcopy(fixture)
        self.url = url
        self.version: str = data["version"]
        self.name: str = data["name"]
        self.broker_attrs: dict = data.get("broker", {})
        self.addresses: dict = data.get("addresses", {})
        self.queues: list = data.get("queues", [])
        self.acceptors: dict = data.get("acceptors", {})
        self.connections: list = data.get("broker_connections", [])
        self.pending_mirror_acks: int = data.get("pending_mirror_acks", 0)
        self.users: dict = data.get("users", {"admin": {"password": "secret", "roles": ["amq"]}})
        self.allowed_origins: list = data.get("allowed_origins", ["http://dc1:8161"])
        self.blocked: set = set()
        self.calls: list = []  # every item handled: (type, mbean, operation/attribute)
        self.http_requests = 0
        self.fail_connections = 0  # next N HTTP requests raise ConnectionFailed
        self.now = 1_795_314_000.0

    # ---- features per version (ARTEMIS-FACTS section 5)
    def has(self, since: str) -> bool:
        return _vt(self.version) >= _vt(since)

    # ---- MBean registry
    def mbeans(self) -> dict[str, tuple[str, Any]]:
        reg: dict[str, tuple[str, Any]] = {objectname.broker(self.name): ("broker", None)}
        for addr in self.addresses:
            reg[objectname.address(self.name, addr)] = ("address", addr)
        for q in self.queues:
            if q["Name"].startswith("$ACTIVEMQ_ARTEMIS_MIRROR_") and not self.has("2.32.0"):
                continue  # no SNF queue MBean before 2.32
            reg[objectname.queue(self.name, q["Address"], q["Name"], q.get("RoutingType", "ANYCAST"))] = ("queue", q)
        for acc in self.acceptors:
            reg[objectname.acceptor(self.name, acc)] = ("acceptor", acc)
        if self.has("2.39.0"):
            for c in self.connections:
                reg[objectname.broker_connection(self.name, c["Name"])] = ("bconn", c)
        return {canonical(k): v for k, v in reg.items()}

    def _broker_value(self) -> dict:
        v = {"Name": self.name, "Version": self.version, "Started": True, "Active": True, "Backup": False,
             "NodeID": "node-" + self.name, "HAPolicy": "Primary Only", "ReplicaSync": False, "Uptime": "1 hour",
             "UptimeMillis": 3_600_000, "Status": json.dumps({"configuration": {"alder32": "1"}}),
             "AddressNames": sorted(self.addresses), "QueueNames": sorted(q["Name"] for q in self.queues),
             "ConnectionCount": 1, "TotalMessageCount": sum(int(q.get("MessageCount", 0)) for q in self.queues),
             "TotalConsumerCount": sum(int(q.get("ConsumerCount", 0)) for q in self.queues)}
        v.update(self.broker_attrs)
        if self.has("2.40.0"):
            v["PendingMirrorAcks"] = self.pending_mirror_acks
        return v

    def _value_of(self, kind: str, ref: Any) -> dict:
        if kind == "broker":
            return self._broker_value()
        if kind == "address":
            a = self.addresses[ref]
            qs = [q["Name"] for q in self.queues if q["Address"] == ref]
            return {"Address": ref, "Paused": False, "RoutingTypes": ["ANYCAST"], "QueueNames": qs,
                    "MessageCount": sum(int(q.get("MessageCount", 0)) for q in self.queues if q["Address"] == ref),
                    **a}
        if kind == "queue":
            base = {"MessageCount": 0, "DeliveringCount": 0, "ConsumerCount": 0, "MessagesAdded": 0,
                    "MessagesAcknowledged": 0, "Paused": False, "PersistedPause": False, "FirstMessageAge": None,
                    "FirstMessageTimestamp": None, "InternalQueue": False, "Temporary": False, "Durable": True,
                    "RoutingType": "ANYCAST"}
            base.update(ref)
            return base
        if kind == "acceptor":
            return {"Started": True, "Parameters": {}, **self.acceptors[ref]}
        if kind == "bconn":
            return {"Protocol": "AMQP", "User": "mirror", "RetryInterval": 5000, "ReconnectAttempts": -1, **ref}
        raise AssertionError(kind)

    # ---- request handling
    def handle_http(self, body: bytes, headers: dict) -> tuple[int, dict, bytes]:
        self.http_requests += 1
        if self.fail_connections > 0:
            self.fail_connections -= 1
            raise jolokia.ConnectionFailed(f"Connection refused by {self.url} (fake)")
        auth = headers.get("Authorization")
        user = self._auth_user(auth)
        if user is None:
            return 401, {"www-authenticate": 'Basic realm="activemq"'}, b""
        origin = headers.get("Origin")
        if origin not in self.allowed_origins:
            err = {"error_type": "java.lang.Exception",
                   "error": "java.lang.Exception : Origin %s is not allowed to call this agent" % (origin or "null"),
                   "status": 403}
            return 200, {}, json.dumps(err).encode()
        try:
            payload = json.loads(body)
        except ValueError:
            return 200, {}, json.dumps({"error_type": "java.lang.IllegalStateException", "status": 500,
                                        "error": "java.lang.IllegalStateException : Bad parser state"}).encode()
        roles = set(self.users[user]["roles"])
        if isinstance(payload, list):
            out = [self.handle_item(item, roles) for item in payload]
        else:
            out = self.handle_item(payload, roles)
        return 200, {"content-type": "application/json"}, json.dumps(out).encode()

    def _auth_user(self, auth: str | None) -> str | None:
        import base64

        if not auth or not auth.startswith("Basic "):
            return None
        user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
        if user in self.users and self.users[user]["password"] == pw:
            return user
        return None

    def handle_item(self, req: dict, roles: set) -> dict:
        kind = req.get("type")
        self.calls.append((kind, req.get("mbean"), req.get("operation") or req.get("attribute")))
        echo = {k: v for k, v in req.items() if not (k == "arguments" and not v)}
        if "mbean" in echo and not _is_pattern(echo["mbean"]):
            try:
                echo["mbean"] = canonical(echo["mbean"])
            except objectname.ObjectNameError:
                pass
        try:
            if kind == "version":
                value: Any = {"agent": "2.3.0", "protocol": "8.0", "config": {}, "info": {}}
            elif kind == "search":
                value = sorted(n for n in self.mbeans() if _pattern_match(req["mbean"], n))
            else:
                if "amq" not in roles:
                    what = ("attribute: {}".format(req.get("attribute", "Version"))) if kind == "read" else (
                        "operation: {}".format(str(req.get("operation", "")).split("(")[0]))
                    return self._err(echo, 403, "java.lang.Exception", "User not authorized to access " + what)
                if kind == "read":
                    value = self._read(req)
                elif kind == "exec":
                    value = self._exec(req)
                elif kind == "write":
                    return self._err(echo, 400, "java.lang.IllegalArgumentException", "attribute is read-only")
                else:
                    return self._err(echo, 400, "java.lang.IllegalArgumentException", f"No type {kind}")
        except _JErr as e:
            return self._err(echo, e.status, e.etype, e.msg)
        return {"request": echo, "value": value, "status": 200, "timestamp": int(self.now)}

    @staticmethod
    def _err(echo: dict, status: int, etype: str, msg: str) -> dict:
        return {"request": echo, "error_type": etype, "error": f"{etype} : {msg}", "status": status}

    def _lookup(self, mbean: str) -> tuple[str, Any]:
        try:
            key = canonical(mbean)
        except objectname.ObjectNameError:
            raise _JErr(400, "javax.management.MalformedObjectNameException", "bad name " + mbean) from None
        reg = self.mbeans()
        if key not in reg:
            raise _JErr(404, "javax.management.InstanceNotFoundException", mbean)
        return reg[key]

    def _read(self, req: dict) -> Any:
        attr = req.get("attribute")
        mbean = req["mbean"]
        if _is_pattern(mbean):
            matched = {n: kv for n, kv in self.mbeans().items() if _pattern_match(mbean, n)}
            if not matched:
                raise _JErr(404, "javax.management.InstanceNotFoundException",
                            f"No MBean with pattern {mbean} found for reading attributes")
            out = {}
            for n, (kind, ref) in matched.items():
                val = self._value_of(kind, ref)
                if attr is None:
                    out[n] = val
                else:
                    names = [attr] if isinstance(attr, str) else attr
                    # Jolokia skips attributes a matched MBean does not have.
                    sub = {a: val[a] for a in names if a in val}
                    if sub:
                        out[n] = sub
            if not out:  # Jolokia's ReadHandler: MBeans matched, none has any of the attributes
                raise _JErr(400, "java.lang.IllegalArgumentException",
                            f"No matching attributes {attr} found on MBeans {sorted(matched)}")
            return out
        kind, ref = self._lookup(mbean)
        val = self._value_of(kind, ref)
        if attr is None:
            return val
        if isinstance(attr, str):
            if attr not in val:
                raise _JErr(404, "javax.management.AttributeNotFoundException", "No such attribute: " + attr)
            return val[attr]
        for a in attr:
            if a not in val:  # one unknown name fails the whole list read
                raise _JErr(404, "javax.management.AttributeNotFoundException", "No such attribute: " + a)
        return {a: val[a] for a in attr}

    def _conn(self, name: str) -> dict:
        for c in self.connections:
            if c["Name"] == name:
                return c
        raise _JErr(400, "java.lang.IllegalArgumentException", f"broker connection {name} not found")

    def _exec(self, req: dict) -> Any:
        kind, ref = self._lookup(req["mbean"])
        op = req["operation"]
        args = req.get("arguments") or []
        name, _, sig = op.partition("(")
        overloaded = {("queue", "pause"), ("address", "pause")}
        if (kind, name) in overloaded and not sig:
            raise _JErr(400, "java.lang.IllegalArgumentException",
                        "Operation pause on MBean {} is overloaded. Signatures found: ),(boolean). Use a signature "
                        "when specifying the operation.".format(canonical(req["mbean"])))
        if kind == "broker":
            if name == "listBrokerConnections":
                rows = []
                for c in self.connections:
                    row = {"name": c["Name"], "protocol": "AMQP", "started": c["Started"]}
                    if self.has("2.39.0"):
                        row.update({"uri": c.get("Uri"), "connected": c.get("Connected")})
                    rows.append(row)
                return json.dumps(rows)
            if name == "listQueues":
                opts = json.loads(args[0]) if args and args[0] else {}
                rows = []
                for q in self.queues:
                    if q["Name"].startswith("$ACTIVEMQ_ARTEMIS_MIRROR_") and not self.has("2.32.0"):
                        continue  # like the lab: no SNF queue in the management view before 2.32
                    if opts.get("value") and opts.get("operation") == "CONTAINS" and opts["value"] not in q["Name"]:
                        continue
                    v = self._value_of("queue", q)
                    # every field is a string, like real Artemis (recorded 67-exec-listQueues-sig.json)
                    rows.append({"name": q["Name"], "address": q["Address"], "routingType": v["RoutingType"],
                                 "messageCount": str(v["MessageCount"]), "deliveringCount": str(v["DeliveringCount"]),
                                 "consumerCount": str(v["ConsumerCount"]), "messagesAdded": str(v["MessagesAdded"]),
                                 "messagesAcked": str(v["MessagesAcknowledged"]),
                                 "paused": str(v["Paused"]).lower(), "persistedPause": str(v["PersistedPause"]).lower(),
                                 "temporary": str(v["Temporary"]).lower(), "durable": str(v["Durable"]).lower(),
                                 "internalQueue": str(v["InternalQueue"]).lower()})
                page, size = (args[1], args[2]) if len(args) >= 3 else (1, 100)
                return json.dumps({"data": rows[(page - 1) * size:page * size], "count": len(rows)})
            if name in ("startBrokerConnection", "stopBrokerConnection"):
                if len(args) != 1:
                    raise _JErr(400, "java.lang.IllegalArgumentException", "Invalid number of operation arguments.")
                c = self._conn(args[0])
                c["Started"] = c["Connected"] = name == "startBrokerConnection"
                return None
        if kind == "bconn" and name in ("start", "stop"):
            ref["Started"] = ref["Connected"] = name == "start"
            return None
        if kind == "acceptor" and name in ("start", "stop"):
            self.acceptors[ref]["Started"] = name == "start"
            return None
        if kind == "queue":
            if name == "pause":
                ref["Paused"] = True
                ref["PersistedPause"] = bool(args and args[0])
                return None
            if name == "resume":
                ref["Paused"] = False
                ref["PersistedPause"] = False
                return None
        if kind == "address":
            if name == "pause":
                self.addresses[ref]["Paused"] = True
                return None
            if name == "resume":
                self.addresses[ref]["Paused"] = False
                return None
            if name in ("block", "unblock"):
                # Real 2.44: returns true and changes no readable attribute (only a log line).
                (self.blocked.add if name == "block" else self.blocked.discard)(ref)
                return True
        raise _JErr(400, "java.lang.IllegalArgumentException",
                    "No operation {} found on MBean {}".format(name, canonical(req["mbean"])))


class _JErr(Exception):
    def __init__(self, status: int, etype: str, msg: str):
        super().__init__(msg)
        self.status, self.etype, self.msg = status, etype, msg


class FakeTransport:
    """Transport for JolokiaClient that hands the raw body to a FakeArtemis."""

    def __init__(self, broker: FakeArtemis):
        self.broker = broker
        self.last_used = 0.0
        self.fresh_requests = 0

    def post(self, body: bytes, headers: dict, fresh: bool = False):
        if fresh:
            self.fresh_requests += 1
        return self.broker.handle_http(body, headers)

    def close(self) -> None:
        pass


def make_client(broker: FakeArtemis, **kw) -> jolokia.JolokiaClient:
    kw.setdefault("username", "admin")
    kw.setdefault("password", "secret")
    kw.setdefault("sleep", lambda s: None)
    return jolokia.JolokiaClient(broker.url, transport=FakeTransport(broker), **kw)


class Sites:
    """Registry of fake brokers by URL, installed in place of HttpTransport."""

    def __init__(self):
        self.by_url: dict[str, FakeArtemis] = {}

    def add(self, fixture: dict | str, url: str, **changes) -> FakeArtemis:
        b = FakeArtemis(fixture, url)
        host = url.split("//", 1)[1].split("/", 1)[0]
        b.allowed_origins = ["http://" + host]
        for k, v in changes.items():
            setattr(b, k, v)
        self.by_url[url.rstrip("/")] = b
        return b

    def transport(self, url, timeout=None, validate_certs=True, ca_path=None):
        try:
            return FakeTransport(self.by_url[url.rstrip("/")])
        except KeyError:
            raise jolokia.ConnectionFailed(f"Connection refused by {url} (no fake broker there)") from None


@pytest.fixture
def jolokia_sites(monkeypatch):
    sites = Sites()
    monkeypatch.setattr(jolokia, "HttpTransport", sites.transport)
    return sites


class FakeTime:
    """Stand-in for the ``time`` module: ``sleep`` advances the clock instead of waiting."""

    def __init__(self, start: float = 1_795_314_000.0):
        self.now = start
        self.mono = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep = None  # callback(seconds) to change broker state between samples

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.mono

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        self.mono += seconds
        if self.on_sleep:
            self.on_sleep(seconds)


@pytest.fixture
def fake_time(monkeypatch):
    """Replace ``time`` in site_state, gates and the modules that sample (mirror_info, mirror_wait)."""
    import importlib

    ft = FakeTime()
    for mod in ("plugins.module_utils.site_state", "plugins.module_utils.gates", "plugins.modules.mirror_info",
                "plugins.modules.mirror_wait", "plugins.module_utils.jolokia"):
        try:
            m = importlib.import_module("ansible_collections.continuity.artemis." + mod)
        except ImportError:
            continue
        monkeypatch.setattr(m, "time", ft)
    return ft


# ------------------------------------------------------------------------------------------ module runs
class ModuleExit(Exception):
    def __init__(self, result: dict, failed: bool):
        super().__init__(result.get("msg", ""))
        self.result = result
        self.failed = failed


def run_module(module, args: dict, check_mode: bool = False, diff: bool = False) -> ModuleExit:
    """Run an Ansible module's main() with ``args``; return the ModuleExit carrying its result."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    full = dict(args)
    full["_ansible_check_mode"] = check_mode
    full["_ansible_diff"] = diff

    # Collect module.warn() here: whether ansible-core queues or displays a warning depends on global state other
    # tests may have set up (controller display), so the real mechanism is not reliable inside one process.
    collected: list[str] = []

    def warn(self, warning, *args, **kwargs):
        collected.append(str(warning))

    def _collect(kwargs):
        if collected:
            kwargs.setdefault("warnings", list(collected))
        return kwargs

    def exit_json(self, **kwargs):
        raise ModuleExit(_collect(kwargs), False)

    def fail_json(self, **kwargs):
        kwargs["failed"] = True
        raise ModuleExit(_collect(kwargs), True)

    orig_exit, orig_fail, orig_warn = (basic.AnsibleModule.exit_json, basic.AnsibleModule.fail_json,
                                       basic.AnsibleModule.warn)
    basic.AnsibleModule.exit_json = exit_json
    basic.AnsibleModule.fail_json = fail_json
    basic.AnsibleModule.warn = warn
    try:
        with patch_module_args(full):
            try:
                module.main()
            except ModuleExit as e:
                return e
    finally:
        basic.AnsibleModule.exit_json = orig_exit
        basic.AnsibleModule.fail_json = orig_fail
        basic.AnsibleModule.warn = orig_warn
    raise AssertionError("module returned without exit_json/fail_json")


@pytest.fixture
def recorded_capture():
    """Read a recorded real-Artemis exchange by file name (fails when it is missing: `make record`)."""
    return recorded


class FakeClock:
    """A monotonic clock that moves only when the code under test sleeps (``sleeps`` lists each sleep)."""

    def __init__(self):
        self.t = 0.0
        self.sleeps = []

    def __call__(self):
        return self.t

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.t += seconds


@pytest.fixture
def fake_clock():
    return FakeClock()


@pytest.fixture
def jfake():
    """The helpers of this file for test modules (conftest files are not importable by name)."""
    import types

    return types.SimpleNamespace(FakeArtemis=FakeArtemis, FakeTransport=FakeTransport, make_client=make_client,
                                 load_fixture=load_fixture, run_module=run_module, ModuleExit=ModuleExit,
                                 Sites=Sites, canonical=canonical)
