"""Spark over the durable log: the data source's read speed, and the backfill's.

1. *Reader*: ``--records`` (5,000,000) records of the standard workload in a
   durable log (64 MiB segments, written with ``StreamLog``) and the same
   records as a JSON-lines file; ``local[2]``, every row's event time read
   (``max(event_time_ms)``): the ``millrace`` data source next to
   ``spark.read.json`` with its schema given (no inference pass). Records per
   second of wall time, median of ``--runs``, interleaved.
2. *Backfill*: the standard workload (``--events``, 1,000,000) in a log; the
   1-minute tumbling count + sum of ``bench/windows_bench.py`` backfilled
   (``spark_jobs.batch.run_backfill``, ``local[2]``), every window checked
   against an exact computation; beside it, in the same run, the online nodes on
   the same records end to end (``windows_bench.end_to_end_run``: ``millrace
   inject`` -> injector -> node -> sink, vectorized path).
3. *Fixed cost*: ``millrace backfill`` of ``--small`` (20,000) events of the same
   workload, as a user runs it (``spark-submit``, a fresh JVM and Python workers,
   the output written and counted): wall seconds, and beside it, in the same run,
   ``spark-submit`` of a job that only starts a session and counts 10 rows.

    python bench/spark_bench.py [--records N] [--events N] [--runs R] [--no-online]
        [--small N]

Prints a table and ``RESULT bench=spark ...`` lines (medians).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.standard_workload import (  # noqa: E402
    MINUTE_MS,
    exact_windows,
    topology,
    workload,
    write_events,
)
from bench.windows_bench import end_to_end_run  # noqa: E402
from millrace.computations import Topology  # noqa: E402
from millrace.injector.log import AppendRequest, LogConfig, StreamLog  # noqa: E402

REQUEST = 1_000


def write_log(log_dir: Path, keys: list[str], times: list[int], values: list[int]) -> None:
    """The records in a durable log, ``REQUEST`` per append, without fsync."""
    log = StreamLog.open(log_dir / "events", "events", config=LogConfig(fsync=False))
    try:
        for at in range(0, len(keys), REQUEST):
            records = [
                (k.encode(), str(v).encode(), t)
                for k, t, v in zip(keys[at : at + REQUEST], times[at : at + REQUEST],
                                   values[at : at + REQUEST], strict=True)
            ]  # fmt: skip
            log.append([AppendRequest(records=records)])
    finally:
        log.close()


def write_json(path: Path, keys: list[str], times: list[int], values: list[int]) -> None:
    with path.open("w") as out:
        for k, t, v in zip(keys, times, values, strict=True):
            out.write(f'{{"key":"{k}","value":{v},"event_time_ms":{t}}}\n')


def reader_stage(spark: object, records: int, runs: int, work: Path) -> list[str]:
    """Stage 1: print its table; return its RESULT lines."""
    from pyspark.sql import functions as fn

    from millrace import spark_jobs

    keys, times, values = workload(records)
    log_dir, json_path = work / "log", work / "records.jsonl"
    write_log(log_dir, keys, times.tolist(), values.tolist())
    write_json(json_path, keys, times.tolist(), values.tolist())
    expected = int(times.max())
    schema = "key string, value long, event_time_ms long"
    timings: dict[str, list[float]] = {"millrace": [], "json": []}
    for _ in range(runs):
        for name, seconds in timings.items():
            started = time.monotonic()
            if name == "millrace":
                frame = spark_jobs.read_log(spark, str(log_dir), include_active=True)
            else:
                frame = spark.read.schema(schema).json(str(json_path))  # type: ignore[attr-defined]
            [row] = frame.agg(fn.max("event_time_ms"), fn.count("*")).collect()
            seconds.append(time.monotonic() - started)
            assert (row[0], row[1]) == (expected, records), (name, row)
    rates = {name: records / statistics.median(seconds) for name, seconds in timings.items()}
    print(f"reader ({records:,} records, local[2], max(event_time_ms) + count)")
    for name, seconds in timings.items():
        print(f"  {name:9} {rates[name]:>12,.0f} records/s   runs: "
              + ", ".join(f"{s:.1f} s" for s in seconds))  # fmt: skip
    ratio = rates["json"] / rates["millrace"]
    return [
        f"RESULT bench=spark stage=reader records={records} "
        f"millrace_records_per_s={rates['millrace']:.0f} json_records_per_s={rates['json']:.0f} "
        f"json_over_millrace={ratio:.2f} runs={runs}"
    ]


def backfill_stage(spark: object, events: int, runs: int, online: bool, work: Path) -> list[str]:
    """Stage 2: print its table; return its RESULT lines."""
    from millrace.spark_jobs.batch import BackfillOptions, run_backfill

    data = workload(events)
    keys, times, values = data
    log_dir = work / "backfill-log"
    write_log(log_dir, keys, times.tolist(), values.tolist())
    topo_file = work / "topology.toml"
    topo_file.write_text(topology(f"tumbling:{MINUTE_MS}", vectorized=True))
    exact = exact_windows(data, "tumbling")
    events_file = work / "events.jsonl"
    write_events(data, events_file)
    end_marker = 1  # write_events appends one record past the last window
    backfill_s: list[float] = []
    online_s: list[float] = []
    for run in range(runs):
        out = work / f"backfill-out-{run}"
        options = BackfillOptions(
            topology=Topology.load(topo_file), log=str(log_dir), out=str(out), include_active=True
        )
        started = time.monotonic()
        summary = run_backfill(spark, options)
        backfill_s.append(time.monotonic() - started)
        check(out / "panes", exact)
        assert summary.records_read == events, summary.records_read
        shutil.rmtree(out, ignore_errors=True)
        if online:
            online_s.append(end_to_end_run(events_file, f"tumbling:{MINUTE_MS}", True, exact, work))
    rate = events / statistics.median(backfill_s)
    print(f"backfill of the 1-minute tumbling count + sum ({events:,} events, "
          f"{len(exact):,} windows checked, local[2])")  # fmt: skip
    print(f"  backfill  {rate:>12,.0f} events/s   runs: "
          + ", ".join(f"{s:.1f} s" for s in backfill_s))  # fmt: skip
    line = f"RESULT bench=spark stage=backfill events={events} backfill_events_per_s={rate:.0f}"
    if online_s:
        online_rate = (events + end_marker) / statistics.median(online_s)
        print(f"  online    {online_rate:>12,.0f} events/s   runs: "
              + ", ".join(f"{s:.1f} s" for s in online_s))  # fmt: skip
        line += (
            f" online_events_per_s={online_rate:.0f} backfill_over_online={rate / online_rate:.2f}"
        )
    return [line + f" runs={runs}"]


SMALL_DEPLOYMENT = """
topology = "topology.toml"
[nodes.agg]
computation = "agg"
intervals = [0]
address = "127.0.0.1:1"
[sinks.panes]
address = "127.0.0.1:2"
"""
EMPTY_JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
assert spark.range(10).count() == 10
spark.stop()
"""


def fixed_cost_stage(events: int, runs: int, work: Path) -> list[str]:
    """Stage 3: print its table; return its RESULT line."""
    data = workload(events)
    keys, times, values = data
    log_dir = work / "small-log"
    write_log(log_dir, keys, times.tolist(), values.tolist())
    (work / "topology.toml").write_text(topology(f"tumbling:{MINUTE_MS}", vectorized=True))
    (work / "deployment.toml").write_text(SMALL_DEPLOYMENT)
    (work / "empty_job.py").write_text(EMPTY_JOB)
    exact = exact_windows(data, "tumbling")
    backfill = [sys.executable, "-m", "millrace", "backfill", "--config",
                str(work / "deployment.toml"), "--log", str(log_dir)]  # fmt: skip
    submit = str(Path(sys.executable).with_name("spark-submit"))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    backfill_s: list[float] = []
    empty_s: list[float] = []
    for run in range(runs):  # interleaved: drift hits both alike
        out = work / f"small-out-{run}"
        started = time.monotonic()
        subprocess.run([*backfill, "--out", str(out)], check=True, capture_output=True,
                       cwd=ROOT, env=env)  # fmt: skip
        backfill_s.append(time.monotonic() - started)
        check(out / "panes", exact)
        started = time.monotonic()
        subprocess.run([submit, "--master", "local[2]", str(work / "empty_job.py")],
                       check=True, capture_output=True, cwd=ROOT, env=env)  # fmt: skip
        empty_s.append(time.monotonic() - started)
    backfill_median, empty_median = statistics.median(backfill_s), statistics.median(empty_s)
    print(f"millrace backfill of {events:,} events as a user runs it (spark-submit, local[2])")
    print(f"  backfill       {backfill_median:>6.1f} s wall   runs: "
          + ", ".join(f"{s:.1f} s" for s in backfill_s))  # fmt: skip
    print(f"  empty job      {empty_median:>6.1f} s wall   runs: "
          + ", ".join(f"{s:.1f} s" for s in empty_s))  # fmt: skip
    return [
        f"RESULT bench=spark stage=fixed_cost events={events} "
        f"backfill_wall_s={backfill_median:.1f} empty_spark_job_wall_s={empty_median:.1f} "
        f"runs={runs}"
    ]


def check(parquet_dir: Path, exact: dict[tuple[str, int, int], list[int]]) -> None:
    """Every on-time pane equals the exact computation, and every window is there."""
    import pyarrow.parquet as pq

    got = {}
    for value in pq.read_table(parquet_dir, columns=["value"]).column("value").to_pylist():
        pane = json.loads(value)
        if pane["key"] != "end-marker":
            start, end = pane["window"]
            got[(pane["key"], start, end)] = [pane["value"]["count"], pane["value"]["sum"]]
    if got != exact:
        wrong = sum(1 for k, v in exact.items() if got.get(k) != v)
        raise SystemExit(f"FAILED: {wrong} of {len(exact)} windows wrong or missing")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-online", action="store_true", help="skip the online nodes' run")
    parser.add_argument("--no-reader", action="store_true", help="only the backfill")
    parser.add_argument("--no-backfill", action="store_true", help="only the reader")
    parser.add_argument("--small", type=int, default=20_000, help="events of stage 3 (0: skip)")
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.master("local[2]").appName("millrace-spark-bench").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="millrace-spark-bench-"))
    print(f"medians of {args.runs} runs; local[2] on this machine")
    try:
        results = [] if args.no_reader else reader_stage(spark, args.records, args.runs, work)
        if not args.no_backfill:
            results += backfill_stage(spark, args.events, args.runs, not args.no_online, work)
    finally:
        spark.stop()
    try:
        if args.small:
            results += fixed_cost_stage(args.small, args.runs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for line in results:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
