"""Durable-log throughput: fsynced appends at several batch sizes, and segment scans.

Appends ``--records`` records of about 100 bytes (16-byte key, 84-byte
value) through :meth:`StreamLog.append`, each call carrying ``batch``
records as requests of up to 100 records (fsync on: one write and one fsync
per call); then reads one sealed segment with :func:`scan_segment`, as a
Spark task would. Runs on real files in a temporary directory.

    python bench/log_bench.py [--records N] [--dir DIR]

Prints a table and ``RESULT bench=log_append batch=<n> records_per_s=<float>``
and ``RESULT bench=log_scan records_per_s=<float>`` lines.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from millrace.injector.log import AppendRequest, CorruptEntry, LogConfig, StreamLog, scan_segment

KEY_BYTES = 16
VALUE_BYTES = 84
REQUEST_RECORDS = 100
"""Records per client request inside one append call."""


@dataclass(frozen=True)
class AppendFigure:
    batch: int
    records: int
    records_per_s: float
    calls_per_s: float


def make_calls(batch: int, records: int, seed: int) -> list[list[AppendRequest]]:
    """``records`` records in calls of ``batch``, split into requests of <= REQUEST_RECORDS."""
    rng = random.Random(seed)
    value = rng.randbytes(VALUE_BYTES)
    calls = []
    made = 0
    while made < records:
        size = min(batch, records - made)
        triples = [
            (b"key-%012d" % (made + i), value, 1_700_000_000_000 + made + i) for i in range(size)
        ]
        calls.append(
            [
                AppendRequest(
                    records=triples[at : at + REQUEST_RECORDS],
                    idempotency_key=b"req-%d-%d" % (made, at),
                )
                for at in range(0, size, REQUEST_RECORDS)
            ]
        )
        made += size
    return calls


def append_run(root: Path, batch: int, records: int) -> AppendFigure:
    """Time appending ``records`` records in calls of ``batch`` records, fsync on."""
    calls = make_calls(batch, records, seed=batch)
    with StreamLog.open(root / f"append-{batch}", "bench", config=LogConfig(fsync=True)) as log:
        started = time.perf_counter()
        for requests in calls:
            log.append(requests)
        elapsed = time.perf_counter() - started
        assert log.next_offset == records
    return AppendFigure(batch, records, records / elapsed, len(calls) / elapsed)


def scan_run(root: Path, records: int) -> tuple[int, float, float]:
    """Write one sealed segment of ``records`` records; time scan_segment over it.

    Returns (records, segment bytes, records/s of the best of three scans).
    """
    config = LogConfig(fsync=False, segment_bytes=1 << 40)
    with StreamLog.open(root / "scan", "bench", config=config) as log:
        for requests in make_calls(1000, records, seed=7):
            log.append(requests)
    # Reopen with a tiny segment_bytes so the next append seals the big segment.
    with StreamLog.open(root / "scan", "bench", config=LogConfig(segment_bytes=1)) as log:
        log.append([AppendRequest(records=[(b"k", b"v", 0)])])
        sealed = log.segments()[0]
    assert sealed.sealed and sealed.records == records
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        count = 0
        for item in scan_segment(sealed.path, "bench"):
            if isinstance(item, CorruptEntry):
                raise RuntimeError(f"benchmark segment is corrupt: {item}")
            count += 1
        best = min(best, time.perf_counter() - started)
        assert count == records
    return records, sealed.size_bytes, records / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per append run")
    parser.add_argument("--scan-records", type=int, default=500_000, help="records to scan")
    parser.add_argument("--dir", help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="log-bench-"))
    try:
        figures = []
        for batch in (1, 100, 1000):
            # One record per fsynced call is slow; a smaller run measures it as well.
            records = args.records if batch > 1 else max(1, args.records // 20)
            figures.append(append_run(root, batch, records))
        scanned, scan_bytes, scan_rate = scan_run(root, args.scan_records)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)

    print(f"{'append batch':>12} {'records':>10} {'records/s':>12} {'calls/s':>10}")
    for figure in figures:
        print(
            f"{figure.batch:>12} {figure.records:>10} {figure.records_per_s:>12,.0f} "
            f"{figure.calls_per_s:>10,.0f}"
        )
    print(
        f"scan_segment: {scanned} records ({scan_bytes / 1e6:.1f} MB) at {scan_rate:,.0f} records/s"
    )
    for figure in figures:
        print(
            f"RESULT bench=log_append batch={figure.batch} records_per_s={figure.records_per_s:.1f}"
        )
    print(f"RESULT bench=log_scan records_per_s={scan_rate:.1f}")


if __name__ == "__main__":
    main()
