"""Which Artemis release the lab broker emulates, and what that release has.

The distribution built by `artemis_lab.dist` writes the emulated version into `lib/artemis_lab/EMULATED_VERSION`;
a checkout without one emulates the newest supported release. `ARTEMIS_LAB_EMULATED_VERSION` overrides both (tests).
"""

from __future__ import annotations

import os
from pathlib import Path

SUPPORTED_VERSIONS = ("2.30.0", "2.33.0", "2.37.0", "2.40.0", "2.42.0", "2.44.0")
DEFAULT_VERSION = "2.44.0"
LAB_SUFFIX = "-lab"
_VERSION_FILE = Path(__file__).with_name("EMULATED_VERSION")


def parse(version: str) -> tuple[int, int, int]:
    parts = version.split("-")[0].split(".")
    nums = [int(p) for p in parts[:3]] + [0] * (3 - len(parts[:3]))
    return nums[0], nums[1], nums[2]


def emulated_version() -> str:
    env = os.environ.get("ARTEMIS_LAB_EMULATED_VERSION")
    if env:
        return env
    if _VERSION_FILE.exists():
        return _VERSION_FILE.read_text().strip()
    return DEFAULT_VERSION


def at_least(version: str, minimum: str) -> bool:
    return parse(version) >= parse(minimum)


# Feature gates (ARTEMIS-FACTS.md section 5).
def has_mirror_properties(version: str) -> bool:
    return at_least(version, "2.32.0")


def has_snf_queue_mbean(version: str) -> bool:
    return at_least(version, "2.32.0")


def has_mirror_ack_manager_settings(version: str) -> bool:
    return at_least(version, "2.34.0")


def has_broker_connection_mbean(version: str) -> bool:
    return at_least(version, "2.39.0")


def has_pending_mirror_acks(version: str) -> bool:
    return at_least(version, "2.40.0")


def uses_primary_backup_names(version: str) -> bool:
    return at_least(version, "2.32.0")
