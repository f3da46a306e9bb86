# mypy: disable-error-code="import-not-found"
"""The standard workload's 1-minute tumbling count + sum on Bytewax with recovery (run
by ``bench/peers_bench.py`` in its own virtualenv, requirements-bytewax.txt).

``FileSource`` over the JSON-lines file, ``json.loads`` per line, keyed by
``key``; ``bytewax.operators.windowing.fold_window`` with a 1-minute
``TumblingWindower`` (aligned to the epoch) and an ``EventClock`` on ``ts``
with ``wait_for_system_duration`` 5 s; count + sum folded per key and window
(``ordered=False``: both are commutative, as in Flink's aggregation); the closed
windows to a ``FileSink`` (truncated to its snapshot on resume). Recovery on: a
SQLite recovery directory of one partition made by ``python -m bytewax.recovery``
before the run (by the bench), snapshots every ``--snapshot-s`` (5 s, the epoch
length), no backup delay. One worker (``bytewax.run``'s default), end of input
closes the last windows.

    python bytewax_job.py EVENTS_FILE OUT_FILE RECOVERY_DIR [--snapshot-s 5]

Prints one JSON line: ``net_s`` (the dataflow's run, from ``cli_main`` to its
end), ``setup_s`` (this process's start to the run), ``late`` (events the
windows dropped as late; they are also written to ``OUT_FILE.late``) and
``epochs`` (the recovery store's frontier: epochs whose snapshots were written).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

STARTED = time.monotonic()

MINUTE_MS = 60_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("events", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("recovery", type=Path)
    parser.add_argument("--snapshot-s", type=float, default=5.0)
    parser.add_argument("--wait-s", type=float, default=5.0)
    parser.add_argument("--clock", choices=("event", "system"), default="event")
    args = parser.parse_args()

    import bytewax.operators as op
    from bytewax._bytewax import cli_main
    from bytewax.connectors.files import FileSink, FileSource
    from bytewax.dataflow import Dataflow
    from bytewax.operators.windowing import EventClock, TumblingWindower, fold_window
    from bytewax.recovery import RecoveryConfig

    epoch = datetime(1970, 1, 1, tzinfo=UTC)

    def event_time(event: dict[str, int]) -> datetime:
        return epoch + timedelta(milliseconds=event["ts"])

    def fold(acc: list[int], event: dict[str, int]) -> list[int]:
        acc[0] += 1
        acc[1] += event["value"]
        return acc

    def merge(a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]

    def line(item: tuple[str, tuple[int, list[int]]]) -> tuple[str, str]:
        key, (window_id, (count, total)) = item
        return key, f"{key},{window_id * MINUTE_MS},{count},{total}"

    flow = Dataflow("peers_bench")
    events = op.map("parse", op.input("file", flow, FileSource(args.events)), json.loads)
    keyed = op.key_on("key", events, lambda event: event["key"])
    wait = timedelta(seconds=args.wait_s)
    if args.clock == "system":  # the stock clock: the watermark also moves with system time
        clock = EventClock(event_time, wait_for_system_duration=wait)
    else:  # event time alone: per key, the largest timestamp seen minus the wait
        frozen = datetime.now(UTC)
        clock = EventClock(
            event_time,
            wait_for_system_duration=wait,
            now_getter=lambda: frozen,
            to_system_utc=lambda _close: None,  # no wake-ups: closes on items and at EOF
        )
    windower = TumblingWindower(length=timedelta(minutes=1), align_to=epoch)
    windows = fold_window("agg", keyed, clock, windower, lambda: [0, 0], fold, merge, False)
    op.output("panes", op.map("format", windows.down, line), FileSink(args.out))
    late = op.map("late_line", windows.late, lambda kv: (kv[0], json.dumps(kv[1][1])))
    op.output("late", late, FileSink(Path(f"{args.out}.late")))

    recovery = RecoveryConfig(str(args.recovery), backup_interval=timedelta(0))
    started = time.monotonic()
    cli_main(
        flow,
        workers_per_process=1,
        epoch_interval=timedelta(seconds=args.snapshot_s),
        recovery_config=recovery,
    )
    ended = time.monotonic()
    late_path = Path(f"{args.out}.late")
    dropped = sum(1 for _ in late_path.open()) if late_path.exists() else 0
    with sqlite3.connect(args.recovery / "part-0.sqlite3") as db:
        [(frontier,)] = db.execute("SELECT max(worker_frontier) FROM fronts").fetchall()
    print(
        json.dumps(
            {
                "net_s": ended - started,
                "setup_s": started - STARTED,
                "late": dropped,
                "epochs": frontier,
                "bytewax": _bytewax_version(),
            }
        ),
        flush=True,
    )
    return 0


def _bytewax_version() -> str:
    from importlib.metadata import version

    return version("bytewax")


if __name__ == "__main__":
    raise SystemExit(main())
