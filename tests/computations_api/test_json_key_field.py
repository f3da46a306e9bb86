"""The ``json:FIELD`` key extractor reads only its field (msgspec) and still gives
``json.loads``'s key, or its error, for any bytes; its batch reading (``many``: native,
``native/core/src/json_keys.rs``) gives the same key wherever it gives one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.computations._keys import load_key_extractor

extract = load_key_extractor("json:k")


def by_json_loads(value: bytes) -> bytes:
    """The definition: ``json.loads``, strings as UTF-8, others as their JSON text."""
    found = json.loads(value)["k"]
    return found.encode() if isinstance(found, str) else json.dumps(found).encode()


def agrees_in_batch(*values: bytes) -> None:
    """``many`` keys each value as ``json.loads`` does, or leaves it (None) to the call;
    the values read alone and together give the same."""
    together = extract.many(list(values))  # type: ignore[attr-defined]
    assert together == [extract.many([v])[0] for v in values]  # type: ignore[attr-defined]
    for value, key in zip(values, together, strict=True):
        if key is not None:
            assert ("key", key) == outcome(by_json_loads, value)


def test_plain_values_are_keyed_in_batch() -> None:
    values = [b'{"k": 12, "x": [1, {"k": 2}]}', b'{"x": 1, "k": "u\\u00e9"}', b'{"k": 1.5}']
    assert extract.many(values) == [b"12", "u\u00e9".encode(), None]  # type: ignore[attr-defined]
    agrees_in_batch(*values)


def outcome(function: Any, value: bytes) -> tuple[str, Any]:
    try:
        return "key", function(b"", value) if function is extract else function(value)
    except Exception as exc:  # the error's type and text are compared
        return type(exc).__name__, str(exc)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(key=json_values, others=st.dictionaries(st.text(max_size=3), json_values, max_size=4),
       ascii_only=st.booleans(), at=st.integers(0, 4))  # fmt: skip
def test_objects_give_json_loads_key(
    key: Any, others: dict[str, Any], ascii_only: bool, at: int
) -> None:
    fields = list(others.items())
    fields.insert(min(at, len(fields)), ("k", key))
    text = "{" + ", ".join(f"{json.dumps(n)}: {json.dumps(v, ensure_ascii=ascii_only)}"
                           for n, v in fields) + "}"  # fmt: skip
    value = text.encode()
    assert outcome(extract, value) == outcome(by_json_loads, value)
    agrees_in_batch(value)


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=40) | st.text(max_size=30).map(str.encode),
       cut=st.integers(0, 40), insert=st.binary(max_size=3))  # fmt: skip
def test_any_bytes_give_json_loads_key_or_error(data: bytes, cut: int, insert: bytes) -> None:
    value = b'{"x": "' + data[:cut] + insert + data[cut:] + b'", "k": 7}'
    assert outcome(extract, value) == outcome(by_json_loads, value)
    assert outcome(extract, data) == outcome(by_json_loads, data)
    agrees_in_batch(value, data)


@pytest.mark.parametrize(
    "value",
    [
        b'{"k": 1, "k": 2}',  # the last one, as json.loads
        b'{"k": 1, "x": "\xff"}',  # not UTF-8 where msgspec only skips
        b'{"k": 1, "x": "\\ud800"}',  # a lone surrogate
        b'{"k": 1, "x": NaN}',
        b'\xef\xbb\xbf{"k": 1}',  # a BOM
        '{"k": 1}'.encode("utf-16"),
        b'{"k": 1e999}',
        b'{"k": 123456789012345678901234567890}',
        b'{"k": "\\u00e9"}',
        b'{"\\u006b": 5}',
        b'{"k": 1, "x": ' + b"[" * 1500 + b"]" * 1500 + b"}",
        b"[1]",
        b'{"j": 1}',
        b'{"k": 1} x',
    ],
)
def test_edge_values(value: bytes) -> None:
    assert outcome(extract, value) == outcome(by_json_loads, value)
    agrees_in_batch(value)
