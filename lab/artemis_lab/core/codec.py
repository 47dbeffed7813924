"""AMQP message sections: read what routing needs from the encoded bytes, rewrite only what must change.

Messages are stored encoded, exactly as the producer sent them; only the header (delivery-count on
redelivery) and the delivery annotations (mirror routing data) are ever rewritten.
"""

from __future__ import annotations

import functools
import struct
import uuid
from dataclasses import dataclass, replace
from typing import Any

from proton import Data, Described, symbol, ulong

HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74


@dataclass
class Meta:
    durable: bool = False
    priority: int = 4
    to: str | None = None
    creation_time: int = 0  # ms epoch; 0 when the producer set none (as Artemis reports it)
    user_id: str | None = None
    message_id: Any = None
    header_end: int = 0  # offset after the header section (0 if none)
    da_start: int = -1  # delivery annotations span, -1 when absent
    da_end: int = -1
    ma_start: int = -1  # message annotations span, -1 when absent
    ma_end: int = -1
    annotations: dict | None = None  # message annotations, only decoded when asked


def _sections(raw: bytes, stop_after: int):
    d = Data()
    pos = 0
    n = len(raw)
    while pos < n:
        if raw[pos] != 0 or raw[pos + 1] != 0x53:
            return  # not a small-ulong descriptor: a section form we do not inspect
        code = raw[pos + 2]
        d.clear()
        used = d.decode(raw[pos:])
        yield code, pos, pos + used, d
        pos += used
        if code >= stop_after:
            return


_FIXED = {0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0, 0x50: 1, 0x51: 1, 0x52: 1, 0x53: 1, 0x54: 1,
          0x55: 1, 0x56: 1, 0x60: 2, 0x61: 2, 0x70: 4, 0x71: 4, 0x72: 4, 0x73: 4, 0x74: 4, 0x80: 8, 0x81: 8,
          0x82: 8, 0x83: 8, 0x84: 8, 0x94: 16, 0x98: 16}
_UNPACK_LEN = struct.Struct(">I").unpack_from
_UNPACK_Q = struct.Struct(">q").unpack_from
_UNPACK_QU = struct.Struct(">Q").unpack_from
_UNPACK_I = struct.Struct(">i").unpack_from


class _Unknown(Exception):
    """An encoding the fast reader does not handle: use proton's decoder instead."""


def _skip(raw: bytes, pos: int) -> int:
    """Offset after the AMQP value at `pos`."""
    code = raw[pos]
    if code == 0x00:  # described: descriptor, then value
        return _skip(raw, _skip(raw, pos + 1))
    width = _FIXED.get(code)
    if width is not None:
        return pos + 1 + width
    hi = code & 0xF0
    if hi in (0xA0, 0xC0, 0xE0):
        return pos + 2 + raw[pos + 1]
    if hi in (0xB0, 0xD0, 0xF0):
        return pos + 5 + _UNPACK_LEN(raw, pos + 1)[0]
    raise _Unknown(code)


def _value(raw: bytes, pos: int):
    """(python value for the few types routing needs, next offset); other types come back as None."""
    code = raw[pos]
    if code == 0x40:
        return None, pos + 1
    if code == 0x41:
        return True, pos + 1
    if code == 0x42:
        return False, pos + 1
    if code == 0x56:
        return raw[pos + 1] != 0, pos + 2
    if code == 0x50:
        return raw[pos + 1], pos + 2
    if code == 0x83:
        return _UNPACK_Q(raw, pos + 1)[0], pos + 9
    if code in (0xA1, 0xA3):
        n = raw[pos + 1]
        return raw[pos + 2 : pos + 2 + n].decode("utf-8", "replace"), pos + 2 + n
    if code in (0xB1, 0xB3):
        n = _UNPACK_LEN(raw, pos + 1)[0]
        return raw[pos + 5 : pos + 5 + n].decode("utf-8", "replace"), pos + 5 + n
    if code == 0xA0:
        n = raw[pos + 1]
        return bytes(raw[pos + 2 : pos + 2 + n]), pos + 2 + n
    if code == 0x80:
        return _UNPACK_QU(raw, pos + 1)[0], pos + 9
    if code == 0x53:
        return raw[pos + 1], pos + 2
    if code == 0x44:
        return 0, pos + 1
    if code == 0x98:
        return uuid.UUID(bytes=bytes(raw[pos + 1 : pos + 17])), pos + 17
    if code == 0x81:
        return _UNPACK_Q(raw, pos + 1)[0], pos + 9
    if code == 0x55 or code == 0x54:
        v = raw[pos + 1]
        return (v - 256 if v > 127 else v), pos + 2
    if code == 0x71:
        return _UNPACK_I(raw, pos + 1)[0], pos + 5
    if code == 0x52:
        return raw[pos + 1], pos + 2
    if code == 0x70:
        return _UNPACK_LEN(raw, pos + 1)[0], pos + 5
    if code == 0x43:
        return 0, pos + 1
    return None, _skip(raw, pos)


def _list(raw: bytes, pos: int, wanted: int) -> list:
    """The first `wanted` fields of the list at `pos` (fewer if the list is shorter)."""
    code = raw[pos]
    if code == 0x45:
        return []
    if code == 0xC0:
        count, pos = raw[pos + 2], pos + 3
    elif code == 0xD0:
        count, pos = _UNPACK_LEN(raw, pos + 5)[0], pos + 9
    else:
        raise _Unknown(code)
    out = []
    for _ in range(min(count, wanted)):
        value, pos = _value(raw, pos)
        out.append(value)
    return out


def _fast_scan(raw: bytes) -> Meta:
    m = Meta()
    pos = 0
    n = len(raw)
    while pos < n:
        if raw[pos] != 0 or raw[pos + 1] != 0x53:
            raise _Unknown(raw[pos])
        code = raw[pos + 2]
        end = _skip(raw, pos + 3)
        if code == HEADER:
            m.header_end = end
            fields = _list(raw, pos + 3, 2)
            if fields and fields[0]:
                m.durable = True
            if len(fields) > 1 and fields[1] is not None:
                m.priority = int(fields[1])
        elif code == DELIVERY_ANNOTATIONS:
            m.da_start, m.da_end = pos, end
        elif code == MESSAGE_ANNOTATIONS:
            m.ma_start, m.ma_end = pos, end
        elif code == PROPERTIES:
            fields = _list(raw, pos + 3, 10)
            if len(fields) > 0 and fields[0] is not None:
                m.message_id = fields[0]
            if len(fields) > 1 and isinstance(fields[1], bytes):
                m.user_id = fields[1].decode("utf-8", "replace")
            if len(fields) > 2 and isinstance(fields[2], str):
                m.to = fields[2]
            if len(fields) > 9 and isinstance(fields[9], int):  # creation-time is the 10th field
                m.creation_time = fields[9]
            return m
        elif code > PROPERTIES:
            return m
        pos = end
    return m


def scan(raw: bytes, want_annotations: bool = False) -> Meta:
    try:
        m = _fast_scan(raw)
        if want_annotations:
            m.annotations = _map(raw, m.ma_start) if m.ma_start >= 0 else {}
        return m
    except (_Unknown, IndexError, struct.error, UnicodeDecodeError):
        pass  # unusual encoding: proton's decoder below handles everything
    return _slow_scan(raw, want_annotations)


def _map(raw: bytes, section: int) -> dict:
    """The map of the annotations section starting at `section` (keys as str)."""
    pos = section + 3
    code = raw[pos]
    if code == 0xC1:
        count, pos = raw[pos + 2], pos + 3
    elif code == 0xD1:
        count, pos = _UNPACK_LEN(raw, pos + 5)[0], pos + 9
    else:
        raise _Unknown(code)
    out = {}
    for _ in range(count // 2):
        key, pos = _value(raw, pos)
        start = pos
        value, pos = _value(raw, pos)
        if value is None and raw[start] != 0x40:
            raise _Unknown(raw[start])  # a value type the fast reader does not decode
        out[key] = value
    return out


def body_value(raw: bytes) -> Any:
    """The amqp-value body (mirror control events carry a string or a long)."""
    try:
        pos = 0
        while pos < len(raw):
            code = raw[pos + 2]
            if code == 0x77:
                value, _ = _value(raw, pos + 3)
                if value is not None or raw[pos + 3] == 0x40:
                    return value
                break
            pos = _skip(raw, pos + 3)
    except (_Unknown, IndexError, struct.error):
        pass
    from proton import Message

    msg = Message()
    msg.decode(raw)
    return msg.body


def _slow_scan(raw: bytes, want_annotations: bool = False) -> Meta:
    m = Meta()
    for code, start, end, d in _sections(raw, PROPERTIES):
        if code == HEADER:
            m.header_end = end
            d.rewind()
            d.next()
            fields = d.get_object().value or []
            if len(fields) > 0 and fields[0]:
                m.durable = True
            if len(fields) > 1 and fields[1] is not None:
                m.priority = int(fields[1])
        elif code == DELIVERY_ANNOTATIONS:
            m.da_start, m.da_end = start, end
        elif code == MESSAGE_ANNOTATIONS:
            if want_annotations:
                d.rewind()
                d.next()
                m.annotations = {k: bytes(v) if isinstance(v, memoryview) else v
                                 for k, v in (d.get_object().value or {}).items()}
        elif code == PROPERTIES:
            d.rewind()
            d.next()
            fields = d.get_object().value or []
            if len(fields) > 0:
                m.message_id = bytes(fields[0]) if isinstance(fields[0], memoryview) else fields[0]
            if len(fields) > 1 and fields[1] is not None:
                m.user_id = bytes(fields[1]).decode("utf-8", "replace")
            if len(fields) > 2 and fields[2] is not None:
                m.to = str(fields[2])
            if len(fields) > 9 and fields[9] is not None:  # creation-time is the 10th field
                m.creation_time = int(fields[9])
            return m
    return m


def application_properties(raw: bytes) -> dict:
    for code, _s, _e, d in _sections(raw, APPLICATION_PROPERTIES):
        if code == APPLICATION_PROPERTIES:
            d.rewind()
            d.next()
            # binaries are memoryviews into `d`: copy them before `d` goes away
            return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in (d.get_object().value or {}).items()}
    return {}


def encode_header(durable: bool, priority: int, delivery_count: int) -> bytes:
    """Header section: durable, priority, ttl (none), first-acquirer false, delivery-count."""
    body = (b"\x41" if durable else b"\x42") + b"\x50" + bytes([priority & 0xFF]) + b"\x40\x42\x70" + \
        struct.pack(">I", delivery_count)
    return b"\x00\x53\x70\xc0" + bytes([len(body) + 1, 5]) + body


_PACK_LEN = struct.Struct(">I").pack
_PACK_Q = struct.Struct(">q").pack


def _enc(value: Any) -> bytes:
    if value is None:
        return b"\x40"
    if isinstance(value, bool):
        return b"\x41" if value else b"\x42"
    if isinstance(value, symbol):
        data = value.encode("ascii")
        return (b"\xa3" + bytes([len(data)]) if len(data) < 256 else b"\xb3" + _PACK_LEN(len(data))) + data
    if isinstance(value, str):
        data = value.encode("utf-8")
        return (b"\xa1" + bytes([len(data)]) if len(data) < 256 else b"\xb1" + _PACK_LEN(len(data))) + data
    if isinstance(value, int):
        return b"\x81" + _PACK_Q(value)
    raise _Unknown(type(value))


@functools.lru_cache(maxsize=1024)
def _symbol_key(key: str) -> bytes:
    # annotation keys are a handful of constants: encode each once (a mirror target re-encodes per event)
    return _enc(symbol(key))


def encode_map_section(code: int, values: dict) -> bytes:
    """A described map section (annotations): symbol keys, simple values."""
    try:
        body = b"".join(_symbol_key(k) + (b"\x81" + _PACK_Q(v) if type(v) is int else _enc(v))
                        for k, v in values.items())
        count = 2 * len(values)
        if len(body) < 255 and count < 256:
            head = b"\xc1" + bytes([len(body) + 1, count])
        else:
            head = b"\xd1" + _PACK_LEN(len(body) + 4) + _PACK_LEN(count)
        return b"\x00\x53" + bytes([code]) + head + body
    except _Unknown:
        pass
    d = Data()
    d.put_object(Described(ulong(code), values))
    return bytes(d.encode())


def with_delivery_count(raw: bytes, meta: Meta, delivery_count: int) -> bytes:
    if delivery_count == 0:
        return raw
    return encode_header(meta.durable, meta.priority, delivery_count) + raw[meta.header_end :]


def with_delivery_annotations(raw: bytes, meta: Meta, annotations: dict) -> bytes:
    """Replace (or add) the delivery annotations; every other section stays byte-exact."""
    head = raw[: meta.header_end]
    rest = raw[meta.da_end :] if meta.da_start >= 0 else raw[meta.header_end :]
    return head + encode_map_section(DELIVERY_ANNOTATIONS, annotations) + rest


def meta_without_delivery_annotations(meta: Meta) -> Meta:
    """The Meta of ``without_delivery_annotations(raw, meta)`` without scanning it again: the sections after the
    delivery annotations (AMQP fixes their order) move up by the removed length."""
    if meta.da_start < 0:
        return replace(meta, annotations=None)
    cut = meta.da_end - meta.da_start
    ma_start, ma_end = (meta.ma_start - cut, meta.ma_end - cut) if meta.ma_start >= 0 else (-1, -1)
    return replace(meta, da_start=-1, da_end=-1, ma_start=ma_start, ma_end=ma_end, annotations=None)


def without_delivery_annotations(raw: bytes, meta: Meta) -> bytes:
    if meta.da_start < 0:
        return raw
    return raw[: meta.da_start] + raw[meta.da_end :]


def read_delivery_annotations(raw: bytes, meta: Meta) -> dict:
    if meta.da_start < 0:
        return {}
    try:
        return _map(raw, meta.da_start)
    except (_Unknown, IndexError, struct.error, UnicodeDecodeError):
        pass
    d = Data()
    d.decode(raw[meta.da_start : meta.da_end])
    d.rewind()
    d.next()
    return {str(k): bytes(v) if isinstance(v, memoryview) else v for k, v in (d.get_object().value or {}).items()}


def encode_event(annotations: dict, body: Any, durable: bool) -> bytes:
    """A mirror control message: header, message annotations, amqp-value body."""
    header = encode_header(durable, 4, 0)
    return header + encode_map_section(MESSAGE_ANNOTATIONS, annotations) + b"\x00\x53\x77" + _enc(body)


def sym(name: str) -> symbol:
    return symbol(name)
