# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
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
    from proton import Message, SSL, SSLDomain, symbol
    from proton.handlers import MessagingHandler
    from proton.reactor import Copy, LinkOption, Selector

    HAS_PROTON = True
    PROTON_IMPORT_ERROR = None
except ImportError:  # the module reports it with missing_required_lib
    HAS_PROTON = False
    PROTON_IMPORT_ERROR = traceback.format_exc()
    MessagingHandler = LinkOption = object
    Message = SSL = SSLDomain = Copy = Selector = symbol = None

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
        items = items.split(",")
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


class Anycast(LinkOption):
    """Ask for ANYCAST (point-to-point) semantics with the ``queue`` terminus capability, as the JMS client does for
    a queue. Without it Artemis auto-creates a missing address with the default routing type (MULTICAST for AMQP):
    every receiver would get a subscription of its own and see every message."""

    def apply(self, link):
        term = link.target if link.is_sender else link.source
        term.capabilities.put_object(symbol("queue"))


def sender_options():
    require_proton()
    return [Anycast()]


def browse_options(selector=None):
    """Receiver options that browse (distribution-mode copy) instead of consuming, with an optional JMS
    selector so the broker only sends matching messages."""
    require_proton()
    opts = [Anycast(), Copy()]
    if selector:
        opts.append(Selector(selector))
    return opts


def consume_options(selector=None):
    require_proton()
    return [Anycast()] + ([Selector(selector)] if selector else [])


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


# --- canary probe (amqp_probe module, runbook post-gates) --------------------------------------------------------

PROBE_PROPERTY = "ct_probe"      # probe id: the selector and the client-side filter
CANARY_PROPERTY = "ct_canary"    # canary index


def percentiles(values, points=(50, 95, 99)):
    """Nearest-rank percentiles plus min/max/mean of ``values`` (None when empty). Pure."""
    vals = sorted(v for v in values if v is not None)
    result = {"count": len(vals)}
    if not vals:
        result.update({"min": None, "max": None, "mean": None})
        result.update({"p%d" % p: None for p in points})
        return result
    for p in points:
        rank = max(1, int(-(-p * len(vals) // 100)))  # ceil(p/100 * n), at least 1
        result["p%d" % p] = vals[min(rank, len(vals)) - 1]
    result.update({"min": vals[0], "max": vals[-1], "mean": sum(vals) / len(vals)})
    return result


class _ProbeSide(ManagedClient):
    """One side of the probe: the origin (sender, then remover) or the target (browser)."""

    def __init__(self, probe, role, endpoints, options):
        ManagedClient.__init__(self, endpoints, options, name=role, reconnect=True,
                               max_failures=len(endpoints), prefetch=200, auto_accept=False,
                               backoff=(0.05, 2.0, 0.2))
        self.probe = probe
        self.role = role
        self.link = None
        self.link_ready = False

    def on_ready(self, event):
        self.probe.side_ready(self, event)

    def on_link_opened(self, event):
        if event.link.name == getattr(self.link, "name", None):
            self.link_ready = True
            self.probe.link_opened(self, event)

    def on_sendable(self, event):
        self.probe.pump()

    def on_accepted(self, event):
        self.probe.settled(event, "accepted")

    def on_rejected(self, event):
        self.probe.settled(event, "rejected")

    def on_released(self, event):
        self.probe.settled(event, "released")

    def on_message(self, event):
        self.probe.message(self, event)

    def on_link_failed(self, event, err):
        self.probe.link_failed(self, event, err)

    def on_lost(self, err):
        self.link = None
        self.link_ready = False
        if not self.probe.finished:
            self.probe.note_loss(self, err)

    def on_failed(self, err):
        self.probe.fail(err)

    def on_connection_closed(self, event):
        self.probe.side_closed(self)

    def on_disconnected(self, event):
        if self.stopping:
            self.probe.side_closed(self)
        else:
            ManagedClient.on_disconnected(self, event)


class CanaryProbe:
    """Send canaries on the origin, watch them appear on the target by browsing, then consume them on the origin.

    ``run()`` blocks at most ``timeout`` seconds (plus proton shutdown) and returns a result dict; it never raises
    for AMQP failures, they are in ``result["error"]``. ``timeout`` covers everything: observation ends
    ``cleanup_reserve`` seconds before it so the canaries can still be removed.
    """

    def __init__(self, origin, target, address, options, count=5, interval=0.1, timeout=30.0, probe_id=None,
                 remove=True, verify_removal=False, durable=True, browse_refresh=0.05, selector=True,
                 origin_options=None, target_options=None):
        require_proton()
        self.origin_eps = list(origin)
        self.target_eps = list(target)
        self.address = address
        self.count = int(count)
        self.interval = float(interval)
        self.timeout = float(timeout)
        self.probe_id = probe_id or "probe-%s" % uuid_hex()
        self.remove = remove
        self.verify_removal = verify_removal and remove
        self.durable = durable
        self.browse_refresh = float(browse_refresh)
        self.selector = ("%s = '%s'" % (PROBE_PROPERTY, self.probe_id)) if selector else None
        self.origin = _ProbeSide(self, "origin", self.origin_eps, origin_options or options)
        self.target = _ProbeSide(self, "target", self.target_eps, target_options or options)
        self.canaries = []       # dicts: canary_id, index, sent_ts, accepted_ts, seen_ts, outcome, error
        self.by_id = {}
        self.phase = "connecting"
        self.error = None
        self.finished = False
        self.removed = 0
        self.removal_started = None
        self.removal_seconds = None
        self.removal_verified = None
        self.container = None
        self.started = None
        self.last_seen_m = None
        self.browse_opened_m = None
        self.notes = []
        self._next_send = 0
        self._first_send_m = None
        self._visible_on_target = False
        self._links = 0
        self._open_sides = []

    # public ---------------------------------------------------------------------------------------------------
    def run(self):
        from proton.reactor import Container

        self.container = Container(self)
        self.container.container_id = "continuity-probe-%s" % self.probe_id
        self.started = time.time()
        self.container.run()
        return self.result()

    def result(self):
        lat = [c["latency_seconds"] for c in self.canaries if c["outcome"] == "seen"]
        seen = sum(1 for c in self.canaries if c["outcome"] == "seen")
        return {
            "probe_id": self.probe_id, "address": self.address,
            "origin_site": self.origin_eps[0].site, "target_site": self.target_eps[0].site,
            "origin_url": self.origin.endpoint.url if self.origin.endpoint else None,
            "target_url": self.target.endpoint.url if self.target.endpoint else None,
            "sent": sum(1 for c in self.canaries if c["sent_ts"] is not None),
            "accepted": sum(1 for c in self.canaries if c["accepted_ts"] is not None),
            "seen": seen, "removed": self.removed, "removal_seconds": self.removal_seconds,
            "removal_verified": self.removal_verified, "canaries": [dict(c) for c in self.canaries],
            "latency": percentiles(lat), "phase": self.phase,
            "error": self.error.to_dict() if self.error else None,
            "ok": self.error is None and seen == self.count and (not self.remove or self.removed == seen),
            "elapsed": round(time.time() - self.started, 3) if self.started else None, "notes": list(self.notes),
        }

    # container events (the probe is the container's handler) ---------------------------------------------------
    def on_reactor_init(self, event):
        # Hard deadline first: whatever happens, run() returns within the timeout.
        schedule(self.container, self.timeout, self._deadline)
        reserve = min(2.0, self.timeout * 0.2) if self.remove else 0.0
        schedule(self.container, max(0.1, self.timeout - reserve), self._observe_deadline)
        self.target.start(self.container)
        self.origin.start(self.container)
        self._tick()

    def _tick(self):
        if self.finished:
            return
        now_m = time.monotonic()
        # A browser may take a snapshot of the queue (the lab broker's do) and never show canaries sent after it
        # opened: re-open it when nothing new arrived for browse_refresh seconds while a SENT canary is unseen.
        # The selector keeps each browse down to our own canaries; the refresh bounds the latency resolution.
        if self.phase in ("sending", "observing") and self.target.link_ready and self.browse_opened_m is not None:
            quiet_since = max(self.browse_opened_m, self.last_seen_m or 0)
            if now_m - quiet_since >= self.browse_refresh and self._missing():
                self._open_browser()
        if self.phase == "verifying" and self.browse_opened_m is not None and \
                now_m - self.browse_opened_m >= max(self.browse_refresh, 0.2):
            if self._visible_on_target:
                self._visible_on_target = False
                self._open_browser()
            else:
                self.removal_verified = True
                self.removal_seconds = round(time.time() - self.removal_started, 6)
                self._finish()
                return
        schedule(self.container, 0.02, self._tick)

    # sides ------------------------------------------------------------------------------------------------------
    def side_ready(self, side, event):
        if side is self.target:
            self._open_browser()
        elif self.phase in ("connecting", "sending", "observing"):
            side.link = event.container.create_sender(side.connection, self.address, name=self._link_name("send"),
                                                      options=sender_options())
        elif self.phase == "removing":
            self._open_remover()

    def _open_browser(self):
        t = self.target
        if t.connection is None:
            return
        if t.link is not None:
            t.link.close()
        t.link_ready = False
        t.link = self.container.create_receiver(t.connection, self.address, name=self._link_name("browse"),
                                                options=browse_options(self.selector))
        self.browse_opened_m = time.monotonic()

    def _open_remover(self):
        o = self.origin
        if o.connection is None:
            return
        if o.link is not None:
            o.link.close()
        o.link_ready = False
        o.link = self.container.create_receiver(o.connection, self.address, name=self._link_name("remove"),
                                                options=consume_options(self.selector))

    def _link_name(self, what):
        # AMQP link names must be unique per connection; the browser is re-opened under a new name each time
        self._links += 1
        return "%s-%s-%d" % (self.probe_id, what, self._links)

    def link_opened(self, side, event):
        if self.phase == "connecting" and self.origin.link_ready and self.target.link_ready:
            self.phase = "sending"
            self.pump()

    def pump(self):
        """Send the next canary when it is due (canaries are spaced by ``interval``)."""
        if self.phase != "sending" or self.origin.link is None or not self.origin.link_ready:
            return
        link = self.origin.link
        while self._next_send < self.count and link.credit > 0:
            idx = self._next_send
            due = self._first_send_m + idx * self.interval if idx else None
            if idx and time.monotonic() < due:
                schedule(self.container, due - time.monotonic(), self.pump)
                return
            if idx == 0:
                self._first_send_m = time.monotonic()
            self._send(link, idx)
            self._next_send += 1
        if self._next_send >= self.count:
            self.phase = "observing"
            self._check_done()

    def _send(self, link, idx):
        canary_id = "%s-%d" % (self.probe_id, idx)
        now = time.time()
        msg = make_message("continuity canary %d" % idx, canary_id, durable=self.durable, creation_time=now,
                           properties={PROBE_PROPERTY: self.probe_id, CANARY_PROPERTY: idx, "ct_sent_ts": now})
        entry = {"canary_id": canary_id, "index": idx, "sent_ts": now, "accepted_ts": None, "seen_ts": None,
                 "latency_seconds": None, "outcome": None, "error": None}
        self.canaries.append(entry)
        self.by_id[canary_id] = entry
        dlv = link.send(msg)
        dlv._ct_canary = canary_id

    def settled(self, event, outcome):
        cid = getattr(event.delivery, "_ct_canary", None)
        entry = self.by_id.get(cid)
        if entry is None:
            return
        if outcome == "accepted":
            entry["accepted_ts"] = time.time()
        else:
            entry["outcome"] = "error"
            entry["error"] = "origin broker %s the canary" % outcome
            self.fail(AmqpError(PROTOCOL, "%s: the origin broker %s canary %s" % (
                self.origin.endpoint.site, outcome, cid)))

    def message(self, side, event):
        now = time.time()
        msg = event.message
        props = msg.properties or {}
        ours = props.get(PROBE_PROPERTY) == self.probe_id
        if side is self.target:
            event.delivery.settle()  # browsed copies are not acknowledged
            if not ours:
                return
            entry = self.by_id.get(str(msg.id))
            if self.phase == "verifying":
                self._visible_on_target = True
                return
            if entry is not None and entry["seen_ts"] is None:
                entry["seen_ts"] = now
                entry["latency_seconds"] = round(max(0.0, now - entry["sent_ts"]), 6)
                entry["outcome"] = "seen"
                self.last_seen_m = time.monotonic()
                self._check_done()
            return
        # origin: removal
        if ours:
            side.accept(event.delivery)
            self.removed += 1
            if self.removed >= sum(1 for c in self.canaries if c["accepted_ts"] is not None):
                self._removal_done()
        else:
            # a selector-less broker handed us someone else's message: give it back untouched
            side.release(event.delivery, delivered=False)

    def _missing(self):
        return [c for c in self.canaries if c["seen_ts"] is None and c["outcome"] != "error"]

    def _check_done(self):
        if self.phase == "observing" and not self._missing() and len(self.canaries) == self.count:
            self._start_removal()

    def _start_removal(self):
        if not self.remove:
            self._finish()
            return
        self.phase = "removing"
        self.removal_started = time.time()
        if not any(c["accepted_ts"] for c in self.canaries):
            self._finish()
            return
        if self.target.link is not None:
            self.target.link.close()
            self.target.link = None
        self._open_remover()

    def _removal_done(self):
        if self.verify_removal and self.error is None and self.target.connection is not None:
            self.phase = "verifying"
            self._visible_on_target = False
            self._open_browser()
            return
        self._finish()

    # failures and deadlines -------------------------------------------------------------------------------------
    def link_failed(self, side, event, err):
        """A refused selector (brokers without filter support answer amqp:not-implemented) is not fatal: browse
        and remove without it and filter on the probe id here."""
        cond = (err.condition or {}).get("name") or ""
        desc = ((err.condition or {}).get("description") or "").lower()
        if self.selector and event.link.is_receiver and (
                cond == "amqp:not-implemented" or "selector" in desc or "filter" in desc):
            self.selector = None
            self.notes.append("%s refused the selector (%s); filtering canaries on the client" % (
                side.cycle.endpoints[0].site, err.message))
            if side is self.target:
                self._open_browser()
            elif self.phase == "removing":
                self._open_remover()
            return
        self.fail(err)

    def note_loss(self, side, err):
        self.notes.append("%s: %s" % (side.role, err.message))

    def fail(self, err):
        if self.error is None:
            self.error = err
        if self.phase in ("connecting",):
            self._finish()  # nothing was sent: nothing to clean up
        elif self.phase in ("sending", "observing"):
            for c in self._missing():
                c["outcome"] = "error"
                c["error"] = err.message
            if self.origin.connection is not None:
                self._start_removal()
            else:
                self._finish()
        elif self.phase in ("removing", "verifying"):
            self._finish()

    def _observe_deadline(self):
        if self.finished or self.phase not in ("connecting", "sending", "observing"):
            return
        if self.phase == "connecting":
            side = self.target if not self.target.link_ready else self.origin
            self.error = AmqpError(TIMEOUT, "%s site %s: not connected within %.1fs" % (
                side.role, side.cycle.endpoints[0].site, self.timeout), site=side.cycle.endpoints[0].site)
            self._finish()
            return
        missing = self._missing()
        for c in missing:
            c["outcome"] = "timeout"
        not_sent = self.count - len(self.canaries)
        if missing or not_sent:
            self.error = AmqpError(TIMEOUT, "%d of %d canaries not seen on %s within %.1fs%s (mirror link cut, "
                                            "lagging, or the address is not mirrored)" % (
                                                len(missing) + not_sent, self.count, self.target_eps[0].site,
                                                self.timeout, "; %d never sent" % not_sent if not_sent else ""),
                                   site=self.target_eps[0].site)
        if self.origin.connection is not None:
            self._start_removal()
        else:
            self._finish()

    def _deadline(self):
        if self.finished:
            return
        if self.phase == "removing":
            self.notes.append("removed %d canaries before the timeout; the rest stay on %s" % (
                self.removed, self.origin_eps[0].site))
            if self.error is None:
                self.error = AmqpError(TIMEOUT, "canaries not removed from %s within %.1fs" % (
                    self.origin_eps[0].site, self.timeout))
        elif self.phase == "verifying":
            self.removal_verified = False
            self.notes.append("canary removal not yet mirrored to %s at the timeout" % self.target_eps[0].site)
        self._finish()

    def _finish(self):
        if self.finished:
            return
        self.finished = True
        for c in self.canaries:
            if c["outcome"] is None:
                c["outcome"] = "timeout"
        # Close gracefully so the removal acks reach the broker before the close frame, then stop the container
        # once both sides are closed (or after a short grace: a cut connection never answers the close).
        self._open_sides = [s for s in (self.origin, self.target) if s.connection is not None]
        for side in (self.origin, self.target):
            side.stop()
        if not self._open_sides:
            self.container.stop()
        else:
            # the grace never pushes the probe past its timeout
            remaining = self.timeout - (time.time() - self.started)
            schedule(self.container, max(0.05, min(1.0, remaining)), self.container.stop)

    def side_closed(self, side):
        if self.finished and side in self._open_sides:
            self._open_sides.remove(side)
            if not self._open_sides:
                self.container.stop()


def uuid_hex():
    import uuid

    return uuid.uuid4().hex[:12]
