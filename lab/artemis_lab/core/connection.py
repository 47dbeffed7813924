"""One AMQP socket: proton engine objects, the lab's own SASL layer (server side) and non-blocking I/O."""

from __future__ import annotations

import socket
import time
from typing import Any

from proton import Collector, Connection, Transport

from artemis_lab.core.sasl import SaslServer


class AmqpSocket:
    """Server connections (accepted on an acceptor) and client connections (a broker connection)."""

    _ids = 0

    def __init__(self, sock: socket.socket, collector: Collector, *, server: bool,
                 sasl: SaslServer | None = None, acceptor: str | None = None,
                 client_user: str | None = None, client_password: str | None = None,
                 container: str = "", hostname: str | None = None):
        AmqpSocket._ids += 1
        self.id = f"{AmqpSocket._ids:x}-{id(self) & 0xFFFF:x}"
        self.sock = sock
        self.server = server
        self.acceptor = acceptor
        self.sasl = sasl
        self.user: str | None = None
        self.roles: frozenset[str] = frozenset()
        self.creation_time = int(time.time() * 1000)
        try:
            peer = sock.getpeername()
            self.client_address = f"{peer[0]}:{peer[1]}"
        except OSError:
            self.client_address = ""
        self.connection = Connection()
        self.connection._lab = self
        self.connection.container = container
        self.transport = Transport(Transport.SERVER if server else Transport.CLIENT)
        if not server:
            # proton's client side of SASL PLAIN works; only the server side needs the lab's own code.
            s = self.transport.sasl()
            s.allowed_mechs("PLAIN" if client_user else "ANONYMOUS")
            if client_user:
                self.connection.user = client_user
                self.connection.password = client_password or ""
            if hasattr(s, "allow_insecure_mechs"):
                s.allow_insecure_mechs = True
            if hostname:
                self.connection.hostname = hostname
            # a broker connection notices a silent peer (frozen host, black-holed link) within a minute
            self.transport.idle_timeout = 30.0
        self.transport.bind(self.connection)
        self.connection.collect(collector)
        self.out_pending = b""
        self.closed = False
        self.sasl_failed = False
        self.owner: Any = None  # the broker connection (mirror source) that owns a client socket
        self.want_write = False

    # --- input ------------------------------------------------------------------------------------
    def on_readable(self) -> bool:
        """Returns False when the peer closed the socket."""
        sasl_pending = self.sasl is not None and self.sasl.state != "done"
        for _ in range(16):  # bounded: let other sockets have their turn
            if sasl_pending:
                size = 65536
            else:
                size = self.transport.capacity()
                if size < 0:
                    return False  # transport input side closed
                if size == 0:
                    return True  # proton's input buffer is full: read again on the next round
            try:
                data = self.sock.recv(size)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                data = b""
            if not data:
                self._close_tail()
                return False
            if sasl_pending:
                assert self.sasl is not None
                out, rest = self.sasl.feed(data)
                if out:
                    self.out_pending += out
                if self.sasl.state == "failed":
                    self.sasl_failed = True
                    return True
                if self.sasl.state == "done":
                    sasl_pending = False
                    self.user = self.sasl.user
                    self.roles = self.sasl.roles
                    if rest:
                        self._push(rest)
                continue
            self._push(data)
            if len(data) < size:
                return True
        return True

    def _push(self, data: bytes) -> None:
        # proton refuses more than `capacity()` bytes per push: feed it in pieces
        view = memoryview(data)
        try:
            while view:
                cap = self.transport.capacity()
                if cap <= 0:
                    break
                n = min(cap, len(view))
                self.transport.push(bytes(view[:n]))
                view = view[n:]
        except Exception:
            self._close_tail()

    def _close_tail(self) -> None:
        try:
            self.transport.close_tail()
        except Exception:
            pass

    # --- output -----------------------------------------------------------------------------------
    def collect_output(self) -> None:
        if self.sasl is not None and self.sasl.state != "done":
            return
        try:
            while True:
                pending = self.transport.pending()
                if pending <= 0:
                    break
                self.out_pending += bytes(self.transport.peek(pending))
                self.transport.pop(pending)
        except Exception:
            pass

    def write(self) -> bool:
        """Send what is pending; False when the socket is dead."""
        self.collect_output()
        if not self.out_pending:
            self.want_write = False
            return True
        try:
            n = self.sock.send(self.out_pending)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            return False
        self.out_pending = self.out_pending[n:]
        self.want_write = bool(self.out_pending)
        return True

    @property
    def finished(self) -> bool:
        if self.sasl_failed:
            return not self.out_pending
        return self.transport.closed and not self.out_pending

    def close_socket(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass
