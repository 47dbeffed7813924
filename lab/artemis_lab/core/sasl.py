"""Server side of AMQP SASL (PLAIN, ANONYMOUS) in front of proton's engine.

proton 0.40 without Cyrus cannot authenticate PLAIN as a server, so the lab answers the SASL exchange itself
and hands every byte after the sasl-outcome to a `Transport(Transport.SERVER)` that has no SASL layer.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from proton import Data

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"

SASL_MECHANISMS = 0x40
SASL_INIT = 0x41
SASL_OUTCOME = 0x44

OUTCOME_OK = 0
OUTCOME_AUTH = 1

# Authenticator: (mechanism, user, password) -> (ok, user name to remember, roles)
Authenticator = Callable[[str, str | None, str | None], "tuple[bool, str | None, frozenset[str]]"]


def _frame(body: bytes) -> bytes:
    # SASL frame header: size, doff=2 (8-byte header), type=1 (SASL), channel 0
    return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body


def encode_mechanisms(mechs: list[str]) -> bytes:
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(SASL_MECHANISMS)
    d.put_list()
    d.enter()
    d.put_array(False, Data.SYMBOL)
    d.enter()
    for m in mechs:
        d.put_symbol(m)
    d.exit()
    d.exit()
    d.exit()
    return _frame(bytes(d.encode()))


def encode_outcome(code: int) -> bytes:
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(SASL_OUTCOME)
    d.put_list()
    d.enter()
    d.put_ubyte(code)
    d.exit()
    d.exit()
    return _frame(bytes(d.encode()))


def decode_frame_body(body: bytes) -> tuple[int, list]:
    """(descriptor code, list of fields) of one SASL performative."""
    d = Data()
    d.decode(body)
    d.rewind()
    d.next()
    value = d.get_object()
    descriptor = value.descriptor
    # binaries come back as memoryviews into `d`: copy them before `d` is freed
    fields = [bytes(f) if isinstance(f, memoryview) else f for f in (value.value or [])]
    return int(descriptor), fields


def parse_plain(response: bytes) -> tuple[str, str] | None:
    # PLAIN initial response: authzid \0 authcid \0 password
    parts = bytes(response).split(b"\0")
    if len(parts) != 3:
        return None
    return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")


class SaslServer:
    """Feed it the raw client bytes; it returns bytes to send and, once done, the bytes meant for proton."""

    def __init__(self, allow_anonymous: bool, authenticate: Authenticator):
        self.allow_anonymous = allow_anonymous
        self.authenticate = authenticate
        self.buf = b""
        self.state = "header"  # header -> init -> done | failed | plain (client skipped SASL)
        self.user: str | None = None
        self.roles: frozenset[str] = frozenset()

    def mechanisms(self) -> list[str]:
        return ["PLAIN", "ANONYMOUS"] if self.allow_anonymous else ["PLAIN"]

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """Returns (bytes to send to the client, bytes for the AMQP transport once done)."""
        self.buf += data
        out = b""
        if self.state == "header":
            if len(self.buf) < 8:
                return out, b""
            header, self.buf = self.buf[:8], self.buf[8:]
            if header == SASL_HEADER:
                out += SASL_HEADER + encode_mechanisms(self.mechanisms())
                self.state = "init"
            elif header == AMQP_HEADER and self.allow_anonymous:
                # No SASL layer at all: only acceptable where anonymous access is allowed.
                self.state = "done"
                rest, self.buf = header + self.buf, b""
                return out, rest
            else:
                self.state = "failed"
                return SASL_HEADER, b""
        if self.state == "init":
            if len(self.buf) < 8:
                return out, b""
            size, doff, ftype, _channel = struct.unpack(">IBBH", self.buf[:8])
            if len(self.buf) < size:
                return out, b""
            frame, self.buf = self.buf[:size], self.buf[size:]
            if ftype != 1:
                self.state = "failed"
                return out, b""
            code, fields = decode_frame_body(frame[doff * 4 :])
            if code != SASL_INIT:
                self.state = "failed"
                return out + encode_outcome(OUTCOME_AUTH), b""
            mech = str(fields[0]) if fields else ""
            response = fields[1] if len(fields) > 1 and fields[1] is not None else b""
            ok = False
            if mech == "PLAIN":
                creds = parse_plain(response)
                if creds is not None:
                    ok, self.user, self.roles = self.authenticate("PLAIN", creds[0], creds[1])
            elif mech == "ANONYMOUS" and self.allow_anonymous:
                ok, self.user, self.roles = self.authenticate("ANONYMOUS", None, None)
            out += encode_outcome(OUTCOME_OK if ok else OUTCOME_AUTH)
            if not ok:
                self.state = "failed"
                return out, b""
            self.state = "done"
            rest, self.buf = self.buf, b""
            return out, rest
        return out, b""
