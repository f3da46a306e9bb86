"""The sink file's lines (issue 36): a JSON value is written as JSON, any record reads
back byte for byte, and the lines of version 1 (JSON inside a JSON string) stay
readable."""

from __future__ import annotations

import base64
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.sinks import parse_line, sink_line
from millrace.wire.v1 import record_pb2

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


def record(key: bytes, value: bytes, ts: int, producer: str) -> record_pb2.Record:
    return record_pb2.Record(
        record_id=bytes(range(16)), key=key, value=value, event_time_ms=ts, producer=producer
    )


def v1_line(r: record_pb2.Record) -> bytes:
    """What the sink wrote before version 2 (the reference for old files)."""

    def text(data: bytes) -> object:
        try:
            return data.decode()
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(data).decode()}

    body = {"record_id": r.record_id.hex(), "key": text(r.key), "value": text(r.value),
            "ts": r.event_time_ms, "producer": r.producer}  # fmt: skip
    return json.dumps(body, separators=(",", ":")).encode()


@settings(max_examples=300, deadline=None)
@given(
    key=st.binary(max_size=8) | st.text(max_size=8).map(str.encode),
    value=st.binary(max_size=40)
    | JSON_VALUES.map(lambda v: json.dumps(v).encode())
    | JSON_VALUES.map(lambda v: json.dumps(v, indent=1).encode())
    | st.text(max_size=20).map(str.encode),
    ts=st.integers(-(2**62), 2**62),
    producer=st.text(max_size=6),
)
def test_every_record_reads_back_from_its_line_in_both_versions(
    key: bytes, value: bytes, ts: int, producer: str
) -> None:
    r = record(key, value, ts, producer)
    line = sink_line(r)
    assert line.endswith(b"\n") and b"\n" not in line[:-1], "one line"
    body = json.loads(line)
    assert body["v"] == 2 and body["event_time_ms"] == ts
    for written in (line[:-1], v1_line(r)):
        found = parse_line(written)
        assert found is not None
        assert found.record() == record_pb2.Record(
            record_id=r.record_id, key=key, value=value, event_time_ms=ts, producer=producer
        )


@given(value=JSON_VALUES)
def test_a_json_value_is_json_in_the_line(value: object) -> None:
    raw = json.dumps(value, separators=(",", ":")).encode()
    body = json.loads(sink_line(record(b"k", raw, 1, "p")))
    assert body["value"] == value and "value_text" not in body


def test_other_values_say_what_they_are() -> None:
    assert json.loads(sink_line(record(b"k", b"plain text", 1, "")))["value_text"] == "plain text"
    assert json.loads(sink_line(record(b"k", b"\xff", 1, "")))["value_base64"] == "/w=="
    quoted = sink_line(record(b"k", b'"\xff"', 1, ""))  # JSON's shape, not UTF-8
    assert json.loads(quoted)["value_base64"] == "Iv8i"
    assert parse_line(quoted[:-1]).value == b'"\xff"'  # type: ignore[union-attr]
    pretty = json.loads(sink_line(record(b"k", b'{\n "a": 1\n}', 1, "")))
    assert pretty["value_text"] == '{\n "a": 1\n}', "a value over several lines stays text"


def test_lines_that_are_not_records_are_refused() -> None:
    for line in (b"", b"{}", b"not json", b'{"v":2,"record_id":"zz","key":"k","value":1,'
                 b'"event_time_ms":1}', b'{"v":2,"record_id":"00","key":"k","event_time_ms":1}',
                 b'{"record_id":"00","key":"k","value":"1"}'):  # fmt: skip
        assert parse_line(line) is None, line
