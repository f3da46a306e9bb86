"""The progress line of ``millrace inject`` on a terminal, and what it measures."""

from __future__ import annotations

import io
import os
import stat
import time
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import BinaryIO, Protocol, TextIO

from millrace.deployment import line_blocks

PROGRESS_EVERY_S = 0.25
"""The line is redrawn at most this often."""


class RunFigures(Protocol):
    """What the progress line shows of a run."""

    accepted: int
    batches: int

    def seconds(self) -> float:
        """Time since the run started."""
        ...


READ_BYTES = 1 << 20


class CountedLines:
    """The lines of a binary input (each with its ``\n``, split at ``\n`` only, as a file
    iterates), counting the bytes read so far (for the progress bar)."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self.bytes_read = 0

    def __iter__(self) -> Iterator[bytes]:
        # Whole lines a block at a time, iterated in C (BytesIO): no Python step per line.
        return chain.from_iterable(self._blocks())

    def _blocks(self) -> Iterator[Iterable[bytes]]:
        # read1: what a pipe has now, without waiting for a full block.
        read = getattr(self._handle, "read1", self._handle.read)
        for block in line_blocks(read, READ_BYTES):
            self.bytes_read += len(block)
            yield io.BytesIO(block) if block.endswith(b"\n") else (block,)


def input_size(handle: BinaryIO) -> int | None:
    """The size of a regular file behind ``handle`` (None for a pipe or a terminal)."""
    try:
        status = os.fstat(handle.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


BAR_WIDTH = 24


class Progress:
    """One self-overwriting line on a terminal: a bar (when the input size is known),
    records sent and the rate."""

    def __init__(self, stream: TextIO, total_bytes: int | None = None) -> None:
        self._stream = stream
        isatty = getattr(stream, "isatty", None)
        self.enabled = bool(isatty and isatty())
        self._total = total_bytes
        self._last = 0.0
        self._width = 0

    def update(self, totals: RunFigures, done_bytes: int = 0, *, force: bool = False) -> None:
        """Redraw (at most every ``PROGRESS_EVERY_S`` unless ``force``); ``done_bytes``
        of the input read so far."""
        now = time.monotonic()
        if not self.enabled or (not force and now - self._last < PROGRESS_EVERY_S):
            return
        self._last = now
        elapsed = max(totals.seconds(), 1e-9)
        text = (
            f"sent {totals.accepted:,} records in {totals.batches:,} batches "
            f"({totals.accepted / elapsed:,.0f} records/s)"
        )
        if self._total:
            fraction = min(1.0, done_bytes / self._total)
            filled = int(fraction * BAR_WIDTH)
            text = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction:4.0%}  {text}"
        self._write(text)

    def clear(self) -> None:
        """Erase the line (before the summary is printed)."""
        if self.enabled and self._width:
            self._write("")

    def _write(self, text: str) -> None:
        self._stream.write("\r" + text.ljust(self._width) + ("\r" if not text else ""))
        self._stream.flush()
        self._width = len(text)
