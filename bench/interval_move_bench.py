"""How long a live interval move pauses the interval, by the size of its store (issue 34).

For each size: a store of ``counts`` interval 0 filled with that much state
(incompressible 4 KiB values) before the nodes start; an injector, node ``a``
(interval 0), node ``b`` (interval 1) and a sink; records ingested the whole time;
then ``millrace intervals move`` moves interval 0 to ``b``. The pause is the time the
interval commits nothing: from the old owner's fence (its ``handing ... over`` log line)
to the new owner running it (``taken over``), read from the two nodes' logs. The
reference beside it, measured in the same run: copying the same directory with
``shutil.copytree`` and fsyncing it (what any move must at least do here).

    .venv/bin/python bench/interval_move_bench.py --sizes-mb 100,1000

Prints a table and one ``RESULT bench=interval_move`` line per size.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
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
from millrace.injector.client import IngestClient  # noqa: E402
from millrace.local_cluster import millrace, start, stop  # noqa: E402
from millrace.statestore import StateStore, StoreConfig  # noqa: E402

TOPOLOGY = """
[streams.events]
[streams.counts_out]

[computations.counts]
handler = "millrace.dataflow:WindowedAggregation"
intervals = 2
inputs = { events = "key" }
outputs = ["counts_out"]

[computations.counts.params]
window = "tumbling:1000"
aggregate = "count"
output = "counts_out"
"""
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


def one_size(size_mb: int, work: Path) -> dict[str, float]:
    (work / "topology.toml").write_text(TOPOLOGY)
    at = {name: f"127.0.0.1:{free_port()}" for name in ("injector", "a", "b", "sink")}
    deployment = work / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "{at["injector"]}"
[nodes.a]
computation = "counts"
intervals = [0]
address = "{at["a"]}"
[nodes.b]
computation = "counts"
intervals = [1]
address = "{at["b"]}"
[sinks.counts_out]
address = "{at["sink"]}"
path = "out.jsonl"
"""
    )
    store = work / "a" / "counts" / "0"
    fill(store, size_mb)
    stored_mb = du_mb(store)
    floor = copy_floor_s(store, work / "copy")
    d = str(deployment)
    injector = ["injector", "--config", d, "--log-dir", str(work / "log")]
    processes = [
        start(injector, "injector serving", "injector", log=work / "injector.log", cwd=work)
    ]
    try:
        for name in ("a", "b"):
            args = ["node", "--config", d, "--name", name, "--data-dir", str(work / name)]
            processes.append(
                start(args, f"node {name} serving", name, log=work / f"{name}.log", cwd=work)
            )
        processes.append(
            start(["sink", "--config", d, "--stream", "counts_out"], "sink ", "sink",
                  log=work / "sink.log", cwd=work)
        )  # fmt: skip
        client = IngestClient(at["injector"], timeout_s=10)
        stopping = threading.Event()

        def ingest() -> None:
            sent = 0
            while not stopping.is_set():
                rows = [(f"k{i % 200}".encode(), b"1", 1_700_000_000_000 + sent + i)
                        for i in range(200)]  # fmt: skip
                client.ingest("events", rows, idempotency_key=f"b{sent}", give_up_after_s=120)
                sent += len(rows)
                time.sleep(0.02)

        feeder = threading.Thread(target=ingest, daemon=True)
        feeder.start()
        time.sleep(2.0)
        env = {**os.environ, "MILLRACE_LOG_LEVEL": "INFO"}
        moved = subprocess.run(
            millrace("intervals", "move", "--config", d, "--computation", "counts",
                     "--interval", "0", "--to", "b", "--wait-s", "600"),
            capture_output=True, text=True, cwd=work, env=env, check=True,
        ).stdout  # fmt: skip
        time.sleep(1.0)
        stopping.set()
        feeder.join(60)
        took = re.search(r"in ([0-9.]+) s", moved)
        fenced = logged_at(work / "a.log", "handing counts/0 over")
        running = logged_at(work / "b.log", "interval counts/0 taken over")
        return {
            "size_mb": size_mb,
            "stored_mb": stored_mb,
            "pause_s": running - fenced,
            "move_s": float(took.group(1)) if took else float("nan"),
            "copy_floor_s": floor,
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
        f"{'store MiB':>10} {'on disk MiB':>12} {'pause s':>8} {'move s':>7} {'copy floor s':>13}"
    )
    for row in rows:
        print(f"{row['size_mb']:>10} {row['stored_mb']:>12.0f} {row['pause_s']:>8.2f} "
              f"{row['move_s']:>7.1f} {row['copy_floor_s']:>13.2f}")  # fmt: skip
    for row in rows:
        print(
            f"RESULT bench=interval_move size_mb={row['size_mb']} "
            f"stored_mb={row['stored_mb']:.0f} pause_s={row['pause_s']:.2f} "
            f"move_s={row['move_s']:.1f} copy_floor_s={row['copy_floor_s']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
