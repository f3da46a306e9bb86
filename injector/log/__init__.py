"""The injector's durable log: the system of record that forwarding, backfills and replays read.

One :class:`StreamLog` per source stream, in its own directory
``<log_dir>/<stream>/``::

    log = StreamLog.open(Path("logs") / "clicks", "clicks", config=LogConfig(fsync=True))
    [result] = log.append([AppendRequest(records=[(b"alice", b"{}", 1_000)],
                                          idempotency_key=b"req-1")])
    log.read(result.first_offset, 100)      # durable LogRecords
    log.close()

Append-only segment files of checksummed entries; each client request's
records are followed by one COMMIT entry written by the same write and
fsync, so recovery keeps or drops a request whole. Sealed segments carry a
sidecar index. :func:`scan_segment` reads one segment file on its own (one
Spark task per sealed segment); :func:`scan_segment_columns` reads the same
in bulk, as numpy columns. The byte layout is in ``docs/log-format.md``.
"""

from millrace.injector.log._columns import RecordColumns, scan_segment_columns
from millrace.injector.log._fileio import is_being_written
from millrace.injector.log._format import offset_of, record_id, stream_tag
from millrace.injector.log._lost import LostRange
from millrace.injector.log._scan import scan_segment
from millrace.injector.log._stream_log import StreamLog, wall_clock_ms
from millrace.injector.log._types import (
    AppendRequest,
    AppendResult,
    Commit,
    CorruptEntry,
    LogConfig,
    LogRecord,
    RecoveryReport,
    SegmentInfo,
)
from millrace.injector.log.errors import (
    LogClosedError,
    LogCorruptedError,
    LogError,
    LogLockedError,
    LogTailLostError,
    LogWriteError,
    OffsetDeletedError,
)

__all__ = [
    "AppendRequest",
    "AppendResult",
    "Commit",
    "CorruptEntry",
    "LogClosedError",
    "LogConfig",
    "LogCorruptedError",
    "LogError",
    "LogLockedError",
    "LogRecord",
    "LogTailLostError",
    "LogWriteError",
    "LostRange",
    "OffsetDeletedError",
    "RecordColumns",
    "RecoveryReport",
    "SegmentInfo",
    "StreamLog",
    "is_being_written",
    "offset_of",
    "record_id",
    "scan_segment",
    "scan_segment_columns",
    "stream_tag",
    "wall_clock_ms",
]
