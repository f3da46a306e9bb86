"""``JSON`` (the state and production serde) encodes and decodes exactly as
``json.dumps(separators=(",", ":"), sort_keys=True)`` and ``json.loads`` do: it
reuses CPython's C encoder instead of building one per call, and decodes with
msgspec, falling back to ``json.loads`` for what msgspec refuses."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from millrace.computations import JSON, JsonSerde
from tests.support.json_values import json_values, same_json_value


@settings(max_examples=300)
@given(value=json_values)
def test_json_serde_is_json_dumps_and_loads(value: Any) -> None:
    encoded = JSON.dumps(value)
    assert encoded == json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    assert same_json_value(JSON.loads(encoded), json.loads(encoded))


def test_json_serde_reads_what_json_loads_reads() -> None:
    for raw in [b" 5 ", b"\xef\xbb\xbf{}", '{"a": 1}'.encode("utf-16"), b"NaN", b'"\\ud800"']:
        assert same_json_value(JSON.loads(raw), json.loads(raw))
    for bad in [b"{bad", b"12 x", b""]:
        for parse in (JSON.loads, json.loads):
            try:
                parse(bad)
            except ValueError:
                continue
            raise AssertionError(f"{parse} read {bad!r}")


numbers = (
    st.floats().map(repr)
    | st.integers().map(str)
    | st.builds(lambda m, e: f"{m}e{e}", st.integers(-(10**20), 10**20), st.integers(-400, 400))
    | st.builds(
        lambda m, f, e: f"{m}.{f}E{e:+d}",
        st.integers(-999, 999),
        st.integers(0, 10**17),
        st.integers(-330, 330),
    )
)


@settings(max_examples=500)
@given(
    text=numbers
    | st.text().map(json.dumps)
    | st.text().map(lambda t: json.dumps(t, ensure_ascii=False))
)
def test_numbers_and_strings_read_as_json_loads_reads_them(text: str) -> None:
    try:
        expected = json.loads(text)
    except ValueError:
        return  # e.g. "inf" from repr: not JSON for either
    assert same_json_value(JSON.loads(text.encode()), expected)


@settings(max_examples=300)
@given(value=json_values)
def test_a_strict_json_serde_is_json_dumps_without_nan(value: Any) -> None:
    """``JsonSerde(sort_keys=False, allow_nan=False)`` (the dataflow outputs' encoder):
    ``json.dumps(..., allow_nan=False)``'s bytes, or a ValueError where it refuses."""
    strict = JsonSerde(sort_keys=False, allow_nan=False)
    try:
        expected: bytes | None = json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    except ValueError:
        expected = None
    try:
        assert strict.dumps(value) == expected
    except ValueError:
        assert expected is None
