"""The engine's single network thread: a selectors loop with timers and a wake-up channel."""

from __future__ import annotations

import heapq
import itertools
import selectors
import socket
import time
from collections.abc import Callable


class EventLoop:
    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, ("wake", None))

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (time.monotonic() + delay_s, next(self._seq), fn))

    def wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending, or the loop is gone

    def drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def next_timeout(self, cap: float) -> float:
        if not self._timers:
            return cap
        return max(0.0, min(cap, self._timers[0][0] - time.monotonic()))

    def run_due_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, fn = heapq.heappop(self._timers)
            fn()

    def close(self) -> None:
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
