"""HTTP side of the lab's Jolokia endpoint: Basic auth against the instance realm, the jolokia-access.xml
Origin policy, GET/POST/bulk, and the recorded Jolokia 2.3 HTTP shapes (401 with an empty body, errors as
HTTP 200 with a JSON status, unknown request type as HTTP 400 text/plain)."""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from time import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from artemis_lab.jolokia.handler import RequestHandler
from artemis_lab.jolokia.requests import UnknownType, from_get_path
from artemis_lab.mbeans import ManagementModel
from artemis_lab.model import InstanceConfig

CONTEXT = "/console/jolokia"
LOG = logging.getLogger("artemis_lab.jolokia")


def origin_allowed(origin: str | None, patterns: list[str], strict: bool) -> bool:
    """jolokia-access.xml <cors>: `*` is a wildcard; with <strict-checking/> a request must carry a matching
    Origin (a missing one is reported as `Origin null`)."""
    if not strict or not patterns:
        return True
    if origin is None:
        return False
    for pattern in patterns:
        regex = ".*".join(re.escape(p) for p in pattern.split("*"))
        if re.fullmatch(regex, origin):
            return True
    return False


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "lab-artemis-jolokia"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s " + format, self.address_string(), *args)

    # --- plumbing -------------------------------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str | None, extra: dict[str, str],
              chunked: bool = False) -> None:
        # Header names and set as the JDK HttpServer under Jolokia writes them (no Server header).
        self.send_response_only(status, "Unauthorized" if status == 401 else None)
        self.send_header("Date", self.date_time_string())
        if chunked:
            self.send_header("Transfer-encoding", "chunked")
        if content_type:
            self.send_header("Content-type", content_type)
        for key, value in extra.items():
            self.send_header(key, value)
        if not chunked:
            self.send_header("Content-length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if chunked:
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n")
        else:
            self.wfile.write(body)

    def _cors(self, origin: str | None) -> dict[str, str]:
        now = time()
        headers = {"Cache-control": "no-cache", "Expires": formatdate(now - 3600, usegmt=True)}
        if origin:
            headers["Access-control-allow-origin"] = origin
            headers["Access-control-allow-credentials"] = "true"
        return headers

    def _json(self, payload: Any, origin: str | None, cors: bool = True) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
        self._send(200, body, "application/json; charset=utf-8", self._cors(origin) if cors else {}, chunked=True)

    def _authenticate(self) -> frozenset[str] | None:
        header = self.headers.get("Authorization") or ""
        if not header.lower().startswith("basic "):
            return None
        try:
            user, _, password = base64.b64decode(header[6:].strip()).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        return self.server.realm.authenticate(user, password)

    def _in_context(self) -> str | None:
        path = urlsplit(self.path).path
        if path == CONTEXT or path.startswith(CONTEXT + "/"):
            return path[len(CONTEXT) :]
        return None

    def _preamble(self) -> tuple[frozenset[str], str | None] | None:
        """Auth then Origin; answers the refusal itself and returns None when refused."""
        if self._in_context() is None:
            self._send(404, b"Not Found\n", "text/plain; charset=utf-8", {})
            return None
        roles = self._authenticate()
        if roles is None:
            self._send(401, b"", None, {"Www-authenticate": 'Basic realm="activemq", charset="UTF-8"'})
            return None
        origin = self.headers.get("Origin")
        cfg = self.server.config
        if not origin_allowed(origin, cfg.jolokia_allowed_origins, cfg.jolokia_strict_checking):
            self._json({"error_type": "java.lang.Exception",
                        "error": f"java.lang.Exception : Origin {origin or 'null'} is not allowed to call this agent",
                        "status": 403}, origin, cors=False)
            return None
        return roles, origin

    def _unknown_type(self, exc: UnknownType, origin: str | None) -> None:
        body = f"400 (Bad Request)\n\n{exc}\n".encode()
        self._send(400, body, "text/plain; charset=utf-8", self._cors(origin))

    # --- verbs ----------------------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        pre = self._preamble()
        if pre is None:
            return
        roles, origin = pre
        split = urlsplit(self.path)
        rel = split.path[len(CONTEXT) :]
        try:
            req = from_get_path(rel, dict(parse_qsl(split.query)))
            self._json(self.server.handler.handle(req, roles), origin)
        except UnknownType as exc:
            self._unknown_type(exc, origin)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        pre = self._preamble()
        if pre is None:
            return
        roles, origin = pre
        try:
            payload = json.loads(raw.decode("utf-8") or "null")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            state = "EOF" if isinstance(exc, json.JSONDecodeError) and exc.pos >= len(raw.strip()) else "unexpected"
            self._json({"error_type": "java.lang.IllegalStateException",
                        "error": f"java.lang.IllegalStateException : Bad parser state, {state} at state "
                                 f"{getattr(exc, 'msg', 'VALUE').upper().replace(' ', '_')}",
                        "status": 500}, origin)
            return
        try:
            if isinstance(payload, list):
                self._json([self.server.handler.handle(item, roles) for item in payload], origin)
            else:
                self._json(self.server.handler.handle(payload, roles), origin)
        except UnknownType as exc:
            self._unknown_type(exc, origin)

    def do_OPTIONS(self) -> None:
        origin = self.headers.get("Origin")
        headers = self._cors(origin)
        headers["Access-control-allow-methods"] = "GET, POST"
        headers["Access-control-max-age"] = "31536000"
        requested = self.headers.get("Access-Control-Request-Headers")
        if requested:
            headers["Access-control-allow-headers"] = requested
        self._send(200, b"", None, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    handler: RequestHandler
    realm: Any
    config: InstanceConfig


class JolokiaServer:
    """Serves `/console/jolokia` on the instance's web binding (bootstrap.xml)."""

    def __init__(self, broker: Any, config: InstanceConfig, realm: Any, host: str | None = None,
                 port: int | None = None):
        bind_host = host or config.http_host
        self.httpd = _Server((bind_host, config.http_port if port is None else port), _Handler)
        self.httpd.realm = realm
        self.httpd.config = config
        shown_host = bind_host if ":" not in bind_host else f"[{bind_host}]"
        self.url = f"http://{shown_host}:{self.httpd.server_address[1]}{CONTEXT}"
        policy = Path(config.instance_dir) / "etc" / "jolokia-access.xml"
        self.model = ManagementModel(broker, config)
        self.httpd.handler = RequestHandler(self.model, self.url, policy.as_uri())
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="jolokia-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
