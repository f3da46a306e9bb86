"""Recovery on open: torn tails, corrupt entries, uncommitted records, torn headers, indexes."""

from __future__ import annotations

import random
import shutil
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.injector.log import (
    AppendRequest,
    LogConfig,
    LogCorruptedError,
    RecoveryReport,
    StreamLog,
)
from millrace.injector.log._format import ENTRY_PREFIX, RECORD_HEAD, encode_header
from millrace.injector.log._index import read_index
from tests.injector_log.workload import (
    STREAM,
    WALL_START_MS,
    entry_bounds,
    matches,
    request,
    triples,
)
from tests.support import ManualClock

CONFIG = LogConfig(segment_bytes=1 << 20, index_every=4, fsync=False)


def make_log(root: Path, tags: range, config: LogConfig = CONFIG) -> tuple[int, int]:
    """Append requests ``tags`` one per call; returns (next offset, active segment size)."""
    with StreamLog.open(
        root / STREAM, STREAM, config=config, clock=ManualClock(WALL_START_MS)
    ) as log:
        for tag in tags:
            log.append([request(tag)])
        return log.next_offset, log.segments()[-1].size_bytes


def active_path(root: Path) -> Path:
    return sorted((root / STREAM).glob("segment-*.log"))[-1]


def expected_dropped(bounds: list[tuple[int, int, int]], clean_end: int, cut: int) -> int:
    """Entries of the last request that a cut at ``cut`` leaves complete, plus a torn one."""
    last = [(start, end) for start, end, _ in bounds if start >= clean_end]
    complete = sum(1 for _, end in last if end <= cut)
    torn = any(start < cut < end for start, end in last)
    return complete + int(torn)


def test_a_torn_tail_is_cut_back_to_the_last_commit_at_every_byte(tmp_path: Path) -> None:
    source = tmp_path / "source"
    offset_before, size_before = make_log(source, range(5))
    with StreamLog.open(
        source / STREAM, STREAM, config=CONFIG, clock=ManualClock(WALL_START_MS)
    ) as log:
        log.append([request(99, 6)])
    data = active_path(source).read_bytes()
    bounds = entry_bounds(active_path(source))
    assert len(data) > size_before
    work = tmp_path / "work"
    for cut in range(size_before, len(data)):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(source, work)
        active_path(work).write_bytes(data[:cut])
        with StreamLog.open(
            work / STREAM, STREAM, config=CONFIG, clock=ManualClock(WALL_START_MS)
        ) as log:
            report = log.recovery
            assert report is not None
            assert report.truncated_bytes == cut - size_before
            assert report.dropped_entries == expected_dropped(bounds, size_before, cut), cut
            assert (report.reason == "") == (cut == size_before)
            assert log.next_offset == offset_before
            assert active_path(work).stat().st_size == size_before
            [result] = log.append([request(7, 3)])
            assert result.first_offset == offset_before
            assert [
                matches(r, t)
                for r, t in zip(log.read(result.first_offset, 9), triples(7, 3), strict=True)
            ] == [True] * 3
        with StreamLog.open(work / STREAM, STREAM, config=CONFIG) as log:
            assert log.recovery is not None and log.recovery.reason == ""
            assert log.next_offset == offset_before + 3


def test_a_corrupt_byte_in_the_last_request_is_detected_and_cut(tmp_path: Path) -> None:
    source = tmp_path / "source"
    offset_before, size_before = make_log(source, range(5))
    with StreamLog.open(
        source / STREAM, STREAM, config=CONFIG, clock=ManualClock(WALL_START_MS)
    ) as log:
        log.append([request(99, 6)])
    data = active_path(source).read_bytes()
    work = tmp_path / "work"
    rng = random.Random(11)
    positions = sorted({*rng.sample(range(size_before, len(data)), 120), len(data) - 1})
    for position in positions:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(source, work)
        damaged = bytearray(data)
        damaged[position] ^= 1 << rng.randrange(8)
        active_path(work).write_bytes(bytes(damaged))
        with StreamLog.open(work / STREAM, STREAM, config=CONFIG) as log:
            report = log.recovery
            assert report is not None and report.reason, position
            assert report.truncated_bytes == len(data) - size_before
            assert log.next_offset == offset_before
            assert len(log.read(0, 10_000)) == offset_before


def test_records_without_their_commit_are_dropped(tmp_path: Path) -> None:
    offset_before, size_before = make_log(tmp_path, range(4))
    orphans = b""
    for j in range(3):  # valid RECORD entries (good crc), but no COMMIT after them
        body = RECORD_HEAD.pack(1, offset_before + j, 5, 6, 1) + b"k" + b"value"
        orphans += ENTRY_PREFIX.pack(len(body), zlib.crc32(body)) + body
    with open(active_path(tmp_path), "ab") as f:
        f.write(orphans)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG) as log:
        assert log.recovery == RecoveryReport(
            segment=str(active_path(tmp_path)),
            truncated_bytes=len(orphans),
            dropped_entries=3,
            reason=f"3 records without a COMMIT at byte {size_before}",
        )
        assert log.next_offset == offset_before
        assert log.append([request(50, 2)])[0].first_offset == offset_before


def test_zeros_after_the_last_commit_are_a_torn_tail(tmp_path: Path) -> None:
    """A power loss can leave a file extended with zeros; length 0 is never valid."""
    offset_before, size_before = make_log(tmp_path, range(3))
    with open(active_path(tmp_path), "ab") as f:
        f.write(bytes(4096))
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG) as log:
        assert log.recovery is not None
        assert log.recovery.reason == f"bad entry length 0 at byte {size_before}"
        assert log.recovery.truncated_bytes == 4096
        assert log.next_offset == offset_before


def test_read_only_opens_see_the_valid_prefix_and_change_nothing(tmp_path: Path) -> None:
    offset_before, size_before = make_log(tmp_path, range(3))
    with open(active_path(tmp_path), "ab") as f:
        f.write(b"\x00\x00\x01")
    with StreamLog.open(tmp_path / STREAM, STREAM, read_only=True) as view:
        assert view.recovery is not None and view.recovery.truncated_bytes == 3
        assert view.next_offset == offset_before
        assert len(view.read(0, 10_000)) == offset_before
    assert active_path(tmp_path).stat().st_size == size_before + 3


ROLLING = LogConfig(segment_bytes=2000, index_every=3, fsync=True)


def test_a_torn_header_of_a_new_segment_is_rewritten(tmp_path: Path) -> None:
    next_offset, _ = make_log(tmp_path, range(12), ROLLING)
    # Roll: seal the active segment (index file) and start the next one with a commit.
    with StreamLog.open(tmp_path / STREAM, STREAM, config=LogConfig(segment_bytes=1)) as log:
        log.append([AppendRequest(records=[], idempotency_key=b"empty")])
        new = Path(log.segments()[-1].path)
    assert new.name == f"segment-{next_offset:020d}.log"
    assert new.with_name(f"segment-{log.segments()[-2].base_offset:020d}.idx").exists()
    # The state a crash while creating `new` leaves: only part of its header written.
    new.write_bytes(encode_header(next_offset)[:5])
    with StreamLog.open(tmp_path / STREAM, STREAM, config=ROLLING) as log:
        assert log.recovery == RecoveryReport(
            segment=str(new), truncated_bytes=5, dropped_entries=0, reason="torn segment header"
        )
        assert log.next_offset == next_offset
        assert log.append([request(600, 2)])[0].first_offset == next_offset
    assert new.stat().st_size > 16
    with StreamLog.open(tmp_path / STREAM, STREAM, config=ROLLING) as log:
        assert log.recovery is not None and log.recovery.reason == ""
        assert log.next_offset == next_offset + 2


def test_a_foreign_file_is_corruption_not_a_torn_header(tmp_path: Path) -> None:
    make_log(tmp_path, range(3))
    active_path(tmp_path).write_bytes(b"#!/bin/sh\necho not a segment\n")
    with pytest.raises(LogCorruptedError, match="bad segment magic"):
        StreamLog.open(tmp_path / STREAM, STREAM)


def test_a_crash_between_sealing_and_creating_the_next_segment(tmp_path: Path) -> None:
    """The last segment is sealed (has an index) and nothing follows it: open starts a new one."""
    make_log(tmp_path, range(12), ROLLING)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=ROLLING) as log:
        segments = log.segments()
    active = Path(segments[-1].path)
    active.unlink()  # as if the crash came before the active segment was created
    with StreamLog.open(tmp_path / STREAM, STREAM, config=ROLLING) as log:
        assert log.next_offset == segments[-2].end_offset
        assert log.segments()[:-1] == segments[:-1]
        assert not log.segments()[-1].sealed
        assert log.append([request(70, 2)])[0].first_offset == segments[-2].end_offset


def test_missing_or_damaged_indexes_are_rebuilt(tmp_path: Path) -> None:
    make_log(tmp_path, range(12), ROLLING)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=ROLLING) as log:
        segments = log.segments()
        records = log.read(0, 10_000)
    first_idx = Path(segments[0].path).with_suffix(".idx")
    second_idx = Path(segments[1].path).with_suffix(".idx")
    original = read_index(first_idx), read_index(second_idx)
    first_idx.unlink()
    damaged = bytearray(second_idx.read_bytes())
    damaged[20] ^= 0xFF
    second_idx.write_bytes(bytes(damaged))
    (tmp_path / STREAM / "segment-00000000000000000000.idx.tmp").write_bytes(b"junk")
    with StreamLog.open(tmp_path / STREAM, STREAM, config=ROLLING) as log:
        assert log.segments() == segments
        assert log.read(0, 10_000) == records
    assert (read_index(first_idx), read_index(second_idx)) == original
    assert not (tmp_path / STREAM / "segment-00000000000000000000.idx.tmp").exists()


def test_a_damaged_sealed_segment_without_index_cannot_open(tmp_path: Path) -> None:
    make_log(tmp_path, range(12), ROLLING)
    first = sorted((tmp_path / STREAM).glob("segment-*.log"))[0]
    first.with_suffix(".idx").unlink()
    data = bytearray(first.read_bytes())
    data[100] ^= 0x01
    first.write_bytes(bytes(data))
    with pytest.raises(LogCorruptedError, match=r"segment-00000000000000000000\.log"):
        StreamLog.open(tmp_path / STREAM, STREAM, config=ROLLING)


def test_a_missing_segment_in_the_middle_is_corruption(tmp_path: Path) -> None:
    make_log(tmp_path, range(12), ROLLING)
    segments = sorted((tmp_path / STREAM).glob("segment-*.log"))
    assert len(segments) > 3
    segments[1].unlink()
    with pytest.raises(LogCorruptedError, match="ends at"):
        StreamLog.open(tmp_path / STREAM, STREAM, config=ROLLING)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=12),
    cut_fraction=st.floats(min_value=0, max_value=1),
)
def test_any_cut_keeps_exactly_the_requests_that_end_before_it(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], cut_fraction: float
) -> None:
    """Property: cutting the active segment anywhere recovers the longest whole-request prefix."""
    root = tmp_path_factory.mktemp("cut")
    config = LogConfig(segment_bytes=1500, index_every=2, fsync=False)
    request_ends = []  # (segment size after the request, offsets after it)
    with StreamLog.open(
        root / STREAM, STREAM, config=config, clock=ManualClock(WALL_START_MS)
    ) as log:
        for tag, size in enumerate(sizes):
            log.append([request(tag, size)])
            request_ends.append((log.segments()[-1].size_bytes, log.next_offset))
        sealed_end = log.segments()[-1].base_offset
    path = active_path(root)
    data = path.read_bytes()
    cut = 16 + int((len(data) - 16) * cut_fraction)
    path.write_bytes(data[:cut])
    in_active = [(size, end) for size, end in request_ends if end >= sealed_end]
    expected = max([end for size, end in in_active if size <= cut], default=sealed_end)
    with StreamLog.open(root / STREAM, STREAM, config=config) as log:
        assert log.next_offset == expected
        got = log.read(0, 10_000)
        assert [r.offset for r in got] == list(range(expected))


def test_damage_before_later_commits_is_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    """Requests are appended after the one before was synced, so a bad entry followed by
    a later request's valid COMMIT is damage to acknowledged records: cutting there would
    give their offsets (record ids) to new records."""
    source = tmp_path / "source"
    offset_before, _ = make_log(source, range(6))
    data = active_path(source).read_bytes()
    bounds = entry_bounds(active_path(source))
    commits = [(start, end) for start, end, kind in bounds if kind == 2]
    work = tmp_path / "work"
    # A byte in every entry of the first four requests (records and commits alike).
    damaged_entries = [(s, e) for s, e, _ in bounds if e <= commits[3][1]]
    for start, end in damaged_entries:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(source, work)
        damaged = bytearray(data)
        damaged[(start + end) // 2] ^= 0x10
        active_path(work).write_bytes(bytes(damaged))
        with pytest.raises(LogCorruptedError, match="acknowledged records lie past the damage"):
            StreamLog.open(work / STREAM, STREAM, config=CONFIG)
        assert active_path(work).read_bytes() == bytes(damaged), "nothing is cut"
        # A read-only open (the CLI, Spark jobs) still reads what precedes the damage.
        with StreamLog.open(work / STREAM, STREAM, config=CONFIG, read_only=True) as log:
            assert log.next_offset < offset_before
