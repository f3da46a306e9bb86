"""Productions and their stable ids.

A production is a record on its way to one interval of one consuming
computation, named by its destination and its production id (its
*identity*: ``consumer computation | 0x00 | interval u32 | production id``).
Production ids are derived, never random:

- from a record: ``H(computation, input record id, index)``, the same on every
  replay of that record (what weak productions need);
- from a timer's fire: ``H(computation, timer, setter, index)``, the timer being
  its domain, key, tag and time. An event-time timer set for after every time the
  store's timers fired up to (:data:`FIRED_WATERMARK`) has no setter: it fires at
  its time once, as the watermark never goes back. Any other keeps its setter in the
  store: the record whose processing set it (``engine/_scope.py`` record_setter) or
  the fire that set it (hashed); a setter sets a timer at a time once (a record is
  processed once, a fire happens once). So no two fires share a name, and no counter
  per key is kept. Names do not depend on how keys are split into intervals or work
  into batches, and, for timers set ahead of the watermark, not on arrival order.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from xxhash import xxh3_128_digest

from millrace.dataplane import timer_fire_causes
from millrace.engine._scope import RESERVED_PREFIX
from millrace.statestore import Timer
from millrace.wire.v1 import record_pb2

_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")


def record_id_prefix(computation: str) -> bytes:
    """What every production id caused by one of ``computation``'s records starts from;
    append the input record id to get the cause of its productions (the ``index``-th
    is named ``xxh3_128(cause | index u32)``, natively: ``engine/_routing.py``)."""
    return b"r" + computation.encode() + b"\x00"


def timer_fire_cause(computation: str, timer: Timer) -> bytes:
    """The cause of the productions of ``timer``'s fire (``timer.cause`` its setter; a
    timer of a store of format 2 has none, and fires at most once: any timer set since
    has a setter): ``f | computation | 0x00 | domain u8 | len(key) u32 | key |
    len(tag) u32 | tag | time i64 | setter``, made natively (a round's in one call:
    :func:`~millrace.dataplane.timer_fire_causes`)."""
    cause: bytes = timer_fire_causes(computation, [timer])[0]
    return cause


def fire_setter(fire_cause: bytes) -> bytes:
    """What a timer set by the fire of cause ``fire_cause`` keeps as its setter (hashed:
    a chain of timers setting timers keeps setters of one size)."""
    return b"t" + xxh3_128_digest(fire_cause)


FIRED_WATERMARK = "fired-watermark"
"""Store meta (int64, big-endian): the highest time up to which event-time timers fired
(the input watermark of that round minus one). An event-time timer set for after it has
never fired at its time, and fires there once (the watermark never goes back): its fire
is named by the timer alone."""


def decode_fired_watermark(raw: bytes | None) -> int | None:
    """The :data:`FIRED_WATERMARK` meta's value."""
    return None if raw is None else int(_I64.unpack(raw)[0])


def encode_fired_watermark(watermark: int) -> bytes:
    """Inverse of :func:`decode_fired_watermark`."""
    return _I64.pack(watermark)


RETIRED_TIMER_FIRES_PREFIX = RESERVED_PREFIX + b"timer-fires/"
"""Reserved state of stores from before setters: per key, how many of its timer fires
produced anything, which named them. Nothing reads them; the upkeep deletes them."""


def outbox_key_prefix(consumer: str, interval: int) -> bytes:
    """The start of the outbox key of every production to ``consumer``'s ``interval``."""
    return consumer.encode() + b"\x00" + _U32.pack(interval)


def outbox_key(consumer: str, interval: int, production_id: bytes) -> bytes:
    """Where a production to ``consumer``'s ``interval`` waits for its ack."""
    return outbox_key_prefix(consumer, interval) + production_id


def split_outbox_key(key: bytes) -> tuple[str, int, bytes]:
    """Inverse of :func:`outbox_key`."""
    name, _, rest = key.partition(b"\x00")
    return name.decode(), _U32.unpack_from(rest)[0], rest[4:]


class Production(NamedTuple):
    """A record on its way to one interval of one consuming computation.

    Build with :meth:`to`, which derives ``outbox_key``.
    """

    consumer: str
    interval: int
    record: record_pb2.Record
    outbox_key: bytes
    """Its identity in the producer's outbox: destination and production id."""

    @classmethod
    def to(cls, consumer: str, interval: int, record: record_pb2.Record) -> Production:
        """A production of ``record`` for ``consumer``'s ``interval``."""
        return cls(consumer, interval, record, outbox_key(consumer, interval, record.record_id))
