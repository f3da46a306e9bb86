"""Outbox frames: one destination's productions of one commit, in their wire encoding.

Productions are checkpointed in frames, one RocksDB entry per destination per
commit rather than one per production: a frame's key is ``0x00 | frame
sequence u64`` (increasing, so a restart resends frames in the order they
were made) and its value is a wire ``DeliveryBatch`` whose ``target`` is the
destination and whose ``records`` are the productions. A frame is deleted
once every production in it is acknowledged. A sender sends a frame's stored
bytes as they are, after a header (:func:`encode_batch`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from engine._production_ids import Production, outbox_key_prefix
from engine._tuples import new_tuple
from millrace.wire.v1 import delivery_pb2

_U64 = struct.Struct(">Q")
_FRAME_TAG = b"\x00"  # no consumer name is empty, so no identity starts with 0x00


def frame_key(seq: int) -> bytes:
    """The outbox key of the ``seq``-th frame of an interval."""
    return _FRAME_TAG + _U64.pack(seq)


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
