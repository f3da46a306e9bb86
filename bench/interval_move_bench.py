"""How long a live interval move pauses the interval, by the size of its store (issue 34).

For each size: a store of ``echo`` interval 0 filled with that much state
(incompressible 4 KiB values) before the nodes start; an injector, node ``a``
(interval 0), node ``b`` (interval 1) and a sink; ``echo`` passes every record to the
sink (``Map``); records ingested the whole time; then ``millrace intervals move`` moves
interval 0 to ``b``. Two figures:

- the pause: the time the interval commits nothing, from the old owner's fence (its
  ``handing ... over`` log line) to the new owner running it (``taken over``), read
  from the two nodes' logs;
- the record latency of interval 0's records ingested while the move ran (from just
  before their ingest call to their line appearing in the sink's file, polled every
  5 ms): median, p99 and max, beside the same for the 2 s before the move.

The reference beside them, measured in the same run: copying the same directory with
``shutil.copytree`` and fsyncing it (what any move must at least do here).

    .venv/bin/python bench/interval_move_bench.py --sizes-mb 100,1000

Prints a table and one ``RESULT bench=interval_move`` line per size.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.clickstream.demo import free_port  # noqa: E402
from millrace.computations import interval_of  # noqa: E402
from millrace.injector.client import IngestClient  # noqa: E402
from millrace.local_cluster import millrace, start_services, stop  # noqa: E402
from millrace.statestore import StateStore, StoreConfig  # noqa: E402

TOPOLOGY = """
[streams.events]
[streams.echo_out]

[computations.echo]
handler = "millrace.dataflow:Map"
intervals = 2
inputs = { events = "key" }
outputs = ["echo_out"]

[computations.echo.params]
fn = "bench_echo:same"
output = "echo_out"
"""
ECHO = "def same(record):\n    return record.value\n"
"""``bench_echo.py``, in the processes' working directory (``python -m`` imports from it)."""
VALUE_BYTES = 4096
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def fill(path: Path, size_mb: int) -> None:
    """A store with ``size_mb`` MiB of state rows (random bytes: RocksDB cannot shrink them)."""
    store = StateStore.open_rocksdb(path, config=StoreConfig(sync=False))
    rows = size_mb * (1 << 20) // VALUE_BYTES
    done = 0
    while done < rows:
        txn = store.begin()
        for i in range(done, min(rows, done + 2000)):
            txn.put(b"\xffbench-fill-%09d" % i, os.urandom(VALUE_BYTES))
        txn.commit(sync=False)
        done = min(rows, done + 2000)
    store.close()


def du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / (1 << 20)


def copy_floor_s(path: Path, target: Path) -> float:
    """copytree + fsync of every file: the least a move of this store costs."""
    started = time.perf_counter()
    shutil.copytree(path, target)
    for file in target.iterdir():
        fd = os.open(file, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    took = time.perf_counter() - started
    shutil.rmtree(target)
    return took


def logged_at(log: Path, pattern: str) -> float:
    for line in log.read_text().splitlines():
        if pattern in line:
            match = STAMP.match(line)
            assert match is not None
            # Both logs are on this host's clock: a difference of two is what is wanted.
            stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").astimezone()
            return stamp.timestamp()
    raise RuntimeError(f"no {pattern!r} in {log}")


class SinkTail(threading.Thread):
    """When each record's line appeared in the sink's file, by its event time."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self._path = path
        self.seen: dict[int, float] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        offset, rest = 0, b""
        while not self.stopping.wait(0.005):
            if not self._path.exists():
                continue
            with self._path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            now = time.time()
            offset += len(chunk)
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                self.seen.setdefault(json.loads(line)["event_time_ms"], now)


def percentiles(latencies: list[float]) -> tuple[float, float, float]:
    """Median, p99 and max, in seconds (nan when empty)."""
    if not latencies:
        return (float("nan"),) * 3
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered), p99, ordered[-1]


def write_files(work: Path) -> tuple[Path, dict[str, str]]:
    """The topology, the ``echo`` function and the deployment; its addresses."""
    (work / "topology.toml").write_text(TOPOLOGY)
    (work / "bench_echo.py").write_text(ECHO)
    at = {name: f"127.0.0.1:{free_port()}" for name in ("injector", "a", "b", "sink")}
    deployment = work / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "{at["injector"]}"
[nodes.a]
computation = "echo"
intervals = [0]
address = "{at["a"]}"
[nodes.b]
computation = "echo"
intervals = [1]
address = "{at["b"]}"
[sinks.echo_out]
address = "{at["sink"]}"
path = "out.jsonl"
"""
    )
    return deployment, at


def one_size(size_mb: int, work: Path) -> dict[str, float]:
    deployment, at = write_files(work)
    store = work / "a" / "echo" / "0"
    fill(store, size_mb)
    stored_mb = du_mb(store)
    floor = copy_floor_s(store, work / "copy")
    d = str(deployment)
    processes = start_services(deployment, work, nodes=("a", "b"), sinks=("echo_out",))
    try:
        client = IngestClient(at["injector"], timeout_s=10)
        stopping = threading.Event()
        sent_at: dict[int, tuple[float, bytes]] = {}
        tail = SinkTail(work / "out.jsonl")
        tail.start()

        def ingest() -> None:
            sent = 0
            while not stopping.is_set():
                rows = [(f"k{i % 200}".encode(), b"1", 1_700_000_000_000 + sent + i)
                        for i in range(200)]  # fmt: skip
                now = time.time()
                sent_at.update((t, (now, key)) for key, _, t in rows)
                client.ingest("events", rows, idempotency_key=f"b{sent}", give_up_after_s=120)
                sent += len(rows)
                time.sleep(0.02)

        feeder = threading.Thread(target=ingest, daemon=True)
        feeder.start()
        time.sleep(3.0)
        env = {**os.environ, "MILLRACE_LOG_LEVEL": "INFO"}
        move_started = time.time()
        moved = subprocess.run(
            millrace("intervals", "move", "--config", d, "--computation", "echo",
                     "--interval", "0", "--to", "b", "--wait-s", "600"),
            capture_output=True, text=True, cwd=work, env=env, check=True,
        ).stdout  # fmt: skip
        move_ended = time.time()
        time.sleep(1.0)
        stopping.set()
        feeder.join(60)
        deadline = time.time() + 60
        while len(tail.seen) < len(sent_at) and time.time() < deadline:
            time.sleep(0.1)
        tail.stopping.set()
        took = re.search(r"in ([0-9.]+) s", moved)
        fenced = logged_at(work / "a.log", "handing echo/0 over")
        running = logged_at(work / "b.log", "interval echo/0 taken over")

        def latencies(start_s: float, end_s: float) -> list[float]:
            return [
                tail.seen[t] - at_s
                for t, (at_s, key) in list(sent_at.items())
                if start_s <= at_s <= end_s and interval_of(key, 2) == 0 and t in tail.seen
            ]

        during = percentiles(latencies(move_started, move_ended))
        before = percentiles(latencies(move_started - 2.0, move_started))
        return {
            "size_mb": size_mb,
            "stored_mb": stored_mb,
            "pause_s": running - fenced,
            "move_s": float(took.group(1)) if took else float("nan"),
            "copy_floor_s": floor,
            "p50_during_s": during[0],
            "p99_during_s": during[1],
            "max_during_s": during[2],
            "p50_before_s": before[0],
            "p99_before_s": before[1],
            "missing": len(sent_at) - len(tail.seen),
        }
    finally:
        stop(processes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", default="100", help="comma-separated store sizes, MiB")
    args = parser.parse_args()
    os.environ.setdefault("MILLRACE_LOG_LEVEL", "INFO")
    rows = []
    for size in (int(s) for s in args.sizes_mb.split(",")):
        with tempfile.TemporaryDirectory(prefix="millrace-move-") as tmp:
            rows.append(one_size(size, Path(tmp)))
    print(
        f"{'store MiB':>10} {'on disk MiB':>12} {'pause s':>8} {'move s':>7} "
        f"{'copy floor s':>13} {'latency during move p50/p99/max s':>34} "
        f"{'before p50/p99 s':>17} {'missing':>8}"
    )
    for row in rows:
        during = f"{row['p50_during_s']:.3f}/{row['p99_during_s']:.3f}/{row['max_during_s']:.3f}"
        before = f"{row['p50_before_s']:.3f}/{row['p99_before_s']:.3f}"
        print(f"{row['size_mb']:>10} {row['stored_mb']:>12.0f} {row['pause_s']:>8.2f} "
              f"{row['move_s']:>7.1f} {row['copy_floor_s']:>13.2f} {during:>34} "
              f"{before:>17} {row['missing']:>8}")  # fmt: skip
    for row in rows:
        print(
            f"RESULT bench=interval_move size_mb={row['size_mb']} "
            f"stored_mb={row['stored_mb']:.0f} pause_s={row['pause_s']:.2f} "
            f"move_s={row['move_s']:.1f} copy_floor_s={row['copy_floor_s']:.2f} "
            f"latency_p50_during_s={row['p50_during_s']:.3f} "
            f"latency_p99_during_s={row['p99_during_s']:.3f} "
            f"latency_max_during_s={row['max_during_s']:.3f} "
            f"latency_p50_before_s={row['p50_before_s']:.3f} "
            f"latency_p99_before_s={row['p99_before_s']:.3f} missing={row['missing']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
