"""Peers in the bench (issue 29, item 6): the standard workload on Millrace, PyFlink SQL
and Bytewax, interleaved in one run, every window of each checked.

Workload (``bench/standard_workload.py``): ``--events`` (1,000,000) JSON lines
``{"key": "u<id>", "value": 1..100, "ts": ms}``, 10,000 Zipf(1.1) keys,
timestamps 1 ms apart jittered up to 5 s backwards, in one file (with its end
marker past the last window, which Millrace needs and the peers ignore); per key
the 1-minute tumbling count + sum, 5 s bounded out-of-orderness, the last window
emitted. Each engine's windows are checked against ``exact_windows``: every
window's count and sum, none missing, none extra, none twice.

- *millrace*: ``windows_bench.end_to_end_run`` (the JSON-lines file -> ``millrace
  inject`` -> injector -> node -> exactly-once file sink, vectorized path) in
  this repository's environment. Net time: the first injected line until the
  sink holds every window; wall: starting the processes to stopping them.
- *pyflink*: ``bench/peers/pyflink_job.py``: Flink SQL over a bounded
  filesystem/JSON source, ``WATERMARK ... - INTERVAL '5' SECOND``, a ``TUMBLE``
  window grouped by key with ``COUNT(*)``/``SUM(value)``, EmbeddedRocksDB state,
  exactly-once checkpoints every 5 s, parallelism 2, streaming mode, a
  filesystem/CSV sink (files committed by checkpoints). Net time: Flink's net
  runtime of the job (start to end, without JVM start-up and planning; it
  includes waiting for the final checkpoint that commits the last files); wall:
  the job process's start to exit.
- *bytewax*: ``bench/peers/bytewax_job.py``: ``fold_window`` over 1-minute
  tumbling event-time windows (``EventClock``, 5 s wait), recovery on (a SQLite
  recovery directory made with ``python -m bytewax.recovery``, snapshots every
  5 s), a ``FileSink``, one worker. Net time: the dataflow's run; wall: making the
  recovery directory and the job process, start to exit. ``--bytewax-clock
  event`` (default) makes the clock's watermark follow event time alone (its
  system-time source frozen, no system-time wake-ups), as Flink's bounded
  out-of-orderness does; ``system`` keeps the stock clock, whose watermark also
  advances with the system time since a key's last largest timestamp, so replayed
  events 5 s out of order are dropped as late whenever processing pauses, and
  every key is woken at each activation (its windows' close times are long past).

The peers run in their own virtualenvs under ``--venv-root``
(``~/.cache/millrace-peers``), made on first use with ``python3 -m venv`` and
``pip install -r bench/peers/requirements-<peer>.txt`` (pinned versions), remade
when that file changes. PyFlink needs Java (17) on the PATH.

Rounds: ``--runs`` (3) times the plain-Python floor, then millrace, pyflink,
bytewax (the machine's drift hits all alike); figures are medians.

    python bench/peers_bench.py [--events N] [--runs R] [--engines millrace,pyflink,bytewax]
                                [--venv-root DIR] [--parallelism 2] [--bytewax-clock event]

Prints a table, and one ``RESULT bench=peers engine=<name> events_per_s=...
vs_millrace=... runs=N`` line per engine (net time; the wall time and the
same-run plain-Python floor beside it). Exits 1 if any engine's windows were wrong.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.standard_workload import (  # noqa: E402
    KEYS,
    MINUTE_MS,
    ZIPF,
    exact_windows,
    plain_python_floor,
    workload,
    write_events,
)
from bench.windows_bench import end_to_end_run  # noqa: E402

PEERS = ROOT / "bench" / "peers"
ENGINES = ("millrace", "pyflink", "bytewax")
END_MARKER = "end-marker"
TIMEOUT_S = 1_800

Windows = dict[tuple[str, int, int], list[int]]


@dataclass
class Run:
    """One engine's run: its net and wall seconds, whether its windows were right."""

    net_s: float
    wall_s: float
    problem: str = ""
    version: str = ""
    detail: str = ""


@dataclass
class Setup:
    """What every run of a round shares."""

    events_file: Path
    expected: Windows
    work: Path
    venvs: dict[str, Path]
    parallelism: int
    bytewax_clock: str


# -- the peers' virtualenvs -------------------------------------------------------------


def peer_python(peer: str, venv_root: Path, python: str) -> Path:
    """The peer's virtualenv's interpreter, the virtualenv made (or remade, when its
    requirements changed) first."""
    requirements = PEERS / f"requirements-{peer}.txt"
    venv = venv_root / peer
    stamp = venv / "millrace-requirements.txt"
    interpreter = venv / "bin" / "python"
    wanted = requirements.read_text()
    if interpreter.exists() and stamp.exists() and stamp.read_text() == wanted:
        return interpreter
    print(f"making the {peer} virtualenv in {venv} (once) ...", flush=True)
    venv_root.mkdir(parents=True, exist_ok=True)
    for command in (
        [python, "-m", "venv", "--clear", str(venv)],
        [str(interpreter), "-m", "pip", "install", "--disable-pip-version-check", "-q",
         "-r", str(requirements)],
    ):  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            raise SystemExit(
                f"FAILED to make the {peer} virtualenv: {' '.join(command)} exited "
                f"{done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}"
            )
    stamp.write_text(wanted)
    return interpreter


# -- running each engine ----------------------------------------------------------------


def check(got: Windows, lines: int, expected: Windows) -> str:
    """What is wrong with an engine's windows ("" if nothing)."""
    if lines != len(got):
        return f"{lines - len(got)} windows emitted more than once"
    if got != expected:
        wrong = sum(1 for k, v in expected.items() if got.get(k) != v)
        extra = len(got.keys() - expected.keys())
        return f"{wrong} of {len(expected)} windows wrong or missing, {extra} extra"
    return ""


def job(command: list[str], log: Path) -> tuple[dict[str, Any], float]:
    """Run a peer's job script; its summary (the last line it printed) and wall seconds."""
    started = time.monotonic()
    with log.open("w") as err:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=err, text=True, timeout=TIMEOUT_S,
            check=False, cwd=log.parent,
        )  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"FAILED: {' '.join(command)} exited {done.returncode}:\n{tail}")
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary, wall


def run_millrace(setup: Setup, run: Path) -> Run:
    started = time.monotonic()
    problem = ""
    try:
        net = end_to_end_run(setup.events_file, f"tumbling:{MINUTE_MS}", True, setup.expected, run)
    except SystemExit as failed:  # windows_bench's check of the windows
        problem, net = str(failed), float("nan")
    return Run(net, time.monotonic() - started, problem)


def _window_ms(text: str) -> int:
    """Flink's ``TIMESTAMP(3)`` text (UTC session time zone) in epoch milliseconds."""
    return round(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def run_pyflink(setup: Setup, run: Path) -> Run:
    out = run / "panes"
    command = [str(setup.venvs["pyflink"]), str(PEERS / "pyflink_job.py"),
               str(setup.events_file), str(out), str(run / "flink"),
               "--parallelism", str(setup.parallelism)]  # fmt: skip
    summary, wall = job(command, run / "pyflink.log")
    got: Windows = {}
    lines = 0
    for part in sorted(out.iterdir()):
        if part.name.startswith("."):
            continue  # in progress: never committed by a checkpoint
        with part.open(newline="") as rows:
            for key, start, end, count, total in csv.reader(rows):
                if key != END_MARKER:
                    got[(key, _window_ms(start), _window_ms(end))] = [int(count), int(total)]
                    lines += 1
    problem = check(got, lines, setup.expected)
    if not summary["rocksdb"] or not summary["checkpoints"]:
        problem += f" rocksdb={summary['rocksdb']} checkpoints={summary['checkpoints']}"
    detail = f"{summary['checkpoints']} checkpoints, job {summary['job_s']:.1f} s"
    return Run(summary["net_s"], wall, problem.strip(), f"flink {summary['flink']}", detail)


def run_bytewax(setup: Setup, run: Path) -> Run:
    python = str(setup.venvs["bytewax"])
    recovery, out = run / "recovery", run / "panes.csv"
    recovery.mkdir()
    started = time.monotonic()
    subprocess.run([python, "-m", "bytewax.recovery", str(recovery), "1"], check=True)
    command = [python, str(PEERS / "bytewax_job.py"), str(setup.events_file), str(out),
               str(recovery), "--clock", setup.bytewax_clock]  # fmt: skip
    summary, _ = job(command, run / "bytewax.log")
    wall = time.monotonic() - started
    got: Windows = {}
    lines = 0
    with out.open() as rows:
        for line in rows:
            key, start, count, total = line.rstrip("\n").split(",")
            if key != END_MARKER:
                got[(key, int(start), int(start) + MINUTE_MS)] = [int(count), int(total)]
                lines += 1
    problem = check(got, lines, setup.expected)
    if summary["late"]:
        problem += f" ({summary['late']} events dropped as late)"
    detail = f"{summary['epochs']} epochs snapshotted"
    return Run(summary["net_s"], wall, problem.strip(), f"bytewax {summary['bytewax']}", detail)


RUNNERS: dict[str, Callable[[Setup, Path], Run]] = {
    "millrace": run_millrace,
    "pyflink": run_pyflink,
    "bytewax": run_bytewax,
}


# -- the bench --------------------------------------------------------------------------


def report(events: int, runs: dict[str, list[Run]], floors: list[float]) -> list[str]:
    """Print the table; return the RESULT lines."""
    floor = events / statistics.median(floors)
    rate = {name: events / statistics.median(r.net_s for r in got) for name, got in runs.items()}
    base = rate.get("millrace", float("nan"))
    print(f"\npeers ({events:,} events, {KEYS:,} Zipf({ZIPF}) keys, 1-min tumbling count + sum, "
          f"5 s out-of-orderness; medians of {len(floors)} runs; same-run plain-Python "
          f"floor {floor:,.0f} events/CPU-s)")  # fmt: skip
    print(f"  {'engine':<9} {'events/s':>10} {'x millrace':>10} {'x floor':>8} "
          f"{'wall ev/s':>10} {'net s':>7} {'wall s':>7}  check; runs (net s)")  # fmt: skip
    results = []
    for name, got in runs.items():
        net = statistics.median(r.net_s for r in got)
        wall = statistics.median(r.wall_s for r in got)
        problems = [r.problem for r in got if r.problem]
        verdict = "ok" if not problems else f"FAILED: {problems[0]}"
        print(f"  {name:<9} {rate[name]:>10,.0f} {rate[name] / base:>10.2f} "
              f"{rate[name] / floor:>8.2f} {events / wall:>10,.0f} {net:>7.1f} {wall:>7.1f}  "
              f"{verdict}; " + ", ".join(f"{r.net_s:.1f}" for r in got))  # fmt: skip
        version = next((r.version for r in got if r.version), "")
        results.append(
            f"RESULT bench=peers engine={name} events_per_s={rate[name]:.0f} "
            f"vs_millrace={rate[name] / base:.2f} wall_events_per_s={events / wall:.0f} "
            f"net_s={net:.2f} wall_s={wall:.2f} python_floor_events_per_cpu_s={floor:.0f} "
            f"vs_python_floor={rate[name] / floor:.2f} check={'ok' if not problems else 'FAILED'}"
            + (f" version={version.split()[-1]}" if version else "")
            + f" events={events} runs={len(got)}"
        )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated")
    parser.add_argument("--venv-root", type=Path, default=Path.home() / ".cache" / "millrace-peers")
    parser.add_argument("--python", default="python3", help="makes the peers' virtualenvs")
    parser.add_argument("--parallelism", type=int, default=2, help="PyFlink's")
    parser.add_argument("--bytewax-clock", choices=("event", "system"), default="event")
    args = parser.parse_args()
    engines = [name for name in args.engines.split(",") if name]
    if unknown := set(engines) - set(ENGINES):
        parser.error(f"unknown engines: {', '.join(sorted(unknown))}")
    if "pyflink" in engines and not shutil.which("java"):
        raise SystemExit("FAILED: PyFlink needs java (17) on the PATH")
    venvs = {p: peer_python(p, args.venv_root.expanduser(), args.python)
             for p in engines if p != "millrace"}  # fmt: skip
    data = workload(args.events)
    work = Path(tempfile.mkdtemp(prefix="millrace-peers-bench-"))
    setup = Setup(work / "events.jsonl", exact_windows(data, "tumbling"), work, venvs,
                  args.parallelism, args.bytewax_clock)  # fmt: skip
    write_events(data, setup.events_file)
    runs: dict[str, list[Run]] = {name: [] for name in engines}
    floors: list[float] = []
    try:
        for round_ in range(args.runs):  # interleaved: the machine's drift hits all alike
            floors.append(plain_python_floor(data))
            for name in engines:
                run = work / f"{name}-{round_}"
                run.mkdir()
                runs[name].append(result := RUNNERS[name](setup, run))
                print(f"round {round_ + 1}: {name:<9} net {result.net_s:6.1f} s, wall "
                      f"{result.wall_s:6.1f} s {result.detail} {result.problem}",
                      flush=True)  # fmt: skip
                shutil.rmtree(run, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = report(args.events, runs, floors)
    for line in results:
        print(line)
    return 1 if any(r.problem for got in runs.values() for r in got) else 0


if __name__ == "__main__":
    raise SystemExit(main())
