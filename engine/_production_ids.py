"""Productions and their stable ids.

A production is a record on its way to one interval of one consuming
computation, named by its destination and its production id (its
*identity*: ``consumer computation | 0x00 | interval u32 | production id``).
Production ids are derived, never random:

- from a record: ``H(computation, input record id, index)``, the same on every
  replay of that record (what weak productions need);
- from a timer: ``H(computation, key, n, index)`` for the key's ``n``-th timer
  fire that produced anything, ``n`` being counted per key and committed with
  the fire. It depends on the key's own history only, not on how keys are
  split into intervals or fires into batches, so a backfill that fires the
  same timers names their outputs as the nodes did.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from engine._scope import RESERVED_PREFIX
from millrace.wire.v1 import record_pb2
from statestore import Transaction

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


def record_id_prefix(computation: str) -> bytes:
    """What every production id caused by one of ``computation``'s records starts from;
    append the input record id to get the cause of its productions (the ``index``-th
    is named ``xxh3_128(cause | index u32)``, natively: ``engine/_routing.py``)."""
    return b"r" + computation.encode() + b"\x00"


def timer_id_prefix(computation: str, key: bytes, fire: int) -> bytes:
    """The cause of the productions of ``key``'s ``fire``-th producing timer fire."""
    return b"t" + computation.encode() + b"\x00" + _U32.pack(len(key)) + key + _U64.pack(fire)


TIMER_FIRES_PREFIX = RESERVED_PREFIX + b"timer-fires/"
"""Reserved state (no user state key starts with it): per key, how many of its
timer fires produced anything (8 bytes, big-endian), the ``fire`` of
:func:`timer_id_prefix`."""


def next_timer_cause(txn: Transaction, computation: str, key: bytes) -> bytes:
    """The cause of a producing timer fire of ``key``: counts the fire in ``txn`` (it
    commits with the fire's effects) and names it by that count."""
    return next_timer_causes(txn, computation, [key])[0]


def next_timer_causes(txn: Transaction, computation: str, keys: Sequence[bytes]) -> list[bytes]:
    """:func:`next_timer_cause` for producing fires of ``keys`` in that order (a key may
    come more than once), with the counters read in one store read."""
    counters = [TIMER_FIRES_PREFIX + key for key in keys]
    fires: dict[bytes, int] = {}
    causes = []
    for key, counter, raw in zip(keys, counters, txn.get_many(counters), strict=True):
        if counter not in fires:
            fires[counter] = _U64.unpack(raw)[0] if raw else 0
        fires[counter] += 1
        causes.append(timer_id_prefix(computation, key, fires[counter]))
    txn.write_many((counter, _U64.pack(fire)) for counter, fire in fires.items())
    return causes


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
