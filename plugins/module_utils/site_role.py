# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""The site-role model, as pure functions.

A site is ACTIVE when its client acceptors are started and PASSIVE when they are stopped; the mirror has
its own acceptor that is never fenced (on real Artemis, stopping the acceptor a peer's mirror came in
through also cuts that mirror). The role therefore is always readable from the broker itself
(acceptor `Started`), and it survives a restart because the fence is also written to broker.xml as the
acceptor parameter `autoStart=false` (Artemis 2.16+): a restarted passive broker does not open its client
acceptors.

Since Artemis 2.43 a config reload recreates an acceptor whose URI changed and starts it only when
`autoStart` is true, so on those versions activation = write `autoStart=true` then
`reloadConfigurationFile()`; before 2.43 a reload ignores acceptors, so activation = acceptor `start()`
and the file change only matters at the next restart.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

ACTIVE = "active"
PASSIVE = "passive"
MIXED = "mixed"  # some client acceptors started, some stopped: an interrupted switch
UNREACHABLE = "unreachable"
# An HA backup that is not live (docs/ha.md): it answers Jolokia but has no acceptors and serves nothing; its
# site's role is read from the live broker of the pair. Only the broker.xml fence applies to it.
STANDBY = "standby"

# First version whose config reload applies acceptor changes (ARTEMIS-5609).
ACCEPTOR_RELOAD_SINCE = (2, 43, 0)
AUTO_START_SINCE = (2, 16, 0)

_ACCEPTOR_RE = re.compile(
    r'(?P<open><acceptor\b[^>]*\bname\s*=\s*"(?P<name>[^"]*)"[^>]*>)(?P<uri>[^<]*)(?P<close></acceptor>)'
)


def is_standby(snapshot):
    """A reachable broker that is an HA backup and not live (Backup=true, Active not true)."""
    reachable = bool(snapshot.get("reachable", True))
    return reachable and snapshot.get("backup") is True and snapshot.get("active") is not True


def ha_state(snapshot):
    """The HA facts of a reachable broker: policy, backup, active, replica_sync (None when it could not be read).

    ``replica_sync`` is Artemis' ``ReplicaSync``: on a backup, true once it holds a full copy of its primary's
    journal; on a live broker of a pair, true while its backup is synchronised (None when it was not read)."""
    if not snapshot.get("reachable", True):
        return None
    return {"policy": snapshot.get("ha_policy"), "backup": snapshot.get("backup"), "active": snapshot.get("active"),
            "replica_sync": snapshot.get("replica_sync")}


def broker_facts(broker, snapshot):
    """One broker of a site as :func:`pair_state` reads it, from a site_state snapshot (reachable or not): the same
    facts the site_role module returns (``reachable``, ``live`` = reachable and not standing by, ``role`` standby,
    ``ha``)."""
    snapshot = snapshot or {}
    reachable = bool(snapshot.get("reachable", True))
    standby = is_standby(snapshot)
    return {"broker": broker, "reachable": reachable, "live": reachable and not standby,
            "role": STANDBY if standby else None, "ha": ha_state(snapshot)}


def took_over(ha):
    """A live broker whose HA policy is a backup's: the backup of its pair that took over from the primary."""
    return "Backup" in str((ha or {}).get("policy") or "")


def on_shared_store(ha):
    """A broker of a shared-store pair (Artemis HAPolicy ``Shared Store Primary|Backup``): its backup holds no copy of
    the journal to synchronise (Artemis reads ``ReplicaSync`` false on it); it loads the pair's one store when it
    takes over."""
    return "Shared Store" in str((ha or {}).get("policy") or "")


def pair_state(brokers):
    """Which broker serves a site with several brokers (an HA pair, docs/ha.md), and whether the site needs a
    site switch.

    ``brokers``: the site's brokers in inventory order (primary first), each ``{"broker": name, "reachable": bool,
    "live": bool, "role": ..., "ha": {...}}`` (the site_role module's result, or :func:`broker_facts`). The live
    broker is the first one that is live, else the first one listed (the runbooks describe the site by the same
    broker). ``serving``: that broker is live; ``takeover``: it is a backup that took over (the site did not fail);
    ``standby``: the others standing by (``in_sync``: the ReplicaSync of those that replicate, None when unknown;
    ``shared_store``: those on the pair's shared store, which have nothing to synchronise); ``down``: the others
    that did not answer; ``switch_needed``: no broker of the site serves.
    """
    brokers = [b or {} for b in (brokers or [])]
    if not brokers:
        return None
    live_index = next((i for i, b in enumerate(brokers) if b.get("live") is True), 0)
    live = brokers[live_index]
    others = [b for i, b in enumerate(brokers) if i != live_index]
    serving = live.get("live") is True
    standby = [b for b in others if b.get("reachable") is True and b.get("role") == STANDBY]
    return {
        "live_broker": live.get("broker"),
        "serving": serving,
        "takeover": serving and took_over(live.get("ha")),
        "standby": [b.get("broker") for b in standby],
        "in_sync": {b.get("broker"): (b.get("ha") or {}).get("replica_sync") for b in standby
                    if not on_shared_store(b.get("ha"))},
        "shared_store": [b.get("broker") for b in standby if on_shared_store(b.get("ha"))],
        "down": [b.get("broker") for b in others if b.get("reachable") is not True],
        "switch_needed": not serving,
    }


def missing_acceptors(acceptor_started, client_acceptors):
    """The client acceptors `{acceptor name: started}` does not list, in their order."""
    return [name for name in client_acceptors if name not in acceptor_started]


def derive_role(acceptor_started, client_acceptors):
    """Role of a site from `{acceptor name: started}` and the names of its client acceptors.

    Raises ValueError naming the missing acceptors, because a role derived from acceptors that do not
    exist would be a guess.
    """
    missing = missing_acceptors(acceptor_started, client_acceptors)
    if missing:
        raise ValueError(
            "client acceptor(s) %s not found on the broker; acceptors that exist: %s"
            % (", ".join(missing), ", ".join(sorted(acceptor_started)) or "none")
        )
    if not client_acceptors:
        raise ValueError("client_acceptors is empty: name at least one acceptor that serves clients")
    states = {bool(acceptor_started[name]) for name in client_acceptors}
    if states == {True}:
        return ACTIVE
    if states == {False}:
        return PASSIVE
    return MIXED


def split_acceptor_uri(uri):
    """`tcp://h:p?a=1;b=2` -> (`tcp://h:p`, [(a, 1), (b, 2)]), keeping parameter order."""
    uri = uri.strip()
    base, sep, query = uri.partition("?")
    params = []
    if sep:
        for part in query.split(";"):
            if not part:
                continue
            key, _eq, value = part.partition("=")
            params.append((key, value))
    return base, params


def join_acceptor_uri(base, params):
    if not params:
        return base
    return base + "?" + ";".join("%s=%s" % (k, v) for k, v in params)


def _canonical_order(params):
    """The order the broker role renders: ``protocols`` first, then the keys sorted case-insensitively."""
    keys = [k for k, _v in params if k != "protocols"]
    return keys == sorted(keys, key=str.lower)


def set_uri_param(uri, key, value):
    """Set (or add) one parameter of an acceptor URI, leaving every other parameter as it was.

    A new key goes where the broker role's template puts it when the URI is in the role's order, so a fenced
    file and the role's next render are the same text (a re-deploy changes nothing); otherwise it is appended.
    """
    base, params = split_acceptor_uri(uri)
    out = []
    found = False
    for k, v in params:
        if k == key:
            if not found:
                out.append((k, value))
            found = True
        else:
            out.append((k, v))
    if not found:
        at = len(out)
        if _canonical_order(out):
            at = next((i for i, (k, _v) in enumerate(out) if k != "protocols" and k.lower() > key.lower()), len(out))
        out.insert(at, (key, value))
    return join_acceptor_uri(base, out)


def acceptor_uris(broker_xml):
    """`{acceptor name: uri}` of every `<acceptor>` in a broker.xml text."""
    return {m.group("name"): m.group("uri").strip() for m in _ACCEPTOR_RE.finditer(broker_xml)}


def set_acceptors_auto_start(broker_xml, acceptors, auto_start):
    """Return (new text, changed acceptor names) with `autoStart` set on the named acceptors.

    Only the URI text of those acceptors changes, so the edit is deterministic and `--diff` shows exactly
    the fence. Raises ValueError naming acceptors that are not in the file.
    """
    wanted = "true" if auto_start else "false"
    present = acceptor_uris(broker_xml)
    missing = [a for a in acceptors if a not in present]
    if missing:
        raise ValueError(
            "acceptor(s) %s not found in broker.xml; acceptors in the file: %s"
            % (", ".join(missing), ", ".join(sorted(present)) or "none")
        )
    changed = []

    def _edit(match):
        name = match.group("name")
        if name not in acceptors:
            return match.group(0)
        uri = match.group("uri")
        _base, params = split_acceptor_uri(uri)
        current = dict(params).get("autoStart", "true").lower()
        if current == wanted:
            return match.group(0)
        changed.append(name)
        return match.group("open") + set_uri_param(uri, "autoStart", wanted) + match.group("close")

    return _ACCEPTOR_RE.sub(_edit, broker_xml), changed


def persisted_role(broker_xml, client_acceptors):
    """The role a broker will come up in after a restart, from its broker.xml."""
    uris = acceptor_uris(broker_xml)
    auto = {}
    for name in client_acceptors:
        if name not in uris:
            raise ValueError("acceptor %s not found in broker.xml" % name)
        auto[name] = dict(split_acceptor_uri(uris[name])[1]).get("autoStart", "true").lower() != "false"
    return derive_role(auto, client_acceptors)


def fence_proven(role, persisted, listener_results):
    """Whether a site is proven fenced -- it cannot serve clients now nor after a restart -- and why.

    ``role``: what its broker says now (or UNREACHABLE); ``persisted``: the role its broker.xml gives it at a restart
    (None when not read); ``listener_results``: TCP probes of its client acceptor endpoints (module_utils.listeners).
    A file edit alone proves nothing: a broker that runs while its Jolokia does not answer may keep serving (before
    Artemis 2.43 a reload never closes an acceptor). So an unreachable broker counts as fenced only when every client
    endpoint refuses connections (the host answers and nothing listens), and never when none could be probed.
    Returns ``(fenced, reason)``."""
    results = list(listener_results or [])
    open_ = [r["endpoint"] for r in results if r.get("state") == "open"]
    if persisted != PASSIVE:
        return False, "its broker.xml would open the client acceptors at a restart (persisted role %s)" % persisted
    if open_:
        return False, "%s accept%s client connections" % (", ".join(open_), "s" if len(open_) == 1 else "")
    if role in (PASSIVE, STANDBY):
        return True, "client acceptors stopped%s and autoStart=false persisted" % (
            " (nothing accepts connections on %s)" % ", ".join(r["endpoint"] for r in results) if results else "")
    if role == UNREACHABLE:
        if not results:
            return False, "its broker cannot be read and no client endpoint was given to check that nothing listens"
        unknown = ["%s (%s)" % (r["endpoint"], r.get("error") or r.get("state")) for r in results
                   if r.get("state") != "refused"]
        if unknown:
            return False, ("its broker cannot be read and whether its client acceptors listen is unknown: %s"
                           % "; ".join(unknown))
        return True, ("its broker cannot be read, every client endpoint refuses connections (%s) and autoStart=false "
                      "is persisted" % ", ".join(r["endpoint"] for r in results))
    return False, "its client acceptors are %s" % role


def activation_method(version_tuple):
    """How to open client acceptors so that the running state and broker.xml agree without a bounce."""
    if version_tuple is not None and tuple(version_tuple[:3]) >= ACCEPTOR_RELOAD_SINCE:
        return "reload"  # write autoStart=true, then reloadConfigurationFile(): the reload starts them
    return "start"  # acceptor start() now; the file matters at the next restart
