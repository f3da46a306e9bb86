"""Putting a stream log's files right after a failed write or roll, before it writes again."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from millrace.injector.log._format import segment_name
from millrace.injector.log._segment import Segment
from millrace.injector.log._types import LogConfig


def repair_after_failure(
    directory: Path, segments: tuple[Segment, ...], config: LogConfig, clock: Callable[[], int]
) -> tuple[Segment, ...]:
    """Make the files match what is published again; the segments then. Raises
    ``OSError`` while the disk still fails.

    A failed write may have left partial bytes past the active segment's durable
    size: cut them (they were never acknowledged; kept, a retry would append its
    records twice). A failed roll left the active segment either unsealed (retry
    the roll later) or sealed without a successor: remove a half-created
    successor and create it again.
    """
    active = segments[-1]
    if active.fd is not None:
        os.ftruncate(active.fd, active.size)
        if config.fsync:
            os.fsync(active.fd)
        return segments
    successor = directory / segment_name(active.end_offset)
    successor.unlink(missing_ok=True)
    if not active.sealed:
        active.seal(fsync=config.fsync)
    segment = Segment.create(
        directory,
        active.end_offset,
        created_ms=clock(),
        index_every=config.index_every,
        fsync=config.fsync,
    )
    return (*segments, segment)
