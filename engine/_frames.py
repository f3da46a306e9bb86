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
from collections.abc import Iterable, Sequence
from itertools import repeat

from millrace.engine._production_ids import Production, outbox_key_prefix
from millrace.engine._tuples import new_tuple
from millrace.wire.v1 import delivery_pb2, record_pb2

_U64 = struct.Struct(">Q")

FRAME_BYTES = 8 << 20
"""The most bytes of records a frame, or a delivery message made of several frames,
takes before the next records go in another (a single bigger record goes alone):
far below gRPC's 64 MiB message limit, whatever the records' size."""

_FRAME_TAG = b"\x00"  # no consumer name is empty, so no identity starts with 0x00


def frame_key(seq: int) -> bytes:
    """The outbox key of the ``seq``-th frame of an interval."""
    return _FRAME_TAG + _U64.pack(seq)


def frame_seq(key: bytes) -> int:
    """Inverse of :func:`frame_key`."""
    return int(_U64.unpack_from(key, 1)[0])


class Frame:
    """Productions to one destination, in production order, with their wire encoding.

    ``payload`` is a serialized ``DeliveryBatch`` holding ``target`` and ``records``
    (what the outbox stores): a sender sends it as it is, after a header with the
    batch's other fields, since concatenated protobuf messages parse as their merge.
    None when not encoded yet (a sender encodes it when it sends).

    A frame made natively (``engine/_routing.py``) comes as its payload with its outbox
    keys and oldest event time: what the outbox ledger and the senders account by. Its
    :attr:`productions` are parsed from the payload only when something asks for them
    (a partial ack, a refusal, the test harness).
    """

    __slots__ = ("_keys", "_oldest", "_productions", "consumer", "interval", "payload", "positions")

    def __init__(
        self,
        consumer: str,
        interval: int,
        productions: list[Production] | None,
        payload: bytes | None = None,
        positions: tuple[int, int] | None = None,
        *,
        outbox_keys: list[bytes] | None = None,
        oldest_event_time_ms: int | None = None,
    ) -> None:
        """Either ``productions``, or ``payload`` with ``outbox_keys`` and
        ``oldest_event_time_ms``."""
        if productions is None and (payload is None or outbox_keys is None):
            raise ValueError("a frame needs its productions, or its payload and outbox keys")
        self.consumer = consumer
        self.interval = interval
        self._productions = productions
        self.payload = payload
        self.positions = positions
        """``(first, last)`` position of its productions in its sender's sequence (an
        interval's frame sequence, a stream's log offsets); None: not numbered."""
        self._keys = outbox_keys
        self._oldest = oldest_event_time_ms

    @property
    def productions(self) -> list[Production]:
        """Its productions, in production order."""
        if self._productions is None:
            assert self.payload is not None and self._keys is not None
            self._productions = _productions_of(self.payload, self._keys)
        return self._productions

    @property
    def outbox_keys(self) -> list[bytes]:
        """Its productions' outbox keys, in production order."""
        if self._keys is None:
            self._keys = [p.outbox_key for p in self.productions]
        return self._keys

    @property
    def oldest_event_time_ms(self) -> int | None:
        """The smallest event time among its productions (None: it has none)."""
        if self._oldest is None and self.productions:
            self._oldest = min(p.record.event_time_ms for p in self.productions)
        return self._oldest

    def __len__(self) -> int:
        """How many productions it holds."""
        return len(self._keys) if self._keys is not None else len(self.productions)

    def __repr__(self) -> str:
        return f"Frame({self.consumer!r}, {self.interval}, {len(self)} productions)"

    def encoded(self) -> bytes:
        """``payload``, encoding it first if needed."""
        if self.payload is None:
            self.payload = encode_frame(self.consumer, self.interval, self.productions)
        return self.payload


def encode_frame(consumer: str, interval: int, productions: Sequence[Production]) -> bytes:
    """A frame's value: the productions (all to ``consumer``'s ``interval``) as a batch."""
    frame = delivery_pb2.DeliveryBatch(records=[p.record for p in productions])
    frame.target.computation = consumer
    frame.target.index = interval
    return frame.SerializeToString()


def decode_frame(value: bytes) -> Frame:
    """Inverse of :func:`encode_frame`; keeps ``value`` as the payload."""
    batch = delivery_pb2.DeliveryBatch.FromString(value)
    consumer, interval = batch.target.computation, batch.target.index
    return Frame(consumer, interval, _productions(consumer, interval, batch.records), value)


def _productions_of(value: bytes, outbox_keys: Sequence[bytes]) -> list[Production]:
    batch = delivery_pb2.DeliveryBatch.FromString(value)
    return _productions(batch.target.computation, batch.target.index, batch.records, outbox_keys)


def _productions(
    consumer: str,
    interval: int,
    records: Sequence[record_pb2.Record],
    outbox_keys: Sequence[bytes] | None = None,
) -> list[Production]:
    """Records of a frame as productions, each built without a Python call (records are
    parsed in C; the outbox keys are derived unless given)."""
    if outbox_keys is None:
        prefix = outbox_key_prefix(consumer, interval)
        outbox_keys = [prefix + r.record_id for r in records]
    tuples = zip(repeat(consumer), repeat(interval), records, outbox_keys, strict=False)
    return list(map(new_tuple, repeat(Production), tuples))


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
