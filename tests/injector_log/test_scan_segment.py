"""``scan_segment``: the standalone reader a Spark task runs over one sealed segment."""

from __future__ import annotations

import shutil
from pathlib import Path

from millrace.injector.log import CorruptEntry, LogConfig, LogRecord, StreamLog, scan_segment
from tests.injector_log.workload import STREAM, WALL_START_MS, entry_bounds, request
from tests.support import ManualClock

CONFIG = LogConfig(segment_bytes=16 << 10, index_every=5)


def build(root: Path) -> StreamLog:
    log = StreamLog.open(root / STREAM, STREAM, config=CONFIG, clock=ManualClock(WALL_START_MS))
    for tag in range(0, 80, 4):
        log.append([request(t) for t in range(tag, tag + 4)])
    return log


def test_scanning_each_sealed_segment_equals_reading_the_log(tmp_path: Path) -> None:
    log = build(tmp_path)
    sealed = [s for s in log.segments() if s.sealed]
    assert len(sealed) >= 3
    scanned: list[LogRecord | CorruptEntry] = []
    for info in sealed:
        # A copy elsewhere: the file alone (and the stream name) is enough.
        alone = tmp_path / "elsewhere" / Path(info.path).name
        alone.parent.mkdir(exist_ok=True)
        shutil.copy(info.path, alone)
        records = list(scan_segment(alone, STREAM))
        assert [r.offset for r in records if isinstance(r, LogRecord)] == list(
            range(info.base_offset, info.end_offset)
        )
        scanned.extend(records)
    assert scanned == log.read(0, sealed[-1].end_offset)
    log.close()


def test_a_corrupted_sealed_segment_yields_a_corrupt_entry_and_stops(tmp_path: Path) -> None:
    log = build(tmp_path)
    info = log.segments()[1]
    expected = log.read(info.base_offset, info.records)
    request_ends = {c.first_offset + c.count for c in log.commits()}
    log.close()
    bounds = entry_bounds(Path(info.path))
    start, end, _ = bounds[len(bounds) // 2]
    data = bytearray(Path(info.path).read_bytes())
    data[(start + end) // 2] ^= 0x10
    Path(info.path).write_bytes(bytes(data))

    items = list(scan_segment(info.path, STREAM))
    assert isinstance(items[-1], CorruptEntry)
    assert items[-1] == CorruptEntry(position=start, reason="crc mismatch")
    records = [r for r in items if isinstance(r, LogRecord)]
    assert len(records) == len(items) - 1
    # Only whole requests come out: the damaged entry's request is withheld entirely.
    assert records == expected[: len(records)]
    assert records[-1].offset + 1 in request_ends
    assert len(records) < len(expected)


def test_a_truncated_segment_yields_a_corrupt_entry(tmp_path: Path) -> None:
    log = build(tmp_path)
    info = log.segments()[0]
    log.close()
    data = Path(info.path).read_bytes()
    Path(info.path).write_bytes(data[:-3])
    items = list(scan_segment(info.path, STREAM))
    assert isinstance(items[-1], CorruptEntry)
    assert items[-1].reason.startswith("torn entry")


def test_a_file_that_is_not_a_segment_yields_one_corrupt_entry(tmp_path: Path) -> None:
    path = tmp_path / "segment-00000000000000000000.log"
    path.write_bytes(b"hello world, not a segment")
    assert list(scan_segment(path, STREAM)) == [
        CorruptEntry(position=0, reason="bad segment magic b'hello wo'")
    ]
