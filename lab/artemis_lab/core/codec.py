"""AMQP message sections: read what routing needs from the encoded bytes, rewrite only what must change.

Messages are stored encoded, exactly as the producer sent them; only the header (delivery-count on
redelivery) and the delivery annotations (mirror routing data) are ever rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def scan(raw: bytes, want_annotations: bool = False) -> Meta:
    m = Meta()
    stop = MESSAGE_ANNOTATIONS if want_annotations else PROPERTIES
    for code, start, end, d in _sections(raw, stop if not want_annotations else PROPERTIES):
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
            if len(fields) > 7 and fields[7] is not None:
                m.creation_time = int(float(fields[7]) * 1000) if isinstance(fields[7], float) else int(fields[7])
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
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(HEADER)
    d.put_list()
    d.enter()
    d.put_bool(durable)
    d.put_ubyte(priority)
    d.put_null()
    d.put_bool(False)
    d.put_uint(delivery_count)
    d.exit()
    d.exit()
    return bytes(d.encode())


def encode_map_section(code: int, values: dict) -> bytes:
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


def without_delivery_annotations(raw: bytes, meta: Meta) -> bytes:
    if meta.da_start < 0:
        return raw
    return raw[: meta.da_start] + raw[meta.da_end :]


def read_delivery_annotations(raw: bytes, meta: Meta) -> dict:
    if meta.da_start < 0:
        return {}
    d = Data()
    d.decode(raw[meta.da_start : meta.da_end])
    d.rewind()
    d.next()
    return {str(k): bytes(v) if isinstance(v, memoryview) else v for k, v in (d.get_object().value or {}).items()}


def sym(name: str) -> symbol:
    return symbol(name)
