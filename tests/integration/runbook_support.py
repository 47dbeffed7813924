"""Shared helpers of the runbook integration tests (tests/integration/test_runbooks*.py) and of
benchmarks/runbook_bench.py: a private two-site lab on a fixed free port block, playbook runs as an operator
runs them, the traffic tool in the background, ledger reconciliation, evidence reading, a role sampler.

Everything talks to the lab through its public surfaces (lab-up.sh/lab-down.sh, Jolokia, the WAN control
endpoint, the instance files), the runbooks through ansible-playbook, the traffic tool through its CLI.
"""

from __future__ import annotations

import contextlib
import datetime
import glob
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
PY = VENV_BIN / "python"
INVENTORY = ROOT / "inventories" / "lab" / "hosts.yml"
# LAB_TOPOLOGY=ha (docs/ha.md): dc1 is a replicated pair, its backup dc1-backup on the third port slot; ha-shared: the
# same pair over one shared store.
INVENTORIES = {"two-site": INVENTORY, "ha": ROOT / "inventories" / "lab" / "ha.yml",
               "ha-shared": ROOT / "inventories" / "lab" / "ha-shared.yml"}
COLLECTIONS = ROOT / "build" / "collections"
ADMIN_USER, ADMIN_PASSWORD = "admin", "lab-admin-secret"
CLIENT_ACCEPTOR = "artemis"
SITES = ("dc1", "dc2")
# Port offsets of the lab (docs/lab.md): the inventory computes the same numbers from LAB_PORT_BASE.
HTTP_OFFSET = {"dc1": 161, "dc2": 261, "dc1-backup": 361}
CLIENT_OFFSET = {"dc1": 616, "dc2": 716, "dc1-backup": 816}
WAN_CONTROL_OFFSET = {"dc2-dc1": 910, "dc1-dc2": 911}


def lab_secrets() -> list[str]:
    """Every password the lab inventories give (keys ending in _password): none may appear in any output."""
    import yaml

    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if str(key).endswith("_password") and isinstance(value, str) and "{{" not in value:
                    found.append(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted((ROOT / "inventories" / "lab").rglob("*.yml")):
        walk(yaml.safe_load(path.read_text()))
    if ADMIN_PASSWORD not in found:
        raise AssertionError(f"the lab inventories no longer give broker_admin_password={ADMIN_PASSWORD}")
    return sorted(set(found))


def secrets_in(text: str) -> list[str]:
    """The lab's secrets that appear in ``text`` (masked: the first two characters and the length)."""
    return [f"{s[:2]}...({len(s)} chars)" for s in lab_secrets() if s in text]


INSTALLED_VENV = ROOT / "build" / "venv-installed"
# What the Makefile or the developer's shell sets that an operator's fresh controller does not have.
NOT_ON_A_FRESH_CONTROLLER = ("PYTHONPATH", "ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "VIRTUAL_ENV",
                             "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


def _run(argv: list, timeout: float = 900, **kw: Any) -> str:
    res = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed (rc {res.returncode}):\n{res.stdout[-2000:]}\n"
                           f"{res.stderr[-3000:]}")
    return res.stdout


def install_released(venv: Path = INSTALLED_VENV) -> Path:
    """A fresh controller as an operator sets it up (issue 19, docs/architecture.md "Where the tools find the
    core"): a new virtualenv with ansible-core and the collection's Python requirements; the collection built by
    ansible-galaxy and installed where that Python finds ``ansible_collections`` (its site-packages); the traffic
    tool, the agent and the pipeline pip-installed from the installed collection's own folders. No .pth file of
    ours, no PYTHONPATH. Returns the virtualenv's bin directory."""
    shutil.rmtree(venv, ignore_errors=True)
    galaxy = venv.with_name(venv.name + "-galaxy")
    shutil.rmtree(galaxy, ignore_errors=True)
    constraints = ROOT / "requirements" / "constraints.txt"
    _run([sys.executable, "-m", "venv", venv])
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", constraints]
    _run([*pip, "-r", ROOT / "requirements" / "controller.txt"])
    _run([VENV_BIN / "ansible-galaxy", "collection", "build", "--output-path", galaxy, ROOT], cwd=ROOT)
    (tarball,) = galaxy.glob("continuity-artemis-*.tar.gz")
    purelib = Path(_run([venv / "bin" / "python", "-c",
                         "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    _run([venv / "bin" / "ansible-galaxy", "collection", "install", "-p", purelib, tarball],
         env=fresh_controller_env(os.environ, venv / "bin"), cwd=venv)
    installed = purelib / "ansible_collections" / "continuity" / "artemis"
    _run([*pip, installed / "traffic", installed / "agent", f"{installed / 'pipeline'}[spark]"])
    return venv / "bin"


def fresh_controller_env(env: dict, bin_dir: Path) -> dict:
    """``env`` as a fresh controller has it: ``bin_dir`` first on PATH, none of the checkout's paths."""
    out = {k: v for k, v in env.items() if k not in NOT_ON_A_FRESH_CONTROLLER}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != VENV_BIN]
    out["PATH"] = os.pathsep.join([str(bin_dir), *path])
    return out


def free_port_base() -> int:
    """A free lab port block (the lab's own rule: lab/continuity_lab/labctl.py), in this run's share of the range when
    several pytest runs go side by side (LAB_PORT_SHARE "i/n", tests/run-side-by-side.sh; labctl.auto_range): a
    block is only seen taken once its lab's brokers bind, a minute after it was picked, so two drawing from one range
    could both pick it."""
    from continuity_lab import labctl

    return labctl.free_port_base(*labctl.auto_range(os.environ))


@dataclass
class PlaybookRun:
    name: str
    argv: list
    rc: int
    stdout: str
    stderr: str
    wall: float
    started: float
    ended: float

    @property
    def text(self) -> str:
        return self.stdout + "\n" + self.stderr

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.text.strip().splitlines()[-n:])


class Lab:
    """A private lab (its own LAB_ROOT and port block) that lab-up.sh deploys with the collection's own playbooks
    (deploy.yml, then initial_roles.yml), read and driven through Jolokia, its acceptors and its WAN links."""

    def __init__(self, root: Path, base: int | None = None, version: str = "2.44.0", topology: str = "two-site"):
        self.root = Path(root)
        self.base = base if base is not None else free_port_base()
        self.version = version
        self.inventory = INVENTORIES[topology]
        self.env = {**os.environ, "LAB_ROOT": str(self.root), "LAB_PORT_BASE": str(self.base),
                    "LAB_ARTEMIS_VERSION": version, "LAB_TOPOLOGY": topology,
                    "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_DEPRECATION_WARNINGS": "0"}
        self.endpoints: dict = {}
        self._clients: dict = {}
        self.read_errors: dict = {}  # the last failed read of each site (acceptor_started)

    # ------------------------------------------------------------------ life cycle
    def up(self, timeout: float = 900) -> None:
        """lab-up.sh: the collection deploys both real brokers and gives them their initial roles (dc1 active)."""
        res = subprocess.run(["bash", str(ROOT / "lab" / "lab-up.sh")], capture_output=True, text=True,
                             env=self.env, timeout=timeout, cwd=ROOT)
        if res.returncode != 0:
            raise RuntimeError(f"lab-up failed (rc {res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
        self.endpoints = json.loads((self.root / "endpoints.json").read_text())

    def down(self) -> None:
        subprocess.run(["bash", str(ROOT / "lab" / "lab-down.sh")], capture_output=True, text=True, env=self.env,
                       timeout=180, cwd=ROOT)

    @contextlib.contextmanager
    def running(self, active: str | None = "dc1") -> Iterator[Lab]:
        """The lab up for a test module (``active`` serving, unless None), down afterwards whatever happened."""
        try:
            self.up()
            if active is not None:
                self.ensure_roles(active)
            yield self
        finally:
            self.down()

    # ------------------------------------------------------------------ endpoints
    def jolokia_url(self, site: str) -> str:
        return f"http://127.0.0.1:{self.base + HTTP_OFFSET[site]}/console/jolokia"

    def amqp_url(self, site: str) -> str:
        return f"amqp://127.0.0.1:{self.base + CLIENT_OFFSET[site]}"

    def accepts_clients(self, site: str, timeout: float = 1.0) -> bool | None:
        """A TCP connect to the site's (or broker's) client acceptor: True accepted, False refused (a stopped
        acceptor or broker), None no answer within ``timeout``."""
        try:
            with socket.create_connection(("127.0.0.1", self.base + CLIENT_OFFSET[site]), timeout=timeout):
                return True
        except ConnectionRefusedError:
            return False
        except OSError:
            return None

    def wan_control(self, link: str) -> str:
        return f"http://127.0.0.1:{self.base + WAN_CONTROL_OFFSET[link]}"

    def instance(self, site: str) -> Path:
        return self.root / site

    def broker_xml(self, site: str) -> Path:
        return self.instance(site) / "etc" / "broker.xml"

    def broker_pid(self, site: str) -> int:
        return int((self.instance(site) / "data" / "artemis.pid").read_text().strip())

    # ------------------------------------------------------------------ Jolokia
    def client(self, site: str, timeout: float = 5.0, retries: int = 0):
        from ansible_collections.continuity.artemis.plugins.module_utils import jolokia

        key = (site, timeout, retries)
        if key not in self._clients:
            # retries=0 by default: a sampler must see a refused read at once, not after a retry round
            self._clients[key] = jolokia.JolokiaClient(self.jolokia_url(site), ADMIN_USER, ADMIN_PASSWORD,
                                                       timeout=timeout, retries=retries)
        return self._clients[key]

    def acceptor_started(self, site: str, acceptor: str = CLIENT_ACCEPTOR, client=None) -> bool | None:
        """The client acceptor's `Started` (the live role); None when the broker does not answer (why: in
        ``read_errors``)."""
        from ansible_collections.continuity.artemis.plugins.module_utils import objectname

        try:
            return bool((client or self.client(site)).read(objectname.acceptor(site, acceptor), "Started"))
        except Exception as exc:  # an unreachable broker is a sample value here, not an error
            self.read_errors[site] = f"{type(exc).__name__}: {exc}"
            return None

    def roles(self) -> dict:
        """Each site's live role. A site that does not answer is read once more a second later, with the client's
        own retries, before it counts as unreachable: a test's reference reading must not take one lost read (a
        reused connection the web server dropped, a pause of the JVM) for a changed site. A stopped broker refuses
        at once, so this costs it about 1.6 s."""
        out = {}
        for site in SITES:
            client = self.client(site, retries=2)
            started = self.acceptor_started(site, client=client)
            if started is None:
                time.sleep(1)
                started = self.acceptor_started(site, client=client)
            out[site] = "unreachable" if started is None else ("active" if started else "passive")
        return out

    def persisted_role(self, site: str) -> str:
        """The role broker.xml gives the site after a restart (autoStart of the client acceptor)."""
        from ansible_collections.continuity.artemis.plugins.module_utils import site_role

        return site_role.persisted_role(self.broker_xml(site).read_text(), [CLIENT_ACCEPTOR])

    def set_role(self, site: str, active: bool) -> None:
        """Put a site in a role directly (test set-up between tests, never the thing under test):
        the continuity plugin's guard first (the lab installs the plugin), then the acceptor's start()/stop() and
        autoStart in broker.xml, as the site_role module does."""
        from ansible_collections.continuity.artemis.plugins.module_utils import (
            continuity_plugin,
            objectname,
            site_role,
            switch,
            versions,
        )

        continuity_plugin.set_role(self.client(site), site, "active" if active else "passive")
        fence = switch.persist_fence(str(self.broker_xml(site)), [CLIENT_ACCEPTOR], active)
        reload_applies = site_role.activation_method(versions.parse_version(self.version)) == "reload"
        if fence["changed"] and reload_applies:
            # Apply the file now: a 2.43+ broker's periodic config refresh would otherwise recreate the changed
            # acceptor later, and undo a stop() a test makes in between (seen: dc1 re-opened next to dc2). An older
            # broker's reload leaves acceptors alone: start()/stop() below is all it takes there.
            self.client(site).exec(objectname.broker(site), "reloadConfigurationFile()")
            deadline = time.monotonic() + 30
            # `is not`: None (the acceptor absent while the reload recreates it) is not "stopped" yet
            while self.acceptor_started(site) is not active and time.monotonic() < deadline:
                time.sleep(0.1)
        if bool(self.acceptor_started(site)) != active:
            self.client(site).exec(objectname.acceptor(site, CLIENT_ACCEPTOR), "start()" if active else "stop()")

    def ensure_roles(self, active: str = "dc1") -> None:
        passive = next(s for s in SITES if s != active)
        self.set_role(passive, False)  # fence first: never two sites serving, even between tests
        self.set_role(active, True)
        assert self.roles() == {active: "active", passive: "passive"}, self.roles()

    # ------------------------------------------------------------------ WAN
    def wan(self, link: str, action: str, ms: float | None = None) -> dict:
        """The link's control endpoint over HTTP (docs/lab.md): in-process, because a cut must land within
        milliseconds of the trigger (a `python -m continuity_lab.wan ctl` process takes a second to start here)."""
        import urllib.request

        body = {"ms": ms, "direction": "both"} if action == "latency" else {}
        req = urllib.request.Request(self.wan_control(link) + "/" + action, data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def wan_all(self, action: str, ms: float | None = None) -> None:
        """Both links at once (one thread per link, so a cut hits both directions together)."""
        errors: list = []

        def one(link: str) -> None:
            try:
                self.wan(link, action, ms)
            except Exception as exc:  # reported below with the link's name
                errors.append(f"{link}: {exc}")

        threads = [threading.Thread(target=one, args=(link,)) for link in WAN_CONTROL_OFFSET]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        if errors:
            raise RuntimeError(f"wan {action}: {errors}")

    def wan_open(self) -> None:
        """Both links open and without added latency, as lab-up leaves them."""
        self.wan_all("restore")
        self.wan_all("latency", 0)

    # ------------------------------------------------------------------ playbooks and modules
    def playbook(self, name: str, extra: dict | None = None, check: bool = False, timeout: float = 600,
                 evidence_dir: Path | None = None, run_id: str | None = None,
                 overlay: Path | None = None, installed: Path | None = None) -> PlaybookRun:
        """``overlay``: a second inventory source whose host variables override the lab's (a fault's view).
        ``installed``: the bin directory of a fresh controller (install_released): the runbook runs by its FQCN
        from the installed collection, outside the checkout, with none of the checkout's paths."""
        bin_dir = installed or VENV_BIN
        argv = [str(bin_dir / "ansible-playbook"), "-i", str(self.inventory)]
        if overlay is not None:
            argv += ["-i", str(overlay)]
        argv.append(f"continuity.artemis.{Path(name).stem}" if installed else str(ROOT / "playbooks" / name))
        ev = dict(extra or {})
        if evidence_dir is not None:
            ev["continuity_evidence_dir"] = str(evidence_dir)
        if run_id is not None:
            ev["continuity_run_id"] = run_id
        if ev:
            argv += ["-e", json.dumps(ev)]
        if check:
            argv.append("--check")
        t0 = time.time()
        env, cwd = (fresh_controller_env(self.env, installed), self.root) if installed else (self.env, ROOT)
        res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
        t1 = time.time()
        run = PlaybookRun(name, argv, res.returncode, res.stdout, res.stderr, t1 - t0, t0, t1)
        # Every runbook run of the suite is also a secret scan (issue 16 item 4; docs/security.md).
        leaked = secrets_in(run.text)
        if leaked:
            lines = [n for n, line in enumerate(run.text.splitlines(), 1) if secrets_in(line)]
            raise AssertionError(f"{name} printed secrets {leaked} (rc {run.rc}) on output lines {lines[:20]}: "
                                 f"check loops and set_fact over the site map (no_log)")
        return run

    def module(self, module: str, args: dict, check: bool = False, timeout: float = 180) -> tuple[bool, dict]:
        """Run a collection module with `ansible localhost -m` (how an operator fences by hand)."""
        cmd = [str(VENV_BIN / "ansible"), "localhost", "-i", "localhost,", "-c", "local",
               "-e", f"ansible_python_interpreter={PY}", "-m", f"continuity.artemis.{module}", "-a", json.dumps(args)]
        if check:
            cmd.append("--check")
        env = {**self.env, "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
        marker = out.stdout.find("=> {")
        if marker < 0:
            raise AssertionError(f"no module result in output:\n{out.stdout}\n{out.stderr}")
        result = json.loads(out.stdout[marker + 3:])
        return ("| FAILED!" in out.stdout[:marker] or out.returncode != 0), result

    def swapover_with_both_sites_at(self, site: str) -> tuple[bool, dict]:
        """The swapover module with both sites' connection pointing at one broker (a wrong inventory): dc1 -> dc2,
        both URLs at ``site``."""
        ep = self.endpoints["sites"][site]
        conn = {"url": ep["jolokia_url"], "username": ep["credentials"]["user"],
                "password": ep["credentials"]["password"], "client_acceptors": ep["client_acceptors"]}
        return self.module("swapover", {"old_site": {"name": "dc1", **conn}, "new_site": {"name": "dc2", **conn}})

    def site_args(self, site: str, **kw: Any) -> dict:
        args = {"url": self.jolokia_url(site), "username": ADMIN_USER, "password": ADMIN_PASSWORD,
                "broker_name": site}
        args.update(kw)
        return args

    def file_digests(self) -> dict:
        return {s: hashlib.sha256(self.broker_xml(s).read_bytes()).hexdigest() for s in SITES}


# ---------------------------------------------------------------------- role sampler
class RoleSampler(threading.Thread):
    """Samples whether each site accepts clients every `interval` s: a TCP connect to its client acceptor
    (``Lab.accepts_clients``: True accepted, False refused, None no answer within the timeout), one site after the
    other. `both_open` lists the samples where both sites accepted.

    Why a connect and not the acceptor's `Started` over Jolokia: it is what a client meets, and it costs the
    broker a tenth (20 samples/s: 0.013 against 0.13 of a core per broker, since every Jolokia request runs a JAAS
    login; benchmarks/README.md "Where the fault suites' CPU goes"), which matters when two fault suites share
    two cores with their traffic for half an hour."""

    def __init__(self, lab: Lab, interval: float = 0.05, on_sample: Callable[[dict], None] | None = None,
                 max_seconds: float = 900, timeout: float = 2.0):
        super().__init__(daemon=True)
        self.lab, self.interval, self.on_sample, self.max_seconds = lab, interval, on_sample, max_seconds
        self.timeout = timeout
        self.samples: list[dict] = []
        self._halt = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + self.max_seconds  # bounded even if the test forgets to stop it
        while not self._halt.is_set() and time.monotonic() < deadline:
            t0 = time.time()
            sample = {"t0": t0}
            for site in SITES:
                sample[site] = self.lab.accepts_clients(site, timeout=self.timeout)
            sample["t1"] = time.time()
            self.samples.append(sample)
            if self.on_sample is not None:
                self.on_sample(sample)
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)

    @property
    def both_open(self) -> list:
        return [s for s in self.samples if s.get("dc1") and s.get("dc2")]

    def summary(self) -> dict:
        gaps = [b["t0"] - a["t0"] for a, b in zip(self.samples, self.samples[1:], strict=False)]
        return {"samples": len(self.samples), "both_open": len(self.both_open),
                "max_gap_s": round(max(gaps), 3) if gaps else None,
                "mean_gap_s": round(sum(gaps) / len(gaps), 3) if gaps else None}


# ---------------------------------------------------------------------- traffic tool
def dead_jolokia_overlay(path: Path, site: str = "dc1") -> Path:
    """An overlay inventory that points the runbooks at a dead port for ``site``'s Jolokia (the broker itself keeps
    serving): what a runbook sees when only a site's management endpoint is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    path.write_text("all:\n  children:\n    artemis:\n      children:\n"
                    f"        {site}:\n          hosts:\n            {site}-artemis:\n"
                    f"              continuity_jolokia_url: http://127.0.0.1:{dead}/console/jolokia\n")
    return path


def make_agent(lab: Lab, state_dir: Path, run_id: str, interval: float):
    """The continuity agent (agent/continuity_agent) in-process, sampling both lab sites and keeping
    `<state_dir>/<site>/last-known.json`: the file an operator hands to the failover runbook."""
    from continuity_agent.config import parse
    from continuity_agent.service import Agent

    sites = {s: {"jolokia": {"url": lab.jolokia_url(s), "username": ADMIN_USER, "password": ADMIN_PASSWORD,
                             "timeout": 5}, "broker_name": s, "client_acceptors": [CLIENT_ACCEPTOR]} for s in SITES}
    cfg = parse({"interval": interval, "listen": {"enabled": False}, "sites": sites,
                 "state_dir": str(state_dir), "evidence": {"dir": str(state_dir / "evidence"), "run_id": run_id}})
    return Agent(cfg)


class Traffic:
    """The traffic tool in the background (`python -m continuity_traffic start/stop`), URLs of both sites."""

    def __init__(self, lab: Lab, evidence_dir: Path, run_id: str, name: str, address: str, producers: int = 2,
                 consumers: int = 2, rate: float = 150, extra: list | None = None, urls: list | None = None,
                 drain_timeout: float = 20):
        """`urls`: the clients' failover list as SITE=URL (default: dc1's then dc2's client acceptor).
        `drain_timeout`: how long the stop lets the consumers empty the queue (they end sooner, 2 s after their
        last message); what is still on it then counts as lost in the ledgers."""
        self.lab, self.evidence_dir, self.run_id, self.name = lab, Path(evidence_dir), run_id, name
        self.drain_timeout = drain_timeout
        urls = urls or [f"dc1={lab.amqp_url('dc1')}", f"dc2={lab.amqp_url('dc2')}"]
        self.argv = [*(a for u in urls for a in ("--url", u)),
                     "--user", ADMIN_USER, "--address", address, "-P", str(producers), "-C", str(consumers),
                     "--rate", str(rate), "--evidence-dir", str(self.evidence_dir), "--run-id", run_id,
                     "--name", name, "--display", "log", "--heartbeat", "5", "--connect-timeout", "3",
                     "--retry-attempts", "20", "--retry-backoff-max", "2", "--drain-timeout", str(drain_timeout),
                     "--drain-idle", "2", *(extra or [])]
        self.info: dict = {}
        self.env = {**os.environ, "CONTINUITY_TRAFFIC_PASSWORD": ADMIN_PASSWORD}

    @property
    def run_dir(self) -> Path:
        return self.evidence_dir / self.run_id

    def start(self, wait: float = 30) -> dict:
        res = subprocess.run([str(PY), "-m", "continuity_traffic", "start", *self.argv, "--wait", str(wait)],
                             capture_output=True, text=True, env=self.env, timeout=wait + 60, cwd=ROOT)
        if res.returncode != 0:
            raise RuntimeError(f"traffic start failed (rc {res.returncode}): {res.stdout}{res.stderr}")
        self.info = json.loads(res.stdout.strip().splitlines()[-1])
        return self.info

    def status(self) -> dict:
        try:
            return json.loads(Path(self.info["status_file"]).read_text())
        except (OSError, ValueError, KeyError):
            return {}

    def wait_received(self, n: int, timeout: float = 60, site: str | None = None) -> bool:
        """Until the consumers acknowledged `n` more messages (on `site`, from the ledgers, if given)."""
        deadline = time.monotonic() + timeout
        start = self._received(site)
        while time.monotonic() < deadline:
            if self._received(site) - start >= n:
                return True
            time.sleep(0.5)
        return False

    def _received(self, site: str | None) -> int:
        if site is None:
            return int(self.status().get("acked") or 0)
        return self.count("received", site)

    def count(self, ledger: str, site: str) -> int:
        """Records of `ledger` (sent: accepted ones only) on `site` in this process's ledgers so far."""
        count = 0
        for path in glob.glob(str(self.run_dir / f"{ledger}-{self.name}-*.jsonl")):
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    flat = line.replace(" ", "")
                    if f'"site":"{site}"' in flat and (ledger != "sent" or '"outcome":"accepted"' in flat):
                        count += 1
        return count

    def wait_sent(self, n: int, site: str, timeout: float = 60) -> bool:
        """Until `n` more sends were accepted on `site` (from the ledgers)."""
        deadline = time.monotonic() + timeout
        start = self.count("sent", site)
        while time.monotonic() < deadline:
            if self.count("sent", site) - start >= n:
                return True
            time.sleep(0.5)
        return False

    def stop(self, timeout: float | None = None) -> None:
        if not self.info:
            return
        timeout = self.drain_timeout + 70 if timeout is None else timeout
        subprocess.run([str(PY), "-m", "continuity_traffic", "stop", "--pidfile", self.info["pidfile"], "--timeout",
                        str(timeout), "--kill-after-timeout"], capture_output=True, text=True, env=self.env,
                       timeout=timeout + 30, cwd=ROOT)


# ---------------------------------------------------------------------- HA labs (LAB_TOPOLOGY=ha, ha-shared)
HA_BACKUP = "dc1-backup"
MIRROR_SNF = "$ACTIVEMQ_ARTEMIS_MIRROR_DC2"  # dc1's store-and-forward queue of its mirror to dc2


def read(lab: Lab, broker: str, mbean: str, attribute: str):
    """One Jolokia attribute of a lab broker; None when the broker does not answer (a sample value in the HA tests)."""
    try:
        return lab.client(broker, timeout=2.0).read(mbean, attribute)
    except Exception:  # a broker that does not answer is a sample value here
        return None


def connected(lab: Lab, broker: str, connection: str):
    from ansible_collections.continuity.artemis.plugins.module_utils import objectname

    return read(lab, broker, objectname.broker_connection(broker, connection), "Connected")


def until(predicate, timeout: float, interval: float = 0.05) -> float | None:
    """Seconds until predicate() was true, or None after timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return time.monotonic() - t0
        time.sleep(interval)
    return None


def ha_traffic(lab: Lab, evidence_dir, name: str, rate: float) -> tuple[Traffic, str]:
    """The traffic tool with the clients' failover list an HA site gives them: dc1's primary, its backup, dc2."""
    import uuid

    run_id = f"{name}-{uuid.uuid4().hex[:8]}"
    urls = [f"dc1={lab.amqp_url('dc1')}", f"dc1={lab.amqp_url(HA_BACKUP)}", f"dc2={lab.amqp_url('dc2')}"]
    # a takeover under 1,000 msg/s leaves a backlog: on a slow CI host the consumers were still ~20,000 messages behind
    # when the producers stopped (2026-11-29), more than 20 s of draining empties; they end 2 s after the queue is empty
    traffic = Traffic(lab, evidence_dir, run_id, name, address=f"{name}.orders", producers=4, consumers=4, rate=rate,
                      urls=urls, drain_timeout=180)
    traffic.start(wait=60)
    return traffic, run_id


def snf_backlog(lab: Lab, broker: str, snf: str = MIRROR_SNF) -> int | None:
    """Messages on a broker's mirror store-and-forward queue; None = the broker did not answer."""
    from ansible_collections.continuity.artemis.plugins.module_utils import objectname

    # the store-and-forward queue is ANYCAST (address = queue name)
    return read(lab, broker, objectname.queue(broker, snf, snf, "anycast"), "MessageCount")


def browse_all(lab: Lab, broker: str, queue: str, page_size: int = 200) -> list:
    """Every message of `queue` (browse(page, pageSize): one answer is capped at the console's page size)."""
    from ansible_collections.continuity.artemis.plugins.module_utils import objectname

    client, mbean, out = lab.client(broker, timeout=30.0), objectname.queue(broker, queue, queue, "anycast"), []
    for page in range(1, 1000):
        batch = client.exec(mbean, "browse(int,int)", page, page_size)
        out += batch
        if len(batch) < page_size:
            return out
    raise AssertionError(f"{broker} {queue}: more than {1000 * page_size} messages to browse")


def ledger_by_msg_id(run_dir, name: str) -> tuple[dict, dict]:
    """The traffic ledgers of writers `<name>-*`: msg_id -> [sent records], msg_id -> [received records]."""
    sent: dict = {}
    received: dict = {}
    for path in glob.glob(str(Path(run_dir) / f"sent-{name}-*.jsonl")):
        for rec in read_jsonl(path, validate=False):
            if rec.get("kind") == "sent":
                sent.setdefault(rec["msg_id"], []).append(rec)
    for path in glob.glob(str(Path(run_dir) / f"received-{name}-*.jsonl")):
        for rec in read_jsonl(path, validate=False):
            if rec.get("kind") == "received":
                received.setdefault(rec["msg_id"], []).append(rec)
    return sent, received


def msg_id_of(user_id: object) -> str:
    """The ledgers' msg_id of a browsed message's AMQP message id (``userID``, which Artemis shows as ``ID:<id>``)."""
    text = str(user_id or "")
    return text[3:] if text.startswith("ID:") else text


def phantom_problems(messages: list, sent: dict, received: dict, pair_node_id: str, killed_at: float) -> list:
    """Why each message dc2 holds beyond the pair's is NOT explained by the kill (empty list = all are).

    Every such message carries the pair's broker id (sent by the pair, not by dc2) and was received by the
    consumers, and it is one of the two copies a kill -9 of the primary can leave on dc2 (docs/ha.md):
    - a phantom: the dead primary stored and mirrored a send its backup never received; the producer's ledger
      records that attempt as in doubt (never confirmed), and the same msg_id was accepted on a later attempt
      (sent again through the backup);
    - a lost acknowledgement: the consumer acknowledged the message on the primary before the kill (its first
      receipt's ack_ts before ``killed_at``), but the primary died before its mirror carried the acknowledgement to
      dc2. Either the pair applied it, or (the backup's replication stream held back, as the forced test does) the
      backup never had the acknowledgement and delivered the message again after the takeover (a duplicate the
      ledgers count).
    A copy the mirror routed twice (dc2 kept it after its acknowledgement: ``routed_twice``) is none of these; the
    HA tests check for it on its own.
    Anything else (a confirmed send nobody acknowledged before the kill, a message nobody received) is a real
    discrepancy."""
    problems = []
    for m in messages:
        user_id = str(m.get("userID") or "")
        msg_id = msg_id_of(user_id)
        props = {k.split(".", 1)[-1]: v for kind in ("LongProperties", "IntProperties", "StringProperties")
                 for k, v in (m.get(kind) or {}).items()}
        attempt = props.get("ct_attempt")
        records = sent.get(msg_id, [])
        receipts = received.get(msg_id, [])
        why = []
        if props.get("x-opt-amq-bkr-id") != pair_node_id:
            why.append(f"broker id {props.get('x-opt-amq-bkr-id')} is not the pair's")
        if not receipts:
            why.append("never received")
        phantom = (any(r.get("attempt") == attempt and r.get("outcome") == "in_doubt" for r in records)
                   and any(r.get("outcome") == "accepted" and (r.get("attempt") or 0) > (attempt or 0)
                           for r in records))
        first = min(receipts, key=lambda r: r.get("recv_ts") or float("inf")) if receipts else {}
        acked_before_kill = (any(r.get("outcome") == "accepted" for r in records)
                             and (first.get("ack_ts") or float("inf")) < killed_at)
        if not (phantom or acked_before_kill):
            why.append(f"neither a phantom (attempts {[(r.get('attempt'), r.get('outcome')) for r in records]}, "
                       f"this copy attempt {attempt}) nor acknowledged before the kill "
                       f"(acks {[round((r.get('ack_ts') or 0) - killed_at, 3) for r in receipts]} s from the kill)")
        if why:
            problems.append(f"{user_id or m.get('messageID')}: {'; '.join(why)}")
    return problems


def _log_code(line: str) -> str:
    """An Artemis log entry's message code (AMQ...), else its logger."""
    found = re.search(r"AMQ\d+", line) or re.search(r"\[[\w.$]+\]", line)
    return found.group(0) if found else "?"


def warnings_since(lab: Lab, broker: str, since: float) -> list[str] | None:
    """A broker's WARN/ERROR log entries since ``since`` (epoch s); None when it has no log."""
    log = lab.instance(broker) / "log" / "artemis.log"
    if not log.exists():
        return None
    start = datetime.datetime.fromtimestamp(since).strftime("%Y-%m-%d %H:%M:%S")
    return [line for line in log.read_text(errors="replace").splitlines()
            if line[:19] >= start and (" WARN " in line or " ERROR " in line)]


def routed_twice(lab: Lab, broker: str, since: float) -> list[str]:
    """Messages the broker's mirror target routed into a queue a second time since ``since``: Artemis logs
    AMQ111010 (Duplicate AckManager node detected) when a copy with the same origin broker id and mirror id as one
    the queue holds arrives, i.e. the mirror's duplicate-ID window (the mirror acceptor's amqpCredits,
    broker_mirror_id_cache_size) was too small for what the source sent again. No acknowledgement ever removes the
    older copy (docs/ha.md "Copies the mirror routed twice")."""
    return [line for line in warnings_since(lab, broker, since) or [] if "AMQ111010" in line]


def log_digest(lab: Lab, brokers: tuple, since: float, lines: int = 8) -> str:
    """For a failure message: each broker's WARN/ERROR log entries since ``since`` (epoch s), counted by message code,
    and the first few. The lab's directory goes with the stream's, so a CI failure keeps only what its message says."""
    out = []
    for broker in brokers:
        found = warnings_since(lab, broker, since)
        if found is None:
            out.append(f"{broker}: no {lab.instance(broker) / 'log' / 'artemis.log'}")
            continue
        codes = Counter(_log_code(line) for line in found)
        out.append(f"{broker}: {len(found)} WARN/ERROR since the kill {dict(codes.most_common(8))}; first: "
                   + " | ".join(line[:220] for line in found[:lines]))
    return "\n".join(out)


def kinds_of_extra(messages: list, sent: dict) -> tuple[int, int]:
    """(phantoms, lost acknowledgements) among messages phantom_problems accepted."""
    phantoms = 0
    for m in messages:
        msg_id = msg_id_of(m.get("userID"))
        attempt = ((m.get("LongProperties") or {}) | (m.get("IntProperties") or {}))
        attempt = next((v for k, v in attempt.items() if k.endswith("ct_attempt")), None)
        if any(r.get("attempt") == attempt and r.get("outcome") == "in_doubt" for r in sent.get(msg_id, [])):
            phantoms += 1
    return phantoms, len(messages) - phantoms


def remove_messages(lab: Lab, broker: str, queue: str, user_ids: list, chunk: int = 100) -> int:
    """Remove the messages with these AMQP message ids (AMQUserID) from `queue`: the operator's repair."""
    from ansible_collections.continuity.artemis.plugins.module_utils import objectname

    client, mbean, removed = lab.client(broker, timeout=30.0), objectname.queue(broker, queue, queue, "anycast"), 0
    for i in range(0, len(user_ids), chunk):
        ids = ", ".join("'" + u.replace("'", "''") + "'" for u in user_ids[i:i + chunk])
        removed += int(client.exec(mbean, "removeMessages(java.lang.String)", f"AMQUserID IN ({ids})"))
    return removed


# ---------------------------------------------------------------------- evidence and ledgers
def read_jsonl(path: Path, validate: bool = True) -> list:
    from ansible_collections.continuity.artemis.plugins.module_utils import evidence

    return evidence.read_records(str(path), validate_records=validate)


def validate_run_dir(run_dir: Path) -> dict:
    """Every record of every *.jsonl in the run directory against the evidence schema: {file: [problems]}."""
    from ansible_collections.continuity.artemis.plugins.module_utils import evidence

    problems: dict = {}
    counts: dict = {}
    for path in sorted(Path(run_dir).glob("*.jsonl")):
        n = 0
        try:
            for _number, rec in evidence.iter_records(str(path), validate_records=True):
                n += 1
                _ = rec
        except evidence.EvidenceError as exc:
            problems[path.name] = str(exc)
        counts[path.name] = n
    return {"problems": problems, "counts": counts, "backend": evidence.validation_backend()}


def phases(run_dir: Path, runbook: str | None = None) -> list:
    path = Path(run_dir) / "phases.jsonl"
    if not path.exists():
        return []
    recs = [r for r in read_jsonl(path) if r.get("kind") == "phase"]
    return [r for r in recs if runbook is None or r.get("runbook") == runbook]


@dataclass
class Reconciliation:
    """The ledgers of one traffic run reconciled (see reconcile())."""

    accepted: set = field(default_factory=set)
    in_doubt_only: set = field(default_factory=set)
    received: Counter = field(default_factory=Counter)
    lost: list = field(default_factory=list)
    resend_dups: list = field(default_factory=list)
    real_dups: list = field(default_factory=list)
    unacked_redeliveries: int = 0
    sent_records: int = 0
    received_records: int = 0
    resends: int = 0
    ledger_ends: int = 0
    truncated: list = field(default_factory=list)
    foreign: int = 0
    accepted_by_site: Counter = field(default_factory=Counter)
    received_by_site: Counter = field(default_factory=Counter)
    first_recv_ts_by_site: dict = field(default_factory=dict)
    last_recv_ts_by_site: dict = field(default_factory=dict)
    sent_by_id: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return {"sent_records": self.sent_records, "accepted_msgs": len(self.accepted),
                "in_doubt_only": len(self.in_doubt_only), "resends": self.resends,
                "received_records": self.received_records, "distinct_received": len(self.received),
                "lost": len(self.lost), "resend_duplicates": len(self.resend_dups),
                "real_duplicates": len(self.real_dups), "unacked_redeliveries": self.unacked_redeliveries,
                "truncated_ledgers": self.truncated, "ledger_ends": self.ledger_ends, "foreign": self.foreign,
                "accepted_by_site": dict(self.accepted_by_site), "received_by_site": dict(self.received_by_site)}


# A send attempt that may have left a stored copy on a broker: accepted for sure; in_doubt/error perhaps
# (the connection broke before the settlement). released/modified/rejected were not stored.
MAY_BE_STORED = ("accepted", "in_doubt", "error")


def reconcile(run_dir: Path, name_prefix: str, run_id: str, recv_prefix: str | None = None,
              validate: bool = True) -> Reconciliation:
    """Reconcile the traffic ledgers of `run_id` (writers `<name_prefix>-*`; the consumers' `<recv_prefix>-*`
    when producers and consumers ran as separate processes).

    - lost: a msg_id with an `accepted` sent record and no received record at all;
    - duplicate: a msg_id ACKNOWLEDGED more than once. Receipts without ack (ack_ts null: the consumer's
      connection broke before it acknowledged, so the broker rightly hands the message out again) are not
      counted. The extra acknowledged copies are *resend duplicates* when the tool itself sent that msg_id at
      least that many times with an outcome that may have stored a copy (accepted / in_doubt / error): the
      in-doubt resend case the issue allows. Otherwise they are *real duplicates* (e.g. one accepted send,
      delivered twice because an acknowledgement was lost across the switch) and a zero-duplicate claim fails.

    ``validate=False`` skips the per-record schema check (a benchmark's hundreds of MB of ledgers).
    """
    rec = Reconciliation()
    stored_attempts: Counter = Counter()
    outcomes: dict = defaultdict(list)
    acked: Counter = Counter()
    run_dir = Path(run_dir)
    for path in sorted(run_dir.glob(f"sent-{name_prefix}-*.jsonl")):
        recs = read_jsonl(path, validate)
        if not any(r.get("kind") == "ledger_end" for r in recs):
            rec.truncated.append(path.name)
        for r in recs:
            if r.get("kind") == "ledger_end":
                rec.ledger_ends += 1
                continue
            if r.get("kind") != "sent":
                continue
            rec.sent_records += 1
            mid = r["msg_id"]
            outcomes[mid].append(r["outcome"])
            if (r.get("attempt") or 1) > 1:
                rec.resends += 1
            if r["outcome"] in MAY_BE_STORED:
                stored_attempts[mid] += 1
            if r["outcome"] == "accepted":
                if mid not in rec.accepted:
                    rec.accepted_by_site[r.get("site")] += 1
                rec.accepted.add(mid)
                rec.sent_by_id[mid] = r
    for mid, outs in outcomes.items():
        if "accepted" not in outs and any(o in ("in_doubt", "error") for o in outs):
            rec.in_doubt_only.add(mid)
    for path in sorted(run_dir.glob(f"received-{recv_prefix or name_prefix}-*.jsonl")):
        recs = read_jsonl(path, validate)
        if not any(r.get("kind") == "ledger_end" for r in recs):
            rec.truncated.append(path.name)
        for r in recs:
            if r.get("kind") == "ledger_end":
                rec.ledger_ends += 1
                continue
            if r.get("kind") != "received":
                continue
            mid = r["msg_id"]
            if not str(mid).startswith(run_id + ":"):
                rec.foreign += 1  # a message of another run left on the queue: not this run's business
                continue
            rec.received_records += 1
            rec.received[mid] += 1
            site = r.get("site")
            rec.received_by_site[site] += 1
            ts = r.get("recv_ts") or 0
            rec.first_recv_ts_by_site[site] = min(rec.first_recv_ts_by_site.get(site, ts), ts)
            rec.last_recv_ts_by_site[site] = max(rec.last_recv_ts_by_site.get(site, ts), ts)
            if r.get("ack_ts") is None:
                rec.unacked_redeliveries += 1
            else:
                acked[mid] += 1
    rec.lost = sorted(m for m in rec.accepted if rec.received[m] == 0)
    for mid, n in acked.items():
        if n > 1:
            if n <= max(stored_attempts[mid], 1):
                rec.resend_dups.append(mid)
            else:
                rec.real_dups.append(mid)
    rec.resend_dups.sort()
    rec.real_dups.sort()
    return rec


def received_details(run_dir: Path, name_prefix: str, msg_ids: list, limit: int = 5) -> list:
    """The received records of a few msg_ids (for failure messages)."""
    want = set(msg_ids[:limit])
    out = []
    for path in sorted(Path(run_dir).glob(f"received-{name_prefix}-*.jsonl")):
        for r in read_jsonl(path, validate=False):
            if r.get("msg_id") in want:
                out.append({k: r.get(k) for k in ("msg_id", "consumer", "site", "recv_ts", "ack_ts",
                                                   "delivery_count", "redelivered")})
    return out


def at_risk_of(doc: dict) -> int | None:
    """Events dc1 had not delivered to dc2 in an agent last-known document: `at_risk_events`, else the backlog."""
    if doc.get("at_risk_events") is not None:
        return int(doc["at_risk_events"])
    backlogs = [s.get("backlog") for s in doc.get("lag_samples") or [] if s.get("backlog") is not None]
    return sum(backlogs) if backlogs else None
