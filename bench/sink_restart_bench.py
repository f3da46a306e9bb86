"""A sink that accepted many records restarts with bounded memory and refuses duplicates.

Writes ``--records`` records (default 10,000,000) into a ``FileSink`` in batches of
1,000 (each batch numbered by its sender, as nodes number theirs), closes it,
then opens it again in a fresh process and prints that process's resident memory
before and after the open, the open's time, and how many of a random sample of
already-written records, resent, were refused as duplicates (all of them, or the
run fails). The reference beside it: the resident memory the same ids take in a
Python set (what the sink held before its index moved to disk), measured in the
same run on a sample and scaled.

    python bench/sink_restart_bench.py [--records N] [--resend M] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from millrace.wire.v1 import delivery_pb2  # noqa: E402

BATCH = 1_000
KEYS = 10_000


def _batch(seq: int, start: int, count: int) -> delivery_pb2.DeliveryBatch:
    delivered = delivery_pb2.DeliveryBatch(batch_seq=seq)
    for i in range(start, start + count):
        record = delivered.records.add(record_id=i.to_bytes(16, "big"), key=b"u%d" % (i % KEYS))
        record.value = b'{"n":%d}' % i
        record.event_time_ms = 1_700_000_000_000 + i
        record.producer = "agg"
    delivered.sender.interval.computation = "agg"
    delivered.sender.progress.sequence = "frames"
    delivered.sender.progress.floor = seq
    delivered.sender.progress.last = seq
    return delivered


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def write(path: Path, records: int) -> float:
    """Fill the sink; returns the seconds it took."""
    from millrace.sinks import FileSink

    sink = FileSink(path)
    started = time.perf_counter()
    for seq, start in enumerate(range(0, records, BATCH)):
        sink.write(_batch(seq, start, min(BATCH, records - start)))
    sink.close()
    return time.perf_counter() - started


def reopen(path: Path, records: int, resend: int) -> dict[str, float]:
    """In this (fresh) process: memory around the open, and the duplicates' check."""
    import millrace.sinks
    import millrace.statestore._rocksdb  # noqa: F401 - nor rocksdict's (imported on first open)

    before = _rss_kib()
    started = time.perf_counter()
    from millrace.sinks import FileSink

    sink = FileSink(path)
    opened_s = time.perf_counter() - started
    after = _rss_kib()
    sample = random.Random(1).sample(range(records), resend)
    refused = 0
    for at in range(0, resend, BATCH):
        chunk = sample[at : at + BATCH]
        ack = sink.write(_resent(records // BATCH + at, chunk))
        refused += len(ack.duplicate_ids)
        assert not ack.committed_ids, "a resent record was written again"
    assert len(sink) == records
    sink.close()
    return {
        "rss_before_mib": before / 1024,
        "rss_after_mib": after / 1024,
        "open_s": opened_s,
        "refused": refused,
        "rss_end_mib": _rss_kib() / 1024,
    }


def _resent(seq: int, ids: list[int]) -> delivery_pb2.DeliveryBatch:
    delivered = _batch(seq, 0, 0)
    template = _batch(0, 0, 1).records[0]
    for i in ids:
        record = delivered.records.add()
        record.CopyFrom(template)
        record.record_id = i.to_bytes(16, "big")
    return delivered


def set_reference_mib(records: int) -> float:
    """Resident memory of ``records`` 16-byte ids in a Python set (measured on up to a
    million, scaled)."""
    sample = min(records, 1_000_000)
    before = _rss_kib()
    ids = {i.to_bytes(16, "big") for i in range(sample)}
    grown = _rss_kib() - before
    del ids
    return grown / 1024 * records / sample


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--resend", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="where the sink is written")
    parser.add_argument("--reopen", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reopen is not None:  # the fresh process
        print(json.dumps(reopen(args.reopen, args.records, args.resend)))
        return 0
    work = Path(tempfile.mkdtemp(prefix="sink-restart-", dir=args.dir))
    try:
        path = work / "out.jsonl"
        wrote_s = write(path, args.records)
        size_mib = path.stat().st_size / 2**20
        index_mib = sum(f.stat().st_size for f in work.glob(".out.jsonl.index/*")) / 2**20
        out = subprocess.run(
            [sys.executable, __file__, "--records", str(args.records), "--resend",
             str(args.resend), "--reopen", str(path)],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        seen = json.loads(out.splitlines()[-1])
        reference = set_reference_mib(args.records)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    grown = seen["rss_after_mib"] - seen["rss_before_mib"]
    print(f"sink restart, {args.records:,} records written in {wrote_s:.0f} s "
          f"({size_mib:,.0f} MiB file, {index_mib:,.0f} MiB index)")  # fmt: skip
    print(f"  reopen: {seen['open_s']:.2f} s, RSS {seen['rss_before_mib']:.0f} -> "
          f"{seen['rss_after_mib']:.0f} MiB (+{grown:.0f}), {seen['rss_end_mib']:.0f} MiB after "
          f"{int(seen['refused']):,} resent records, every one refused as a duplicate")  # fmt: skip
    print(f"  reference: the same ids in a Python set take {reference:,.0f} MiB")
    print(
        f"RESULT bench=sink_restart records={args.records} open_s={seen['open_s']:.2f} "
        f"rss_growth_mib={grown:.1f} rss_after_mib={seen['rss_after_mib']:.1f} "
        f"resent={int(seen['refused'])} refused={int(seen['refused'])} "
        f"set_reference_mib={reference:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
