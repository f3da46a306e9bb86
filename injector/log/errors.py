"""The durable log's error tree.

Every error says what happened and what the operator can do about it.
``retryable`` tells callers whether the same call can succeed later without
a change elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from millrace.injector.log._types import AppendResult


class LogError(Exception):
    """Base class of every error raised by ``injector.log``."""

    retryable: ClassVar[bool] = False


class LogLockedError(LogError):
    """Another process (or another handle in this one) has the stream's log open.

    One writer per stream directory. Stop the other writer, or open the log
    with ``read_only=True`` to inspect it.
    """

    retryable = True

    def __init__(self, path: str) -> None:
        super().__init__(
            f"stream log {path!r} is open for writing elsewhere; stop the other writer "
            "or open it read-only"
        )
        self.path = path


class LogCorruptedError(LogError):
    """Durable data of the log failed validation (not a torn tail, which is recovered).

    The named segment holds acknowledged records that no longer check out
    (bit rot, a truncated or foreign file, a missing segment in the middle).
    Restore that segment file from a backup or replica; failing that, move it
    and every later segment away and reopen (their records are lost).
    """

    def __init__(self, path: str, position: int | None, reason: str) -> None:
        where = f" at byte {position}" if position is not None else ""
        super().__init__(f"stream log segment {path!r} is corrupted{where}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


class LogWriteError(LogError):
    """Writing or fsyncing a segment failed (disk full, I/O error).

    Nothing of the failed call was acknowledged. The next append first cuts
    back whatever the failed call left behind and then writes again, so the
    log recovers by itself once the disk does (free space, fix the device).
    """

    retryable = True

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"writing stream log segment {path!r} failed: {detail}; appends are refused "
            "until a write succeeds again (free space or fix the disk)"
        )
        self.path = path
        self.published: list[AppendResult] = []
        """Results of the call's requests that were written before the failure (a prefix)."""


class LogClosedError(LogError):
    """The log handle was closed (or is read-only and cannot append). Open a new one."""

    def __init__(self, path: str, detail: str = "closed") -> None:
        super().__init__(f"stream log {path!r} is {detail}")
        self.path = path


class OffsetDeletedError(LogError):
    """The requested offset is older than the log's oldest segment (retention removed it).

    Start reading at the log's first offset instead (``segments()[0].base_offset``).
    """

    def __init__(self, offset: int, first_offset: int) -> None:
        super().__init__(
            f"offset {offset} was deleted by retention; the log starts at {first_offset}"
        )
        self.offset = offset
        self.first_offset = first_offset


class LogTailLostError(LogError):
    """The log ends below offsets its consumers have already acknowledged.

    Acknowledged records at the end of the log are gone (a damaged disk, a
    restored backup, a deleted active segment). An offset names a record
    (its record id), and the nodes remember those ids: new records numbered
    from the log's end would be dropped as duplicates, silently. The injector
    refuses to start instead. Restore the missing segment files from a backup
    or replica; failing that, the stream's records at those offsets are lost
    for good, and the computations that consumed them must be rebuilt from an
    empty state together with a new log (move the stream's log directory and
    every downstream data directory away).
    """

    def __init__(self, path: str, next_offset: int, acked_offset: int, acked_by: str) -> None:
        super().__init__(
            f"stream log {path!r} ends at offset {next_offset}, but {acked_by} acknowledged "
            f"every offset below {acked_offset}: records {next_offset}..{acked_offset - 1} "
            "were lost from the log's end. Refusing to reuse their offsets (record ids); "
            "restore the missing segment files from a backup, or, without one, accept the "
            f"loss: millrace log accept-loss --dir {str(Path(path).parent)!r} --stream "
            f"{Path(path).name!r} (with the injector stopped; the log then goes on at offset "
            f"{acked_offset})"
        )
        self.path = path
        self.next_offset = next_offset
        self.acked_offset = acked_offset
