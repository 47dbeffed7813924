"""`bin/artemis` of the lab broker: create, run, stop, version, user add|list|rm.

Flag names are Artemis' (picocli style `--flag value` or `--flag=value`); unknown flags are refused with exit 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from artemis_lab import instance as inst
from artemis_lab import versions

LOG = logging.getLogger("org.apache.activemq.artemis.core.server")
LAB_LOG = logging.getLogger("artemis_lab")
STOP_POLL_S = 0.2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # picocli-like message, exit 2
        unknown = message.split("unrecognized arguments:")[-1].strip() if "unrecognized" in message else None
        if unknown:
            sys.stderr.write(f"Unknown option: '{unknown.split()[0]}'\n")
        else:
            sys.stderr.write(f"Error: {message}\n")
        sys.stderr.write(f"Usage: artemis {self.prog.split()[-1]} [options]; see 'artemis help'\n")
        raise SystemExit(2)


def home_dir() -> Path:
    return Path(os.environ.get("ARTEMIS_HOME") or Path(__file__).resolve().parents[2])


def instance_dir() -> Path | None:
    value = os.environ.get("ARTEMIS_INSTANCE")
    return Path(value) if value else None


def etc_dir(instance: Path) -> Path:
    return Path(os.environ.get("ARTEMIS_INSTANCE_ETC") or instance / "etc")


# --- create ------------------------------------------------------------------------------------------------------
def _create_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="artemis create", add_help=True)
    p.add_argument("directory")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--role", default="amq")
    login = p.add_mutually_exclusive_group()
    login.add_argument("--require-login", dest="require_login", action="store_const", const=True, default=None)
    login.add_argument("--allow-anonymous", dest="require_login", action="store_const", const=False)
    p.add_argument("--name")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--http-host", default="localhost")
    p.add_argument("--http-port", type=int, default=8161)
    p.add_argument("--default-port", type=int, default=61616)
    p.add_argument("--port-offset", type=int, default=0)
    for flag in ("--relax-jolokia", "--no-web", "--no-amqp-acceptor", "--no-mqtt-acceptor", "--no-stomp-acceptor",
                 "--no-hornetq-acceptor", "--force", "--silent"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--java-memory", default="2G")
    p.add_argument("--java-options", default="")
    p.add_argument("--data")
    p.add_argument("--etc")
    journal = p.add_mutually_exclusive_group()
    journal.add_argument("--nio", dest="journal_type", action="store_const", const="NIO", default="NIO")
    journal.add_argument("--aio", dest="journal_type", action="store_const", const="ASYNCIO")
    journal.add_argument("--mapped", dest="journal_type", action="store_const", const="MAPPED")
    for flag in ("--clustered", "--replicated", "--shared-store", "--backup", "--slave"):
        p.add_argument(flag, action="store_true")
    return p


def cmd_create(argv: list[str]) -> int:
    args = _create_parser().parse_args(argv)
    for flag in ("clustered", "replicated", "shared_store", "backup", "slave"):
        if getattr(args, flag):
            sys.stderr.write(f"--{flag.replace('_', '-')} is not supported by the lab broker (single primary only)\n")
            return 2
    fields = {k: v for k, v in vars(args).items()
              if k not in ("clustered", "replicated", "shared_store", "backup", "slave")}
    opts = inst.CreateOptions(**fields)
    version = versions.emulated_version()
    try:
        path = inst.create_instance(opts, home_dir(), version)
    except inst.CreateError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    print(f"Creating lab broker instance (emulating Artemis {version}) at: {path}")
    print(f"\nYou can now start the broker by executing:\n\n   \"{path}/bin/artemis\" run\n")
    print(f"Or you can run the broker in the background using:\n\n   \"{path}/bin/artemis-service\" start\n")
    return 0


# --- run / stop --------------------------------------------------------------------------------------------------
def _setup_logging(instance: Path) -> None:
    (instance / "log").mkdir(exist_ok=True)
    fmt = logging.Formatter("%(asctime)s %(levelname)-5s [%(name)s] %(message)s")
    file_handler = logging.FileHandler(instance / "log" / "artemis.log")
    file_handler.setFormatter(fmt)
    console = logging.StreamHandler(sys.stdout)
    console.setFormatter(fmt)
    root = logging.getLogger()
    root.handlers[:] = [file_handler, console]
    root.setLevel(logging.INFO)


def _schema_dir() -> Path | None:
    candidate = home_dir() / "schema"
    return candidate if (candidate / "artemis-configuration.xsd").exists() else None


def cmd_run(argv: list[str]) -> int:
    from artemis_lab import config_xml, engine, security
    from artemis_lab.errors import ConfigurationError
    from artemis_lab.jolokia.server import JolokiaServer

    _Parser(prog="artemis run").parse_args(argv)
    instance = instance_dir()
    if instance is None:
        sys.stderr.write("Error: run must be started through an instance's bin/artemis (ARTEMIS_INSTANCE unset)\n")
        return 2
    etc = etc_dir(instance)
    _setup_logging(instance)
    version = versions.emulated_version()
    boot = logging.getLogger("org.apache.activemq.artemis.integration.bootstrap")
    boot.info("AMQ101000: Starting lab broker emulating Artemis %s (version %s%s)", version, version,
              versions.LAB_SUFFIX)
    stop_file = etc / "STOP_ME"
    stop_file.unlink(missing_ok=True)
    try:
        config = config_xml.parse_instance(instance, version, _schema_dir(), etc_dir=etc)
        for tag in config.broker.unknown_elements:
            LAB_LOG.warning("broker.xml element <%s> is not emulated by the lab broker; ignored", tag)
        realm = security.PropertiesRealm(etc / "artemis-users.properties", etc / "artemis-roles.properties")
        broker = engine.load_engine()(config, realm)
        broker.start()
    except ConfigurationError as exc:
        LOG.error("lab broker refused to start: %s: %s", exc.java_class, exc.message)
        return 1
    except ImportError as exc:
        LOG.error("lab broker engine %s is not available: %s", engine.engine_spec(), exc)
        return 3
    jolokia = None
    if config.web_enabled:
        try:
            jolokia = JolokiaServer(broker, config, realm)
            jolokia.start()
        except OSError as exc:
            LOG.error("cannot bind the web server on %s:%s: %s", config.http_host, config.http_port, exc)
            broker.stop()
            return 1
        logging.getLogger("org.apache.activemq.artemis").info(
            "AMQ241002: Jolokia REST API available at %s", jolokia.url)
    from artemis_lab.reload import ConfigWatcher

    watcher = None
    if config.broker.configuration_file_refresh_period > 0:
        watcher = ConfigWatcher(broker, config.broker.configuration_file_refresh_period)
        watcher.start()
    LOG.info("AMQ221007: Server is now active")
    LOG.info("AMQ221001: lab broker emulating Artemis %s [%s, nodeID=%s]", version, broker.name, broker.node_id)

    stopping = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    while not stopping.is_set() and not stop_file.exists():
        stopping.wait(STOP_POLL_S)
    LOG.info("AMQ221002: lab broker %s stopping", broker.name)
    if jolokia is not None:
        jolokia.stop()
    broker.stop()
    stop_file.unlink(missing_ok=True)
    LOG.info("AMQ221002: lab broker %s stopped, uptime %.3f seconds", broker.name, time.monotonic() - _T0)
    return 0


def cmd_stop(argv: list[str]) -> int:
    _Parser(prog="artemis stop").parse_args(argv)
    instance = instance_dir()
    if instance is None:
        sys.stderr.write("Error: stop must be started through an instance's bin/artemis\n")
        return 2
    (etc_dir(instance) / "STOP_ME").touch()
    return 0


# --- version / user ---------------------------------------------------------------------------------------------
def cmd_version(argv: list[str]) -> int:
    _Parser(prog="artemis version").parse_args(argv)
    version = versions.emulated_version()
    print(f"lab broker emulating Artemis {version} (Version attribute {version}{versions.LAB_SUFFIX})")
    print(f"lab broker home: {home_dir()}")
    if instance_dir():
        print(f"lab broker instance: {instance_dir()}")
    return 0


def cmd_user(argv: list[str]) -> int:
    p = _Parser(prog="artemis user")
    p.add_argument("action", choices=["add", "list", "rm"])
    p.add_argument("--user-command-user", "--user", dest="user")
    p.add_argument("--user-command-password", "--password", dest="password")
    p.add_argument("--role")
    p.add_argument("--plaintext", action="store_true")
    args = p.parse_args(argv)
    instance = instance_dir()
    if instance is None:
        sys.stderr.write("Error: user must be started through an instance's bin/artemis\n")
        return 2
    etc = etc_dir(instance)
    try:
        if args.action == "list":
            for user, roles in inst.list_users(etc):
                print(f'"{user}"({",".join(roles)})')
        elif args.action == "add":
            if not args.user or not args.password:
                raise inst.CreateError("--user and --password are required")
            roles = [r.strip() for r in (args.role or "").split(",") if r.strip()]
            inst.add_user(etc, args.user, args.password, roles, args.plaintext)
            print("User added successfully.")
        else:
            if not args.user:
                raise inst.CreateError("--user is required")
            inst.remove_user(etc, args.user)
            print("User removed.")
    except inst.CreateError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    return 0


COMMANDS = {"create": cmd_create, "run": cmd_run, "stop": cmd_stop, "version": cmd_version, "user": cmd_user}
_T0 = time.monotonic()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("help", "--help", "-h"):
        print("Usage: artemis <command> [options]\nCommands (lab broker): " + ", ".join(COMMANDS))
        return 0
    command = COMMANDS.get(argv[0])
    if command is None:
        sys.stderr.write(f"Unmatched argument at index 0: '{argv[0]}'\nCommands: {', '.join(COMMANDS)}\n")
        return 2
    return command(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
