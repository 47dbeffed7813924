"""`artemis create`: write an instance directory laid out like Artemis' (bin/, etc/, data/, log/, lib/, tmp/)."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

from artemis_lab import security, versions

TEMPLATES = Path(__file__).with_name("templates")

# Acceptors written by create: (name, default port, protocols, flag that disables it).
_EXTRA_ACCEPTORS = (
    ("amqp", 5672, "AMQP", "no_amqp_acceptor"),
    ("stomp", 61613, "STOMP", "no_stomp_acceptor"),
    ("hornetq", 5445, "HORNETQ,STOMP", "no_hornetq_acceptor"),
    ("mqtt", 1883, "MQTT", "no_mqtt_acceptor"),
)
_BUFFERS = "tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576"
_AMQP_PARAMS = "amqpMinLargeMessageSize=102400;amqpCredits=1000;amqpLowCredits=300;amqpDuplicateDetection=true"


class CreateError(Exception):
    """create refused (directory not empty, missing user with --require-login in silent mode, ...)."""


@dataclass
class CreateOptions:
    directory: str
    user: str | None = None
    password: str | None = None
    role: str = "amq"
    require_login: bool | None = None  # None: not given (Artemis asks; with --silent anonymous is allowed)
    name: str | None = None
    host: str = "0.0.0.0"
    http_host: str = "localhost"
    http_port: int = 8161
    default_port: int = 61616
    port_offset: int = 0
    relax_jolokia: bool = False
    no_web: bool = False
    no_amqp_acceptor: bool = False
    no_mqtt_acceptor: bool = False
    no_stomp_acceptor: bool = False
    no_hornetq_acceptor: bool = False
    force: bool = False
    silent: bool = False
    java_memory: str = "2G"
    java_options: str = ""
    data: str | None = None
    etc: str | None = None
    journal_type: str = "NIO"
    extra: dict[str, str] = field(default_factory=dict)


def render(template: str, **values: object) -> str:
    return Template((TEMPLATES / template).read_text()).substitute({k: str(v) for k, v in values.items()})


def _acceptor_xml(opts: CreateOptions) -> str:
    host = opts.host
    lines = [
        "         <!-- every protocol on the default port -->",
        f'         <acceptor name="artemis">tcp://{host}:{opts.default_port + opts.port_offset}?{_BUFFERS};'
        f"{_AMQP_PARAMS.split(';')[0]};protocols=CORE,AMQP,STOMP,HORNETQ,MQTT,OPENWIRE;useEpoll=true;"
        f"{';'.join(_AMQP_PARAMS.split(';')[1:])};supportAdvisory=false;suppressInternalManagementObjects=false"
        "</acceptor>",
    ]
    for name, port, protocols, flag in _EXTRA_ACCEPTORS:
        if getattr(opts, flag):
            continue
        params = f"{_BUFFERS};protocols={protocols};useEpoll=true"
        if name == "amqp":
            params += f";{_AMQP_PARAMS}"
        lines.append(f'         <acceptor name="{name}">tcp://{host}:{port + opts.port_offset}?{params}</acceptor>')
    return "\n".join(lines)


def _write(path: Path, text: str, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def create_instance(opts: CreateOptions, home: str | Path, version: str | None = None) -> Path:
    version = version or versions.emulated_version()
    instance = Path(opts.directory).absolute()
    if instance.exists() and any(instance.iterdir()) and not opts.force:
        raise CreateError(f"The directory {instance} is not empty. Use --force to overwrite it.")
    if opts.require_login is None:
        if not opts.silent:
            raise CreateError("Specify --require-login or --allow-anonymous (the lab never prompts)")
        opts.require_login = False  # Artemis' --silent default
    user = opts.user or ("admin" if opts.silent else None)
    password = opts.password or ("admin" if opts.silent else None)
    if user is None or password is None:
        raise CreateError("Specify --user and --password (the lab never prompts)")
    name = opts.name or opts.host
    etc = Path(opts.etc).absolute() if opts.etc else instance / "etc"
    data = Path(opts.data).absolute() if opts.data else instance / "data"
    data_rel = os.path.relpath(data, instance) if data.is_relative_to(instance) else str(data)
    http_port = opts.http_port + opts.port_offset
    home = Path(home).absolute()

    for sub in ("bin", "lib", "log", "tmp"):
        (instance / sub).mkdir(parents=True, exist_ok=True)
    for sub in ("journal", "bindings", "paging", "large-messages"):
        (data / sub).mkdir(parents=True, exist_ok=True)
    common = {"version": version, "role": opts.role, "instance": instance, "etc": etc, "home": home, "data": data}
    _write(etc / "broker.xml", render("broker.xml.in", name=name, journal_type=opts.journal_type,
                                      data_dir=data_rel, acceptors=_acceptor_xml(opts), **common))
    web = (
        ""
        if opts.no_web
        else f'\n   <web path="web" rootRedirectLocation="console">\n'
        f'      <binding name="artemis" uri="http://{opts.http_host}:{http_port}">\n'
        f'         <app name="console" url="console" war="console.war"/>\n'
        f"      </binding>\n   </web>\n"
    )
    _write(etc / "bootstrap.xml", render("bootstrap.xml.in", etc_uri=etc.as_posix(), web=web, **common))
    strict = "" if opts.relax_jolokia else "        <strict-checking/>"
    _write(etc / "jolokia-access.xml", render("jolokia-access.xml.in", http_host=opts.http_host, strict=strict,
                                              **common))
    _write(etc / "management.xml", render("management.xml.in", **common))
    guest = (
        ""
        if opts.require_login
        else "   org.apache.activemq.artemis.spi.core.security.jaas.GuestLoginModule sufficient\n"
        f'       debug=false\n       org.apache.activemq.jaas.guest.user="{user}"\n'
        f'       org.apache.activemq.jaas.guest.role="{opts.role}";\n'
    )
    login_flag = "required" if opts.require_login else "sufficient"
    _write(etc / "login.config", render("login.config.in", login_flag=login_flag, guest=guest, **common))
    _write(etc / "artemis.profile", render("artemis.profile.in", java_memory=opts.java_memory,
                                           java_options=opts.java_options, **common))
    if versions.at_least(version, "2.37.0"):
        # 2.37+ writes a separate profile for the CLI utility commands; same variables, no JVM tuning.
        _write(etc / "artemis-utility.profile", render("artemis.profile.in", java_memory="512M", java_options="",
                                                       **common))
    _write(etc / "log4j2.properties", render("log4j2.properties.in", **common))
    _write(etc / "artemis-users.properties",
           render("artemis-users.properties.in", users=f"{user} = {security.hash_password(password)}", **common))
    _write(etc / "artemis-roles.properties", render("artemis-roles.properties.in", roles=f"{opts.role} = {user}",
                                                    **common))
    _write(instance / "bin" / "artemis", render("instance-artemis.sh.in", **common), executable=True)
    _write(instance / "bin" / "artemis-service", render("artemis-service.sh.in", **common), executable=True)
    (instance / "log" / "artemis.log").touch()
    return instance


# --- user management (artemis user add|list|rm) -----------------------------------------------------------------
def _props_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def add_user(etc: Path, user: str, password: str, roles: list[str], plaintext: bool = False) -> None:
    users_file, roles_file = etc / "artemis-users.properties", etc / "artemis-roles.properties"
    if user in security.read_properties(users_file):
        raise CreateError(f"User {user} already exists")
    stored = password if plaintext else security.hash_password(password)
    _write(users_file, "\n".join([*_props_lines(users_file), f"{user} = {stored}"]) + "\n")
    role_map = security.read_properties(roles_file)
    lines = [ln for ln in _props_lines(roles_file) if ln.lstrip().startswith(("#", "!")) or not ln.strip()]
    for role in roles:
        members = [m.strip() for m in role_map.get(role, "").split(",") if m.strip()]
        role_map[role] = ",".join([*members, user])
    lines += [f"{r} = {m}" for r, m in role_map.items()]
    _write(roles_file, "\n".join(lines) + "\n")


def remove_user(etc: Path, user: str) -> None:
    users_file, roles_file = etc / "artemis-users.properties", etc / "artemis-roles.properties"
    if user not in security.read_properties(users_file):
        raise CreateError(f"User {user} does not exist")
    kept = [ln for ln in _props_lines(users_file) if ln.split("=")[0].split(":")[0].strip() != user]
    _write(users_file, "\n".join(kept) + "\n")
    role_map = security.read_properties(roles_file)
    lines = [ln for ln in _props_lines(roles_file) if ln.lstrip().startswith(("#", "!")) or not ln.strip()]
    for role, members in role_map.items():
        rest = [m.strip() for m in members.split(",") if m.strip() and m.strip() != user]
        if rest:
            lines.append(f"{role} = {','.join(rest)}")
    _write(roles_file, "\n".join(lines) + "\n")


def list_users(etc: Path) -> list[tuple[str, list[str]]]:
    users = security.read_properties(etc / "artemis-users.properties")
    roles = security.roles_by_user(security.read_properties(etc / "artemis-roles.properties"))
    return [(u, sorted(roles.get(u, set()))) for u in users]


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
