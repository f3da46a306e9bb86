"""Productions: their stable ids, the outbox frames that hold them, the oldest in flight.

A production is named by its destination and its production id (its
*identity*: ``consumer computation | 0x00 | interval u32 | production id``).
Productions are checkpointed in **outbox frames**, one RocksDB entry per
destination per commit rather than one per production: a frame's key is
``0x00 | frame sequence u64`` (increasing, so a restart resends frames in the
order they were made) and its value is a wire ``DeliveryBatch`` whose
``target`` is the destination and whose ``records`` are the productions. A
frame is deleted once every production in it is acknowledged. Production ids
are derived, never random:

- from a record: ``H(computation, input record id, index)``, the same on every
  replay of that record (what weak productions need);
- from a timer: ``H(computation, interval, timer-fire sequence, index)``, the
  sequence being committed with the fire.

Stores written before frames existed hold one entry per production
(key = identity, value = u64 sequence + ``Record``); they are still read.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from xxhash import xxh3_128_digest

from engine._tuples import new_tuple
from millrace.wire.v1 import delivery_pb2, record_pb2

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_FRAME_TAG = b"\x00"  # no consumer name is empty, so no identity starts with 0x00


def record_id_prefix(computation: str) -> bytes:
    """What every production id caused by one of ``computation``'s records starts from;
    append the input record id to get the cause for :func:`production_id`."""
    return b"r" + computation.encode() + b"\x00"


def timer_id_prefix(computation: str, interval: int, fire_seq: int) -> bytes:
    """The cause, for :func:`production_id`, of the ``fire_seq``-th timer fire of an interval."""
    return b"t" + computation.encode() + b"\x00" + _U32.pack(interval) + _U64.pack(fire_seq)


def production_id(cause: bytes, index: int) -> bytes:
    """Id of the ``index``-th production of ``cause`` (128-bit xxh3)."""
    return xxh3_128_digest(cause + _U32.pack(index))


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

    @classmethod
    def from_outbox(cls, key: bytes, value: bytes) -> tuple[int, Production]:
        """Rebuild a production and its sequence number from a per-production outbox entry
        (the format before frames)."""
        consumer, interval, _ = split_outbox_key(key)
        record = record_pb2.Record()
        record.ParseFromString(value[_U64.size :])
        return _U64.unpack_from(value)[0], cls(consumer, interval, record, key)


def frame_key(seq: int) -> bytes:
    """The outbox key of the ``seq``-th frame of an interval."""
    return _FRAME_TAG + _U64.pack(seq)


def is_frame_key(key: bytes) -> bool:
    """True for a frame's key, False for a per-production entry of the older format."""
    return key[:1] == _FRAME_TAG


def frame_seq(key: bytes) -> int:
    """Inverse of :func:`frame_key`."""
    return int(_U64.unpack_from(key, 1)[0])


@dataclass(slots=True)
class Frame:
    """Productions to one destination, in production order, with their wire encoding.

    ``payload`` is a serialized ``DeliveryBatch`` holding ``target`` and ``records``
    (what the outbox stores): a sender sends it as it is, after a header with the
    batch's other fields, since concatenated protobuf messages parse as their merge.
    None when not encoded yet (a sender encodes it when it sends).
    """

    consumer: str
    interval: int
    productions: list[Production]
    payload: bytes | None = None
    positions: tuple[int, int] | None = None
    """``(first, last)`` position of its productions in its sender's sequence (an
    interval's frame sequence, a stream's log offsets); None: not numbered."""

    def encoded(self) -> bytes:
        """``payload``, encoding it first if needed."""
        if self.payload is None:
            self.payload = encode_frame(self.consumer, self.interval, self.productions)
        return self.payload


class FrameBuilder:
    """Collects one commit's productions, building each record in place in its
    destination's batch (copying a record into a batch costs more than making it)."""

    def __init__(self) -> None:
        self.productions: list[Production] = []
        """Every production, in the order they were made."""
        self._batches: dict[tuple[str, int], tuple[delivery_pb2.DeliveryBatch, list[Production]]]
        self._batches = {}

    def add(  # noqa: PLR0917 - called per production: positional arguments are cheaper
        self,
        consumer: str,
        interval: int,
        outbox_key: bytes,
        record_id: bytes,
        key: bytes,
        value: bytes,
        event_time_ms: int,
        producer: str,
        stream: str,
    ) -> None:
        """Add the production of one record to ``consumer``'s ``interval``."""
        entry = self._batches.get((consumer, interval))
        if entry is None:
            batch = delivery_pb2.DeliveryBatch()
            batch.target.computation = consumer
            batch.target.index = interval
            entry = self._batches[(consumer, interval)] = (batch, [])
        record = entry[0].records.add(
            record_id=record_id,
            key=key,
            value=value,
            event_time_ms=event_time_ms,
            producer=producer,
            stream=stream,
        )
        production = new_tuple(Production, (consumer, interval, record, outbox_key))
        entry[1].append(production)
        self.productions.append(production)

    def frames(self, keep: Callable[[Production], bool]) -> list[Frame]:
        """One frame per destination with the productions ``keep`` keeps (encoded as built
        when it keeps them all)."""
        frames = []
        for (consumer, interval), (batch, productions) in self._batches.items():
            kept = [p for p in productions if keep(p)]
            if len(kept) == len(productions):
                frames.append(Frame(consumer, interval, productions, batch.SerializeToString()))
            elif kept:
                frames.append(Frame(consumer, interval, kept, None))
        return frames


def encode_frame(consumer: str, interval: int, productions: Sequence[Production]) -> bytes:
    """A frame's value: the productions (all to ``consumer``'s ``interval``) as a batch."""
    frame = delivery_pb2.DeliveryBatch(records=[p.record for p in productions])
    frame.target.computation = consumer
    frame.target.index = interval
    return frame.SerializeToString()


def decode_frame(value: bytes) -> Frame:
    """Inverse of :func:`encode_frame`; keeps ``value`` as the payload."""
    batch = delivery_pb2.DeliveryBatch()
    batch.ParseFromString(value)
    consumer, interval = batch.target.computation, batch.target.index
    prefix = outbox_key_prefix(consumer, interval)
    productions = [Production(consumer, interval, r, prefix + r.record_id) for r in batch.records]
    return Frame(consumer, interval, productions, value)


def encode_batch(header: delivery_pb2.DeliveryBatch, frames: Sequence[Frame]) -> bytes:
    """A ``DeliveryBatch`` as the wire carries it: ``header`` (the batch's own fields),
    then each frame's stored encoding. Concatenated messages parse as their merge, so
    the frames' records append and nothing is re-encoded."""
    return b"".join([header.SerializeToString(), *(frame.encoded() for frame in frames)])


def frames_of(productions: Iterable[Production]) -> list[Frame]:
    """Productions as unencoded frames: one per run of the same destination, in order."""
    frames: list[Frame] = []
    current: Frame | None = None
    for production in productions:
        if (
            current is None
            or current.interval != production.interval
            or current.consumer != production.consumer
        ):
            current = Frame(production.consumer, production.interval, [])
            frames.append(current)
        current.productions.append(production)
    return frames


class OldestInFlight:
    """Unacknowledged productions, in groups (an outbox frame, or one commit's worth).

    Each group keeps the smallest event timestamp of its productions and how
    many are still unacknowledged; the oldest in-flight timestamp is the
    minimum over live groups (a handful), so acks cost a dict pop and a
    decrement. A group's minimum does not rise as its members are acked: the
    watermark is held a little longer, never too little.
    """

    def __init__(self) -> None:
        self._group_of: dict[bytes, Hashable] = {}
        self._groups: dict[Hashable, list[float]] = {}  # group -> [min ts, live, added at]
        self._next_group = 0

    def add_group(self, items: Iterable[tuple[bytes, int]], group: Hashable = None) -> None:
        """Track productions ``(identity, event timestamp)`` as one group, named ``group``
        (a fresh name when None). Identities already tracked stay in their first group."""
        if group is None:
            group = self._next_group
            self._next_group += 1
        count = 0
        oldest: int | None = None
        for key, timestamp_ms in items:
            if key in self._group_of:
                continue
            self._group_of[key] = group
            count += 1
            if oldest is None or timestamp_ms < oldest:
                oldest = timestamp_ms
        if count and oldest is not None:
            self._groups[group] = [oldest, count, time.monotonic()]

    def add(self, key: bytes, timestamp_ms: int) -> None:
        """Track one unacknowledged production."""
        self.add_group([(key, timestamp_ms)])

    def remove(self, key: bytes) -> Hashable:
        """Forget an acknowledged production; returns its group's name if that was the
        group's last live member (None otherwise, or when ``key`` is not tracked)."""
        group = self._group_of.pop(key, None)
        if group is None:
            return None
        entry = self._groups[group]
        entry[1] -= 1
        if entry[1] <= 0:
            del self._groups[group]
            return group
        return None

    def tracks(self, key: bytes) -> bool:
        """True while ``key`` is unacknowledged here."""
        return key in self._group_of

    def __len__(self) -> int:
        return len(self._group_of)

    def oldest(self) -> int | None:
        """The smallest tracked timestamp, or None when nothing is in flight."""
        if not self._groups:
            return None
        return int(min(entry[0] for entry in list(self._groups.values())))

    def oldest_age_s(self) -> float:
        """Seconds the longest-waiting production has been unacknowledged (0 if none)."""
        for entry in list(self._groups.values()):
            return time.monotonic() - entry[2]
        return 0.0
