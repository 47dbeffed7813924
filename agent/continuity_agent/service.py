"""The long-running agent: sampling loop, HTTP endpoint (/metrics, /healthz), signals.

I/O only; the numbers come from :mod:`continuity_agent.model` (which uses the shared lag model) and the
snapshots from the shared ``site_state.SiteCollector`` (one bulk Jolokia POST per site per cycle).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia, site_state
from continuity_agent import __version__
from continuity_agent.canary import CanaryResult, CanaryRunner
from continuity_agent.config import AgentConfig, ConfigError, load
from continuity_agent.metrics import AgentCollector, make_registry
from continuity_agent.model import Cycle, Sampler
from continuity_agent.output import Outputs
from continuity_agent.rto import OverheadSource

LOG = logging.getLogger("continuity_agent")


class Agent:
    """One agent: ``sample_once()`` runs a cycle; ``run(stop)`` loops until ``stop`` is set."""

    def __init__(self, cfg: AgentConfig, clients: dict[str, Any] | None = None, clock=time.time):
        self.cfg = cfg
        self.clock = clock
        # retries=1: a keep-alive connection the broker closed (restart) is retried once at once; anything
        # longer is left to the next cycle so one dead site never stretches a cycle.
        # One client and collector per site, and per broker of a site with several brokers (key "site/broker").
        self.clients = clients or {
            key: jolokia.client_from_options(jol.as_options(), retries=1, backoff=0.05)
            for key, jol, _broker in self._endpoints()}
        self.collectors = {key: site_state.SiteCollector(self.clients[key], broker, site=key.split("/", 1)[0],
                                                         clock=clock)
                           for key, _jol, broker in self._endpoints()}
        self.sampler = Sampler(cfg)
        self.overhead = OverheadSource(cfg.rto.overhead_seconds, cfg.rto.evidence_dir, cfg.rto.summary_file)
        self.collector = AgentCollector(cfg.interval, cfg.sla.targets())
        self.registry = make_registry(self.collector)
        self.outputs = Outputs(cfg.evidence.dir, cfg.evidence.run_id, cfg.evidence.max_bytes,
                               cfg.evidence.keep_files, cfg.state_dir)
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.collectors)), thread_name_prefix="sample")
        self.last_cycle: Cycle | None = None
        self.last_cycle_monotonic: float | None = None
        self._was_reachable: dict[str, bool] = {}
        self.canaries: CanaryRunner | None = None
        if cfg.canaries.enabled:
            self.canaries = CanaryRunner(cfg, self._role_of, cfg.evidence.run_id, self._canary_result)

    def _endpoints(self) -> list[tuple[str, Any, str | None]]:
        """(collector key, Jolokia settings, broker name): the site name for a single broker, "site/broker" for
        each broker of a site with several."""
        out: list[tuple[str, Any, str | None]] = []
        for name, s in self.cfg.sites.items():
            if s.is_pair:
                out.extend((f"{name}/{b.name}", b.jolokia, b.name) for b in s.brokers)
            else:
                out.append((name, s.jolokia, s.broker_name))
        return out

    def _role_of(self, site: str) -> str | None:
        cycle = self.last_cycle
        return cycle.sites[site].role if cycle is not None and site in cycle.sites else None

    def _canary_result(self, result: CanaryResult) -> None:
        self.collector.publish_canary(result)
        if self.outputs.evidence is not None and result.records:
            try:
                self.outputs.evidence.write(result.records)
            except OSError as exc:
                LOG.error("cannot write canary evidence: %s", exc)

    def _collect(self, key: str) -> dict:
        col = self.collectors[key]
        name = col.site
        try:
            return col.collect()
        except jolokia.JolokiaError as exc:
            return site_state.unreachable(name, col.client.url, col.broker_name, exc, self.clock())
        except Exception as exc:  # a parsing bug must not stop the monitoring of the other site
            LOG.exception("sampling %s failed unexpectedly", key)
            return site_state.unreachable(name, col.client.url, col.broker_name, exc, self.clock())

    def sample_once(self) -> Cycle:
        started = time.monotonic()
        futures = {key: self._pool.submit(self._collect, key) for key in self.collectors}
        read = {key: f.result() for key, f in futures.items()}
        snapshots = {name: read[name] for name, s in self.cfg.sites.items() if not s.is_pair}
        pairs = {name: [(b.name, read[f"{name}/{b.name}"]) for b in s.brokers]
                 for name, s in self.cfg.sites.items() if s.is_pair}
        overhead, source = self.overhead.current()
        cycle = self.sampler.step(snapshots, self.clock(), overhead, source, pairs=pairs)
        for name, view in cycle.sites.items():
            if self._was_reachable.get(name, True) != view.reachable:
                if view.reachable:
                    LOG.warning("site %s is reachable again", name)
                else:
                    LOG.warning("site %s unreachable: %s", name, view.error)
            self._was_reachable[name] = view.reachable
        try:
            self.outputs.write(cycle)
        except OSError as exc:  # a full disk must not stop the metrics
            LOG.error("cannot write evidence/last-known: %s", exc)
        duration = time.monotonic() - started
        self.collector.publish(cycle, duration, self.clock())
        self.last_cycle = cycle
        self.last_cycle_monotonic = time.monotonic()
        return cycle

    def run(self, stop: threading.Event) -> None:
        next_at = time.monotonic()
        if self.canaries is not None:
            self.sample_once()  # roles known before the first probe
            self.canaries.start(stop)
            next_at += self.cfg.interval
        while not stop.is_set():
            try:
                self.sample_once()
            except Exception:  # keep sampling; /healthz goes stale if this repeats
                LOG.exception("sampling cycle failed")
            next_at += self.cfg.interval
            now = time.monotonic()
            if next_at < now:  # a cycle longer than the interval: skip the missed ticks, no burst
                next_at = now
            stop.wait(max(0.0, next_at - now))

    def health(self) -> tuple[int, dict]:
        """200 while cycles complete on time (within 3 intervals + 10 s), 503 otherwise."""
        age = None if self.last_cycle_monotonic is None else time.monotonic() - self.last_cycle_monotonic
        limit = 3 * self.cfg.interval + 10.0
        ok = age is not None and age <= limit
        sites = {}
        if self.last_cycle is not None:
            sites = {n: {"reachable": v.reachable, "role": v.role} for n, v in self.last_cycle.sites.items()}
            for n, v in self.last_cycle.sites.items():
                if v.ha:  # a site with several brokers: which one serves, and whether a site switch is needed
                    sites[n].update(live_broker=v.ha["live_broker"] if v.ha["serving"] else None,
                                    switch_needed=v.switch_needed)
        return (200 if ok else 503), {"status": "ok" if ok else "stale", "version": __version__,
                                      "last_cycle_age_seconds": age, "sites": sites}

    def close(self) -> None:
        if self.canaries is not None and self.canaries.thread is not None:
            self.canaries.thread.join(timeout=self.cfg.canaries.timeout + 5)
        self._pool.shutdown(wait=True)
        self.outputs.close()
        for client in self.clients.values():
            client.close()


class _Handler(BaseHTTPRequestHandler):
    server: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("http %s " + format, self.address_string(), *args)

    def _reply(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        agent: Agent = self.server.agent
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._reply(200, generate_latest(agent.registry), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            status, doc = agent.health()
            self._reply(status, json.dumps(doc).encode() + b"\n", "application/json")
        elif path == "/":
            self._reply(200, b"continuity agent: /metrics /healthz\n", "text/plain")
        else:
            self._reply(404, b"not found\n", "text/plain")

    do_HEAD = do_GET


class MetricsServer:
    def __init__(self, agent: Agent, address: str, port: int):
        self.httpd = ThreadingHTTPServer((address, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.agent = agent
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="continuity_agent", description="continuity.artemis monitoring agent")
    parser.add_argument("--config", required=True, help="YAML or JSON configuration file")
    parser.add_argument("--check", action="store_true", help="validate the configuration and exit")
    parser.add_argument("--once", action="store_true", help="run one cycle, print it as JSON and exit")
    parser.add_argument("--pidfile", help="write the process id here (process mode, no systemd)")
    args = parser.parse_args(argv)
    try:
        cfg = load(args.config)
    except ConfigError as exc:
        print(f"continuity_agent: configuration error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=cfg.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.check:
        print(f"configuration OK: {len(cfg.sites)} sites, interval {cfg.interval:.1f}s")
        return 0
    agent = Agent(cfg)
    if args.once:
        cycle = agent.sample_once()
        print(json.dumps({"sites": {n: vars(v) for n, v in cycle.sites.items()},
                          "directions": [d.lag_sample for d in cycle.directions]},
                         default=lambda o: vars(o) if hasattr(o, "__dict__") else str(o), indent=1))
        agent.close()
        return 0
    stop = threading.Event()

    def _stop(signum: int, _frame: Any) -> None:
        LOG.info("signal %d: stopping after the current cycle", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    server = None
    if cfg.listen.enabled:
        try:
            server = MetricsServer(agent, cfg.listen.address, cfg.listen.port)
        except OSError as exc:
            where = f"{cfg.listen.address}:{cfg.listen.port}"
            print(f"continuity_agent: cannot listen on {where}: {exc.strerror}", file=sys.stderr)
            agent.close()
            return 3
        server.start()
        LOG.info("metrics on http://%s:%d/metrics", cfg.listen.address, server.port)
    if args.pidfile:
        with open(args.pidfile, "w", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    LOG.info("continuity agent %s sampling %s every %.1fs", __version__, ", ".join(cfg.sites), cfg.interval)
    try:
        agent.run(stop)
    finally:
        if server is not None:
            server.stop()
        agent.close()
        if args.pidfile:
            try:
                os.unlink(args.pidfile)
            except OSError:
                pass
        LOG.info("stopped")
    return 0
