"""Agent configuration: load a YAML or JSON file, validate it, and return typed settings.

Every error names the offending key by its dotted path (``sites.dc1.jolokia.url``) so an operator can fix the
file without reading code. Passwords are kept in the settings but never appear in ``repr`` or error messages.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.continuity.artemis.plugins.module_utils import evidence

SITE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SLA_TARGETS = ("rpo_seconds", "rpo_messages", "rto_seconds", "lag_seconds", "pending_acks")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class ConfigError(ValueError):
    """A configuration problem; the message starts with the dotted key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


@dataclass(frozen=True)
class JolokiaSettings:
    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    origin: str | None = None
    validate_certs: bool = True
    ca_path: str | None = None
    timeout: float = 5.0

    def as_options(self) -> dict:
        """The shared option dict of ``jolokia.client_from_options``."""
        return {"url": self.url, "username": self.username, "password": self.password, "origin": self.origin,
                "validate_certs": self.validate_certs, "ca_path": self.ca_path, "timeout": self.timeout}


@dataclass(frozen=True)
class AmqpSettings:
    """Client endpoints of a site for canaries: ``urls`` to send on it (origin), ``target_urls`` to look for
    canaries on it when it is the peer (default ``urls``; a passive site's client acceptors are fenced, so this
    is usually its mirror acceptor)."""

    urls: tuple[str, ...]
    target_urls: tuple[str, ...] = ()
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca: str | None = None
    verify: bool = True


@dataclass(frozen=True)
class BrokerSettings:
    """One broker of a site with several brokers (an HA pair, docs/ha.md)."""

    name: str
    jolokia: JolokiaSettings


@dataclass(frozen=True)
class SiteSettings:
    name: str
    jolokia: JolokiaSettings        # with ``brokers``: the first one's (the primary)
    peer: str
    broker_name: str | None = None  # with ``brokers``: the first one's
    client_acceptors: tuple[str, ...] = ()
    amqp: AmqpSettings | None = None
    brokers: tuple[BrokerSettings, ...] = ()   # empty for a single-broker site (``jolokia`` + ``broker_name``)

    @property
    def is_pair(self) -> bool:
        """The site lists several brokers: the agent reads each and takes the site's state from the live one."""
        return len(self.brokers) > 1


@dataclass(frozen=True)
class CanarySettings:
    enabled: bool = False
    every: float = 60.0
    address: str = "continuity.canary"
    count: int = 3
    timeout: float = 10.0
    selector: bool = True   # browse the peer with a selector on the probe id (the lab broker has none)


@dataclass(frozen=True)
class SlaSettings:
    """Targets; ``None`` = not checked."""

    rpo_seconds: float | None = None
    rpo_messages: float | None = None
    rto_seconds: float | None = None
    lag_seconds: float | None = None
    pending_acks: float | None = None

    def targets(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in SLA_TARGETS if getattr(self, k) is not None}


@dataclass(frozen=True)
class RtoSettings:
    overhead_seconds: float = 0.0
    evidence_dir: str | None = None      # rehearsal evidence (phase records of the swapover runbook)
    summary_file: str | None = None      # pipeline summary.json
    assumed_drain_rate: float | None = None


@dataclass(frozen=True)
class ComparisonSettings:
    tolerance: int = 0
    exclude_prefixes: tuple[str, ...] = ()
    address_filter: str | None = None
    max_reported: int = 50


@dataclass(frozen=True)
class EvidenceSettings:
    dir: str | None = None
    run_id: str = "continuity-agent"
    max_bytes: int = 10 * 1024 * 1024
    keep_files: int = 10


@dataclass(frozen=True)
class ListenSettings:
    address: str = "127.0.0.1"
    port: int = 9464
    enabled: bool = True


@dataclass(frozen=True)
class AgentConfig:
    sites: dict[str, SiteSettings]
    interval: float = 5.0
    listen: ListenSettings = ListenSettings()
    sla: SlaSettings = SlaSettings()
    rto: RtoSettings = RtoSettings()
    comparison: ComparisonSettings = ComparisonSettings()
    evidence: EvidenceSettings = EvidenceSettings()
    state_dir: str | None = None
    log_level: str = "INFO"
    canaries: CanarySettings = CanarySettings()

    def pairs(self) -> list[tuple[str, str]]:
        """(site, peer) directions, in site order."""
        return [(name, s.peer) for name, s in self.sites.items()]


# ------------------------------------------------------------------------------------------------- helpers
_MISSING = object()


def _mapping(value: Any, key: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(key, f"must be a mapping, not {type(value).__name__}")
    return value


def _unknown(data: dict, allowed: tuple[str, ...], key: str) -> None:
    extra = sorted(set(data) - set(allowed))
    if extra:
        where = key + "." if key else ""
        raise ConfigError(where + str(extra[0]), "unknown key (allowed here: {})".format(", ".join(allowed)))


def _get(data: dict, name: str, key: str, kind: str, default: Any = _MISSING, minimum: float | None = None,
         choices: tuple | None = None) -> Any:
    full = f"{key}.{name}" if key else name
    value = data.get(name, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise ConfigError(full, "required")
        return default
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise ConfigError(full, "must be a non-empty string")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(full, "must be true or false")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(full, "must be an integer")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(full, "must be a number")
        value = float(value)
    elif kind == "list":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(full, "must be a list of non-empty strings")
        value = tuple(value)
    if minimum is not None and value < minimum:
        raise ConfigError(full, f"must be >= {minimum}")
    if choices is not None and value not in choices:
        raise ConfigError(full, "must be one of {}".format(", ".join(map(str, choices))))
    return value


def _amqp(raw: Any, key: str) -> AmqpSettings | None:
    if raw is None:
        return None
    raw = _mapping(raw, key)
    _unknown(raw, ("urls", "target_urls", "username", "password", "ca", "verify"), key)
    urls = _get(raw, "urls", key, "list")
    if not urls:
        raise ConfigError(key + ".urls", "give at least one amqp[s]://host:port")
    for i, url in enumerate(urls + _get(raw, "target_urls", key, "list", ())):
        if "@" in url:
            raise ConfigError(f"{key}.urls[{i}]", "must not carry credentials: use username/password")
    password = raw.get("password")
    if password is not None and not isinstance(password, str):
        raise ConfigError(key + ".password", "must be a string")
    return AmqpSettings(urls=urls, target_urls=_get(raw, "target_urls", key, "list", ()),
                        username=_get(raw, "username", key, "str", None), password=password,
                        ca=_get(raw, "ca", key, "str", None), verify=_get(raw, "verify", key, "bool", True))


def _origin(jraw: dict, jkey: str) -> str | None:
    """``origin``: absent = derived from the URL, ``""`` = send no Origin header (both meaningful)."""
    value = jraw.get("origin")
    if value is not None and not isinstance(value, str):
        raise ConfigError(jkey + ".origin", "must be a string (empty = send no Origin header)")
    return value


def _jolokia(jraw: Any, jkey: str) -> JolokiaSettings:
    if not isinstance(jraw, dict):
        raise ConfigError(jkey, "required: a mapping with at least 'url'")
    _unknown(jraw, ("url", "username", "password", "origin", "validate_certs", "ca_path", "timeout"), jkey)
    url = _get(jraw, "url", jkey, "str")
    if not re.match(r"^https?://[^/\s]+", url):
        raise ConfigError(jkey + ".url", "must be http(s)://host:port/console/jolokia")
    if "@" in url.split("//", 1)[1].split("/", 1)[0]:
        raise ConfigError(jkey + ".url", "must not carry credentials: use username/password")
    username = _get(jraw, "username", jkey, "str", None)
    password = jraw.get("password")
    if password is not None and not isinstance(password, str):
        raise ConfigError(jkey + ".password", "must be a string")  # the value itself is never shown
    if username and password is None:
        raise ConfigError(jkey + ".password", "required when username is set")
    return JolokiaSettings(
        url=url, username=username, password=password,
        origin=_origin(jraw, jkey),
        validate_certs=_get(jraw, "validate_certs", jkey, "bool", True),
        ca_path=_get(jraw, "ca_path", jkey, "str", None),
        timeout=_get(jraw, "timeout", jkey, "float", 5.0, minimum=0.1))


# ------------------------------------------------------------------------------------------------- parsing
def parse(data: Any) -> AgentConfig:
    """Validate a decoded configuration document and return :class:`AgentConfig`."""
    data = _mapping(data, "(top level)")
    _unknown(data, ("interval", "listen", "sites", "sla", "rto", "comparison", "evidence", "state_dir",
                    "log_level", "canaries"), "")
    interval = _get(data, "interval", "", "float", 5.0, minimum=0.05)
    sites_raw = data.get("sites")
    if not isinstance(sites_raw, dict) or not sites_raw:
        raise ConfigError("sites", "required: a mapping of site name -> site settings (two sites)")
    names = list(sites_raw)
    sites: dict[str, SiteSettings] = {}
    for name in names:
        key = f"sites.{name}"
        if not isinstance(name, str) or not SITE_NAME_RE.match(name):
            raise ConfigError(key, "site names use letters, digits, '.', '_' and '-' (max 64)")
        raw = _mapping(sites_raw[name], key)
        _unknown(raw, ("jolokia", "peer", "broker_name", "client_acceptors", "amqp", "brokers"), key)
        brokers: tuple[BrokerSettings, ...] = ()
        if raw.get("brokers") is not None:
            for other in ("jolokia", "broker_name"):
                if raw.get(other) is not None:
                    raise ConfigError(f"{key}.{other}", "give either brokers (a site with several brokers) or "
                                                        "jolokia/broker_name (one broker), not both")
            blist = raw["brokers"]
            if not isinstance(blist, list) or not blist:
                raise ConfigError(key + ".brokers", "must be a list of {broker_name, jolokia} (primary first)")
            parsed = []
            for i, braw in enumerate(blist):
                bkey = f"{key}.brokers[{i}]"
                braw = _mapping(braw, bkey)
                _unknown(braw, ("broker_name", "jolokia"), bkey)
                parsed.append(BrokerSettings(name=_get(braw, "broker_name", bkey, "str"),
                                             jolokia=_jolokia(braw.get("jolokia"), bkey + ".jolokia")))
            seen = [b.name for b in parsed]
            if len(set(seen)) != len(seen):
                raise ConfigError(key + ".brokers", "broker names must be unique (label broker of the metrics)")
            brokers = tuple(parsed)
            jolokia, broker_name = brokers[0].jolokia, brokers[0].name
        else:
            jolokia = _jolokia(raw.get("jolokia"), key + ".jolokia")
            broker_name = _get(raw, "broker_name", key, "str", None)
        peer_default = None
        if len(names) == 2:
            peer_default = names[1] if name == names[0] else names[0]
        peer = _get(raw, "peer", key, "str", peer_default)
        if peer is None:
            raise ConfigError(key + ".peer", "required when there are not exactly two sites")
        if peer not in sites_raw:
            raise ConfigError(key + ".peer", "{!r} is not a configured site (sites: {})".format(peer, ", ".join(names)))
        if peer == name:
            raise ConfigError(key + ".peer", "a site cannot be its own peer")
        sites[name] = SiteSettings(name=name, jolokia=jolokia, peer=peer, broker_name=broker_name,
                                   client_acceptors=_get(raw, "client_acceptors", key, "list", ()),
                                   amqp=_amqp(raw.get("amqp"), key + ".amqp"), brokers=brokers)

    listen_raw = _mapping(data.get("listen"), "listen")
    _unknown(listen_raw, ("address", "port", "enabled"), "listen")
    listen = ListenSettings(address=_get(listen_raw, "address", "listen", "str", "127.0.0.1"),
                            port=_get(listen_raw, "port", "listen", "int", 9464, minimum=0),
                            enabled=_get(listen_raw, "enabled", "listen", "bool", True))
    if listen.port > 65535:
        raise ConfigError("listen.port", "must be <= 65535")

    sla_raw = _mapping(data.get("sla"), "sla")
    _unknown(sla_raw, SLA_TARGETS, "sla")
    sla = SlaSettings(**{t: _get(sla_raw, t, "sla", "float", None, minimum=0) for t in SLA_TARGETS})

    rto_raw = _mapping(data.get("rto"), "rto")
    _unknown(rto_raw, ("overhead_seconds", "evidence_dir", "summary_file", "assumed_drain_rate"), "rto")
    rto = RtoSettings(overhead_seconds=_get(rto_raw, "overhead_seconds", "rto", "float", 0.0, minimum=0),
                      evidence_dir=_get(rto_raw, "evidence_dir", "rto", "str", None),
                      summary_file=_get(rto_raw, "summary_file", "rto", "str", None),
                      assumed_drain_rate=_get(rto_raw, "assumed_drain_rate", "rto", "float", None, minimum=0))

    cmp_raw = _mapping(data.get("comparison"), "comparison")
    _unknown(cmp_raw, ("tolerance", "exclude_prefixes", "address_filter", "max_reported"), "comparison")
    comparison = ComparisonSettings(
        tolerance=_get(cmp_raw, "tolerance", "comparison", "int", 0, minimum=0),
        exclude_prefixes=_get(cmp_raw, "exclude_prefixes", "comparison", "list", ()),
        address_filter=_get(cmp_raw, "address_filter", "comparison", "str", None),
        max_reported=_get(cmp_raw, "max_reported", "comparison", "int", 50, minimum=0))

    ev_raw = _mapping(data.get("evidence"), "evidence")
    _unknown(ev_raw, ("dir", "run_id", "max_bytes", "keep_files"), "evidence")
    run_id = _get(ev_raw, "run_id", "evidence", "str", "continuity-agent")
    if not evidence.is_valid_run_id(run_id):
        raise ConfigError("evidence.run_id", "use 1-128 characters [A-Za-z0-9._-], starting with a letter or digit")
    ev = EvidenceSettings(dir=_get(ev_raw, "dir", "evidence", "str", None), run_id=run_id,
                          max_bytes=_get(ev_raw, "max_bytes", "evidence", "int", 10 * 1024 * 1024, minimum=4096),
                          keep_files=_get(ev_raw, "keep_files", "evidence", "int", 10, minimum=1))
    can_raw = _mapping(data.get("canaries"), "canaries")
    _unknown(can_raw, ("enabled", "every", "address", "count", "timeout", "selector"), "canaries")
    canaries = CanarySettings(enabled=_get(can_raw, "enabled", "canaries", "bool", False),
                              every=_get(can_raw, "every", "canaries", "float", 60.0, minimum=1),
                              address=_get(can_raw, "address", "canaries", "str", "continuity.canary"),
                              count=_get(can_raw, "count", "canaries", "int", 3, minimum=1),
                              timeout=_get(can_raw, "timeout", "canaries", "float", 10.0, minimum=1),
                              selector=_get(can_raw, "selector", "canaries", "bool", True))
    if canaries.enabled:
        for name, site in sites.items():
            if site.amqp is None:
                raise ConfigError(f"sites.{name}.amqp", "required when canaries.enabled is true")
    return AgentConfig(canaries=canaries, sites=sites, interval=interval, listen=listen, sla=sla, rto=rto,
                       comparison=comparison,
                       evidence=ev, state_dir=_get(data, "state_dir", "", "str", None),
                       log_level=_get(data, "log_level", "", "str", "INFO", choices=LOG_LEVELS))


def loads(text: str, source: str = "<config>") -> Any:
    """Decode JSON (when the text starts with ``{``) or YAML."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"(file {source})", f"invalid JSON: {exc}") from None
    try:
        import yaml
    except ImportError:
        raise ConfigError(f"(file {source})", "YAML needs PyYAML (pip install PyYAML), or write JSON") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"(file {source})", f"invalid YAML: {exc}") from None


def load(path: str) -> AgentConfig:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(f"(file {path})", f"cannot read: {exc.strerror}") from None
    cfg = parse(loads(text, path))
    # The file holds Jolokia passwords: warn (not fail) when others can read it; the role installs it 0600.
    try:
        mode = os.stat(path).st_mode & 0o077
    except OSError:
        mode = 0
    if mode and any(j.password for s in cfg.sites.values() for j in (s.jolokia, *(b.jolokia for b in s.brokers))):
        import logging

        logging.getLogger("continuity_agent").warning(
            "config file %s holds passwords and is readable by group/others (mode %o): chmod 600 it", path,
            os.stat(path).st_mode & 0o777)
    return cfg
