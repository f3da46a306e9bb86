"""The native JSON fast path reads every line it takes exactly as the reference does.

``millrace._native.parse_json_lines`` (serde_json, ``native/core/src/json_lines.rs``)
either returns a line's record or leaves the line to ``injector.json_lines.parse_line``
(the standard library's ``json``), the definition. Leaving a line is always allowed;
taking one is allowed only when the reference reads the same ``(key, value, ts)`` from
it. Hypothesis writes JSON-ish lines by hand (so every spelling is reachable: escapes,
surrogates, ``-0``, ``1E2``, huge integers, duplicate and escaped field names, odd
whitespace, invalid UTF-8, cut and damaged lines) and compares the two readings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS
from millrace.dataplane import parse_json_lines
from millrace.injector.json_lines import MAX_LINE_RECORD_BYTES, parse_line
from tests.support.damaged_bytes import damaged as damaged_bytes

LIMITS = {
    "min_event_time_ms": MIN_EVENT_TIME_MS,
    "max_event_time_ms": MAX_EVENT_TIME_MS,
    "max_record_bytes": MAX_LINE_RECORD_BYTES,
}
LineRecord = tuple[bytes, bytes, int]
fast = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


def native(line: bytes) -> LineRecord | None:
    """The native reading of one line: its record, or None when left to the reference."""
    batch, others = parse_json_lines([line], **LIMITS)
    if others:
        assert others == [0]
        assert len(batch) == 0
        return None
    assert len(batch) == 1
    [record] = batch.records()
    return record


def agrees_with_the_reference(line: bytes) -> LineRecord | None:
    """The native record of ``line`` (None: left to the reference); a record is exactly
    what the reference reads from the line."""
    record = native(line)
    if record is None:
        return None
    try:
        text = line.decode()
    except UnicodeDecodeError as exc:
        raise AssertionError(f"native took a line that is not UTF-8: {line!r}") from exc
    try:
        expected = parse_line(text)
    except ValueError as exc:
        raise AssertionError(f"native took {line!r} as {record!r}; reference: {exc}") from exc
    assert record == expected, line
    key, value, ts = record
    assert type(key) is bytes and type(value) is bytes and type(ts) is int
    return record


# ---------------------------------------------------------------------------------------
# JSON written by hand.


@dataclass(frozen=True)
class Raw:
    """JSON text written as is (``-0``, ``1E2``, ``NaN``, a spelling of an escape...)."""

    text: str


surrogates = st.characters(categories=["Cs"])
chars = st.characters() | st.characters(max_codepoint=0x7F) | surrogates
texts = st.text(chars, max_size=10)
int_edges = st.sampled_from(
    [
        0,
        1,
        -1,
        2**31,
        2**53 + 1,
        2**63 - 1,
        2**63,
        -(2**63),
        -(2**63) - 1,
        2**64 - 1,
        2**64,
        -(2**64),
        10**30,
        -(10**30),
    ]
)
ints = st.integers() | st.integers(-(2**70), 2**70) | int_edges
raw_numbers = st.sampled_from(
    [
        "-0",
        "-0.0",
        "0.0",
        "1.0",
        "1e2",
        "1E+2",
        "-1e-2",
        "1.5",
        "NaN",
        "Infinity",
        "-Infinity",
        "1" * 40,
        "-" + "9" * 25,
    ]
).map(Raw)
scalars = st.none() | st.booleans() | ints | st.floats() | texts | raw_numbers
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
# Mostly what the fast path takes (strings and integers), sometimes anything.
fields = st.one_of(texts, texts, ints, ints, json_values)
in_range = st.integers(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS)
times = st.one_of(
    st.integers(-300, 600),
    in_range,
    st.integers(1_600_000_000_000, 1_800_000_000_000),
    st.sampled_from(
        [MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS - 1, MAX_EVENT_TIME_MS + 1]
    ),
    ints,
    st.sampled_from([Raw("-0"), Raw("0.0"), Raw("1e3"), Raw("1700000000000.0"), True, False]),
    json_values,
)
# How a field name is written: plainly, with an escape, or another name entirely.
names = {
    "key": ["key", Raw('"k\\u0065y"'), Raw('"\\u006b\\u0065\\u0079"')],
    "value": ["value", Raw('"v\\u0061lue"')],
    # the event time: its name, or its older name (a line with both is refused)
    "ts": ["ts", Raw('"t\\u0073"'), "event_time_ms", "event_time_ms", Raw('"event_time_m\\u0073"')],
}
extra_names = st.sampled_from(["x", "Key", "keys", "", "k", "ts ", "\ud800", "é"])
spaces = st.sampled_from(["", "", " ", "  ", "\t", "\r", "\n", "\r\n"])


def render_string(draw: st.DrawFn, s: str) -> str:
    """A JSON string literal of ``s``, each character written raw or escaped at random
    (lone surrogates raw too: their UTF-8 is invalid, which the reference refuses)."""
    rnd = draw(st.randoms(use_true_random=False))
    style = draw(st.sampled_from(["raw", "ascii", "mixed"]))
    out = ['"']
    for c in s:
        code = ord(c)
        escape = style == "ascii" or (style == "mixed" and rnd.random() < 0.5)
        if c in '"\\' or code < 0x20:
            short = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
            out.append(short[c] if c in short and rnd.random() < 0.5 else f"\\u{code:04x}")
        elif c == "/" and escape:
            out.append("\\/")
        elif 0xD800 <= code < 0xE000 and (escape or rnd.random() < 0.8):
            out.append(f"\\u{code:04X}" if rnd.random() < 0.5 else f"\\u{code:04x}")
        elif escape and code > 0xFFFF:
            high, low = divmod(code - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04X}")
        elif escape and code > 0x7E:
            out.append(f"\\u{code:04x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def render(draw: st.DrawFn, value: Any) -> str:
    """JSON text of ``value`` with random spelling and whitespace."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, str):
        return render_string(draw, value)
    if isinstance(value, list):
        items = [draw(spaces) + render(draw, v) + draw(spaces) for v in value]
        return "[" + ",".join(items) + "]"
    if isinstance(value, dict):
        pairs = [
            f"{draw(spaces)}{render_string(draw, k)}{draw(spaces)}:{draw(spaces)}"
            f"{render(draw, v)}{draw(spaces)}"
            for k, v in value.items()
        ]
        return "{" + ",".join(pairs) + "}"
    if type(value) is int:
        return str(value)
    return json.dumps(value)  # None, booleans, floats (NaN and Infinity too)


@st.composite
def objects(draw: st.DrawFn) -> str:
    """A line's JSON object: key, value and ts (one sometimes missing or twice, names
    sometimes escaped), extra fields, in any order."""
    members: list[tuple[Any, Any]] = []
    for name, value in (("key", fields), ("value", fields), ("ts", times)):
        copies = draw(st.sampled_from([1] * 8 + [0, 2]))
        members += [(draw(st.sampled_from(names[name])), draw(value)) for _ in range(copies)]
    members += draw(st.lists(st.tuples(extra_names, json_values), max_size=3))
    members = draw(st.permutations(members))
    pairs = []
    for name, value in members:
        spelled = name.text if isinstance(name, Raw) else render_string(draw, name)
        pairs.append(f"{draw(spaces)}{spelled}{draw(spaces)}:{draw(spaces)}{render(draw, value)}")
    return "{" + ",".join(p + draw(spaces) for p in pairs) + "}"


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """A line as bytes: an object, padded, maybe with a BOM or a newline; UTF-8, with
    lone surrogates written raw (invalid UTF-8)."""
    text = draw(st.sampled_from(["", "", " ", "\ufeff"])) + draw(objects()) + draw(spaces)
    return text.encode("utf-8", errors="surrogatepass")


def damaged(line: bytes) -> st.SearchStrategy[bytes]:
    """``line`` damaged, with the bytes that matter to a JSON reader among the changes."""
    return damaged_bytes(
        line,
        changes=2,
        inserts=st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b'"', b",", b"}"])
        | st.binary(min_size=1, max_size=3),
        bytes_set=st.sampled_from(b'a0 -.eE\\"/u') | st.integers(0, 255),
    )


# ---------------------------------------------------------------------------------------
# Properties.


@fast
@given(lines())
def test_taken_lines_read_as_the_reference_reads_them(line: bytes) -> None:
    agrees_with_the_reference(line)


@fast
@given(st.binary(max_size=80))
def test_arbitrary_bytes_taken_read_as_the_reference_reads_them(line: bytes) -> None:
    agrees_with_the_reference(line)


plain_texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=10)
plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | plain_texts
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain_texts, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def plain_lines(draw: st.DrawFn) -> tuple[bytes, LineRecord]:
    """A line the fast path must take: key and value strings (no lone surrogate) or
    integers within int64/uint64, ts an integer in range, no field twice; written with
    any spelling and whitespace, extra fields (finite values) included."""
    key = draw(plain_texts | st.integers(-(2**63), 2**64 - 1))
    value = draw(plain_texts | st.integers(-(2**63), 2**64 - 1))
    ts = draw(in_range | st.integers(-300, 600))
    members: list[tuple[Any, Any]] = [
        (draw(st.sampled_from(names["key"])), key),
        (draw(st.sampled_from(names["value"])), value),
        (draw(st.sampled_from(names["ts"])), ts),
    ]
    members += draw(
        st.lists(st.tuples(st.sampled_from(["x", "", "Key"]), plain_values), max_size=2)
    )
    members = draw(st.permutations(members))
    seen = set()
    pairs = []
    for name, field in members:
        if not isinstance(name, Raw):
            if name in seen:
                continue
            seen.add(name)
        spelled = name.text if isinstance(name, Raw) else render_string(draw, name)
        pairs.append(f"{draw(spaces)}{spelled}{draw(spaces)}:{draw(spaces)}{render(draw, field)}")
    text = draw(spaces) + "{" + ",".join(p + draw(spaces) for p in pairs) + "}" + draw(spaces)

    def as_bytes(field: str | int) -> bytes:
        return field.encode() if isinstance(field, str) else b"%d" % field

    return text.encode(), (as_bytes(key), as_bytes(value), ts)


@fast
@given(plain_lines())
def test_plain_lines_are_taken(case: tuple[bytes, LineRecord]) -> None:
    line, expected = case
    assert agrees_with_the_reference(line) == expected, line


@fast
@given(st.one_of(lines(), plain_lines().map(lambda case: case[0])).flatmap(damaged))
def test_damaged_lines_taken_read_as_the_reference_reads_them(line: bytes) -> None:
    agrees_with_the_reference(line)


@fast
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.integers(-(2**63), 2**63 - 1) | st.integers(0, 1000),
            st.integers(1_600_000_000_000, 1_800_000_000_000),
        ),
        min_size=1,
        max_size=50,
    )
)
def test_the_standard_workload_is_taken_whole(rows: list[tuple[int, int, int]]) -> None:
    lines = [f'{{"key": "u{u}", "value": {v}, "ts": {t}}}'.encode() for u, v, t in rows]
    batch, others = parse_json_lines(lines, **LIMITS)
    assert others == []
    assert batch.records() == [parse_line(line.decode()) for line in lines]


def test_a_standard_workload_line() -> None:
    line = b'{"key": "u123", "value": 42, "ts": 1700000000000}'
    assert agrees_with_the_reference(line) == (b"u123", b"42", 1_700_000_000_000)
    assert agrees_with_the_reference(line + b"\n") == (b"u123", b"42", 1_700_000_000_000)


@pytest.mark.parametrize("excess", [0, 1])
@pytest.mark.parametrize("escaped", [False, True])
def test_records_at_the_size_limit(excess: int, escaped: bool) -> None:
    value = "\\u00e9" if escaped else "é"  # two bytes of UTF-8 either way
    key = "k" * (MAX_LINE_RECORD_BYTES - 2 + excess)
    line = f'{{"key": "{key}", "value": "{value}", "ts": 1}}'.encode()
    record = agrees_with_the_reference(line)
    if excess:
        assert record is None
        with pytest.raises(ValueError, match="the limit is"):
            parse_line(line.decode())
    else:
        assert record == (key.encode(), "é".encode(), 1)


# serde's derived struct visitor also takes a JSON array of the fields in declaration
# order; the native reader leaves every line that is not an object to the reference,
# which refuses it ("expected a JSON object, got list").


def test_a_json_array_is_left_to_the_reference() -> None:
    line = b'["u1", 7, 5]'
    with pytest.raises(ValueError, match="expected a JSON object, got list"):
        parse_line(line.decode())
    assert native(line) is None


@st.composite
def arrays(draw: st.DrawFn) -> bytes:
    """A line's fields as a JSON array ``[key, value, ts]``."""
    members = [draw(fields), draw(fields), draw(times)]
    return render(draw, members).encode("utf-8", errors="surrogatepass")


@fast
@given(arrays())
def test_json_arrays_taken_read_as_the_reference_reads_them(line: bytes) -> None:
    agrees_with_the_reference(line)


@st.composite
def rendered(draw: st.DrawFn) -> tuple[str, Any]:
    value = draw(plain_values)
    return render(draw, value), value


@fast
@given(rendered())
def test_the_hand_written_json_reads_back(case: tuple[str, Any]) -> None:
    """The renderer above writes JSON that ``json`` reads back as the value it wrote."""
    text, value = case
    assert json.loads(text) == value
