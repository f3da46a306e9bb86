"""An interval's input records as columns, and the queue a backfill takes batches from.

A stage's input arrives as Arrow batches sorted by interval, then event time; their
columns become Python lists once per Arrow batch (in C) and are handed to admission
as they are (:meth:`engine.Received.of_columns`): no object is made per record
between the Parquet rows and the user's :class:`computations.Record`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa


class InputRow(NamedTuple):
    """A record for one interval: what a node would receive."""

    record_id: bytes
    key: bytes
    value: bytes
    event_time_ms: int
    producer: str
    stream: str


@dataclass(frozen=True, slots=True)
class InputColumns:
    """Records for one interval, one list per field (equal lengths), sorted by event
    time (then key, then production order)."""

    record_ids: list[bytes]
    keys: list[bytes]
    values: list[bytes]
    times: list[int]
    producers: list[str]
    streams: list[str]

    @classmethod
    def of_rows(cls, rows: Iterable[InputRow]) -> InputColumns:
        """``rows`` as columns."""
        columns = [list(column) for column in zip(*rows, strict=True)] or [[] for _ in range(6)]
        ids, keys, values, times, producers, streams = columns
        return cls(ids, keys, values, times, producers, streams)

    @classmethod
    def of_arrow(cls, batch: pa.RecordBatch) -> InputColumns:
        """The records of an Arrow batch with (at least) the columns ``record_id, key,
        value, event_time_ms, producer, stream``."""
        return cls(
            *(
                batch.column(name).to_pylist()
                for name in ("record_id", "key", "value", "event_time_ms", "producer", "stream")
            )
        )

    def __len__(self) -> int:
        return len(self.record_ids)

    def slice(self, start: int, stop: int) -> InputColumns:
        """Records ``[start, stop)``."""
        return InputColumns(
            self.record_ids[start:stop], self.keys[start:stop], self.values[start:stop],
            self.times[start:stop], self.producers[start:stop], self.streams[start:stop],
        )  # fmt: skip

    def pick(self, positions: Sequence[int]) -> InputColumns:
        """The records at ``positions``, in that order."""
        return InputColumns(
            [self.record_ids[i] for i in positions], [self.keys[i] for i in positions],
            [self.values[i] for i in positions], [self.times[i] for i in positions],
            [self.producers[i] for i in positions], [self.streams[i] for i in positions],
        )  # fmt: skip

    @staticmethod
    def concat(parts: Sequence[InputColumns]) -> InputColumns:
        """``parts`` one after the other."""
        if len(parts) == 1:
            return parts[0]
        return InputColumns(
            [x for part in parts for x in part.record_ids],
            [x for part in parts for x in part.keys],
            [x for part in parts for x in part.values],
            [x for part in parts for x in part.times],
            [x for part in parts for x in part.producers],
            [x for part in parts for x in part.streams],
        )


def intervals_of(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[int, list[InputColumns]]]:
    """Arrow batches of productions sorted by ``interval`` as each interval's records,
    one :class:`InputColumns` per stretch of a batch."""
    current: int | None = None
    parts: list[InputColumns] = []
    for batch in batches:
        if not batch.num_rows:
            continue
        numbers = batch.column("interval").to_numpy()
        changes = (np.flatnonzero(np.diff(numbers)) + 1).tolist()
        for start, stop in zip([0, *changes], [*changes, batch.num_rows], strict=True):
            interval = int(numbers[start])
            if interval != current and parts:
                assert current is not None
                yield current, parts
                parts = []
            current = interval
            parts.append(InputColumns.of_arrow(batch.slice(start, stop - start)))
    if parts:
        assert current is not None
        yield current, parts


class Upcoming:
    """An interval's records not processed yet, in order; those a commit hands back
    go in front again (they are never after a record not taken yet)."""

    def __init__(self, parts: Iterable[InputColumns]) -> None:
        self._rest = iter(parts)
        self._parts: deque[InputColumns] = deque()
        self._at = 0
        """The first record of ``_parts[0]`` not taken yet."""

    def first_time(self) -> int | None:
        """The event time of the next record (None: no more)."""
        parts = self._parts
        while not parts or self._at >= len(parts[0]):
            if parts:
                parts.popleft()
                self._at = 0
            else:
                part = next(self._rest, None)
                if part is None:
                    return None
                parts.append(part)
        return parts[0].times[self._at]

    def take(self, size: int, *, up_to: int) -> InputColumns:
        """At most ``size`` next records, none after ``up_to`` (but always the first)."""
        taken: list[InputColumns] = []
        count = 0
        while count < size and self.first_time() is not None:
            part, start = self._parts[0], self._at
            stop = min(len(part), start + size - count)
            fits = bisect_right(part.times, up_to, start, stop)
            if not count and fits == start:
                fits = start + 1
            taken.append(part.slice(start, fits))
            count += fits - start
            self._at = fits
            if fits < stop:
                break
        return InputColumns.concat(taken) if taken else InputColumns.of_rows(())

    def put_back(self, records: InputColumns) -> None:
        """``records`` (in order) before every record not taken yet."""
        if not len(records):
            return
        if self._parts:
            self._parts[0] = self._parts[0].slice(self._at, len(self._parts[0]))
        self._at = 0
        self._parts.appendleft(records)
