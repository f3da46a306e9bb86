"""A log built by appending known requests, and what reading it back must give."""

from __future__ import annotations

import random
from pathlib import Path

from millrace.injector.log import (
    AppendRequest,
    Commit,
    LogConfig,
    LogRecord,
    StreamLog,
    record_id,
)
from tests.injector_log.workload import STREAM, request
from tests.support import ManualClock

CONFIG = LogConfig(segment_bytes=8 << 10, segment_ms=60_000, index_every=7, fsync=True)


class Expected:
    """What the log must hold: every appended record and commit, by offset."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes, int, int]] = []
        self.commits: list[Commit] = []

    def add(self, log: StreamLog, requests: list[AppendRequest], now_ms: int) -> None:
        results = log.append(requests)
        for req, result in zip(requests, results, strict=True):
            assert result.first_offset == len(self.records)
            assert result.count == len(req.records)
            self.commits.append(
                Commit(
                    first_offset=result.first_offset,
                    count=result.count,
                    idempotency_key=req.idempotency_key,
                    source=req.source,
                    committed_at_ms=now_ms,
                )
            )
            self.records.extend((k, v, e, now_ms) for k, v, e in req.records)

    def check(self, got: list[LogRecord], first: int) -> None:
        assert [r.offset for r in got] == list(range(first, first + len(got)))
        for record in got:
            key, value, event_ms, ingest_ms = self.records[record.offset]
            assert (record.key, record.value, record.event_time_ms) == (key, value, event_ms)
            assert record.ingest_time_ms == ingest_ms
            assert record.record_id == record_id(STREAM, record.offset)


def build_log(tmp_path: Path, clock: ManualClock, calls: int = 60) -> tuple[StreamLog, Expected]:
    """A log of ``calls`` append calls; every 15th call comes 61 s after the one before."""
    log = StreamLog.open(tmp_path / STREAM, STREAM, config=CONFIG, clock=clock)
    expected = Expected()
    tag = 0
    rng = random.Random(5)
    for call in range(calls):
        clock.advance(61_000 if call % 15 == 14 else 10)
        requests = [request(tag + i) for i in range(rng.randint(1, 4))]
        tag += len(requests)
        expected.add(log, requests, clock.now_ms)
    return log, expected
