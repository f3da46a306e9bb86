"""The native ``IngestRequest`` codec against Python protobuf (``millrace.wire.v1``).

- ``ingest_request`` writes exactly the bytes ``SerializeToString`` writes.
- ``decode_ingest_request`` reads protobuf's bytes, and bytes written by hand the ways
  protobuf permits (fields in any order, repeated singular fields (the last wins),
  records interleaved with other fields, unknown fields of every wire type, defaults
  written out, padded varints), to what protobuf reads from them.
- On any bytes it either decodes or raises ``UndecodableRequestError`` (a ValueError);
  it refuses whatever protobuf refuses, and what it accepts protobuf reads the same.
"""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.dataplane import (
    RecordBatch,
    UndecodableRequestError,
    decode_ingest_request,
    ingest_request,
)
from millrace.wire.v1 import ingest_pb2
from tests.support.damaged_bytes import damaged

Rec = tuple[bytes, bytes, int]
Request = tuple[str, str, list[Rec]]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Nothing is too big or too many: what is compared is the decoding, not the checks.
LIMITS = {
    "max_records": 1 << 30,
    "max_record_bytes": 1 << 40,
    "max_idempotency_key_bytes": 1 << 30,
    "min_event_time_ms": INT64_MIN,
    "max_event_time_ms": INT64_MAX,
}
fast = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

lengths = st.sampled_from([0, 1, 2, 127, 128, 129, 16_383, 16_384, 16_385])
blobs = st.binary(max_size=4) | lengths.flatmap(lambda n: st.binary(min_size=n, max_size=n))
times = st.one_of(
    st.integers(INT64_MIN, INT64_MAX),
    st.integers(-300, 300),
    st.integers(1_600_000_000_000, 1_800_000_000_000),
    st.sampled_from(
        [0, -1, 127, 128, 2**35 - 1, 2**35, 2**62, INT64_MIN, INT64_MAX, INT64_MIN + 1]
    ),
)
records = st.lists(st.tuples(blobs, blobs, times), max_size=6)
names = st.text(max_size=6) | st.integers(125, 130).map(lambda n: "s" * n)


def native(raw: bytes) -> Request | None:
    """The native reading of ``raw``; None when it raises UndecodableRequestError."""
    try:
        stream, key, batch, problem = decode_ingest_request(raw, **LIMITS)
    except UndecodableRequestError as exc:
        assert isinstance(exc, ValueError)
        return None
    assert problem == (None if len(batch) else ("no_records",))
    return stream, key, batch.records()


def protobuf(raw: bytes) -> Request | None:
    """Python protobuf's reading of ``raw``; None when it raises DecodeError."""
    try:
        message = ingest_pb2.IngestRequest.FromString(raw)
    except DecodeError:
        return None
    rows = [(r.key, r.value, r.event_time_ms) for r in message.records]
    return message.stream, message.idempotency_key, rows


def agrees_with_protobuf(raw: bytes) -> Request | None:
    """Native refuses what protobuf refuses; what native reads, protobuf reads too, but
    for the documented leniency (below: tags and lengths padded past five bytes, read
    as their canonical form)."""
    ours, theirs = native(raw), protobuf(raw)
    if theirs is None and ours is not None:
        canonical = canonical_form(raw)
        assert canonical is not None and canonical != raw, (
            f"native read {raw!r} as {ours!r}; protobuf refuses it"
        )
        theirs = protobuf(canonical)
    if ours is not None:
        assert theirs == ours, raw
    return ours


RECORDS_FIELD = 3
"""``IngestRequest.records``: the one field holding messages."""


def canonical_form(raw: bytes, nested: int | None = RECORDS_FIELD) -> bytes | None:
    """``raw`` with every tag and length written in its fewest bytes, inside the records
    too (not inside groups or unknown fields, which protobuf skips unread); None when
    ``raw`` is not well-formed wire format."""
    out, at, groups = bytearray(), 0, 0
    while at < len(raw):
        found = read_varint(raw, at)
        if found is None:
            return None
        key, at = found
        out += varint(key)
        wire_type = key & 7
        if wire_type in (VARINT, I64, I32):
            end = {I64: at + 8, I32: at + 4}.get(wire_type)
            if end is None:
                value = read_varint(raw, at)
                if value is None:
                    return None
                end = value[1]
            if end > len(raw):
                return None
            out += raw[at:end]
            at = end
        elif wire_type == LEN:
            length = read_varint(raw, at)
            if length is None or length[1] + length[0] > len(raw):
                return None
            payload = raw[length[1] : length[1] + length[0]]
            if groups == 0 and key >> 3 == nested:
                inner = canonical_form(payload, None)
                if inner is None:
                    return None
                payload = inner
            out += varint(len(payload)) + payload
            at = length[1] + length[0]
        elif wire_type == SGROUP:
            groups += 1
        elif wire_type == EGROUP and groups:
            groups -= 1
        else:
            return None
    return bytes(out)


def read_varint(raw: bytes, at: int) -> tuple[int, int] | None:
    """The varint at ``at`` (at most ten bytes) and where it ends; None if cut short."""
    value = 0
    for i in range(10):
        if at + i >= len(raw):
            return None
        value |= (raw[at + i] & 0x7F) << (7 * i)
        if not raw[at + i] & 0x80:
            return value, at + i + 1
    return None


def message(stream: str, key: str, rows: list[Rec]) -> bytes:
    request = ingest_pb2.IngestRequest(
        stream=stream,
        idempotency_key=key,
        records=[ingest_pb2.IngestRecord(key=k, value=v, event_time_ms=t) for k, v, t in rows],
    )
    data: bytes = request.SerializeToString()
    return data


# ---------------------------------------------------------------------------------------
# The wire format written by hand.

VARINT, I64, LEN, SGROUP, EGROUP, I32 = range(6)


def varint(n: int, width: int = 0) -> bytes:
    """``n`` (0 <= n < 2**64) as a varint of at least ``width`` bytes (zero padded)."""
    groups = []
    while True:
        groups.append(n & 0x7F)
        n >>= 7
        if not n:
            break
    groups += [0] * (width - len(groups))
    return bytes([g | 0x80 for g in groups[:-1]] + [groups[-1]])


# protobuf (upb) refuses tags and lengths of more than 5 bytes (see the known
# disagreement below); values may take all 10.
tag_widths = st.integers(0, 5)
value_widths = st.integers(0, 10)


@st.composite
def tag(draw: st.DrawFn, field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type, draw(tag_widths))


@st.composite
def length_delimited(draw: st.DrawFn, field: int, payload: bytes) -> bytes:
    return draw(tag(field, LEN)) + varint(len(payload), draw(tag_widths)) + payload


@st.composite
def int64_field(draw: st.DrawFn, field: int, value: int) -> bytes:
    return draw(tag(field, VARINT)) + varint(value % 2**64, draw(value_widths))


@st.composite
def unknown_field(draw: st.DrawFn, lowest: int, depth: int = 0) -> bytes:
    """A field whose number (>= ``lowest``) the message does not declare, any wire type;
    groups hold further fields of any number."""
    field = draw(
        st.integers(lowest, 2**29 - 1)
        | st.sampled_from([lowest, 15, 16, 2047, 2048, 19_000, 19_999, 2**29 - 1])
    )
    kinds = [VARINT, I64, LEN, I32] + ([SGROUP] if depth < 2 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == VARINT:
        return draw(tag(field, VARINT)) + varint(draw(st.integers(0, 2**64 - 1)))
    if kind == I64:
        return draw(tag(field, I64)) + draw(st.binary(min_size=8, max_size=8))
    if kind == I32:
        return draw(tag(field, I32)) + draw(st.binary(min_size=4, max_size=4))
    if kind == LEN:
        return draw(length_delimited(field, draw(st.binary(max_size=12))))
    inside = draw(st.lists(unknown_field(1, depth + 1), max_size=3))
    return draw(tag(field, SGROUP)) + b"".join(inside) + draw(tag(field, EGROUP))


@st.composite
def interleaved(draw: st.DrawFn, sequences: list[list[bytes]]) -> bytes:
    """The pieces of every sequence, each sequence in its order, sequences interleaved
    at random."""
    order = draw(st.permutations([i for i, seq in enumerate(sequences) for _ in seq]))
    cursors = [iter(seq) for seq in sequences]
    return b"".join(next(cursors[i]) for i in order)


@st.composite
def singular(draw: st.DrawFn, pieces: st.SearchStrategy[bytes], last: bytes) -> list[bytes]:
    """A singular field's occurrences: earlier ones (overridden) then ``last``."""
    return [*draw(st.lists(pieces, max_size=2)), last]


def bytes_fields(field: int, payloads: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Field ``field`` holding one of ``payloads``."""
    return payloads.flatmap(lambda payload: length_delimited(field, payload))


@st.composite
def record_bytes(draw: st.DrawFn, record: Rec) -> bytes:
    """An ``IngestRecord`` message of ``record``, written any way protobuf allows."""
    key, value, ts = record
    fields = []
    for number, blob in ((1, key), (2, value)):
        last = draw(length_delimited(number, blob))
        if blob or draw(st.booleans()):  # an empty bytes field written out, or left out
            fields.append(draw(singular(bytes_fields(number, blobs), last)))
    if ts or draw(st.booleans()):
        decoys = times.flatmap(lambda t: int64_field(3, t))
        fields.append(draw(singular(decoys, draw(int64_field(3, ts)))))
    fields += [[piece] for piece in draw(st.lists(unknown_field(4), max_size=2))]
    return draw(interleaved(fields))


@st.composite
def odd_requests(draw: st.DrawFn) -> tuple[bytes, Request]:
    """The bytes of a request written any way protobuf allows, and the request."""
    stream, key, rows = draw(names), draw(names), draw(records)
    sequences = []
    for number, text in ((1, stream), (2, key)):
        last = draw(length_delimited(number, text.encode()))
        if text or draw(st.booleans()):
            decoys = bytes_fields(number, names.map(str.encode))
            sequences.append(draw(singular(decoys, last)))
    if rows:
        sequences.append([draw(length_delimited(3, draw(record_bytes(r)))) for r in rows])
    sequences += [[piece] for piece in draw(st.lists(unknown_field(4), max_size=3))]
    return draw(interleaved(sequences)), (stream, key, rows)


# ---------------------------------------------------------------------------------------
# Properties.


@fast
@given(names, names, records)
def test_request_bytes_are_what_protobuf_writes(stream: str, key: str, rows: list[Rec]) -> None:
    raw = message(stream, key, rows)
    assert ingest_request(stream, key, RecordBatch(rows)) == raw
    assert native(raw) == (stream, key, rows) == protobuf(raw)


@fast
@given(names, names, records, st.lists(unknown_field(4), min_size=1, max_size=4))
def test_unknown_fields_appended_are_skipped(
    stream: str, key: str, rows: list[Rec], unknown: list[bytes]
) -> None:
    raw = message(stream, key, rows) + b"".join(unknown)
    assert native(raw) == (stream, key, rows) == protobuf(raw)


@fast
@given(odd_requests())
def test_requests_written_any_way_protobuf_allows(case: tuple[bytes, Request]) -> None:
    raw, request = case
    assert protobuf(raw) == request
    assert native(raw) == request


@fast
@given(st.binary(max_size=200))
def test_arbitrary_bytes(raw: bytes) -> None:
    agrees_with_protobuf(raw)


@fast
@given(
    st.one_of(
        st.builds(message, names, names, records),
        odd_requests().map(lambda case: case[0]),
    ).flatmap(damaged)
)
def test_damaged_requests(raw: bytes) -> None:
    agrees_with_protobuf(raw)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"\x0a\x01\xff", id="stream-not-utf8"),
        pytest.param(b"\x0a\x03\xed\xa0\x80", id="surrogate-utf8"),
        pytest.param(b"\x0a\x02\xc0\x80", id="overlong-utf8"),
        pytest.param(b"\x12\x01\xff", id="idempotency-key-not-utf8"),
        pytest.param(b"\x1a\x05\x18" + b"\xff" * 4, id="varint-cut-short"),
        pytest.param(b"\x1a\x0c\x18" + b"\xff" * 10 + b"\x01", id="varint-of-11-bytes"),
        pytest.param(b"\x02\x00", id="field-0"),
        pytest.param(b"\x0c", id="end-group-without-start"),
        pytest.param(b"\x23\x2c", id="group-ended-by-another-field"),
        pytest.param(b"\x23" * 101 + b"\x24" * 101, id="groups-nested-too-deep"),
        pytest.param(b"\x0e", id="wire-type-6"),
        pytest.param(b"\x0f", id="wire-type-7"),
        pytest.param(b"\x0a\xff\xff\xff\xff\x0f", id="length-past-the-end"),
        pytest.param(b"\x21\x00", id="fixed64-cut-short"),
        pytest.param(b"\x82\x80\x80\x80\x10\x00", id="tag-past-32-bits"),
    ],
)
def test_what_protobuf_refuses_is_refused(raw: bytes) -> None:
    assert protobuf(raw) is None
    assert native(raw) is None


@pytest.mark.parametrize("depth", [1, 99, 100])
def test_nested_unknown_groups_are_skipped(depth: int) -> None:
    raw = b"\x23" * depth + b"\x24" * depth + b"\x0a\x01a"
    assert native(raw) == ("a", "", []) == protobuf(raw)


# A documented leniency: prost reads tags and lengths written as varints of up to 10
# bytes (the wire format's varint), protobuf's upb refuses those past 5 bytes. Such a
# request has one meaning, its canonical encoding's, and the native side reads that.
overlong = [
    pytest.param(b"\x8a\x80\x80\x80\x80\x00\x01a", b"\x0a\x01a", id="stream-tag-in-6-bytes"),
    pytest.param(b"\x0a\x81\x80\x80\x80\x80\x00a", b"\x0a\x01a", id="stream-length-in-6-bytes"),
    pytest.param(
        b"\x1a\x82\x80\x80\x80\x80\x00\x18\x01", b"\x1a\x02\x18\x01", id="record-length-in-6-bytes"
    ),
    pytest.param(
        b"\x1a\x07\x98\x80\x80\x80\x80\x00\x01", b"\x1a\x02\x18\x01", id="event-time-tag-in-6-bytes"
    ),
    pytest.param(b"\x22\x81\x80\x80\x80\x80\x00a", b"", id="unknown-length-in-6-bytes"),
]


@pytest.mark.parametrize(("raw", "canonical"), overlong)
def test_protobuf_refuses_tags_and_lengths_past_five_bytes(raw: bytes, canonical: bytes) -> None:
    assert protobuf(raw) is None


@pytest.mark.parametrize(("raw", "canonical"), overlong)
def test_tags_and_lengths_past_five_bytes_read_as_their_canonical_form(
    raw: bytes, canonical: bytes
) -> None:
    assert native(raw) == native(canonical) == protobuf(canonical)
