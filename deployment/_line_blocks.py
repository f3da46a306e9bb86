"""Reading a file of lines a bounded block at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator


def line_blocks(read: Callable[[int], bytes], size: int) -> Iterator[bytes]:
    """What ``read`` returns, asked ``size`` bytes at a time, as blocks of whole lines
    (each block ends with ``\\n``), then the bytes after the last ``\\n``, if any: a
    last line without its newline, the one block that does not end with one.

    A line longer than ``size`` is gathered across reads (joined once, not copied
    at every read).
    """
    carry: list[bytes] = []
    while data := read(size):
        cut = data.rfind(b"\n") + 1
        if not cut:  # no line ends in it yet
            carry.append(data)
            continue
        yield b"".join([*carry, data[:cut]])
        carry = [data[cut:]] if cut < len(data) else []
    if carry:
        yield b"".join(carry)
