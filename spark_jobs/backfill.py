"""Backfill: a deployment's topology over the durable log, on Spark, with the nodes' code.

Usage (from the repository, with the venv ``make setup`` creates; ``millrace
backfill`` builds and prints this command)::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[2]' \\
        spark_jobs/backfill.py --config deployment.toml --out out/backfill \\
        [--log data/log | --log s3://bucket/millrace/log] [--from T1] [--to T2] \\
        [--intervals N] [--partitions N] [--jsonl] [--summary summary.json]

``--log`` defaults to the deployment's ``archive_uri``. ``--from``/``--to``
take milliseconds since the epoch or ISO-8601 times with a zone
(``2026-11-25T00:00:00+00:00``) and select records by event time,
``[from, to)``. Every computation of the topology runs over the selected
records through ``IntervalProcessor`` with a perfect watermark
(``spark_jobs.batch``); the sink streams are written to ``--out/<stream>/``
as Parquet (and ``--out/<stream>.jsonl/`` with ``--jsonl``). Record ids equal
the ids the online nodes give the same outputs.

Prints, besides Spark's own progress::

    BACKFILL records_read=<n> corrupt=<n> seconds=<s>
    STAGE computation=<c> records_in=<n> productions=<n> timers_fired=<n> dead_letters=<n>
    OUTPUT stream=<s> records=<n> path=<out>/<s>

The active segment of each stream is read too when no injector writes the
log (a local directory): see ``spark_jobs/_backfill_input.py``.

Exit status: 0; 2 for a bad argument, a missing log or a topology that does not
import; 1 if the Spark job fails (its error is printed); 3 if it read no record
(why is printed; ``--allow-empty`` makes that 0).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

APP_NAME = "millrace-backfill"
EXIT_EMPTY = 3
"""The exit status of a backfill that read no record (unless ``--allow-empty``)."""
T = TypeVar("T")


def parse_time(text: str) -> int:
    """Milliseconds since the epoch, from an integer or an ISO-8601 time with a zone."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is neither milliseconds nor ISO-8601") from exc
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone (add +00:00 for UTC)")
    return round(moment.timestamp() * 1000)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="backfill.py", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the deployment file (its topology runs)")
    parser.add_argument("--out", required=True, help="output directory or URI (overwritten)")
    parser.add_argument("--log", help="log directory or archive URI (default: archive_uri)")
    parser.add_argument("--from", dest="from_ms", type=parse_time, help="event time from (incl.)")
    parser.add_argument("--to", dest="to_ms", type=parse_time, help="event time to (excl.)")
    parser.add_argument("--intervals", type=int, help="key intervals per computation")
    parser.add_argument("--partitions", type=int, help="Spark partitions per stage")
    parser.add_argument(
        "--include-active", action="store_true",
        help="read each stream's active segment even while an injector writes it (a snapshot; "
             "without: only when none does)",
    )  # fmt: skip
    parser.add_argument("--allow-empty", action="store_true",
                        help="exit 0 when no record is read (else 3, saying why)")  # fmt: skip
    parser.add_argument("--jsonl", action="store_true", help="also write JSON lines")
    parser.add_argument("--summary", help="also write the summary as JSON here")
    return parser.parse_args(argv)


def prepare(args: argparse.Namespace, prog: str) -> tuple[Any, Any, str] | int:
    """``(deployment, topology, log location)`` checked before Spark starts, or the exit
    status after printing why not (a topology that does not import, no log)."""
    from millrace.computations.errors import TopologyError
    from millrace.deployment import Deployment
    from millrace.spark_jobs.batch import with_intervals
    from millrace.spark_jobs.logsource import LogDirError, check_location

    try:
        deployment = Deployment.load(args.config)
        topology = deployment.topology
        with_intervals(topology, args.intervals)  # a bad count fails here
        for name in topology.computations:
            topology.handler_class(name)  # fails here, not on an executor
    except (TopologyError, OSError, ValueError, ImportError) as exc:
        print(f"{prog}: {args.config}: {exc}", file=sys.stderr)
        return 2
    placement = deployment.injector
    log = args.log or (placement.archive_uri if placement else None)
    if log is None:
        print(f"{prog}: give --log (the deployment has no archive_uri)", file=sys.stderr)
        return 2
    try:
        check_location(log)
    except LogDirError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    return deployment, topology, log


def spark_session(app_name: str) -> Any:
    """The job's session (executors run this interpreter unless PYSPARK_PYTHON says)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.appName(app_name).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def run_in_spark(app_name: str, prog: str, job: Callable[[Any], T]) -> T | None:
    """``job(spark)`` in a session of its own, stopped after; None (the reason printed)
    if the Spark job failed."""
    spark = spark_session(app_name)
    try:
        return job(spark)
    except Exception as exc:  # the Spark job failed: its first line says why
        print(f"{prog}: the Spark job failed: {reason(exc)}", file=sys.stderr)
        return None
    finally:
        spark.stop()


def summary_lines(summary: Any, out: str) -> list[str]:
    """The ``BACKFILL``, ``STAGE``, ``OUTPUT`` and ``CORRUPT`` lines of a summary."""
    lines = [
        f"BACKFILL records_read={summary.records_read} corrupt={len(summary.corrupt)} "
        f"seconds={summary.seconds:.1f}"
    ]
    for name, stats in summary.stages.items():
        figures = " ".join(f"{key}={value}" for key, value in stats.items())
        lines.append(f"STAGE computation={name} {figures}")
    for stream, count in summary.outputs.items():
        lines.append(f"OUTPUT stream={stream} records={count} path={out.rstrip('/')}/{stream}")
    for corrupt in summary.corrupt:
        lines.append("CORRUPT " + " ".join(f"{key}={value}" for key, value in corrupt.items()))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; the exit status."""
    args = parse_args(argv)
    prepared = prepare(args, "backfill")
    if isinstance(prepared, int):
        return prepared
    _, topology, log = prepared
    from millrace.spark_jobs._backfill_input import (
        segments_to_read,
        streams_being_written,
        why_nothing_was_read,
    )
    from millrace.spark_jobs.batch import BackfillOptions, run_backfill

    sources = list(topology.sources())
    written = streams_being_written(log, sources)
    include_active = args.include_active or not written
    reading = {"from_ms": args.from_ms, "to_ms": args.to_ms, "include_active": include_active}

    def empty(corrupt: int = 0) -> int:
        why = why_nothing_was_read(log, sources, written=written, corrupt=corrupt, **reading)
        print(f"backfill: {why} (--allow-empty: exit 0 all the same)", file=sys.stderr)
        return EXIT_EMPTY

    if not args.allow_empty and segments_to_read(log, sources, **reading) == 0:
        return empty()  # known before Spark starts (its start costs most of a small run)
    options = BackfillOptions(
        topology=topology, log=log, out=args.out, from_ms=args.from_ms, to_ms=args.to_ms,
        partitions=args.partitions, intervals=args.intervals,
        include_active=include_active, jsonl=args.jsonl,
    )  # fmt: skip
    summary = run_in_spark(APP_NAME, "backfill", lambda spark: run_backfill(spark, options))
    if summary is None:
        return 1
    for line in summary_lines(summary, args.out):
        print(line)
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary.to_dict(), indent=2) + "\n")
    sys.stdout.flush()
    if summary.records_read == 0 and not args.allow_empty:
        return empty(len(summary.corrupt))
    return 0


def reason(exc: BaseException) -> str:
    """The user's exception out of a Py4J/PySpark error, when there is one."""
    text = str(exc)
    for line in text.splitlines():
        if "Error:" in line and not line.startswith(("\t", " at ")):
            return line.strip()
    return text.splitlines()[0] if text else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
