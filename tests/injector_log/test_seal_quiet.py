"""``StreamLog.seal_if_due``: a quiet stream's old active segment is sealed without an append."""

from __future__ import annotations

import threading
from pathlib import Path

from millrace.injector.log import AppendRequest, LogConfig, LogRecord, StreamLog, scan_segment
from millrace.injector.log._index import read_index
from tests.injector_log.workload import STREAM, WALL_START_MS, matches, request, triples
from tests.support import ManualClock

SEGMENT_MS = 1_000
CONFIG = LogConfig(segment_bytes=1 << 20, segment_ms=SEGMENT_MS, index_every=5, fsync=True)


def test_an_old_active_segment_is_sealed_without_an_append(tmp_path: Path) -> None:
    clock = ManualClock(WALL_START_MS)
    records = triples(1, 12)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock) as log:
        log.append([AppendRequest(records=records)])
        clock.advance(SEGMENT_MS - 1)
        assert log.seal_if_due() is None, "not old enough yet"
        clock.advance(1)
        sealed = log.seal_if_due()
        assert sealed is not None and sealed.sealed
        assert (sealed.base_offset, sealed.end_offset, sealed.records) == (0, 12, 12)
        first, active = log.segments()
        assert first == sealed
        assert not active.sealed and active.base_offset == active.end_offset == 12
        assert read_index(Path(first.path.removesuffix(".log") + ".idx")).end_offset == 12
        # What Spark reads: the sealed file on its own holds the whole tail.
        scanned = [r for r in scan_segment(first.path, STREAM) if isinstance(r, LogRecord)]
        assert len(scanned) == 12
        assert all(matches(r, t) for r, t in zip(scanned, records, strict=True))
        clock.advance(10 * SEGMENT_MS)
        assert log.seal_if_due() is None, "the new active segment is empty"
        assert len(log.segments()) == 2
        later = triples(2, 3)
        [result] = log.append([AppendRequest(records=later)])
        assert result.first_offset == 12, "appends continue in the new segment"
        assert [r.offset for r in log.read(0, 100)] == list(range(15))
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock) as log:
        assert log.recovery is not None and not log.recovery.reason
        assert [s.sealed for s in log.segments()] == [True, False]
        assert [r.offset for r in log.read(0, 100)] == list(range(15))


def test_an_empty_or_commit_only_segment_is_not_sealed(tmp_path: Path) -> None:
    clock = ManualClock(WALL_START_MS)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock) as log:
        clock.advance(10 * SEGMENT_MS)
        assert log.seal_if_due() is None, "no append at all"
        log.append([AppendRequest(records=[], source=b"pos")])
        clock.advance(10 * SEGMENT_MS)
        assert log.seal_if_due() is None, "commits without records: nothing for readers"
        assert len(log.segments()) == 1


def test_a_full_active_segment_is_sealed_too(tmp_path: Path) -> None:
    clock = ManualClock(WALL_START_MS)
    config = LogConfig(segment_bytes=1 << 10, segment_ms=3_600_000, fsync=False)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=config, clock=clock) as log:
        log.append([request(3, 40)])
        assert log.segments()[-1].size_bytes >= config.segment_bytes
        sealed = log.seal_if_due()
        assert sealed is not None and sealed.records == 40


def test_sealing_races_appends_safely(tmp_path: Path) -> None:
    """A sealer thread rolls the active segment whenever it holds records while a writer
    appends: every request lands whole, offsets stay dense, the log reopens clean."""
    clock = ManualClock(WALL_START_MS)
    config = LogConfig(segment_bytes=1 << 20, segment_ms=1, index_every=3, fsync=False)
    requests = [request(tag, 4) for tag in range(300)]
    done = threading.Event()
    sealed_count = 0
    with StreamLog.open(tmp_path / STREAM, STREAM, config=config, clock=clock) as log:

        def seal() -> None:
            nonlocal sealed_count
            while not done.is_set():
                clock.advance(1)
                if log.seal_if_due() is not None:
                    sealed_count += 1

        sealer = threading.Thread(target=seal)
        sealer.start()
        try:
            for item in requests:
                log.append([item])
        finally:
            done.set()
            sealer.join()
        clock.advance(1)
        if log.seal_if_due() is not None:
            sealed_count += 1
        segments = log.segments()
        assert all(s.sealed for s in segments[:-1]) and not segments[-1].sealed
        # Appends roll due segments themselves too, so there may be more segments than seals.
        assert sealed_count >= 1, "at least the last request's segment"
        assert len(segments) >= sealed_count + 1
    with StreamLog.open(tmp_path / STREAM, STREAM, config=config, clock=clock) as log:
        stored = log.read(0, 10_000)
        expected = [t for item in requests for t in item.records]
        assert len(stored) == len(expected) == 1200
        assert all(matches(r, t) for r, t in zip(stored, expected, strict=True))
        assert [c.idempotency_key for c in log.commits()] == [r.idempotency_key for r in requests]
        for info in log.segments()[:-1]:
            scanned = list(scan_segment(info.path, STREAM))
            assert all(isinstance(r, LogRecord) for r in scanned)
            assert len(scanned) == info.records
