"""docs/getting-started.md, run the way a reader runs it (issue 21): every ```bash block of the document, in
order, on a private lab (its own LAB_ROOT in a temporary directory and a free LAB_PORT_BASE, never the lab in
build/lab), with the outcomes the document promises checked after each command.

What is not run is listed in NOT_RUN, by a marker each command of the block starts with, with the reason: a block
the test neither runs nor lists fails the test, so a block added to the document is run or consciously excluded.

How the commands are adapted (a command's text is changed in for_private_lab() only):
- `make lab-up` / `make lab-down` are the private lab's Lab.up() / Lab.down() (lab/lab-up.sh and lab-down.sh
  with the private LAB_ROOT and LAB_PORT_BASE; the make targets would also run pip and Maven);
- for_private_lab(): the document's ports (20xxx, the default LAB_PORT_BASE=20000) move to the private base, the
  way the document says LAB_PORT_BASE moves every port; `build/lab` becomes the private LAB_ROOT and
  `build/evidence` the private evidence directory (CONTINUITY_EVIDENCE_DIR, which the runbooks read too); a
  command that still holds a 20xxx port or a build/lab path after that fails the test;
- the traffic block (a second terminal in the document) runs in the background with the document's own
  --duration (60 s; no shorter one is needed: the swapover it is there for ends about 25 s after it starts, the
  failover and failback run while it goes on, as they would for the reader). The test waits for it before the
  redeploy (a few seconds at most) and checks that it exited 0 and that its clients followed the switch;
- the alias `ap` the document defines is a real bash alias: every later command runs in bash with
  `shopt -s expand_aliases` and the alias definitions seen so far.

Every command runs with the private lab's environment (LAB_ROOT, LAB_PORT_BASE, CONTINUITY_EVIDENCE_DIR) from the
checkout's root, and must exit 0. After each one the sites' roles are read from Jolokia (the client acceptor's
`Started`, as runbook_support.Lab.roles() reads them) and compared with ROLES_AFTER: dc1 active after lab-up,
dc2 after the swapover, dc1 after the kill + failover, dc2 again after the failback with handover. Every
`status.yml` must print the table with the roles just read and `SLA: ok (10 checks)`; the first one must have
the shape of the document's expected output (same header, one row per site, same SLA line). After the failover
dc2's broker.xml fences it (persisted passive); the redeploy reports changed=0 and restarts no broker.

About 3 minutes on the 2-core lab machine (lab-up 40-90 s, the commands about 2 minutes).
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from runbook_support import ROOT, SITES, Lab, reconcile, secrets_in

pytestmark = [pytest.mark.slow]

DOC = ROOT / "docs" / "getting-started.md"
DEFAULT_PORT_BASE = 20000  # the document's ports are the default block (LAB_PORT_BASE unset)

# Commands that are not run: a marker each such command starts with, and why. A block is excluded when every one
# of its commands starts with a marker here; a block mixing excluded and other commands fails the test.
NOT_RUN = {
    "sudo apt-get install": "needs root and the network (Debian packages)",
    "make demo": "the whole demo: `make venv` (PyPI, Maven) and the rehearsal on the default lab in build/lab; "
                 "tests/integration/test_rehearsal.py runs the rehearsal",
    "make test": "the whole suite (this test is part of it)",
    "bash scripts/demo.sh": "the demo without `make venv`: minutes of rehearsal, failover drill and Spark on the "
                            "default lab; tests/integration/test_rehearsal.py runs the rehearsal",
}

# The sites' roles after a command of the document (its text as written there, comments removed). The roles stay
# as they are after any other command. Every entry must match a command of the document.
ACTIVE_DC1 = {"dc1": "active", "dc2": "passive"}
ACTIVE_DC2 = {"dc1": "passive", "dc2": "active"}
ROLES_AFTER = {
    "make lab-up": ACTIVE_DC1,
    "ap playbooks/swapover.yml --check": ACTIVE_DC1,
    "ap playbooks/swapover.yml": ACTIVE_DC2,
    'kill -9 "$(cat build/lab/dc2/data/artemis.pid)"': {"dc1": "passive", "dc2": "unreachable"},
    "ap playbooks/failover.yml -e continuity_lost_site=dc2": {"dc1": "active", "dc2": "unreachable"},
    "ap playbooks/failback.yml -e continuity_returning_site=dc2": ACTIVE_DC1,
    "ap playbooks/failback.yml -e continuity_returning_site=dc2 -e continuity_failback_handover=true": ACTIVE_DC2,
    "make lab-down": {"dc1": "unreachable", "dc2": "unreachable"},
}
STATUS = "ap playbooks/status.yml"
TRAFFIC = "CONTINUITY_TRAFFIC_PASSWORD="
REDEPLOY = "LAB_USE_WAN=true .venv/bin/ansible-playbook -i inventories/lab/hosts.yml playbooks/deploy.yml --diff"
SLA_OK = "SLA: ok (10 checks)"


# ---------------------------------------------------------------------- the document
@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    commands: list = field(default_factory=list)


def fenced_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a markdown text, in order."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{DOC.name}:{start + 1}: unclosed code fence")
        blocks.append(Block(start + 1, m.group(1), "\n".join(body)))
        i += 1
    return blocks


def commands(block_text: str) -> list[str]:
    """The commands of a bash block: backslash continuations joined, comments and blank lines removed."""
    out, current = [], ""
    for raw in block_text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        line = current + line.strip()
        current = ""
        # a trailing comment: ` #` outside quotes (the document's commands quote no `#`)
        line = re.sub(r"\s+#.*$", "", line) if not line.startswith("#") else ""
        if line:
            out.append(" ".join(line.split()))
    assert not current, f"a bash block ends with a backslash continuation: {block_text!r}"
    return out


def bash_blocks() -> list[Block]:
    blocks = fenced_blocks(DOC.read_text())
    shells = [b for b in blocks if b.lang in ("sh", "shell", "console", "zsh")]
    assert not shells, f"{DOC.name}: shell blocks must be ```bash to be tested: lines {[b.line for b in shells]}"
    out = [b for b in blocks if b.lang == "bash"]
    for b in out:
        b.commands = commands(b.text)
    return out


def starts(command: str, marker: str) -> bool:
    """``command`` is ``marker`` or starts with it followed by a space (`make test` is not `make test-lab`)."""
    return command == marker or command.startswith(marker + " ")


def excluded(block: Block) -> str | None:
    """The reason a block is not run, None when it is run; fails on a block mixing both."""
    reasons = [next((why for marker, why in NOT_RUN.items() if starts(c, marker)), None) for c in block.commands]
    if all(r is None for r in reasons):
        return None
    if any(r is None for r in reasons):
        raise AssertionError(f"{DOC.name}:{block.line}: a block mixes commands the test runs and commands it does "
                             f"not run (NOT_RUN): {block.commands}; split the block")
    return "; ".join(dict.fromkeys(reasons))


def expected_status_output() -> list[str]:
    """The document's expected output of status.yml: the untagged block that starts with the table's header."""
    found = [b for b in fenced_blocks(DOC.read_text()) if b.lang == "" and b.text.startswith("site ")]
    assert len(found) == 1, f"{DOC.name}: expected one status output block (starting 'site '), found {len(found)}"
    return found[0].text.splitlines()


def test_every_bash_block_is_run_or_excluded():
    """Offline: the document's blocks are classified, every NOT_RUN marker and ROLES_AFTER command still exists."""
    blocks = bash_blocks()
    assert blocks, f"no ```bash block in {DOC}"
    run = [c for b in blocks if excluded(b) is None for c in b.commands]
    skipped = [c for b in blocks if excluded(b) is not None for c in b.commands]
    stale = [m for m in NOT_RUN if not any(starts(c, m) for c in skipped)]
    assert not stale, f"NOT_RUN markers that match no command of {DOC.name} any more: {stale}"
    missing = [c for c in ROLES_AFTER if c not in run]
    assert not missing, f"ROLES_AFTER commands that {DOC.name} no longer runs: {missing}"
    for c in (STATUS, REDEPLOY):
        assert c in run, f"{DOC.name} no longer runs {c!r}"
    assert sum(c.startswith(TRAFFIC) for c in run) == 1, f"{DOC.name}: expected one traffic command"


# ---------------------------------------------------------------------- adapting a command to the private lab
def for_private_lab(command: str, lab: Lab, evidence: Path) -> str:
    """The document's command as it runs on the private lab: THE ONLY PLACE a command is changed.

    - a port of the default block (20000-20999, LAB_PORT_BASE unset) -> the same offset from the private base;
    - `build/lab` (the default LAB_ROOT) -> the private lab root;
    - `build/evidence` (the default evidence directory) -> the private evidence directory.
    Fails when a command still holds a 20xxx port or a build/lab path afterwards."""
    assert lab.base != DEFAULT_PORT_BASE, "the private lab must not use the document's port block"
    out = re.sub(r"(?<![\w.])20(\d{3})(?!\d)", lambda m: str(lab.base + int(m.group(1))), command)
    out = re.sub(r"(?<![\w./-])build/lab(?![\w-])", str(lab.root), out)
    out = re.sub(r"(?<![\w./-])build/evidence(?![\w-])", str(evidence), out)
    left = re.findall(r"(?<![\w.])20\d{3}(?!\d)", out) + re.findall(r"build/lab", out)
    assert not left, f"not rewritten for the private lab: {left} in {out!r} (extend for_private_lab)"
    return out


def test_rewriting():
    """Offline: for_private_lab on the document's kinds of commands."""
    lab = Lab(Path("/tmp/private-lab"), base=27000)
    ev = Path("/tmp/ev")
    assert (for_private_lab("x --url dc1=amqp://127.0.0.1:20616 --evidence-dir build/evidence", lab, ev)
            == "x --url dc1=amqp://127.0.0.1:27616 --evidence-dir /tmp/ev")
    assert for_private_lab('kill -9 "$(cat build/lab/dc2/data/artemis.pid)"', lab, ev) == \
        'kill -9 "$(cat /tmp/private-lab/dc2/data/artemis.pid)"'
    assert for_private_lab("ap playbooks/status.yml -e x=2.44.0", lab, ev) == "ap playbooks/status.yml -e x=2.44.0"
    with pytest.raises(AssertionError, match="not rewritten"):
        for_private_lab("cat build/labx/20616", lab, ev)


# ---------------------------------------------------------------------- reading outcomes
def status_report(output: str) -> list[str]:
    """The lines status.yml's `Report` task printed (the msg list of the YAML result callback)."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("TASK [Report]")), None)
    assert start is not None, f"no Report task in the status output:\n{output[-3000:]}"
    body = []
    for line in lines[start + 2:]:  # after the task line and `ok: [localhost] =>`
        if not line.strip():
            break
        body.append(line)
    msg = yaml.safe_load("\n".join(body))["msg"]
    return [msg] if isinstance(msg, str) else list(msg)


def columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def check_status(report: list[str], roles: dict, doc_lines: list[str] | None) -> None:
    """The table (one row per site with the roles read from Jolokia) and the SLA line; with ``doc_lines``, also the
    shape of the document's expected output."""
    assert report[-1] == SLA_OK, f"status verdict {report[-1]!r}, the document promises {SLA_OK!r}:\n" + \
        "\n".join(report)
    header, rows = columns(report[0]), [columns(r) for r in report[1:-1]]
    assert header[:2] == ["site", "role"], report
    assert {r[0]: r[1] for r in rows} == roles, f"status table roles vs Jolokia {roles}:\n" + "\n".join(report)
    if doc_lines is not None:
        assert columns(doc_lines[0]) == header, f"header: document {doc_lines[0]!r}, real {report[0]!r}"
        assert [len(columns(r)) for r in doc_lines[1:-1]] == [len(r) for r in rows] == [len(header)] * len(SITES), \
            f"rows: document\n{chr(10).join(doc_lines)}\nreal\n" + "\n".join(report)
        assert [columns(r)[:2] for r in doc_lines[1:-1]] == [r[:2] for r in rows], (doc_lines, report)
        assert doc_lines[-1] == report[-1]


def wait_roles(lab: Lab, want: dict, timeout: float = 20) -> dict:
    """The roles as Lab.roles() reads them; a killed broker may answer for a moment, so wait up to ``timeout``."""
    deadline = time.monotonic() + timeout
    roles = lab.roles()
    while roles != want and time.monotonic() < deadline:
        time.sleep(0.5)
        roles = lab.roles()
    return roles


def broker_pids(lab: Lab) -> dict:
    return {s: lab.broker_pid(s) for s in SITES}


# ---------------------------------------------------------------------- the walk-through
@dataclass
class Reader:
    """A reader at a shell in the checkout's root, with the private lab's environment."""

    lab: Lab
    evidence: Path
    aliases: list = field(default_factory=list)
    log: list = field(default_factory=list)

    @property
    def env(self) -> dict:
        return {**self.lab.env, "CONTINUITY_EVIDENCE_DIR": str(self.evidence)}

    def script(self, command: str) -> str:
        return "\n".join(["set -e", "shopt -s expand_aliases", *self.aliases, command]) + "\n"

    def run(self, command: str, timeout: float = 900) -> str:
        t0 = time.monotonic()
        res = subprocess.run(["bash", "-c", self.script(command)], capture_output=True, text=True, env=self.env,
                             cwd=ROOT, timeout=timeout)
        out = res.stdout + res.stderr
        self.log.append((command, res.returncode, round(time.monotonic() - t0, 1)))
        assert res.returncode == 0, f"`{command}` failed (rc {res.returncode}):\n{out[-4000:]}"
        leaked = secrets_in(out)
        assert not leaked, f"`{command}` printed lab secrets {leaked}"
        return out

    def start(self, command: str, log: Path) -> subprocess.Popen:
        """A command in a second terminal: in the background, its output in ``log``."""
        with log.open("w") as fh:
            proc = subprocess.Popen(["bash", "-c", self.script(command)], stdout=fh, stderr=subprocess.STDOUT,
                                    env=self.env, cwd=ROOT, start_new_session=True)
        self.log.append((command + " &", None, 0.0))
        return proc


def check_traffic(proc: subprocess.Popen, log: Path, evidence: Path, command: str) -> None:
    """The traffic ended by itself (its duration), exit 0, complete ledgers; its clients followed the switch:
    messages received from dc1 and from dc2."""
    argv = shlex.split(command)
    duration, run_id = int(argv[argv.index("--duration") + 1]), argv[argv.index("--run-id") + 1]
    try:
        rc = proc.wait(duration + 120)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        raise AssertionError(f"traffic still running {duration + 120} s after its start:\n"
                             f"{log.read_text()[-3000:]}") from None
    out = log.read_text()
    assert rc == 0, f"traffic rc {rc}:\n{out[-3000:]}"
    assert f"stopped: duration {duration}s reached" in out, out[-2000:]
    run_dir = evidence / run_id
    sent = sorted(run_dir.glob("sent-*.jsonl"))
    assert sent, f"no sent ledger in {run_dir}"
    prefix = sent[0].name[len("sent-"):].rsplit("-p", 1)[0]
    rec = reconcile(run_dir, prefix, run_id)
    summary = rec.summary()
    print(f"traffic {run_id}: {summary}")
    assert not rec.truncated and rec.received, summary
    assert set(rec.received_by_site) == set(SITES), f"the clients did not follow the switch: {summary}"


def test_getting_started(tmp_path):
    """The document's commands in order on a private lab, with the outcomes it promises."""
    blocks = bash_blocks()
    doc_status = expected_status_output()
    lab = Lab(tmp_path / "lab")
    evidence = tmp_path / "evidence"
    reader = Reader(lab, evidence)
    roles = {s: "unreachable" for s in SITES}
    statuses, traffic = 0, None
    t_start = time.monotonic()

    def finish(running: tuple | None) -> None:
        if running:
            t0 = time.monotonic()
            check_traffic(*running)
            reader.log.append(("(the traffic ended: waited for it)", 0, round(time.monotonic() - t0, 1)))
    try:
        for block in blocks:
            why = excluded(block)
            if why is not None:
                reader.log.append((f"{DOC.name}:{block.line} not run: {block.commands} ({why})", None, 0.0))
                continue
            for doc_command in block.commands:
                command = for_private_lab(doc_command, lab, evidence)
                if doc_command == "make lab-up":
                    t0 = time.monotonic()
                    lab.up()
                    reader.log.append(("make lab-up -> lab/lab-up.sh (private lab)", 0,
                                       round(time.monotonic() - t0, 1)))
                elif doc_command == "make lab-down":
                    traffic = finish(traffic)
                    t0 = time.monotonic()
                    lab.down()
                    reader.log.append(("make lab-down -> lab/lab-down.sh (private lab)", 0,
                                       round(time.monotonic() - t0, 1)))
                elif doc_command.startswith("alias "):
                    reader.aliases.append(command)
                    reader.log.append((command + "  (kept for the later commands)", None, 0.0))
                elif doc_command.startswith(TRAFFIC):
                    assert not traffic, "a second traffic command"
                    log = tmp_path / "traffic.log"
                    traffic = (reader.start(command, log), log, evidence, command)
                    time.sleep(3)  # the reader watches it connect before going back to the first terminal
                elif doc_command == REDEPLOY:
                    traffic = finish(traffic)  # it ends by itself (--duration) before the reader redeploys
                    pids = broker_pids(lab)
                    out = reader.run(command)
                    recap = re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", out, re.M)
                    assert recap and all(n == "0" for _, n in recap), f"the redeploy changed something: {recap}"
                    assert broker_pids(lab) == pids, f"the redeploy restarted brokers: {pids} -> {broker_pids(lab)}"
                else:
                    out = reader.run(command)
                    if doc_command == STATUS:
                        now = wait_roles(lab, roles)
                        check_status(status_report(out), now, doc_status if statuses == 0 else None)
                        statuses += 1
                        assert sorted(evidence.glob("status-*/lag.jsonl")), "status.yml wrote no lag.jsonl"
                if doc_command in ROLES_AFTER:
                    roles = ROLES_AFTER[doc_command]
                now = wait_roles(lab, roles)
                assert now == roles, f"after `{doc_command}`: roles {now}, expected {roles}"
                if doc_command.startswith("ap playbooks/failover.yml"):
                    # "autoStart=false is written to build/lab/dc2/etc/broker.xml: it will come back passive"
                    assert lab.persisted_role("dc2") == "passive", "failover did not fence dc2 in broker.xml"
        assert statuses == 2, f"status.yml ran {statuses} times"
    finally:
        if traffic:
            traffic[0].send_signal(signal.SIGTERM)
            traffic[0].wait(60)
        lab.down()
        print(f"getting-started walk-through: {round(time.monotonic() - t_start)} s")
        for command, rc, secs in reader.log:
            print(f"  [{'-' if rc is None else rc}] {secs:>6} s  {command}")


def test_addresses_table_moves_with_the_port_base(tmp_path):
    """Offline: the document's address table, moved by for_private_lab, is what the lab's plan gives a base."""
    from continuity_lab import labctl

    text = DOC.read_text()
    section = text[text.index("## The lab's addresses"):text.index("## Each runbook by hand")]
    cells = [[c.strip().strip("`") for c in r.strip().strip("|").split("|")] for r in section.splitlines()
             if r.startswith("| ") and not r.startswith("| |")]  # the rows under the header `| | dc1 | dc2 |`
    lab = Lab(tmp_path / "lab", base=27000)
    moved = {row[0].split()[0]: [for_private_lab(c, lab, tmp_path) for c in row[1:]] for row in cells}
    plan = labctl.make_plan({"LAB_ROOT": str(lab.root), "LAB_PORT_BASE": str(lab.base)})
    assert moved == {
        "Jolokia": [f"http://127.0.0.1:{plan.sites[s].http}/console/jolokia" for s in SITES],
        "clients": [f"amqp://127.0.0.1:{plan.sites[s].client}" for s in SITES],
        "mirror": [str(plan.sites[s].mirror) for s in SITES],
        "instance": [str(plan.root / s) for s in SITES],
    }, moved
