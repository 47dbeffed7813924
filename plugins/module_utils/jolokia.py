# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""The one Jolokia client of continuity.artemis (modules, runbooks, agent, pipeline). Standard library only.

Everything is POSTed as JSON (names with ``$`` and ``"`` are awkward in GET paths) over one keep-alive
``http.client`` connection. Jolokia answers most failures with HTTP 200 and a JSON ``status`` per request
item (ARTEMIS-FACTS sections 4 and 7); this module turns those into typed exceptions whose messages tell the
operator what to do.

Typical use::

    client = JolokiaClient("http://dc1:8161/console/jolokia", username="admin", password="...")
    version = client.read(objectname.broker("dc1"), "Version")
    results = client.bulk([read_request(...), exec_request(...)])   # one HTTP request, per-item results
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import http.client
import json
import re
import socket
import ssl
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

DEFAULT_TIMEOUT = 10.0
#: Requests that never change broker state: safe to retry after a connection error.
SAFE_TYPES = frozenset(("read", "search", "version", "list"))
#: Artemis operations that only read state; a bulk with these stays retriable.
READ_ONLY_OPERATIONS = frozenset(("listBrokerConnections", "listQueues", "listAddresses", "countMessages",
                                  "listConsumers", "listConnections", "listProducers"))
ARTEMIS_DOMAIN = "org.apache.activemq.artemis"

_ORIGIN_RE = re.compile(r"Origin (\S+) is not allowed", re.IGNORECASE)
_NOT_AUTHORIZED_RE = re.compile(r"not authorized to access (\w+):\s*(\S+)", re.IGNORECASE)
_BROKER_KEY_RE = re.compile(r'broker="((?:[^"\\]|\\.)*)"')


# --------------------------------------------------------------------------------------------------- errors
class JolokiaError(Exception):
    """Base of every client error. ``status`` is the Jolokia/HTTP status, ``request`` the failing item."""

    def __init__(self, message: str, status: Optional[int] = None, error_type: Optional[str] = None,
                 error: Optional[str] = None, request: Optional[dict] = None, hint: Optional[str] = None):
        self.status = status
        self.error_type = error_type
        self.error = error
        self.request = request
        self.hint = hint
        text = message if not hint else "%s. %s" % (message.rstrip("."), hint)
        super().__init__(text)

    def to_dict(self) -> dict:
        """Plain data for module results and evidence notes (never contains credentials)."""
        return {"class": type(self).__name__, "status": self.status, "error_type": self.error_type,
                "error": self.error, "message": str(self), "request": self.request}


class ConnectionFailed(JolokiaError):
    """Could not talk HTTP to the Jolokia URL (DNS, refused, timeout, TLS, reset).

    ``stale`` is true when a kept-alive connection turned out to be closed by the server before it answered
    (the web server's idle timeout): the request never reached the broker.
    """

    stale = False


class ProtocolError(JolokiaError):
    """The endpoint answered, but not like Jolokia (HTML, wrong path, unparsable JSON)."""


class AuthenticationError(JolokiaError):
    """HTTP 401: wrong or missing credentials."""


class OriginRefused(JolokiaError):
    """JSON 403 ``Origin ... is not allowed to call this agent`` (jolokia-access.xml strict checking)."""


class PermissionDenied(JolokiaError):
    """JSON 403 ``User not authorized to access <kind>: <name>``: logged in without the management role."""


class NotFound(JolokiaError):
    """JSON 404: unknown MBean (broker, address, queue, acceptor, connection) or attribute."""


class BadRequest(JolokiaError):
    """JSON 400 (unknown/overloaded operation, wrong arguments) or HTTP 400 (malformed request)."""


class BrokerError(JolokiaError):
    """JSON 500: an exception inside Artemis; ``error_type`` is the Artemis exception class."""


class BrokerNotReady(JolokiaError):
    """The broker's JVM answers Jolokia, but the broker cannot be managed yet: it is still starting (or stopping).

    Seen on a real Artemis start: first JSON 404 ``Broker 'dc1' does not exist ... brokers there: none`` (no broker
    MBean registered yet), then for up to ~13 s JSON 500 ``Broker is not started. It can not be managed yet``
    (``java.lang.IllegalStateException``). Every wait treats it like a refused connection: not up yet.
    """


def is_not_started(status: int, error_type: Optional[str], error: Optional[str]) -> bool:
    """The JSON 500 Artemis answers for every management call while the server is not started."""
    return status == 500 and "not started" in (error or "").lower() and (
        not error_type or error_type.endswith("IllegalStateException"))


# -------------------------------------------------------------------------------------------- requests
def read_request(mbean: str, attribute: Union[str, Sequence[str], None] = None, path: Optional[str] = None) -> dict:
    """A ``read`` item; ``attribute`` None = all attributes, a list = several. ``mbean`` may be a pattern."""
    req: Dict[str, Any] = {"type": "read", "mbean": mbean}
    if attribute is not None:
        req["attribute"] = attribute if isinstance(attribute, str) else list(attribute)
    if path:
        req["path"] = path
    return req


def write_request(mbean: str, attribute: str, value: Any) -> dict:
    return {"type": "write", "mbean": mbean, "attribute": attribute, "value": value}


def exec_request(mbean: str, operation: str, *arguments: Any) -> dict:
    """An ``exec`` item. Give the signature for overloaded operations: ``pause(boolean)``, ``resume()``."""
    return {"type": "exec", "mbean": mbean, "operation": operation, "arguments": list(arguments)}


def search_request(pattern: str) -> dict:
    return {"type": "search", "mbean": pattern}


def list_request(path: Optional[str] = None, max_depth: Optional[int] = None) -> dict:
    req: Dict[str, Any] = {"type": "list"}
    if path:
        req["path"] = path
    if max_depth is not None:
        req["config"] = {"maxDepth": max_depth}
    return req


def version_request() -> dict:
    return {"type": "version"}


def is_safe(req: dict) -> bool:
    """True when repeating ``req`` cannot change broker state (retry allowed)."""
    if req.get("type") in SAFE_TYPES:
        return True
    if req.get("type") == "exec":
        return str(req.get("operation", "")).partition("(")[0] in READ_ONLY_OPERATIONS
    return False


def describe_request(req: Optional[dict]) -> str:
    """Short human text for a request item ("exec pause(boolean) on <mbean>")."""
    if not req:
        return "request"
    kind = req.get("type", "?")
    if kind == "read":
        attr = req.get("attribute")
        what = "all attributes" if attr is None else (attr if isinstance(attr, str) else ",".join(attr))
        return "read %s of %s" % (what, req.get("mbean"))
    if kind == "write":
        return "write %s of %s" % (req.get("attribute"), req.get("mbean"))
    if kind == "exec":
        return "exec %s on %s" % (req.get("operation"), req.get("mbean"))
    if kind == "search":
        return "search %s" % req.get("mbean")
    return kind


# --------------------------------------------------------------------------------------------- results
class Result:
    """One item of a (bulk) response: ``status``, ``value`` or ``error_type``/``error``, the ``request`` sent."""

    __slots__ = ("error", "error_type", "request", "status", "timestamp", "value")

    def __init__(self, request: dict, body: Any):
        self.request = request
        if not isinstance(body, dict):
            body = {"status": 500, "error_type": "ProtocolError", "error": "unexpected item %r" % (body,)}
        self.status = int(body.get("status", 500)) if str(body.get("status", "")).isdigit() else 500
        self.value = body.get("value")
        self.error_type = body.get("error_type")
        self.error = body.get("error")
        self.timestamp = body.get("timestamp")

    @property
    def ok(self) -> bool:
        return self.status == 200

    def raise_for_status(self) -> "Result":
        if not self.ok:
            raise error_from_item(self.request, self.status, self.error_type, self.error)
        return self


def _strip_class(error: Optional[str], error_type: Optional[str]) -> str:
    """Jolokia writes ``"<class> : <message>"``; keep the message."""
    text = error or ""
    if error_type and text.startswith(error_type):
        text = text[len(error_type):].lstrip(" :")
    return text or (error_type or "unknown error")


def error_from_item(request: Optional[dict], status: int, error_type: Optional[str],
                    error: Optional[str]) -> JolokiaError:
    """Map a Jolokia JSON error item to the typed exception with an operator hint."""
    msg = _strip_class(error, error_type)
    what = describe_request(request)
    kwargs = {"status": status, "error_type": error_type, "error": error, "request": request}
    if status == 403:
        m = _ORIGIN_RE.search(error or "")
        if m:
            return OriginRefused(
                "Jolokia refused the request: Origin %s is not allowed" % m.group(1),
                hint="Add an <allow-origin> matching the Origin this client sends to etc/jolokia-access.xml on the "
                     "broker, or set the 'origin' option to an origin that is already allowed (by default the "
                     "client sends the scheme://host:port of 'url')", **kwargs)
        m = _NOT_AUTHORIZED_RE.search(error or "")
        if m:
            return PermissionDenied(
                "Permission denied for %s: the user may not access %s %s" % (what, m.group(1), m.group(2)),
                hint="Log in as a user whose role is in HAWTIO_ROLE (artemis.profile, default 'amq') and, for "
                     "operations, allowed by etc/management.xml", **kwargs)
        return PermissionDenied("Permission denied for %s: %s" % (what, msg),
                                hint="Check the user's roles in artemis-roles.properties and management.xml",
                                **kwargs)
    if status == 404:
        return NotFound("Not found: %s (%s)" % (what, msg), **kwargs)
    if status == 400:
        hint = None
        if "overloaded" in msg:
            hint = "Give the operation with its signature, e.g. 'pause(boolean)' or 'pause()'"
        return BadRequest("Jolokia rejected %s: %s" % (what, msg), hint=hint, **kwargs)
    if is_not_started(status, error_type, error):
        return BrokerNotReady("Broker not ready for %s: %s" % (what, msg),
                              hint="The broker is starting or stopping; wait for Started=true", **kwargs)
    if status == 500 or status >= 500:
        return BrokerError("Artemis failed %s: %s%s" % (what, msg, " [%s]" % error_type if error_type else ""),
                           **kwargs)
    return JolokiaError("Jolokia status %s for %s: %s" % (status, what, msg), **kwargs)


# ------------------------------------------------------------------------------------------- transport
class HttpTransport:
    """One keep-alive HTTP(S) connection. ``post`` returns ``(status, headers, body bytes)``.

    Raises :class:`ConnectionFailed` on socket/TLS errors. The connection is reopened transparently on the
    next call after a failure.
    """

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT, validate_certs: bool = True,
                 ca_path: Optional[str] = None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("Jolokia url must be http(s)://host[:port]/path, not %r" % url)
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.path = parts.path or "/"
        if not self.path.endswith("/"):
            # Jolokia's servlet accepts both; the trailing slash avoids a redirect on some proxies.
            self.path += "/"
        self.timeout = timeout
        self._ssl_context = None
        if self.scheme == "https":
            ctx = ssl.create_default_context(cafile=ca_path) if ca_path else ssl.create_default_context()
            if not validate_certs:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self._ssl_context = ctx
        self._conn: Optional[http.client.HTTPConnection] = None
        self.last_used = 0.0

    def _connect(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self._ssl_context)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def post(self, body: bytes, headers: Dict[str, str], fresh: bool = False) -> Tuple[int, Dict[str, str], bytes]:
        if fresh:
            self.close()
        reused = self._conn is not None
        if self._conn is None:
            self._conn = self._connect()
        try:
            self._conn.request("POST", self.path, body=body, headers=headers)
            resp = self._conn.getresponse()
            data = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            if (hdrs.get("connection", "").lower() == "close") or resp.will_close:
                self.close()
            self.last_used = time.monotonic()
            return resp.status, hdrs, data
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            self.close()
            failed = ConnectionFailed(_connection_message(self, exc))
            failed.stale = reused and isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError,
                                                       BrokenPipeError))
            raise failed from exc


def _connection_message(t: HttpTransport, exc: BaseException) -> str:
    where = "%s://%s:%s%s" % (t.scheme, t.host, t.port, t.path)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ("TLS certificate of %s could not be verified (%s): give the CA with 'ca_path', or set "
                "validate_certs=false only for a lab" % (where, exc))
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "Timed out talking to Jolokia at %s: raise 'timeout' or check the broker's web server" % where
    if isinstance(exc, ConnectionRefusedError):
        return "Connection refused by %s: is the broker (its web server / bootstrap.xml binding) up?" % where
    if isinstance(exc, socket.gaierror):
        return "Cannot resolve %s: %s" % (t.host, exc)
    return "Cannot talk to Jolokia at %s: %s: %s" % (where, type(exc).__name__, exc)


def _sleep(seconds: float) -> None:
    # looked up at call time so tests can replace this module's ``time``
    time.sleep(seconds)


# ---------------------------------------------------------------------------------------------- client
class JolokiaClient:
    """Jolokia client with bulk POSTs, typed errors, safe retries.

    :param url: Jolokia endpoint, e.g. ``http://dc1:8161/console/jolokia``.
    :param origin: ``Origin`` header; default ``scheme://host[:port]`` of ``url`` (what the stock
        ``jolokia-access.xml`` ``*://<http-host>*`` allows). Empty string = send no Origin.
    :param retries: extra attempts for safe requests (read/search/version/list) after a connection error,
        with exponential ``backoff`` (seconds). Writes and execs are never retried: a lost response does
        not prove the operation did not happen.
    :param transport: object with ``post(body, headers, fresh=False) -> (status, headers, bytes)``; tests
        pass a fake, production uses :class:`HttpTransport`.

    ``request_count`` counts HTTP requests (benchmarks, and the "constant requests per site" property).
    """

    def __init__(self, url: str, username: Optional[str] = None, password: Optional[str] = None,
                 origin: Optional[str] = None, validate_certs: bool = True, ca_path: Optional[str] = None,
                 timeout: float = DEFAULT_TIMEOUT, retries: int = 2, backoff: float = 0.2,
                 transport: Any = None, sleep: Optional[Callable[[float], None]] = None,
                 idle_reconnect: float = 2.0):
        self.url = url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("Jolokia url must be http(s)://host[:port]/path, not %r" % url)
        if origin is None:
            origin = "%s://%s" % (parts.scheme, parts.netloc.rsplit("@", 1)[-1])
        self.origin = origin
        self.username = username
        self._auth = None
        if username:
            token = ("%s:%s" % (username, password or "")).encode("utf-8")
            self._auth = "Basic " + base64.b64encode(token).decode("ascii")
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.timeout = timeout
        self._sleep = sleep or _sleep
        self.idle_reconnect = idle_reconnect
        self.transport = transport or HttpTransport(url, timeout, validate_certs, ca_path)
        self.request_count = 0
        self.last_elapsed = 0.0

    def __repr__(self) -> str:  # never show the password
        return "JolokiaClient(%r, username=%r)" % (self.url, self.username)

    def close(self) -> None:
        close = getattr(self.transport, "close", None)
        if callable(close):
            close()

    # ---- HTTP
    def _headers(self) -> Dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.origin:
            h["Origin"] = self.origin
        if self._auth:
            h["Authorization"] = self._auth
        return h

    def _post(self, payload: Any, safe: bool) -> Any:
        body = json.dumps(payload).encode("utf-8")
        attempts = 1 + (self.retries if safe else 0)
        last: Optional[ConnectionFailed] = None
        for attempt in range(attempts):
            if attempt:
                self._sleep(self.backoff * (2 ** (attempt - 1)))
            # An unsafe request never goes out on a connection that sat idle: the server may have closed it,
            # and a failure there could not be told apart from a failure after the broker acted.
            idle = time.monotonic() - getattr(self.transport, "last_used", 0.0)
            fresh = (not safe) and idle > self.idle_reconnect
            started = time.monotonic()
            try:
                status, headers, data = self._send(body, fresh, safe)
            except ConnectionFailed as exc:
                last = exc
                continue
            finally:
                self.last_elapsed = time.monotonic() - started
            return self._decode(status, headers, data, payload)
        if last is None:  # unreachable: the loop runs at least once and returns or records a failure
            raise ConnectionFailed("no attempt made")
        if attempts > 1:
            raise ConnectionFailed("%s (after %d attempts)" % (last, attempts)) from last
        raise last

    def _send(self, body: bytes, fresh: bool, safe: bool) -> Tuple[int, Dict[str, str], bytes]:
        self.request_count += 1
        try:
            return self.transport.post(body, self._headers(), fresh=fresh)
        except ConnectionFailed as exc:
            if not (safe and exc.stale):
                raise
        # The web server had closed the kept-alive connection (its idle timeout) before reading the request:
        # it never reached the broker, so a read goes out again at once on a new connection, whatever `retries`.
        self.request_count += 1
        return self.transport.post(body, self._headers(), fresh=True)

    def _decode(self, status: int, headers: Dict[str, str], data: bytes, payload: Any) -> Any:
        req = payload if isinstance(payload, dict) else None
        if status == 401:
            raise AuthenticationError(
                "Jolokia at %s rejected the credentials (HTTP 401)" % self.url, status=401, request=req,
                hint="Check 'username'/'password' against the broker's artemis-users.properties (JAAS realm "
                     "'activemq')" if self.username else "Set 'username' and 'password': the broker requires login")
        text = data.decode("utf-8", "replace") if data else ""
        if status == 404 and not text.lstrip().startswith(("{", "[")):
            raise ProtocolError("Nothing at %s (HTTP 404): check the Jolokia path (usually /console/jolokia)"
                                % self.url, status=404)
        reason = next((v for k, v in (headers or {}).items() if k.lower() == "hawtio-forbidden-reason"), None)
        if status == 403 and reason is not None and not text.strip():
            # The stock web console (hawtio) answers a failed login with an empty 403 and this header, not 401.
            raise AuthenticationError(
                "Jolokia at %s rejected the credentials (HTTP 403 from the web console, Hawtio-Forbidden-Reason: "
                "%s)" % (self.url, reason), status=403, request=req,
                hint="Check 'username'/'password' against the broker's artemis-users.properties and that the user "
                     "has a role in HAWTIO_ROLE (artemis.profile)" if self.username
                else "Set 'username' and 'password': the broker requires login")
        if status == 403 and not text.lstrip().startswith(("{", "[")):
            raise PermissionDenied("HTTP 403 from %s: %s" % (self.url, text.strip()[:200]), status=403,
                                   hint="A proxy or the web server refused the request; check its access rules")
        if status == 400 and not text.lstrip().startswith(("{", "[")):
            raise BadRequest("Jolokia rejected the request (HTTP 400): %s" % " ".join(text.split())[:300],
                             status=400, request=req)
        try:
            doc = json.loads(text)
        except ValueError:
            raise ProtocolError("Not a Jolokia JSON answer from %s (HTTP %s): %r" % (self.url, status, text[:200]),
                                status=status, request=req) from None
        if status >= 400 and not isinstance(doc, (dict, list)):
            raise JolokiaError("HTTP %s from %s" % (status, self.url), status=status, request=req)
        return doc

    # ---- bulk
    def bulk(self, requests: Sequence[dict], raise_errors: bool = False) -> List[Result]:
        """POST all ``requests`` in ONE HTTP request; returns one :class:`Result` per item, in order.

        A whole-request failure (refused Origin answers one error object for the whole array, 401, network)
        raises. Per-item failures are returned (``Result.ok`` False) unless ``raise_errors``.
        """
        reqs = list(requests)
        if not reqs:
            return []
        safe = all(is_safe(r) for r in reqs)
        doc = self._post(reqs, safe)
        if isinstance(doc, dict):
            # Jolokia refuses an entire request (Origin, parse error) with one object.
            item = Result(reqs[0] if len(reqs) == 1 else {"type": "bulk", "items": len(reqs)}, doc)
            if not item.ok:
                raise self._enrich(error_from_item(None, item.status, item.error_type, item.error))
            doc = [doc]
        if not isinstance(doc, list) or len(doc) != len(reqs):
            raise ProtocolError("Jolokia answered %s items for %d requests" %
                                (len(doc) if isinstance(doc, list) else "no", len(reqs)))
        results = [Result(r, d) for r, d in zip(reqs, doc, strict=False)]
        if raise_errors:
            for res in results:
                if not res.ok:
                    raise self._enrich(error_from_item(res.request, res.status, res.error_type, res.error))
        return results

    def value_of(self, res: Result) -> Any:
        """``res.value``, or raise its typed error (a 404 names the brokers that exist, see :meth:`_enrich`)."""
        if not res.ok:
            raise self._enrich(error_from_item(res.request, res.status, res.error_type, res.error))
        return res.value

    def request(self, req: dict) -> Any:
        """Send one request item; return its ``value`` or raise the typed error."""
        res = self.bulk([req])[0]
        if not res.ok:
            raise self._enrich(error_from_item(res.request, res.status, res.error_type, res.error))
        return res.value

    # ---- conveniences
    def read(self, mbean: str, attribute: Union[str, Sequence[str], None] = None) -> Any:
        """Read one attribute (value), a list (dict) or all (dict); a pattern gives ``{mbean: {attr: value}}``."""
        return self.request(read_request(mbean, attribute))

    def write(self, mbean: str, attribute: str, value: Any) -> Any:
        return self.request(write_request(mbean, attribute, value))

    def exec(self, mbean: str, operation: str, *arguments: Any) -> Any:
        return self.request(exec_request(mbean, operation, *arguments))

    def search(self, pattern: str) -> List[str]:
        value = self.request(search_request(pattern))
        return list(value or [])

    def list(self, path: Optional[str] = None, max_depth: Optional[int] = None) -> Any:
        return self.request(list_request(path, max_depth))

    def version(self) -> dict:
        return self.request(version_request())

    def broker_names(self) -> List[str]:
        """Names of the Artemis brokers registered on this JVM (a ``search``; needs no management role)."""
        names = []
        for name in self.search("%s:broker=*" % ARTEMIS_DOMAIN):
            m = _BROKER_KEY_RE.search(name)
            if m:
                names.append(m.group(1).replace('\\"', '"').replace("\\\\", "\\"))
        return sorted(set(names))

    def discover_broker(self, wanted: Optional[str] = None) -> str:
        """Return ``wanted`` when it exists, else the only broker; raise :class:`NotFound` with the names."""
        names = self.broker_names()
        if wanted is not None:
            if wanted in names:
                return wanted
            if not names:
                raise self._not_registered(wanted)
            raise NotFound("Broker %r does not exist at %s; brokers there: %s" % (
                wanted, self.url, ", ".join(names) or "none"),
                status=404, hint="Set 'broker_name' to one of them")
        if len(names) == 1:
            return names[0]
        if not names:
            raise self._not_registered(None)
        raise BadRequest("Several brokers at %s (%s): set 'broker_name'" % (self.url, ", ".join(names)),
                         status=400)

    def _not_registered(self, wanted: Optional[str], **kwargs: Any) -> "BrokerNotReady":
        """No broker MBean at all: the JVM serves Jolokia before the broker registers (its startup window)."""
        what = "Broker %r is not registered" % wanted if wanted is not None else "No Artemis broker MBean is registered"
        return BrokerNotReady("%s at %s yet (no broker there)" % (what, self.url), status=404,
                              hint="The broker is still starting, or this is not the broker's Jolokia endpoint",
                              **kwargs)

    def _enrich(self, err: JolokiaError) -> JolokiaError:
        """For a 404 on a name with an unknown ``broker="X"``, say which broker names exist (one search)."""
        if not isinstance(err, NotFound) or not err.request:
            return err
        mbean = str(err.request.get("mbean") or "")
        m = _BROKER_KEY_RE.search(mbean)
        if not m:
            return err
        wanted = m.group(1)
        try:
            names = self.broker_names()
        except JolokiaError:
            return err
        if not names:
            # The JVM serves Jolokia before the broker registers its MBeans: a broker in its startup window.
            return self._not_registered(wanted, error_type=err.error_type, error=err.error, request=err.request)
        if wanted not in names:
            hint = "Set 'broker_name' to one of them (or omit it to discover the only broker)"
            message = "Broker %r does not exist at %s; brokers there: %s" % (wanted, self.url,
                                                                             ", ".join(names) or "none")
            return NotFound(message, status=404, error_type=err.error_type, error=err.error, request=err.request,
                            hint=hint)
        return err


def client_from_options(options: Dict[str, Any], **overrides: Any) -> JolokiaClient:
    """Build a client from a dict with the shared option names (``url``, ``username``, ``password``,
    ``validate_certs``, ``ca_path``, ``origin``, ``timeout``); used by modules, agent and runbooks."""
    kw = {
        "url": options["url"],
        "username": options.get("username"),
        "password": options.get("password"),
        "origin": options.get("origin"),
        "validate_certs": options.get("validate_certs", True),
        "ca_path": options.get("ca_path"),
        "timeout": float(options.get("timeout") or DEFAULT_TIMEOUT),
    }
    kw.update(overrides)
    return JolokiaClient(**kw)


# ------------------------------------------------------------------------------------------- readiness
# What a broker answers while it starts: a refused connection (or a web server that does not serve the console
# yet), then JSON 404 "no broker MBean", then JSON 500 "Broker is not started". All of them mean "not ready yet".
NOT_READY = (ConnectionFailed, ProtocolError, BrokerNotReady)


def is_certificate_failure(exc: BaseException) -> bool:
    """The TLS certificate of the endpoint could not be verified (no waiting cures that: the CA is wrong)."""
    seen: Optional[BaseException] = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__
    return False


def wait_started(client: JolokiaClient, broker_name: Optional[str] = None, timeout: float = 120.0,
                 sleep: float = 1.0, clock: Optional[Callable[[], float]] = None,
                 pause: Optional[Callable[[float], None]] = None) -> dict:
    """Wait until the broker answers Jolokia with ``Started=true``; the readiness rule of the roles and modules.

    Every answer of the startup window (:data:`NOT_READY`, and ``Started=false``) is retried every ``sleep``
    seconds for up to ``timeout`` seconds; then the last one is raised, saying how long it waited. Errors no
    wait cures are raised at once: credentials, refused Origin, permissions, an unverifiable TLS certificate.
    Returns ``{"broker_name", "elapsed", "attempts"}``.
    """
    now = clock or time.monotonic
    wait = pause or _sleep
    start = now()
    attempts = 0
    while True:
        attempts += 1
        try:
            name = broker_name or client.discover_broker()
            quoted = name.replace("\\", "\\\\").replace('"', '\\"')
            if client.read('org.apache.activemq.artemis:broker="%s"' % quoted, "Started") is True:
                return {"broker_name": name, "elapsed": now() - start, "attempts": attempts}
            last: JolokiaError = BrokerNotReady("Broker %r at %s answers Started=false" % (name, client.url))
        except NOT_READY as exc:
            if isinstance(exc, ConnectionFailed) and is_certificate_failure(exc):
                raise
            last = exc
        elapsed = now() - start
        if elapsed + sleep > timeout:
            raise type(last)("Broker not ready at %s after %.0f s (%d attempts); last answer: %s"
                             % (client.url, elapsed, attempts, last), status=last.status,
                             error_type=last.error_type, error=last.error, request=last.request) from last
        wait(max(0.0, sleep))
