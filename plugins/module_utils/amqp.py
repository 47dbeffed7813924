# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AMQP 1.0 client helpers shared by the amqp_probe module and the rehearsal traffic tool (python-qpid-proton).

- ``parse_endpoints``: a site's client URL list (``[site=]amqp[s]://host:port``), tried in order on failover.
- ``ClientOptions`` / ``connect``: SASL PLAIN (or ANONYMOUS without a user), TLS (CA, verify, client cert),
  heartbeats; proton's own reconnect is OFF so callers decide where to go next (``EndpointCycle``) and can
  account for in-doubt deliveries first.
- ``classify_condition`` / ``AmqpError``: proton conditions mapped to clear messages (refused credentials,
  missing address, unreachable host, TLS, timeout). Pure functions, unit-tested without a broker.
- ``ManagedClient``: a MessagingHandler that owns one connection over an endpoint list, fails over to the next
  URL with backoff, and gives subclasses ``on_ready``/``on_lost`` hooks.
- ``make_message``: every message gets an AMQP creation time (Artemis derives FirstMessageAge from it;
  ARTEMIS-FACTS section 7).

Passwords never appear in messages: URLs with credentials are refused and ``redact_url`` strips them anyway.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time
import traceback

try:
    from proton import Message, SSL, SSLDomain
    from proton.handlers import MessagingHandler
    from proton.reactor import Copy, Selector

    HAS_PROTON = True
    PROTON_IMPORT_ERROR = None
except ImportError:  # the module reports it with missing_required_lib
    HAS_PROTON = False
    PROTON_IMPORT_ERROR = traceback.format_exc()
    MessagingHandler = object
    Message = SSL = SSLDomain = Copy = Selector = None

DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
_ENDPOINT_RE = re.compile(r"^(?:(?P<site>[A-Za-z0-9][A-Za-z0-9._-]*)=)?(?P<url>.+)$")
_URL_RE = re.compile(r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?(?P<userinfo>[^@/]*@)?"
                     r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/?#\[\]]+)(?::(?P<port>\d+))?/?$")

# Error kinds callers branch on (the probe's failure message, the traffic tool's counters).
AUTH = "auth"                # SASL refused the credentials or no mechanism matched
NOT_FOUND = "not_found"      # address/queue does not exist (auto-create off)
FORBIDDEN = "forbidden"      # authenticated but not permitted on the address
UNREACHABLE = "unreachable"  # connection refused / DNS / no route: a stopped (fenced) acceptor looks like this
DISCONNECTED = "disconnected"  # an established connection dropped (broker stopped, link cut, forced close)
TLS = "tls"
TIMEOUT = "timeout"
RESOURCE = "resource"        # broker limits (address full / blocked)
PROTOCOL = "protocol"
CONFIG = "config"            # bad URL or option given by the user


class AmqpError(Exception):
    """A failure with a kind (one of the constants above) and a message fit for an operator."""

    def __init__(self, kind, message, url=None, site=None, condition=None):
        Exception.__init__(self, message)
        self.kind = kind
        self.message = message
        self.url = url
        self.site = site
        self.condition = condition

    def to_dict(self):
        return {"kind": self.kind, "message": self.message, "url": self.url, "site": self.site,
                "condition": self.condition}


class Endpoint:
    """One client URL of one site."""

    __slots__ = ("host", "port", "scheme", "site", "url")

    def __init__(self, site, url, scheme, host, port):
        self.site = site
        self.url = url
        self.scheme = scheme
        self.host = host
        self.port = port

    @property
    def tls(self):
        return self.scheme == "amqps"

    def __repr__(self):
        return "Endpoint(%s=%s)" % (self.site, self.url)

    def __eq__(self, other):
        return isinstance(other, Endpoint) and (self.site, self.url) == (other.site, other.url)

    def __hash__(self):
        return hash((self.site, self.url))


def redact_url(url):
    """``amqp://user:secret@host`` -> ``amqp://***@host`` (for messages built from user input)."""
    return re.sub(r"(://)[^@/]*@", r"\1***@", str(url))


def parse_endpoint(text, default_site=None):
    """``[site=]amqp[s]://host[:port]`` or ``host:port``. The site defaults to ``default_site`` or host:port."""
    text = (text or "").strip()
    match = _ENDPOINT_RE.match(text)
    url_match = _URL_RE.match(match.group("url")) if match else None
    if not match or not url_match:
        raise AmqpError(CONFIG, "invalid AMQP endpoint %r: expected [site=]amqp[s]://host[:port]"
                        % redact_url(text))
    if url_match.group("userinfo"):
        raise AmqpError(CONFIG, "credentials in the URL %s are not accepted: pass user/password as options so "
                        "they stay out of logs" % redact_url(match.group("url")))
    scheme = (url_match.group("scheme") or "amqp").lower()
    if scheme not in DEFAULT_PORTS:
        raise AmqpError(CONFIG, "unsupported scheme %r in %s: use amqp:// or amqps://" % (scheme, text))
    host = url_match.group("host")
    port = int(url_match.group("port") or DEFAULT_PORTS[scheme])
    if not 0 < port < 65536:
        raise AmqpError(CONFIG, "invalid port %d in %s" % (port, text))
    site = match.group("site") or default_site or "%s:%d" % (host.strip("[]"), port)
    return Endpoint(site, "%s://%s:%d" % (scheme, host, port), scheme, host, port)


def parse_endpoints(items, default_site=None):
    """A list (or comma-separated string) of endpoints, in failover order. Empty -> AmqpError."""
    if isinstance(items, str):
        items = [i for i in items.split(",")]
    result = []
    for item in items or []:
        for part in str(item).split(","):
            if part.strip():
                result.append(parse_endpoint(part, default_site))
    if not result:
        raise AmqpError(CONFIG, "no AMQP endpoint given")
    return result


class EndpointCycle:
    """Failover order over an endpoint list with exponential backoff (pure logic, no I/O).

    ``next_attempt()`` returns ``(endpoint, delay)``: the first attempt is immediate, each following endpoint
    of the same round too, and a new round over the list waits ``delay`` (initial, x factor, up to maximum).
    ``connected()`` resets the backoff, and the next failure starts from the endpoint after the one that was
    lost, so a client on a fenced site moves on to the next site at once."""

    def __init__(self, endpoints, initial=0.2, factor=2.0, maximum=2.0):
        if not endpoints:
            raise AmqpError(CONFIG, "no AMQP endpoint given")
        self.endpoints = list(endpoints)
        self.initial = initial
        self.factor = factor
        self.maximum = maximum
        self.index = -1
        self.tried_in_round = 0
        self.delay = 0.0
        self.failures = 0

    def next_attempt(self):
        self.index = (self.index + 1) % len(self.endpoints)
        delay = 0.0
        if self.tried_in_round >= len(self.endpoints):
            self.tried_in_round = 0
            self.delay = self.initial if self.delay == 0 else min(self.maximum, self.delay * self.factor)
            delay = self.delay
        self.tried_in_round += 1
        return self.endpoints[self.index], delay

    def failed(self):
        self.failures += 1

    def connected(self):
        self.tried_in_round = 1  # the current endpoint counts as tried in the next round
        self.delay = 0.0
        self.failures = 0

    @property
    def current(self):
        return self.endpoints[self.index] if self.index >= 0 else None


class ClientOptions:
    """Connection options common to the probe and the traffic tool."""

    def __init__(self, user=None, password=None, ca=None, verify=True, cert=None, key=None, key_password=None,
                 heartbeat=None, connect_timeout=10.0, container_id=None, sasl_mechanisms=None):
        self.user = user
        self.password = password
        self.ca = ca
        self.verify = verify
        self.cert = cert
        self.key = key
        self.key_password = key_password
        self.heartbeat = heartbeat
        self.connect_timeout = float(connect_timeout)
        self.container_id = container_id
        self.sasl_mechanisms = sasl_mechanisms

    def __repr__(self):  # never show the password
        return "ClientOptions(user=%r, password=%s, ca=%r, verify=%r)" % (
            self.user, "***" if self.password else None, self.ca, self.verify)


def ssl_domain(options):
    """A client SSLDomain for ``options`` (used for amqps:// endpoints)."""
    require_proton()
    if not SSL.present():
        raise AmqpError(TLS, "amqps:// requested but this proton build has no TLS support")
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    try:
        if options.ca:
            domain.set_trusted_ca_db(options.ca)
        if options.verify:
            domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME, options.ca)
        else:
            domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
        if options.cert:
            domain.set_credentials(options.cert, options.key, options.key_password)
    except Exception as exc:  # proton raises SSLException with little context
        raise AmqpError(TLS, "TLS configuration failed (ca=%s, cert=%s): %s" % (options.ca, options.cert, exc)) \
            from None
    return domain


def connect_kwargs(endpoint, options):
    """Keyword arguments for ``Container.connect`` (pure apart from building the SSLDomain)."""
    kwargs = {"url": endpoint.url, "reconnect": False, "sasl_enabled": True, "allow_insecure_mechs": True}
    if options.user:
        kwargs["user"] = options.user
        kwargs["password"] = options.password or ""
        kwargs["allowed_mechs"] = options.sasl_mechanisms or "PLAIN"
    else:
        kwargs["allowed_mechs"] = options.sasl_mechanisms or "ANONYMOUS"
    if options.heartbeat:
        kwargs["heartbeat"] = float(options.heartbeat)
    if options.container_id:
        kwargs["container_id"] = options.container_id
    if endpoint.tls:
        kwargs["ssl_domain"] = ssl_domain(options)
        # A plain connection must not offer PLAIN in the clear when the user asked for TLS; over TLS it is fine.
    return kwargs


def require_proton():
    if not HAS_PROTON:
        raise AmqpError(CONFIG, "python-qpid-proton is required (pip install python-qpid-proton)")


# --- error classification (pure) ------------------------------------------------------------------------------

def classify_condition(name, description=None, where=None):
    """Map a proton/AMQP condition to ``(kind, message)``. ``where`` names the endpoint/address for the text."""
    name = name or ""
    desc = (description or "").strip()
    low = desc.lower()
    prefix = "%s: " % where if where else ""
    detail = " (%s%s)" % (name, ": " + desc if desc else "") if name or desc else ""
    if name == "amqp:unauthorized-access" or "sasl" in low or "authentication" in low or "mech" in low:
        if "not authorized" in low or "permission" in low or "user does not have" in low:
            return FORBIDDEN, "%spermission denied%s" % (prefix, detail)
        return AUTH, "%sauthentication failed: the broker refused the credentials or offers no matching SASL " \
                     "mechanism%s" % (prefix, detail)
    if name == "amqp:not-found" or "does not exist" in low or "not found" in low:
        return NOT_FOUND, "%saddress or queue not found%s" % (prefix, detail)
    if name in ("amqp:forbidden",) or "not allowed" in low or "not authorized" in low:
        return FORBIDDEN, "%spermission denied%s" % (prefix, detail)
    if name == "amqp:resource-limit-exceeded":
        return RESOURCE, "%sbroker resource limit%s" % (prefix, detail)
    if name.startswith("proton:ssl") or "ssl" in low or "tls" in low or "certificate" in low:
        return TLS, "%sTLS failure%s" % (prefix, detail)
    if name.startswith("proton:io") or name.startswith("proton.pythonio") or name == "proton:io:connect":
        if "refused" in low:
            return UNREACHABLE, "%sconnection refused: broker down or its client acceptor is stopped (fenced " \
                                "site)%s" % (prefix, detail)
        if "name or service" in low or "not known" in low or "resolve" in low or "no address" in low:
            return UNREACHABLE, "%shost name does not resolve%s" % (prefix, detail)
        if "unreachable" in low or "no route" in low or "timed out" in low:
            return UNREACHABLE, "%shost unreachable%s" % (prefix, detail)
        return DISCONNECTED, "%sconnection lost%s" % (prefix, detail)
    if name in ("amqp:connection:forced", "amqp:connection:framing-error", "amqp:internal-error") or \
            name.startswith("amqp:connection"):
        return DISCONNECTED, "%sconnection closed by the broker%s" % (prefix, detail)
    if name == "amqp:resource-deleted" or name.startswith("amqp:link:detach-forced"):
        return DISCONNECTED, "%slink closed by the broker%s" % (prefix, detail)
    return PROTOCOL, "%sAMQP error%s" % (prefix, detail or " (no condition)")


def error_from_condition(condition, endpoint=None, address=None):
    """AmqpError from a proton Condition (or None)."""
    name = getattr(condition, "name", None) if condition is not None else None
    desc = getattr(condition, "description", None) if condition is not None else None
    where = None
    if endpoint is not None:
        where = "%s (%s)" % (endpoint.site, endpoint.url)
        if address:
            where += " address %s" % address
    elif address:
        where = "address %s" % address
    kind, message = classify_condition(name, desc, where)
    return AmqpError(kind, message, url=endpoint.url if endpoint else None,
                     site=endpoint.site if endpoint else None,
                     condition={"name": name, "description": desc} if name or desc else None)


# --- messages -------------------------------------------------------------------------------------------------

def make_message(body, msg_id, address=None, properties=None, durable=True, creation_time=None, ttl=None,
                 subject=None):
    """A proton Message with the AMQP creation time always set (epoch seconds; proton encodes milliseconds)."""
    require_proton()
    msg = Message(body=body, id=msg_id, durable=bool(durable), properties=dict(properties or {}))
    msg.creation_time = time.time() if creation_time is None else creation_time
    if address:
        msg.address = address
    if ttl:
        msg.ttl = ttl
    if subject:
        msg.subject = subject
    return msg


def payload(size, seed=""):
    """A deterministic text body of ``size`` bytes (UTF-8 ASCII)."""
    if size <= 0:
        return ""
    base = (seed + "|") if seed else ""
    filler = "x" * max(0, size - len(base))
    return (base + filler)[:size]


def browse_options(selector=None):
    """Receiver options that browse (distribution-mode copy) instead of consuming, with an optional JMS
    selector so the broker only sends matching messages."""
    require_proton()
    opts = [Copy()]
    if selector:
        opts.append(Selector(selector))
    return opts


def consume_options(selector=None):
    require_proton()
    return [Selector(selector)] if selector else []


# --- a connection that fails over between URLs ------------------------------------------------------------------

class _Call:
    """A timer target: ``container.schedule(delay, _Call(fn))``."""

    def __init__(self, fn):
        self.fn = fn
        self.cancelled = False

    def on_timer_task(self, event):
        if not self.cancelled:
            self.fn()


def schedule(container, delay, fn):
    """Run ``fn`` on the container thread after ``delay`` seconds; returns a handle with ``cancelled``."""
    call = _Call(fn)
    container.schedule(max(0.0, delay), call)
    return call


class ManagedClient(MessagingHandler):
    """One client connection over an endpoint list.

    Subclasses implement ``on_ready(event)`` (open links on ``self.connection``), ``on_lost(error)`` (a
    connection or link was lost: account for unsettled deliveries), and may override ``on_failed(error)``
    (reconnect gave up / not allowed). ``reconnect=False`` makes every loss final (the probe);
    ``max_failures`` bounds consecutive failed attempts (None = keep trying, the traffic tool during a swapover).
    Errors of a kind in ``give_up_on`` (refused credentials, TLS, bad options) end the retries at once: another
    attempt cannot fix them.
    """

    def __init__(self, endpoints, options, name="client", reconnect=True, max_failures=None, prefetch=0,
                 auto_accept=False, backoff=(0.2, 2.0, 2.0), give_up_on=(AUTH, TLS, CONFIG)):
        MessagingHandler.__init__(self, prefetch=prefetch, auto_accept=auto_accept)
        self.cycle = EndpointCycle(endpoints, initial=backoff[0], factor=backoff[1], maximum=backoff[2])
        self.options = options
        self.name = name
        self.reconnect = reconnect
        self.max_failures = max_failures
        self.give_up_on = tuple(give_up_on or ())
        self.container = None
        self.connection = None
        self.endpoint = None
        self.ready = False
        self.stopping = False
        self.errors = []          # AmqpError list, newest last (bounded)
        self.connects = 0
        self.last_error = None
        self._connect_timer = None
        self._gen = 0

    # life cycle --------------------------------------------------------------------------------------------
    def start(self, container):
        self.container = container
        self._attempt()

    def _attempt(self):
        if self.stopping:
            return
        endpoint, delay = self.cycle.next_attempt()
        if delay:
            schedule(self.container, delay, lambda: self._open(endpoint))
        else:
            self._open(endpoint)

    def _open(self, endpoint):
        if self.stopping:
            return
        self.endpoint = endpoint
        try:
            kwargs = connect_kwargs(endpoint, self.options)
        except AmqpError as exc:
            self._give_up(exc)
            return
        self.connection = self.container.connect(handler=self, **kwargs)
        # proton hands out a new wrapper object per event, so identity checks fail: tag the connection with a
        # generation number and its endpoint (attributes live in proton's record, not in the wrapper).
        self._gen += 1
        self.connection._continuity_gen = self._gen
        self.connection._continuity_endpoint = endpoint
        gen = self._gen
        timeout = self.options.connect_timeout
        if timeout and timeout > 0:
            self._connect_timer = schedule(self.container, timeout, lambda: self._connect_timed_out(gen))

    def is_current(self, conn):
        """Whether a proton connection (from an event) is the one this client currently owns."""
        return self.connection is not None and getattr(conn, "_continuity_gen", None) == self._gen

    def _connect_timed_out(self, gen):
        if gen == self._gen and self.connection is not None and not self.ready and not self.stopping:
            err = AmqpError(TIMEOUT, "%s (%s): no AMQP open from the broker within %.1fs (host unreachable or link "
                                     "cut)" % (self.endpoint.site, self.endpoint.url, self.options.connect_timeout),
                            url=self.endpoint.url, site=self.endpoint.site)
            self._lost(err, self.connection)

    def stop(self):
        """Close gracefully (call on the container thread)."""
        self.stopping = True
        if self._connect_timer:
            self._connect_timer.cancelled = True
        if self.connection is not None:
            self.connection.close()

    # proton events -----------------------------------------------------------------------------------------
    def on_connection_opened(self, event):
        if not self.is_current(event.connection):
            return
        if self._connect_timer:
            self._connect_timer.cancelled = True
        self.ready = True
        self.connects += 1
        self.cycle.connected()
        self.on_ready(event)

    def on_transport_error(self, event):
        conn = event.connection
        endpoint = getattr(conn, "_continuity_endpoint", self.endpoint)
        err = error_from_condition(event.transport.condition, endpoint)
        self._lost(err, conn)

    def on_disconnected(self, event):
        conn = event.connection
        endpoint = getattr(conn, "_continuity_endpoint", self.endpoint)
        cond = event.transport.condition if event.transport else None
        err = error_from_condition(cond, endpoint) if cond else AmqpError(
            DISCONNECTED, "%s (%s): connection lost" % (endpoint.site, endpoint.url), url=endpoint.url,
            site=endpoint.site)
        self._lost(err, conn)

    def on_connection_error(self, event):
        endpoint = getattr(event.connection, "_continuity_endpoint", self.endpoint)
        self._lost(error_from_condition(event.connection.remote_condition, endpoint), event.connection)

    def on_session_error(self, event):
        endpoint = getattr(event.connection, "_continuity_endpoint", self.endpoint)
        self._lost(error_from_condition(event.session.remote_condition, endpoint), event.connection)

    def on_link_error(self, event):
        endpoint = getattr(event.connection, "_continuity_endpoint", self.endpoint)
        address = event.link.remote_source.address if event.link.is_receiver else event.link.remote_target.address
        address = address or (event.link.source.address if event.link.is_receiver else event.link.target.address)
        err = error_from_condition(event.link.remote_condition, endpoint, address)
        self.on_link_failed(event, err)

    def on_link_failed(self, event, err):
        """A link was closed with an error (missing address, permission): default = treat as connection loss
        (after a swapover the new site may not have the address yet; the next attempt retries)."""
        self._lost(err, event.connection)

    # loss handling -----------------------------------------------------------------------------------------
    def _lost(self, err, conn):
        if conn is None or not self.is_current(conn):
            return  # a late event of a connection already given up
        self.ready = False
        self.last_error = err
        self.errors.append(err)
        del self.errors[:-50]
        old = self.connection
        self.connection = None
        if self._connect_timer:
            self._connect_timer.cancelled = True
        try:
            self.on_lost(err)
        finally:
            try:
                old.close()
                if old.transport is not None:
                    old.transport.close_tail()
                    old.transport.close_head()
            except Exception:  # pragma: no cover - proton may already have freed it
                pass
        if self.stopping:
            return
        self.cycle.failed()
        if not self.reconnect or err.kind in self.give_up_on or \
                (self.max_failures is not None and self.cycle.failures >= self.max_failures):
            self._give_up(err)
            return
        self._attempt()

    def _give_up(self, err):
        self.stopping = True
        self.on_failed(err)

    # hooks -------------------------------------------------------------------------------------------------
    def on_ready(self, event):
        """The connection is open: open links here."""

    def on_lost(self, err):
        """The connection (or a link) was lost; unsettled deliveries on it are in doubt."""

    def on_failed(self, err):
        """No further attempt will be made."""
