"""A turn's delivered records as columns: what admission reads.

A node's deliveries arrive as ``DeliveryBatch`` bytes; their records are decoded
natively into columns (:func:`millrace.dataplane.decode_deliveries`), with the shape
that tells admission whether it can take the batch whole, so no Python object is made
per field access of a protobuf record. Callers that hold parsed messages get the
same columns through their serialized bytes, and callers that hold the fields as
columns already (a backfill reading Arrow) hand them over as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from millrace.dataplane import UndecodableRequestError, columns_shape, decode_deliveries
from millrace.wire.v1 import delivery_pb2, record_pb2


@dataclass(frozen=True, slots=True)
class Shape:
    """What admission asks of a batch before taking it whole."""

    ids_distinct: bool
    """Every record has an id and no id is repeated."""
    one_stream: bool
    min_event_ms: int
    max_event_ms: int
    keys_in_interval: int
    """How many records' own keys hash into the receiving interval."""


@dataclass(frozen=True, slots=True)
class Received:
    """The records of a turn's deliveries, one list per field, in arrival order."""

    ids: list[bytes]
    streams: list[str]
    keys: list[bytes]
    """The records' own keys (a computation's key extractor may key them otherwise)."""
    values: list[bytes]
    times: list[int]
    producers: list[str]
    shape: Shape

    @classmethod
    def decode(cls, wires: Sequence[bytes], *, interval: int, intervals: int) -> Received:
        """The records of serialized ``DeliveryBatch`` messages (natively); the keys
        hashed for ``interval`` of ``intervals``. Bytes that are not one raise
        :class:`UndecodableRequestError`."""
        decoded = decode_deliveries(list(wires), interval=interval, intervals=intervals)
        ids, streams, keys, values, times, producers, shape = decoded
        return cls(ids, streams, keys, values, times, producers, Shape(*shape))

    @classmethod
    def of_records(
        cls, records: Sequence[record_pb2.Record], *, interval: int, intervals: int
    ) -> Received:
        """The records of protobuf records (as one batch, as :meth:`decode`)."""
        wire = delivery_pb2.DeliveryBatch(records=records).SerializeToString()
        return cls.decode([wire], interval=interval, intervals=intervals)

    @classmethod
    def of_columns(
        cls,
        *,
        ids: list[bytes],
        streams: list[str],
        keys: list[bytes],
        values: list[bytes],
        times: list[int],
        producers: list[str],
        interval: int,
        intervals: int,
    ) -> Received:
        """Records given as columns (taken as they are, not copied), their shape
        computed natively as :meth:`decode` computes it."""
        shape = columns_shape(ids, streams, keys, times, interval=interval, intervals=intervals)
        if not len(values) == len(producers) == len(ids):
            raise ValueError(
                f"columns of different lengths: {len(ids)} ids, {len(values)} values, "
                f"{len(producers)} producers"
            )
        return cls(ids, streams, keys, values, times, producers, Shape(*shape))

    def __len__(self) -> int:
        return len(self.ids)

    def wire_record(self, i: int) -> record_pb2.Record:
        """Record ``i`` as the wire carried it (for dead letters)."""
        return record_pb2.Record(
            record_id=self.ids[i],
            stream=self.streams[i],
            key=self.keys[i],
            value=self.values[i],
            event_time_ms=self.times[i],
            producer=self.producers[i],
        )


__all__ = ["Received", "Shape", "UndecodableRequestError"]
