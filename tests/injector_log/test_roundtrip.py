"""Appending and reading back across segments rolled by size and by age."""

from __future__ import annotations

import itertools
import os
import random
from pathlib import Path

import pytest

from millrace.injector import log as injector_log
from millrace.injector.log import (
    AppendRequest,
    Commit,
    LogConfig,
    StreamLog,
    offset_of,
    record_id,
    scan_segment,
    stream_tag,
)
from millrace.injector.log._index import read_index
from tests.injector_log.expected_log import CONFIG, build_log
from tests.injector_log.workload import STREAM, WALL_START_MS, request
from tests.support import ManualClock


def test_exported_names_are_pinned() -> None:
    assert sorted(injector_log.__all__) == [
        "AppendRequest",
        "AppendResult",
        "Commit",
        "CorruptEntry",
        "LogClosedError",
        "LogConfig",
        "LogCorruptedError",
        "LogError",
        "LogLockedError",
        "LogRecord",
        "LogTailLostError",
        "LogWriteError",
        "LostRange",
        "OffsetDeletedError",
        "RecordColumns",
        "RecoveryReport",
        "SegmentInfo",
        "StreamLog",
        "is_being_written",
        "offset_of",
        "record_id",
        "scan_segment",
        "scan_segment_columns",
        "stream_tag",
        "wall_clock_ms",
    ]


def test_record_ids_name_stream_and_offset() -> None:
    rid = record_id("clicks", 2**40 + 5)
    assert len(rid) == 16
    assert offset_of(rid) == 2**40 + 5
    assert rid[:8] == record_id("clicks", 0)[:8] == stream_tag("clicks") != stream_tag("views")
    with pytest.raises(ValueError, match="16 bytes"):
        offset_of(b"short")


def test_round_trip_across_rolled_segments(tmp_path: Path) -> None:
    clock = ManualClock(WALL_START_MS)
    log, expected = build_log(tmp_path, clock)
    total = len(expected.records)
    assert log.next_offset == total
    segments = log.segments()
    sealed = [s for s in segments if s.sealed]
    assert [s.sealed for s in segments] == [True] * (len(segments) - 1) + [False]
    by_size = [s for s in sealed if s.size_bytes >= CONFIG.segment_bytes]
    by_age = [s for s in sealed if s.size_bytes < CONFIG.segment_bytes]
    assert by_size, "some segments rolled by size"
    assert by_age, "some segments rolled by age"
    # Dense offsets across segments; every segment ends where a request ends.
    assert segments[0].base_offset == 0
    for before, after in itertools.pairwise(segments):
        assert before.end_offset == after.base_offset
    request_ends = {c.first_offset + c.count for c in expected.commits}
    assert all(s.end_offset in request_ends for s in sealed)

    expected.check(log.read(0, total + 10), 0)
    rng = random.Random(1)
    for first in [*range(0, total, 37), total - 1, *rng.sample(range(total), 50)]:
        limit = rng.choice([1, 5, 50, 1000])
        got = log.read(first, limit)
        assert len(got) == min(limit, total - first)
        expected.check(got, first)
    assert log.read(total, 10) == []
    assert log.read(0, 0) == []
    with pytest.raises(ValueError):
        log.read(-1, 1)

    assert list(log.commits()) == expected.commits
    log.close()

    reopened = StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock)
    assert reopened.recovery is not None and reopened.recovery.reason == ""
    assert reopened.next_offset == total
    assert reopened.segments() == segments
    expected.check(reopened.read(0, total), 0)
    assert list(reopened.commits()) == expected.commits
    reopened.close()


def test_appending_after_reopen_continues_the_offsets(tmp_path: Path) -> None:
    clock = ManualClock(WALL_START_MS)
    log, expected = build_log(tmp_path, clock, calls=20)
    log.close()
    log = StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock)
    expected.add(log, [request(1000), request(1001, 3)], clock.now_ms)
    expected.check(log.read(0, 10_000), 0)
    assert log.next_offset == len(expected.records)
    log.close()


def test_sealed_segments_have_indexes_that_point_at_their_records(tmp_path: Path) -> None:
    clock = ManualClock(WALL_START_MS)
    log, expected = build_log(tmp_path, clock)
    for info in log.segments():
        index_path = Path(info.path).with_suffix(".idx")
        if not info.sealed:
            assert not index_path.exists(), "the active segment has no index file"
            continue
        summary = read_index(index_path)
        assert (summary.base_offset, summary.end_offset) == (info.base_offset, info.end_offset)
        assert summary.records == info.records and summary.size_bytes == info.size_bytes
        assert summary.index_every == CONFIG.index_every
        offsets = [offset for offset, _ in summary.index]
        assert offsets == list(range(info.base_offset, info.end_offset, CONFIG.index_every))
        events = [expected.records[o][2] for o in range(info.base_offset, info.end_offset)]
        assert (summary.min_event_ms, summary.max_event_ms) == (min(events), max(events))
        data = Path(info.path).read_bytes()
        for offset, position in summary.index:
            # The entry at `position` is the RECORD of `offset`.
            assert data[position + 8] == 1
            assert int.from_bytes(data[position + 9 : position + 17], "big") == offset
    log.close()


def test_reads_seek_through_the_index(tmp_path: Path) -> None:
    """A damaged record before an index point does not stop reads that start after it."""
    clock = ManualClock(WALL_START_MS)
    log, expected = build_log(tmp_path, clock)
    first = log.segments()[0]
    summary = read_index(Path(first.path).with_suffix(".idx"))
    (offset_a, position_a), (offset_b, _) = summary.index[0], summary.index[1]
    log.close()
    with open(first.path, "r+b") as f:  # damage the value of record offset_a
        f.seek(position_a + 8 + 29 + 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    log = StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock)
    expected.check(log.read(offset_b, 20), offset_b)
    with pytest.raises(injector_log.LogCorruptedError, match="crc mismatch"):
        log.read(offset_a, 1)
    log.close()


def test_offset_for_time_is_a_lower_bound(tmp_path: Path) -> None:
    clock = ManualClock(WALL_START_MS)
    log, expected = build_log(tmp_path, clock)
    segments = log.segments()
    events = sorted({e for _, _, e, _ in expected.records})
    for t in [events[0] - 1, *events[:: max(1, len(events) // 40)], events[-1]]:
        start = log.offset_for_time(t)
        first = next(s for s in segments if s.max_event_ms is not None and s.max_event_ms >= t)
        assert start == first.base_offset
        assert all(e < t for _, _, e, _ in expected.records[:start])
    assert log.offset_for_time(events[-1] + 1) == log.next_offset
    log.close()


def test_commits_carry_keys_and_sources_and_filter_by_time(tmp_path: Path) -> None:
    clock = ManualClock(WALL_START_MS)
    log, expected = build_log(tmp_path, clock)
    commits = list(log.commits())
    assert commits == expected.commits
    assert commits[3].idempotency_key == b"req-3" and commits[3].source == b"pos-3"
    since = expected.commits[len(expected.commits) // 2].committed_at_ms
    assert list(log.commits(since_ms=since)) == [
        c for c in expected.commits if c.committed_at_ms >= since
    ]
    assert list(log.commits(since_ms=clock.now_ms + 1)) == []
    log.close()


def test_an_append_call_is_one_write_and_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = StreamLog.open(
        tmp_path / STREAM, STREAM, config=LogConfig(), clock=ManualClock(WALL_START_MS)
    )
    calls = {"write": 0, "fsync": 0}
    real_write, real_fsync = os.write, os.fsync

    def counting_write(fd: int, data: bytes | memoryview) -> int:
        calls["write"] += 1
        return real_write(fd, data)

    def counting_fsync(fd: int) -> None:
        calls["fsync"] += 1
        real_fsync(fd)

    monkeypatch.setattr(os, "write", counting_write)
    monkeypatch.setattr(os, "fsync", counting_fsync)
    results = log.append([request(tag, 30) for tag in range(50)])
    assert calls == {"write": 1, "fsync": 1}
    assert [r.first_offset for r in results] == list(range(0, 1500, 30))
    monkeypatch.undo()
    log.close()


def test_a_segment_rolls_between_requests_never_inside_one(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, index_every=2)
    log = StreamLog.open(tmp_path / STREAM, STREAM, config=config, clock=ManualClock(WALL_START_MS))
    log.append([request(tag, 25) for tag in range(6)])  # each request is well over 1000 bytes
    segments = log.segments()
    assert [(s.base_offset, s.end_offset) for s in segments] == [
        (i * 25, i * 25 + 25) for i in range(6)
    ]
    for info in segments:
        assert all(
            not isinstance(r, injector_log.CorruptEntry) for r in scan_segment(info.path, STREAM)
        )
    log.close()


def test_empty_requests_record_only_their_commit(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / STREAM, STREAM, clock=ManualClock(5))
    results = log.append(
        [AppendRequest(records=[], idempotency_key=b"a", source=b"pos:1"), request(1, 2)]
    )
    assert [(r.first_offset, r.count) for r in results] == [(0, 0), (0, 2)]
    assert next(iter(log.commits())) == Commit(
        first_offset=0, count=0, idempotency_key=b"a", source=b"pos:1", committed_at_ms=5
    )
    assert log.append([]) == []
    log.close()


def test_a_segment_may_start_with_an_empty_request(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=100)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=config, clock=ManualClock(5)) as log:
        log.append([request(0, 3)])
        log.append([AppendRequest(records=[], idempotency_key=b"only-a-commit")])
        segments = log.segments()
        assert [(s.base_offset, s.end_offset, s.records) for s in segments] == [
            (0, 3, 3),
            (3, 3, 0),
        ]
        assert [c.idempotency_key for c in log.commits()] == [b"req-0", b"only-a-commit"]
    with StreamLog.open(tmp_path / STREAM, STREAM, config=config) as log:
        assert [c.idempotency_key for c in log.commits()] == [b"req-0", b"only-a-commit"]
        assert log.next_offset == 3


def test_malformed_requests_write_nothing(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / STREAM, STREAM, clock=ManualClock(WALL_START_MS))
    log.append([request(0, 3)])
    size = log.segments()[-1].size_bytes
    # Records the format cannot hold are refused when the request is made.
    with pytest.raises(ValueError, match="event_time_ms must be an integer within int64"):
        AppendRequest(records=[(b"k", b"v", 2**63)])
    with pytest.raises(TypeError, match="key must be bytes, got str"):
        AppendRequest(records=[("k", b"v", 1)])  # type: ignore[list-item]
    # A request the log cannot encode fails the append, and writes nothing.
    too_long_key = AppendRequest(records=[], idempotency_key=b"x" * 70_000)
    with pytest.raises(ValueError, match="append request 1"):
        log.append([request(1, 2), too_long_key])
    assert log.next_offset == 3
    assert log.segments()[-1].size_bytes == size == os.path.getsize(log.segments()[-1].path)
    assert log.append([request(1, 2)])[0].first_offset == 3
    log.close()


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="segment_bytes"):
        LogConfig(segment_bytes=0)
    with pytest.raises(ValueError, match="segment_ms"):
        LogConfig(segment_ms=0)
    with pytest.raises(ValueError, match="index_every"):
        LogConfig(index_every=0)
