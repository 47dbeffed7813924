# Copyright: continuity.artemis contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja2 filters for the broker and mirror roles.

* ``artemis_password_hash(password, seed)``: the one-way ``ENC(iterations:salt:hash)`` value Artemis'
  PropertiesLoginModule verifies (DefaultSensitiveStringCodec "one-way": PBKDF2WithHmacSHA1, 1024 iterations,
  32-byte salt, 64-byte key, upper-case hex). The salt is derived from ``seed`` (host + user name) instead of
  drawn at random, so the same password renders the same line on every run and ``--diff``/idempotence stay
  quiet; a changed password or user still changes the hash. Salts must be unique, not secret.
* ``artemis_mask(password, key)``: the two-way ``ENC(...)`` Artemis decodes in broker.xml (Blowfish/ECB/PKCS5
  with the codec key, default ``clusterpassword``, written as Java's signed BigInteger hex). This is
  obfuscation: anyone with the key decodes it; file permissions protect the secret.
* ``artemis_unmask(value, key)``: the inverse, for tests and checks.
* ``artemis_without_secrets(data)``: a copy with every ``password``-like key replaced by ``has_password``.
* ``artemis_version_from_name(path)``: ``2.44.0`` from ``apache-artemis-2.44.0-bin.tar.gz``; ``''`` when the
  name carries no version.
* ``artemis_home_dir(path)``: the archive's top directory name (``apache-artemis-2.44.0``).
* ``artemis_merge_security(a, b)``: security settings merged by match (roles united per permission).
* ``artemis_acceptor_params(xml)``: ``{acceptor: {param: value}}`` of a broker.xml (to keep a fence).
* ``artemis_roles_map(users)``: ``{role: [users]}`` for artemis-roles.properties.
* ``artemis_create_tuning(xml)``: what ``artemis create`` tuned for the machine in the broker.xml it wrote.
* ``artemis_jolokia_endpoint(broker)``: THE rule for a broker's Jolokia endpoint (scheme, host, port, url, origin)
  from its web server settings; the broker and mirror roles, playbooks/sites.yml and the agent's sites use it.
* ``artemis_web_binding(bootstrap_xml, tls)``: etc/bootstrap.xml with the web ``<binding>`` serving http or https.
"""

import hashlib
import os
import re

from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.module_utils import site_role

ITERATIONS = 1024
SALT_BYTES = 32
KEY_BYTES = 64
DEFAULT_MASK_KEY = "clusterpassword"
ARCHIVE_NAME = re.compile(r"^(?P<top>apache-artemis-(?P<version>\d+\.\d+\.\d+)(?:[.-][A-Za-z0-9.]+?)?)"
                          r"-bin\.(?:tar\.gz|tgz|zip)$")


def artemis_password_hash(password, seed, iterations=ITERATIONS):
    if password is None or str(password) == "":
        raise AnsibleFilterError("artemis_password_hash: empty password")
    salt = hashlib.sha256((f"continuity.artemis:{seed}").encode()).digest()
    salt = (salt + hashlib.sha256(salt).digest())[:SALT_BYTES]
    digest = hashlib.pbkdf2_hmac("sha1", str(password).encode("utf-8"), salt, int(iterations), KEY_BYTES)
    return f"ENC({int(iterations)}:{salt.hex().upper()}:{digest.hex().upper()})"


def artemis_password_verify(password, stored):
    m = re.match(r"^ENC\((\d+):([0-9A-Fa-f]+):([0-9A-Fa-f]+)\)$", stored or "")
    if not m:
        return stored == password
    want = bytes.fromhex(m.group(3))
    got = hashlib.pbkdf2_hmac("sha1", str(password).encode("utf-8"), bytes.fromhex(m.group(2)),
                              int(m.group(1)), len(want))
    return got == want


def _blowfish(key):
    try:
        from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
    except ImportError:  # cryptography < 43
        from cryptography.hazmat.primitives.ciphers.algorithms import Blowfish
    from cryptography.hazmat.primitives.ciphers import Cipher, modes

    return Cipher(Blowfish(key.encode("utf-8")), modes.ECB())


def artemis_mask(password, key=DEFAULT_MASK_KEY):
    if password is None:
        raise AnsibleFilterError("artemis_mask: no password")
    from cryptography.hazmat.primitives import padding

    padder = padding.PKCS7(64).padder()
    data = padder.update(str(password).encode("utf-8")) + padder.finalize()
    enc = _blowfish(key or DEFAULT_MASK_KEY).encryptor()
    raw = enc.update(data) + enc.finalize()
    # Java: new BigInteger(bytes).toString(16) -> signed two's complement, no leading zeros
    return "ENC({})".format(format(int.from_bytes(raw, "big", signed=True), "x"))


def artemis_unmask(value, key=DEFAULT_MASK_KEY):
    from cryptography.hazmat.primitives import padding

    m = re.match(r"^ENC\((-?[0-9a-fA-F]+)\)$", value or "")
    if not m:
        return value
    n = int(m.group(1), 16)
    length = ((n if n >= 0 else ~n).bit_length() // 8) + 1  # Java toByteArray(): minimal two's complement
    raw = n.to_bytes(length, "big", signed=True)
    if len(raw) % 8:
        raw = (b"\xff" if n < 0 else b"\x00") * (8 - len(raw) % 8) + raw
    dec = _blowfish(key or DEFAULT_MASK_KEY).decryptor()
    data = dec.update(raw) + dec.finalize()
    unpadder = padding.PKCS7(64).unpadder()
    return (unpadder.update(data) + unpadder.finalize()).decode("utf-8")


def artemis_without_secrets(data):
    if isinstance(data, dict):
        out = {}
        for k, v in data.items():
            if "password" in str(k).lower():
                out["has_password"] = v not in (None, "")
            else:
                out[k] = artemis_without_secrets(v)
        return out
    if isinstance(data, (list, tuple)):
        return [artemis_without_secrets(v) for v in data]
    return data


def artemis_version_from_name(path):
    m = ARCHIVE_NAME.match(os.path.basename(str(path or "")))
    return m.group("version") if m else ""


def artemis_home_dir(path):
    m = ARCHIVE_NAME.match(os.path.basename(str(path or "")))
    if not m:
        name = os.path.basename(str(path or ""))
        raise AnsibleFilterError(
            f"artemis_home_dir: {name!r} is not named apache-artemis-<version>-bin.<tar.gz|zip>")
    return m.group("top")


def _words_match(pattern, words):
    """Artemis wildcard match on words: ``#`` = zero or more words, ``*`` = exactly one."""
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(_words_match(rest, words[i:]) for i in range(len(words) + 1))
    if not words:
        return False
    return (head == "*" or head == words[0]) and _words_match(rest, words[1:])


def _covers(base_match, match):
    """Whether ``base_match`` applies to what ``match`` names (its wildcards read as literal words)."""
    return base_match == match or _words_match(base_match.split("."), match.split("."))


def artemis_merge_security(*lists):
    """Security settings from several lists (role defaults first, then the mirror role's grants) merged by
    ``match``, roles united per permission type.

    Artemis applies only the MOST SPECIFIC matching <security-setting> (no inheritance), and keeps only the
    last of two equal matches. So a grant on a new, narrower match (``orders.#`` for the mirror) would take
    every permission on those addresses away from roles the broader base setting (``#``) granted: a new match
    therefore starts from the union of the base settings that cover it."""
    merged = {}
    order = []
    base = [dict(item) for item in (lists[0] if lists else []) or []]
    for index, items in enumerate(lists):
        for item in items or []:
            match = item["match"]
            if match not in merged:
                merged[match] = {}
                order.append(match)
                if index > 0:
                    for b in base:
                        if b["match"] != match and _covers(b["match"], match):
                            for ptype, roles in (b.get("permissions") or {}).items():
                                have = merged[match].setdefault(ptype, [])
                                have.extend(r for r in roles or [] if r not in have)
            for ptype, roles in (item.get("permissions") or {}).items():
                have = merged[match].setdefault(ptype, [])
                for role in roles or []:
                    if role not in have:
                        have.append(role)
    return [{"match": m, "permissions": {k: sorted(v) for k, v in sorted(merged[m].items())}} for m in order]


def artemis_roles_map(users):
    """[{name, roles}] -> {role: [user, ...]} (sorted), the shape of artemis-roles.properties."""
    out = {}
    for user in users or []:
        for role in user.get("roles") or []:
            out.setdefault(role, [])
            if user["name"] not in out[role]:
                out[role].append(user["name"])
    return {k: sorted(v) for k, v in sorted(out.items())}


def _elements(xml_text):
    """(local tag name, element) of every element of a broker.xml text; nothing for '' or unparsable text."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(xml_text or "")
    except ET.ParseError:
        return []
    return [(el.tag.split("}", 1)[-1], el) for el in root.iter()]


def artemis_acceptor_params(xml_text):
    """{acceptor name: {uri param: value}} of a broker.xml text ('' or unparsable -> {}). The deploy uses it to
    keep a runbook's fence (``autoStart=false`` on client acceptors) when it renders broker.xml again."""
    out = {}
    for tag, el in _elements(xml_text):
        if tag != "acceptor" or not el.get("name"):
            continue
        # The same URI parsing the runbooks use to write the fence (module_utils/site_role.py).
        _base, params = site_role.split_acceptor_uri(el.text or "")
        out[el.get("name")] = {key.strip(): value.strip() for key, value in params if key.strip()}
    return out


# <core> elements `artemis create` measures or chooses for the machine and journal type: journal-buffer-timeout and
# page-sync-timeout come from its disk sync test, journal-max-io from the journal type, the critical analyzer from
# its template. The role keeps them instead of falling back to Artemis' built-in defaults.
CREATE_TUNED = ("journal-buffer-timeout", "journal-max-io", "page-sync-timeout", "critical-analyzer",
                "critical-analyzer-timeout", "critical-analyzer-check-period", "critical-analyzer-policy")


def artemis_create_tuning(xml_text):
    """{element: text} of the CREATE_TUNED elements in the broker.xml `artemis create` wrote ('' -> {})."""
    return {tag: el.text.strip() for tag, el in _elements(xml_text) if tag in CREATE_TUNED and (el.text or "").strip()}


def artemis_fence(xml_text, acceptor_names):
    """{acceptor: autoStart value} for the named acceptors that carry ``autoStart`` in a broker.xml text."""
    params = artemis_acceptor_params(xml_text)
    return {n: params[n]["autoStart"] for n in acceptor_names or [] if "autoStart" in params.get(n, {})}


def _hv(hostvars, host, key, default=None):
    try:
        value = hostvars[host][key]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def artemis_mirror_endpoints(hosts, hostvars):
    """``host:port`` of the mirror acceptor of each broker in ``hosts`` (a peer site), primary before backup so
    the first URI of the ``#`` list is the live broker and the rest are its HA alternates.

    host = ``mirror_advertised_host`` | ``ansible_host`` | inventory name;
    port = ``broker_mirror_acceptor.port`` (61617) + ``broker_port_offset`` (0)."""
    out = []
    for host in hosts or []:
        ha = _hv(hostvars, host, "broker_ha_policy", {}) or {}
        backup = 1 if (ha.get("role") == "backup") else 0
        name = _hv(hostvars, host, "mirror_advertised_host") or _hv(hostvars, host, "ansible_host") or host
        acceptor = _hv(hostvars, host, "broker_mirror_acceptor", {}) or {}
        port = int(acceptor.get("port", 61617)) + int(_hv(hostvars, host, "broker_port_offset", 0) or 0)
        out.append((backup, f"{name}:{port}"))
    return [ep for _backup, ep in sorted(out, key=lambda t: t[0])]


def artemis_mirror_grants(address_filter, message_acknowledgements=True, queue_creation=True, queue_removal=True):
    """Security settings (``[{match, permissions}]``) for role placeholder ``ROLE``: what an incoming mirror
    needs on the addresses it mirrors. Address filter prefixes ending in ``.`` become ``<prefix>#``; other
    prefixes get ``<prefix>`` and ``<prefix>.#`` (Artemis matches words, the mirror filter matches characters);
    no filter = ``#``. Exclusions need no grant."""
    perms = ["send"]
    if message_acknowledgements:
        perms.append("consume")
    if queue_creation:
        perms += ["createAddress", "createDurableQueue", "createNonDurableQueue"]
    if queue_removal:
        perms += ["deleteAddress", "deleteDurableQueue", "deleteNonDurableQueue"]
    matches = []
    for entry in (address_filter or "").split(","):
        entry = entry.strip()
        if not entry or entry.startswith("!"):
            continue
        if entry.endswith("."):
            matches.append(entry + "#")
        else:
            matches += [entry, entry + ".#"]
    if not matches:
        matches = ["#"]
    return [{"match": m, "permissions": {p: ["ROLE"] for p in sorted(perms)}} for m in matches]


_WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")
_TRUE = ("true", "yes", "on", "1", "y", "t")


def _truthy(value):
    """A boolean from a bool or the strings AWX passes ('true', 'False', '1', ...)."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    return str(value).strip().lower() in _TRUE


def artemis_jolokia_endpoint(broker):
    """The Jolokia endpoint of a broker: ``{scheme, host, port, url, origin, tls}``.

    ``broker`` keys (all optional): ``url`` (an explicit Jolokia URL wins over everything else), ``host`` (the web
    server's bind address, ``broker_http_host``, default ``localhost``), ``connect_host`` (the address used when the
    web server is bound to all interfaces, default ``127.0.0.1``), ``port`` (``broker_http_port``, 8161),
    ``port_offset`` (0), ``tls`` (the web server serves https, ``broker_web_tls.enabled``), ``path``
    (``/console/jolokia``). Strings are accepted for the numbers and the boolean (AWX passes strings).

    ``origin`` is ``scheme://host:port``: the ``Origin`` header the modules send by default (scheme and network
    location of the URL) and what the role's ``jolokia-access.xml`` ``<allow-origin>`` matches."""
    from urllib.parse import urlsplit

    b = dict(broker or {})
    url = str(b.get("url") or "").strip()
    if url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise AnsibleFilterError("artemis_jolokia_endpoint: url must be http(s)://host[:port]/path, not %r" % url)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return {"scheme": parts.scheme, "host": parts.hostname, "port": port, "url": url.rstrip("/"),
                "origin": "%s://%s" % (parts.scheme, netloc), "tls": parts.scheme == "https"}
    host = str(b.get("host") if b.get("host") is not None else "localhost").strip()
    if host in _WILDCARD_HOSTS:
        host = str(b.get("connect_host") or "127.0.0.1").strip()
    try:
        port = int(b.get("port") if b.get("port") not in (None, "") else 8161) + int(b.get("port_offset") or 0)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("artemis_jolokia_endpoint: port and port_offset must be integers (%s)" % exc) from exc
    tls = _truthy(b.get("tls"))
    scheme = "https" if tls else "http"
    netloc = "%s:%d" % ("[%s]" % host if ":" in host and not host.startswith("[") else host, port)
    path = "/" + str(b.get("path") or "/console/jolokia").strip("/")
    return {"scheme": scheme, "host": host, "port": port, "url": "%s://%s%s" % (scheme, netloc, path),
            "origin": "%s://%s" % (scheme, netloc), "tls": tls}


# The web server's <binding> start tag in etc/bootstrap.xml. `artemis create --ssl-key-password` writes the password
# unescaped, so the tag ends where the next <app> or </binding> begins, not at the first '>'.
_BINDING_TAG = re.compile(r"<binding\b(?P<attrs>.*?)/?>(?=\s*(?:<app\b|</binding>|<!--))", re.S)
_ATTR = re.compile(r'(?P<key>[A-Za-z_][\w.-]*)\s*=\s*"(?P<value>.*?)"(?=\s+[A-Za-z_][\w.-]*\s*=|\s*/?\s*$)', re.S)
_TLS_ATTRS = ("keyStorePath", "keyStorePassword", "keyStoreType")


def _xml_attr(value):
    return (str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"))


def artemis_web_binding(bootstrap_xml, tls=None):
    """``etc/bootstrap.xml`` text with its (first) web ``<binding>`` serving https with the given keystore, or http.

    ``tls``: ``enabled`` (bool), ``keystore_path`` (on the broker host), ``keystore_password`` (as it goes into the
    file: plain, or an ``ENC(...)`` mask), ``keystore_type`` (optional, e.g. ``PKCS12``). Only the ``uri`` scheme and
    the ``keyStorePath``/``keyStorePassword``/``keyStoreType`` attributes change; host, port, apps and every other
    attribute stay as ``artemis create`` wrote them. '' stays ''."""
    text = bootstrap_xml or ""
    if not text:
        return text
    t = dict(tls or {})
    enabled = _truthy(t.get("enabled"))
    m = _BINDING_TAG.search(text)
    if not m:
        raise AnsibleFilterError("artemis_web_binding: no <binding> of the web server in bootstrap.xml")
    attrs = [(a.group("key"), a.group("value")) for a in _ATTR.finditer(m.group("attrs").strip())]
    known = dict(attrs)
    uri = known.get("uri")
    if not uri or "://" not in uri:
        raise AnsibleFilterError("artemis_web_binding: the <binding> in bootstrap.xml has no uri attribute")
    wanted = {"uri": ("https" if enabled else "http") + "://" + uri.split("://", 1)[1]}
    if enabled:
        if not t.get("keystore_path") or t.get("keystore_password") in (None, ""):
            raise AnsibleFilterError("artemis_web_binding: https needs keystore_path and keystore_password")
        wanted.update(keyStorePath=str(t["keystore_path"]), keyStorePassword=str(t["keystore_password"]))
        if t.get("keystore_type"):
            wanted["keyStoreType"] = str(t["keystore_type"])
    out = []
    for key, value in attrs:
        if key in wanted:
            out.append((key, wanted.pop(key)))
        elif key not in _TLS_ATTRS:
            out.append((key, value))
    out += [(k, wanted[k]) for k in ("uri", *_TLS_ATTRS) if k in wanted]
    # values read from the file are already escaped (except a password create wrote raw): escape only ours
    ours = {"uri"} | set(_TLS_ATTRS)
    rendered = " ".join('%s="%s"' % (k, _xml_attr(v) if k in ours else v) for k, v in out)
    closing = "/>" if m.group(0).endswith("/>") else ">"
    return text[:m.start()] + "<binding " + rendered + closing + text[m.end():]


class FilterModule:
    def filters(self):
        return {
            "artemis_password_hash": artemis_password_hash,
            "artemis_password_verify": artemis_password_verify,
            "artemis_mask": artemis_mask,
            "artemis_unmask": artemis_unmask,
            "artemis_without_secrets": artemis_without_secrets,
            "artemis_version_from_name": artemis_version_from_name,
            "artemis_home_dir": artemis_home_dir,
            "artemis_merge_security": artemis_merge_security,
            "artemis_roles_map": artemis_roles_map,
            "artemis_acceptor_params": artemis_acceptor_params,
            "artemis_fence": artemis_fence,
            "artemis_create_tuning": artemis_create_tuning,
            "artemis_mirror_endpoints": artemis_mirror_endpoints,
            "artemis_mirror_grants": artemis_mirror_grants,
            "artemis_jolokia_endpoint": artemis_jolokia_endpoint,
            "artemis_web_binding": artemis_web_binding,
        }
