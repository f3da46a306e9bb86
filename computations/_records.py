"""What user code receives: records and fired timers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import NamedTuple, overload

from millrace.statestore.types import TimeDomain

MAX_PRODUCED_BYTES = 48 << 20
"""The most bytes of key plus value one produced record may hold: a record travels in
one delivery message, which gRPC caps at 64 MiB; producing more raises
:class:`~computations.errors.ProduceError` (the input record or timer then fails as
any user error does: retried, then dead-lettered). Keep big payloads out of records
(a reference to a file or object instead)."""


class Record(NamedTuple):
    """One record of a stream as a computation sees it.

    ``key`` is the key the consuming computation's key extractor gave the
    record (state and timers are scoped to it); ``record_id`` is unique per
    record and stable across redeliveries.
    """

    stream: str
    key: bytes
    value: bytes
    event_time_ms: int
    record_id: bytes = b""
    producer: str = ""


class FiredTimer(NamedTuple):
    """A timer that fired: the key it belongs to, its tag, its time and its clock.

    A named tuple, like :class:`Record`: the engine makes one per fire."""

    key: bytes
    tag: str
    time_ms: int
    domain: TimeDomain


_new_record = partial(tuple.__new__, Record)


class RecordColumns(Sequence[Record]):
    """A batch of records held as columns, one list per field, in arrival order: what
    the engine hands ``process_batch`` for the usual delivered batch. A read-only
    sequence of :class:`Record` (each made when it is read), and its columns for code
    that works a column at a time: ``streams``, ``keys`` (the computation's keys),
    ``values``, ``times`` (event times, ms), ``record_ids`` and ``producers``.
    The lists are the engine's: read them, never change them."""

    __slots__ = ("keys", "producers", "record_ids", "streams", "times", "values")

    def __init__(
        self,
        *,
        streams: list[str],
        keys: list[bytes],
        values: list[bytes],
        times: list[int],
        record_ids: list[bytes],
        producers: list[str],
    ) -> None:
        if not (
            len(streams) == len(keys) == len(values) == len(times) == len(record_ids)
            == len(producers)
        ):  # fmt: skip
            raise ValueError("record columns of different lengths")
        self.streams, self.keys, self.values = streams, keys, values
        self.times, self.record_ids, self.producers = times, record_ids, producers

    def __len__(self) -> int:
        return len(self.record_ids)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> list[Record]: ...

    def __getitem__(self, index: int | slice) -> Record | list[Record]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return _new_record(
            (
                self.streams[index], self.keys[index], self.values[index], self.times[index],
                self.record_ids[index], self.producers[index],
            )
        )  # fmt: skip

    def __iter__(self) -> Iterator[Record]:
        fields = zip(
            self.streams, self.keys, self.values, self.times, self.record_ids, self.producers,
            strict=True,
        )  # fmt: skip
        return map(_new_record, fields)

    def __repr__(self) -> str:
        return f"RecordColumns({len(self)} records)"


def record_columns(records: Sequence[Record]) -> RecordColumns:
    """``records`` as columns (the same object when they are already)."""
    if isinstance(records, RecordColumns):
        return records
    return RecordColumns(
        streams=[r.stream for r in records], keys=[r.key for r in records],
        values=[r.value for r in records], times=[r.event_time_ms for r in records],
        record_ids=[r.record_id for r in records], producers=[r.producer for r in records],
    )  # fmt: skip
