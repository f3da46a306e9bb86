"""Replay corrections: recompute a time range from the log and correct the online sinks.

Usage (``millrace replay`` builds and prints this command)::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[2]' \\
        spark_jobs/replay.py --config deployment.toml [--log DIR|URI] [--from T1] [--to T2] \\
        [--work DIR] [--sink-path STREAM=PATH ...] [--dry-run] [--report report.json]

1. Backfills ``[from, to)`` over everything the log holds -- records that came
   too late for the online system included (``spark_jobs/batch``, into
   ``--work``, a scratch directory by default).
2. Reads what each sink stream's online sink holds (its file or Parquet
   directory: ``[sinks.STREAM] path``, or ``--sink-path``) and compares the
   current result of every output identity in the range (a window of a key,
   or a key) with the backfill's (``spark_jobs.batch.compare``); a stream named
   by ``--by-content`` record by record, by content (``compare_content``).
3. Publishes each difference as a correction into the sink through the
   sink's own ``Delivery`` endpoint (so its file, Parquet parts and ``View``
   show it), with ids derived from the backfill's: a second run publishes
   nothing. ``--dry-run`` only reports.

Prints ``REPLAY stream=<s> checked=<n> changed=<n> missing=<n> online_only=<n>
published=<n>`` per sink stream and ``REPLAY late_records=<n>`` (records that
arrived behind their source's watermark, i.e. more than ``out_of_orderness_ms``
behind the newest event time before them in the log). Exit status as
``backfill.py``; also 2 for a sink stream without a path.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from millrace.spark_jobs.backfill import parse_time, prepare, run_in_spark, summary_lines

APP_NAME = "millrace-replay"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="replay.py", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the deployment file")
    parser.add_argument("--log", help="log directory or archive URI (default: archive_uri)")
    parser.add_argument("--from", dest="from_ms", type=parse_time, help="event time from (incl.)")
    parser.add_argument("--to", dest="to_ms", type=parse_time, help="event time to (excl.)")
    parser.add_argument("--work", help="where the backfill writes (default: a scratch dir)")
    parser.add_argument("--intervals", type=int, help="key intervals per computation")
    parser.add_argument("--partitions", type=int, help="Spark partitions per stage")
    parser.add_argument(
        "--include-active", action="store_true",
        help="also read each stream's active segment (a snapshot; local log directories)",
    )  # fmt: skip
    parser.add_argument(
        "--sink-path", action="append", default=[], metavar="STREAM=PATH",
        help="the online sink's file (or Parquet directory) of STREAM",
    )  # fmt: skip
    parser.add_argument(
        "--by-content", action="append", default=[], metavar="STREAM",
        help="compare STREAM record by record by content (a join's matches, alerts), not "
             "one current result per key or window",
    )  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="compare only, publish nothing")
    parser.add_argument("--report", help="also write the report as JSON here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; the exit status."""
    args = parse_args(argv)
    prepared = prepare(args, "replay")
    if isinstance(prepared, int):
        return prepared
    deployment, topology, log = prepared
    paths = dict(deployment.sink_paths)
    for item in args.sink_path:
        stream, _, path = item.partition("=")
        paths[stream] = path
    missing = [s for s in topology.sinks() if s not in paths]
    if missing:
        print(f"replay: no sink path for {missing} (give --sink-path)", file=sys.stderr)
        return 2
    work = args.work or tempfile.mkdtemp(prefix="millrace-replay-")
    from millrace.spark_jobs._backfill_input import streams_being_written
    from millrace.spark_jobs.batch import BackfillOptions, run_backfill

    include_active = args.include_active or not streams_being_written(log, list(topology.sources()))
    options = BackfillOptions(
        topology=topology, log=log, out=work, from_ms=args.from_ms, to_ms=args.to_ms,
        partitions=args.partitions, intervals=args.intervals, include_active=include_active,
    )  # fmt: skip
    placement = deployment.injector
    ooo = placement.out_of_orderness_ms if placement else 0

    def job(spark: Any) -> tuple[Any, int]:
        late = late_records(
            spark, log, list(topology.sources()), ooo, from_ms=args.from_ms, to_ms=args.to_ms,
            include_active=include_active,
        )  # fmt: skip
        return run_backfill(spark, options), late

    done = run_in_spark(APP_NAME, "replay", job)
    if done is None:
        return 1
    summary, late = done
    for line in summary_lines(summary, work):
        print(line)
    report: dict[str, Any] = {"late_records": late, "backfill": summary.to_dict(), "streams": {}}
    for stream in topology.sinks():
        figures = correct(deployment, stream, Path(work) / stream, Path(paths[stream]), args)
        report["streams"][stream] = figures
        print(f"REPLAY stream={stream} " + " ".join(f"{k}={v}" for k, v in figures.items()))
    print(f"REPLAY late_records={late}")
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()
    return 0


def correct(
    deployment: Any, stream: str, backfilled: Path, sink_path: Path, args: argparse.Namespace
) -> dict[str, int]:
    """Compare one sink stream and publish its corrections; the report's figures."""
    import pyarrow.parquet as pq

    from millrace.spark_jobs.batch import Output, compare, compare_content, publish

    backfill = [
        Output(row["record_id"], row["key"], row["value"], row["event_time_ms"], row["seq"])
        for row in pq.read_table(backfilled).to_pylist()
    ]
    comparison = compare_content if stream in args.by_content else compare
    result = comparison(backfill, online_outputs(sink_path), from_ms=args.from_ms, to_ms=args.to_ms)
    figures = result.to_dict()
    figures["published"] = 0
    if result.corrections and not args.dry_run:
        channel = deployment.security.open_channel(deployment.sinks[stream])
        try:
            figures["published"] = publish(channel, stream, result.corrections)
        finally:
            channel.close()
    return figures


def online_outputs(path: Path) -> list[Any]:
    """What a sink holds, in its arrival order: a JSON-lines file or a Parquet directory."""
    from millrace.sinks import read_parquet_sink, read_sink_records
    from millrace.spark_jobs.batch import Output

    if path.is_dir():
        return [
            Output(row["record_id"], row["key"], row["value"], row["event_time_ms"])
            for row in read_parquet_sink(path).to_pylist()
        ]
    if not path.exists():
        return []
    return [Output(r.record_id, r.key, r.value, r.event_time_ms) for r in read_sink_records(path)]


def late_records(
    spark: Any,
    log: str,
    streams: list[str],
    out_of_orderness_ms: int,
    *,
    from_ms: int | None,
    to_ms: int | None,
    include_active: bool = False,
) -> int:
    """Records in the range that arrived behind their source's watermark (the newest
    event time before them in the log minus ``out_of_orderness_ms``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as fn

    from millrace import spark_jobs

    records = spark_jobs.read_log(spark, log, streams=streams, include_active=include_active).where(
        fn.col("corrupt_reason").isNull()
    )
    before = (
        Window.partitionBy("stream").orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
    )
    marked = records.withColumn("newest_before", fn.max("event_time_ms").over(before))
    late = marked.where(fn.col("event_time_ms") < fn.col("newest_before") - out_of_orderness_ms)
    if from_ms is not None:
        late = late.where(fn.col("event_time_ms") >= from_ms)
    if to_ms is not None:
        late = late.where(fn.col("event_time_ms") < to_ms)
    count: int = late.count()
    return count


if __name__ == "__main__":
    sys.exit(main())
