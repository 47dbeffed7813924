"""Passwords and the properties realm, compatible with Artemis' `DefaultSensitiveStringCodec` and JAAS
`PropertiesLoginModule`.

Formats (read from the Artemis source, re-implemented here):
- one-way (what `artemis create` / `artemis user add` store in artemis-users.properties):
  `ENC(<iterations>:<salt hex>:<hash hex>)`, PBKDF2WithHmacSHA1, 32-byte salt, 64-byte key, 1024 iterations,
  upper-case hex.
- two-way (passwords masked in broker.xml, e.g. `<amqp-connection password="ENC(...)">`): Blowfish/ECB/PKCS5 with the
  default key `clusterpassword`, cipher text printed as a signed Java BigInteger in hex (may start with `-`).
- anything not wrapped in ENC(...) is plain text.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from pathlib import Path

DEFAULT_TWO_WAY_KEY = b"clusterpassword"
ONE_WAY_ITERATIONS = 1024
_SALT_LEN = 32
_KEY_LEN = 64


def is_masked(value: str) -> bool:
    return value.startswith("ENC(") and value.endswith(")")


def unwrap(value: str) -> str:
    return value[4:-1] if is_masked(value) else value


# --- one-way (PBKDF2) -------------------------------------------------------------------------------------------
def hash_password(plain: str, iterations: int = ONE_WAY_ITERATIONS, salt: bytes | None = None) -> str:
    salt = os.urandom(_SALT_LEN) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha1", plain.encode("utf-8"), salt, iterations, _KEY_LEN)
    return f"ENC({iterations}:{salt.hex().upper()}:{digest.hex().upper()})"


def _verify_one_way(plain: str, inner: str) -> bool:
    parts = inner.split(":")
    if len(parts) != 3:
        return False
    try:
        iterations = int(parts[0])
        salt = bytes.fromhex(parts[1])
        expected = bytes.fromhex(parts[2])
    except ValueError:
        return False
    got = hashlib.pbkdf2_hmac("sha1", plain.encode("utf-8"), salt, iterations, len(expected))
    return hmac.compare_digest(got, expected)


# --- two-way (Blowfish, default key) ----------------------------------------------------------------------------
def _blowfish(encrypt: bool, data: bytes, key: bytes) -> bytes:
    # cryptography keeps Blowfish in its "decrepit" module; it ships with ansible-core's dependencies.
    from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, modes

    cipher = Cipher(Blowfish(key), modes.ECB())
    if encrypt:
        padder = padding.PKCS7(64).padder()
        padded = padder.update(data) + padder.finalize()
        enc = cipher.encryptor()
        return enc.update(padded) + enc.finalize()
    dec = cipher.decryptor()
    padded = dec.update(data) + dec.finalize()
    unpadder = padding.PKCS7(64).unpadder()
    return unpadder.update(padded) + unpadder.finalize()


def _java_biginteger_bytes(n: int) -> bytes:
    # BigInteger.toByteArray(): minimal two's complement, sign bit included.
    bits = (~n).bit_length() if n < 0 else n.bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def encode_two_way(plain: str, key: bytes = DEFAULT_TWO_WAY_KEY) -> str:
    """The masked form `ENC(<hex>)` Artemis' default codec decodes."""
    n = int.from_bytes(_blowfish(True, plain.encode("utf-8"), key), "big", signed=True)
    text = format(n, "x") if n >= 0 else "-" + format(-n, "x")
    return f"ENC({text})"


def decode_two_way(masked: str, key: bytes = DEFAULT_TWO_WAY_KEY) -> str:
    """Plain text of `ENC(<hex>)` (or of the bare hex). Raises ValueError when it is not a two-way value."""
    n = int(unwrap(masked), 16)
    data = _java_biginteger_bytes(n)
    if len(data) % 8:
        # Java pads with leading zero bytes to the block size; do the same.
        data = bytes(8 - len(data) % 8) + data
    try:
        return _blowfish(False, data, key).decode("utf-8")
    except Exception as exc:  # bad padding = not encrypted with this key
        raise ValueError("Password must be encrypted with the default codec") from exc


def reveal(value: str | None) -> str | None:
    """broker.xml attribute value -> plain text (ENC(...) decoded with the default two-way codec)."""
    if value is None or not is_masked(value):
        return value
    return decode_two_way(value)


def verify_password(plain: str, stored: str) -> bool:
    if not is_masked(stored):
        return hmac.compare_digest(plain.encode("utf-8"), stored.encode("utf-8"))
    inner = unwrap(stored)
    if inner.count(":") == 2:
        return _verify_one_way(plain, inner)
    try:
        return hmac.compare_digest(decode_two_way(inner).encode("utf-8"), plain.encode("utf-8"))
    except ValueError:
        return False


# --- properties files --------------------------------------------------------------------------------------------
def read_properties(path: Path) -> dict[str, str]:
    """Java-properties subset used by the JAAS files: `key = value`, `key=value`, `key: value`, # and ! comments,
    backslash line continuation."""
    props: dict[str, str] = {}
    if not path.exists():
        return props
    logical = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        cut = min((i for i in (logical.find("="), logical.find(":")) if i >= 0), default=-1)
        if cut < 0:
            props[logical.strip()] = ""
        else:
            props[logical[:cut].strip()] = logical[cut + 1 :].strip()
        logical = ""
    return props


def roles_by_user(roles_props: dict[str, str]) -> dict[str, set[str]]:
    result: dict[str, set[str]] = {}
    for role, users in roles_props.items():
        for user in (u.strip() for u in users.split(",")):
            if user:
                result.setdefault(user, set()).add(role)
    return result


class PropertiesRealm:
    """JAAS PropertiesLoginModule equivalent (`reload=true`: files are re-read when they change)."""

    def __init__(self, users_file: str | Path, roles_file: str | Path):
        self.users_file = Path(users_file)
        self.roles_file = Path(roles_file)
        self._lock = threading.Lock()
        self._stamp: tuple[float, float] | None = None
        self._users: dict[str, str] = {}
        self._roles: dict[str, set[str]] = {}

    @classmethod
    def for_instance(cls, instance_dir: str | Path) -> PropertiesRealm:
        etc = Path(instance_dir) / "etc"
        return cls(etc / "artemis-users.properties", etc / "artemis-roles.properties")

    def _mtime(self, path: Path) -> float:
        try:
            return path.stat().st_mtime
        except FileNotFoundError:
            return -1.0

    def _refresh(self) -> None:
        stamp = (self._mtime(self.users_file), self._mtime(self.roles_file))
        if stamp != self._stamp:
            self._users = read_properties(self.users_file)
            self._roles = roles_by_user(read_properties(self.roles_file))
            self._stamp = stamp

    def authenticate(self, user: str, password: str) -> frozenset[str] | None:
        with self._lock:
            self._refresh()
            stored = self._users.get(user)
            roles = self._roles.get(user, set())
        if stored is None or not verify_password(password, stored):
            return None
        return frozenset(roles)

    def users(self) -> dict[str, tuple[str, frozenset[str]]]:
        with self._lock:
            self._refresh()
            return {u: (h, frozenset(self._roles.get(u, set()))) for u, h in self._users.items()}
