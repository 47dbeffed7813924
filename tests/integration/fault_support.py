"""What the fault-injection suites share (issue 16): one controller runner that can kill itself at a task or on a
watched condition, the broker kill/stop/start helpers, and the readings of "converged" (status.yml's safety checks,
the roles a failure message names).

"The controller dies" is SIGKILL of ansible-playbook and every process under it (its workers call setsid(), so the
process group is not enough; the collection's modules run in-process in those workers): faults/kill_at_task.py does
it when a named task starts (that folder holds Ansible callback plugins only, so this module lives beside it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from runbook_support import HA_BACKUP, ROOT, SITES, VENV_BIN, Lab, connected, msg_id_of, read, secrets_in, until

CALLBACKS = Path(__file__).resolve().parent / "faults"

# status.yml's checks that a dead run may break and a re-run must repair (the SLA ones -- lag, backlog -- depend on
# the load of the moment, not on the fault).
SAFETY_CHECKS = {"roles", "reachable", "connected", "restart_safe", "paused_queues", "passive_consumers"}

# The newest and the oldest Artemis the runbooks support (README): before 2.43 a fence written into broker.xml reaches a
# running broker only at its next start, so the same fault can leave a different state. The fault suites run on both.
VERSIONS = ("2.44.0", "2.37.0")

# Every kill point and every Jolokia case runs on ONE of the VERSIONS, in turn (case n on VERSIONS[n % 2]): each is
# proven once, and each version goes through every runbook and half of its points. All of them on both versions made
# the fault suites ~2 x 18 CPU-bound minutes of `make test` (benchmarks/README.md "make test"), more than CI's limit
# allows beside the rest. The points where a fence is written or the active role moves (where the versions differ,
# above) run on both (test_faults.ON_EVERY_VERSION). FAULTS_EVERY_VERSION=1 runs every point and case on every version.
EVERY_VERSION = os.environ.get("FAULTS_EVERY_VERSION", "") not in ("", "0")


def runs_on(version: str, index: int) -> bool:
    """Whether case or kill point number ``index`` (in the order the suite lists them) runs on ``version``."""
    return EVERY_VERSION or VERSIONS[index % len(VERSIONS)] == version


def share(points: list[dict], version: str, always: tuple[str, ...] = ()) -> list[dict]:
    """The kill points of ``points`` that run on ``version``: those whose task starts with one of ``always``, and its
    turn of the others (runs_on, counted over the others only)."""
    mine, turn = [], 0
    for point in points:
        if point["task"].startswith(always):
            mine.append(point)
            continue
        if runs_on(version, turn):
            mine.append(point)
        turn += 1
    return mine

# The load every kill of a fault suite happens under (2 producers, 2 consumers), in messages/s: a message every 40 ms
# through every kill, restart and re-run, each of which spans seconds. It is the suites' largest CPU cost beside the
# runbooks (brokers, traffic tool, WAN link; benchmarks/README.md "Where the fault suites' CPU goes"): on a scratch lab
# 0.58 of a core at 50 msg/s, 0.25 at 25 (2026-11-29), with two suites side by side on 2 cores. Throughput under
# faults is not what these suites test: the swapover and HA tests run 150-1,000 msg/s.
LOAD_RATE = 25

# short gate timeouts for the failbacks of the fault suites (a gate that cannot pass fails in seconds, not minutes)
FAST = {"continuity_drain_timeout": 20, "continuity_post_gate_timeout": 20, "continuity_sync_timeout": 30}

# every controller run of the session, for the printed totals
STATS = {"runs": 0}


def _load_kill_tree() -> Callable[[int], None]:
    spec = importlib.util.spec_from_file_location("kill_at_task", CALLBACKS / "kill_at_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kill_tree


kill_tree = _load_kill_tree()


def run(lab: Lab, playbook: str, extra: dict, overlay: Path | None = None, kill_at: tuple[str, int] | None = None,
        fault_at: tuple[str, int, str] | None = None, when: Callable[[], bool] | None = None,
        then: Callable[[], object] | None = None, task_log: Path | None = None, timeout: float = 400) -> dict:
    """ansible-playbook as the operator runs it, in its own session, plus the fault callback.

    ``kill_at``: (task, occurrence) at whose start the controller dies; ``fault_at``: (task, occurrence, url) POSTed
    at that task's start before it runs; ``when``: a predicate polled every 5 ms, and once it holds ``then()`` runs
    (default: kill the controller). The output is scanned for secrets."""
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(lab.inventory)]
    if overlay is not None:
        argv += ["-i", str(overlay)]
    argv += [str(ROOT / "playbooks" / playbook), "-e", json.dumps(extra)]
    env = {**lab.env, "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_CALLBACKS_ENABLED": "kill_at_task"}
    if kill_at:
        env.update(KILL_AT_TASK=kill_at[0], KILL_AT_OCCURRENCE=str(kill_at[1]))
    if fault_at:
        env.update(FAULT_AT_TASK=fault_at[0], FAULT_AT_OCCURRENCE=str(fault_at[1]), FAULT_POST_URL=fault_at[2])
    if task_log:
        env["KILL_TASK_LOG"] = str(task_log)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    fired = threading.Event()
    action = then if then is not None else (lambda: kill_tree(proc.pid))

    def watch() -> None:
        while proc.poll() is None:
            if when():
                action()
                fired.set()
                return
            time.sleep(0.005)

    if when is not None:
        threading.Thread(target=watch, daemon=True).start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, _ = proc.communicate()
        raise AssertionError(f"{playbook} still running after {timeout} s:\n{out[-3000:]}") from None
    STATS["runs"] += 1
    assert not secrets_in(out), f"{playbook} printed secrets {secrets_in(out)}"
    killed = proc.returncode == -signal.SIGKILL or (then is None and fired.is_set())
    return {"rc": proc.returncode, "out": out, "wall": round(time.monotonic() - t0, 1), "fired": fired.is_set(),
            "killed": killed}


# ---------------------------------------------------------------------- kill points
# Actions that change nothing outside the controller's memory (facts, checks, includes, reads of the brokers). A
# controller killed right after one of them leaves the brokers, their broker.xml files and the evidence exactly as a
# kill one boundary earlier does: the re-run starts from scratch and sees only that outside state. So one kill
# stands for each run of boundaries with no change between them. Any other action counts as a change, whatever it
# reported (amqp_probe's canaries, the evidence files, site_role's reads all stay kill points).
READ_ONLY_ACTIONS = frozenset({
    "ansible.builtin.set_fact", "ansible.builtin.assert", "ansible.builtin.debug", "ansible.builtin.fail",
    "ansible.builtin.include_tasks", "ansible.builtin.import_tasks", "ansible.builtin.validate_argument_spec",
    "ansible.builtin.set_stats", "ansible.builtin.meta", "ansible.builtin.stat",
    "continuity.artemis.broker_info", "continuity.artemis.mirror_info", "continuity.artemis.mirror_wait",
})


def task_boundaries(log: Path) -> list[dict]:
    """The task starts of a run logged by faults/kill_at_task.py, in order, each with its action and the outcomes of
    its host results (``statuses``)."""
    starts: list[dict] = []
    for rec in map(json.loads, log.read_text().splitlines()):
        if "action" in rec:
            starts.append({**rec, "statuses": []})
        elif starts and (rec["task"], rec["occurrence"]) == (starts[-1]["task"], starts[-1]["occurrence"]):
            starts[-1]["statuses"].append(rec["status"])
    return starts


def changes_nothing(start: dict) -> bool:
    """The task could not have changed anything outside the controller: skipped on every host, or a read-only
    action that failed nowhere."""
    statuses = start["statuses"]
    if statuses and all(s == "skipped" for s in statuses):
        return True
    return start["action"] in READ_ONLY_ACTIONS and "failed" not in statuses


def kill_points(boundaries: list[dict], begin: int = 0) -> tuple[list[dict], int]:
    """The boundaries from ``begin`` on at which a kill leaves a state no earlier kept boundary leaves: the first,
    and every one whose previous task may have changed something. Returns them and how many were folded."""
    kept = [b for i, b in enumerate(boundaries) if i >= begin
            and (i == begin or not changes_nothing(boundaries[i - 1]))]
    return kept, len(boundaries) - begin - len(kept)


# ---------------------------------------------------------------------- readings
def breaches(status_out: str) -> set[str]:
    """The names of the checks status.yml reported breached ("SLA: BREACH name (detail); name (detail)")."""
    said = " ".join(status_out.split())
    match = re.search(r"SLA: BREACH (.*?)'", said)
    return set(re.findall(r"(?:^|\); )(\w+) \(", match.group(1))) if match else set()


def reads_true(client, mbean: str, attribute: str) -> Callable[[], bool]:
    """A predicate for ``when``: the attribute reads true (a read that fails this instant is not true)."""
    def check() -> bool:
        try:
            return client.read(mbean, attribute) is True
        except Exception:  # not readable this instant: keep watching
            return False
    return check


def state(lab: Lab) -> tuple[dict, dict]:
    """The roles the brokers have now, and the roles their broker.xml gives them after a restart."""
    return lab.roles(), {s: lab.persisted_role(s) for s in SITES}


def roles_now(lab: Lab) -> tuple[str, str]:
    """(active site, passive site); exactly one must be active."""
    roles = lab.roles()
    active = [s for s in SITES if roles[s] == "active"]
    assert len(active) == 1, roles
    return active[0], next(s for s in SITES if s != active[0])


def failure_message(out: str) -> str:
    """The last failed task's message, on one line (ansible-core 2.19: ``[ERROR]: Task failed: Action failed: ...``)."""
    said = " ".join(out.split())
    at = max(said.rfind("[ERROR]: Task failed: "), said.rfind("fatal: ["))
    if at < 0:
        return said[-1500:]
    tail = said[at:]
    end = min([i for i in (tail.find(" Origin: "), tail.find(" PLAY RECAP")) if i > 0] or [len(tail)])
    return tail[:end]


def said_roles(message: str) -> dict:
    """``dc1 active, dc2 passive`` (roles_text) in a runbook's failure message."""
    return dict(re.findall(r"\b(dc[12]) (active|passive|unreachable|unknown|mixed)\b", message))


def converge_status(lab: Lab, evidence: Path, point: str, overlay: Path | None = None) -> None:
    """status.yml after a re-run: no safety check breached."""
    status = run(lab, "status.yml", {"continuity_evidence_dir": str(evidence)}, overlay=overlay)
    safety = breaches(status["out"]) & SAFETY_CHECKS
    assert not safety, f"status after the re-run ({point}) breached {safety}:\n{status['out'][-2500:]}"


# ---------------------------------------------------------------------- the brokers
def _wait_gone(pid: int, site: str, how: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"{site}'s broker (pid {pid}) still exists {seconds:.0f} s after {how}")


def start_service(lab: Lab, site: str, timeout: float = 120) -> None:
    """artemis-service start of a stopped broker, without waiting for it to answer; fails with what the script said
    when it refuses (e.g. "Already running": the previous process still exists)."""
    done = subprocess.run([str(lab.instance(site) / "bin" / "artemis-service"), "start"], capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"artemis-service start of {site}: {done.stdout}{done.stderr}"


def _stop_service(lab: Lab, site: str) -> None:
    """artemis-service stop sends SIGTERM, then gives the broker 5 s and says "Could not stop process" if it is still
    shutting down (seen in a fault suite under a full queue). The caller then waits for the process itself, as the
    role's continuity-restart script does; anything else the script reports fails here."""
    done = subprocess.run([str(lab.instance(site) / "bin" / "artemis-service"), "stop"], capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0 and "Could not stop process" not in done.stdout:
        raise AssertionError(f"artemis-service stop of {site}: {done.stdout}{done.stderr}")


def kill_broker(lab: Lab, site: str) -> dict:
    """kill -9 of a site's broker, and wait until the process is gone (its service script refuses to start while the
    pid in its pid file is alive). Returns when (as restart_broker does, without ``answered``)."""
    pid = lab.broker_pid(site)
    began = time.time()
    os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, site, "kill -9", 30)
    return {"site": site, "began": began, "stopped": time.time()}


def _alive(lab: Lab, site: str) -> bool:
    """Whether the process in the site's pid file exists (the service script's own test; labctl's rule)."""
    from continuity_lab import labctl

    try:
        pid = lab.broker_pid(site)
    except (OSError, ValueError):
        return False
    return labctl._alive(pid)


def broker_diagnosis(lab: Lab, site: str) -> str:
    """Why a started broker does not answer, for a failure message: the last Jolokia error, the process's state
    (``T`` is a stopped process), its heap and its threads when it runs, the end of its log."""
    parts = [f"Jolokia: {lab.read_errors.get(site)}"]
    try:
        pid = lab.broker_pid(site)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        parts.append(f"pid {pid} state {state} ({Path(f'/proc/{pid}/cmdline').read_bytes()[:80]!r})")
        if state != "T":
            heap = subprocess.run(["jcmd", str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60)
            parts.append(f"heap:\n{heap.stdout.strip() or heap.stderr.strip()[:300]}")
            dump = subprocess.run(["jcmd", str(pid), "Thread.print"], capture_output=True, text=True, timeout=60)
            # the main thread and those in Artemis's start-up code (activation, journal lock, web server, plugins)
            markers = ("ActiveMQServerImpl", "Activation", "NodeManager", "WebServerComponent", "Plugin", "Run.run")
            threads = [t for t in dump.stdout.split("\n\n")
                       if t.startswith('"main"') or any(m in t for m in markers)]
            parts.append("threads in start-up code:\n" + "\n\n".join(threads)[:6000])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError) as exc:
        parts.append(f"process: {type(exc).__name__}: {exc}")
    log = lab.instance(site) / "log" / "artemis.log"
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log.exists() else f"no {log}"
    parts.append(f"the end of its log:\n{tail}")
    return "\n".join(parts)


def start_broker(lab: Lab, site: str) -> None:
    """Start a stopped broker with its service script and wait until it answers."""
    start_service(lab, site)
    deadline = time.monotonic() + 120
    while lab.acceptor_started(site) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    if lab.acceptor_started(site) is None:
        raise AssertionError(f"{site} did not come back within 120 s: {broker_diagnosis(lab, site)}")
    time.sleep(1)  # a 2.43+ broker's first config refresh (a fence written while it was down is already in its file)


def wait_in_sync(lab: Lab, timeout: float = 90) -> dict:
    """Both mirrors connected with no backlog (the swapover's own preflight would refuse otherwise)."""
    from ansible_collections.continuity.artemis.plugins.module_utils import gates
    from ansible_collections.continuity.artemis.plugins.module_utils.site_state import SiteCollector

    cols = {s: SiteCollector(lab.client(s, timeout=10), broker_name=s, site=s) for s in SITES}
    deadline = time.monotonic() + timeout
    ev: dict = {}
    while time.monotonic() < deadline:
        ev = gates.evaluate({"connected": True, "max_backlog": 0}, cols["dc1"].collect(), cols["dc2"].collect(),
                            direction="both")
        if ev["ok"]:
            return ev
        time.sleep(0.5)
    raise AssertionError(f"mirrors not connected and drained within {timeout} s: {ev.get('failed')}")


def dc1_active_in_sync(lab: Lab) -> Lab:
    """The WAN links open without latency, dc1 active and dc2 passive, the mirrors connected and drained."""
    lab.wan_open()
    lab.ensure_roles("dc1")
    wait_in_sync(lab)
    return lab


def start_state(lab: Lab) -> Lab:
    """A lab that test modules share (conftest.site_lab, fault_lab) put back as lab-up leaves it, for the next
    module: both brokers running, then dc1_active_in_sync. (A module that ends in a failover goes last in its
    stream: a broker found down is only started again here, without a failback.)"""
    for site in SITES:
        if lab.acceptor_started(site) is None and not _alive(lab, site):
            start_broker(lab, site)
    return dc1_active_in_sync(lab)


def stop_broker(lab: Lab, site: str) -> bool:
    """An operator's stop (artemis-service stop), waited for by the broker's pid; a broker already dead (killed before)
    is left as it is. Whether one was running."""
    if not _alive(lab, site):
        return False
    pid = lab.broker_pid(site)
    _stop_service(lab, site)
    _wait_gone(pid, site, "artemis-service stop")
    return True


def restart_pair(lab: Lab) -> None:
    """Stop the backup and the primary, start the primary, then the backup; wait until dc1 serves from its primary
    with the backup in sync and both mirrors connected. A broker already dead (a kill before) is only started."""
    from ansible_collections.continuity.artemis.plugins.module_utils import objectname

    primary, backup = objectname.broker("dc1"), objectname.broker(HA_BACKUP)
    # a stop that outlasts artemis-service's 5 s is waited for: a start beside a stopping broker says "Already running"
    stop_broker(lab, HA_BACKUP)
    stop_broker(lab, "dc1")
    start_service(lab, "dc1")
    assert until(lambda: read(lab, "dc1", primary, "Active") is True, 180, 0.5) is not None, "primary not live"
    start_service(lab, HA_BACKUP)
    assert until(lambda: read(lab, HA_BACKUP, backup, "ReplicaSync") is True, 180, 0.5) is not None, \
        "backup not in sync"
    assert until(lambda: connected(lab, "dc1", "DC2") is True and connected(lab, "dc2", "DC1") is True, 180,
                 0.5) is not None, "mirrors not connected"
    assert until(lambda: read(lab, "dc1", objectname.acceptor("dc1", "artemis"), "Started") is True, 60,
                 0.5) is not None, "dc1's client acceptor not started"


def ha_start_state(lab: Lab) -> Lab:
    """An HA lab (LAB_TOPOLOGY=ha) that modules share (conftest.ha_lab) as its deploy leaves it: the WAN open, dc1
    serving from its primary, the backup in sync, both mirrors connected and drained. Restarts the pair
    (restart_pair) unless it already is. A module that failed half way can leave a backlog behind (CI, 2026-11-29:
    1,994 mirror events on dc1 after test_ha_lab's phantom test stopped at its traffic check): waited for, so the
    next module does not fail on what the last one left."""
    from ansible_collections.continuity.artemis.plugins.module_utils import objectname

    def as_deployed() -> bool:
        return (read(lab, "dc1", objectname.broker("dc1"), "Active") is True
                and read(lab, HA_BACKUP, objectname.broker(HA_BACKUP), "ReplicaSync") is True
                and read(lab, "dc1", objectname.acceptor("dc1", "artemis"), "Started") is True
                and connected(lab, "dc1", "DC2") is True and connected(lab, "dc2", "DC1") is True)

    lab.wan_open()
    if until(as_deployed, 10, 0.5) is None:
        restart_pair(lab)
    wait_in_sync(lab, timeout=180)
    return lab


def restart_broker(lab: Lab, site: str) -> dict:
    """An operator's restart (artemis-service stop, then start): the broker comes back with what its broker.xml
    says, whatever it did at runtime before. Returns when it stopped (wall clock), for the ledgers."""
    began = time.time()
    if not stop_broker(lab, site):
        raise AssertionError(f"{site}'s broker is not running: nothing to restart")
    stopped = time.time()
    start_broker(lab, site)
    return {"site": site, "began": began, "stopped": stopped, "answered": time.time()}


def restart_duplicates(receipts: list, restarts: list, slack: float = 2.0) -> tuple[list, list]:
    """Split messages delivered twice (``receipts``: their received records) into those a broker restart explains
    and the others. A restart explains one when its first delivery was acknowledged on the restarted broker while
    that broker was stopping (from ``slack`` s before the stop began) and it was delivered again after it answered:
    an acknowledgement the stopping broker never applied, the at-least-once contract of any broker restart."""
    by_msg: dict = {}
    for r in receipts:
        by_msg.setdefault(r["msg_id"], []).append(r)
    explained, other = [], []
    for msg_id, recs in sorted(by_msg.items()):
        first, *later = sorted(recs, key=lambda r: r["recv_ts"])
        hit = any(x["site"] == first["site"] and x["began"] - slack <= (first.get("ack_ts") or 0) <= x["stopped"]
                  and any(r["recv_ts"] >= x["stopped"] for r in later) for x in restarts)
        (explained if hit else other).append(msg_id)
    return explained, other


def restart_lost_ack_problems(copies: list, received: dict, restarts: list, holder: str,
                              slack: float = 2.0) -> list:
    """Why each copy ``holder`` keeps of a message its peer no longer has is NOT explained by a restart of
    ``holder`` (empty list = all are). ``copies``: reconcile summaries (``user_id``), ``received``: msg_id ->
    received records (ledger_by_msg_id).

    Seen on Artemis 2.44.0 (docs/ha.md): a broker stopped while its mirror target still retried acknowledgements
    the peer had sent (AckManager, logged ``AMQ229257: IDGenerator has been stopped`` at the stop) comes back
    without them, so it keeps copies of messages a consumer acknowledged on the peer. A restart explains a copy when
    its consumer acknowledged it on the peer from ``slack`` s before ``holder``'s stop began until it ended."""
    problems = []
    for copy in copies:
        user_id = str(copy.get("user_id") or "")
        receipts = sorted(received.get(msg_id_of(user_id), []), key=lambda r: r.get("recv_ts") or 0)
        if not receipts:
            problems.append(f"{user_id or copy.get('message_id')}: never received")
            continue
        first = receipts[0]
        ack = first.get("ack_ts") or 0
        if first.get("site") == holder or not any(
                x["site"] == holder and x["began"] - slack <= ack <= x["stopped"] for x in restarts):
            windows = [(round(x["began"], 3), round(x["stopped"], 3)) for x in restarts if x["site"] == holder]
            problems.append(f"{user_id}: acknowledged on {first.get('site')} at {ack:.3f}, not on the peer of "
                            f"{holder} while {holder} was stopping (its restarts: {windows})")
    return problems


def lose(lab: Lab, site: str = "dc1", keep_running: bool = False) -> None:
    """The state a failover leaves: ``site`` fenced in its broker.xml and down, the other site active. With
    ``keep_running`` the lost broker has come back by itself (its host rebooted), passive."""
    other = next(s for s in SITES if s != site)
    if lab.acceptor_started(site) is not None:
        lab.ensure_roles(other)
        if not keep_running:
            kill_broker(lab, site)
    elif keep_running:
        raise AssertionError(f"{site} is down, expected it running")
    elif _alive(lab, site):
        raise AssertionError(f"{site} does not answer but its broker process lives: {broker_diagnosis(lab, site)}")
    assert lab.persisted_role(site) == "passive" and lab.acceptor_started(other) is True
