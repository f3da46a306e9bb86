"""What a backfill reads of the log, and why it read nothing when it did.

A stopped injector's active segment is as final as a sealed one until it starts
again, and a short run's whole log is often one active segment: a backfill reads
the active segments when no injector writes the log (a local directory whose
streams' locks are free). While one writes, only sealed segments are read,
unless asked (``--include-active``: a snapshot). An archive holds sealed segments
only.

A backfill that read no record says why (no segment of the source streams, no
record in the time range, every record in a segment still being written) rather
than writing empty outputs that look like an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from millrace.injector.log import is_being_written
from millrace.spark_jobs.logsource import Bounds, Pushdown, is_uri, plan_segments


def streams_being_written(log: str, streams: Sequence[str]) -> list[str]:
    """The ``streams`` of a local log directory an injector is writing now (none for an
    archive URI)."""
    if is_uri(log):
        return []
    return [stream for stream in streams if is_being_written(Path(log) / stream)]


def segments_to_read(
    log: str,
    streams: Sequence[str],
    *,
    from_ms: int | None,
    to_ms: int | None,
    include_active: bool,
) -> int:
    """How many segments of ``streams`` may hold a record in ``[from_ms, to_ms)`` (by
    their index or manifest, before Spark starts)."""
    ranged = from_ms is not None or to_ms is not None
    times = Bounds(from_ms, None if to_ms is None else to_ms - 1)
    pushdown = Pushdown(event_time=times) if ranged else Pushdown()
    return len(plan_segments(log, streams, include_active=include_active, pushdown=pushdown)[1])


def why_nothing_was_read(
    log: str,
    streams: Sequence[str],
    *,
    from_ms: int | None,
    to_ms: int | None,
    include_active: bool,
    written: Sequence[str],
    corrupt: int = 0,
) -> str:
    """Why a backfill of ``streams`` over ``log`` read no record (one sentence);
    ``corrupt``: the corrupt entries it met."""
    names = ", ".join(streams) or "none"

    def segments(active: bool, ranged: bool) -> int:
        return segments_to_read(
            log, streams, from_ms=from_ms if ranged else None, to_ms=to_ms if ranged else None,
            include_active=active,
        )  # fmt: skip

    if segments(True, False) == 0:
        return f"read no record: {log} holds no segment of the source streams ({names})"
    ranged = from_ms is not None or to_ms is not None
    span = f"[{'-inf' if from_ms is None else from_ms}, {'+inf' if to_ms is None else to_ms})"
    if ranged and segments(True, True) == 0:
        return f"read no record: no segment of {names} holds an event time in {span}"
    if not include_active and segments(False, True) == 0:
        return (
            f"read no record: the records of {names} are in active segments an injector "
            f"is writing ({', '.join(written)}); pass --include-active to read a snapshot "
            "of them, or wait until they seal (segment_ms, segment_bytes)"
        )
    if corrupt:
        return f"read no record of {names}: the {corrupt} entries met were corrupt"
    return f"read no record: no record of {names} has an event time in {span}"
