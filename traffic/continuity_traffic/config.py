"""Traffic run configuration: parsed from the CLI, validated here (pure, no I/O)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from ansible_collections.continuity.artemis.plugins.module_utils import amqp, evidence

ACK_MODES = ("per-message", "batch", "transacted")


class ConfigError(ValueError):
    pass


@dataclass
class TrafficConfig:
    urls: list[str]
    address: list[str] = field(default_factory=lambda: ["continuity.traffic"])
    producers: int = 1
    consumers: int = 1
    rate: float = 100.0              # total messages/s over all producers; 0 = as fast as credit allows
    size: int = 256                  # body bytes
    durable: bool = True
    ack_mode: str = "per-message"
    batch_size: int = 100            # batch ack: accept every N messages ...
    batch_timeout: float = 1.0       # ... or after this many seconds, whichever comes first
    prefetch: int = 100
    max_in_flight: int = 500         # per producer: unsettled sends before it pauses
    retry_attempts: int = 5          # total attempts per message (1 = never resend)
    retry_backoff: float = 0.2       # first resend delay, doubled per attempt, capped at retry_backoff_max
    retry_backoff_max: float = 5.0
    duration: float | None = None    # seconds; None = until stopped
    drain_timeout: float = 10.0      # on stop: wait for settlements and let consumers empty the queue
    drain_idle: float = 1.0          # consumers stop after this long without a message (while draining)
    evidence_dir: str = "build/evidence"
    run_id: str | None = None
    name: str | None = None          # instance name, prefix of writer names (default traffic-<pid>)
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    ca: str | None = None
    verify: bool = True
    cert: str | None = None
    key: str | None = None
    heartbeat: float | None = 10.0
    connect_timeout: float = 5.0
    status_file: str | None = None
    pidfile: str | None = None
    status_interval: float = 1.0
    log_interval: float = 5.0
    display: str = "auto"            # auto (TTY -> live), live, log, quiet

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = f"traffic-{os.getpid()}"
        if self.run_id is None:
            self.run_id = evidence.new_run_id("traffic")

    # derived -------------------------------------------------------------------------------------------------
    @property
    def run_dir(self) -> str:
        return os.path.join(self.evidence_dir, self.run_id)

    def producer_names(self) -> list[str]:
        return [f"{self.name}-p{i}" for i in range(self.producers)]

    def consumer_names(self) -> list[str]:
        return [f"{self.name}-c{i}" for i in range(self.consumers)]

    def endpoints(self) -> list[amqp.Endpoint]:
        return amqp.parse_endpoints(self.urls)

    def client_options(self) -> amqp.ClientOptions:
        return amqp.ClientOptions(user=self.user, password=self.password, ca=self.ca, verify=self.verify,
                                  cert=self.cert, key=self.key, heartbeat=self.heartbeat,
                                  connect_timeout=self.connect_timeout)

    def public(self) -> dict:
        """The configuration without secrets (status file, logs)."""
        data = asdict(self)
        data["password"] = "***" if self.password else None
        return data


def validate(cfg: TrafficConfig) -> TrafficConfig:
    """Raise ConfigError naming the first bad option."""
    try:
        cfg.endpoints()
    except amqp.AmqpError as exc:
        raise ConfigError(f"--url: {exc.message}") from None
    if not cfg.address or not all(a.strip() for a in cfg.address):
        raise ConfigError("--address: at least one non-empty address")
    checks = [
        (cfg.producers >= 0, "--producers must be >= 0"),
        (cfg.consumers >= 0, "--consumers must be >= 0"),
        (cfg.producers + cfg.consumers > 0, "--producers and --consumers are both 0: nothing to do"),
        (cfg.rate >= 0, "--rate must be >= 0 (0 = unlimited)"),
        (cfg.size >= 0, "--size must be >= 0"),
        (cfg.ack_mode in ACK_MODES, f"--ack-mode must be one of {', '.join(ACK_MODES)}"),
        (cfg.batch_size >= 1, "--batch-size must be >= 1"),
        (cfg.batch_timeout > 0, "--batch-timeout must be > 0"),
        (cfg.prefetch >= 1, "--prefetch must be >= 1"),
        (cfg.max_in_flight >= 1, "--max-in-flight must be >= 1"),
        (cfg.retry_attempts >= 1, "--retry-attempts must be >= 1"),
        (cfg.retry_backoff >= 0, "--retry-backoff must be >= 0"),
        (cfg.duration is None or cfg.duration > 0, "--duration must be > 0"),
        (cfg.drain_timeout >= 0, "--drain-timeout must be >= 0"),
        (cfg.connect_timeout > 0, "--connect-timeout must be > 0"),
        (cfg.display in ("auto", "live", "log", "quiet"), "--display must be auto, live, log or quiet"),
        (evidence.is_valid_run_id(cfg.run_id), f"--run-id {cfg.run_id!r}: use [A-Za-z0-9._-], 1-128 chars"),
        (cfg.password is None or cfg.user is not None, "--password needs --user"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    if cfg.ack_mode == "batch" and cfg.batch_size > cfg.prefetch:
        # The broker only sends `prefetch` unsettled messages; a larger batch would only close on the timeout.
        raise ConfigError("--batch-size must be <= --prefetch (unacked messages hold the credit window)")
    return cfg
