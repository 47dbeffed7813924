"""Canaries: replication latency measured end to end, with the shared probe (``amqp.CanaryProbe``, the logic of
the ``amqp_probe`` module): messages sent on a site, seen (browsed) on its peer, then removed on the origin.

Runs in its own thread at ``canaries.every`` seconds so a slow or failing probe never delays the sampling
cycle. Only a site that can take client traffic originates canaries: a passive (fenced) or unreachable site is
skipped with a note, because a probe there would only measure the fence.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.continuity.artemis.plugins.module_utils import amqp, evidence, site_role
from continuity_agent.config import AgentConfig, AmqpSettings

LOG = logging.getLogger("continuity_agent.canary")
SKIP_ROLES = (site_role.PASSIVE, site_role.UNREACHABLE)


@dataclass
class CanaryResult:
    site: str
    peer: str
    ts: float
    sent: int = 0
    seen: int = 0
    latency_p50: float | None = None
    latency_max: float | None = None
    error: str | None = None
    records: list[dict] = field(default_factory=list)

    @property
    def seen_ratio(self) -> float | None:
        return (self.seen / self.sent) if self.sent else None


def _options(a: AmqpSettings) -> Any:
    return amqp.ClientOptions(user=a.username, password=a.password, ca=a.ca, verify=a.verify)


def default_probe(origin: list, target: list, address: str, origin_options: Any, target_options: Any,
                  count: int, timeout: float, selector: bool = True) -> dict:
    probe = amqp.CanaryProbe(origin, target, address, origin_options, count=count, interval=0.1, timeout=timeout,
                             origin_options=origin_options, target_options=target_options, selector=selector)
    return probe.run()


def result_from_probe(run_id: str, site: str, peer: str, address: str, res: dict, now: float) -> CanaryResult:
    """Pure: the probe's result dict -> metrics values and evidence ``canary`` records."""
    lat = res.get("latency") or {}
    err = res.get("error")
    out = CanaryResult(site=site, peer=peer, ts=now, sent=int(res.get("sent") or 0), seen=int(res.get("seen") or 0),
                       latency_p50=lat.get("p50"), latency_max=lat.get("max"),
                       error=(err.get("message") if isinstance(err, dict) else err))
    for c in res.get("canaries") or []:
        if c.get("sent_ts") is None:
            continue
        outcome = c.get("outcome") if c.get("outcome") in evidence.CANARY_OUTCOMES else "timeout"
        out.records.append(evidence.canary_record(run_id, c["canary_id"], site, peer, address, c["sent_ts"],
                                                  c.get("seen_ts"), outcome, latency_seconds=c.get("latency_seconds"),
                                                  error=c.get("error")))
    return out


class CanaryRunner:
    def __init__(self, cfg: AgentConfig, role_of: Callable[[str], str | None], run_id: str,
                 on_result: Callable[[CanaryResult], None], probe: Callable[..., dict] = default_probe,
                 clock: Callable[[], float] = time.time):
        self.cfg = cfg
        self.role_of = role_of
        self.run_id = run_id
        self.on_result = on_result
        self.probe = probe
        self.clock = clock
        self.thread: threading.Thread | None = None

    def run_once(self) -> list[CanaryResult]:
        out = []
        c = self.cfg.canaries
        for site, peer in self.cfg.pairs():
            role = self.role_of(site)
            if role in SKIP_ROLES:
                LOG.debug("canary %s -> %s skipped: %s is %s", site, peer, site, role)
                continue
            src, dst = self.cfg.sites[site].amqp, self.cfg.sites[peer].amqp
            assert src is not None and dst is not None  # config requires amqp for every site with canaries
            try:
                origin = amqp.parse_endpoints(list(src.urls), default_site=site)
                target = amqp.parse_endpoints(list(dst.target_urls or dst.urls), default_site=peer)
                res = self.probe(origin, target, c.address, _options(src), _options(dst), c.count, c.timeout,
                                 selector=c.selector)
            except Exception as exc:  # a probe bug or a bad URL must not stop the agent
                LOG.warning("canary %s -> %s failed: %s", site, peer, exc)
                res = {"error": {"message": str(exc)}, "canaries": []}
            result = result_from_probe(self.run_id, site, peer, c.address, res, self.clock())
            if result.error:
                LOG.info("canary %s -> %s: %s", site, peer, result.error)
            self.on_result(result)
            out.append(result)
        return out

    def loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            self.run_once()
            stop.wait(max(0.0, self.cfg.canaries.every - (time.monotonic() - started)))

    def start(self, stop: threading.Event) -> None:
        self.thread = threading.Thread(target=self.loop, args=(stop,), name="canaries", daemon=True)
        self.thread.start()
