"""Helpers of the lab layer: the WAN emulator and the lab orchestration (lab/continuity_lab) on real Artemis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from continuity_lab import waiting

REPO = Path(__file__).resolve().parents[2]


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.1) -> Any:
    """The lab's polling rule (continuity_lab.waiting) as a test assertion."""
    try:
        return waiting.until("the condition", predicate, timeout, interval)
    except waiting.TimedOut as exc:
        raise AssertionError(str(exc)) from None
