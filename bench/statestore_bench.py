"""State-store throughput: group commits of dedup-checked records, and Bloom lookups.

Each record is one Bloom check + add of its id, one state put and one dedup id
put; a commit is one transaction over a batch of records. Runs on real
RocksDB in a temporary directory.

    python bench/statestore_bench.py [--records N] [--dir DIR]

Prints a table and one ``RESULT bench=statestore ...`` line per figure.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from millrace.statestore import StateStore, StoreConfig

VALUE = b"v" * 32


@dataclass(frozen=True)
class CommitResult:
    batch: int
    sync: bool
    records_per_s: float
    commits_per_s: float


def commit_run(root: Path, batch: int, sync: bool, records: int) -> CommitResult:
    """Commit ``records`` fresh records in batches of ``batch``; returns the rates."""
    path = root / f"commit-{batch}-{'sync' if sync else 'nosync'}"
    rng = random.Random(batch)
    ids = [rng.randbytes(16) for _ in range(records)]
    with StateStore.open_rocksdb(path, config=StoreConfig(sync=sync)) as store:
        started = time.perf_counter()
        for start in range(0, records, batch):
            chunk = ids[start : start + batch]
            txn = store.begin()
            fresh = [rid for rid, dup in zip(chunk, txn.seen(chunk), strict=True) if not dup]
            for rid in fresh:
                txn.put(rid, VALUE)
            txn.mark_seen(fresh)
            txn.commit()
        elapsed = time.perf_counter() - started
    commits = -(-records // batch)
    return CommitResult(batch, sync, records / elapsed, commits / elapsed)


def bloom_lookup_run(root: Path, segments: int, per_segment: int, probes: int) -> float:
    """Lookups/s of 1000-id batches (half stored, half new) across ``segments`` segments."""
    now = [0]
    config = StoreConfig(sync=False, dedup_segment_ms=1000, dedup_retention_ms=1000 * segments)
    rng = random.Random(7)
    stored: list[bytes] = []
    with StateStore.open_rocksdb(root / "bloom", config=config, clock=lambda: now[0]) as store:
        for segment in range(segments):
            now[0] = segment * 1000
            for start in range(0, per_segment, 10_000):
                ids = [rng.randbytes(16) for _ in range(min(10_000, per_segment - start))]
                txn = store.begin()
                txn.mark_seen(ids)
                txn.commit()
                stored.extend(ids[:100])
        probe_batches = []
        for _ in range(probes // 1000):
            batch = rng.sample(stored, 500) + [rng.randbytes(16) for _ in range(500)]
            probe_batches.append(batch)
        started = time.perf_counter()
        for batch in probe_batches:
            store.begin().seen(batch)
        elapsed = time.perf_counter() - started
    return len(probe_batches) * 1000 / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per batched run")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the stores")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="millrace-bench-", dir=args.dir))
    try:
        results = []
        for sync in (True, False):
            for batch in (1, 100, 1000):
                records = min(args.records, 5_000) if batch == 1 else args.records
                results.append(commit_run(root, batch, sync, records))
        lookups = bloom_lookup_run(root, segments=6, per_segment=100_000, probes=100_000)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"state store commit throughput (cpus={os.cpu_count()})")
    print(f"{'batch':>6} {'sync':>5} {'records/s':>12} {'commits/s':>11}")
    for r in results:
        on = "on" if r.sync else "off"
        print(f"{r.batch:>6} {on:>5} {r.records_per_s:>12,.0f} {r.commits_per_s:>11,.0f}")
    print(f"bloom lookups/s (6 segments x 100k ids, 1000-id batches): {lookups:,.0f}")
    for r in results:
        print(
            f"RESULT bench=statestore batch={r.batch} sync={'on' if r.sync else 'off'} "
            f"records_per_s={r.records_per_s:.1f} commits_per_s={r.commits_per_s:.1f}"
        )
    print(f"RESULT bench=bloom segments=6 batch=1000 lookups_per_s={lookups:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
