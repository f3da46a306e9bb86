"""A sink's memory stays bounded however many records it wrote (issue 30).

Record ids, positions and the latest record per key live in the sink's index on
disk (``sinks/_sink_index.py``), not in Python containers: a reopened sink holds a
bounded heap, still refuses every duplicate, reads any position and key right, and
catches up on records its index missed (a crash, or a failed index write, between
the output's fsync and the index's commit).
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from millrace.sinks import FileSink, ParquetSink, read_sink_file
from millrace.sinks._indexed_sink import SinkUnavailableError
from millrace.sinks._sink_index import CHECKPOINT_EVERY, SinkIndex, SinkIndexError
from millrace.wire.v1 import delivery_pb2, record_pb2

RECORDS = 60_000
BATCH = 1_000
KEYS = 500


def record(i: int) -> record_pb2.Record:
    return record_pb2.Record(
        record_id=i.to_bytes(16, "big"), key=b"k%d" % (i % KEYS), value=b"v%d" % i,
        event_time_ms=i, producer="p",
    )  # fmt: skip


def batch(seq: int, ids: range | list[int]) -> delivery_pb2.DeliveryBatch:
    delivered = delivery_pb2.DeliveryBatch(batch_seq=seq, records=[record(i) for i in ids])
    delivered.sender.interval.computation = "up"
    delivered.sender.progress.sequence = "frames"
    delivered.sender.progress.floor = seq
    delivered.sender.progress.last = seq
    return delivered


Opener = Callable[[Path], FileSink | ParquetSink]
SINKS: dict[str, Opener] = {
    "file": lambda d: FileSink(d / "out.jsonl"),
    "parquet": lambda d: ParquetSink(d / "out"),
}


@pytest.mark.parametrize("kind", sorted(SINKS))
def test_a_reopened_sink_holds_a_bounded_heap_and_refuses_every_duplicate(
    tmp_path: Path, kind: str
) -> None:
    sink = SINKS[kind](tmp_path)
    for seq, start in enumerate(range(0, RECORDS, BATCH)):
        sink.write(batch(seq, range(start, start + BATCH)))
    sink.close()
    tracemalloc.start()
    try:
        sink = SINKS[kind](tmp_path)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A set of 60,000 ids alone took ~5 MB, the positions' array ~0.5 MB more; what
    # is left is per key (500) and per part file (60), and fixed.
    assert held < 1_500_000, f"reopening held {held:,} bytes of Python objects"
    assert len(sink) == RECORDS
    resent = random.Random(7).sample(range(RECORDS), 3_000)
    ack = sink.write(batch(10_000, resent))
    assert not ack.committed_ids and len(ack.duplicate_ids) == len(resent)
    for position in [0, 1, CHECKPOINT_EVERY - 1, CHECKPOINT_EVERY, 12_345, RECORDS - 1]:
        [(at, found)] = sink.read(position, 1)
        assert at == position and found.record_id == record(position).record_id
    span = sink.read(RECORDS - 700, 1_000)
    assert [p for p, _ in span] == list(range(RECORDS - 700, RECORDS))
    latest = sink.latest(b"k7")
    assert latest is not None and latest[1].record_id == record(RECORDS - KEYS + 7).record_id
    ack = sink.write(batch(10_001, [RECORDS]))
    assert len(ack.committed_ids) == 1 and len(sink) == RECORDS + 1
    sink.close()


def test_a_record_written_but_not_indexed_is_a_duplicate_when_resent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out.jsonl"
    sink = FileSink(path)
    sink.write(batch(0, range(10)))

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("no space left on device (errno 28)")

    with monkeypatch.context() as patch:
        patch.setattr(SinkIndex, "add", broken)
        with pytest.raises(SinkUnavailableError, match="index"):
            sink.write(batch(1, range(10, 20)))  # durable in the file, not indexed
    ack = sink.write(batch(2, range(10, 25)))  # the sender resends: caught up first
    assert len(ack.duplicate_ids) == 10 and len(ack.committed_ids) == 5
    sink.close()
    # A crash between the file's fsync and the index's commit: the same on reopen.
    with monkeypatch.context() as patch:
        sink = FileSink(path)
        patch.setattr(SinkIndex, "add", broken)
        with pytest.raises(SinkUnavailableError):
            sink.write(batch(3, range(25, 30)))
        sink.close()
    sink = FileSink(path)
    assert len(sink) == 30
    ack = sink.write(batch(4, range(20, 31)))
    assert len(ack.duplicate_ids) == 10 and len(ack.committed_ids) == 1
    sink.close()
    ids = [int(line["record_id"], 16) for line in read_sink_file(path)]
    assert ids == list(range(31)), "every record once, in order"


def test_an_index_of_another_output_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    sink = FileSink(path)
    sink.write(batch(0, range(100)))
    sink.close()
    path.write_bytes(b"")  # the output replaced by hand
    with pytest.raises(SinkIndexError, match="Remove the index directory"):
        FileSink(path)
