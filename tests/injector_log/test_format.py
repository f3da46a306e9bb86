"""The bytes on disk are exactly what ``docs/log-format.md`` describes.

These tests decode files with ``struct``, ``zlib`` and ``xxhash`` only, as
another implementation would, and never call the log's own decoders.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import xxhash

from millrace.injector.log import AppendRequest, LogConfig, StreamLog
from tests.injector_log.workload import STREAM, WALL_START_MS
from tests.support import ManualClock

DOC = Path(__file__).resolve().parents[2] / "docs" / "log-format.md"


def test_segment_bytes_follow_the_documented_layout(tmp_path: Path) -> None:
    clock = ManualClock(1_234)
    with StreamLog.open(tmp_path / STREAM, STREAM, clock=clock) as log:
        log.append(
            [
                AppendRequest(
                    records=[(b"alice", b"v1", -5), (b"", b"\xff\x00", 2**40)],
                    idempotency_key=b"idem",
                    source=b"file:7",
                )
            ]
        )
        path = Path(log.segments()[0].path)
    data = path.read_bytes()
    assert path.name == "segment-00000000000000000000.log"
    assert data[:8] == b"MRLOG\x01\n\x00"
    assert struct.unpack_from(">Q", data, 8) == (0,)
    at = 16
    bodies = []
    while at < len(data):
        length, crc = struct.unpack_from(">II", data, at)
        body = data[at + 8 : at + 8 + length]
        assert zlib.crc32(body) == crc
        bodies.append(body)
        at += 8 + length
    assert at == len(data)
    assert len(bodies) == 3

    def record(body: bytes) -> tuple[int, int, int, int, bytes, bytes]:
        kind, offset, event, ingest, key_len = struct.unpack_from(">BQqqI", body)
        assert kind == 1
        return offset, event, ingest, key_len, body[29 : 29 + key_len], body[29 + key_len :]

    assert record(bodies[0]) == (0, -5, 1_234, 5, b"alice", b"v1")
    assert record(bodies[1]) == (1, 2**40, 1_234, 0, b"", b"\xff\x00")
    commit = bodies[2]
    kind, first, count, ikey_len = struct.unpack_from(">BQIH", commit)
    assert (kind, first, count, ikey_len) == (2, 0, 2, 4)
    assert commit[15:19] == b"idem"
    (source_len,) = struct.unpack_from(">I", commit, 19)
    assert commit[23 : 23 + source_len] == b"file:7"
    assert struct.unpack_from(">q", commit, 23 + source_len) == (1_234,)
    assert len(commit) == 23 + source_len + 8


def test_record_ids_are_xxh3_of_the_stream_then_the_offset(tmp_path: Path) -> None:
    with StreamLog.open(tmp_path / STREAM, STREAM, clock=ManualClock(WALL_START_MS)) as log:
        log.append([AppendRequest(records=[(b"k", b"v", 0)] * 3)])
        [record] = log.read(2, 1)
    assert record.record_id == xxhash.xxh3_64_digest(STREAM.encode()) + (2).to_bytes(8, "big")


def test_index_bytes_follow_the_documented_layout(tmp_path: Path) -> None:
    clock = ManualClock(50_000)
    config = LogConfig(segment_bytes=600, index_every=3)
    with StreamLog.open(tmp_path / STREAM, STREAM, config=config, clock=clock) as log:
        for i in range(4):
            clock.advance(10)
            log.append(
                [AppendRequest(records=[(b"k%d" % j, b"x" * 20, 100 * i + j) for j in range(5)])]
            )
        first = log.segments()[0]
    assert first.sealed
    data = Path(first.path).with_suffix(".idx").read_bytes()
    assert data[:8] == b"MRIDX\x01\n\x00"
    assert struct.unpack_from(">Q", data, 8) == (first.base_offset,)
    footer_size = struct.calcsize(">IIQQQQqqqqq")
    (crc,) = struct.unpack_from(">I", data, len(data) - 4)
    assert zlib.crc32(data[:-4]) == crc
    footer = struct.unpack_from(">IIQQQQqqqqq", data, len(data) - 4 - footer_size)
    count, every, end, records, commits, size, emin, emax, imin, imax, created = footer
    assert len(data) == 16 + 16 * count + footer_size + 4
    assert (every, end, records, size) == (3, first.end_offset, first.records, first.size_bytes)
    assert (emin, emax) == (first.min_event_ms, first.max_event_ms)
    assert commits >= 1 and imin == created == 50_010 and imax >= imin
    entries = [struct.unpack_from(">QQ", data, 16 + 16 * i) for i in range(count)]
    assert [offset for offset, _ in entries] == list(range(0, first.end_offset, 3))
    segment = Path(first.path).read_bytes()
    for offset, position in entries:
        assert segment[position + 8] == 1
        assert struct.unpack_from(">Q", segment, position + 9) == (offset,)


def test_the_format_document_names_every_constant() -> None:
    text = DOC.read_text()
    for needle in (
        "MRLOG\\x01\\n\\x00",
        "MRIDX\\x01\\n\\x00",
        "segment-<base_offset:020d>.log",
        "zlib.crc32",
        "xxh3_64",
        "u64 offset",
        "committed_at_ms",
    ):
        assert needle in text, needle
