"""Command line: ``python -m continuity_traffic run|start|stop|status`` (docs/traffic.md)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from ansible_collections.continuity.artemis.plugins.module_utils import evidence
from continuity_traffic import display
from continuity_traffic.config import ACK_MODES, ConfigError, TrafficConfig, validate

EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_FATAL = 0, 1, 2, 3
PASSWORD_ENV = "CONTINUITY_TRAFFIC_PASSWORD"


def _bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target")
    g.add_argument("--url", action="append", required=True, metavar="[SITE=]amqp[s]://HOST:PORT",
                   help="client URL of a site; repeat (or comma-separate) in failover order, e.g. "
                        "--url dc1=amqp://h1:5672 --url dc2=amqp://h2:5672")
    g.add_argument("--address", action="append", metavar="ADDRESS",
                   help="address(es) to produce to / consume from (repeatable; clients spread round-robin; "
                        "default continuity.traffic)")
    g.add_argument("--user", help="SASL PLAIN user (none = ANONYMOUS)")
    g.add_argument("--password-env", default=PASSWORD_ENV, metavar="VAR",
                   help=f"environment variable holding the password (default {PASSWORD_ENV}); never on the "
                        "command line, where ps would show it")
    g.add_argument("--password-file", metavar="FILE", help="file holding the password (first line)")
    g.add_argument("--ca", help="CA bundle for amqps:// URLs")
    g.add_argument("--verify", type=_bool, default=True, metavar="BOOL", help="verify the broker certificate "
                   "and host name (default true)")
    g.add_argument("--cert", help="client certificate (PEM) for amqps://")
    g.add_argument("--key", help="client key (PEM) for amqps://")
    g.add_argument("--heartbeat", type=float, default=10.0, help="AMQP idle timeout in seconds (default 10)")
    g.add_argument("--connect-timeout", type=float, default=5.0,
                   help="seconds to wait for a connection to open before trying the next URL (default 5)")
    t = p.add_argument_group("traffic")
    t.add_argument("-P", "--producers", type=int, default=1)
    t.add_argument("-C", "--consumers", type=int, default=1)
    t.add_argument("--rate", type=float, default=100.0, help="total messages/s over all producers (0 = max)")
    t.add_argument("--size", type=int, default=256, help="message body size in bytes (default 256)")
    t.add_argument("--durable", type=_bool, default=True, metavar="BOOL", help="durable messages (default true)")
    t.add_argument("--ack-mode", choices=ACK_MODES, default="per-message")
    t.add_argument("--batch-size", type=int, default=100, help="batch/transacted: acknowledge every N")
    t.add_argument("--batch-timeout", type=float, default=1.0, help="batch/transacted: ... or after S seconds")
    t.add_argument("--prefetch", type=int, default=100, help="consumer credit window")
    t.add_argument("--max-in-flight", type=int, default=500, help="unsettled sends per producer")
    t.add_argument("--retry-attempts", type=int, default=5, help="attempts per message incl. the first")
    t.add_argument("--retry-backoff", type=float, default=0.2, help="first resend delay, doubled per attempt")
    t.add_argument("--retry-backoff-max", type=float, default=5.0)
    t.add_argument("--duration", type=float, help="stop after S seconds (default: run until stopped)")
    t.add_argument("--drain-timeout", type=float, default=10.0,
                   help="on stop: max seconds to wait for settlements and for consumers to empty the queue")
    t.add_argument("--drain-idle", type=float, default=1.0,
                   help="on stop: consumers finish after S seconds without a message (a reconnecting one is "
                        "waited for, up to --drain-timeout)")
    o = p.add_argument_group("output")
    o.add_argument("--evidence-dir", default="build/evidence", help="ledgers go to EVIDENCE_DIR/RUN_ID/")
    o.add_argument("--run-id", help="run id (default traffic-<UTC time>-<random>)")
    o.add_argument("--name", help="instance name; writers are NAME-p0.., NAME-c0.. (default traffic-<pid>)")
    o.add_argument("--status-file", help="JSON status with counters, rewritten every --status-interval")
    o.add_argument("--status-interval", type=float, default=1.0)
    o.add_argument("--pidfile", help="write the pid here while running (used by 'stop')")
    o.add_argument("--display", choices=("auto", "live", "log", "quiet"), default="auto",
                   help="auto = live view on a TTY, log lines otherwise")
    o.add_argument("--log-interval", type=float, default=5.0, help="seconds between log lines")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m continuity_traffic",
                                     description="Rehearsal traffic with sent/received ledgers (evidence v1).")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run in the foreground until --duration, SIGTERM or Ctrl-C")
    _add_run_options(run)
    start = sub.add_parser("start", help="run in the background; prints JSON with pid, run_dir, status_file")
    _add_run_options(start)
    start.add_argument("--log-file", help="stdout/stderr of the background run (default RUN_DIR/NAME.log)")
    start.add_argument("--wait", type=float, default=15.0, help="seconds to wait for the run to be running")
    stop = sub.add_parser("stop", help="stop a run started with --pidfile (SIGTERM, graceful)")
    stop.add_argument("--pidfile", required=True)
    stop.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a graceful stop")
    stop.add_argument("--kill-after-timeout", action="store_true", help="SIGKILL when the timeout passes")
    status = sub.add_parser("status", help="print the status file")
    status.add_argument("--status-file", required=True)
    return parser


def _password(args: argparse.Namespace) -> str | None:
    if args.password_file:
        with open(args.password_file, encoding="utf-8") as fh:
            return fh.readline().rstrip("\r\n")
    return os.environ.get(args.password_env) if args.password_env else None


def config_from_args(args: argparse.Namespace) -> TrafficConfig:
    cfg = TrafficConfig(
        urls=args.url, address=args.address or ["continuity.traffic"], producers=args.producers,
        consumers=args.consumers, rate=args.rate, size=args.size, durable=args.durable, ack_mode=args.ack_mode,
        batch_size=args.batch_size, batch_timeout=args.batch_timeout, prefetch=args.prefetch,
        max_in_flight=args.max_in_flight, retry_attempts=args.retry_attempts, retry_backoff=args.retry_backoff,
        retry_backoff_max=args.retry_backoff_max, duration=args.duration, drain_timeout=args.drain_timeout,
        drain_idle=args.drain_idle, evidence_dir=args.evidence_dir, run_id=args.run_id, name=args.name,
        user=args.user, password=_password(args) if args.user else None, ca=args.ca, verify=args.verify,
        cert=args.cert, key=args.key, heartbeat=args.heartbeat or None, connect_timeout=args.connect_timeout,
        status_file=args.status_file, pidfile=args.pidfile, status_interval=args.status_interval,
        log_interval=args.log_interval, display=args.display)
    return validate(cfg)


def write_json_atomic(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours still "exists": treat it as gone
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def read_pidfile(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as fh:
            return int(fh.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


def cmd_run(args: argparse.Namespace) -> int:
    from continuity_traffic.engine import TrafficEngine  # proton is only needed to run traffic

    cfg = config_from_args(args)
    if cfg.pidfile:
        old = read_pidfile(cfg.pidfile)
        if old and old != os.getpid() and _pid_alive(old):
            raise ConfigError(f"--pidfile {cfg.pidfile}: a run with pid {old} is still running")
        os.makedirs(os.path.dirname(os.path.abspath(cfg.pidfile)), exist_ok=True)
        with open(cfg.pidfile, "w", encoding="ascii") as fh:
            fh.write(f"{os.getpid()}\n")
    engine = TrafficEngine(cfg)
    stop_signals = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT", signal.SIGHUP: "SIGHUP"}
    for sig, label in stop_signals.items():
        signal.signal(sig, lambda *_a, _label=label: engine.request_stop(f"signal {_label}"))
    mode = cfg.display
    if mode == "auto":
        mode = "live" if sys.stdout.isatty() else "log"
    out = sys.stdout
    if mode != "quiet":
        out.write(f"continuity-traffic run {cfg.run_id}: ledgers in {cfg.run_dir}\n")
        out.flush()
    engine.start()
    prev = None
    last_log = last_status = 0.0
    drawn = 0
    try:
        while not engine.wait(0.25):
            now = time.monotonic()
            snap = engine.snapshot()
            if cfg.duration and snap["elapsed"] >= cfg.duration and snap["state"] == "running":
                engine.request_stop(f"duration {cfg.duration:g}s reached")
            if cfg.status_file and now - last_status >= cfg.status_interval:
                write_json_atomic(cfg.status_file, dict(snap, pid=os.getpid(), config=cfg.public()))
                last_status = now
            if mode == "live" and (prev is None or now - prev[0] >= 0.5):
                block = display.live_block(prev[1] if prev else None, snap)
                if drawn:
                    out.write(f"\x1b[{drawn}F")
                out.write("".join(f"\x1b[2K{line}\n" for line in block))
                out.flush()
                drawn = len(block)
                prev = (now, snap)
            elif mode == "log" and now - last_log >= cfg.log_interval:
                out.write(display.log_line(prev[1] if prev else None, snap) + "\n")
                out.flush()
                prev = (now, snap)
                last_log = now
    finally:
        engine.wait(cfg.drain_timeout + 30)
        snap = engine.snapshot()
        if cfg.status_file:
            write_json_atomic(cfg.status_file, dict(snap, pid=os.getpid(), config=cfg.public()))
        if cfg.pidfile and read_pidfile(cfg.pidfile) == os.getpid():
            os.unlink(cfg.pidfile)
    if mode != "quiet":
        out.write(display.log_line(None, snap) + "\n")
        out.write(f"stopped: {snap['stop_reason']}\n")
    if engine.fatal is not None:
        sys.stderr.write(f"continuity-traffic: {engine.fatal.message}\n")
        return EXIT_FATAL
    return EXIT_OK


def cmd_start(args: argparse.Namespace, argv: list[str]) -> int:
    cfg = config_from_args(args)  # validate before forking; fixes run id and name for the child
    evidence.run_dir(cfg.evidence_dir, cfg.run_id)
    status_file = cfg.status_file or os.path.join(cfg.run_dir, f"status-{cfg.name}.json")
    pidfile = cfg.pidfile or os.path.join(cfg.run_dir, f"{cfg.name}.pid")
    log_file = args.log_file or os.path.join(cfg.run_dir, f"{cfg.name}.log")
    child = ["run", *_strip(argv[1:], {"--log-file", "--wait", "--status-file", "--pidfile", "--run-id", "--name",
                                       "--display"}),
             "--run-id", cfg.run_id, "--name", cfg.name, "--status-file", status_file, "--pidfile", pidfile,
             "--display", "log"]
    if os.path.exists(status_file):
        os.unlink(status_file)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "continuity_traffic", *child], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
    deadline = time.monotonic() + args.wait
    state = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with open(status_file, encoding="utf-8") as fh:
                state = json.load(fh).get("state")
        except (OSError, ValueError):
            state = None
        if state in ("running", "stopping", "closing", "stopped"):
            break
        time.sleep(0.1)
    result = {"pid": proc.pid, "run_id": cfg.run_id, "name": cfg.name, "run_dir": cfg.run_dir,
              "status_file": status_file, "pidfile": pidfile, "log_file": log_file, "state": state,
              "returncode": proc.poll()}
    print(json.dumps(result))
    if proc.poll() is not None:
        sys.stderr.write(f"continuity-traffic: the background run exited with {proc.returncode}; see {log_file}\n")
        return EXIT_ERROR
    return EXIT_OK if state else EXIT_ERROR


def _strip(argv: list[str], options: set[str]) -> list[str]:
    """argv without the given options (and their values) so the child gets fixed ones."""
    out: list[str] = []
    skip = False
    for item in argv:
        if skip:
            skip = False
            continue
        name = item.split("=", 1)[0]
        if name in options:
            skip = "=" not in item
            continue
        out.append(item)
    return out


def cmd_stop(args: argparse.Namespace) -> int:
    pid = read_pidfile(args.pidfile)
    if pid is None or not _pid_alive(pid):
        print(json.dumps({"stopped": True, "pid": pid, "was_running": False}))
        return EXIT_OK
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.1)
    killed = False
    if _pid_alive(pid) and args.kill_after_timeout:
        os.kill(pid, signal.SIGKILL)
        killed = True
        time.sleep(0.2)
    alive = _pid_alive(pid)
    print(json.dumps({"stopped": not alive, "pid": pid, "was_running": True, "killed": killed}))
    return EXIT_ERROR if alive else EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    try:
        with open(args.status_file, encoding="utf-8") as fh:
            print(fh.read())
    except OSError as exc:
        sys.stderr.write(f"continuity-traffic: {exc}\n")
        return EXIT_ERROR
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "start":
            return cmd_start(args, argv)
        if args.command == "stop":
            return cmd_stop(args)
        return cmd_status(args)
    except ConfigError as exc:
        sys.stderr.write(f"continuity-traffic: {exc}\n")
        return EXIT_CONFIG
