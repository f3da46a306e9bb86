"""Statistics of the durable log, computed by Spark: one task per segment file.

Usage (from the repository, with the venv that ``make setup`` creates)::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[2]' \\
        spark_jobs/log_stats.py --log-dir data/log [--stream S ...] [--include-active] \\
        [--json OUT]

``PYSPARK_PYTHON`` (or an activated venv, so that ``python3`` is the venv's)
makes ``spark-submit`` run this driver with the Python that has ``millrace``
and ``pyspark`` installed; the driver then hands its own interpreter to the
executors unless ``PYSPARK_PYTHON`` names another one. The executors import
:mod:`injector.log` and :mod:`spark_jobs._log_reader` from the installed
package, so neither ``PYTHONPATH`` nor ``--py-files`` is needed (on a real
cluster, install ``millrace`` on the workers, as in the Docker image, whose
``spark-submit`` finds this file at
``python -c 'import spark_jobs.log_stats as m; print(m.__file__)'``). Spark
needs a Java 17+ runtime: ``java`` on ``PATH`` or ``JAVA_HOME``.

What it does:

1. Lists the stream directories of ``--log-dir`` (every one holding a
   segment file, or those named by ``--stream``) and their segment files.
   By default only **sealed** segments are read (immutable: a segment with
   its ``.idx``, or any segment but the last). ``--include-active`` also
   reads each stream's active segment. That is safe -- a reader only ever
   yields whole, committed requests -- but the active segment may still be
   growing: the numbers are a snapshot, and next to a running writer an
   append in flight can show up as a ``CORRUPT`` torn tail of that segment.
2. Runs one Spark task per segment file
   (``sc.parallelize(files, numSlices=len(files)).map(scan_task)``), which
   scans it with :func:`injector.log.scan_segment` and returns per-segment
   partial statistics; the driver merges them per stream
   (:mod:`spark_jobs._log_reader`, unit-testable without Spark).
3. Prints a table and, for scripts, one line per stream and per corrupt entry::

       STATS stream=<s> records=<n> min_event_ms=<ms> max_event_ms=<ms> segments=<n> corrupt=<n>
       CORRUPT stream=<s> segment=<file name> position=<byte> reason=<text to the end of the line>

   (``none`` for the times of a stream without records read; ``VANISHED
   stream=<s> segment=<file name>`` for a segment deleted by retention
   between listing and reading.)

   ``records`` counts committed records; ``segments`` the segment files read.
   ``--json OUT`` also writes the whole result (per stream, per segment and
   every corrupt entry, with ingest times) to ``OUT``.

A corrupt entry (bad crc, torn entry, ...) ends the scan of its segment: the
records before it still count, and it is reported, not fatal. Exit status: 0
(also with corrupt entries), 2 when the log directory or a named stream does
not exist (before Spark starts), 1 if the Spark job fails. Under
``spark-submit`` the driver's stderr (the ``log_stats: ...`` messages)
comes out on ``spark-submit``'s stdout, and Spark's own log on its stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_jobs._log_reader import (
    LogDirError,
    SegmentFile,
    SegmentStats,
    StreamStats,
    list_segments,
    merge_streams,
    scan_task,
)

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
    log_dir: Path,
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


def scan_with_spark(files: Sequence[SegmentFile]) -> tuple[list[SegmentStats], int]:
    """Scan every file in its own Spark task.

    Returns the per-segment partials, in ``files`` order, and the number of
    tasks (partitions) that read them.
    """
    if not files:
        return [], 0  # nothing to read: no need to start Spark
    from pyspark import SparkConf, SparkContext

    # Local executors run the driver's interpreter (which has millrace installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    context = SparkContext.getOrCreate(SparkConf().setAppName(APP_NAME))
    try:
        context.setLogLevel("WARN")
        tasks = [f.task() for f in files]
        rdd = context.parallelize(tasks, numSlices=len(tasks)).map(scan_task)
        partitions: int = rdd.getNumPartitions()
        results: list[dict[str, Any]] = rdd.collect()
    finally:
        context.stop()
    return [SegmentStats.from_dict(result) for result in results], partitions


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="log_stats.py",
        description="Per-stream statistics of the durable log, one Spark task per segment file.",
    )
    parser.add_argument("--log-dir", required=True, help="the injector's log directory")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; the exit status."""
    args = parse_args(argv)
    log_dir = Path(args.log_dir)
    try:
        streams, files = list_segments(log_dir, args.stream, include_active=args.include_active)
    except LogDirError as error:
        print(f"log_stats: {error}", file=sys.stderr)
        return 2
    if not streams:
        print(f"log_stats: no stream directories in {str(log_dir)!r}", file=sys.stderr)
    partials, spark_tasks = scan_with_spark(files)
    report = build_report(log_dir, args.include_active, streams, partials, spark_tasks)
    print(format_table(report))
    for line in stats_lines(report):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
