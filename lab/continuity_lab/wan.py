"""WAN link emulator: a loopback TCP proxy for the mirror connections between two lab sites.

Per direction (`forward` = client -> target, `reverse` = target -> client): one-way latency in ms and a bandwidth
cap in bytes/s. Latency is a timestamped queue per direction, so a slow link still carries full throughput
(bytes in flight = rate x latency). `cut()` drops every open connection and refuses new ones (the listening
socket is closed: connection refused); `restore()` listens again on the same port.

Python:  link = WanLink(("127.0.0.1", 5672)); link.start(); link.set_latency(20); link.cut(); link.restore()
Shell:   python -m continuity_lab.wan serve --target 127.0.0.1:5672 [--listen 127.0.0.1:0] [--control 127.0.0.1:0]
         python -m continuity_lab.wan ctl --control http://127.0.0.1:PORT latency 20 | bandwidth 100000 | cut |
                                                                      restore | status
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIRECTIONS = ("forward", "reverse")
CHUNK = 64 * 1024


@dataclass
class _Direction:
    latency_s: float = 0.0
    bandwidth: float | None = None  # bytes/s, None = unlimited
    bytes: int = 0


@dataclass(eq=False)  # identity hash: pipes live in a set
class _Pipe:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class WanLink:
    def __init__(self, target: tuple[str, int], listen: tuple[str, int] = ("127.0.0.1", 0), name: str = "wan"):
        self.target = target
        self.listen = listen
        self.name = name
        self.dirs = {d: _Direction() for d in DIRECTIONS}
        self.is_cut = False
        self.target_up = True  # the target accepted the last probe and the link listens for it (see _follow_target)
        self.accepted = 0
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._pipes: set[tuple[_Pipe, _Pipe]] = set()
        self.port = 0

    # --- life cycle (any thread) ------------------------------------------------------------------------------------
    def start(self) -> WanLink:
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"wan-{self.name}", daemon=True)
        self._thread.start()
        self._call(self._listen)
        self._call(self._start_watch)
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._call(self._shutdown)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._thread = None

    def _call(self, coro_fn: Callable[[], Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro_fn(), self._loop).result(timeout=10)

    # --- controls (any thread) --------------------------------------------------------------------------------------
    def _targets(self, direction: str) -> list[_Direction]:
        if direction == "both":
            return list(self.dirs.values())
        if direction not in self.dirs:
            raise ValueError(f"direction must be one of both, {', '.join(DIRECTIONS)}")
        return [self.dirs[direction]]

    def set_latency(self, ms: float, direction: str = "both") -> None:
        if ms < 0:
            raise ValueError("latency must be >= 0")
        for d in self._targets(direction):
            d.latency_s = ms / 1000.0

    def set_bandwidth(self, bytes_per_s: float | None, direction: str = "both") -> None:
        if bytes_per_s is not None and bytes_per_s <= 0:
            bytes_per_s = None
        for d in self._targets(direction):
            d.bandwidth = bytes_per_s

    def cut(self) -> None:
        self._call(self._cut)

    def restore(self) -> None:
        self._call(self._restore)

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "listen": f"{self.listen[0]}:{self.port}",
            "target": f"{self.target[0]}:{self.target[1]}",
            "cut": self.is_cut,
            "target_up": self.target_up,
            "connections": len(self._pipes),
            "accepted": self.accepted,
            "latency_ms": {k: round(v.latency_s * 1000, 3) for k, v in self.dirs.items()},
            "bandwidth": {k: v.bandwidth for k, v in self.dirs.items()},
            "bytes": {k: v.bytes for k, v in self.dirs.items()},
        }

    # --- event loop side --------------------------------------------------------------------------------------------
    async def _listen(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.listen[0], self.port or self.listen[1]))
        self._server = await asyncio.start_server(self._on_client, sock=sock)
        self.port = sock.getsockname()[1]

    async def _cut(self) -> None:
        self.is_cut = True
        if self._server is not None:
            self._server.close()
            self._server = None
        for client, upstream in list(self._pipes):
            for pipe in (client, upstream):
                for task in pipe.tasks:
                    task.cancel()
                _abort(pipe.writer)
        self._pipes.clear()

    async def _restore(self) -> None:
        if self.is_cut:
            self.is_cut = False
            if self.target_up:
                await self._listen()

    async def _follow_target(self, interval: float = 0.5) -> None:
        """Listen only while the target accepts connections. A relay that accepted a client whose target is down
        would hand the client a connection that opens and then drops, where a routed network refuses it; an
        Artemis broker connection counts the first as a success and keeps retrying that URI (seen with an HA
        peer: dc2's mirror stayed on dc1's standby backup), while a refusal makes it try the next URI."""
        while True:
            try:
                _reader, writer = await asyncio.wait_for(asyncio.open_connection(*self.target), timeout=2)
                writer.close()
                up = True
            except (TimeoutError, OSError):
                up = False
            if up != self.target_up:
                if not up:
                    self.target_up = False
                    if self._server is not None:
                        self._server.close()  # new clients are refused; connections already piped end by themselves
                        self._server = None
                else:
                    # target_up turns True only once the link listens again: status() readers (tests, the lab)
                    # connect as soon as they see it, and a refusal then would be the link's own race.
                    try:
                        if not self.is_cut and self._server is None:
                            await self._listen()
                        self.target_up = True
                    except OSError as err:  # the port was taken meanwhile: stay down, try again next probe
                        print(f"{self.name}: cannot listen again on port {self.port}: {err}", file=sys.stderr)
            await asyncio.sleep(interval)

    async def _start_watch(self) -> None:
        self._watch = asyncio.get_running_loop().create_task(self._follow_target())

    async def _shutdown(self) -> None:
        if getattr(self, "_watch", None) is not None:
            self._watch.cancel()
        await self._cut()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.is_cut:
            _abort(writer)
            return
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(writer)  # the peer is down: the client sees the connection drop, as across a WAN
            return
        client, upstream = _Pipe(reader, writer), _Pipe(up_reader, up_writer)
        pair = (client, upstream)
        self._pipes.add(pair)
        fwd_q: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        rev_q: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        client.tasks = [asyncio.create_task(self._read(reader, fwd_q, "forward")),
                        asyncio.create_task(self._write(rev_q, writer, "reverse", pair))]
        upstream.tasks = [asyncio.create_task(self._read(up_reader, rev_q, "reverse")),
                          asyncio.create_task(self._write(fwd_q, up_writer, "forward", pair))]

    async def _read(self, reader: asyncio.StreamReader, queue: asyncio.Queue[tuple[float, bytes]],
                    direction: str) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                # Timestamp on arrival; the writer releases it after the latency of this direction.
                await queue.put((time.monotonic() + self.dirs[direction].latency_s, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((time.monotonic(), b""))

    async def _write(self, queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter, direction: str,
                     pair: tuple[_Pipe, _Pipe]) -> None:
        d = self.dirs[direction]
        next_free = time.monotonic()
        try:
            while True:
                due, data = await queue.get()
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                if not data:
                    break
                view = memoryview(data)
                while view:
                    piece = view
                    if d.bandwidth:
                        # Token bucket: at most 10 ms worth of bytes per write, each paid for in time.
                        piece = view[: max(1, int(d.bandwidth * 0.01))]
                        wait = next_free - time.monotonic()
                        if wait > 0:
                            await asyncio.sleep(wait)
                        next_free = max(next_free, time.monotonic()) + len(piece) / d.bandwidth
                    writer.write(piece)
                    await writer.drain()
                    d.bytes += len(piece)
                    view = view[len(piece) :]
        except (ConnectionError, OSError):
            pass
        finally:
            self._close_pair(pair)

    def _close_pair(self, pair: tuple[_Pipe, _Pipe]) -> None:
        if pair in self._pipes:
            self._pipes.discard(pair)
            for pipe in pair:
                for task in pipe.tasks:
                    if task is not asyncio.current_task():
                        task.cancel()
                with contextlib.suppress(Exception):
                    pipe.writer.close()


def _abort(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.transport.abort()


# --- control endpoint ---------------------------------------------------------------------------------------------
class _Control(BaseHTTPRequestHandler):
    link: WanLink

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("", "/status"):
            self._reply(200, self.link.status())
        else:
            self._reply(404, {"error": f"unknown path {self.path}"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            args = json.loads(self.rfile.read(length) or b"{}")
            action = self.path.strip("/")
            direction = args.get("direction", "both")
            if action == "latency":
                self.link.set_latency(float(args["ms"]), direction)
            elif action == "bandwidth":
                value = args.get("bytes_per_s")
                self.link.set_bandwidth(float(value) if value is not None else None, direction)
            elif action == "cut":
                self.link.cut()
            elif action == "restore":
                self.link.restore()
            else:
                self._reply(404, {"error": f"unknown action {action}"})
                return
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            self._reply(400, {"error": str(exc)})
            return
        self._reply(200, self.link.status())


def serve_control(link: WanLink, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    handler = type("ControlHandler", (_Control,), {"link": link})
    httpd = ThreadingHTTPServer((host, port), handler)
    threading.Thread(target=httpd.serve_forever, name=f"wan-ctl-{link.name}", daemon=True).start()
    return httpd


def control(url: str, action: str, **args: Any) -> dict[str, Any]:
    """Client for the control endpoint (used by `ctl`, labctl and tests)."""
    if action == "status":
        req = urllib.request.Request(url.rstrip("/") + "/status")
    else:
        req = urllib.request.Request(url.rstrip("/") + "/" + action, data=json.dumps(args).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


# --- command line -------------------------------------------------------------------------------------------------
def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def _serve(args: argparse.Namespace) -> int:
    link = WanLink(_hostport(args.target), _hostport(args.listen), args.name)
    link.set_latency(args.latency)
    link.set_bandwidth(args.bandwidth)
    link.start()
    ctl_host, ctl_port = _hostport(args.control)
    httpd = serve_control(link, ctl_host, ctl_port)
    info = {"name": args.name, "listen": f"{link.listen[0]}:{link.port}", "target": args.target,
            "control": f"http://{ctl_host}:{httpd.server_address[1]}"}
    print(json.dumps(info), flush=True)
    if args.state_file:
        with open(args.state_file, "w") as fh:
            json.dump(info, fh)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    httpd.shutdown()
    link.stop()
    return 0


def _ctl(args: argparse.Namespace) -> int:
    extra: dict[str, Any] = {}
    if args.direction:
        extra["direction"] = args.direction
    if args.action == "latency":
        extra["ms"] = float(args.value)
    elif args.action == "bandwidth":
        extra["bytes_per_s"] = None if args.value in (None, "0", "off", "none") else float(args.value)
    print(json.dumps(control(args.control, args.action, **extra), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m continuity_lab.wan", description="lab WAN link emulator")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run one link (proxy + control endpoint) in the foreground")
    s.add_argument("--target", required=True, help="host:port the link forwards to")
    s.add_argument("--listen", default="127.0.0.1:0")
    s.add_argument("--control", default="127.0.0.1:0")
    s.add_argument("--name", default="wan")
    s.add_argument("--latency", type=float, default=0.0, help="one-way latency in ms, both directions")
    s.add_argument("--bandwidth", type=float, default=None, help="bytes/s per direction")
    s.add_argument("--state-file", help="write the listen/control addresses here as JSON")
    c = sub.add_parser("ctl", help="talk to a running link's control endpoint")
    c.add_argument("--control", required=True, help="http://host:port of the link")
    c.add_argument("--direction", choices=["both", *DIRECTIONS])
    c.add_argument("action", choices=["latency", "bandwidth", "cut", "restore", "status"])
    c.add_argument("value", nargs="?")
    args = p.parse_args(argv)
    return _serve(args) if args.cmd == "serve" else _ctl(args)


if __name__ == "__main__":
    sys.exit(main())
