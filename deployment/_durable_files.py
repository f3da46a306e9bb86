"""Durable replacement of small files: every journal and registry is written through here.

A file is replaced by writing a temporary file beside it, fsyncing it,
renaming it over the old one and fsyncing the directory. Without the last
step a power loss may undo the rename (ext4, XFS): a lease, an acknowledged
offset or a published watermark would go back in time.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path


def fsync_directory(path: Path) -> None:
    """fsync a directory: file creations, renames and deletions in it become durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory.

    Readers see the old content or the new, never a mix. On failure (a full
    disk) ``path`` is unchanged and the temporary file is removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def write_json_durably(path: Path, body: object) -> None:
    """Replace ``path`` with ``body`` as JSON, durably (see :func:`write_bytes_durably`)."""
    write_bytes_durably(path, json.dumps(body).encode())


class AppendOnlyFile:
    """A file only ever appended to, whose content is always a whole number of appends.

    Each :meth:`append` is written unbuffered and fsynced. When the write or
    the fsync fails (``ENOSPC``, ``EIO``) the file is cut back at once to its
    length before the call (or, if even that fails, before the next append),
    so no partial or unacknowledged bytes are ever followed by new ones.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        """Bytes durably appended (the file may be longer only while a failure is uncut)."""
        self._uncut = False

    def append(self, data: bytes) -> None:
        """Write and fsync ``data`` at the end; on ``OSError`` the file keeps its length."""
        if self._uncut:
            self._cut_back()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError:
            self._uncut = True
            # If this fails too, the cut is retried before the next append; the first
            # error is the one to report.
            with contextlib.suppress(OSError):
                self._cut_back()
            raise
        self.size += len(data)

    def _cut_back(self) -> None:
        os.ftruncate(self._fd, self.size)
        os.fsync(self._fd)
        self._uncut = False

    def close(self) -> None:
        """Close the file. Idempotent."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
