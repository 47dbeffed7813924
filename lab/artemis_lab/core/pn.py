"""Thin hot-path access to proton-c (via python-qpid-proton's cffi module `cproton`).

The per-message path (deliveries, dispositions, credit) uses raw pointers: proton's Python wrappers cost
several object creations per call, which dominates a Python broker's per-message time. Rare events (attach,
close) still go through the normal wrappers.
"""

from __future__ import annotations

from typing import Any

import cproton
from cproton import ffi, lib

PN_DELIVERY = lib.PN_DELIVERY
PN_LINK_FLOW = lib.PN_LINK_FLOW
ACCEPTED = lib.PN_ACCEPTED
RELEASED = lib.PN_RELEASED
MODIFIED = lib.PN_MODIFIED
REJECTED = lib.PN_REJECTED
NULL = ffi.NULL

collector_peek = lib.pn_collector_peek
collector_pop = lib.pn_collector_pop
event_type = lib.pn_event_type
event_delivery = lib.pn_event_delivery
event_link = lib.pn_event_link
delivery_link = lib.pn_delivery_link
delivery_partial = lib.pn_delivery_partial
delivery_aborted = lib.pn_delivery_aborted
delivery_pending = lib.pn_delivery_pending
delivery_settled = lib.pn_delivery_settled  # settled by the remote peer
delivery_remote_state = lib.pn_delivery_remote_state
delivery_update = lib.pn_delivery_update
delivery_settle = lib.pn_delivery_settle
link_is_receiver = lib.pn_link_is_receiver
link_credit = lib.pn_link_credit
link_flow = lib.pn_link_flow
link_advance = lib.pn_link_advance
link_get_drain = lib.pn_link_get_drain
link_drained = lib.pn_link_drained
incref = lib.pn_incref
delivery_remote = lib.pn_delivery_remote
disposition_is_failed = lib.pn_disposition_is_failed
decref = lib.pn_decref


def ptr(impl: Any) -> int:
    return int(ffi.cast("uintptr_t", impl))


def recv(link: Any, delivery: Any) -> bytes:
    """The whole (non-partial) message of `delivery`, then advance the link."""
    n = delivery_pending(delivery)
    buf = bytearray(n)
    got = lib.pn_link_recv(link, ffi.from_buffer(buf), n) if n else 0
    link_advance(link)
    if got == n:
        return bytes(buf)
    return bytes(buf[: max(got, 0)])


def send(link: Any, tag: bytes, data: bytes) -> Any:
    """Create a delivery with `tag`, write the whole message, advance; returns the delivery pointer."""
    d = cproton.pn_delivery(link, tag)
    lib.pn_link_send(link, ffi.from_buffer(data), len(data))
    link_advance(link)
    return d
