"""One writer per stream, read-only views, readers on other threads, and retention."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from millrace.injector.log import (
    LogClosedError,
    LogConfig,
    LogLockedError,
    OffsetDeletedError,
    StreamLog,
)
from tests.injector_log.expected_log import CONFIG, build_log
from tests.injector_log.workload import STREAM, WALL_START_MS, matches, request, triples
from tests.support import ManualClock


def test_one_writer_per_stream_and_read_only_views(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / STREAM, STREAM, clock=ManualClock(WALL_START_MS))
    log.append([request(0, 4)])
    with pytest.raises(LogLockedError):
        StreamLog.open(tmp_path / STREAM, STREAM)
    with StreamLog.open(tmp_path / STREAM, STREAM, read_only=True) as view:
        assert view.next_offset == 4
        assert [r.offset for r in view.read(0, 10)] == [0, 1, 2, 3]
        with pytest.raises(LogClosedError, match="read-only"):
            view.append([request(1, 1)])
    with pytest.raises(FileNotFoundError):
        StreamLog.open(tmp_path / "other", "other", read_only=True)
    with pytest.raises(ValueError, match="stream name"):
        StreamLog.open(tmp_path / "x", "")
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosedError):
        log.append([request(1, 1)])
    StreamLog.open(tmp_path / STREAM, STREAM).close()  # the lock was released


def test_delete_before_removes_only_whole_sealed_segments(tmp_path: Path) -> None:
    clock = ManualClock(WALL_START_MS)
    log, expected = build_log(tmp_path, clock)
    segments = log.segments()
    assert len(segments) >= 5
    cut = segments[2].end_offset
    # An offset inside segment 3 deletes segments 0..2 only.
    deleted = log.delete_before(cut + 1)
    assert deleted == [s.path for s in segments[:3]]
    for info in segments[:3]:
        assert not Path(info.path).exists()
        assert not Path(info.path).with_suffix(".idx").exists()
    assert log.segments() == segments[3:]
    assert log.first_offset == cut
    with pytest.raises(OffsetDeletedError):
        log.read(cut - 1, 1)
    expected.check(log.read(cut, 100), cut)
    assert log.delete_before(cut + 1) == []

    # older_than_ms: only segments whose last append is older go, as a prefix.
    rest = log.segments()
    newest = [s for s in rest if s.sealed]
    keep_from = newest[1]
    last_append = max(
        c.committed_at_ms for c in expected.commits if c.first_offset < keep_from.base_offset
    )
    assert log.delete_before(10**15, older_than_ms=last_append) == []
    assert log.delete_before(10**15, older_than_ms=last_append + 1) == [rest[0].path]
    # Never the active segment, whatever the offset.
    log.delete_before(10**15)
    assert [s.sealed for s in log.segments()] == [False]
    next_offset = log.next_offset
    log.close()

    reopened = StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock)
    assert reopened.next_offset == next_offset
    assert reopened.first_offset == reopened.segments()[0].base_offset
    expected.check(reopened.read(reopened.first_offset, 10_000), reopened.first_offset)
    reopened.close()


def test_readers_on_other_threads_see_durable_records_only(tmp_path: Path) -> None:
    """A reader racing the writer always gets correct records, never a partial request."""
    config = LogConfig(segment_bytes=32 << 10, index_every=10)
    log = StreamLog.open(tmp_path / STREAM, STREAM, config=config, clock=ManualClock(WALL_START_MS))
    sizes = [random.Random(t).randint(1, 30) for t in range(400)]
    starts = [sum(sizes[:t]) for t in range(len(sizes))]
    ends = {s + n for s, n in zip(starts, sizes, strict=True)}
    done = threading.Event()
    problems: list[str] = []

    def reader() -> None:
        rng = random.Random(3)
        while not done.is_set():
            visible = log.next_offset
            if not visible:
                continue
            if visible not in ends:
                problems.append(f"next_offset {visible} is inside a request")
            first = rng.randrange(visible)
            for record in log.read(first, 200):
                tag = max(t for t in range(len(starts)) if starts[t] <= record.offset)
                j = record.offset - starts[tag]
                if not matches(record, triples(tag, sizes[tag])[j]):
                    problems.append(f"offset {record.offset} holds the wrong record")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for tag in range(0, len(sizes), 4):
            log.append([request(t, sizes[t]) for t in range(tag, min(tag + 4, len(sizes)))])
    finally:
        done.set()
        thread.join()
    assert not problems, problems[:5]
    assert len(log.segments()) > 3
    log.close()
