"""A real, small file system that tests can fill up and free again.

A tmpfs of a few MiB mounted on a temporary directory (needs root, as CI
has; elsewhere the tests that use it are skipped, saying why). Filling it
makes every write of the process under test fail with ``ENOSPC``, exactly as
a full disk does.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


class SmallDisk:
    """A mounted tmpfs: :meth:`fill` takes every free byte, :meth:`free` gives it back."""

    def __init__(self, mount_point: Path) -> None:
        self.path = mount_point
        self._filler = mount_point / ".filler"

    def fill(self) -> None:
        """Write a filler file until the file system says ``ENOSPC``."""
        chunk = b"\0" * (64 << 10)
        with open(self._filler, "ab", buffering=0) as handle:
            while True:
                try:
                    handle.write(chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
        # Whatever a smaller write can still take, take too.
        with open(self._filler, "ab", buffering=0) as handle:
            for size in (4096, 512, 1):
                try:
                    while True:
                        handle.write(b"\0" * size)
                except OSError:
                    continue

    def free(self) -> None:
        """Remove the filler: the space is back."""
        self._filler.unlink(missing_ok=True)

    def available(self) -> int:
        """Free bytes now."""
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize


@contextmanager
def small_disk(mount_point: Path, size_mb: int = 8) -> Iterator[SmallDisk]:
    """Mount a ``size_mb`` MiB tmpfs on ``mount_point`` for the block; skip if not allowed."""
    mount_point.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mount_point)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {mounted.stderr.strip()}")
    try:
        yield SmallDisk(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
