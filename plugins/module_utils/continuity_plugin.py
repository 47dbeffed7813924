# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""The continuity broker plugin's MBean (``plugin/``, docs/plugin.md) as the collection reads and drives it.

One MBean, ``<domain>:broker="<name>",component=continuity``, holds the plugin's site role (the passive-site
guard), the ack model and the mirror replication latency. This module builds its requests, turns a read into a
plain documented dict (:func:`parse`), tells an absent plugin from a failed read (:func:`from_result`), and sets
the site role (:func:`apply_role`). A broker without the plugin is normal: it is reported as ``None`` with a note,
never as an error. Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import re
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia as j
from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on

ACTIVE = "active"
PASSIVE = "passive"
ROLES = (ACTIVE, PASSIVE)
SET_SITE_ROLE = "setSiteRole(java.lang.String)"

#: Scalar attributes read in every site snapshot (cheap: no per-address table).
HEADLINE_ATTRS = (
    "SiteRole", "SiteRoleSince", "StateFile", "MirrorUsers", "MirrorAcceptors",
    "PassiveGuardRefusals", "PassiveGuardRefusedSends", "PassiveGuardRefusedConsumers", "PassiveGuardRefusedClients",
    "UnackedDeliveries", "DeliveriesPerSecond", "AcksPerSecond", "AcksPerAckCall", "AckLatencyP50Seconds",
    "AckLatencyP99Seconds", "TransactedAckShare", "ClientAckShare", "AutoAckShare", "UnclassifiedAckShare",
    "TrackedConsumers",
    "ReplicationLatencyP50Seconds", "ReplicationLatencyP99Seconds", "ReplicationLatencyMaxSeconds",
    "ReplicationSamplesInWindow", "MirroredMessagesTotal", "NewestMirroredEventAgeSeconds",
    "LastMirroredArrivalAgeSeconds", "ReplicationClockSkewSamples",
    "WindowSeconds", "StatisticsSince", "PluginVersion",
)
#: The per-address JSON tables (their size grows with the number of addresses): read on request only.
TABLE_ATTRS = ("AckModel", "ReplicationLatency")

#: Absent-plugin note; one text for every tool that shows it.
ABSENT_NOTE = ("continuity plugin not installed on this broker (no MBean %s): plugin values are null; see "
               "docs/plugin.md")


def read_request(broker_name: str, include_tables: bool = False) -> dict:
    """The Jolokia ``read`` of the plugin's MBean (headline attributes, plus the per-address tables on request).
    The MBean skips names it does not know, so a newer list never fails against an older plugin."""
    attrs = list(HEADLINE_ATTRS) + (list(TABLE_ATTRS) if include_tables else [])
    return j.read_request(on.continuity(broker_name), attrs)


def set_role_request(broker_name: str, role: str) -> dict:
    if role not in ROLES:
        raise ValueError("site role must be one of %s, not %r" % (", ".join(ROLES), role))
    return j.exec_request(on.continuity(broker_name), SET_SITE_ROLE, role)


def is_absent(res: j.Result) -> bool:
    """True when the read failed because the MBean is not registered (plugin not installed, or broker stopping)."""
    if res.ok:
        return False
    text = "%s %s" % (res.error_type or "", res.error or "")
    return res.status == 404 or "InstanceNotFoundException" in text


def _seconds(value: Any) -> Optional[float]:
    """A plugin latency or age: ``-1`` means "no sample in the window" and becomes ``None``."""
    number = _float(value)
    return None if number is None or number < 0 else number


def _float(value: Any) -> Optional[float]:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> Optional[int]:
    number = _float(value)
    return None if number is None else int(number)


def _names(value: Any) -> List[str]:
    return [n.strip() for n in str(value or "").split(",") if n.strip()]


def _table(value: Any) -> Optional[Dict[str, Any]]:
    """A JSON table attribute (``AckModel``, ``ReplicationLatency``) as a dict; ``None`` when not read."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    try:
        data = json.loads(value)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def parse(attrs: Mapping[str, Any], mbean: Optional[str] = None, now: Optional[float] = None) -> dict:
    """The plugin's MBean attributes as the collection's documented dict (docs/plugin.md "What the tools show").

    Latencies and ages are seconds, ``None`` where the plugin says -1 (no sample in the window); rates are per
    second over the plugin's window; ``addresses`` holds the per-address JSON table when it was read, else ``None``.
    ``now`` (epoch seconds of the read) lets a window younger than ``WindowSeconds`` give a true rate.
    """
    role = attrs.get("SiteRole")
    return {
        "mbean": mbean,
        "site_role": role if role in ROLES else None,
        "site_role_since": attrs.get("SiteRoleSince"),
        "state_file": attrs.get("StateFile"),
        "mirror_users": _names(attrs.get("MirrorUsers")),
        "mirror_acceptors": _names(attrs.get("MirrorAcceptors")),
        "window_seconds": _int(attrs.get("WindowSeconds")),
        "statistics_since": attrs.get("StatisticsSince"),
        "plugin_version": attrs.get("PluginVersion"),
        "passive_guard": {
            "refusals": _int(attrs.get("PassiveGuardRefusals")),
            "refused_sends": _int(attrs.get("PassiveGuardRefusedSends")),
            "refused_consumers": _int(attrs.get("PassiveGuardRefusedConsumers")),
            "refused_clients": _int(attrs.get("PassiveGuardRefusedClients")),
        },
        "ack_model": {
            "unacked_deliveries": _int(attrs.get("UnackedDeliveries")),
            "deliveries_per_second": _float(attrs.get("DeliveriesPerSecond")),
            "acks_per_second": _float(attrs.get("AcksPerSecond")),
            "acks_per_ack_call": _float(attrs.get("AcksPerAckCall")),
            "ack_latency_p50_seconds": _seconds(attrs.get("AckLatencyP50Seconds")),
            "ack_latency_p99_seconds": _seconds(attrs.get("AckLatencyP99Seconds")),
            "transacted_share": _float(attrs.get("TransactedAckShare")),
            "client_ack_share": _float(attrs.get("ClientAckShare")),
            "auto_ack_share": _float(attrs.get("AutoAckShare")),
            "unclassified_share": _float(attrs.get("UnclassifiedAckShare")),
            "tracked_consumers": _int(attrs.get("TrackedConsumers")),
            "addresses": _table(attrs.get("AckModel")),
        },
        "replication": {
            "latency_p50_seconds": _seconds(attrs.get("ReplicationLatencyP50Seconds")),
            "latency_p99_seconds": _seconds(attrs.get("ReplicationLatencyP99Seconds")),
            "latency_max_seconds": _seconds(attrs.get("ReplicationLatencyMaxSeconds")),
            "samples_in_window": _int(attrs.get("ReplicationSamplesInWindow")),
            "mirrored_messages_total": _int(attrs.get("MirroredMessagesTotal")),
            "newest_event_age_seconds": _seconds(attrs.get("NewestMirroredEventAgeSeconds")),
            "last_arrival_age_seconds": _seconds(attrs.get("LastMirroredArrivalAgeSeconds")),
            "clock_skew_samples": _int(attrs.get("ReplicationClockSkewSamples")),
            "mirrored_per_second": _mirrored_rate(attrs, now),
            "addresses": _table(attrs.get("ReplicationLatency")),
        },
    }


_ISO_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?Z$")


def epoch_of(instant: Any) -> Optional[float]:
    """Epoch seconds of a Java ``Instant.toString()`` (``2026-11-24T00:21:24.765566725Z``); ``None`` otherwise."""
    m = _ISO_RE.match(str(instant or ""))
    if not m:
        return None
    whole = calendar.timegm((*(int(g) for g in m.groups()[:6]), 0, 0, 0))
    return whole + float("0." + (m.group(7) or "0"))


def _mirrored_rate(attrs: Mapping[str, Any], now: Optional[float] = None) -> Optional[float]:
    """Mirrored messages applied here per second over the window (the rate the other site's sends arrive at).

    The per-address table carries the plugin's own rate (over the part of the window that has elapsed); without it,
    the window's samples over the window's length, or over the time since the statistics started when that is
    shorter (a young window, right after a start or a reset)."""
    table = _table(attrs.get("ReplicationLatency"))
    if table is not None:
        return sum(_float((entry or {}).get("messagesPerSecond")) or 0.0 for entry in table.values())
    samples, window = _int(attrs.get("ReplicationSamplesInWindow")), _int(attrs.get("WindowSeconds"))
    if samples is None or not window:
        return None
    span = float(window)
    since = epoch_of(attrs.get("StatisticsSince"))
    if now is not None and since is not None:
        span = min(span, max(1.0, now - since))
    return samples / span


def from_result(res: Optional[j.Result], notes: List[str], now: Optional[float] = None) -> Optional[dict]:
    """The parsed plugin dict of a snapshot item, or ``None`` with a note (absent plugin, failed read)."""
    if res is None:
        return None
    if res.ok:
        return parse(res.value or {}, res.request.get("mbean"), now)
    if is_absent(res):
        notes.append(ABSENT_NOTE % res.request.get("mbean"))
    else:
        err = j.error_from_item(res.request, res.status, res.error_type, res.error)
        notes.append("continuity plugin MBean not readable: %s" % err)
    return None


def apply_role(client: j.JolokiaClient, broker_name: str, role: str, current: Optional[str],
               check_mode: bool = False) -> dict:
    """Give the plugin's passive-site guard ``role`` when the plugin is present (``current`` is its role from the
    snapshot; ``None`` = no plugin: nothing to do). Returns ``{"present", "role_before", "role", "changed"}``."""
    if role not in ROLES:
        raise ValueError("site role must be one of %s, not %r" % (", ".join(ROLES), role))
    if current is None:
        return {"present": False, "role_before": None, "role": None, "changed": False}
    if current == role:
        return {"present": True, "role_before": current, "role": role, "changed": False}
    if not check_mode:
        client.request(set_role_request(broker_name, role))
    return {"present": True, "role_before": current, "role": role, "changed": True}


def read_role(client: j.JolokiaClient, broker_name: str) -> Optional[str]:
    """The plugin's ``SiteRole`` now; ``None`` when the plugin is not installed. Other errors raise."""
    res = client.bulk([j.read_request(on.continuity(broker_name), "SiteRole")])[0]
    if is_absent(res):
        return None
    res.raise_for_status()
    return res.value if res.value in ROLES else None


def set_role(client: j.JolokiaClient, broker_name: str, role: str, check_mode: bool = False) -> dict:
    """:func:`apply_role` for a caller without a snapshot (for example a switch step): reads the role first."""
    return apply_role(client, broker_name, role, read_role(client, broker_name), check_mode)


# ------------------------------------------------------------------------------------------ state file
# A broker that cannot be reached cannot be told its role over Jolokia, but its host can: the plugin reads the role
# from its state file at start (docs/plugin.md "State file"), so writing "passive" there fences the guard of a broker
# that is down, as autoStart=false in broker.xml fences its client acceptors.
PLUGIN_CLASS = "io.continuity.artemis.plugin.ContinuityPlugin"
STATE_FILE_NAME = "continuity-site-role"
_PLUGIN_RE = re.compile(r'<broker-plugin\s+class-name="%s"\s*(?:/>|>(?P<body>.*?)</broker-plugin>)'
                        % re.escape(PLUGIN_CLASS), re.S)
_PROPERTY_RE = re.compile(r'<property\s+key="(?P<key>[^"]*)"\s+value="(?P<value>[^"]*)"\s*/>')
_JOURNAL_RE = re.compile(r"<journal-directory>\s*(?P<dir>[^<]*?)\s*</journal-directory>")
_ROLE_LINE_RE = re.compile(r"^\s*role=(?P<role>\S+)\s*$", re.M)


def state_file_of(broker_xml: str, instance_dir: str) -> Optional[str]:
    """Where the plugin configured in ``broker_xml`` keeps its role; ``None`` when broker.xml has no continuity
    plugin. Same rule as the plugin: ``state-file``, else ``continuity-site-role`` next to the journal directory
    (``data/journal`` by default); relative paths are resolved against the broker instance directory."""
    import html
    import os

    m = _PLUGIN_RE.search(broker_xml)
    if not m:
        return None
    props = {html.unescape(p.group("key")): html.unescape(p.group("value"))
             for p in _PROPERTY_RE.finditer(m.group("body") or "")}
    path = props.get("state-file", "").strip()
    if not path:
        journal = _JOURNAL_RE.search(broker_xml)
        journal_dir = html.unescape(journal.group("dir")) if journal else os.path.join("data", "journal")
        path = os.path.join(os.path.dirname(journal_dir.rstrip("/")) or ".", STATE_FILE_NAME)
    return os.path.normpath(os.path.join(instance_dir, path))


def state_file_text(role: str, changed: str) -> str:
    """The state file as the plugin writes it (SiteRoleStore.save)."""
    if role not in ROLES:
        raise ValueError("site role must be one of %s, not %r" % (", ".join(ROLES), role))
    return ("# site role of this broker (active|passive), written by the continuity broker plugin\n"
            "role=%s\nchanged=%s\n" % (role, changed))


def role_in_state_file(text: str) -> Optional[str]:
    m = _ROLE_LINE_RE.search(text or "")
    return m.group("role") if m and m.group("role") in ROLES else None


def persist_role(broker_xml_path: str, role: str, changed: str, check_mode: bool = False) -> Optional[dict]:
    """Write ``role`` into the state file of the plugin configured in the broker.xml at ``broker_xml_path`` (atomic:
    temporary file, fsync, rename). ``None`` when that broker.xml has no continuity plugin; else
    ``{"path", "role_before", "role", "changed"}``. ``changed`` is the ISO-8601 instant written in the file."""
    import os
    import tempfile

    with open(broker_xml_path, "r", encoding="utf-8") as fh:
        xml_text = fh.read()
    instance_dir = os.path.dirname(os.path.dirname(os.path.abspath(broker_xml_path)))
    path = state_file_of(xml_text, instance_dir)
    if path is None:
        return None
    before = None
    if os.path.exists(path):
        with open(path, "r", encoding="utf-8") as fh:
            before = role_in_state_file(fh.read())
    done = {"path": path, "role_before": before, "role": role, "changed": before != role}
    if done["changed"] and not check_mode:
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="." + STATE_FILE_NAME + ".", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(state_file_text(role, changed))
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
            st = os.stat(directory)
            try:
                os.chown(tmp, st.st_uid, st.st_gid)  # the broker's user must be able to replace it later
            except PermissionError:
                pass  # not root: the file is ours, in a directory we could write
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return done
