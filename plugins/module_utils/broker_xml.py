# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see galaxy.yml)
# Private to continuity.artemis (its modules, plugins, roles and tools): no API promise to other collections.
"""Controller-side checks of a broker configuration before it reaches a host.

Three kinds of check, each returning plain lists of messages (no Ansible dependency, so the unit tests and the
`broker_config_validate` module share them):

* ``semantic_errors(config, version)``: checks on the role's structured variables that the XML schema cannot
  express (unique acceptor names and ports, unique mirror names, retry-interval > 0, reconnect-attempts != 0,
  roles that exist, features the target version lacks). Every message starts with the variable path
  (``broker_acceptors[1].port: ...``) so an operator knows what to fix.
* ``schema_errors(xml_text, schema_dir)``: the rendered broker.xml against the XSD of the target version.
* ``restart_reasons(old_xml, new_xml, version)``: what in a change needs a broker restart instead of the
  broker's own configuration reload (Artemis re-reads addresses, address-settings, security-settings, diverts
  and, since 2.32, broker connections; a connection holding a ``<mirror>`` cannot be changed or removed by a
  reload).

lxml is imported lazily: the semantic checks run without it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import re
import shutil
import tarfile
import tempfile
import zipfile

from ansible_collections.continuity.artemis.plugins.module_utils import site_role, versions

CORE_NS = "urn:activemq:core"

# First Artemis release of each feature the roles can render: the shared table in versions.py, under the names
# this module uses.
_FEATURE_NAMES = {
    "mirror_sync": "mirror_sync",
    "mirror_properties": "mirror_properties",
    "primary_backup_names": "primary_backup_names",
    "connection_reload": "mirror_reload_limits",
    "mirror_tuning": "mirror_ack_manager_settings",
    "mirror_ack_manager_warn_unacked": "mirror_ack_manager_warn_unacked",
    "federation_element": "federation_element",
}
FEATURES = {name: versions.FEATURES[shared] for name, shared in _FEATURE_NAMES.items()}

# broker_mirror_tuning option -> (<core> element, feature)
MIRROR_TUNING = {
    "ack_manager_queue_attempts": ("mirror-ack-manager-queue-attempts", "mirror_tuning"),
    "ack_manager_page_attempts": ("mirror-ack-manager-page-attempts", "mirror_tuning"),
    "ack_manager_retry_delay": ("mirror-ack-manager-retry-delay", "mirror_tuning"),
    "page_transaction": ("mirror-page-transaction", "mirror_tuning"),
    "ack_manager_warn_unacked": ("mirror-ack-manager-warn-unacked", "mirror_ack_manager_warn_unacked"),
}

# <core> children Artemis applies on a configuration reload without a restart.
RELOADABLE = frozenset(
    {"addresses", "address-settings", "security-settings", "diverts", "broker-connections"}
)

URI_ALTERNATE = re.compile(r"^(tcp|ssl|amqp|amqps)://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})(\?.*)?$")
PERMISSION_TYPES = (
    "send", "consume", "browse", "manage", "createAddress", "deleteAddress", "createDurableQueue",
    "deleteDurableQueue", "createNonDurableQueue", "deleteNonDurableQueue", "view", "edit",
)


def parse_version(text):
    """'2.44.0', '2.44.0-lab', '2.33' -> (2, 44, 0). Raises ValueError (versions.VersionError) otherwise."""
    return versions.parse_version(text).number


def supports(version, feature):
    return parse_version(version) >= FEATURES[feature]


def fmt_version(vt):
    return "%d.%d.%d" % vt


def _feature_error(path, feature, version):
    return "%s: needs Artemis %s or later, the target version is %s" % (
        path, fmt_version(FEATURES[feature]), version)


# ---------------------------------------------------------------------------------------------------------
# semantic checks on the structured variables
# ---------------------------------------------------------------------------------------------------------
def _dupes(items, key):
    seen = {}
    out = []
    for i, item in enumerate(items):
        k = key(item)
        if k is None:
            continue
        if k in seen:
            out.append((i, seen[k], k))
        else:
            seen[k] = i
    return out


def as_int(value):
    """An integer given as an int or as its decimal text ("20616", "-1": ansible-core before 2.19 renders templated
    numbers as text, and so do -e and AWX text surveys); None for anything else (a bool is not a number here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip() if isinstance(value, str) else ""
    if text[1:].isdigit() if text[:1] in "+-" else text.isdigit():
        return int(text)
    return None


def _mirror_window_errors(params, default_params):
    """The mirror acceptor's amqpCredits is both the peer mirror's credit and the target's duplicate-ID window
    (broker_mirror_id_cache_size): a window at or below amqpLowCredits would top the credit up on every message."""
    # merged as the template merges the acceptor's URI parameters, over Artemis's own defaults
    merged = {"amqpCredits": 1000, "amqpLowCredits": 300}
    merged.update(default_params)
    merged.update(params)
    low = as_int(merged["amqpLowCredits"])
    if low is None:
        return ["broker_mirror_acceptor.params.amqpLowCredits (or broker_acceptor_default_params.amqpLowCredits): "
                "%r is not a whole number" % (merged["amqpLowCredits"],)]
    credits = as_int(merged["amqpCredits"])
    if credits is None or credits <= max(low, 0):
        return ["broker_mirror_id_cache_size (or broker_mirror_acceptor.params.amqpCredits): %r must be a whole "
                "number above the mirror acceptor's amqpLowCredits (%s)" % (merged["amqpCredits"], low)]
    return []


def semantic_errors(config, version):
    """config keys (all optional): name, acceptors, mirror_acceptor, acceptor_default_params, http_port,
    connections, users, extra_users, admin_user, admin_role, security_settings, extra_security_settings, addresses,
    ha_policy, plugins, continuity_plugin, mirror_tuning, management_roles. Passwords are not needed (and should not
    be passed)."""
    errors = []
    try:
        parse_version(version)
    except ValueError as exc:
        return ["broker_version: %s" % exc]

    if not str(config.get("name") or "").strip():
        errors.append("broker_name: must not be empty")

    # acceptors: the mirror acceptor shares the name/port space of the client acceptors
    acceptors = [("broker_acceptors[%d]" % i, a) for i, a in enumerate(config.get("acceptors") or [])]
    mirror_acceptor = config.get("mirror_acceptor") or {}
    if mirror_acceptor.get("enabled", False):
        acceptors.append(("broker_mirror_acceptor", mirror_acceptor))
        errors += _mirror_window_errors(mirror_acceptor.get("params") or {},
                                        config.get("acceptor_default_params") or {})
    if not acceptors:
        errors.append("broker_acceptors: at least one acceptor is needed (none is defined and "
                      "broker_mirror_acceptor.enabled is false)")
    seen_names = {}
    seen_ports = {}
    for path, acc in acceptors:
        name = acc.get("name")
        if name in seen_names:
            errors.append("%s.name: acceptor name %r is already used by %s" % (path, name, seen_names[name]))
        else:
            seen_names[name] = path
        port = as_int(acc.get("port"))
        if port is None or not 1 <= port <= 65535:
            errors.append("%s.port: %r is not a TCP port (1-65535)" % (path, acc.get("port")))
            continue
        if port in seen_ports:
            errors.append("%s.port: port %d is already used by %s" % (path, port, seen_ports[port]))
        else:
            seen_ports[port] = path
    http_port = as_int(config.get("http_port"))
    if http_port is not None and http_port in seen_ports:
        errors.append("broker_http_port: port %d is already used by %s" % (http_port, seen_ports[http_port]))

    # users and roles
    users = [("broker_users[%d]" % i, u) for i, u in enumerate(config.get("users") or [])]
    users += [("broker_extra_users[%d]" % i, u) for i, u in enumerate(config.get("extra_users") or [])]
    seen_users = {}
    admin = config.get("admin_user")
    if admin:
        seen_users[admin] = "broker_admin_user"
    roles = set([config.get("admin_role")]) if config.get("admin_role") else set()
    for path, user in users:
        name = user.get("name")
        if name in seen_users:
            errors.append("%s.name: user %r is already defined by %s" % (path, name, seen_users[name]))
        else:
            seen_users[name] = path
        if not user.get("roles"):
            errors.append("%s.roles: user %r needs at least one role" % (path, name))
        roles.update(user.get("roles") or [])

    settings = [("broker_security_settings[%d]" % i, s) for i, s in enumerate(config.get("security_settings") or [])]
    settings += [("broker_extra_security_settings[%d]" % i, s)
                 for i, s in enumerate(config.get("extra_security_settings") or [])]
    for path, setting in settings:
        for ptype, proles in sorted((setting.get("permissions") or {}).items()):
            if ptype not in PERMISSION_TYPES:
                errors.append("%s.permissions.%s: unknown permission type, allowed: %s"
                              % (path, ptype, ", ".join(PERMISSION_TYPES)))
            for role in proles or []:
                if role not in roles:
                    errors.append("%s.permissions.%s: role %r is held by no user (broker_admin_role, "
                                  "broker_users, broker_extra_users)" % (path, ptype, role))
    for i, role in enumerate(config.get("management_roles") or []):
        if role not in roles:
            errors.append("broker_management_roles[%d]: role %r is held by no user" % (i, role))

    # broker connections (normally rendered by the mirror role)
    conns = config.get("connections") or []
    for i, j, name in _dupes(conns, lambda c: c.get("name")):
        errors.append("broker_connections[%d].name: connection name %r is already used by broker_connections[%d]"
                      " (each mirror needs its own $ACTIVEMQ_ARTEMIS_MIRROR_<name> queue)" % (i, name, j))
    for i, conn in enumerate(conns):
        path = "broker_connections[%d]" % i
        uri = conn.get("uri") or ""
        if not uri:
            errors.append("%s.uri: must not be empty" % path)
        for alt in uri.split("#") if uri else []:
            if not URI_ALTERNATE.match(alt):
                errors.append("%s.uri: %r is not tcp://host:port[?params] (alternates are separated by '#')"
                              % (path, alt))
        ri = as_int(conn.get("retry_interval", 5000))
        if ri is None or ri <= 0:
            errors.append("%s.retry_interval: must be a number of milliseconds > 0, got %r"
                          % (path, conn.get("retry_interval")))
        ra = as_int(conn.get("reconnect_attempts", -1))
        if ra is None or ra == 0 or ra < -1:
            errors.append("%s.reconnect_attempts: must be -1 (retry forever) or a positive number; Artemis "
                          "rejects 0, got %r" % (path, conn.get("reconnect_attempts")))
        if conn.get("user") and not conn.get("has_password", True):
            errors.append("%s.password: a password is needed when user is set" % path)
        mirror = conn.get("mirror")
        if mirror:
            af = mirror.get("address_filter")
            if af:
                for entry in str(af).split(","):
                    prefix = entry[1:] if entry.startswith("!") else entry
                    if not prefix.strip() or prefix != prefix.strip():
                        errors.append("%s.mirror.address_filter: empty entry or surrounding blanks in %r "
                                      "(comma list of address prefixes, '!' excludes)" % (path, af))
                        break
                    if "*" in prefix or "#" in prefix:
                        errors.append("%s.mirror.address_filter: %r uses a wildcard; the mirror filter takes "
                                      "plain address prefixes only" % (path, entry))
                        break
            if mirror.get("properties") and not supports(version, "mirror_properties"):
                errors.append(_feature_error(path + ".mirror.properties", "mirror_properties", version))
            if mirror.get("sync") and not supports(version, "mirror_sync"):
                errors.append(_feature_error(path + ".mirror.sync", "mirror_sync", version))

    # mirror tuning in <core>
    for key, value in sorted((config.get("mirror_tuning") or {}).items()):
        if value is None:
            continue
        if key not in MIRROR_TUNING:
            errors.append("broker_mirror_tuning.%s: unknown option, allowed: %s"
                          % (key, ", ".join(sorted(MIRROR_TUNING))))
            continue
        feature = MIRROR_TUNING[key][1]
        if not supports(version, feature):
            errors.append(_feature_error("broker_mirror_tuning." + key, feature, version))

    # addresses and queues
    addresses = config.get("addresses") or []
    for i, j, name in _dupes(addresses, lambda a: a.get("name")):
        errors.append("broker_addresses[%d].name: address %r is already defined by broker_addresses[%d]"
                      % (i, name, j))
    seen_queues = {}
    for i, addr in enumerate(addresses):
        rts = set(addr.get("routing_types") or [])
        for k, queue in enumerate(addr.get("queues") or []):
            qpath = "broker_addresses[%d].queues[%d]" % (i, k)
            qname = queue.get("name")
            if qname in seen_queues:
                errors.append("%s.name: queue %r is already defined by %s" % (qpath, qname, seen_queues[qname]))
            else:
                seen_queues[qname] = qpath
            rt = queue.get("routing_type", "anycast")
            if rts and rt not in rts:
                errors.append("%s.routing_type: %r is not one of the address routing_types %s"
                              % (qpath, rt, sorted(rts)))

    # ha-policy
    ha = config.get("ha_policy") or {}
    kind = ha.get("type", "none")
    role = ha.get("role")
    if kind in ("replication", "shared-store") and role not in ("primary", "backup"):
        errors.append("broker_ha_policy.role: %s needs role primary or backup, got %r" % (kind, role))
    if kind in ("none", "primary-only") and role:
        errors.append("broker_ha_policy.role: type %s takes no role, got %r" % (kind, role))

    # plugins
    for i, plugin in enumerate(config.get("plugins") or []):
        if plugin.get("jar_url") and plugin.get("jar_file"):
            errors.append("broker_plugins[%d]: set jar_url or jar_file, not both" % i)
        if plugin.get("jar_url") and not plugin.get("jar_checksum"):
            errors.append("broker_plugins[%d].jar_checksum: needed with jar_url (e.g. sha256:<hex>)" % i)
    for i, j, name in _dupes(config.get("plugins") or [], lambda p: p.get("class_name")):
        errors.append("broker_plugins[%d].class_name: %r is already configured by broker_plugins[%d]" % (i, name, j))
    errors.extend(continuity_plugin_errors(config.get("continuity_plugin") or {}, config.get("plugins") or [],
                                           [a.get("name") for _path, a in acceptors]))
    return errors


#: Class of the continuity broker plugin (plugin/, docs/plugin.md) and the ranges its PluginConfig accepts.
CONTINUITY_PLUGIN_CLASS = "io.continuity.artemis.plugin.ContinuityPlugin"
CONTINUITY_PLUGIN_RANGES = {"window_seconds": (6, 86400), "max_addresses": (1, 100000)}


def continuity_plugin_errors(plugin, other_plugins, acceptor_names):
    """What the broker role must refuse in ``broker_continuity_plugin`` before anything changes (the plugin itself
    would stop the broker at start with the same complaint, or fail to load without its jar)."""
    if not plugin or not _truthy(plugin.get("enabled")):
        return []
    var = "broker_continuity_plugin"
    errors = []
    jar_file, jar_url = plugin.get("jar_file") or "", plugin.get("jar_url") or ""
    if jar_file and jar_url:
        errors.append("%s: set jar_file or jar_url, not both" % var)
    elif not jar_file and not jar_url:
        errors.append("%s: enabled needs jar_file (the jar on the controller, e.g. plugin/target/"
                      "continuity-artemis-plugin-0.1.0.jar after `make plugin`) or jar_url with jar_checksum" % var)
    if jar_url and not plugin.get("jar_checksum"):
        errors.append("%s.jar_checksum: needed with jar_url (e.g. sha256:<hex>)" % var)
    for key, (low, high) in sorted(CONTINUITY_PLUGIN_RANGES.items()):
        value = plugin.get(key)
        try:
            number = int(value)
        except (TypeError, ValueError):
            errors.append("%s.%s: must be an integer, got %r" % (var, key, value))
            continue
        if not low <= number <= high:
            errors.append("%s.%s: must be between %d and %d, got %d" % (var, key, low, high, number))
    for name in plugin.get("mirror_acceptors") or []:
        if name not in acceptor_names:
            errors.append("%s.mirror_acceptors: no acceptor named %r (acceptors: %s)"
                          % (var, name, ", ".join(n for n in acceptor_names if n) or "none"))
    for i, other in enumerate(other_plugins):
        if other.get("class_name") == CONTINUITY_PLUGIN_CLASS:
            errors.append("broker_plugins[%d].class_name: %s is configured by %s; remove it from broker_plugins"
                          % (i, CONTINUITY_PLUGIN_CLASS, var))
    return errors


def _truthy(value):
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "1")


# ---------------------------------------------------------------------------------------------------------
# schema
# ---------------------------------------------------------------------------------------------------------
def extract_schema(archive, dest):
    """Copy the XSD files of an Artemis distribution (``<top>/schema/*.xsd``, else the ``schema/`` folder of
    ``lib/artemis-server-<v>.jar``) into ``dest``. Returns dest, or raises ValueError."""
    found = False
    if archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            found = _extract_from_names(zf.namelist(), zf.read, dest)
    else:
        with tarfile.open(archive) as tf:
            members = {m.name: m for m in tf.getmembers() if m.isfile()}
            found = _extract_from_names(list(members), lambda n: tf.extractfile(members[n]).read(), dest)
    if not found:
        raise ValueError("no artemis-configuration.xsd in %s (looked in <top>/schema/ and lib/artemis-server-*.jar)"
                         % archive)
    return dest


def _extract_from_names(names, read, dest):
    xsds = [n for n in names if re.match(r"^[^/]+/schema/[^/]+\.xsd$", n)]
    if any(n.endswith("/artemis-configuration.xsd") for n in xsds):
        for n in xsds:
            with open(os.path.join(dest, os.path.basename(n)), "wb") as fh:
                fh.write(read(n))
        return True
    jars = [n for n in names if re.match(r"^[^/]+/lib/artemis-server-[0-9][^/]*\.jar$", n)]
    for jar in jars:
        with zipfile.ZipFile(io.BytesIO(read(jar))) as zf:
            inner = [n for n in zf.namelist() if re.match(r"^schema/[^/]+\.xsd$", n)]
            if "schema/artemis-configuration.xsd" in inner:
                for n in inner:
                    with open(os.path.join(dest, os.path.basename(n)), "wb") as fh:
                        fh.write(zf.read(n))
                return True
    return False


def schema_errors(xml_text, schema_dir):
    """Validate against ``artemis-server.xsd`` (root ``<configuration>``, imports the core schema) or, when a
    directory only has ``artemis-configuration.xsd``, validate the ``<core>`` element against that."""
    from lxml import etree

    root_xsd = os.path.join(schema_dir, "artemis-server.xsd")
    core_xsd = os.path.join(schema_dir, "artemis-configuration.xsd")
    try:
        doc = etree.fromstring(xml_text.encode("utf-8") if isinstance(xml_text, str) else xml_text)
    except etree.XMLSyntaxError as exc:
        return ["broker.xml is not well-formed XML: %s" % exc]
    if os.path.exists(root_xsd):
        schema = etree.XMLSchema(etree.parse(root_xsd))
        target = doc
    elif os.path.exists(core_xsd):
        schema = etree.XMLSchema(etree.parse(core_xsd))
        target = doc.find("{%s}core" % CORE_NS)
        if target is None:
            return ["broker.xml has no <core xmlns=\"%s\"> element" % CORE_NS]
    else:
        raise ValueError("no artemis-server.xsd or artemis-configuration.xsd in %s" % schema_dir)
    if schema.validate(target):
        return []
    return ["broker.xml line %d: %s" % (e.line, e.message) for e in schema.error_log]


class SchemaDir:
    """Context manager: a schema directory from either a directory or a distribution archive."""

    def __init__(self, schema_dir=None, archive=None):
        self.schema_dir = schema_dir
        self.archive = archive
        self._tmp = None

    def __enter__(self):
        if self.schema_dir:
            return self.schema_dir
        self._tmp = tempfile.mkdtemp(prefix="artemis-xsd-")
        return extract_schema(self.archive, self._tmp)

    def __exit__(self, *exc):
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
        return False


# ---------------------------------------------------------------------------------------------------------
# restart or reload
# ---------------------------------------------------------------------------------------------------------
def _canon(elem):
    from lxml import etree

    elem = _strip(elem)
    return etree.tostring(elem, method="c14n")


def _strip(elem):
    """A copy without comments and whitespace-only text, so formatting never counts as a change."""
    from lxml import etree

    elem = etree.fromstring(etree.tostring(elem))
    for c in elem.xpath("//comment()"):
        parent = c.getparent()
        if parent is not None:
            parent.remove(c)
    for e in elem.iter():
        if e.text is not None and not e.text.strip():
            e.text = None
        if e.tail is not None and not e.tail.strip():
            e.tail = None
    return elem


def _core(xml_text):
    from lxml import etree

    doc = etree.fromstring(xml_text.encode("utf-8") if isinstance(xml_text, str) else xml_text)
    core = doc.find("{%s}core" % CORE_NS)
    return core if core is not None else doc


def _local(tag):
    return tag.split("}", 1)[-1] if isinstance(tag, str) else None


def connections_from_xml(xml_text):
    """{name: {"attrs": {...}, "mirror": {...} or None, "canon": bytes}} of the amqp-connections."""
    out = {}
    core = _core(xml_text)
    for conn in core.iter("{%s}amqp-connection" % CORE_NS):
        mirror = conn.find("{%s}mirror" % CORE_NS)
        out[conn.get("name")] = {
            "attrs": dict(conn.attrib),
            "mirror": dict(mirror.attrib) if mirror is not None else None,
            "canon": _canon(conn),
        }
    return out


def _acceptors(core):
    """{name: (scheme://host:port, {param: value})} of the <acceptors>: what Artemis reads, not the text."""
    out = {}
    for acc in core.iter("{%s}acceptor" % CORE_NS):
        base, params = site_role.split_acceptor_uri(acc.text or "")
        out[acc.get("name")] = (base, dict(params))
    return out


def restart_reasons(old_xml, new_xml, version):
    """Why the change old -> new needs a restart; [] when the broker's reload applies it (or nothing changed)."""
    if not old_xml:
        return []
    try:
        old = _core(old_xml)
    except Exception:  # an unreadable current file: a restart is the safe answer
        return ["the current broker.xml cannot be parsed"]
    new = _core(new_xml)

    def children(core):
        out = {}
        for child in core:
            name = _local(child.tag)
            if name:
                out.setdefault(name, []).append(_canon(child))
        return out

    a, b = children(old), children(new)
    reasons = []
    for name in sorted(set(a) | set(b)):
        if a.get(name) == b.get(name):
            continue
        if name == "acceptors" and _acceptors(old) == _acceptors(new):
            continue  # the same acceptors with their URI parameters in another order
        if name in RELOADABLE and name != "broker-connections":
            continue
        if name == "broker-connections":
            if not supports(version, "connection_reload"):
                reasons.append("broker connections changed (Artemis before 2.32 does not reload them)")
                continue
            old_c, new_c = connections_from_xml(old_xml), connections_from_xml(new_xml)
            for cname in sorted(old_c):
                if old_c[cname]["mirror"] is None:
                    continue
                if cname not in new_c:
                    reasons.append("mirror connection %s removed (a reload cannot remove a mirror)" % cname)
                elif new_c[cname]["canon"] != old_c[cname]["canon"]:
                    reasons.append("mirror connection %s changed (a reload cannot change a mirror)" % cname)
            continue
        reasons.append("<%s> changed (not applied by a configuration reload)" % name)
    return reasons
