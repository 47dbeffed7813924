"""Artemis wildcard matching (`#` zero or more words, `*` one word, `.` delimiter) and most-specific-match
lookup, as used by address-settings and security-settings."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")


def _match_words(pattern: tuple[str, ...], words: tuple[str, ...]) -> bool:
    if not pattern:
        return not words
    head = pattern[0]
    if head == "#":
        return any(_match_words(pattern[1:], words[i:]) for i in range(len(words) + 1))
    if not words:
        return False
    if head == "*" or head == words[0]:
        return _match_words(pattern[1:], words[1:])
    return False


@lru_cache(maxsize=4096)
def matches(pattern: str, address: str) -> bool:
    if pattern == "#" or pattern == address:
        return True
    return _match_words(tuple(pattern.split(".")), tuple(address.split(".")))


def _specificity(pattern: str) -> tuple[int, int, int, int]:
    words = pattern.split(".")
    literal = sum(1 for w in words if w not in ("#", "*"))
    return (1 if literal == len(words) else 0, literal, -words.count("#"), -words.count("*"))


def best_match(items: Sequence[T], address: str, key=lambda item: item.match) -> T | None:
    """The most specific item whose match pattern covers the address (literal beats `*` beats `#`)."""
    found = [item for item in items if matches(key(item), address)]
    if not found:
        return None
    return max(found, key=lambda item: _specificity(key(item)))


class AddressFilter:
    """Mirror `address-filter`: comma list of prefixes, `!prefix` excludes, exclusion wins, case-sensitive."""

    def __init__(self, spec: str | None):
        self.include: list[str] = []
        self.exclude: list[str] = []
        for part in (spec or "").split(","):
            part = part.strip()
            if not part:
                continue
            if part.startswith("!"):
                self.exclude.append(part[1:])
            else:
                self.include.append(part)

    def allows(self, address: str) -> bool:
        if any(address.startswith(p) for p in self.exclude):
            return False
        if not self.include:
            return True
        return any(address.startswith(p) for p in self.include)
