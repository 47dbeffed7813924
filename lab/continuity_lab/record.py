"""Record raw Jolokia exchanges of the project's own lab (two real Artemis brokers) for the unit tests.

`python -m continuity_lab.record` (what `make record` runs) starts a PRIVATE lab (its own LAB_ROOT in a temporary
directory, LAB_PORT_BASE=auto: a lab someone else runs is never touched), drives it through the states the
scenarios need (steady mirror; the dc1->dc2 mirror link cut with the WAN emulator while messages are sent, so the
SNF backlog grows; the link restored; one message with a creation time sitting in 'orders') and, per scenario,
sends ONE raw HTTP request with http.client (not the collection's JolokiaClient: the point is the broker's own
status line, headers and body, refusals included). Each exchange becomes one JSON file in --out:

    scenario, group, artemis_version, http{method,url,path,headers,auth,body},
    response{status_code,reason,headers,body_kind,body}, elapsed_ms, captured_at, notes

Written only after every scenario was recorded (a failed run leaves the folder as it was), with a README.md that
lists them. What is neutralised: the Authorization value (null; the password is never written), Set-Cookie
values, the private lab's directory (`<lab_root>`) and the checkout (`<repo>`), and the lab's random port block
(mapped to the default block, LAB_PORT_BASE=20000, so recordings do not change with the ports a run got). The
run aborts if a lab password or credential appears in a file.

Options: --version (LAB_ARTEMIS_VERSION, 2.44.0), --out (tests/unit/fixtures/recorded/<version>), --lab-root
(use this root instead of a temporary one; a lab already up there is used and left running), --keep-lab, --list.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from continuity_lab import labctl, waiting, wan

REPO = labctl.REPO
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "recorded"
NEUTRAL_PORT_BASE = 20000  # the lab's default block (docs/lab.md): recorded ports are mapped onto it
DOMAIN = "org.apache.activemq.artemis"
BROKER = f'{DOMAIN}:broker="dc1"'
SNF = "$ACTIVEMQ_ARTEMIS_MIRROR_DC2"  # dc1's store-and-forward queue of its mirror connection DC2


def queue_mbean(broker: str, address: str, queue: str | None = None, routing: str = "anycast") -> str:
    return (f'{DOMAIN}:broker="{broker}",component=addresses,address="{address}",subcomponent=queues,'
            f'routing-type="{routing}",queue="{queue or address}"')


LIST_QUEUES_OPTIONS = json.dumps({"field": "", "operation": "", "value": "", "sortField": "name",
                                  "sortOrder": "asc"}, separators=(",", ":"))
EVIL_ORIGIN = "http://evil.example.com"

# Phases, in the order the recorder drives the lab through them.
STEADY, OUTAGE, AGED, IDLE = "steady", "outage", "aged", "idle"
PHASES = (STEADY, OUTAGE, AGED, IDLE)


@dataclass(frozen=True)
class Scenario:
    """One recorded exchange: the file `<name>.json`, sent to dc1 in `phase` as `auth` with `origin`."""

    name: str
    group: str
    title: str
    body: Any
    phase: str = IDLE
    auth: str = "admin"  # admin | wrong-password | no-role
    origin: str | None = "site"  # "site" = the broker's own http://host:port (allowed), None = no Origin header
    notes: tuple[str, ...] = ()


G_SEARCH = "c. search"
G_MIRROR = "f. mirror SNF queue, dc2 outage and recovery"
G_BCONN = "g. broker-connection stop/start"
G_CONTROL = "h. address / queue / acceptor control"
G_LIST = "i. listQueues / countMessages"
G_ERRORS = "k. error shapes"

_VERSION = {"type": "read", "mbean": BROKER, "attribute": "Version"}
_NOPE = queue_mbean("dc1", "nope")
_ORDERS = queue_mbean("dc1", "orders")

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("10-search-queues", G_SEARCH,
             f"search with the narrower queue pattern {DOMAIN}:broker=\"dc1\",component=addresses,address=*,"
             "subcomponent=queues,*",
             {"type": "search", "mbean": f'{BROKER},component=addresses,address=*,subcomponent=queues,*'},
             STEADY),
    Scenario("21-snf-steady-all", G_MIRROR,
             f"read of the SNF queue {SNF} on dc1, all attributes, steady state (dc2 up, mirror connected)",
             {"type": "read", "mbean": queue_mbean("dc1", SNF)}, STEADY),
    Scenario("23-snf-outage-all", G_MIRROR,
             f"read of {SNF} (all attributes) while the dc1->dc2 mirror link is cut by the WAN emulator, after 5 "
             "durable sends to 'orders' on dc1",
             {"type": "read", "mbean": queue_mbean("dc1", SNF)}, OUTAGE),
    Scenario("26-list-bconns-down-post", G_MIRROR,
             "exec listBrokerConnections() on dc1 while its mirror link to dc2 is cut (POST); the value is a JSON "
             "*string*",
             {"type": "exec", "mbean": BROKER, "operation": "listBrokerConnections()"}, OUTAGE),
    Scenario("36-orders-firstmessageage-ms", G_MIRROR,
             "dc1 'orders' [MessageCount, FirstMessageAge, FirstMessageTimestamp] 1.5 s after sending ONE message "
             "that has an AMQP creation-time (after draining the queue)",
             {"type": "read", "mbean": _ORDERS,
              "attribute": ["MessageCount", "FirstMessageAge", "FirstMessageTimestamp"]}, AGED),
    Scenario("49-exec-stopBrokerConnection-unknown", G_BCONN,
             "exec stopBrokerConnection(\"NOPE\") (name that does not exist)",
             {"type": "exec", "mbean": BROKER, "operation": "stopBrokerConnection", "arguments": ["NOPE"]}),
    Scenario("54-exec-queue-pause-nosig", G_CONTROL,
             "exec 'pause' on the queue without a signature: pause is overloaded (pause(), pause(boolean)) -> error",
             {"type": "exec", "mbean": _ORDERS, "operation": "pause"}),
    Scenario("67-exec-listQueues-sig", G_LIST,
             f"exec listQueues(java.lang.String,int,int) with options {LIST_QUEUES_OPTIONS}, page 1, pageSize 50; "
             "the value is a JSON *string* {\"data\":[...],\"count\":N}",
             {"type": "exec", "mbean": BROKER, "operation": "listQueues(java.lang.String,int,int)",
              "arguments": [LIST_QUEUES_OPTIONS, 1, 50]}),
    Scenario("78-err-no-origin-post", G_ERRORS,
             "POST read without an Origin header (jolokia-access.xml <strict-checking/>)", _VERSION, origin=None),
    Scenario("80-err-bad-origin", G_ERRORS, f"POST read with a disallowed Origin {EVIL_ORIGIN}", _VERSION,
             origin=EVIL_ORIGIN),
    Scenario("81-err-wrong-password", G_ERRORS, "POST read with a wrong password", _VERSION, auth="wrong-password"),
    Scenario("84-err-norole-read", G_ERRORS,
             "read broker Version as a user with a valid login but no console role", _VERSION, auth="no-role"),
    Scenario("85-err-norole-exec", G_ERRORS, "exec listBrokerConnections() as the user without the console role",
             {"type": "exec", "mbean": BROKER, "operation": "listBrokerConnections()"}, auth="no-role"),
    Scenario("88-err-unknown-mbean", G_ERRORS, "read of an MBean that does not exist (queue 'nope')",
             {"type": "read", "mbean": _NOPE}),
    Scenario("91-err-unknown-attribute-in-list", G_ERRORS,
             "read of an attribute list containing one unknown attribute",
             {"type": "read", "mbean": BROKER, "attribute": ["Version", "NoSuchAttr"]}),
    Scenario("92-err-unknown-operation", G_ERRORS, "exec of an unknown operation noSuchOp()",
             {"type": "exec", "mbean": BROKER, "operation": "noSuchOp()"}),
    Scenario("95-err-wrong-arg-type", G_ERRORS,
             "exec listQueues(java.lang.String,int,int) with a non-numeric page number",
             {"type": "exec", "mbean": BROKER, "operation": "listQueues(java.lang.String,int,int)",
              "arguments": [LIST_QUEUES_OPTIONS, "abc", 50]}),
    Scenario("96-err-bulk-mixed", G_ERRORS,
             "bulk POST array: valid read, unknown MBean read, valid exec (per-item statuses, HTTP 200 overall)",
             [_VERSION, {"type": "read", "mbean": _NOPE, "attribute": "MessageCount"},
              {"type": "exec", "mbean": _ORDERS, "operation": "countMessages()"}]),
    Scenario("98-err-unknown-type", G_ERRORS, "POST with an unknown request type",
             {"type": "frobnicate", "mbean": BROKER}),
    Scenario("99-err-exec-with-error", G_ERRORS,
             "exec that throws inside Artemis: destroyQueue(java.lang.String) of a queue that does not exist",
             {"type": "exec", "mbean": BROKER, "operation": "destroyQueue(java.lang.String)",
              "arguments": ["no-such-queue"]}),
)


def scenario_files() -> list[str]:
    return sorted(f"{s.name}.json" for s in SCENARIOS)


# --- the lab ------------------------------------------------------------------------------------------------------
@dataclass
class LabAccess:
    """What the recorder needs of a running lab (its endpoints.json)."""

    endpoints: dict[str, Any]
    base: int
    notes: dict[str, list[str]] = field(default_factory=dict)  # phase -> what was done to reach it

    @property
    def root(self) -> str:
        return self.endpoints["lab_root"]

    def site(self, site: str) -> dict[str, Any]:
        return self.endpoints["sites"][site]

    def credentials(self, auth: str) -> tuple[str, str] | None:
        creds = self.site("dc1")
        if auth == "admin":
            return creds["credentials"]["user"], creds["credentials"]["password"]
        if auth == "wrong-password":
            return creds["credentials"]["user"], "not-the-" + creds["credentials"]["password"]
        if auth == "no-role":
            # The lab's mirror user: a valid login whose role ('mirror') is not in HAWTIO_ROLES (the console role).
            return creds["mirror_credentials"]["user"], creds["mirror_credentials"]["password"]
        return None

    def secrets(self) -> list[str]:
        out = []
        for info in self.endpoints["sites"].values():
            for key in ("credentials", "mirror_credentials"):
                user, password = info[key]["user"], info[key]["password"]
                out += [password, base64.b64encode(f"{user}:{password}".encode()).decode()]
        return out


def post(url: str, body: bytes, headers: list[tuple[str, str]], timeout: float = 10.0
         ) -> tuple[int, str, list[tuple[str, str]], bytes, float]:
    """One raw POST: exactly the headers given (no Host or Accept-Encoding added), one connection."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        started = time.monotonic()
        conn.putrequest("POST", parts.path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers:
            conn.putheader(k, v)
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, resp.reason, resp.getheaders(), data, (time.monotonic() - started) * 1000.0
    finally:
        conn.close()


def request_headers(url: str, body: bytes, origin: str | None, creds: tuple[str, str] | None
                    ) -> list[tuple[str, str]]:
    headers = [("Host", urlsplit(url).netloc)]
    if creds:
        headers.append(("Authorization", "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()))
    if origin:
        headers.append(("Origin", origin))
    return [*headers, ("Content-Type", "application/json"), ("Content-Length", str(len(body)))]


def jolokia(lab: LabAccess, site: str, payload: Any) -> Any:
    """A helper read as the lab admin (not recorded): the decoded JSON, or an exception."""
    info = lab.site(site)
    url = info["jolokia_url"].rstrip("/") + "/"
    body = json.dumps(payload).encode()
    status, _, _, data, _ = post(url, body, request_headers(url, body, info["jolokia_origin"],
                                                            lab.credentials("admin")))
    if status != 200:
        raise RuntimeError(f"{site}: HTTP {status} for {payload}")
    doc = json.loads(data)
    if isinstance(doc, dict) and doc.get("status") != 200:
        raise RuntimeError(f"{site}: {doc.get('error')}")
    return doc["value"] if isinstance(doc, dict) else doc


def wait(what: str, predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    try:
        return waiting.until(what, predicate, timeout)
    except waiting.TimedOut as exc:
        raise SystemExit(f"record: {exc}") from None


def snf(lab: LabAccess) -> dict[str, Any]:
    return jolokia(lab, "dc1", {"type": "read", "mbean": queue_mbean("dc1", SNF),
                                "attribute": ["MessageCount", "ConsumerCount"]})


def mirror_connected(lab: LabAccess) -> bool:
    rows = json.loads(jolokia(lab, "dc1", {"type": "exec", "mbean": BROKER, "operation": "listBrokerConnections()"}))
    return any(r.get("name") == "DC2" and r.get("connected") for r in rows)


# --- AMQP (python-qpid-proton, the collection's amqp helpers) ------------------------------------------------------
def _connection(lab: LabAccess, site: str) -> Any:
    from proton.utils import BlockingConnection

    info = lab.site(site)
    user, password = lab.credentials("admin") or ("", "")
    return BlockingConnection(info["amqp_url"], timeout=20, user=user, password=password,
                              allowed_mechs="PLAIN", sasl_enabled=True)


def send(lab: LabAccess, site: str, address: str, count: int, creation_time: bool) -> None:
    """Durable sends, each settled by the broker; without creation_time the AMQP creation-time is left unset."""
    from proton import Message

    from ansible_collections.continuity.artemis.plugins.module_utils import amqp

    conn = _connection(lab, site)
    try:
        sender = conn.create_sender(address)
        for i in range(count):
            msg_id = f"record-{address}-{int(time.time() * 1000)}-{i}"
            if creation_time:
                msg = amqp.make_message(f"recorded {i}", msg_id, durable=True)
            else:
                msg = Message(body=f"recorded {i}", id=msg_id, durable=True)
            sender.send(msg)
    finally:
        conn.close()


def drain(lab: LabAccess, site: str, address: str) -> int:
    from proton import Timeout

    conn = _connection(lab, site)
    n = 0
    try:
        receiver = conn.create_receiver(address, credit=10)
        while True:
            try:
                receiver.receive(timeout=2)
            except Timeout:  # nothing more in the queue
                break
            receiver.accept()
            n += 1
    finally:
        conn.close()
    return n


# --- driving the lab through the phases ---------------------------------------------------------------------------
def enter(lab: LabAccess, phase: str) -> list[str]:
    """Bring the lab into `phase` (from the previous one); returns notes for the recordings of that phase."""
    link = lab.endpoints["wan"]["dc1-dc2"]["control_url"]
    if phase == STEADY:
        wait("dc1 mirror DC2 connected", lambda: mirror_connected(lab))
        wait("dc1 SNF drained and consumed", lambda: (s := snf(lab))["MessageCount"] == 0 and s["ConsumerCount"] == 1)
        return ["dc1's mirror connection DC2 connected through the WAN link dc1-dc2, SNF queue empty"]
    if phase == OUTAGE:
        wan.control(link, "cut")
        wait("dc1 mirror DC2 disconnected", lambda: not mirror_connected(lab))
        send(lab, "dc1", "orders", 5, creation_time=False)
        wait("5 messages in dc1's SNF queue, no consumer",
             lambda: (s := snf(lab))["MessageCount"] == 5 and s["ConsumerCount"] == 0)
        return ["WAN link dc1-dc2 (the mirror of dc1 into dc2) cut with the WAN emulator "
                "(continuity_lab.wan control 'cut'); dc1 saw DC2 connected=false",
                "then 5 durable AMQP messages (python-qpid-proton, no creation_time set) sent to 'orders' on dc1, "
                "all settled by dc1; the SNF queue held 5 messages"]
    if phase == AGED:
        wan.control(link, "restore")
        wait("dc1 mirror DC2 reconnected", lambda: mirror_connected(lab))
        wait("dc1 SNF drained after the restore", lambda: (s := snf(lab))["MessageCount"] == 0
             and s["ConsumerCount"] == 1)
        drained = drain(lab, "dc1", "orders")
        wait("dc1 SNF drained after the acks", lambda: snf(lab)["MessageCount"] == 0)
        send(lab, "dc1", "orders", 1, creation_time=True)
        time.sleep(1.5)
        return ["WAN link dc1-dc2 restored, DC2 reconnected and the SNF backlog forwarded",
                f"drained {drained} messages from dc1 'orders' first (acks mirrored to dc2)",
                "then ONE durable message sent with creation_time=time.time() (continuity amqp.make_message) and "
                "read about 1.5 s later: FirstMessageAge is therefore ~1500 (milliseconds)"]
    return []


def exchange(lab: LabAccess, sc: Scenario, version: str, notes: list[str]) -> dict[str, Any]:
    info = lab.site("dc1")
    url = info["jolokia_url"].rstrip("/") + "/"
    body = json.dumps(sc.body).encode()
    origin = info["jolokia_origin"] if sc.origin == "site" else sc.origin
    creds = lab.credentials(sc.auth)
    status, reason, headers, data, elapsed = post(url, body, request_headers(url, body, origin, creds))
    text = data.decode("utf-8", "replace")
    try:
        parsed, kind = json.loads(text), "json"
    except ValueError:
        parsed, kind = text, "text"
    resp_headers: dict[str, Any] = {}
    for k, v in headers:
        value = None if k.lower() == "set-cookie" else v  # a session cookie is a credential: value dropped
        resp_headers[k] = value if k not in resp_headers or value is None else f"{resp_headers[k]}, {value}"
    who = {"admin": f"user '{creds[0]}'" if creds else "",
           "wrong-password": f"user '{creds[0]}' with a WRONG password" if creds else "",
           "no-role": (f"user '{creds[0]}' (the lab's mirror user: valid login, role 'mirror' is not in "
                       "HAWTIO_ROLES)") if creds else ""}[sc.auth]
    return {
        "scenario": sc.title,
        "group": sc.group,
        "artemis_version": version,
        "http": {
            "method": "POST",
            "url": url,
            "path": urlsplit(url).path,
            "headers": {k: (None if k == "Authorization" else v) for k, v in request_headers(url, body, origin, creds)},
            "auth": f"HTTP Basic, {who} (Authorization value dropped)",
            "body": sc.body,
        },
        "response": {"status_code": status, "reason": reason, "headers": resp_headers, "body_kind": kind,
                     "body": parsed},
        "elapsed_ms": round(elapsed, 1),
        "captured_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "notes": [*notes, *sc.notes],
    }


def neutralise(doc: dict[str, Any], lab: LabAccess) -> dict[str, Any]:
    """Machine-specific strings out (lab directory, checkout, the run's port block); no secret may remain."""
    text = json.dumps(doc)
    for path, placeholder in ((lab.root, "<lab_root>"), (str(REPO), "<repo>")):
        text = text.replace(path, placeholder)
    if lab.base != NEUTRAL_PORT_BASE:
        for port in labctl.block_ports(lab.base):
            for host in ("127.0.0.1", "localhost"):
                text = text.replace(f"{host}:{port}", f"{host}:{port - lab.base + NEUTRAL_PORT_BASE}")
    for secret in lab.secrets():
        if secret in text:
            raise SystemExit("record: a lab credential would be written into a recording; nothing was written")
    return json.loads(text)


def record(lab: LabAccess, version: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for phase in PHASES:
        todo = [s for s in SCENARIOS if s.phase == phase]
        if not todo:
            continue
        notes = enter(lab, phase)
        for sc in todo:
            out[sc.name] = neutralise(exchange(lab, sc, version, notes), lab)
            print(f"  {sc.name}: HTTP {out[sc.name]['response']['status_code']}", flush=True)
    return out


# --- output -------------------------------------------------------------------------------------------------------
def readme(captures: dict[str, dict[str, Any]], version: str, started: str, ended: str) -> str:
    rows = "\n".join(f"| `{name}.json` | {c['group']} | {c['scenario'].replace('|', '/')} | "
                     f"{c['response']['status_code']} | {_jolokia_status(c['response']['body'])} |"
                     for name, c in sorted(captures.items()))
    return f"""# Recorded Jolokia exchanges of the project's lab (Apache Artemis {version})

Recorded by `make record` (`python -m continuity_lab.record`, lab/continuity_lab/record.py)
from {started} to {ended} (UTC),
against a private lab the recorder started and stopped itself: two real Apache Artemis {version} brokers
(`dc1`, `dc2`) deployed by the collection's own roles (`playbooks/deploy.yml`, `inventories/lab`: login required,
admin role `amq`, mirror user `mirror`, queues DLQ/ExpiryQueue/orders, the continuity plugin, dc1 active and dc2
passive) with the dual AMQP mirror through the lab's WAN emulator. Every request went to dc1's stock web
console (`/console/jolokia`, Jolokia with the instance's JAAS realm) as ONE raw HTTP POST (http.client), so status
line, headers and body are the broker's own, refusals included.

Each file: `scenario`, `group`, `artemis_version`, `http` (method, url, path, headers, auth, body),
`response` (status_code, reason, headers, body_kind `json`|`text`, body), `elapsed_ms`, `captured_at`, `notes`
(how the lab was brought into the state the request saw).

Neutralised: the Authorization header value (null; no password is ever written, the recorder aborts if a lab
credential appears), Set-Cookie values (null), the private lab directory (`<lab_root>`) and the checkout
(`<repo>`), and the run's random port block (LAB_PORT_BASE=auto) mapped onto the default block 20000 (dc1 http
20161, WAN link into dc2 20901, ...; docs/lab.md).

The no-role scenarios log in as the lab's mirror user (valid login, role `mirror`, not in HAWTIO_ROLES).

Used by tests/unit/plugins/module_utils/test_jolokia_recorded.py and test_objectname.py (through
`recorded()` in tests/unit/conftest.py); tests/unit/lab/test_recorder.py checks that this folder holds exactly
the recorder's scenarios. Re-record with `make record` (RECORD_VERSION={version}); never edit the files by hand.

| file | group | scenario | HTTP | Jolokia status |
|---|---|---|---|---|
{rows}
"""


def _jolokia_status(body: Any) -> str:
    if isinstance(body, dict):
        return str(body.get("status", "-"))
    if isinstance(body, list):
        return ", ".join(str(item.get("status", "-")) for item in body if isinstance(item, dict))
    return "- (not JSON)"


def write(out_dir: Path, captures: dict[str, dict[str, Any]], text: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = {f"{name}.json" for name in captures}
    for stale in out_dir.glob("*.json"):
        if stale.name not in wanted:
            stale.unlink()
    for name, doc in captures.items():
        tmp = out_dir / f".{name}.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        tmp.replace(out_dir / f"{name}.json")
    (out_dir / "README.md").write_text(text)


# --- command line -------------------------------------------------------------------------------------------------
def _lab_is_up(root: Path) -> bool:
    state = labctl._load_state(root)
    brokers = [p for p in state.get("processes", []) if p["kind"] == "broker"]
    return (root / "endpoints.json").exists() and len(brokers) == 2 and all(labctl._alive(p["pid"]) for p in brokers)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m continuity_lab.record", description=__doc__.splitlines()[0])
    p.add_argument("--version", default=os.environ.get("LAB_ARTEMIS_VERSION") or labctl.DEFAULT_VERSION)
    p.add_argument("--out", type=Path, help="default tests/unit/fixtures/recorded/<version>")
    p.add_argument("--lab-root", type=Path, help="lab root to use (default: a new temporary directory)")
    p.add_argument("--keep-lab", action="store_true", help="leave a lab the recorder started running")
    p.add_argument("--list", action="store_true", help="print the scenario files and exit")
    p.add_argument("--timeout", type=float, default=900, help="lab-up timeout (s)")
    args = p.parse_args(argv)
    if args.list:
        print("\n".join(scenario_files()))
        return 0
    out_dir = args.out or FIXTURES / args.version
    root = (args.lab_root or Path(tempfile.mkdtemp(prefix="continuity-record-"))).absolute()
    started_here = not _lab_is_up(root)
    env = {**os.environ, "LAB_ROOT": str(root), "LAB_ARTEMIS_VERSION": args.version,
           "LAB_PORT_BASE": os.environ.get("RECORD_PORT_BASE") or "auto"}
    plan = labctl.make_plan(env)
    t0 = time.monotonic()
    ok = False
    try:
        if started_here:
            print(f"record: starting a private lab (Artemis {args.version}) in {root}, port base {plan.base}",
                  flush=True)
            endpoints = labctl.up(plan, args.timeout)
        else:
            print(f"record: using the lab already up in {root}", flush=True)
            endpoints = json.loads((root / "endpoints.json").read_text())
        lab = LabAccess(endpoints, int(endpoints["port_base"]))
        version = endpoints["broker_version"]
        if version != args.version:
            raise SystemExit(f"record: the lab runs Artemis {version}, not {args.version}")
        print(f"record: lab up after {time.monotonic() - t0:.0f}s; recording {len(SCENARIOS)} scenarios", flush=True)
        started = datetime.now(UTC).isoformat(timespec="seconds")
        captures = record(lab, version)
        ended = datetime.now(UTC).isoformat(timespec="seconds")
        write(out_dir, captures, readme(captures, version, started, ended))
        ok = True
        print(f"record: {len(captures)} exchanges written to {out_dir} ({time.monotonic() - t0:.0f}s in all)")
    finally:
        if started_here and not args.keep_lab:
            for line in labctl.down(plan):
                print(f"record: stopped {line}", flush=True)
            if ok and args.lab_root is None:
                shutil.rmtree(root, ignore_errors=True)
            elif not ok:
                print(f"record: failed; lab logs kept in {root}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
