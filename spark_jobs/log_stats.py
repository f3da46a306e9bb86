"""Statistics of the durable log, computed by Spark through the ``millrace`` data source.

Usage (from the repository, with the venv that ``make setup`` creates)::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[2]' \\
        spark_jobs/log_stats.py --log-dir data/log [--stream S ...] [--include-active] \\
        [--json OUT]

``--log-dir`` is a local log directory or a log archive URI (``file://...``,
``s3://bucket/prefix``: see ``docs/spark.md``). ``PYSPARK_PYTHON`` (or an
activated venv, so that ``python3`` is the venv's) makes ``spark-submit``
run this driver with the Python that has ``millrace`` and ``pyspark``
installed; the driver then hands its own interpreter to the executors
unless ``PYSPARK_PYTHON`` names another one. The executors import
:mod:`spark_jobs.logsource` and :mod:`injector.log` from the installed
package, so neither ``PYTHONPATH`` nor ``--py-files`` is needed (on a real
cluster, install ``millrace`` on the workers, as in the Docker image, whose
``spark-submit`` finds this file at
``python -c 'import millrace.spark_jobs.log_stats as m; print(m.__file__)'``). Spark
needs a Java 17+ runtime: ``java`` on ``PATH`` or ``JAVA_HOME``.

What it does:

1. Lists the streams of ``--log-dir`` (every one holding a segment file,
   or those named by ``--stream``) and their segment files
   (:func:`spark_jobs.logsource.plan_segments`). By default only **sealed**
   segments are read (immutable: a segment with its ``.idx``, or any
   segment but the last; in an archive, every segment). ``--include-active``
   also reads each stream's active segment. That is safe -- a reader only
   ever yields whole, committed requests -- but the active segment may
   still be growing: the numbers are a snapshot, and next to a running
   writer an append in flight can show up as a ``CORRUPT`` torn tail of
   that segment.
2. Reads exactly those segments with ``spark.read.format("millrace")`` (one
   task per segment file) and aggregates per segment with DataFrame
   operations (:func:`aggregate_segments`: count, first/last offset,
   min/max times, the corrupt entry); the driver folds the per-segment rows
   (:func:`segment_partials`) and merges them per stream
   (:mod:`spark_jobs._log_reader`); neither step needs Spark.
3. Prints a table and, for scripts, one line per stream and per corrupt entry::

       STATS stream=<s> records=<n> min_event_ms=<ms> max_event_ms=<ms> segments=<n> corrupt=<n>
       CORRUPT stream=<s> segment=<file name> position=<byte> reason=<text to the end of the line>

   (``none`` for the times of a stream without records read; ``VANISHED
   stream=<s> segment=<file name>`` for a segment deleted by retention
   between listing and reading: the data source gives it a row with
   ``corrupt_reason = 'vanished'``, or, deleted before Spark planned the
   read, no row and no file.)

   ``records`` counts committed records; ``segments`` the segment files read.
   ``--json OUT`` also writes the whole result (per stream, per segment and
   every corrupt entry, with ingest times) to ``OUT``.

A corrupt entry (bad crc, torn entry, a sealed segment shorter or longer
than its index says, ...) ends the scan of its segment: the records before
it still count, and it is reported, not fatal. Exit status: 0 (also with
corrupt entries), 2 when the log directory, the archive or a named stream
does not exist (before Spark starts), 1 if the Spark job fails. Under
``spark-submit`` the driver's stderr (the ``log_stats: ...`` messages)
comes out on ``spark-submit``'s stdout, and Spark's own log on its stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millrace.injector.log import CorruptEntry
from millrace.spark_jobs._log_reader import (
    LogDirError,
    SegmentStats,
    StreamStats,
    merge_streams,
)
from millrace.spark_jobs.logsource import VANISHED, SegmentPartition, plan_segments, segment_exists

APP_NAME = "millrace-log-stats"


@dataclass(frozen=True, slots=True)
class Report:
    """The job's result: per-stream totals and the per-segment partials they came from."""

    log_dir: str
    include_active: bool
    streams: dict[str, StreamStats]
    segments: list[SegmentStats]
    spark_tasks: int = 0
    """How many Spark tasks read segments (one per segment file; 0 when none were read)."""

    def to_dict(self) -> dict[str, Any]:
        """What ``--json`` writes."""
        return {
            "log_dir": self.log_dir,
            "include_active": self.include_active,
            "spark_tasks": self.spark_tasks,
            "streams": {name: stats.to_dict() for name, stats in self.streams.items()},
            "corrupt": [
                report.to_dict() for stats in self.streams.values() for report in stats.corrupt
            ],
            "segments": [segment.to_dict() for segment in self.segments],
        }


def build_report(
    log_dir: str | Path,
    include_active: bool,
    streams: Sequence[str],
    segments: Sequence[SegmentStats],
    spark_tasks: int = 0,
) -> Report:
    """Merge the per-segment partials into a :class:`Report`."""
    ordered = sorted(segments, key=lambda s: (s.stream, s.base_offset))
    merged = merge_streams(streams, ordered)
    return Report(str(log_dir), include_active, merged, ordered, spark_tasks)


def _ms(value: int | None) -> str:
    return "none" if value is None else str(value)


def stats_lines(report: Report) -> list[str]:
    """The ``STATS`` line of every stream, then the ``CORRUPT`` line of every corrupt entry."""
    lines = [
        f"STATS stream={s.stream} records={s.records} min_event_ms={_ms(s.min_event_ms)} "
        f"max_event_ms={_ms(s.max_event_ms)} segments={s.segments} corrupt={len(s.corrupt)}"
        for s in report.streams.values()
    ]
    for stats in report.streams.values():
        lines.extend(
            f"CORRUPT stream={c.stream} segment={c.segment} position={c.position} reason={c.reason}"
            for c in stats.corrupt
        )
        lines.extend(f"VANISHED stream={stats.stream} segment={name}" for name in stats.vanished)
    return lines


def format_table(report: Report) -> str:
    """A fixed-width table, one row per stream."""
    header = (
        "stream", "segments", "records", "min_event_ms", "max_event_ms",
        "min_ingest_ms", "max_ingest_ms", "corrupt",
    )  # fmt: skip
    rows = [header] + [
        (
            s.stream,
            str(s.segments),
            str(s.records),
            _ms(s.min_event_ms),
            _ms(s.max_event_ms),
            _ms(s.min_ingest_ms),
            _ms(s.max_ingest_ms),
            str(len(s.corrupt)),
        )
        for s in report.streams.values()
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    scope = "sealed and active" if report.include_active else "sealed"
    title = (
        f"log {report.log_dir}: {len(report.streams)} stream(s), {scope} segments, "
        f"{report.spark_tasks} Spark task(s)"
    )
    return "\n".join([title, *lines])


AGGREGATES = (
    ("records", "count", "offset"),
    ("first_offset", "min", "offset"),
    ("last_offset", "max", "offset"),
    ("min_event_ms", "min", "event_time_ms"),
    ("max_event_ms", "max", "event_time_ms"),
    ("min_ingest_ms", "min", "ingest_time_ms"),
    ("max_ingest_ms", "max", "ingest_time_ms"),
    ("corrupt_position", "max", "corrupt_position"),
    ("corrupt_reason", "max", "corrupt_reason"),
)
"""Per segment: (result name, aggregate function, column). A segment has at most one
corrupt row (its scan stops there), so ``max`` of the corrupt columns is that row's."""


def aggregate_segments(df: Any) -> Any:
    """One row per ``(stream, segment)`` of a ``millrace`` DataFrame, as :data:`AGGREGATES` says."""
    from pyspark.sql import functions

    return df.groupBy("stream", "segment").agg(
        *(getattr(functions, fn)(column).alias(name) for name, fn, column in AGGREGATES)
    )


def segment_partials(
    segments: Iterable[SegmentPartition],
    rows: Iterable[Mapping[str, Any]],
    exists: Callable[[SegmentPartition], bool] = segment_exists,
) -> list[SegmentStats]:
    """The :class:`SegmentStats` of every listed segment, from :func:`aggregate_segments` rows.

    A segment without a row gave no rows at all: it holds no records if its
    file is still there (``exists``), else it vanished before Spark planned
    the read. A row with ``corrupt_reason`` ``vanished`` and no position is
    a segment that vanished before its task opened it. Rows of segments not
    listed (sealed after the listing) are ignored.
    """
    by_segment = {(row["stream"], row["segment"]): row for row in rows}
    partials = []
    for segment in segments:
        row = by_segment.get((segment.stream, segment.name))
        base = (segment.stream, segment.location, segment.base_offset, segment.sealed)
        if row is None:
            partials.append(SegmentStats(*base, vanished=not exists(segment)))
            continue
        position, reason = row["corrupt_position"], row["corrupt_reason"]
        if position is None and reason == VANISHED:
            partials.append(SegmentStats(*base, vanished=True))
            continue
        partials.append(
            SegmentStats(
                *base,
                records=int(row["records"]),
                first_offset=row["first_offset"],
                last_offset=row["last_offset"],
                min_event_ms=row["min_event_ms"],
                max_event_ms=row["max_event_ms"],
                min_ingest_ms=row["min_ingest_ms"],
                max_ingest_ms=row["max_ingest_ms"],
                corrupt=(
                    None
                    if position is None
                    else CorruptEntry(position=int(position), reason=str(reason))
                ),
            )
        )
    return partials


def scan_with_spark(
    spark: Any,
    location: str,
    segments: Sequence[SegmentPartition],
    *,
    streams: Sequence[str] | None = None,
    include_active: bool = False,
) -> tuple[list[SegmentStats], int]:
    """Read ``segments`` (and nothing else) of the log at ``location`` through the data source.

    ``streams`` is the ``stream`` option (None: every stream). Returns the
    per-segment partials, in ``segments`` order, and the number of Spark
    tasks (input partitions) that read them.
    """
    from pyspark.sql import functions

    from millrace import spark_jobs

    df = spark_jobs.read_log(spark, location, streams=streams, include_active=include_active)
    names = sorted({segment.name for segment in segments})
    wanted = sorted({segment.stream for segment in segments})
    df = df.where(functions.col("stream").isin(wanted) & functions.col("segment").isin(names))
    tasks: int = df.rdd.getNumPartitions()
    rows = [row.asDict() for row in aggregate_segments(df).collect()]
    return segment_partials(segments, rows), tasks


def run_spark(
    location: str,
    segments: Sequence[SegmentPartition],
    *,
    streams: Sequence[str] | None,
    include_active: bool,
    spark: Any = None,
) -> tuple[list[SegmentStats], int]:
    """:func:`scan_with_spark` in ``spark``, or in a Spark session of its own, stopped at
    the end (none started without segments)."""
    if not segments:
        return [], 0  # nothing to read: no need to start Spark
    if spark is not None:
        return scan_with_spark(
            spark, location, segments, streams=streams, include_active=include_active
        )
    from pyspark.sql import SparkSession

    # Local executors run the driver's interpreter (which has millrace installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.appName(APP_NAME).getOrCreate()
    try:
        spark.sparkContext.setLogLevel("WARN")
        return scan_with_spark(
            spark, location, segments, streams=streams, include_active=include_active
        )
    finally:
        spark.stop()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="log_stats.py",
        description="Per-stream statistics of the durable log, one Spark task per segment file.",
    )
    parser.add_argument(
        "--log-dir",
        required=True,
        help="the injector's log directory, or a log archive URI (file://, s3://, ...)",
    )
    parser.add_argument(
        "--stream",
        action="extend",
        nargs="+",
        metavar="S",
        help="only these streams (repeatable; default: every stream directory)",
    )
    parser.add_argument(
        "--include-active",
        action="store_true",
        help="also read each stream's active segment (a snapshot: it may still be growing)",
    )
    parser.add_argument("--json", metavar="OUT", help="also write the result as JSON to OUT")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    """Run the job; the exit status. ``spark``: a session to run in (default: one of
    its own, as under ``spark-submit``)."""
    args = parse_args(argv)
    location: str = args.log_dir
    try:
        streams, segments = plan_segments(location, args.stream, include_active=args.include_active)
    except LogDirError as error:
        print(f"log_stats: {error}", file=sys.stderr)
        return 2
    if not streams:
        print(f"log_stats: no streams in {location!r}", file=sys.stderr)
    partials, spark_tasks = run_spark(
        location, segments, streams=args.stream, include_active=args.include_active, spark=spark
    )
    report = build_report(location, args.include_active, streams, partials, spark_tasks)
    print(format_table(report))
    for line in stats_lines(report):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
