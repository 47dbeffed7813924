"""The lab's one polling rule: ask until the answer is truthy or the time is up; a transient error (a broker or
a link still starting) counts as "not yet"."""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Callable
from typing import Any

TRANSIENT = (OSError, urllib.error.URLError, ConnectionError, RuntimeError, ValueError, KeyError)


class TimedOut(Exception):
    def __init__(self, what: str, timeout: float, last: Any):
        super().__init__(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        self.last = last


def until(what: str, predicate: Callable[[], Any], timeout: float, interval: float = 0.2,
          transient: tuple = TRANSIENT) -> Any:
    """The first truthy answer of ``predicate``; :class:`TimedOut` (naming ``what`` and the last answer or error)
    when none came within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except transient as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise TimedOut(what, timeout, last)
        time.sleep(interval)
