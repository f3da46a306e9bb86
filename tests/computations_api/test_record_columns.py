"""``RecordColumns``: the usual delivered batch reaches ``process_batch`` as columns,
a sequence of ``Record`` equal to the records one at a time would see."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest

from millrace.computations import BatchContext, Computation, Context, Record, RecordColumns
from tests.computations_api._one_computation import harness_of

RECORDS = [
    Record("s", b"a", b"1", 5, b"r1", "p"),
    Record("s", b"b", b"2", 3, b"r2", "p"),
    Record("t", b"a", b"3", 9, b"r3", "q"),
]


def _columns(records: list[Record]) -> RecordColumns:
    return RecordColumns(
        streams=[r.stream for r in records], keys=[r.key for r in records],
        values=[r.value for r in records], times=[r.event_time_ms for r in records],
        record_ids=[r.record_id for r in records], producers=[r.producer for r in records],
    )  # fmt: skip


def test_a_sequence_of_the_records() -> None:
    columns = _columns(RECORDS)
    assert len(columns) == 3 and list(columns) == RECORDS
    assert [columns[i] for i in range(-3, 3)] == RECORDS + RECORDS
    assert columns[1:] == RECORDS[1:] and columns[::-1] == RECORDS[::-1]
    assert all(type(r) is Record for r in columns) and columns[0].key == b"a"
    assert RECORDS[2] in columns and columns.index(RECORDS[1]) == 1
    with pytest.raises(IndexError):
        columns[3]
    assert columns.times == [5, 3, 9] and columns.record_ids == [b"r1", b"r2", b"r3"]


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        RecordColumns(streams=["s"], keys=[], values=[], times=[], record_ids=[], producers=[])


class Seen(Computation):
    """Keeps what ``process_batch`` was handed."""

    batches: ClassVar[list[tuple[str, list[Record], list[bytes]]]] = []

    def process_record(self, ctx: Context, record: Record) -> None:
        raise AssertionError("process_batch takes everything")

    def process_batch(self, batch: BatchContext, records: Sequence[Record]) -> Sequence[Record]:
        keys = records.keys if isinstance(records, RecordColumns) else []
        Seen.batches.append((type(records).__name__, list(records), list(keys)))
        return ()


def test_process_batch_gets_the_batch_as_columns() -> None:
    Seen.batches = []
    harness = harness_of(f"{__name__}:Seen")
    feed = [(b"k%d" % (i % 3), b"%d" % i, 1_000 + i) for i in range(10)]
    harness.feed_many("in", feed)
    harness.run()
    assert [kind for kind, _, _ in Seen.batches] == ["RecordColumns"] * len(Seen.batches)
    got = [record for _, records, _ in Seen.batches for record in records]
    assert [(r.key, r.value, r.event_time_ms) for r in got] == feed
    assert all(keys == [r.key for r in records] for _, records, keys in Seen.batches)
    assert len({r.record_id for r in got}) == len(feed)
