"""A tiny in-process AMQP 1.0 broker for unit tests (python-qpid-proton server side).

It is NOT Artemis and not the lab broker: just enough to exercise the probe and the traffic tool without the lab.
- Sites: each site is a listener on 127.0.0.1:<free port>; all sites share one proton Container thread.
- Anycast queues per address; consumers compete; unsettled deliveries return to the queue with
  ``delivery_count + 1`` when their link/connection goes away (as Artemis does on a consumer crash).
- Browsers (distribution-mode copy) see every message once, including ones arriving later; a
  ``name = 'value'`` selector on application properties is honoured (other selectors are ignored).
- Optional mirror between two sites: sends and acks become events delivered to the peer after ``mirror_delay``
  seconds, in order; ``cut_mirror()`` holds them (a backlog) until ``restore_mirror()``.
- ``fence(site)`` closes the listener and drops its connections (clients then get connection refused).
- ``auto_create=False`` closes links to unknown addresses with amqp:not-found; ``selectors=False`` refuses
  consumers with a filter (amqp:not-implemented), as the lab broker does.
- ``transactions=True`` adds a local-transaction coordinator (declare, transactional accept, discharge with
  commit or rollback); without it a coordinator link is refused (amqp:not-implemented).
- SASL: proton's server side without Cyrus only offers ANONYMOUS; PLAIN is tested against the lab broker.
"""

from __future__ import annotations

import collections
import itertools
import queue
import re
import socket
import threading
import time
from typing import Any

from proton import Condition, Delivery, Endpoint, Terminus
from proton.handlers import MessagingHandler
from proton.reactor import Container

TRANSACTIONAL_STATE, DECLARED = 0x34, 0x33
_SELECTOR_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*'([^']*)'\s*$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stored:
    __slots__ = ("delivery_count", "message", "mid")

    def __init__(self, mid: int, message: Any, delivery_count: int = 0) -> None:
        self.mid = mid
        self.message = message
        self.delivery_count = delivery_count


class Site:
    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.port = port
        self.queues: dict[str, collections.deque[Stored]] = {}
        self.consumers: dict[str, list[Any]] = collections.defaultdict(list)
        self.browsers: dict[str, list[Any]] = collections.defaultdict(list)
        self.acceptor = None
        self.connections: set[Any] = set()
        self.peer: Site | None = None
        self.accepted_sends = 0
        self.acks = 0
        self.acked_at: dict[Any, float] = {}  # message id -> when the broker applied its acknowledgement

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"


def _selector_of(link) -> tuple[str, str] | None:
    try:
        data = link.remote_source.filter
        data.rewind()
        if data.next() is None:
            return None
        filt = data.get_object()
    except Exception:
        return None
    if not filt:
        return None
    for value in filt.values():
        text = getattr(value, "value", value)
        if isinstance(text, str):
            m = _SELECTOR_RE.match(text)
            if m:
                return m.group(1), m.group(2)
    return None


def _matches(sel: tuple[str, str] | None, msg) -> bool:
    if sel is None:
        return True
    return str((msg.properties or {}).get(sel[0])) == sel[1]


class MiniBroker(MessagingHandler):
    """``with MiniBroker(["dc1", "dc2"], mirror=True) as b: b.url("dc1")``."""

    def __init__(self, sites=("dc1",), mirror: bool = False, mirror_delay: float = 0.0, auto_create: bool = True,
                 known_addresses=(), transactions: bool = False, selectors: bool = True) -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=False)
        self.sites = {name: Site(name, free_port()) for name in sites}
        if mirror:
            a, b = list(self.sites.values())[:2]
            a.peer, b.peer = b, a
        self.mirror_delay = mirror_delay
        self.mirror_cut = False
        self.auto_create = auto_create
        self.known = set(known_addresses)
        self.transactions = transactions
        self.selectors = selectors
        self._txns: dict[Any, list] = {}
        self.commits = 0
        self.rollbacks = 0
        self._ids = itertools.count(1)
        self._events: collections.deque = collections.deque()  # (due, fn) mirror events in order
        self._cmds: queue.Queue = queue.Queue()
        self._unsettled: dict[Any, tuple[Site, str, Stored]] = {}
        self.container = Container(self)
        self.container.container_id = "minibroker"
        self.thread = threading.Thread(target=self.container.run, name="minibroker", daemon=True)
        self._started = threading.Event()
        self._stop = False

    # --- test-thread API ---------------------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self) -> None:
        self.thread.start()
        if not self._started.wait(10):
            raise RuntimeError("mini broker did not start")

    def stop(self) -> None:
        self.call(self._shutdown)
        self.thread.join(10)

    def url(self, site: str) -> str:
        return self.sites[site].url

    def call(self, fn, *args, timeout: float = 10.0):
        """Run ``fn(*args)`` on the broker thread and return its result."""
        done = threading.Event()
        box: dict[str, Any] = {}

        def run():
            try:
                box["value"] = fn(*args)
            except BaseException as exc:  # handed back to the caller
                box["error"] = exc
            done.set()

        self._cmds.put(run)
        if not done.wait(timeout):
            raise TimeoutError("mini broker did not answer")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def depth(self, site: str, address: str) -> int:
        return self.call(lambda: len(self.sites[site].queues.get(address, ())))

    def bodies(self, site: str, address: str) -> list[Any]:
        return self.call(lambda: [s.message.body for s in self.sites[site].queues.get(address, ())])

    def message_ids(self, site: str, address: str) -> list[Any]:
        return self.call(lambda: [s.message.id for s in self.sites[site].queues.get(address, ())])

    def fence(self, site: str) -> None:
        self.call(self._fence, site)

    def unfence(self, site: str) -> None:
        self.call(self._listen, self.sites[site])

    def drop_connections(self, site: str) -> None:
        """Abruptly drop every client connection of ``site`` (the listener stays): like a broker crash."""
        self.call(self._drop, self.sites[site])

    def cut_mirror(self) -> None:
        self.call(setattr, self, "mirror_cut", True)

    def restore_mirror(self) -> None:
        self.call(setattr, self, "mirror_cut", False)

    def set_mirror_delay(self, delay: float) -> None:
        self.call(setattr, self, "mirror_delay", delay)

    def unsettled(self) -> int:
        """Deliveries handed to consumers and not yet acknowledged (transactional accepts included)."""
        return self.call(lambda: len(self._unsettled) + sum(len(v) for v in self._txns.values()))

    def acked_at(self, site: str) -> dict:
        return self.call(lambda: dict(self.sites[site].acked_at))

    def mirror_backlog(self) -> int:
        return self.call(lambda: len(self._events))

    def create_address(self, address: str) -> None:
        self.call(self.known.add, address)

    # --- broker thread ---------------------------------------------------------------------------------------
    def on_start(self, event) -> None:
        for site in self.sites.values():
            self._listen(site)
        event.container.schedule(0.005, self)
        self._started.set()

    def on_timer_task(self, event) -> None:
        while True:
            try:
                cmd = self._cmds.get_nowait()
            except queue.Empty:
                break
            cmd()
        self._run_mirror()
        if not self._stop:
            event.container.schedule(0.005, self)

    def _shutdown(self) -> None:
        self._stop = True
        for site in self.sites.values():
            self._fence(site.name)

    def _listen(self, site: Site) -> None:
        if site.acceptor is None:
            site.acceptor = self.container.acceptor("127.0.0.1", site.port)

    def _fence(self, name: str) -> None:
        site = self.sites[name]
        if site.acceptor is not None:
            site.acceptor.close()
            site.acceptor = None
        self._drop(site)

    def _drop(self, site: Site) -> None:
        for conn in list(site.connections):
            self._connection_gone(conn)
            conn.close()
            if conn.transport is not None:
                conn.transport.close_tail()
                conn.transport.close_head()
        site.connections.clear()

    def _site_of(self, conn) -> Site:
        acc = getattr(conn, "_acceptor", None)
        for site in self.sites.values():
            if site.acceptor is acc and acc is not None:
                return site
        site = getattr(conn, "_mini_site", None)
        if site is None:
            raise RuntimeError("connection of unknown site")
        return site

    def on_connection_opening(self, event) -> None:
        site = self._site_of(event.connection)
        event.connection._mini_site = site
        site.connections.add(event.connection)
        event.connection.open()

    def on_link_opening(self, event) -> None:
        link = event.link
        site = event.connection._mini_site
        if link.is_sender:
            address = link.remote_source.address
            link.source.address = address
            if not self._exists(site, address):
                self._not_found(link, address)
                return
            if not self.selectors and _selector_of(link) is not None:
                link._mini = None
                link._mini_close = Condition("amqp:not-implemented", "consumer filters (selectors) are not supported")
                link.open()
                return
            link._mini = (site, address, _selector_of(link))
            link._mini_id = next(self._ids)  # wrapper objects are not identical across events: compare ids
            link._browse_seen = set()
            browse = link.remote_source.distribution_mode == Terminus.DIST_MODE_COPY
            link.source.distribution_mode = link.remote_source.distribution_mode
            link._browse = browse
            (site.browsers if browse else site.consumers)[address].append(link)
        else:
            if link.remote_target.type == Terminus.COORDINATOR and self.transactions:
                link._mini = None
                link._mini_coord = True
                link.target.type = Terminus.COORDINATOR
                link.open()
                link.flow(100)
                return
            if link.remote_target.type == Terminus.COORDINATOR:
                # no transactions here: answer like a broker without a coordinator
                link._mini = None
                link._mini_close = Condition("amqp:not-implemented", "transactions are not supported")
                link.open()
                return
            address = link.remote_target.address
            link.target.address = address
            if address and not self._exists(site, address):
                self._not_found(link, address)
                return
            link._mini = (site, address, None)
            link.flow(1000)
        link.open()

    def _exists(self, site: Site, address: str | None) -> bool:
        if not address:
            return False
        if self.auto_create or address in self.known:
            site.queues.setdefault(address, collections.deque())
            return True
        return address in site.queues

    def _not_found(self, link, address) -> None:
        # Attach first, then detach with the error once the attach went out (as Artemis answers).
        link._mini = None
        link._mini_close = Condition("amqp:not-found", f"AMQ119017: Queue {address} does not exist")
        link.open()

    def on_link_opened(self, event) -> None:
        cond = getattr(event.link, "_mini_close", None)
        if cond is not None:
            event.link.condition = cond
            event.link.close()

    def on_message(self, event) -> None:
        if getattr(event.link, "_mini_coord", False):
            self._coordinate(event)
            return
        if getattr(event.link, "_mini", None) is None:
            event.delivery.update(Delivery.REJECTED)
            event.delivery.settle()
            return
        site, address, _ = event.link._mini
        address = address or event.message.address
        stored = Stored(next(self._ids), event.message)
        self._store(site, address, stored)
        event.delivery.update(Delivery.ACCEPTED)
        event.delivery.settle()
        site.accepted_sends += 1
        if event.link.credit < 500:
            event.link.flow(1000 - event.link.credit)
        if site.peer is not None:
            peer, mid, msg = site.peer, stored.mid, event.message
            self._mirror(lambda: self._store(peer, address, Stored(mid, msg)))

    def _store(self, site: Site, address: str, stored: Stored) -> None:
        site.queues.setdefault(address, collections.deque()).append(stored)
        self._dispatch(site, address)

    def _mirror(self, fn) -> None:
        self._events.append((time.monotonic() + self.mirror_delay, fn))

    def _run_mirror(self) -> None:
        if self.mirror_cut:
            return
        now = time.monotonic()
        while self._events and self._events[0][0] <= now:
            _, fn = self._events.popleft()
            fn()

    def on_sendable(self, event) -> None:
        if getattr(event.link, "_mini", None) is None:
            return  # a link refused with not-found
        site, address, _ = event.link._mini
        self._dispatch(site, address)

    def _dispatch(self, site: Site, address: str) -> None:
        q = site.queues.get(address)
        if q is None:
            return
        for link in list(site.browsers.get(address, ())):
            if link.state & Endpoint.LOCAL_CLOSED or getattr(link, "_mini", None) is None:
                continue
            _, _, sel = link._mini
            for stored in q:
                if link.credit <= 0:
                    break
                if stored.mid in link._browse_seen or not _matches(sel, stored.message):
                    continue
                link._browse_seen.add(stored.mid)
                stored.message.delivery_count = stored.delivery_count
                dlv = link.send(stored.message)
                dlv.settle()  # browsing never acquires
        consumers = [lk for lk in site.consumers.get(address, ())
                     if not lk.state & Endpoint.LOCAL_CLOSED and getattr(lk, "_mini", None) is not None]
        if not consumers:
            return
        progress = True
        while q and progress:
            progress = False
            for link in consumers:
                if not q or link.credit <= 0:
                    continue
                _, _, sel = link._mini
                pick = next((s for s in q if _matches(sel, s.message)), None)
                if pick is None:
                    continue
                q.remove(pick)
                pick.message.delivery_count = pick.delivery_count
                dlv = link.send(pick.message)
                self._unsettled[dlv] = (site, address, pick)
                progress = True
        # rotate so that competing consumers share the work (as Artemis round-robins)
        lst = site.consumers.get(address)
        if lst and len(lst) > 1:
            lst.append(lst.pop(0))

    def _coordinate(self, event) -> None:
        body, dlv = event.message.body, event.delivery
        what = str(getattr(body, "descriptor", ""))
        if what == "amqp:declare:list":
            tid = f"txn-{next(self._ids)}".encode()
            self._txns[tid] = []
            dlv.local.data = [tid]
            dlv.update(DECLARED)
        elif what == "amqp:discharge:list":
            tid, failed = bytes(body.value[0]), bool(body.value[1])
            touched = set()
            for site, address, stored, d in self._txns.pop(tid, []):
                if failed:
                    stored.delivery_count += 1
                    site.queues[address].appendleft(stored)
                else:
                    self._acked(site, address, stored)
                d.settle()
                touched.add((site.name, address))
            if failed:
                self.rollbacks += 1
            else:
                self.commits += 1
            dlv.update(Delivery.ACCEPTED)
            for name, address in touched:
                self._dispatch(self.sites[name], address)
        else:
            dlv.update(Delivery.REJECTED)
        dlv.settle()
        event.link.flow(1)

    def _acked(self, site: Site, address: str, stored: Stored) -> None:
        site.acks += 1
        site.acked_at[stored.message.id] = time.time()
        if site.peer is not None:
            peer, mid = site.peer, stored.mid
            self._mirror(lambda: self._remove(peer, address, mid))

    def on_delivery(self, event) -> None:
        dlv = event.delivery
        if dlv.link.is_sender and dlv in self._unsettled and dlv.remote_state == TRANSACTIONAL_STATE:
            # a transactional accept: held until the discharge commits or rolls back
            tid = bytes((dlv.remote.data or [b""])[0])  # proton hands binaries out as memoryviews
            site, address, stored = self._unsettled.pop(dlv)
            self._txns.setdefault(tid, []).append((site, address, stored, dlv))
            return
        if dlv.link.is_sender and dlv in self._unsettled and (dlv.updated or dlv.settled):
            site, address, stored = self._unsettled.pop(dlv)
            state = dlv.remote_state
            if state == Delivery.ACCEPTED:
                self._acked(site, address, stored)
            elif state == Delivery.MODIFIED:
                stored.delivery_count += 1
                site.queues[address].appendleft(stored)
            elif state in (Delivery.RELEASED,):
                site.queues[address].appendleft(stored)
            dlv.settle()
            self._dispatch(site, address)

    def _remove(self, site: Site, address: str, mid: int) -> None:
        q = site.queues.get(address)
        if q is None:
            return
        for stored in q:
            if stored.mid == mid:
                q.remove(stored)
                return

    def _requeue_link(self, link) -> None:
        mini = getattr(link, "_mini", None)
        if mini is None or not link.is_sender:
            return
        site, address, _ = mini
        lid = link._mini_id
        group = (site.browsers if link._browse else site.consumers)[address]
        group[:] = [lk for lk in group if getattr(lk, "_mini_id", None) != lid]
        back = [(d, v) for d, v in self._unsettled.items() if getattr(d.link, "_mini_id", None) == lid]
        for dlv, (_, _, stored) in reversed(back):
            del self._unsettled[dlv]
            stored.delivery_count += 1
            site.queues[address].appendleft(stored)
        for tid, entries in self._txns.items():  # transactional accepts of a vanished link roll back
            keep = []
            for entry in entries:
                if getattr(entry[3].link, "_mini_id", None) == lid:
                    entry[2].delivery_count += 1
                    site.queues[address].appendleft(entry[2])
                else:
                    keep.append(entry)
            self._txns[tid] = keep
        link._mini = None
        self._dispatch(site, address)

    def _connection_gone(self, conn) -> None:
        link = conn.link_head(0)
        while link:
            self._requeue_link(link)
            link = link.next(0)
        site = getattr(conn, "_mini_site", None)
        if site is not None:
            site.connections.discard(conn)

    def on_link_closing(self, event) -> None:
        self._requeue_link(event.link)
        event.link.close()

    def on_connection_closing(self, event) -> None:
        self._connection_gone(event.connection)
        event.connection.close()

    def on_disconnected(self, event) -> None:
        if event.connection is not None:
            self._connection_gone(event.connection)

    def on_transport_closed(self, event) -> None:
        if event.connection is not None:
            self._connection_gone(event.connection)

    def on_transport_error(self, event) -> None:
        pass  # a client going away is normal here
