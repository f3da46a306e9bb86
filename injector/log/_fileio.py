"""Small file helpers shared by the segment and index writers, the scanners and the
stream's writer lock."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from millrace.injector.log.errors import LogLockedError

LOCK_FILE = "LOCK"


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte of ``data`` is written (one call for regular files)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(path: Path) -> None:
    """fsync a directory, making file creations, renames and deletions in it durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def sized_source(source: str | os.PathLike[str] | BinaryIO) -> Iterator[tuple[BinaryIO, int]]:
    """A segment to scan and its size: a path, opened and closed afterwards, or a binary
    file object that can ``seek``, rewound to its start and left open."""
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as f:
            yield f, os.fstat(f.fileno()).st_size
        return
    size = source.seek(0, os.SEEK_END)
    source.seek(0)
    yield source, size


def lock_directory(path: Path) -> int:
    """Hold ``path``'s lock file (``LOCK``) exclusively: the descriptor to close to release
    it; :class:`LogLockedError` when another handle holds it."""
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogLockedError(str(path)) from None
    return fd


def is_being_written(path: Path) -> bool:
    """Whether a writer (an injector's :class:`StreamLog`) holds ``path``'s lock now: its
    active segment may still grow. Takes the lock shared for an instant to find out."""
    try:
        fd = os.open(path / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken
    return False


class Stretches:
    """A file read a stretch at a time for a scanner that takes whole entries: each
    :meth:`read` gives the bytes from where the scanner stopped, up to ``chunk_bytes``
    more, and the scanner says with :meth:`consume` how many it took (an entry cut by
    the read comes again, whole, with the next)."""

    def __init__(self, f: BinaryIO, position: int, end: int, chunk_bytes: int) -> None:
        f.seek(position)
        self._f, self._end, self._chunk = f, end, chunk_bytes
        self.position = position
        """File position of the next stretch's first byte."""
        self._carry = b""

    def read(self) -> tuple[bytes, bool]:
        """The next stretch, and whether it reaches ``end``."""
        data = self._f.read(min(self._chunk, self._end - self.position - len(self._carry)))
        data = self._carry + data if self._carry else data
        self._carry = data
        return data, self.position + len(data) >= self._end

    def consume(self, used: int) -> None:
        """The scanner took the first ``used`` bytes of the last stretch."""
        self._carry = self._carry[used:]
        self.position += used
