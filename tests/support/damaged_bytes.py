"""A hypothesis strategy for bytes damaged the ways a wire or a disk damages them."""

from __future__ import annotations

import hypothesis.strategies as st

_KINDS = ("flip", "set", "insert", "remove", "cut")
ANY_INSERT = st.binary(min_size=1, max_size=3)
ANY_BYTE = st.integers(0, 255)


@st.composite
def damaged(
    draw: st.DrawFn,
    data: bytes,
    *,
    changes: int = 4,
    inserts: st.SearchStrategy[bytes] = ANY_INSERT,
    bytes_set: st.SearchStrategy[int] = ANY_BYTE,
) -> bytes:
    """``data`` with 1 to ``changes`` bits flipped, bytes changed (to ``bytes_set``),
    inserted (``inserts``) or removed, or cut short."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, changes))):
        at = draw(st.integers(0, len(out)))
        kind = draw(st.sampled_from(_KINDS))
        if kind == "insert":
            out[at:at] = draw(inserts)
        elif kind == "cut":
            del out[at:]
        elif at < len(out):
            if kind == "flip":
                out[at] ^= 1 << draw(st.integers(0, 7))
            elif kind == "set":
                out[at] = draw(bytes_set)
            else:
                del out[at : at + draw(st.integers(1, 3))]
    return bytes(out)
