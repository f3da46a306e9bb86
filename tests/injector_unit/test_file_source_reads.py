"""``FileSource`` reads files a bounded piece at a time: any size, any line length.

A real log and group committer in ``tmp_path``; ``READ_BYTES`` is made small so
that files span many reads and lines straddle them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from millrace.injector import file_source
from millrace.injector.file_source import Position
from millrace.injector.log import LogConfig, StreamLog
from tests.support.file_sources import tail_until

STREAM = "events"


@pytest.fixture
def stream_log(tmp_path: Path) -> Iterator[StreamLog]:
    log = StreamLog.open(tmp_path / "log" / STREAM, STREAM, config=LogConfig(fsync=False))
    yield log
    log.close()


def rejected(rejects: Path) -> list[tuple[int, str]]:
    return [(r["line"], r["reason"]) for r in map(json.loads, rejects.read_text().splitlines())]


class SizedReads:
    """``open`` for the file source that records the size asked of every read."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __call__(self, path: Path, mode: str) -> _Recorded:
        assert mode == "rb"
        return _Recorded(open(path, "rb"), self.sizes)


class _Recorded:
    def __init__(self, handle: BinaryIO, sizes: list[int]) -> None:
        self._handle, self._sizes = handle, sizes

    def __enter__(self) -> _Recorded:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()

    def seek(self, offset: int) -> int:
        return self._handle.seek(offset)

    def read(self, size: int = -1) -> bytes:
        self._sizes.append(size)
        return self._handle.read(size)


def test_a_file_many_reads_long_is_ingested_line_for_line(
    tmp_path: Path, stream_log: StreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_source, "READ_BYTES", 97)
    reads = SizedReads()
    monkeypatch.setattr(file_source, "open", reads, raising=False)
    rng = random.Random(3)
    lines, valid = [], []
    for n in range(300):
        if rng.random() < 0.1:
            lines.append("not json")
        else:
            key = f"k{n}" + "x" * rng.randrange(40)
            lines.append(json.dumps({"key": key, "value": n, "ts": 1000 + n}))
            valid.append(key.encode())
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    data = "".join(line + "\n" for line in lines).encode()
    (incoming / "part-000.jsonl").write_bytes(data)
    rejects = tmp_path / "log" / STREAM / "rejects.jsonl"
    tail_until(incoming, stream_log, Position("part-000.jsonl", len(data), 301), rejects)
    assert [r.key for r in stream_log.read(0, 1000)] == valid
    bad = [n for n, line in enumerate(lines, 1) if line == "not json"]
    assert [line for line, _ in rejected(rejects)] == bad
    assert reads.sizes and all(0 <= size <= 97 for size in reads.sizes), "bounded reads only"


def test_a_line_longer_than_a_read_is_rejected_once_its_end_is_written(
    tmp_path: Path, stream_log: StreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_source, "READ_BYTES", 64)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    path = incoming / "part-000.jsonl"
    first = json.dumps({"key": "a", "value": 1, "ts": 1}) + "\n"
    path.write_text(first + '{"key": "b", "value": "' + "y" * 300)  # still being written
    rejects = tmp_path / "log" / STREAM / "rejects.jsonl"
    tail_until(incoming, stream_log, Position(path.name, len(first), 2), rejects)
    assert not rejects.exists() or rejected(rejects) == [], "an unfinished line is waited for"

    last = json.dumps({"key": "c", "value": 3, "ts": 3}) + "\n"
    with open(path, "a") as out:
        out.write('", "ts": 2}\n' + last)
    tail_until(incoming, stream_log, Position(path.name, path.stat().st_size, 4), rejects)
    assert [r.key for r in stream_log.read(0, 10)] == [b"a", b"c"]
    assert rejected(rejects) == [(2, "the line is longer than 64 bytes (not read)")]
