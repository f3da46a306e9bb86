"""The durable log's error tree.

Every error says what happened and what the operator can do about it.
``retryable`` tells callers whether the same call can succeed later without
a change elsewhere.
"""

from __future__ import annotations

from typing import ClassVar


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

    Nothing of the failed call was acknowledged; the handle refuses further
    appends because the file's durable state is unknown. Fix the disk and
    reopen the log: recovery truncates whatever the failed call left behind.
    """

    retryable = True

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"writing stream log segment {path!r} failed: {detail}; reopen the log")
        self.path = path


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
