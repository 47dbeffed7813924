"""Configuration reload, as Artemis does it for what the runbooks depend on: acceptors.

Artemis re-reads broker.xml every `configuration-file-refresh-period` ms when the file changed, and on the
broker operation `reloadConfigurationFile()` (2.17+). Since 2.43 (ARTEMIS-5609) the reload applies acceptor
changes: a new or changed acceptor is (re)created and started only when its `autoStart` parameter is true, a
removed one is stopped; an unchanged acceptor is not touched. Before 2.43 acceptor changes wait for a restart.
The lab reloads nothing else (addresses, security settings, ... are a documented difference in docs/lab.md).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from typing import Any

from artemis_lab import versions

LOG = logging.getLogger("org.apache.activemq.artemis.core.server")

ACCEPTOR_RELOAD_SINCE = "2.43.0"


def acceptor_reload_supported(version: str) -> bool:
    return versions.at_least(version, ACCEPTOR_RELOAD_SINCE)


def auto_start(params: dict[str, str]) -> bool:
    """The acceptor parameter `autoStart` (default true), parsed as Artemis parses booleans."""
    return str(params.get("autoStart", "true")).strip().lower() != "false"


def reload_configuration(broker: Any) -> dict[str, Any]:
    """Re-read broker.xml and apply what the emulated release reloads. Returns what changed.

    A broker.xml that no longer parses is logged and ignored, as Artemis keeps running on the old config.
    """
    from artemis_lab import config_xml
    from artemis_lab.errors import ConfigurationError

    instance = broker.instance
    version = instance.emulated_version
    try:
        fresh = config_xml.parse_instance(instance.instance_dir, version)
    except (ConfigurationError, OSError, ValueError) as exc:
        LOG.error("AMQ222264: configuration reload failed, keeping the running configuration: %s", exc)
        return {"reloaded": False, "error": str(exc)}
    result: dict[str, Any] = {"reloaded": True, "acceptors": None}
    if acceptor_reload_supported(version):
        result["acceptors"] = broker.update_acceptors(fresh.broker.acceptors)
    LOG.info("AMQ221056: Reloading configuration: %s", "acceptors" if result["acceptors"] else "nothing to apply")
    return result


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


class ConfigWatcher:
    """Polls broker.xml every `configuration-file-refresh-period` ms and reloads when its content changed."""

    def __init__(self, broker: Any, period_ms: int):
        self.broker = broker
        self.period = max(0.1, period_ms / 1000.0)
        self.path = os.path.join(broker.instance.instance_dir, "etc", "broker.xml")
        self._last = _digest(self.path)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-config-reload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def check_now(self) -> bool:
        """Reload when the file changed since the last look; True when it reloaded."""
        current = _digest(self.path)
        if current is None or current == self._last:
            return False
        self._last = current
        reload_configuration(self.broker)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.check_now()
            except Exception:  # a reload must never take the broker down
                LOG.exception("configuration reload failed")
