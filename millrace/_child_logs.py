"""What a supervised child wrote and how it ended: its log file, as the supervisor keeps it."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import IO


def describe_exit(code: int) -> str:
    """``"exit code 1"`` or ``"exit code -9 (SIGKILL)"`` for a :class:`subprocess.Popen` code."""
    if code < 0:
        try:
            return f"exit code {code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"exit code {code}"
    return f"exit code {code}"


def copy_lines(source: IO[bytes], sink: IO[bytes], max_pending: int = 1 << 16) -> None:
    """Copy ``source`` to ``sink`` until EOF, whole lines per write where possible.

    The child's stderr goes to the same file directly; writing whole lines keeps
    a stdout line from being split by a stderr line (an unbuffered child writes
    a ``print``'s text and its newline separately).
    """
    pending = b""
    while True:
        chunk = source.read1(65536) if hasattr(source, "read1") else source.read(65536)
        if not chunk:
            if pending:
                sink.write(pending)
            return
        pending += chunk
        cut = pending.rfind(b"\n") + 1
        if cut == 0 and len(pending) >= max_pending:
            cut = len(pending)  # one very long line: do not hold it back forever
        if cut:
            sink.write(pending[:cut])
            pending = pending[cut:]


def tail_lines(path: Path, lines: int = 10) -> list[str]:
    """The last ``lines`` lines of a log file (none if it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 8192))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]
