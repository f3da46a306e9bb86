"""``deployment.line_blocks``: any data, any read size, gives the data back in blocks of
whole lines and then its unfinished last line."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from millrace.deployment import line_blocks


@given(data=st.binary(max_size=300).map(lambda b: b.replace(b"a", b"\n")), size=st.integers(1, 40))
def test_blocks_are_whole_lines_then_the_unfinished_one(data: bytes, size: int) -> None:
    blocks = list(line_blocks(io.BytesIO(data).read, size))
    assert b"".join(blocks) == data
    assert all(block for block in blocks)
    assert all(block.endswith(b"\n") for block in blocks[:-1])
    if blocks and not blocks[-1].endswith(b"\n"):
        assert b"\n" not in blocks[-1], "the unfinished line comes alone"
