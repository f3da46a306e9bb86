"""The standard windowed workload as SQL and as the same query on the library (issue 35).

Workload: ``bench/standard_workload.py``'s events (10,000 Zipf(1.1) users, timestamps
jittered up to 5 s) as rows ``{"user": "u<id>", "value": 1..100}``; the query: per user
and 1-minute tumbling window, the count and the sum of ``value``:

- **library**: ``WindowedAggregation`` keyed by ``json:user``, ``aggregate =
  "count+sum"``, ``field = "value"`` (its panes);
- **sql**: ``SELECT user, COUNT(*), SUM(value), window_start, window_end FROM
  TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY user,
  window_start, window_end`` planned by ``millrace sql`` (its rows).

Each runs in ``IntervalProcessor`` over real RocksDB (fsynced commits of ``--batch``
records), every record and then every window's timer (the panes or rows written),
CPU seconds of this process; the two interleaved, ``--runs`` times, medians. Beside
them, measured in the same run, the plain-Python floor (a dict of [count, sum] per
user and minute over the same rows, each parsed). Both outputs are checked equal to
an exact computation.

    python bench/sql_bench.py [--events N] [--runs R] [--batch B]

Prints a table and ``RESULT bench=sql ...`` lines (medians).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.standard_workload import MINUTE_MS, Events, workload  # noqa: E402
from millrace.computations import MAX_TIME, Topology  # noqa: E402
from millrace.engine import IntervalProcessor  # noqa: E402
from millrace.statestore import StateStore, StoreConfig  # noqa: E402
from millrace.streamsql import compile_sql  # noqa: E402
from millrace.wire.v1 import record_pb2  # noqa: E402

SQL = """
CREATE TABLE events (user VARCHAR NOT NULL, value BIGINT NOT NULL, ts TIMESTAMP(3),
                     WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('stream' = 'events');
CREATE TABLE panes (user VARCHAR, c BIGINT, s BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3))
    WITH ('stream' = 'panes');
INSERT INTO panes
SELECT user, COUNT(*), SUM(value), window_start, window_end
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY user, window_start, window_end;
"""
LIBRARY = {
    "streams": {"events": {}, "panes": {}},
    "computations": {
        "agg": {
            "handler": "millrace.dataflow:WindowedAggregation",
            "inputs": {"events": "json:user"},
            "outputs": ["panes"],
            "params": {
                "window": f"tumbling:{MINUTE_MS}",
                "aggregate": "count+sum",
                "field": "value",
                "output": "panes",
            },
        }
    },
}


def rows(data: Events) -> list[record_pb2.Record]:
    """The workload's events as rows, as a node receives them."""
    keys, times, values = data
    return [
        record_pb2.Record(
            record_id=i.to_bytes(8, "big"), key=b"",
            value=json.dumps({"user": k, "value": v}).encode(), event_time_ms=t,
            stream="events",
        )
        for i, (k, t, v) in enumerate(zip(keys, times.tolist(), values.tolist(), strict=True))
    ]  # fmt: skip


def exact(data: Events) -> dict[tuple[str, int], list[int]]:
    keys, times, values = data
    found: dict[tuple[str, int], list[int]] = {}
    for key, t, v in zip(keys, (times - times % MINUTE_MS).tolist(), values.tolist(), strict=True):
        acc = found.setdefault((key, t), [0, 0])
        acc[0] += 1
        acc[1] += v
    return found


def plain_python_floor(records: list[record_pb2.Record]) -> float:
    """CPU seconds of a dict of [count, sum] per (user, minute), each row parsed."""
    started = time.process_time()
    windows: dict[tuple[str, int], list[int]] = {}
    for record in records:
        row = json.loads(record.value)
        t = record.event_time_ms
        acc = windows.get((row["user"], t - t % MINUTE_MS))
        if acc is None:
            acc = windows[(row["user"], t - t % MINUTE_MS)] = [0, 0]
        acc[0] += 1
        acc[1] += row["value"]
    return time.process_time() - started


def run(
    topology: dict[str, Any], records: list[record_pb2.Record], batch: int, work: Path
) -> tuple[float, list[bytes]]:
    """CPU seconds of every record and every window's timer; the values written."""
    path = work / f"run-{time.monotonic_ns()}"
    store = StateStore.open_rocksdb(path, config=StoreConfig(sync=True))
    [name] = topology["computations"]
    processor = IntervalProcessor(
        topology=Topology.from_dict(topology), computation=name, interval=0, store=store,
        epoch=1,
    )  # fmt: skip
    try:
        started = time.process_time()
        for at in range(0, len(records), batch):
            processor.process_records(records[at : at + batch])
        processor.advance_watermark(MAX_TIME)
        while processor.fire_timers(limit=batch).timers_fired:
            pass
        used = time.process_time() - started
        return used, [p.record.value for p in processor.pending_productions()]
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)


def as_windows(values: list[bytes], sql: bool) -> dict[tuple[str, int], list[int]]:
    found = {}
    for value in values:
        body = json.loads(value)
        if sql:
            found[(body["user"], body["ws"])] = [body["c"], body["s"]]
        else:
            found[(body["key"], body["window"][0])] = [body["value"]["count"],
                                                      body["value"]["sum"]]  # fmt: skip
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1_000)
    args = parser.parse_args()
    data = workload(args.events)
    records = rows(data)
    expected = exact(data)
    sql = compile_sql(SQL).topology
    assert sql["computations"]["panes"]["params"]["aggregate"] == "count+sum"  # native fold
    seconds: dict[str, list[float]] = {"library": [], "sql": [], "plain Python": []}
    with tempfile.TemporaryDirectory(prefix="sql-bench-") as tmp:
        for _ in range(args.runs):
            seconds["plain Python"].append(plain_python_floor(records))
            for name, topology in (("library", LIBRARY), ("sql", sql)):
                used, values = run(topology, records, args.batch, Path(tmp))
                if as_windows(values, name == "sql") != expected:
                    print(f"FAILED: the {name} run's windows differ from the exact ones")
                    return 1
                seconds[name].append(used)
    median = {name: statistics.median(s) for name, s in seconds.items()}
    floor = args.events / median["plain Python"]
    print(f"{args.events:,} events, {len(expected):,} windows, batches of {args.batch}, "
          f"{args.runs} runs (medians, CPU); plain-Python floor {floor:,.0f} events/s")  # fmt: skip
    print(f"  {'query':<8} {'events/s':>10} {'us/event':>9} {'x floor':>8} {'runs (s)':<24}")
    for name in ("library", "sql"):
        rate = args.events / median[name]
        runs = " ".join(f"{s:.2f}" for s in seconds[name])
        print(f"  {name:<8} {rate:>10,.0f} {1e6 / rate:>9.2f} {rate / floor:>8.2f} {runs:<24}")
        print(f"RESULT bench=sql query={name} events={args.events} events_per_s={rate:.0f} "
              f"us_per_event={1e6 / rate:.3f} floor_events_per_s={floor:.0f}")  # fmt: skip
    ratio = median["sql"] / median["library"]
    print(f"  sql / library CPU: {ratio:.3f} (target: at most 1.10)")
    print(f"RESULT bench=sql ratio_sql_to_library={ratio:.3f} target=1.10")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
