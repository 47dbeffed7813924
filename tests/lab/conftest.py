"""Helpers of the lab layer: the WAN emulator and the lab orchestration (lab/continuity_lab) on real Artemis."""

from __future__ import annotations

import time
import urllib.error
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (OSError, urllib.error.URLError, ConnectionError):
            last = None
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last: {last!r})")
