"""The ingest path's bulk encoders give exactly what the per-record code they replaced gave.

Each oracle below is the earlier, one-record-at-a-time formulation written out here:
protobuf objects for the request and the response, ``hashlib`` updates per record for
the idempotency key, a ``struct`` loop for the log entries, a per-record check for
request problems and ``millrace inject``'s line-by-line batching. Hypothesis draws the
records, including the edges of every varint length, empty keys and values, and event
times at and past the accepted range.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zlib
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.commands import _inject_batches, _inject_progress
from millrace.commands._inject_batches import Batch, Malformed, read_batches
from millrace.commands._inject_progress import CountedLines
from millrace.dataplane import RecordBatch, decode_ingest_request, ingest_response
from millrace.injector.client import ingest_request_bytes
from millrace.injector.ingest_service import MAX_RECORD_BYTES, REQUEST_LIMITS, problem_text
from millrace.injector.json_lines import MAX_LINE_RECORD_BYTES
from millrace.injector.log import stream_tag
from millrace.injector.log._format import encode_request
from millrace.wire.v1 import ingest_pb2
from tests.injector_unit.test_json_lines import oracle as json_oracle

MIN_MS, MAX_MS = -62_135_596_800_000, 253_402_300_799_999
lengths = st.sampled_from([0, 1, 2, 100, 119, 120, 127, 128, 200, 16_383, 16_384])
blobs = st.binary(max_size=3) | lengths.flatmap(lambda n: st.binary(min_size=n, max_size=n))
int64 = st.integers(-(2**63), 2**63 - 1)
times = (
    int64
    | st.integers(-(2**14), 2**14)
    | st.integers(1_600_000_000_000, 1_800_000_000_000)
    | st.sampled_from([0, 127, 128, 2**35 - 1, 2**35, MIN_MS, MAX_MS, MIN_MS - 1, MAX_MS + 1])
)
records = st.lists(st.tuples(blobs, blobs, times), max_size=40)
fast = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(records, st.text(max_size=5), st.text(max_size=5))
def test_request_bytes_are_what_protobuf_writes(
    batch: list[tuple[bytes, bytes, int]], stream: str, key: str
) -> None:
    message = ingest_pb2.IngestRequest(
        stream=stream,
        idempotency_key=key,
        records=[ingest_pb2.IngestRecord(key=k, value=v, event_time_ms=t) for k, v, t in batch],
    )
    assert ingest_request_bytes(stream, batch, key) == message.SerializeToString()


def test_request_bytes_refuse_what_protobuf_refuses() -> None:
    with pytest.raises(TypeError):
        ingest_request_bytes("s", [("text", b"v", 1_700_000_000_000)])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        ingest_request_bytes("s", [(b"k", b"v", 1.5)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="int64"):
        ingest_request_bytes("s", [(b"k", b"v", 2**63)])


@fast
@given(records, st.integers(1, 10**6))
def test_idempotency_keys_hash_what_they_hashed_record_by_record(
    batch: list[tuple[bytes, bytes, int]], first_line: int
) -> None:
    batch = [(k, v, t) for k, v, t in batch if -(2**63) <= t < 2**63]
    digest = hashlib.sha256()
    for key, value, ts in batch:
        digest.update(struct.pack(">QQq", len(key), len(value), ts))
        digest.update(key)
        digest.update(value)
    expected = f"events.jsonl:{digest.hexdigest()}:{first_line}"
    assert Batch(first_line, batch).idempotency_key("events.jsonl") == expected


def entries_oracle(
    batch: list[tuple[bytes, bytes, int]],
    ikey: bytes,
    source: bytes,
    *,
    offset: int,
    ingest_ms: int,
    position: int,
    next_index: int,
    index_every: int,
) -> tuple[bytes, tuple[int, int, int, int], list[tuple[int, int]]]:
    """docs/log-format.md, one record at a time."""
    out = b""
    index = []
    first = offset
    for key, value, event_ms in batch:
        body = struct.pack(">BQqqI", 1, offset, event_ms, ingest_ms, len(key)) + key + value
        if offset == next_index:
            index.append((offset, position))
            next_index += index_every
        out += struct.pack(">II", len(body), zlib.crc32(body)) + body
        position += 8 + len(body)
        offset += 1
    commit = (
        struct.pack(">BQIH", 2, first, offset - first, len(ikey))
        + ikey
        + struct.pack(">I", len(source))
        + source
        + struct.pack(">q", ingest_ms)
    )
    out += struct.pack(">II", len(commit), zlib.crc32(commit)) + commit
    event_times = [t for _, _, t in batch] or [0]
    result = (position + 8 + len(commit), next_index, min(event_times), max(event_times))
    return out, result, index


@fast
@given(
    st.lists(st.tuples(blobs, blobs, int64), max_size=40),
    st.binary(max_size=20),
    st.binary(max_size=20),
    st.integers(0, 2**40),
    st.integers(-(2**40), 2**40),
    st.integers(16, 2**30),
    st.integers(-5, 60),
    st.integers(1, 12),
)
def test_log_entries_are_the_documented_bytes(  # noqa: PLR0917 - hypothesis draws them
    batch: list[tuple[bytes, bytes, int]],
    ikey: bytes,
    source: bytes,
    offset: int,
    ingest_ms: int,
    position: int,
    index_from: int,
    index_every: int,
) -> None:
    settings = {
        "offset": offset,
        "ingest_ms": ingest_ms,
        "position": position,
        "next_index": offset + index_from,
        "index_every": index_every,
    }
    parts: list[bytes] = []
    index: list[tuple[int, int]] = []
    result = encode_request(parts, RecordBatch(batch), ikey, source, index=index, **settings)
    assert (b"".join(parts), result, index) == entries_oracle(batch, ikey, source, **settings)


def test_malformed_records_are_refused_by_the_batch() -> None:
    for bad in (
        [(b"k", b"v", 1), (b"k", b"v", 2, b"x")],  # one record too long
        [(b"k", b"v")],
        [(b"k", "v", 1)],
        [(b"k", b"v", 2**63)],
        [(b"k", b"v", 1.5)],
    ):
        with pytest.raises((ValueError, TypeError)):
            RecordBatch(bad)  # type: ignore[arg-type]


@fast
@given(st.integers(0, 2**63), st.integers(0, 3000), st.text(max_size=8), st.booleans())
def test_record_ids_are_the_tag_then_each_offset(
    first: int, count: int, stream: str, replayed: bool
) -> None:
    first = min(first, 2**64 - 1 - count)
    tag = stream_tag(stream)
    expected = ingest_pb2.IngestResponse(
        record_ids=[tag + offset.to_bytes(8, "big") for offset in range(first, first + count)],
        first_offset=first,
        replayed=replayed,
    )
    response = ingest_pb2.IngestResponse.FromString(ingest_response(tag, first, count, replayed))
    assert response == expected


def problem_oracle(request: ingest_pb2.IngestRequest) -> str | None:
    for index, record in enumerate(request.records):
        size = len(record.key) + len(record.value)
        if size > 4 << 20:
            return f"record {index} is {size} bytes (key + value); the limit is {4 << 20}"
        if not MIN_MS <= record.event_time_ms <= MAX_MS:
            return (
                f"record {index}: event time {record.event_time_ms} ms is outside the accepted "
                f"range {MIN_MS}..{MAX_MS} (years 1 to 9999)"
            )
    return None


big = st.sampled_from([0, 1 << 20, (4 << 20) - 1, 4 << 20, (4 << 20) + 1]).map(bytes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.binary(max_size=2) | big, st.binary(max_size=2), times), max_size=6))
def test_request_problems_are_found_as_record_by_record(
    batch: list[tuple[bytes, bytes, int]],
) -> None:
    batch = [(k, v, t) for k, v, t in batch if -(2**63) <= t < 2**63]
    request = ingest_pb2.IngestRequest(
        stream="events",
        records=[ingest_pb2.IngestRecord(key=k, value=v, event_time_ms=t) for k, v, t in batch],
    )
    expected = problem_oracle(request) if batch else "the request carries no records"
    name, key, decoded, problem = decode_ingest_request(
        request.SerializeToString(), **REQUEST_LIMITS
    )
    assert (name, key, decoded.records()) == ("events", "", batch)
    assert (problem and problem_text(problem)) == expected


def batches_oracle(
    lines: list[bytes], batch_records: int, max_bytes: int
) -> tuple[list[tuple[int, list[tuple[bytes, bytes, int]]]], list[tuple[int, str]]]:
    """``millrace inject``'s batching as it was, one line at a time, on the json reading."""
    batches: list[tuple[int, list[tuple[bytes, bytes, int]]]] = []
    malformed: list[tuple[int, str]] = []
    current: list[tuple[bytes, bytes, int]] = []
    first = size = 0
    for number, raw in enumerate(lines, start=1):
        try:
            record = json_oracle(raw)
        except UnicodeDecodeError as exc:
            malformed.append((number, f"not UTF-8: {exc.reason} at byte {exc.start}"))
            continue
        except ValueError as exc:
            malformed.append((number, str(exc)))
            continue
        if record is None:
            continue
        if not current:
            first = number
        current.append(record)
        size += len(record[0]) + len(record[1])
        if len(current) >= batch_records or size >= max_bytes:
            batches.append((first, current))
            current, size = [], 0
    if current:
        batches.append((first, current))
    return batches, malformed


line_pool = st.sampled_from(
    [b"", b"  ", b"not json", b"\xff\xfe", b'{"key": "k"}', b'{"key": "k", "value": 1, "ts": 1.5}']
) | st.builds(
    lambda key, size, ts: json.dumps({"key": key, "value": "v" * size, "ts": ts}).encode(),
    st.sampled_from(["u1", "u22", 7]),
    st.integers(0, 60),
    st.integers(1_700_000_000_000, 1_700_000_000_100),
)


@fast
@given(st.lists(line_pool, max_size=60), st.integers(1, 12), st.integers(1, 400))
def test_batches_are_cut_where_line_by_line_batching_cut_them(
    lines: list[bytes], batch_records: int, max_bytes: int
) -> None:
    malformed: list[Malformed] = []
    with patch.object(_inject_batches, "MAX_BATCH_BYTES", max_bytes):
        batches = list(read_batches(iter(lines), batch_records, malformed))
    got = (
        [(b.first_line, b.records.records()) for b in batches],
        [(m.line, m.reason) for m in malformed],
    )
    assert got == batches_oracle(lines, batch_records, max_bytes)
    assert all(b.size_bytes == sum(len(k) + len(v) for k, v, _ in b.records) for b in batches)


def test_a_line_holds_no_more_than_the_injector_takes() -> None:
    assert MAX_LINE_RECORD_BYTES == MAX_RECORD_BYTES


@fast
@given(st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r", b"\r\n", b"{}"]), max_size=30))
def test_input_lines_are_the_lines_a_file_iterates(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    for block in (1, 3, 1 << 20):
        with patch.object(_inject_progress, "READ_BYTES", block):
            lines = CountedLines(io.BytesIO(data))
            assert list(lines) == list(io.BytesIO(data))
        assert lines.bytes_read == len(data)
