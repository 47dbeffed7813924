"""Two-site lab: `up` creates and starts dc1 and dc2 (dual mirror through one WAN link per direction) and writes
`<root>/endpoints.json`; `down` stops everything `up` started, by pid; `status` prints what runs.

Layout and ports follow inventories/lab (so playbooks/deploy.yml can take over instance creation later without
changing the endpoints file): LAB_ROOT (default build/lab), LAB_ARTEMIS_VERSION (2.44.0), LAB_DIST_DIR
(build/lab-dist), LAB_PORT_BASE (20000, or `auto` for free ports), LAB_WAN_LATENCY_MS (0).
Per site (dc2 = +100): http base+161, client acceptor `artemis` (CORE,AMQP) base+616, mirror acceptor `mirror`
(AMQP) base+617. WAN link into dc1: base+900, into dc2: base+901; their control endpoints base+910 / base+911.
See docs/lab.md.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from artemis_lab import dist, security, versions, wan

REPO = Path(__file__).resolve().parents[2]
SITES = ("dc1", "dc2")
ADMIN_USER, ADMIN_PASSWORD = "admin", "lab-admin-secret"
MIRROR_USER, MIRROR_PASSWORD, MIRROR_ROLE = "mirror", "lab-mirror-secret", "mirror"
ENDPOINTS_FORMAT = 1


@dataclass
class SitePorts:
    http: int
    client: int
    mirror: int


@dataclass
class Plan:
    root: Path
    version: str
    dist_dir: Path
    sites: dict[str, SitePorts]
    wan_listen: dict[str, int]  # target site -> port of the WAN link into it
    wan_control: dict[str, int]
    wan_latency_ms: float = 0.0  # initial one-way latency of both links (LAB_WAN_LATENCY_MS)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_plan(env: dict[str, str] | None = None) -> Plan:
    env = dict(os.environ if env is None else env)
    root = Path(env.get("LAB_ROOT") or REPO / "build" / "lab").absolute()
    version = env.get("LAB_ARTEMIS_VERSION") or versions.DEFAULT_VERSION
    dist_dir = Path(env.get("LAB_DIST_DIR") or REPO / "build" / "lab-dist").absolute()
    base_text = env.get("LAB_PORT_BASE") or "20000"
    if base_text == "auto":
        sites = {s: SitePorts(_free_port(), _free_port(), _free_port()) for s in SITES}
        listen = {s: _free_port() for s in SITES}
        ctl = {s: _free_port() for s in SITES}
    else:
        base = int(base_text)
        sites = {s: SitePorts(base + 161 + 100 * i, base + 616 + 100 * i, base + 617 + 100 * i)
                 for i, s in enumerate(SITES)}
        listen = {s: base + 900 + i for i, s in enumerate(SITES)}
        ctl = {s: base + 910 + i for i, s in enumerate(SITES)}
    return Plan(root, version, dist_dir, sites, listen, ctl, float(env.get("LAB_WAN_LATENCY_MS") or 0))


def _peer(site: str) -> str:
    return SITES[1 - SITES.index(site)]


# --- instance configuration ---------------------------------------------------------------------------------------
# The peer's mirror link gets the mirror acceptor's amqpCredits. Artemis' default 1000 keeps a 40 ms round trip
# full because Artemis handles a mirror event in microseconds; the lab needs ~10x longer per event, so with 1000 its
# window empties between credit refills and a WAN backlog drains several times slower than on Artemis. The same
# tuning an operator applies for a long fat WAN: a bigger window on the mirror acceptor (docs/lab.md). Measured
# over a 20 ms WAN: 1000 -> 6,800 events/s, 5000 -> 10,900, 20000 -> 7,700 (proton's work per frame grows with
# the deliveries in flight).
MIRROR_CREDITS = "amqpCredits=5000;amqpLowCredits=1500"


def _acceptor(name: str, port: int, protocols: str, credits: str = "amqpCredits=1000;amqpLowCredits=300") -> str:
    params = f"tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;protocols={protocols};useEpoll=true"
    params += f";{credits};amqpMinLargeMessageSize=102400;amqpDuplicateDetection=true"
    return f'         <acceptor name="{name}">tcp://127.0.0.1:{port}?{params}</acceptor>'


def configure_site(instance: Path, site: str, plan: Plan) -> None:
    """Rewrite the created broker.xml: client + separate mirror acceptor, orders queue, the mirror connection to
    the peer through the WAN link, and permissions for the mirror role."""
    ports, peer = plan.sites[site], _peer(site)
    xml_path = instance / "etc" / "broker.xml"
    xml = xml_path.read_text()
    acceptors = "\n".join([_acceptor("artemis", ports.client, "CORE,AMQP"),
                           _acceptor("mirror", ports.mirror, "AMQP", MIRROR_CREDITS)])
    xml = re.sub(r"<acceptors>.*?</acceptors>", f"<acceptors>\n{acceptors}\n      </acceptors>", xml, flags=re.S)
    xml = xml.replace('roles="amq"', f'roles="amq,{MIRROR_ROLE}"')
    orders = ('         <address name="orders">\n            <anycast>\n               <queue name="orders" />\n'
              "            </anycast>\n         </address>\n      </addresses>")
    xml = xml.replace("      </addresses>", orders, 1)
    connection = (
        "      <broker-connections>\n"
        f'         <amqp-connection uri="tcp://127.0.0.1:{plan.wan_listen[peer]}" name="{peer.upper()}" '
        f'user="{MIRROR_USER}" password="{security.encode_two_way(MIRROR_PASSWORD)}" retry-interval="1000" '
        'reconnect-attempts="-1">\n'
        "            <mirror/>\n"
        "         </amqp-connection>\n"
        "      </broker-connections>\n\n      <acceptors>"
    )
    xml = xml.replace("      <acceptors>", connection, 1)
    xml_path.write_text(xml)


# --- processes ----------------------------------------------------------------------------------------------------
def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _state_file(root: Path) -> Path:
    return root / "lab-state.json"


def _save_state(root: Path, state: dict[str, Any]) -> None:
    tmp = _state_file(root).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(_state_file(root))


def _jolokia(url: str, origin: str, payload: dict[str, Any]) -> Any:
    token = base64.b64encode(f"{ADMIN_USER}:{ADMIN_PASSWORD}".encode()).decode()
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Authorization": f"Basic {token}", "Origin": origin,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def _wait(what: str, predicate: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"lab-up: timed out after {timeout:.0f}s waiting for {what}")


def up(plan: Plan, timeout: float = 90) -> dict[str, Any]:
    root = plan.root
    endpoints_path = root / "endpoints.json"
    if _state_file(root).exists():
        old = json.loads(_state_file(root).read_text())
        if any(_alive(p.get("pid")) for p in old.get("processes", [])):
            raise SystemExit(f"lab is already up ({_state_file(root)}); run lab-down first")
    root.mkdir(parents=True, exist_ok=True)
    archive = dist.ensure(plan.dist_dir, plan.version)  # rebuilt when the lab sources are newer
    home_parent = root / "dist"
    shutil.rmtree(home_parent, ignore_errors=True)
    home = dist.extract(archive, home_parent)
    state: dict[str, Any] = {"processes": []}
    _save_state(root, state)
    endpoints_path.unlink(missing_ok=True)

    for site in SITES:
        instance, ports = root / site, plan.sites[site]
        shutil.rmtree(instance, ignore_errors=True)
        _run([str(home / "bin" / "artemis"), "create", str(instance), "--user", ADMIN_USER, "--password",
              ADMIN_PASSWORD, "--role", "amq", "--require-login", "--name", site, "--host", "127.0.0.1",
              "--http-host", "127.0.0.1", "--http-port", str(ports.http), "--default-port", str(ports.client),
              "--no-amqp-acceptor", "--no-mqtt-acceptor", "--no-stomp-acceptor", "--no-hornetq-acceptor",
              "--silent"])
        _run([str(instance / "bin" / "artemis"), "user", "add", "--user", MIRROR_USER, "--password",
              MIRROR_PASSWORD, "--role", MIRROR_ROLE])
        configure_site(instance, site, plan)

    wan_info = start_wan(plan, state)

    for site in SITES:
        instance = root / site
        _run([str(instance / "bin" / "artemis-service"), "start"])
        pid = int((instance / "data" / "artemis.pid").read_text().strip())
        state["processes"].append({"kind": "broker", "name": site, "pid": pid, "instance_dir": str(instance)})
        _save_state(root, state)

    endpoints = describe(plan, state, home, wan_info, timeout)
    tmp = endpoints_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(endpoints, indent=2) + "\n")
    tmp.replace(endpoints_path)
    return endpoints


def start_wan(plan: Plan, state: dict[str, Any]) -> dict[str, Any]:
    """Start one WAN link per direction (the mirror of `source` into `target` goes through it)."""
    root = plan.root
    wan_info: dict[str, Any] = {}
    for target in SITES:
        source = _peer(target)
        name = f"{source}-{target}"
        log = open(root / f"wan-{name}.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "artemis_lab.wan", "serve", "--name", name,
             "--target", f"127.0.0.1:{plan.sites[target].mirror}", "--listen", f"127.0.0.1:{plan.wan_listen[target]}",
             "--control", f"127.0.0.1:{plan.wan_control[target]}", "--state-file", str(root / f"wan-{name}.json"),
             "--latency", str(plan.wan_latency_ms)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        state["processes"].append({"kind": "wan", "name": name, "pid": proc.pid})
        _save_state(root, state)
        wan_info[name] = {"from": source, "to": target, "listen": f"127.0.0.1:{plan.wan_listen[target]}",
                          "target": f"127.0.0.1:{plan.sites[target].mirror}",
                          "control_url": f"http://127.0.0.1:{plan.wan_control[target]}", "pid": proc.pid}

    return wan_info


def describe(plan: Plan, state: dict[str, Any], home: Path, wan_info: dict[str, Any],
             timeout: float) -> dict[str, Any]:
    """Wait until both brokers answer and their mirrors are connected; the endpoints document."""
    root = plan.root
    sites: dict[str, Any] = {}
    for site in SITES:
        ports = plan.sites[site]
        origin = f"http://127.0.0.1:{ports.http}"
        url = f"{origin}/console/jolokia"
        bname = f'org.apache.activemq.artemis:broker="{site}"'
        _wait(f"{site} Jolokia", lambda u=url, o=origin, b=bname: _jolokia(
            u, o, {"type": "read", "mbean": b, "attribute": "Started"}).get("value") is True, timeout)
        sites[site] = {
            "broker_name": site,
            "jolokia_url": url,
            "jolokia_origin": origin,
            "amqp_url": f"amqp://127.0.0.1:{ports.client}",
            "credentials": {"user": ADMIN_USER, "password": ADMIN_PASSWORD},
            "mirror_credentials": {"user": MIRROR_USER, "password": MIRROR_PASSWORD},
            "acceptors": {"artemis": ports.client, "mirror": ports.mirror},
            "client_acceptors": ["artemis"],
            "mirror_acceptor": "mirror",
            "mirror_connection": _peer(site).upper(),
            "instance_dir": str(root / site),
            "pid": next(p["pid"] for p in state["processes"] if p["kind"] == "broker" and p["name"] == site),
        }
    for name, info in wan_info.items():
        _wait(f"mirror connection through {name}",
              lambda i=info: wan.control(i["control_url"], "status")["connections"] >= 1, timeout)
    if versions.has_broker_connection_mbean(plan.version):
        for site, info in sites.items():
            cname = (f'org.apache.activemq.artemis:broker="{site}",component=broker-connections,'
                     f'name="{info["mirror_connection"]}"')
            _wait(f"{site} mirror {info['mirror_connection']} Connected",
                  lambda i=info, c=cname: _jolokia(i["jolokia_url"], i["jolokia_origin"], {
                      "type": "read", "mbean": c, "attribute": "Connected"}).get("value") is True, timeout)

    endpoints = {
        "format": ENDPOINTS_FORMAT,
        "artemis_version": plan.version,
        "broker_version": plan.version + versions.LAB_SUFFIX,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "lab_root": str(root),
        "artemis_home": str(home),
        "sites": sites,
        "wan": wan_info,
    }
    return endpoints


def register(plan: Plan, timeout: float = 120) -> dict[str, Any]:
    """After playbooks/deploy.yml created and started the brokers: record their pids next to the WAN links
    (so lab-down stops them), wait for the mirrors, write endpoints.json."""
    root = plan.root
    state = json.loads(_state_file(root).read_text()) if _state_file(root).exists() else {"processes": []}
    state["processes"] = [p for p in state["processes"] if p["kind"] != "broker"]
    for site in SITES:
        instance = root / site
        pid_file = instance / "data" / "artemis.pid"
        if not pid_file.exists():
            raise SystemExit(f"{site}: no broker pid at {pid_file}: did playbooks/deploy.yml run with LAB_ROOT={root}?")
        state["processes"].append({"kind": "broker", "name": site, "pid": int(pid_file.read_text().strip()),
                                   "instance_dir": str(instance)})
    _save_state(root, state)
    wan_info = state.get("wan", {})
    homes = sorted((root / "dist").glob("lab-artemis-*")) if (root / "dist").exists() else []
    endpoints = describe(plan, state, homes[-1] if homes else root / "dist", wan_info, timeout)
    path = root / "endpoints.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(endpoints, indent=2) + "\n")
    tmp.replace(path)
    return endpoints


def wan_up(plan: Plan) -> dict[str, Any]:
    """Only the WAN links: the brokers are deployed by playbooks/deploy.yml (LAB_USE_WAN=true)."""
    root = plan.root
    root.mkdir(parents=True, exist_ok=True)
    state = json.loads(_state_file(root).read_text()) if _state_file(root).exists() else {"processes": []}
    if any(p["kind"] == "wan" and _alive(p.get("pid")) for p in state["processes"]):
        return state.get("wan", {})
    state["processes"] = [p for p in state["processes"] if p["kind"] != "wan"]
    state["wan"] = start_wan(plan, state)
    _save_state(root, state)
    return state["wan"]


def _stop_pid(pid: int, grace: float) -> None:
    if not _alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


def down(plan: Plan) -> list[str]:
    """Stops brokers (artemis-service stop, then the pid) and WAN links (pid); returns what was stopped."""
    state_path = _state_file(plan.root)
    state = json.loads(state_path.read_text()) if state_path.exists() else {"processes": []}
    stopped = []
    for proc in sorted(state.get("processes", []), key=lambda p: p["kind"] != "broker"):
        pid = proc.get("pid")
        if proc["kind"] == "broker" and _alive(pid):
            service = Path(proc["instance_dir"]) / "bin" / "artemis-service"
            if service.exists():
                subprocess.run([str(service), "stop"], capture_output=True, timeout=60)
        if _alive(pid):
            _stop_pid(pid, 10)
        stopped.append(f"{proc['kind']} {proc['name']} (pid {pid})")
    # A broker restarted after `up` (a failback after the failover drill) has a pid the state file does not
    # know: its instance's pid file does.
    for site in SITES:
        pid_file = plan.root / site / "data" / "artemis.pid"
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            continue
        if _alive(pid):
            subprocess.run([str(plan.root / site / "bin" / "artemis-service"), "stop"], capture_output=True,
                           timeout=60)
            _stop_pid(pid, 10)
            stopped.append(f"broker {site} (pid {pid}, restarted after lab-up)")
    state_path.unlink(missing_ok=True)
    (plan.root / "endpoints.json").unlink(missing_ok=True)
    return stopped


def status(plan: Plan) -> dict[str, Any]:
    state_path = _state_file(plan.root)
    procs = json.loads(state_path.read_text()).get("processes", []) if state_path.exists() else []
    return {"root": str(plan.root), "processes": [{**p, "alive": _alive(p.get("pid"))} for p in procs]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m artemis_lab.labctl", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["up", "down", "status", "wan-up", "register"])
    p.add_argument("--timeout", type=float, default=90)
    args = p.parse_args(argv)
    plan = make_plan()
    if args.command == "up":
        try:
            endpoints = up(plan, args.timeout)
        except BaseException:
            down(plan)  # leave nothing running behind a failed start
            raise
        print(f"lab up (lab broker emulating Artemis {plan.version}): {plan.root / 'endpoints.json'}")
        for site, info in endpoints["sites"].items():
            print(f"  {site}: jolokia {info['jolokia_url']}  amqp {info['amqp_url']}  pid {info['pid']}")
        for name, info in endpoints["wan"].items():
            print(f"  wan {name}: {info['listen']} -> {info['target']}  control {info['control_url']}")
        return 0
    if args.command == "wan-up":
        for name, info in wan_up(plan).items():
            print(f"  wan {name}: {info['listen']} -> {info['target']}  control {info['control_url']}")
        return 0
    if args.command == "register":
        endpoints = register(plan, args.timeout)
        print(f"lab up (deployed by playbooks/deploy.yml, emulating Artemis {plan.version}): "
              f"{plan.root / 'endpoints.json'}")
        for site, info in endpoints["sites"].items():
            print(f"  {site}: jolokia {info['jolokia_url']}  amqp {info['amqp_url']}  pid {info['pid']}")
        return 0
    if args.command == "down":
        for line in down(plan):
            print(f"stopped {line}")
        return 0
    print(json.dumps(status(plan), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
