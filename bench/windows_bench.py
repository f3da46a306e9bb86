"""Windowed aggregations on the standard workload, per computation and end to end.

Workload: ``--events`` (1,000,000) lines ``{"key": "u<id>", "value": 1..100,
"ts": ms}``, 10,000 Zipf(1.1) keys, timestamps 1 ms apart jittered up to 5 s
backwards; 1-minute tumbling count + sum per key (``millrace.dataflow:WindowedAggregation``,
``aggregate = "count+sum"``), 5 s bounded out-of-orderness, and the same over
5-minute-gap sessions. Every window is checked against an exact computation.

1. *The aggregation alone*: ``IntervalProcessor.process_records`` over real
   RocksDB (fsynced commits of 1,000 and of 4,000 records: one delivered batch, and
   a node's largest group commit), on the first ``--proc-events``: the vectorized path and
   the one-record-at-a-time path of the same aggregation, interleaved, CPU
   seconds of this process. Each path's *engine floor* is measured too (the same
   step with user code that does nothing: dedup, keying, the commit of state and
   record ids), so the table also shows the aggregation's own CPU (total minus
   floor). Beside them a plain-Python floor (a dict of [count, sum] per key and
   minute over the same events).
2. *End to end through real processes*: the JSON-lines file -> ``millrace
   inject`` -> injector -> node -> exactly-once file sink (``millrace up``,
   ``millrace sink``), wall time from the first injected line until the sink
   holds every window's on-time pane (the last one included: an end marker
   record moves event time past it).

    python bench/windows_bench.py [--events N] [--runs R] [--no-e2e]

Prints a table, and one ``RESULT bench=windows ...`` line per figure (medians).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._measure import descendants, millrace_role, process_cpu_s  # noqa: E402
from bench.standard_workload import (  # noqa: E402
    GAP_MS,
    KEYS,
    MINUTE_MS,
    TOPOLOGY,
    ZIPF,
    Events,
    delivered,
    exact_windows,
    plain_python_floor,
    rocksdb_floor,
    topology,
    workload,
    write_events,
)
from millrace.computations import BatchContext, Computation, Context, Record, Topology  # noqa: E402
from millrace.engine import IntervalProcessor  # noqa: E402
from millrace.local_cluster import millrace, start, stop  # noqa: E402
from millrace.statestore import StateStore, StoreConfig  # noqa: E402
from tests.support import free_port  # noqa: E402

BATCHES = (1_000, 4_000)
"""Records per commit: a delivered batch, and a node's group commit under load."""


DEPLOYMENT = """
topology = "topology.toml"

[injector]
address = "127.0.0.1:{injector}"
out_of_orderness_ms = 5000
idle_timeout_ms = 60000

[nodes.agg]
computation = "agg"
intervals = [0]
address = "127.0.0.1:{node}"

[sinks.panes]
address = "127.0.0.1:{sink}"
path = "out/panes.jsonl"
external = true  # started here, its CPU measured on its own
"""

PATHS = ("vectorized", "per-record")


# -- 1. the aggregation alone ---------------------------------------------------------


class TakesEverything(Computation):
    """The vectorized path's engine floor: ``process_batch`` takes every record and does
    nothing (what remains is dedup, keying, the batch hand-over and the commit)."""

    def process_record(self, ctx: Context, record: Record) -> None:
        raise AssertionError("process_batch takes everything")

    def process_batch(self, batch: BatchContext, records: Sequence[Record]) -> Sequence[Record]:
        return ()


class DoesNothing(Computation):
    """The per-record path's engine floor: a ``process_record`` that does nothing."""

    def process_record(self, ctx: Context, record: Record) -> None:
        pass


PROCESSOR_RUNS = {
    "vectorized": topology(f"tumbling:{MINUTE_MS}", vectorized=True),
    "per-record": topology(f"tumbling:{MINUTE_MS}", vectorized=False),
    "vectorized floor": TOPOLOGY.format(handler="bench.windows_bench:TakesEverything", params=""),
    "per-record floor": TOPOLOGY.format(handler="bench.windows_bench:DoesNothing", params=""),
}
"""What the aggregation-alone stage runs: each path, and each path's engine floor."""


def processor_run(data: Events, topology: str, batch: int, work: Path) -> float:
    """CPU seconds of ``process_records`` over the whole workload, fsynced commits."""
    path = work / f"proc-{time.monotonic_ns()}"
    path.mkdir()
    (path / "t.toml").write_text(topology)
    store = StateStore.open_rocksdb(path / "store", config=StoreConfig(sync=True))
    processor = IntervalProcessor(
        topology=Topology.load(path / "t.toml"), computation="agg", interval=0, store=store, epoch=1
    )
    records = delivered(data)
    try:
        started = time.process_time()
        for at in range(0, len(records), batch):
            processor.process_records(records[at : at + batch])
        return time.process_time() - started
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)


# -- 2. end to end ----------------------------------------------------------------------


class PaneTail:
    """The on-time panes of the sink's file, read incrementally: each poll parses only
    the lines written since the last one (re-reading 100,000 panes every poll took
    the bench's own CPU from the processes it measures)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.panes: dict[tuple[str, int, int], list[int]] = {}
        self._offset = 0

    def poll(self) -> dict[tuple[str, int, int], list[int]]:
        """Read the complete lines added since the last poll; return every pane so far."""
        if not self.path.exists():
            return self.panes
        with self.path.open("rb") as lines:
            lines.seek(self._offset)
            for line in lines:
                if not line.endswith(b"\n"):
                    break  # being written
                self._offset += len(line)
                pane = json.loads(line)["value"]  # a JSON value, as JSON
                if pane["key"] != "end-marker":
                    start, end = pane["window"]
                    self.panes[(pane["key"], start, end)] = [
                        pane["value"]["count"],
                        pane["value"]["sum"],
                    ]
        return self.panes


def end_to_end_run(
    events_file: Path,
    window: str,
    vectorized: bool,
    expected: dict[Any, list[int]],
    work: Path,
    *,
    cpu: dict[str, float] | None = None,
) -> float:
    """Wall seconds from the first injected line until the sink holds every window;
    adds each process's CPU seconds (start-up included) to ``cpu``, if given, by role."""
    run = work / f"e2e-{time.monotonic_ns()}"
    run.mkdir()
    (run / "topology.toml").write_text(topology(window, vectorized))
    ports = {name: free_port() for name in ("injector", "node", "sink")}
    deployment = run / "deployment.toml"
    deployment.write_text(DEPLOYMENT.format(**ports))
    processes: list[subprocess.Popen[str]] = []
    out = run / "out" / "panes.jsonl"
    try:
        sink = ("sink", "--config", str(deployment), "--stream", "panes")
        processes.append(start(sink, "serving", "sink", log=run / "sink.log", cwd=run))
        up = ("up", "--deployment", str(deployment), "--data-dir", str(run / "data"))
        processes.append(start(up, "millrace up: running", "up", log=run / "up.log", cwd=run))
        started = time.monotonic()
        inject = ("inject", "--config", str(deployment), "--stream", "events", str(events_file))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(millrace(*inject), check=True, capture_output=True, cwd=run)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = {"inject": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}
        deadline = time.monotonic() + 900
        tail = PaneTail(out)
        while time.monotonic() < deadline and len(panes := tail.poll()) < len(expected):
            time.sleep(0.05)
        seconds = time.monotonic() - started
        for pid in [processes[0].pid, *descendants(processes[1].pid)]:
            role = millrace_role(pid)
            if role != "other":
                used[role] = used.get(role, 0.0) + process_cpu_s(pid)
        if cpu is not None:
            for role, seconds in used.items():
                cpu[role] += seconds
        if panes != expected:
            wrong = sum(1 for k, v in expected.items() if panes.get(k) != v)
            raise SystemExit(f"FAILED: {wrong} of {len(expected)} windows wrong or missing ({run})")
        return seconds
    finally:
        stop(processes)
        shutil.rmtree(run, ignore_errors=True)


def aggregation_stage(data: Events, runs: int, work: Path) -> list[str]:
    """Stage 1: print its table; return its RESULT lines."""
    count = len(data[0])
    cpu: dict[tuple[str, int], list[float]] = defaultdict(list)
    floors: list[float] = []
    for _ in range(runs):  # interleaved: the machine's drift hits all alike
        floors.append(plain_python_floor(data))
        for batch in BATCHES:
            for name, text in PROCESSOR_RUNS.items():
                cpu[(name, batch)].append(processor_run(data, text, batch, work))
    floor = count / statistics.median(floors)
    print(f"aggregation alone ({count:,} events, CPU, plain-Python floor {floor:,.0f}/s)")
    print(f"  {'batch':>6} {'path':<11} {'events/s':>10} {'us/event':>9} {'engine':>7} {'own':>6}")
    results = []
    for batch in BATCHES:
        us = {name: statistics.median(cpu[(name, batch)]) / count * 1e6 for name in PROCESSOR_RUNS}
        own = {name: us[name] - us[f"{name} floor"] for name in PATHS}
        for name in PATHS:
            rate, engine = 1e6 / us[name], us[f"{name} floor"]
            print(f"  {batch:>6} {name:<11} {rate:>10,.0f} {us[name]:>9.2f} {engine:>7.2f} "
                  f"{own[name]:>6.2f}")  # fmt: skip
            results.append(
                f"RESULT bench=windows stage=aggregation batch={batch} "
                f"path={name.replace('-', '_')} events_per_cpu_s={rate:.0f} "
                f"cpu_us_per_event={us[name]:.2f} engine_floor_us={engine:.2f} "
                f"aggregation_us={own[name]:.2f} "
                f"python_floor_events_per_cpu_s={floor:.0f} runs={runs}"
            )
        results.append(
            f"RESULT bench=windows stage=aggregation batch={batch} "
            f"vectorized_speedup={us['per-record'] / us['vectorized']:.2f} "
            f"aggregation_speedup={own['per-record'] / own['vectorized']:.2f}"
        )
    return results


def end_to_end_stage(data: Events, runs: int, work: Path, *, all_cases: bool = True) -> list[str]:
    """Stage 2: print its table; return its RESULT lines."""
    events = len(data[0])
    events_file = work / "events.jsonl"
    write_events(data, events_file)
    lines = events_file.read_bytes().splitlines()[:events]
    cases = [
        ("tumbling 1 min", f"tumbling:{MINUTE_MS}", True),
        ("tumbling 1 min", f"tumbling:{MINUTE_MS}", False),
        ("sessions 5 min gap", f"session:{GAP_MS}", False),
    ][: 3 if all_cases else 1]
    wall: dict[tuple[str, bool], list[float]] = defaultdict(list)
    cpu: dict[tuple[str, bool], list[dict[str, float]]] = defaultdict(list)
    floors, rocks_floors = [], []
    expected = {spec: exact_windows(data, spec) for _, spec, _ in cases}
    for _ in range(runs):
        floors.append(plain_python_floor(data))
        rocks_floors.append(rocksdb_floor(lines, work))
        for _label, spec, vectorized in cases:
            used: dict[str, float] = defaultdict(float)
            wall[(spec, vectorized)].append(
                end_to_end_run(events_file, spec, vectorized, expected[spec], work, cpu=used)
            )
            cpu[(spec, vectorized)].append(used)
    floor = events / statistics.median(floors)
    rocks = events / statistics.median(rocks_floors)
    print(f"end to end ({events:,} events, wall clock; floors: plain Python {floor:,.0f}/s, "
          f"plain Python + RocksDB batches of 1,000 synced {rocks:,.0f}/s)")  # fmt: skip
    roles = ("inject", "injector", "node", "sink")
    print(f"  {'windows':<20} {'path':<11} {'events/s':>10} {'x floor':>8} "
          + " ".join(f"{r + ' us':>11}" for r in roles) + f" {'windows':>9}")  # fmt: skip
    results = []
    for label, spec, vectorized in cases:
        eps = events / statistics.median(wall[(spec, vectorized)])
        us = {r: statistics.median(u[r] for u in cpu[(spec, vectorized)]) / events * 1e6
              for r in roles}  # fmt: skip
        path = "vectorized" if vectorized else "per-record"
        print(f"  {label:<20} {path:<11} {eps:>10,.0f} {eps / rocks:>8.2f} "
              + " ".join(f"{us[r]:>11.1f}" for r in roles)
              + f" {len(expected[spec]):>9,}")  # fmt: skip
        results.append(
            f"RESULT bench=windows stage=end_to_end window={spec.split(':')[0]} "
            f"path={path.replace('-', '_')} events_per_s={eps:.0f} "
            f"vs_rocksdb_floor={eps / rocks:.2f} "
            + " ".join(f"cpu_us_{r}={us[r]:.1f}" for r in roles)
            + f" cpu_us_services={us['injector'] + us['node'] + us['sink']:.1f}"
            f" windows={len(expected[spec])} rocksdb_floor_events_per_s={rocks:.0f}"
            f" python_floor_events_per_cpu_s={floor:.0f} runs={runs}"
        )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--proc-events", type=int, default=300_000)
    parser.add_argument("--no-e2e", action="store_true", help="only the aggregation alone")
    parser.add_argument("--no-aggregation", action="store_true", help="only end to end")
    parser.add_argument(
        "--vectorized-only", action="store_true", help="end to end: the vectorized tumbling case"
    )
    args = parser.parse_args()
    data = workload(args.events)
    work = Path(tempfile.mkdtemp(prefix="millrace-windows-bench-"))
    print(f"{KEYS:,} Zipf({ZIPF}) keys; medians of {args.runs} runs")
    try:
        first = tuple(column[: args.proc_events] for column in data)
        results = []
        if not args.no_aggregation:
            results += aggregation_stage(first, args.runs, work)  # type: ignore[arg-type]
        if not args.no_e2e:
            results += end_to_end_stage(data, args.runs, work, all_cases=not args.vectorized_only)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for line in results:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
