"""The store keys of user state, made natively, against the layout they are documented
in (``engine/_state_layout.py``): ``xxh3_64(key) BE | len(key) u32 BE | key | tag``.

Stores written before keep working only if every key is made exactly so; the reference
here is built from ``xxhash`` and ``struct``, independently of the native code.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from xxhash import xxh3_64_digest

from millrace.computations import key_hash
from millrace.dataplane import state_key, state_keys
from millrace.engine import state_prefix


def reference(key: bytes, tag: str) -> bytes:
    return xxh3_64_digest(key) + struct.pack(">I", len(key)) + key + tag.encode()


@given(st.binary(max_size=300), st.text(max_size=40))
def test_a_state_key_is_the_documented_layout(key: bytes, tag: str) -> None:
    made = state_key(key, tag)
    assert made == reference(key, tag)
    assert made.startswith(state_prefix(key))
    assert int.from_bytes(made[:8], "big") == key_hash(key)  # the hash leads: ranges


@given(st.lists(st.tuples(st.binary(max_size=40), st.text(max_size=20)), max_size=50))
def test_a_batch_of_state_keys_equals_them_one_by_one(pairs: list[tuple[bytes, str]]) -> None:
    keys = [key for key, _ in pairs]
    tags = [tag for _, tag in pairs]
    assert state_keys(keys, tags) == [reference(key, tag) for key, tag in pairs]


def test_a_batch_of_unequal_lengths_or_wrong_types_is_refused() -> None:
    with pytest.raises(ValueError, match="2 keys but 1 tags"):
        state_keys([b"a", b"b"], ["x"])
    with pytest.raises(TypeError):
        state_keys(["a"], ["x"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        state_keys([b"a"], [b"x"])  # type: ignore[list-item]
