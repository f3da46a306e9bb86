"""Which timers of an interval are due, and a timer's identity for failure bookkeeping."""

from __future__ import annotations

import struct

from millrace.statestore import StateStore
from millrace.statestore.types import TimeDomain, Timer

_I64 = struct.Struct(">q")
"""A timer's time in its identity: signed, as event times before 1970 are valid."""


def due_timers(
    store: StateStore, now_ms: int, input_watermark: int | None, limit: int
) -> list[Timer]:
    """Up to ``limit`` due timers in time order: processing-time timers at or before
    ``now_ms``, event-time timers the input watermark has passed (a timer at T fires
    once the low watermark is past T)."""
    due: list[Timer] = []
    # The cached earliest timer spares a RocksDB scan on the (usual) turn with none due.
    if _any_due(store, TimeDomain.PROCESSING_TIME, now_ms):
        due = store.due_timers(TimeDomain.PROCESSING_TIME, now_ms, limit)
    if input_watermark is not None and _any_due(store, TimeDomain.EVENT_TIME, input_watermark - 1):
        due += store.due_timers(TimeDomain.EVENT_TIME, input_watermark - 1, limit)
    due.sort(key=lambda t: t.time_ms)
    return due[:limit]


def _any_due(store: StateStore, domain: TimeDomain, up_to_ms: int) -> bool:
    earliest = store.next_timer_ms(domain)
    return earliest is not None and earliest <= up_to_ms


def timer_ident(timer: Timer) -> bytes:
    """A timer's identity for attempts and key holds (never equal to a record id)."""
    head = b"timer/%d/%s/" % (timer.domain, timer.tag.encode())
    return head + _I64.pack(timer.time_ms) + timer.key
