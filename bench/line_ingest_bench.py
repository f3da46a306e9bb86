"""Ingest of the standard workload's JSON lines into the injector's log, measured from outside.

Workload: ``--events`` (1,000,000) lines ``{"key": "u<id>", "value": 1..100, "ts": ms}``
(``bench/windows_bench.py``'s standard workload and file, end marker included). Each run
starts a fresh ``millrace injector`` process (fsync on, group commit; topology ``events ->
first``, no node running: the forwarder fills its bounded queue and then waits, as in
``bench/injector_bench.py``), and its Prometheus endpoint is polled every 50 ms for
``millrace_ingested_records_total``:

1. ``millrace inject --stream events FILE`` as a child process (batches of 1,000);
2. the file source: the same file renamed into the injector's ``file_sources``
   directory.

The figure is *observed at the injector*: records acknowledged into the log from the
first poll that saw any to the one that saw all, over that time (what the interpreter's
start-up and the file source's 100 ms polling cost is outside it). Beside it, the wall
clock from the hand-over (command started, file renamed) until every record is in the
log, and the same-run reference: the windows bench's plain-Python floor over the same
events. Medians of ``--runs`` interleaved runs.

    python bench/line_ingest_bench.py [--events N] [--runs R]

Prints a table and one ``RESULT bench=line_ingest ...`` line per path.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.injector_bench import INGEST_TOPOLOGY as TOPOLOGY  # noqa: E402
from bench.standard_workload import Events, plain_python_floor, workload, write_events  # noqa: E402
from millrace.local_cluster import millrace  # noqa: E402
from tests.support import InjectorProcess, free_port  # noqa: E402

POLL_S = 0.05
_INGESTED = re.compile(rb'^millrace_ingested_records_total\{stream="events"\} (\S+)$', re.M)


@dataclass(frozen=True)
class Run:
    """One path's run: records, seconds observed at the injector, wall seconds."""

    records: int
    observed_s: float
    wall_s: float


def write_deployment(work: Path, *, file_source: bool) -> tuple[Path, int]:
    """A deployment with an injector (metrics on) and a node nobody starts."""
    (work / "topology.toml").write_text(TOPOLOGY)
    metrics_port = free_port()
    lines = [
        'topology = "topology.toml"',
        "[injector]",
        f'address = "127.0.0.1:{free_port()}"',
        f"metrics_port = {metrics_port}",
    ]
    if file_source:
        (work / "incoming").mkdir()
        lines.append('file_sources = { events = "incoming" }')
    lines += [
        "[nodes.first]",
        'computation = "first"',
        "intervals = [0]",
        f'address = "127.0.0.1:{free_port()}"',
        "[sinks.ok]",
        f'address = "127.0.0.1:{free_port()}"',
    ]
    deployment = work / "deployment.toml"
    deployment.write_text("\n".join(lines) + "\n")
    return deployment, metrics_port


class IngestedPoller:
    """Samples the injector's ingested-records counter every :data:`POLL_S` until it
    reaches ``expected``; ``observed_s`` and ``rate`` exclude what came before the first
    sample that saw records."""

    def __init__(self, metrics_port: int, expected: int) -> None:
        self._url = f"http://127.0.0.1:{metrics_port}/metrics"
        self._expected = expected
        self.first: tuple[float, int] | None = None
        self.done_at: float | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _count(self) -> int:
        with urllib.request.urlopen(self._url, timeout=5) as response:
            match = _INGESTED.search(response.read())
        return int(float(match.group(1))) if match else 0

    def _run(self) -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            count = self._count()
            now = time.monotonic()
            if count and self.first is None:
                self.first = (now, count)
            if count >= self._expected:
                self.done_at = now
                return
            time.sleep(POLL_S)

    def wait(self) -> tuple[float, int]:
        """(seconds from the first sample with records to the last, records in them)."""
        self._thread.join()
        if self.first is None or self.done_at is None:
            raise SystemExit("FAILED: the injector did not ingest every record in 600 s")
        first_at, first_count = self.first
        return self.done_at - first_at, self._expected - first_count


def run_once(work: Path, events_file: Path, expected: int, *, file_source: bool) -> Run:
    """One path against a fresh injector."""
    work.mkdir()
    deployment, metrics_port = write_deployment(work, file_source=file_source)
    injector = InjectorProcess(deployment, work / "log", work / "injector.log", log_level="WARNING")
    injector.start()
    try:
        poller = IngestedPoller(metrics_port, expected)
        poller.start()
        started = time.monotonic()
        if file_source:
            staged = work / "events.jsonl"
            shutil.copyfile(events_file, staged)
            started = time.monotonic()
            os.rename(staged, work / "incoming" / "part-000.jsonl")
        else:
            command = ("inject", "--config", str(deployment), "--stream", "events")
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            done = subprocess.run(
                millrace(*command, str(events_file)),
                capture_output=True, text=True, cwd=ROOT, env=env, check=False,
            )  # fmt: skip
            if done.returncode != 0 or f"records accepted: {expected} " not in done.stdout:
                raise SystemExit(f"FAILED: inject exit {done.returncode}\n{done.stdout}")
        seconds, records = poller.wait()
        wall = (poller.done_at or 0.0) - started
    finally:
        injector.terminate()
        shutil.rmtree(work, ignore_errors=True)
    return Run(records, seconds, wall)


def main() -> int:
    """Run both paths ``--runs`` times, interleaved; print the table and RESULT lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    data: Events = workload(args.events)
    work = Path(tempfile.mkdtemp(prefix="millrace-line-ingest-bench-"))
    events_file = work / "events.jsonl"
    write_events(data, events_file)
    expected = args.events + 1  # the end marker
    runs: dict[str, list[Run]] = {"inject": [], "file_source": []}
    floors: list[float] = []
    try:
        for number in range(args.runs):
            floors.append(args.events / plain_python_floor(data))
            for path, done in runs.items():
                run = run_once(
                    work / f"{path}-{number}", events_file, expected,
                    file_source=path == "file_source",
                )  # fmt: skip
                done.append(run)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    floor = statistics.median(floors)
    print(
        f"JSON lines into the log: {expected:,} records, real injector process, fsync on; "
        f"{os.cpu_count()} cpus; medians of {args.runs} runs"
    )
    print(f"  same-run reference: plain-Python floor {floor:,.0f} events/s")
    print(f"  {'path':<13} {'records/s':>10} {'runs':>26} {'wall s (hand-over to all)':>26}")
    results = []
    for path, done in runs.items():
        rates = [r.records / r.observed_s for r in done]
        walls = [r.wall_s for r in done]
        rate = statistics.median(rates)
        each = " / ".join(f"{x / 1000:,.0f}k" for x in rates)
        wall_each = " / ".join(f"{x:.2f}" for x in walls)
        print(f"  {path:<13} {rate:>10,.0f} {each:>26} {wall_each:>26}")
        results.append(
            f"RESULT bench=line_ingest path={path} records_per_s={rate:.0f} "
            f"wall_s={statistics.median(walls):.2f} records={expected} "
            f"python_floor_events_per_s={floor:.0f} runs={args.runs}"
        )
    for line in results:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
