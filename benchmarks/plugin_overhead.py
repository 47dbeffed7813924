"""Benchmark (not a test): the continuity broker plugin's overhead on broker throughput (issue 17).

Issue 17: "broker throughput with and without the plugin at 1,000 and 5,000 msg/s" and "plugin overhead <= 5 % of
broker throughput at 5,000 msg/s". Deploys two private two-site labs of real Apache Artemis with the collection (the
lab inventory, playbooks/deploy.yml + initial_roles.yml, dual AMQP mirror dc1 <-> dc2): one with the plugin as the lab
has it, one with `broker_continuity_plugin: {enabled: false}` as an extra-vars override (nothing else differs; the
script checks that the first has the plugin's MBean on both brokers and the second has none). Then it drives load on
dc1 with Artemis's own load tool, `artemis perf client` of the installed distribution (persistent messages on the
`orders` queue, producers and consumers in one JVM), alternating the two labs run by run:

* at each fixed target rate (--rates, default 1,000 and 5,000 msg/s): what the tool sent and received per second,
  its latency percentiles, and the **broker CPU seconds per 1,000 messages** (utime + stime of the broker's java
  process from /proc/<pid>/stat, dc1 = the source: sends, deliveries, acks; dc2 = the mirror target: mirrored
  arrivals and acks), over a window inside the tool's measured period, divided by the messages dc1's queue took in
  that window (its MessagesAdded, read over Jolokia at both ends of the window);
* unthrottled (no --rate): the maximum throughput, and its CPU per 1,000 messages.

With a fixed target rate the throughput equals the rate whenever the broker keeps up, so there the overhead shows in
the CPU each message costs (the capacity the plugin takes); the unthrottled runs show it as throughput. Each run's
window also records the CPU of the load tool and of everything else on the machine (/proc/stat minus the three
processes), so a run disturbed by other work can be told apart.

    .venv/bin/python benchmarks/plugin_overhead.py --reps 4 --max-load 1.0 --profile   # BENCH=plugin_overhead
    .venv/bin/python benchmarks/plugin_overhead.py --reps 1 --window 8 --warmup 4   # a quick look

By default the mirror connects straight to the peer's mirror acceptor (LAB_USE_WAN=false): the lab's WAN emulator is
a Python TCP relay that would compete for the same cores; --wan puts it in the path as the lab does. Each lab gets
its own root under build/bench-plugin-overhead/ and its own port block (--bases, checked free first); both are taken
down at the end, whatever happens. --max-load waits (after the deploy and the labs' warm-up) until the 1-minute load
average is below it; before each run the script waits (up to --run-wait-minutes) until other work uses fewer than
--max-other-cores. --profile adds one run of the plugin lab under JFR (1 ms Java sampling on both brokers, not
measured for CPU) and reports the share of the brokers' Java execution samples inside the plugin, by hook. Every run
and the summary (medians, min-max, overhead per repetition pair) go to <root>/<UTC stamp>/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from continuity_lab import labctl

REPO = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
QUEUE = "orders"  # an anycast queue both lab sites define (inventories/lab/group_vars/artemis.yml)
PLUGIN_OFF = {"broker_continuity_plugin": {"enabled": False}}
CONFIGS = ("on", "off")


# --- machine -------------------------------------------------------------------------------------------------------
def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def proc_cpu(pid: int) -> float:
    """utime + stime of one process, seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy (all cores) since boot: /proc/stat minus idle and iowait."""
    vals = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(vals[:8]) - vals[3] - vals[4]) / CLK_TCK


def wait_quiet(max_load: float, max_minutes: float) -> list[float]:
    """Wait until the 1-minute load average is below max_load (at most max_minutes); returns the load then."""
    deadline = time.monotonic() + max_minutes * 60
    while True:
        load = loadavg()
        if load[0] < max_load or time.monotonic() >= deadline:
            return load
        print(f"  waiting for a quiet machine: load {load} (want 1-min < {max_load})", flush=True)
        time.sleep(30)


def others_busy(pids: list[int], seconds: float = 3.0) -> float:
    """Cores the machine spent on anything but these processes (the benchmark's idle brokers) over a few seconds."""
    def ours() -> float:
        return sum(proc_cpu(p) for p in pids)

    busy0, ours0, t0 = machine_busy(), ours(), time.monotonic()
    time.sleep(seconds)
    return ((machine_busy() - busy0) - (ours() - ours0)) / (time.monotonic() - t0)


def wait_others_quiet(pids: list[int], max_cores: float, max_minutes: float) -> tuple[float, float]:
    """Before a run: wait until other work uses less than max_cores; returns (cores then, seconds waited)."""
    t0 = time.monotonic()
    while True:
        cores = others_busy(pids)
        if cores < max_cores or time.monotonic() - t0 > max_minutes * 60:
            return round(cores, 2), round(time.monotonic() - t0, 1)
        time.sleep(10)


# --- labs ----------------------------------------------------------------------------------------------------------
class BenchLab:
    def __init__(self, name: str, root: Path, base: int, plugin: bool, wan: bool, version: str):
        self.name, self.root, self.base, self.plugin, self.wan = name, root, base, plugin, wan
        self.env = {**os.environ, "LAB_ROOT": str(root), "LAB_PORT_BASE": str(base), "LAB_ARTEMIS_VERSION": version}
        self.plan = labctl.make_plan(self.env)
        self.endpoints: dict[str, Any] = {}
        self.pids: dict[str, int] = {}
        self.clients: dict[str, Any] = {}

    def up(self, reuse: bool = False) -> None:
        endpoints = self.root / "endpoints.json"
        if reuse and endpoints.exists():
            self.endpoints = json.loads(endpoints.read_text())
            if all(labctl._alive(int(i["pid"])) for i in self.endpoints["sites"].values()):
                self._attach()
                return
        self.root.mkdir(parents=True, exist_ok=True)
        if self.wan:
            labctl.wan_up(self.plan)
        env = {**labctl.plan_env(self.plan), "LAB_USE_WAN": "true" if self.wan else "false"}
        extra: list[str] = []
        if not self.plugin:
            override = self.root / "plugin-off.json"
            override.write_text(json.dumps(PLUGIN_OFF))
            extra = ["-e", f"@{override}"]
        for playbook in ("deploy.yml", "initial_roles.yml"):
            log = self.root / f"{Path(playbook).stem}.log"
            argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(self.plan.inventory),
                    str(REPO / "playbooks" / playbook), *extra]
            with open(log, "w") as out:
                rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                    timeout=900).returncode
            if rc != 0:
                tail = "\n".join(log.read_text().splitlines()[-30:])
                raise SystemExit(f"{self.name}: playbooks/{playbook} failed (rc {rc}), log {log}\n{tail}")
        self.endpoints = labctl.register(self.plan)
        self._attach()

    def _attach(self) -> None:
        for site, info in self.endpoints["sites"].items():
            self.pids[site] = int(info["pid"])
            comm = Path(f"/proc/{self.pids[site]}/comm").read_text().strip()
            if comm != "java":
                raise SystemExit(f"{self.name} {site}: pid {self.pids[site]} is {comm!r}, not the broker's java")
            self.clients[site] = labctl._client(info["jolokia_url"])
        self.check_plugin()

    def check_plugin(self) -> None:
        """The configuration under test is the one deployed: the plugin's MBean on both brokers, or on neither."""
        for site, client in self.clients.items():
            xml = (self.root / site / "etc" / "broker.xml").read_text()
            try:
                role = client.read(f'org.apache.activemq.artemis:broker="{site}",component=continuity', "SiteRole")
            except Exception:  # an MBean that does not exist: the expected answer without the plugin
                role = None
            has = role is not None
            if has != self.plugin or ("ContinuityPlugin" in xml) != self.plugin:
                raise SystemExit(f"{self.name} {site}: plugin expected {self.plugin}, MBean role {role!r}, "
                                 f"broker.xml {'has' if 'ContinuityPlugin' in xml else 'has no'} ContinuityPlugin")

    def down(self) -> None:
        labctl.down(self.plan)

    def queue(self, site: str, name: str = QUEUE) -> str:
        return (f'org.apache.activemq.artemis:broker="{site}",component=addresses,address="{name}",'
                f'subcomponent=queues,routing-type="anycast",queue="{name}"')

    def snf(self) -> str:
        name = "$ACTIVEMQ_ARTEMIS_MIRROR_DC2"
        return self.queue("dc1", name)

    def cpu(self) -> dict[str, float]:
        return {site: proc_cpu(pid) for site, pid in self.pids.items()}

    def settle(self, timeout: float = 120) -> dict[str, Any]:
        """After a run: dc1's queue empty (purged if the tool left messages), the mirror drained, the brokers idle."""
        t0 = time.monotonic()
        left = self.clients["dc1"].read(self.queue("dc1"), "MessageCount")
        if left:
            self.clients["dc1"].exec(self.queue("dc1"), "removeAllMessages()")
        while time.monotonic() - t0 < timeout:
            snf = self.clients["dc1"].read(self.snf(), "MessageCount")
            dc2 = self.clients["dc2"].read(self.queue("dc2"), "MessageCount")
            if snf == 0 and dc2 == 0:
                break
            time.sleep(0.5)
        # idle: both brokers below 5 % of a core over one second
        while time.monotonic() - t0 < timeout:
            a = self.cpu()
            time.sleep(1.0)
            b = self.cpu()
            if all(b[s] - a[s] < 0.05 for s in a):
                break
        return {"left_in_queue": left, "settle_s": round(time.monotonic() - t0, 1)}


# --- one run -------------------------------------------------------------------------------------------------------
def perf_client(lab: BenchLab, args: argparse.Namespace, rate: int | None, duration: float, warmup: float,
                report: Path) -> subprocess.Popen:
    home = Path(lab.endpoints["artemis_home"])
    port = lab.endpoints["sites"]["dc1"]["acceptors"]["artemis"]
    url = f"tcp://127.0.0.1:{port}" if args.protocol == "CORE" else f"amqp://127.0.0.1:{port}"
    argv = [str(home / "bin" / "artemis"), "perf", "client", "--silent", "--url", url,
            "--user", labctl.ADMIN_USER, "--password", labctl.ADMIN_PASSWORD, "--protocol", args.protocol,
            "--persistent", "--producers", str(args.producers), "--consumers", str(args.consumers),
            "--max-pending", str(args.max_pending), "--message-size", str(args.message_size),
            "--duration", str(int(duration)), "--warmup", str(int(warmup)), "--json", str(report),
            f"queue://{QUEUE}"]
    if rate:
        argv[argv.index("--duration"):argv.index("--duration")] = ["--rate", str(rate)]
    env = {**os.environ, "JAVA_ARGS": args.client_java_args}
    env.pop("ARTEMIS_INSTANCE", None)
    return subprocess.Popen(argv, stdout=open(report.with_suffix(".log"), "w"), stderr=subprocess.STDOUT, env=env,
                            cwd=lab.root, start_new_session=True)


def _report_summary(path: Path) -> dict[str, Any]:
    """The tool's own figures from artemis perf client's JSON report (latencies there are in microseconds):
    sent / received per second over its measured (non warm-up) intervals, and its summary's send and transfer
    (producer -> consumer) latency percentiles, in milliseconds."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"no report: {exc}"}
    intervals = [x for x in data if x.get("sampleType") == "interval"]
    measured = [x for x in intervals if not x.get("warmup")]
    summary = next((x for x in data if x.get("sampleType") == "summary"), {})
    out: dict[str, Any] = {"result": summary.get("result"), "total_sent": summary.get("totalSent"),
                           "total_received": summary.get("totalReceived")}
    if measured:
        before = [x for x in intervals if x.get("warmup")]
        start = before[-1]["time"] if before else measured[0]["time"] - 1000
        span = (measured[-1]["time"] - start) / 1000
        out["measured_s"] = round(span, 1)
        out["sent_per_s"] = round(sum(x.get("sent", 0) for x in measured) / span, 1)
        out["received_per_s"] = round(sum(x.get("received", 0) for x in measured) / span, 1)
    for key, name in (("totalTransferTime", "transfer_ms"), ("totalSendTime", "send_ms")):
        hist = summary.get(key) or {}
        out[name] = {q: round(float(hist[q]) / 1000, 2) for q in ("50", "90", "99", "99.9", "max") if q in hist}
    return out


def one_run(lab: BenchLab, args: argparse.Namespace, rate: int | None, label: str, out: Path,
            all_pids: list[int]) -> dict[str, Any]:
    warmup, window = args.warmup, args.window
    others_before, waited = wait_others_quiet(all_pids, args.max_other_cores, args.run_wait_minutes)
    duration = warmup + window + 2 * args.margin
    report = out / f"{label}.json"
    load_before = loadavg()
    dc1 = lab.clients["dc1"]
    proc = perf_client(lab, args, rate, duration, warmup, report)
    t_launch = time.monotonic()
    try:
        # The tool's clock starts once its JVM is up and connected (~1-2 s): start the window after its warm-up plus
        # a margin, end it a margin before its duration ends.
        time.sleep(warmup + args.margin + args.jvm_start)
        if proc.poll() is not None:
            raise RuntimeError(f"perf client exited early (rc {proc.returncode}): {report.with_suffix('.log')}")
        added0, busy0, cpu0, client0, t0 = (dc1.read(lab.queue("dc1"), "MessagesAdded"), machine_busy(), lab.cpu(),
                                             proc_cpu(proc.pid), time.monotonic())
        time.sleep(window)
        added1, busy1, cpu1, client1, t1 = (dc1.read(lab.queue("dc1"), "MessagesAdded"), machine_busy(), lab.cpu(),
                                             proc_cpu(proc.pid), time.monotonic())
        rc = proc.wait(timeout=duration + 120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    elapsed = t1 - t0
    messages = added1 - added0
    broker = {s: cpu1[s] - cpu0[s] for s in cpu0}
    client = client1 - client0
    other = (busy1 - busy0) - sum(broker.values()) - client
    per_k = {s: (v / messages * 1000 if messages else None) for s, v in broker.items()}
    settle = lab.settle()
    tool = _report_summary(report)
    return {
        "lab": lab.name, "plugin": lab.plugin, "target_rate": rate, "label": label, "rc": rc,
        "started": datetime.now(UTC).isoformat(timespec="seconds"), "load_before": load_before,
        "other_cores_before": others_before, "waited_for_quiet_s": waited,
        "window_s": round(elapsed, 2), "messages_in_window": messages,
        "broker_msgs_per_s": round(messages / elapsed, 1),
        "broker_cpu_s": {s: round(v, 2) for s, v in broker.items()},
        "cpu_s_per_1000_msgs": {s: (round(v, 4) if v is not None else None) for s, v in per_k.items()},
        "cpu_s_per_1000_msgs_both": round(sum(broker.values()) / messages * 1000, 4) if messages else None,
        "client_cpu_cores": round(client / elapsed, 2), "other_cpu_cores": round(other / elapsed, 2),
        "broker_cpu_cores": {s: round(v / elapsed, 2) for s, v in broker.items()},
        "tool": tool, **settle, "t_launch_to_window": round(t0 - t_launch, 1),
    }


# --- where the plugin's time goes -----------------------------------------------------------------------------------
def _jfc(out: Path) -> Path:
    """The JDK's `profile` JFR settings with Java method sampling every 1 ms (default 10-20 ms: too few samples)."""
    java_home = Path(subprocess.run(["java", "-XshowSettings:properties", "-version"], capture_output=True,
                                    text=True).stderr.split("java.home = ", 1)[1].splitlines()[0].strip())
    text = (java_home / "lib" / "jfr" / "profile.jfc").read_text()
    marker = '<setting name="period" control="method-sampling-java-interval">'
    start = text.index(marker) + len(marker)
    path = out / "sampling-1ms.jfc"
    path.write_text(text[:start] + "1 ms" + text[text.index("<", start):])
    return path


def plugin_share(jfr_file: Path) -> dict[str, Any]:
    """Share of the JVM's Java execution samples with a plugin frame on the stack, by hook (the outermost plugin
    frame; a hook's measuring lambda counts under the hook that runs it) and by innermost method."""
    res = subprocess.run(["jfr", "print", "--json", "--stack-depth", "512", "--events", "jdk.ExecutionSample",
                          str(jfr_file)], capture_output=True, text=True, timeout=300)
    events = json.loads(res.stdout)["recording"]["events"]
    hooks: dict[str, int] = {}
    tops: dict[str, int] = {}
    plugin = 0
    for e in events:
        trace = e["values"].get("stackTrace") or {}
        names = [f["method"]["type"]["name"].replace("/", ".") + "." + f["method"]["name"]
                 for f in trace.get("frames") or []]
        mine = [n for n in names if n.startswith("io.continuity.")]
        if not mine:
            continue
        plugin += 1
        named = [n for n in mine if "$$Lambda" not in n and not n.endswith((".guarded", ".run"))]
        hook = (named or mine)[-1].removeprefix("io.continuity.artemis.plugin.")
        hooks[hook] = hooks.get(hook, 0) + 1
        top = names[0].removeprefix("io.continuity.artemis.plugin.")
        tops[top] = tops.get(top, 0) + 1
    total = len(events)
    return {"samples": total, "plugin_samples": plugin,
            "plugin_share_pct": round(plugin / total * 100, 2) if total else None,
            "by_hook": dict(sorted(hooks.items(), key=lambda kv: -kv[1])),
            "top_frames": dict(sorted(tops.items(), key=lambda kv: -kv[1])[:12])}


def profile(lab: BenchLab, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """JFR on both brokers of the plugin lab during one run at --profile-rate (not a measured run: JFR costs)."""
    jfc = _jfc(out)
    seconds = int(args.window)
    proc = perf_client(lab, args, args.profile_rate, args.warmup + seconds + 2 * args.margin + args.jvm_start,
                       args.warmup, out / "profile-run.json")
    try:
        time.sleep(args.warmup + args.margin + args.jvm_start)
        files = {}
        for site, pid in lab.pids.items():
            files[site] = out / f"profile-{site}.jfr"
            subprocess.run(["jcmd", str(pid), "JFR.configure", "stackdepth=512"], capture_output=True, timeout=30)
            subprocess.run(["jcmd", str(pid), "JFR.start", "name=plugin-overhead", f"settings={jfc}",
                            f"duration={seconds}s", f"filename={files[site]}"], capture_output=True, timeout=30,
                           check=True)
        time.sleep(seconds + 3)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lab.settle()
    return {"rate": args.profile_rate, "seconds": seconds,
            "brokers": {site: plugin_share(path) for site, path in files.items()}}


# --- summary -------------------------------------------------------------------------------------------------------
def spread(values: list[float]) -> dict[str, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"n": 0, "median": None, "min": None, "max": None, "mean": None, "stdev": None}
    return {"n": len(vals), "median": round(statistics.median(vals), 2), "min": round(min(vals), 2),
            "max": round(max(vals), 2), "mean": round(statistics.fmean(vals), 2),
            "stdev": round(statistics.stdev(vals), 2) if len(vals) > 1 else 0.0}


def summarize(runs: list[dict[str, Any]], rates: list[int | None]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for rate in rates:
        key = str(rate) if rate else "max"
        by = {c: [r for r in runs if r["target_rate"] == rate and r["lab"] == c] for c in CONFIGS}
        pairs = list(zip(by["on"], by["off"], strict=False))
        cpu_over = [(on["cpu_s_per_1000_msgs_both"] / off["cpu_s_per_1000_msgs_both"] - 1) * 100
                    for on, off in pairs if on["cpu_s_per_1000_msgs_both"] and off["cpu_s_per_1000_msgs_both"]]
        cpu_over_dc1 = [(on["cpu_s_per_1000_msgs"]["dc1"] / off["cpu_s_per_1000_msgs"]["dc1"] - 1) * 100
                        for on, off in pairs if on["cpu_s_per_1000_msgs"]["dc1"] and off["cpu_s_per_1000_msgs"]["dc1"]]
        cpu_over_dc2 = [(on["cpu_s_per_1000_msgs"]["dc2"] / off["cpu_s_per_1000_msgs"]["dc2"] - 1) * 100
                        for on, off in pairs if on["cpu_s_per_1000_msgs"]["dc2"] and off["cpu_s_per_1000_msgs"]["dc2"]]
        thr_over = [(1 - on["broker_msgs_per_s"] / off["broker_msgs_per_s"]) * 100
                    for on, off in pairs if off["broker_msgs_per_s"]]
        summary[key] = {
        **{f"{c}_msgs_per_s": spread([r["broker_msgs_per_s"] for r in by[c]]) for c in CONFIGS},
        **{f"{c}_tool_sent_per_s": spread([r["tool"].get("sent_per_s") for r in by[c]]) for c in CONFIGS},
        **{f"{c}_tool_received_per_s": spread([r["tool"].get("received_per_s") for r in by[c]]) for c in CONFIGS},
        **{f"{c}_transfer_p50_ms": spread([r["tool"].get("transfer_ms", {}).get("50") for r in by[c]])
           for c in CONFIGS},
        **{f"{c}_transfer_p99_ms": spread([r["tool"].get("transfer_ms", {}).get("99") for r in by[c]])
           for c in CONFIGS},
        **{f"{c}_send_p99_ms": spread([r["tool"].get("send_ms", {}).get("99") for r in by[c]]) for c in CONFIGS},
            **{f"{c}_cpu_s_per_1000": spread([r["cpu_s_per_1000_msgs_both"] for r in by[c]]) for c in CONFIGS},
            **{f"{c}_cpu_s_per_1000_dc1": spread([r["cpu_s_per_1000_msgs"]["dc1"] for r in by[c]]) for c in CONFIGS},
            **{f"{c}_cpu_s_per_1000_dc2": spread([r["cpu_s_per_1000_msgs"]["dc2"] for r in by[c]]) for c in CONFIGS},
            "cpu_overhead_pct": spread(cpu_over), "cpu_overhead_pct_dc1": spread(cpu_over_dc1),
            "cpu_overhead_pct_dc2": spread(cpu_over_dc2), "throughput_overhead_pct": spread(thr_over),
        }
    return summary


def check_bases(bases: list[int]) -> None:
    for base in bases:
        taken = [p for p in labctl.block_ports(base) if not labctl._port_free(p)]
        if taken:
            raise SystemExit(f"port base {base}: ports {taken} are in use; pick other --bases")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="1000,5000", help="target rates, msg/s; an unthrottled run is added")
    ap.add_argument("--no-max", action="store_true", help="skip the unthrottled runs")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of every (rate, plugin) run, alternating")
    ap.add_argument("--warmup", type=float, default=10, help="the tool's warm-up seconds (not measured)")
    ap.add_argument("--window", type=float, default=30, help="measured seconds per run")
    ap.add_argument("--margin", type=float, default=2, help="seconds between the tool's warm-up/end and the window")
    ap.add_argument("--jvm-start", type=float, default=2, help="seconds the tool's JVM takes to start and connect")
    ap.add_argument("--lab-warmup", type=float, default=30, help="unthrottled seconds per lab before measuring (JIT)")
    ap.add_argument("--protocol", default="CORE", choices=["CORE", "AMQP"])
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--max-pending", type=int, default=100, help="sends in flight per producer (async durable sends)")
    ap.add_argument("--message-size", type=int, default=1024)
    ap.add_argument("--client-java-args", default="-Xms256m -Xmx512m -XX:+UseG1GC")
    ap.add_argument("--bases", default="29000,30000", help="port bases of the labs with and without the plugin")
    ap.add_argument("--root", type=Path, default=REPO / "build" / "bench-plugin-overhead")
    ap.add_argument("--version", default=labctl.DEFAULT_VERSION)
    ap.add_argument("--wan", action="store_true", help="route the mirrors through the lab's WAN emulator")
    ap.add_argument("--max-load", type=float, default=None,
                    help="wait until the 1-minute load average is below this before measuring")
    ap.add_argument("--wait-minutes", type=float, default=60)
    ap.add_argument("--max-other-cores", type=float, default=0.3,
                    help="before each run, wait (--run-wait-minutes at most) until other work uses fewer cores")
    ap.add_argument("--run-wait-minutes", type=float, default=5)
    ap.add_argument("--profile", action="store_true",
                    help="after the measured runs, one JFR-profiled run of the plugin lab: the plugin's share of the "
                         "brokers' Java execution samples, by hook")
    ap.add_argument("--profile-rate", type=int, default=5000)
    ap.add_argument("--keep", action="store_true", help="leave the labs running (lab-down them yourself)")
    ap.add_argument("--reuse", action="store_true", help="use labs a --keep run left running")
    args = ap.parse_args()

    rates: list[int | None] = [int(r) for r in args.rates.split(",") if r]
    if not args.no_max:
        rates.append(None)
    bases = [int(b) for b in args.bases.split(",")]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.root / stamp
    out.mkdir(parents=True, exist_ok=True)
    labs = {"on": BenchLab("on", args.root / "lab-on", bases[0], True, args.wan, args.version),
            "off": BenchLab("off", args.root / "lab-off", bases[1], False, args.wan, args.version)}
    for lab in labs.values():
        if lab.root.exists() and not args.reuse:
            lab.down()  # a lab this script left running (--keep)
            shutil.rmtree(lab.root)
    if not args.reuse:
        check_bases(bases)
    runs: list[dict[str, Any]] = []
    meta: dict[str, Any] = {"command": " ".join(sys.argv), "started": datetime.now(UTC).isoformat(timespec="seconds"),
                            "nproc": os.cpu_count(), "load_at_start": loadavg()}
    try:
        for lab in labs.values():
            t = time.monotonic()
            lab.up(args.reuse)
            print(f"lab {lab.name}: up in {time.monotonic() - t:.0f} s, base {lab.base}, pids {lab.pids}", flush=True)
        for lab in labs.values():  # JIT warm-up of brokers (and their mirrors), not measured
            if args.lab_warmup > 0:
                proc = perf_client(lab, args, None, args.lab_warmup, 0, out / f"warmup-{lab.name}.json")
                proc.wait(timeout=args.lab_warmup + 120)
                lab.settle()
        if args.max_load is not None:
            meta["load_when_measuring_started"] = wait_quiet(args.max_load, args.wait_minutes)
        meta["measuring_started"] = datetime.now(UTC).isoformat(timespec="seconds")
        all_pids = [pid for lab in labs.values() for pid in lab.pids.values()]
        for rep in range(args.reps):
            order = CONFIGS if rep % 2 == 0 else CONFIGS[::-1]
            for rate in rates:
                for name in order:
                    label = f"{name}-{rate or 'max'}-r{rep + 1}"
                    run = one_run(labs[name], args, rate, label, out, all_pids)
                    runs.append(run)
                    tool = run["tool"]
                    print(f"{label}: broker {run['broker_msgs_per_s']} msg/s (tool sent {tool.get('sent_per_s')} "
                          f"received {tool.get('received_per_s')}/s, transfer p50/p99 "
                          f"{tool.get('transfer_ms', {}).get('50')}/{tool.get('transfer_ms', {}).get('99')} ms), "
                          f"cpu s/1k msgs dc1 {run['cpu_s_per_1000_msgs']['dc1']} dc2 "
                          f"{run['cpu_s_per_1000_msgs']['dc2']}, client {run['client_cpu_cores']} other "
                          f"{run['other_cpu_cores']} cores (before {run['other_cores_before']}, waited "
                          f"{run['waited_for_quiet_s']} s), load {run['load_before']}", flush=True)
        if args.profile:
            meta["profile"] = profile(labs["on"], args, out)
            for site, share in meta["profile"]["brokers"].items():
                print(f"profile {site}: plugin frames in {share['plugin_share_pct']} % of "
                      f"{share['samples']} Java samples; by hook {share['by_hook']}", flush=True)
        meta["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        meta["load_at_end"] = loadavg()
    finally:
        if not args.keep:
            for lab in labs.values():
                lab.down()
    result = {**meta, "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "summary": summarize(runs, rates), "runs": runs}
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=2))
    print(f"results: {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
