"""Emulated Artemis version comparisons (features appear in given releases, ARTEMIS-FACTS section 5)."""

from __future__ import annotations


def parse(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split("-")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def at_least(version: str, minimum: str) -> bool:
    return parse(version) >= parse(minimum)
