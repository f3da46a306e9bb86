"""The bulk scanner (``scan_segment_columns``, and ``read_partition`` over it) gives exactly
what ``scan_segment``, the entry-by-entry reader, gives: on segments the real ``StreamLog``
wrote, and on the same segments damaged."""

from __future__ import annotations

import io
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.injector.log import (
    AppendRequest,
    CorruptEntry,
    LogConfig,
    LogRecord,
    StreamLog,
    scan_segment,
    scan_segment_columns,
    stream_tag,
)
from millrace.spark_jobs.logsource import Bounds, Pushdown, SegmentPartition, read_partition
from millrace.spark_jobs.logsource._pushdown import CORRUPT, RECORD
from tests.spark_logsource._logs import commit_ends
from tests.support import ManualClock

STREAM = "clicks"
Triple = tuple[bytes, bytes, int]

values = st.one_of(
    st.binary(max_size=40),
    st.just(b""),
    st.binary(min_size=200, max_size=3000),
    st.integers(60_000, 200_000).map(lambda n: bytes([n % 251]) * n),  # longer than a read
)
records = st.tuples(st.binary(max_size=12), values, st.integers(-(1 << 63), (1 << 63) - 1))
requests = st.lists(st.lists(records, max_size=8), min_size=1, max_size=25)
READS = (40, 500, 4096, 1 << 20)


def write_log(root: Path, batches: list[list[Triple]], segment_bytes: int) -> list[Path]:
    """The segment files of a log the real writer wrote, one request per batch."""
    clock = ManualClock(1_700_000_000_000)
    config = LogConfig(segment_bytes=segment_bytes, fsync=False)
    log = StreamLog.open(root / STREAM, STREAM, config=config, clock=clock)
    for number, batch in enumerate(batches):
        clock.advance(7)
        log.append([AppendRequest(records=batch, idempotency_key=b"r%d" % number)])
    log.close()
    return sorted((root / STREAM).glob("segment-*.log"))


def bulk(source: Any, read_bytes: int = 1 << 20) -> list[LogRecord | CorruptEntry]:
    """What ``scan_segment_columns`` gives, as ``scan_segment`` gives it."""
    tag = stream_tag(STREAM)
    found: list[LogRecord | CorruptEntry] = []
    for item in scan_segment_columns(source, read_bytes=read_bytes):
        if isinstance(item, CorruptEntry):
            found.append(item)
            continue
        for i in range(len(item)):
            offset = int(item.offset[i])
            key_start, key_end = int(item.key_start[i]), int(item.key_end[i])
            found.append(
                LogRecord(
                    offset,
                    tag + offset.to_bytes(8, "big"),
                    item.data[key_start:key_end],
                    item.data[key_end : int(item.value_end[i])],
                    int(item.event_time_ms[i]),
                    int(item.ingest_time_ms[i]),
                )
            )
    return found


def damaged(data: bytes, how: str, where: float, bit: int) -> bytes:
    """``data`` (a segment file) damaged ``how``: at about ``where`` of it, flipping ``bit``."""
    at = 16 + int((len(data) - 16) * where)
    if how == "truncate":
        return data[:at]
    if how == "flip" and at < len(data):
        return data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]
    if how == "zero-tail":
        return data[:at] + bytes(len(data) - at)
    if how == "garbage":
        return data + bytes([bit + 1]) * (1 + int(where * 40))
    if how == "flip-with-crc" and (starts := entry_starts(data)):
        entry = starts[min(int(where * len(starts)), len(starts) - 1)]
        head = min(30, struct.unpack_from(">I", data, entry)[0])
        return flip_with_crc(data, entry + 8 + int(where * 10**6) % head, bit)
    return data


def entry_starts(data: bytes) -> list[int]:
    """Where the whole entries of a segment file start."""
    starts, position = [], 16
    while position + 8 <= len(data):
        end = position + 8 + struct.unpack_from(">I", data, position)[0]
        if end > len(data) or end == position + 8:
            break
        starts.append(position)
        position = end
    return starts


def flip_with_crc(data: bytes, at: int, bit: int) -> bytes:
    """Flip ``bit`` of byte ``at``, in an entry's body, and fix the entry's crc: damage that
    only the checks beyond the crc (types, lengths, offsets, COMMIT coverage) can catch."""
    entry = max(start for start in entry_starts(data) if start <= at)
    copy = bytearray(data)
    copy[at] ^= 1 << bit
    (length,) = struct.unpack_from(">I", copy, entry)
    struct.pack_into(">I", copy, entry + 4, zlib.crc32(copy[entry + 8 : entry + 8 + length]))
    return bytes(copy)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=requests,
    segment_bytes=st.sampled_from([300, 3000, 1 << 20]),
    read_bytes=st.sampled_from(READS),
    how=st.sampled_from(["none", "truncate", "flip", "zero-tail", "garbage", "flip-with-crc"]),
    where=st.floats(0, 1),
    bit=st.integers(0, 7),
)
def test_bulk_equals_scan_segment(
    *,
    batches: list[list[Triple]],
    segment_bytes: int,
    read_bytes: int,
    how: str,
    where: float,
    bit: int,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for path in write_log(Path(tmp), batches, segment_bytes):
            data = damaged(path.read_bytes(), how, where, bit)
            expected = list(scan_segment(io.BytesIO(data), STREAM))
            assert bulk(io.BytesIO(data), read_bytes) == expected
            if how != "none" and data != path.read_bytes():
                path.write_bytes(data)
                assert bulk(path, read_bytes) == expected


def test_a_large_log_in_many_reads(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    batches = [
        [
            (b"k%d" % rng.integers(50), rng.bytes(int(rng.integers(60))), int(rng.integers(9**9)))
            for _ in range(int(rng.integers(400)))
        ]
        for _ in range(60)
    ]  # fmt: skip
    [path] = write_log(tmp_path, batches, 64 << 20)
    expected = list(scan_segment(path, STREAM))
    assert len(expected) == sum(map(len, batches))
    for read_bytes in (64, 1000, 50_000, 1 << 20):  # requests longer and shorter than a read
        assert bulk(path, read_bytes) == expected


@pytest.mark.parametrize("cut", ["mid-entry", "before-commit", "header"])
def test_a_cut_segment(tmp_path: Path, cut: str) -> None:
    batches = [[(b"k", b"v%d" % (i * 10 + j), i) for j in range(5)] for i in range(30)]
    [path] = write_log(tmp_path, batches, 1 << 20)
    ends = commit_ends(path)
    size = {"mid-entry": ends[12] + 20, "before-commit": ends[13] - 30, "header": 9}[cut]
    data = path.read_bytes()[:size]
    expected = list(scan_segment(io.BytesIO(data), STREAM))
    assert isinstance(expected[-1], CorruptEntry)
    for read_bytes in READS:
        assert bulk(io.BytesIO(data), read_bytes) == expected


def test_every_head_byte_damaged_under_a_valid_crc(tmp_path: Path) -> None:
    batches = [[], [(b"ab", b"x", 1)], [(b"", b"", 2), (b"c", b"yy", 3)], [(b"d", b"z", 4)]]
    [path] = write_log(tmp_path, batches, 1 << 20)
    data = path.read_bytes()
    starts = entry_starts(data)
    for entry, end in zip(starts, [*starts[1:], len(data)], strict=True):
        for at in range(entry + 8, min(entry + 38, end)):
            for bit in (0, 1, 7):
                copy = flip_with_crc(data, at, bit)
                expected = list(scan_segment(io.BytesIO(copy), STREAM))
                assert bulk(io.BytesIO(copy), 64) == expected, (at, bit, expected[-1])


def test_values_that_look_like_records_do_not_fool_the_framing(tmp_path: Path) -> None:
    """A value holding a whole RECORD entry is a value: entries are framed from the start."""
    lookalikes = [
        [(b"k", fake_entry(offset + d), 5) for d in (0, 1, 2)] for offset in range(0, 90, 3)
    ]
    [path] = write_log(tmp_path, lookalikes, 1 << 20)
    for read in (40, 500, 1 << 20):
        assert bulk(path, read) == list(scan_segment(path, STREAM))


def fake_entry(offset: int) -> bytes:
    body = b"\x01" + offset.to_bytes(8, "big") + bytes(20) + b"\x00\x00\x00\x01k" + b"v"
    return struct.pack(">II", len(body), zlib.crc32(body)) + body


def partition(path: Path) -> SegmentPartition:
    base = int(path.name[8:28])
    return SegmentPartition(STREAM, str(path), base, path.name, True, False, None)


def oracle_rows(path: Path, pushdown: Pushdown) -> list[tuple[Any, ...]]:
    """``read_partition``'s rows, from ``scan_segment``: the rules, one record at a time."""
    rows: list[tuple[Any, ...]] = []
    for item in scan_segment(path, STREAM):
        if isinstance(item, CorruptEntry):
            if CORRUPT in pushdown.kinds:
                problem = (item.position, item.reason)
                rows.append((*(None,) * 5, STREAM, None, path.name, *problem))
            break
        if RECORD not in pushdown.kinds:
            continue
        if pushdown.offset.high is not None and item.offset > pushdown.offset.high:
            break  # the read stops here: whatever follows is never looked at
        if pushdown.offset.admits(item.offset) and pushdown.event_time.admits(item.event_time_ms):
            fields = (item.record_id, item.key, item.value, item.event_time_ms, item.ingest_time_ms)
            rows.append((*fields, STREAM, item.offset, path.name, None, None))
    return rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=requests,
    how=st.sampled_from(["none", "truncate", "flip", "zero-tail", "flip-with-crc"]),
    where=st.floats(0, 1),
    low=st.none() | st.integers(-2, 60),
    high=st.none() | st.integers(-2, 60),
    events=st.none() | st.integers(-(1 << 63), (1 << 63) - 1),
    kinds=st.sampled_from(
        [frozenset({RECORD}), frozenset({CORRUPT}), frozenset({RECORD, CORRUPT})]
    ),
    batch_rows=st.sampled_from([1, 7, 10_000]),
)
def test_read_partition_equals_the_rules_applied_to_scan_segment(
    *,
    batches: list[list[Triple]],
    how: str,
    where: float,
    low: int | None,
    high: int | None,
    events: int | None,
    kinds: frozenset[str],
    batch_rows: int,
) -> None:
    pushdown = Pushdown(
        offset=Bounds(low=low, high=high),
        event_time=Bounds(high=events),
        kinds=kinds,
    )
    with tempfile.TemporaryDirectory() as tmp:
        [path] = write_log(Path(tmp), batches, 1 << 30)
        path.write_bytes(damaged(path.read_bytes(), how, where, 3))
        batches_read = list(read_partition(partition(path), pushdown, batch_rows=batch_rows))
        rows = [tuple(row.values()) for b in batches_read for row in b.to_pylist()]
        assert rows == oracle_rows(path, pushdown)
        assert all(0 < b.num_rows <= batch_rows for b in batches_read)
