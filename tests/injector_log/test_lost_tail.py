"""A lost log tail, accepted: the offsets recorded as lost, the log going on above them
(issue 30), across reopens and a crash between recording the loss and rolling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from millrace.injector.log import AppendRequest, LogConfig, LogCorruptedError, StreamLog
from tests.support import ManualClock

STREAM = "in"
CONFIG = LogConfig(fsync=False)


def append(log: StreamLog, start: int, count: int) -> None:
    for n in range(start, start + count):
        log.append([AppendRequest(records=[(b"k%d" % n, b"v", n)])])


def test_the_log_goes_on_above_the_lost_offsets(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock) as log:
        append(log, 0, 5)
        lost = log.skip_lost(12)
        assert (lost.first, lost.end, lost.records) == (5, 12, 7)
        assert log.next_offset == 12
        append(log, 100, 3)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock) as log:
        assert log.lost == (lost,)
        assert log.next_offset == 15
        assert [r.offset for r in log.read(0, 100)] == [0, 1, 2, 3, 4], "a read stops at a loss"
        assert [r.offset for r in log.read(5, 100)] == [12, 13, 14], "and starts above it"
        assert [r.offset for r in log.read(13, 100)] == [13, 14]
        with pytest.raises(ValueError, match="not past the log's end"):
            log.skip_lost(15)
    body = json.loads((tmp_path / STREAM / "lost.json").read_text())
    assert body == {"lost": [{"from": 5, "to": 12, "recorded_ms": 1_700_000_000_000}]}


def test_a_crash_after_recording_the_loss_rolls_at_the_next_open(tmp_path: Path) -> None:
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG) as log:
        append(log, 0, 3)
    # What skip_lost writes first, alone: the segment above the loss was never made.
    (tmp_path / STREAM / "lost.json").write_text(
        json.dumps({"lost": [{"from": 3, "to": 9, "recorded_ms": 1}]})
    )
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG) as log:
        assert log.next_offset == 9
        append(log, 50, 1)
        assert [r.offset for r in log.read(0, 10)] == [0, 1, 2]
        assert [r.offset for r in log.read(3, 10)] == [9]


def test_a_gap_nobody_accepted_is_still_corruption(tmp_path: Path) -> None:
    with StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG) as log:
        append(log, 0, 3)
        log.skip_lost(9)
        append(log, 50, 1)
    (tmp_path / STREAM / "lost.json").write_text(json.dumps({"lost": []}))
    with pytest.raises(LogCorruptedError, match="segment before it ends at 3"):
        StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG)
