"""The two-site lab: real Apache Artemis brokers (dc1, dc2) on this machine, deployed by the collection itself.

`up` (idempotent: a second run converges) starts one WAN link per direction, runs playbooks/deploy.yml (roles
broker + mirror: the real distribution from Maven Central, `artemis create`, broker.xml, process mode) and
playbooks/initial_roles.yml (dc1 active, dc2 passive) with inventories/lab, waits for both mirrors and writes
`<root>/endpoints.json`. `down` stops everything `up` started, by pid. `status` prints what runs.

Environment (the inventory reads the same variables): LAB_ROOT (build/lab), LAB_ARTEMIS_VERSION (2.44.0),
LAB_PORT_BASE (20000, or `auto` for a free block; LAB_PORT_SHARE `i/n` keeps `auto` in the i-th of n shares of the
free range, for runs side by side), LAB_WAN_LATENCY_MS (0), LAB_DOWNLOAD_DIR (build/downloads),
LAB_TOPOLOGY (`two-site`; `ha`: dc1 is a replicated primary/backup pair, inventories/lab/ha.yml; `ha-shared`: dc1 is a
shared-store primary/backup pair over one directory under the lab root, inventories/lab/ha-shared.yml; docs/ha.md),
LAB_INVENTORY_OVERLAY (an inventory file added after the topology's: its host variables win; none by default).
LAB_BROKER_JAVA_OPTIONS (the brokers' extra JVM options, space-separated; `none`: none; default the client compiler
only, docs/lab.md).
Per site (dc2 = +100): http base+161, client acceptor `artemis` (CORE,AMQP) base+616, mirror acceptor `mirror`
(AMQP) base+617, cluster acceptor (CORE, HA pairs only) base+618. WAN link into dc1: base+900, into dc2:
base+901; their control endpoints base+910 / base+911. With LAB_TOPOLOGY=ha or ha-shared, dc1's backup `dc1-backup`
has the ports of a third site (+200) and its own WAN link for dc2's mirror: base+902, control base+912.
See docs/lab.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from continuity_lab import waiting, wan

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = {"two-site": REPO / "inventories" / "lab" / "hosts.yml", "ha": REPO / "inventories" / "lab" / "ha.yml",
               "ha-shared": REPO / "inventories" / "lab" / "ha-shared.yml"}
INVENTORY = INVENTORIES["two-site"]
SITES = ("dc1", "dc2")
# LAB_TOPOLOGY=ha / ha-shared: the backup of each site named here (docs/ha.md); it takes the ports of the next slot.
HA_BACKUPS = {"dc1": "dc1-backup"}
# The topologies whose pair shares one store (broker_data_dir): its backup has no replica to synchronise.
SHARED_STORE_TOPOLOGIES = ("ha-shared",)
DEFAULT_VERSION = "2.44.0"
# The lab inventory's credentials (inventories/lab/group_vars/artemis.yml): a lab, not a secret.
ADMIN_USER, ADMIN_PASSWORD = "admin", "lab-admin-secret"
MIRROR_USER, MIRROR_PASSWORD = "mirror", "lab-mirror-secret"
ENDPOINTS_FORMAT = 2
# Offsets inside a port block; the inventory computes the same numbers from LAB_PORT_BASE.
HTTP, CLIENT, MIRROR, CLUSTER, SITE_STEP, WAN_LISTEN, WAN_CONTROL = 161, 616, 617, 618, 100, 900, 910


@dataclass
class SitePorts:
    http: int
    client: int
    mirror: int


@dataclass
class Plan:
    root: Path
    version: str
    base: int
    sites: dict[str, SitePorts]
    wan_listen: dict[str, int]  # target site -> port of the WAN link into it
    wan_control: dict[str, int]
    wan_latency_ms: float = 0.0  # initial one-way latency of both links (LAB_WAN_LATENCY_MS)
    topology: str = "two-site"
    # LAB_TOPOLOGY=ha / ha-shared: backup broker name -> (its site, its ports, the WAN link into it, its control)
    backups: dict[str, tuple[str, SitePorts, int, int]] | None = None
    # LAB_INVENTORY_OVERLAY: a second inventory source after the topology's, whose host variables win (a test's own
    # settings for some brokers, e.g. tests/integration/test_ha_shared_store.py)
    overlay: Path | None = None

    @property
    def inventory(self) -> Path:
        return INVENTORIES[self.topology]

    def brokers(self) -> dict[str, SitePorts]:
        """Every broker of the lab: the sites' (primary) brokers, then the backups."""
        return {**self.sites, **{name: b[1] for name, b in (self.backups or {}).items()}}


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        # As the brokers bind: TIME_WAIT leftovers of client connections do not count as taken; a listener does.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def block_ports(base: int) -> list[int]:
    slots = len(SITES) + len(HA_BACKUPS)  # reserved whatever the topology: a block fits both
    ports = [base + off + SITE_STEP * i for i in range(slots) for off in (HTTP, CLIENT, MIRROR, CLUSTER)]
    return ports + [base + WAN_LISTEN + i for i in range(slots)] + [base + WAN_CONTROL + i for i in range(slots)]


FREE_BLOCKS = (21000, 31500)  # where free_port_base looks for a lab port block
BLOCK_SIZE = 1000


def free_port_base(lo: int = FREE_BLOCKS[0], hi: int = FREE_BLOCKS[1], tries: int = 60) -> int:
    """A base in [lo, hi) whose lab ports are all free now; below the kernel's ephemeral range (32768+) so client
    sockets of concurrent runs never take them. Random order: two test processes rarely pick the same block."""
    bases = list(range(lo, hi, BLOCK_SIZE))
    random.shuffle(bases)
    for base in bases[:tries]:
        if all(_port_free(p) for p in block_ports(base)):
            return base
    raise SystemExit(f"lab: no free port block in {lo}-{hi} after {tries} tries")


def share_range(index: int, parts: int) -> tuple[int, int]:
    """The ``index``-th of ``parts`` equal shares of FREE_BLOCKS: runs side by side that each draw a free block from
    their own share never pick the same one (a block is only seen taken once its brokers bind, a minute later)."""
    lo_all, hi_all = FREE_BLOCKS
    share = (hi_all - lo_all) // BLOCK_SIZE // parts * BLOCK_SIZE
    if share < BLOCK_SIZE or not 0 <= index < parts:
        raise SystemExit(f"lab: no port block share {index}/{parts} in {lo_all}-{hi_all}")
    lo = lo_all + index * share
    return lo, lo + share


def auto_range(env: dict[str, str]) -> tuple[int, int]:
    """Where LAB_PORT_BASE=auto looks: the share LAB_PORT_SHARE ("i/n") names, else all of FREE_BLOCKS."""
    share = env.get("LAB_PORT_SHARE")
    if not share:
        return FREE_BLOCKS
    index, parts = (int(n) for n in share.split("/"))
    return share_range(index, parts)


def make_plan(env: dict[str, str] | None = None) -> Plan:
    env = dict(os.environ if env is None else env)
    root = Path(env.get("LAB_ROOT") or REPO / "build" / "lab").absolute()
    version = env.get("LAB_ARTEMIS_VERSION") or DEFAULT_VERSION
    base_text = env.get("LAB_PORT_BASE") or "20000"
    if base_text == "auto":
        # A lab root keeps the block it was given: a second `up`, `register` or `down` must find the same ports.
        recorded = _load_state(root).get("port_base")
        base = int(recorded) if recorded else free_port_base(*auto_range(env))
    else:
        base = int(base_text)
    sites = {s: SitePorts(base + HTTP + SITE_STEP * i, base + CLIENT + SITE_STEP * i, base + MIRROR + SITE_STEP * i)
             for i, s in enumerate(SITES)}
    listen = {s: base + WAN_LISTEN + i for i, s in enumerate(SITES)}
    ctl = {s: base + WAN_CONTROL + i for i, s in enumerate(SITES)}
    topology = env.get("LAB_TOPOLOGY") or "two-site"
    if topology not in INVENTORIES:
        raise SystemExit(f"LAB_TOPOLOGY={topology!r}: choose one of {', '.join(INVENTORIES)}")
    backups = None
    if topology in ("ha", *SHARED_STORE_TOPOLOGIES):
        backups = {}
        for j, (site, name) in enumerate(HA_BACKUPS.items()):
            slot = len(SITES) + j
            backups[name] = (site, SitePorts(base + HTTP + SITE_STEP * slot, base + CLIENT + SITE_STEP * slot,
                                             base + MIRROR + SITE_STEP * slot),
                             base + WAN_LISTEN + slot, base + WAN_CONTROL + slot)
    overlay = Path(env["LAB_INVENTORY_OVERLAY"]).absolute() if env.get("LAB_INVENTORY_OVERLAY") else None
    return Plan(root, version, base, sites, listen, ctl, float(env.get("LAB_WAN_LATENCY_MS") or 0), topology, backups,
                overlay)


def peer(site: str) -> str:
    return SITES[1 - SITES.index(site)]


def plan_env(plan: Plan) -> dict[str, str]:
    """What the inventory and Ansible need to deploy exactly this plan."""
    return {**os.environ, "LAB_ROOT": str(plan.root), "LAB_PORT_BASE": str(plan.base),
            "LAB_ARTEMIS_VERSION": plan.version, "LAB_USE_WAN": "true", "LAB_TOPOLOGY": plan.topology,
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_COLLECTIONS_PATH": str(REPO / "build" / "collections")}


# --- processes ----------------------------------------------------------------------------------------------------
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


def _load_state(root: Path) -> dict[str, Any]:
    path = _state_file(root)
    return json.loads(path.read_text()) if path.exists() else {"processes": []}


def _save_state(root: Path, state: dict[str, Any]) -> None:
    tmp = _state_file(root).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(_state_file(root))


def _client(url: str) -> Any:
    """The collection's own Jolokia client, as the lab's admin (one Jolokia client in the project)."""
    from ansible_collections.continuity.artemis.plugins.module_utils import jolokia

    return jolokia.JolokiaClient(url, ADMIN_USER, ADMIN_PASSWORD, timeout=5, retries=0)


def _wait(what: str, predicate: Any, timeout: float) -> None:
    from ansible_collections.continuity.artemis.plugins.module_utils import jolokia

    try:
        waiting.until(what, predicate, timeout, transient=(*waiting.TRANSIENT, jolokia.JolokiaError))
    except waiting.TimedOut as exc:
        raise SystemExit(f"lab: {exc}") from None


def playbook(plan: Plan, name: str, timeout: float = 900) -> None:
    """Run one of the collection's playbooks against the lab inventory; its output goes to <root>/<name>.log."""
    bin_dir = Path(sys.executable).parent
    log_path = plan.root / f"{Path(name).stem}.log"
    with open(log_path, "w") as log:
        argv = [str(bin_dir / "ansible-playbook"), "-i", str(plan.inventory),
                *(["-i", str(plan.overlay)] if plan.overlay else []), str(REPO / "playbooks" / name)]
        rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=plan_env(plan), cwd=REPO,
                            timeout=timeout).returncode
    if rc != 0:
        tail = "\n".join(log_path.read_text().splitlines()[-40:])
        raise SystemExit(f"lab: playbooks/{name} failed (rc {rc}); full log {log_path}\n{tail}")


def up(plan: Plan, timeout: float = 900) -> dict[str, Any]:
    """WAN links, then the collection deploys both brokers through them, then the initial roles. On a lab that is
    already up this converges (the deploy reports no change and restarts nothing; the roles stay as they are)."""
    plan.root.mkdir(parents=True, exist_ok=True)
    (plan.root / "endpoints.json").unlink(missing_ok=True)
    wan_up(plan)
    playbook(plan, "deploy.yml", timeout)
    playbook(plan, "initial_roles.yml", timeout)
    return register(plan)


def _start_link(plan: Plan, state: dict[str, Any], source: str, target: str, target_port: int, listen: int,
                control: int) -> dict[str, Any]:
    """One WAN link process: `source`'s mirror into `target` (a site's broker or an HA backup) goes through it."""
    name = f"{source}-{target}"
    log = open(plan.root / f"wan-{name}.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "continuity_lab.wan", "serve", "--name", name,
         "--target", f"127.0.0.1:{target_port}", "--listen", f"127.0.0.1:{listen}",
         "--control", f"127.0.0.1:{control}", "--state-file", str(plan.root / f"wan-{name}.json"),
         "--latency", str(plan.wan_latency_ms)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    state["processes"].append({"kind": "wan", "name": name, "pid": proc.pid})
    _save_state(plan.root, state)
    return {"from": source, "to": target, "listen": f"127.0.0.1:{listen}", "target": f"127.0.0.1:{target_port}",
            "control_url": f"http://127.0.0.1:{control}", "pid": proc.pid}


def start_wan(plan: Plan, state: dict[str, Any]) -> dict[str, Any]:
    """Start one WAN link per direction, and one into each HA backup (the second URI of the peer's mirror)."""
    wan_info: dict[str, Any] = {}
    for target in SITES:
        link = _start_link(plan, state, peer(target), target, plan.sites[target].mirror, plan.wan_listen[target],
                           plan.wan_control[target])
        wan_info[f"{link['from']}-{target}"] = link
    for backup, (site, ports, listen, control) in (plan.backups or {}).items():
        link = _start_link(plan, state, peer(site), backup, ports.mirror, listen, control)
        # carries the mirror only once the backup is live
        wan_info[f"{link['from']}-{backup}"] = {**link, "standby": True}
    return wan_info


def describe(plan: Plan, state: dict[str, Any], wan_info: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Wait until both brokers answer and their mirrors are connected; the endpoints document."""
    from ansible_collections.continuity.artemis.plugins.module_utils import versions

    root = plan.root
    sites: dict[str, Any] = {}
    broker_version = ""
    for site in SITES:
        ports = plan.sites[site]
        origin = f"http://127.0.0.1:{ports.http}"
        url = f"{origin}/console/jolokia"
        bname = f'org.apache.activemq.artemis:broker="{site}"'
        client = _client(url)
        _wait(f"{site} Jolokia", lambda c=client, b=bname: c.read(b, "Started") is True, timeout)
        broker_version = client.read(bname, "Version")
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
            "mirror_connection": peer(site).upper(),
            "instance_dir": str(root / site),
            "pid": next(p["pid"] for p in state["processes"] if p["kind"] == "broker" and p["name"] == site),
        }
    backups: dict[str, Any] = {}
    for backup, (site, ports, _listen, _control) in (plan.backups or {}).items():
        url = f"http://127.0.0.1:{ports.http}/console/jolokia"
        bname = f'org.apache.activemq.artemis:broker="{backup}"'
        client = _client(url)
        if plan.topology in SHARED_STORE_TOPOLOGIES:
            # a shared-store backup copies nothing: it stands by (Started=true, Backup=true) with the primary's NodeID,
            # which it read from the shared store's server.lock (another NodeID = a store of its own)
            primary = _client(sites[site]["jolokia_url"]).read(f'org.apache.activemq.artemis:broker="{site}"', "NodeID")
            _wait(f"{backup} (backup of {site}) standing by on {site}'s store",
                  lambda c=client, b=bname, n=primary: c.read(b, "Backup") is True and c.read(b, "NodeID") == n,
                  timeout)
        else:
            # a backup answers Jolokia with Started=true, Backup=true; ReplicaSync once it copied the primary's journal
            _wait(f"{backup} (backup of {site}) in sync", lambda c=client, b=bname: c.read(b, "ReplicaSync") is True,
                  timeout)
        backups[backup] = {
            "site": site, "broker_name": backup, "jolokia_url": url, "jolokia_origin": f"http://127.0.0.1:{ports.http}",
            "amqp_url": f"amqp://127.0.0.1:{ports.client}",
            "acceptors": {"artemis": ports.client, "mirror": ports.mirror},
            "instance_dir": str(root / backup),
            "pid": next(p["pid"] for p in state["processes"] if p["kind"] == "broker" and p["name"] == backup),
        }
    for name, info in wan_info.items():
        if info.get("standby"):
            continue  # into a backup: carries the mirror only once the backup is live
        _wait(f"mirror connection through {name}",
              lambda i=info: wan.control(i["control_url"], "status")["connections"] >= 1, timeout)
    if versions.has(broker_version, "broker_connection_mbean"):
        for site, info in sites.items():
            cname = (f'org.apache.activemq.artemis:broker="{site}",component=broker-connections,'
                     f'name="{info["mirror_connection"]}"')
            _wait(f"{site} mirror {info['mirror_connection']} Connected",
                  lambda i=info, c=cname: _client(i["jolokia_url"]).read(c, "Connected") is True, timeout)
    homes = sorted((root / "dist").glob("apache-artemis-*")) if (root / "dist").exists() else []
    return {
        "format": ENDPOINTS_FORMAT,
        "artemis_version": plan.version,
        "broker_version": broker_version,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "lab_root": str(root),
        "port_base": plan.base,
        "artemis_home": str(homes[-1]) if homes else "",
        "topology": plan.topology,
        "sites": sites,
        "backups": backups,
        "wan": wan_info,
    }


def register(plan: Plan, timeout: float = 120) -> dict[str, Any]:
    """After playbooks/deploy.yml created and started the brokers: record their pids next to the WAN links
    (so lab-down stops them), wait for the mirrors, write endpoints.json."""
    root = plan.root
    state = _load_state(root)
    state["processes"] = [p for p in state["processes"] if p["kind"] != "broker"]
    for site in plan.brokers():
        pid_file = root / site / "data" / "artemis.pid"
        if not pid_file.exists():
            raise SystemExit(f"{site}: no broker pid at {pid_file}: did playbooks/deploy.yml run with LAB_ROOT={root}?")
        state["processes"].append({"kind": "broker", "name": site, "pid": int(pid_file.read_text().strip()),
                                   "instance_dir": str(root / site)})
    _save_state(root, state)
    endpoints = describe(plan, state, state.get("wan", {}), timeout)
    path = root / "endpoints.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(endpoints, indent=2) + "\n")
    tmp.replace(path)
    return endpoints


def wan_up(plan: Plan) -> dict[str, Any]:
    """Only the WAN links (idempotent): the brokers are deployed by playbooks/deploy.yml (LAB_USE_WAN=true)."""
    root = plan.root
    root.mkdir(parents=True, exist_ok=True)
    state = _load_state(root)
    if any(p["kind"] == "wan" and _alive(p.get("pid")) for p in state["processes"]):
        return state.get("wan", {})
    state["processes"] = [p for p in state["processes"] if p["kind"] != "wan"]
    state["port_base"] = plan.base
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


def _stop_broker(instance: Path, pid: int) -> None:
    service = instance / "bin" / "artemis-service"
    if service.exists():
        subprocess.run([str(service), "stop"], capture_output=True, timeout=60)
    _stop_pid(pid, 15)


def down(plan: Plan) -> list[str]:
    """Stops brokers (artemis-service stop, then the pid) and WAN links (pid); returns what was stopped."""
    state = _load_state(plan.root)
    stopped = []
    for proc in sorted(state.get("processes", []), key=lambda p: p["kind"] != "broker"):
        pid = proc.get("pid")
        if not _alive(pid):
            continue
        if proc["kind"] == "broker":
            _stop_broker(Path(proc["instance_dir"]), pid)
        else:
            _stop_pid(pid, 10)
        stopped.append(f"{proc['kind']} {proc['name']} (pid {pid})")
    # A broker restarted after `up` (a failback after the failover drill) has a pid the state file does not
    # know: its instance's pid file does.
    for site in plan.brokers():
        try:
            pid = int((plan.root / site / "data" / "artemis.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if _alive(pid):
            _stop_broker(plan.root / site, pid)
            stopped.append(f"broker {site} (pid {pid}, restarted after lab-up)")
    _state_file(plan.root).unlink(missing_ok=True)
    (plan.root / "endpoints.json").unlink(missing_ok=True)
    return stopped


@contextlib.contextmanager
def running(plan: Plan, timeout: float = 900) -> Iterator[dict[str, Any]]:
    """``up`` for the length of a ``with`` block (its endpoints), then ``down``, also when ``up`` failed halfway."""
    try:
        yield up(plan, timeout)
    finally:
        down(plan)


def status(plan: Plan) -> dict[str, Any]:
    procs = _load_state(plan.root).get("processes", [])
    return {"root": str(plan.root), "processes": [{**p, "alive": _alive(p.get("pid"))} for p in procs]}


def _print_endpoints(endpoints: dict[str, Any]) -> None:
    print(f"lab up (Apache Artemis {endpoints['broker_version']}, deployed by playbooks/deploy.yml): "
          f"{endpoints['lab_root']}/endpoints.json")
    for site, info in endpoints["sites"].items():
        print(f"  {site}: jolokia {info['jolokia_url']}  amqp {info['amqp_url']}  pid {info['pid']}")
    for name, info in endpoints["wan"].items():
        print(f"  wan {name}: {info['listen']} -> {info['target']}  control {info['control_url']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m continuity_lab.labctl", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["up", "down", "status", "wan-up", "register"])
    p.add_argument("--timeout", type=float, default=900)
    args = p.parse_args(argv)
    plan = make_plan()
    if args.command == "up":
        was_up = any(p["kind"] == "broker" and _alive(p.get("pid")) for p in _load_state(plan.root)["processes"])
        try:
            endpoints = up(plan, args.timeout)
        except BaseException:
            if not was_up:
                down(plan)  # leave nothing running behind a failed start (a running lab is left as it was)
            raise
        _print_endpoints(endpoints)
        return 0
    if args.command == "wan-up":
        for name, info in wan_up(plan).items():
            print(f"  wan {name}: {info['listen']} -> {info['target']}  control {info['control_url']}")
        return 0
    if args.command == "register":
        _print_endpoints(register(plan, args.timeout))
        return 0
    if args.command == "down":
        for line in down(plan):
            print(f"stopped {line}")
        return 0
    print(json.dumps(status(plan), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
