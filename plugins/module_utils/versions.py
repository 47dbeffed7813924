# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Artemis version parsing and the feature matrix of ARTEMIS-FACTS section 5.

Modules detect features from the broker's ``Version`` attribute (for example ``2.44.0``, the lab's
``2.44.0-lab``, vendor builds such as ``2.33.0.redhat-00010``) and fall back when a feature is missing,
reporting it instead of inventing values. Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from typing import Dict, NamedTuple, Optional

_VERSION_RE = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.\-+_ ]?(.*?))?\s*$")


class Version(NamedTuple):
    major: int
    minor: int
    micro: int
    qualifier: str = ""

    def __str__(self) -> str:
        base = "%d.%d.%d" % (self.major, self.minor, self.micro)
        return base + ("-" + self.qualifier if self.qualifier else "")

    @property
    def number(self):
        return (self.major, self.minor, self.micro)


class VersionError(ValueError):
    pass


def parse_version(text: Optional[str]) -> Version:
    """Parse an Artemis version string; the qualifier (``lab``, ``redhat-00010``, ``SNAPSHOT``) is kept apart."""
    if text is None:
        raise VersionError("no version given")
    m = _VERSION_RE.match(str(text))
    if not m:
        raise VersionError("not an Artemis version: %r" % (text,))
    major, minor, micro, qual = m.groups()
    return Version(int(major), int(minor or 0), int(micro or 0), (qual or "").strip())


#: feature name -> first release that has it (ARTEMIS-FACTS section 5).
FEATURES: Dict[str, tuple] = {
    "mirror_sync": (2, 28, 0),
    "mirror_properties": (2, 32, 0),
    "primary_backup_names": (2, 32, 0),
    "snf_queue_mbean": (2, 32, 0),
    "mirror_reload_limits": (2, 32, 0),
    "mirror_ack_manager_settings": (2, 34, 0),
    "queue_stat_json": (2, 35, 0),
    "broker_connection_mbean": (2, 39, 0),
    "list_broker_connections_uri_connected": (2, 39, 0),
    "pending_mirror_acks": (2, 40, 0),
    "queue_persisted_pause": (2, 41, 0),  # QueueControl.isPersistedPause (checked in the 2.40/2.41 client jars)
    "mirror_max_pending_acks": (2, 40, 0),
    # broker.xml elements the broker role renders (module_utils/broker_xml.py)
    "federation_element": (2, 31, 0),
    "mirror_ack_manager_warn_unacked": (2, 38, 0),
}


def at_least(version: Version, minimum: tuple) -> bool:
    return version.number >= tuple(minimum)


def features(version) -> Dict[str, bool]:
    """Every known feature flag for ``version`` (a :class:`Version` or a version string)."""
    v = version if isinstance(version, Version) else parse_version(version)
    return {name: at_least(v, since) for name, since in FEATURES.items()}


def has(version, feature: str) -> bool:
    """One feature flag; raises ``KeyError`` for an unknown feature name (a typo must not read as False)."""
    since = FEATURES[feature]
    v = version if isinstance(version, Version) else parse_version(version)
    return at_least(v, since)


def since(feature: str) -> str:
    """First release with ``feature``, as text (for notes such as "needs Artemis 2.40+")."""
    return "%d.%d" % FEATURES[feature][:2]
