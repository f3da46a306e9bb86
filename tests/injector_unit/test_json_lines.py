"""``parse_record`` (msgspec first) gives exactly what the ``json``-based reading gives.

The oracle below is the reading of a JSON line as ``millrace inject`` and the file
source did it before msgspec, written out here on its own: same records byte for
byte (every kind of JSON value), same exceptions with the same messages, the same
blank lines skipped. Lines come from hypothesis: valid ones written several ways,
lines with wrong fields, and byte-level mutations of them.
"""

from __future__ import annotations

import json
import string
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.injector.json_lines import MAX_LINE_RECORD_BYTES, parse_record

MIN_MS, MAX_MS = -62_135_596_800_000, 253_402_300_799_999


def oracle(raw: bytes) -> tuple[bytes, bytes, int] | None:
    """The pre-msgspec reading: skip blank lines, decode UTF-8, ``json.loads``, check."""
    if not raw.strip():
        return None
    text = raw.decode()
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, got {type(body).__name__}")
    if "ts" in body and "event_time_ms" in body:
        raise ValueError("two event times: give 'event_time_ms' (or its older name 'ts'), once")
    name = "ts" if "ts" in body else "event_time_ms"
    missing = [field for field in ("key", "value", name) if field not in body]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    ts = body[name]
    if not isinstance(ts, int) or isinstance(ts, bool):
        raise ValueError(f"{name!r} must be integer milliseconds, got {ts!r}")
    if not MIN_MS <= ts <= MAX_MS:
        raise ValueError(
            f"{name!r}: event time {ts} ms is outside the accepted range {MIN_MS}..{MAX_MS} "
            "(years 1 to 9999)"
        )

    def as_bytes(value: object) -> bytes:
        return value.encode() if isinstance(value, str) else json.dumps(value).encode()

    key, value = as_bytes(body["key"]), as_bytes(body["value"])
    if len(key) + len(value) > MAX_LINE_RECORD_BYTES:
        raise ValueError(
            f"key + value are {len(key) + len(value)} bytes; the limit is {MAX_LINE_RECORD_BYTES}"
        )
    return key, value, ts


def outcome(parse: Any, raw: bytes) -> tuple[str, object]:
    try:
        return "ok", parse(raw)
    except ValueError as exc:  # UnicodeDecodeError included
        return type(exc).__name__, str(exc)


def same(raw: bytes) -> None:
    assert outcome(parse_record, raw) == outcome(oracle, raw), raw


# Lone surrogates too: json writes them as \ud800 escapes, which json reads and msgspec not.
texts = st.text(st.characters(codec=None), max_size=12)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | texts
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
times = (
    st.integers(MIN_MS - 2, MAX_MS + 2)
    | st.sampled_from([0, 1, 127, 128, 1_700_000_000_000, MIN_MS, MAX_MS, 2**63, -(2**70)])
    | st.booleans()
    | st.floats()
    | texts
    | st.none()
)
extra_fields = st.dictionaries(st.sampled_from(["x", "keys", "Key", "t"]), json_values, max_size=2)


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """A line as a writer might produce it: the fields in any order, some missing or
    repeated, extra fields, compact or spaced, ASCII-escaped or raw UTF-8."""
    time_name = draw(st.sampled_from(["ts", "event_time_ms"]))
    fields: dict[str, Any] = {
        "key": draw(json_values | texts | st.integers()),
        "value": draw(json_values | st.integers(1, 100)),
        time_name: draw(times),
    }
    for name in draw(st.sets(st.sampled_from(["key", "value", time_name]), max_size=1)):
        del fields[name]
    fields.update(draw(extra_fields))
    items = draw(st.permutations(list(fields.items())))
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]))
    ensure_ascii = draw(st.booleans())
    text = json.dumps(dict(items), separators=separators, ensure_ascii=ensure_ascii)
    if draw(st.booleans()):
        repeated = draw(st.sampled_from(["ts", "event_time_ms"]))  # the same name, or both
        text = text[:-1] + separators[0] + json.dumps(repeated) + separators[1] + "7}"
    padding = draw(st.sampled_from(["", " ", "\t", "\r", "\n", " \r\n"]))
    return (draw(st.sampled_from(["", " ", "\ufeff"])) + text + padding).encode(
        "utf-8", errors="surrogatepass"
    )


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines())
def test_lines_parse_as_the_json_reading_parses_them(raw: bytes) -> None:
    same(raw)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines(), st.lists(st.tuples(st.integers(0, 400), st.binary(max_size=3)), max_size=3))
def test_damaged_lines_fail_or_parse_as_the_json_reading_does(
    raw: bytes, damage: list[tuple[int, bytes]]
) -> None:
    line = bytearray(raw)
    for where, replacement in damage:
        at = where % (len(line) + 1)
        line[at : at + len(replacement)] = replacement
    same(bytes(line))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40) | st.text(string.printable, max_size=40).map(str.encode))
def test_arbitrary_bytes_fail_or_parse_as_the_json_reading_does(raw: bytes) -> None:
    same(raw)


def test_the_standard_lines_and_the_edges_the_fast_path_hands_over() -> None:
    for raw in [
        b'{"key":"u17","value":42,"ts":1700000000000}\n',
        b'{"key":"u17","value":42,"ts":1700000000000}',
        b'{"key": 7, "value": -0, "ts": 0}',
        b'{"key": "a", "value": 1.0, "ts": 1}',
        b'{"key": "a", "value": 1e400, "ts": 1}',  # json: inf, written Infinity
        b'{"key": "a", "value": NaN, "ts": 1}',
        b'{"key": "\\ud800", "value": 1, "ts": 1}',  # a lone surrogate: not encodable
        b'{"key": "a", "value": 1, "ts": 1, "x": "\xff"}',  # not UTF-8 in an ignored field
        b'{"key": "a", "value": 1, "ts": 1, "x": NaN}',
        b'{"key": "a", "value": 1, "ts": 1, "ts": "late"}',
        b'{"key": "a", "value": {"b": 1, "a": 2, "b": 3}, "ts": 1}',
        b'{"key": "a", "value": 123456789012345678901234567890, "ts": 1}',
        b'{"key": "a", "value": 1, "ts": 1.0}',
        b'{"key": "a", "value": 1, "ts": true}',
        b'{"key": "a", "value": 1, "ts": 253402300800000}',
        b'{"key": "a", "value": "' + b"x" * MAX_LINE_RECORD_BYTES + b'", "ts": 1}',
        b'\xef\xbb\xbf{"key": "a", "value": 1, "ts": 1}',
        b"[1, 2]",
        b'"text"',
        b"",
        b" \t\r\n",
        b"\xff\n",
        b"{}",
        b'{"key": "a"',
    ]:
        same(raw)
