"""The least CPU each process of the pipeline must spend per event of the standard workload.

Issue 19 asks for <= 12 us of CPU per event in total, end to end. This bench
measures what the pipeline cannot avoid: each step does only its process's
unavoidable work, with Millrace's wire formats and libraries and C-level passes
where they exist, and nothing else (no framework, no threads, no transport;
gRPC's own cost per record is the ``transport`` row of
``bench/ingest_floor_bench.py``):

- ``inject``: JSON lines -> ``IngestRequest`` bytes of 1,000 records (the
  project's line parser, which validates as ``millrace inject`` must);
- ``injector``: parse the request and read its records, answer its ids, append
  it to a log file with one fsync, build the ``DeliveryBatch`` for the node;
- ``node records``: parse the frame, hash its ids (the dedup's Bloom probe),
  fold the windows in a dict, write the ids and the changed windows in one
  synced ``WriteBatch`` per frame;
- ``node timers``: each window's pane as JSON into a frame for the sink, its
  state deleted, one synced ``WriteBatch`` per 1,000 panes;
- ``sink``: parse the pane frames, append the panes as JSON lines, one fsync
  per frame.

Each figure is CPU time per input event (``time.process_time``), median of
``--runs``, printed beside issue 19's RocksDB floor measured in the same runs
(one process: parse the lines, windows in a dict, changed windows to RocksDB
in synced batches of 1,000; wall time per event).

    python bench/pipeline_floor_bench.py [--events N] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402
from rocksdict import Options, Rdict, WriteBatch, WriteOptions  # noqa: E402
from xxhash import xxh3_128_digest  # noqa: E402

from bench.standard_workload import MINUTE_MS, event_lines, rocksdb_floor, workload  # noqa: E402
from millrace.dataplane import ingest_response  # noqa: E402
from millrace.injector.json_lines import parse_record  # noqa: E402
from millrace.wire.v1 import delivery_pb2, ingest_pb2  # noqa: E402

BATCH = 1000
TARGET_US = 12.0
"""Issue 19's target: CPU per event of all processes together."""
STEPS = ("inject", "injector", "node records", "node timers", "sink")
_INGESTED = attrgetter("key", "value", "event_time_ms")
_DELIVERED = attrgetter("record_id", "key", "value", "event_time_ms")
_PANE = attrgetter("record_id", "value")

Windows = dict[tuple[bytes, int], list[int]]


def inject(lines: list[bytes]) -> list[bytes]:
    """The requests ``millrace inject`` must send."""
    requests = []
    for at in range(0, len(lines), BATCH):
        request = ingest_pb2.IngestRequest(stream="events")
        add = request.records.add
        for line in lines[at : at + BATCH]:
            parsed = parse_record(line)
            if parsed is not None:
                key, value, ts = parsed
                add(key=key, value=value, event_time_ms=ts)
        requests.append(request.SerializeToString())
    return requests


def injector(requests: list[bytes], work: Path) -> list[bytes]:
    """The frames the injector must send to the node, each request durable first."""
    frames = []
    offset = 0
    fd = os.open(work / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for raw in requests:
            records = list(map(_INGESTED, ingest_pb2.IngestRequest.FromString(raw).records))
            ingest_response(b"floor-ta", offset, len(records), False)
            os.write(fd, raw)
            os.fsync(fd)
            frame = delivery_pb2.DeliveryBatch(batch_seq=offset)
            add = frame.records.add
            for position, (key, value, ts) in enumerate(records, offset):
                record_id = b"floor-ta" + position.to_bytes(8, "big")
                add(
                    record_id=record_id, key=key, value=value, event_time_ms=ts,
                    producer="injector", stream="events",
                )  # fmt: skip
            frames.append(frame.SerializeToString())
            offset += len(records)
    finally:
        os.close(fd)
    return frames


def synced_rocksdb(path: Path) -> tuple[Rdict, WriteOptions]:
    """A RocksDB opened as the state store opens it (raw keys), and synced writes."""
    synced = WriteOptions()
    synced.sync = True
    return Rdict(str(path), Options(raw_mode=True)), synced


def node_records(frames: list[bytes], work: Path) -> Windows:
    """The windows after every frame is committed (ids and changed windows, synced)."""
    db, synced = synced_rocksdb(work / "node")
    windows: Windows = {}
    try:
        for raw in frames:
            records = list(map(_DELIVERED, delivery_pb2.DeliveryBatch.FromString(raw).records))
            b"".join(map(xxh3_128_digest, (r[0] for r in records)))  # the Bloom probe's hashes
            changed: Windows = {}
            batch = WriteBatch(raw_mode=True)
            for record_id, key, value, ts in records:
                batch.put(record_id, b"")
                window = (key, ts - ts % MINUTE_MS)
                acc = windows.get(window)
                if acc is None:
                    acc = windows[window] = [0, 0]
                acc[0] += 1
                acc[1] += int(value)
                changed[window] = acc
            for (key, start), acc in changed.items():
                batch.put(b"%s/%d" % (key, start), msgspec.json.encode(acc))
            db.write(batch, synced)
    finally:
        db.close()
    return windows


def node_timers(windows: Windows, work: Path) -> list[bytes]:
    """The pane frames for the sink, each window's state deleted in the same commit."""
    db, synced = synced_rocksdb(work / "timers")
    frames = []
    items = list(windows.items())
    encode = msgspec.json.encode
    try:
        for at in range(0, len(items), BATCH):
            batch = WriteBatch(raw_mode=True)
            frame = delivery_pb2.DeliveryBatch(batch_seq=at)
            add = frame.records.add
            for (key, start), acc in items[at : at + BATCH]:
                state_key = b"%s/%d" % (key, start)
                pane = {
                    "v": 1, "key": key.decode(), "window": [start, start + MINUTE_MS],
                    "pane": 0, "timing": "on_time", "retraction": False, "value": acc,
                }  # fmt: skip
                add(
                    record_id=state_key, key=key, value=encode(pane),
                    event_time_ms=start + MINUTE_MS - 1, producer="agg", stream="panes",
                )  # fmt: skip
                batch.delete(state_key)
            payload = frame.SerializeToString()
            batch.put(b"outbox/%d" % at, payload)
            db.write(batch, synced)
            frames.append(payload)
    finally:
        db.close()
    return frames


def sink(frames: list[bytes], work: Path) -> None:
    """The panes appended to a JSON-lines file, one fsync per frame."""
    with (work / "panes.jsonl").open("wb") as out:
        for raw in frames:
            panes = list(map(_PANE, delivery_pb2.DeliveryBatch.FromString(raw).records))
            out.write(b"".join(value + b"\n" for _, value in panes))
            out.flush()
            os.fsync(out.fileno())


def timed(step: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """CPU seconds of ``step(*args)`` and its result."""
    started = time.process_time()
    result = step(*args)
    return time.process_time() - started, result


def run_once(lines: list[bytes], work: Path) -> dict[str, float]:
    """CPU seconds per step over every line."""
    seconds: dict[str, float] = {}
    seconds["inject"], requests = timed(inject, lines)
    seconds["injector"], frames = timed(injector, requests, work)
    seconds["node records"], windows = timed(node_records, frames, work)
    seconds["node timers"], panes = timed(node_timers, windows, work)
    seconds["sink"], _ = timed(sink, panes, work)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    lines = event_lines(workload(args.events))
    runs: list[dict[str, float]] = []
    floors: list[float] = []
    for _ in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="millrace-pipeline-floor-"))
        try:
            floors.append(rocksdb_floor(lines, work))
            runs.append(run_once(lines, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    n = len(lines)
    us = {step: statistics.median(run[step] for run in runs) / n * 1e6 for step in STEPS}
    total = statistics.median(sum(run.values()) for run in runs) / n * 1e6
    floor_us = statistics.median(floors) / n * 1e6
    print(f"unavoidable CPU per event, {n:,} events, median of {args.runs}")
    print(f"  {'step':<14} {'us/event':>9}")
    for step in STEPS:
        print(f"  {step:<14} {us[step]:>9.2f}")
    print(f"  {'total':<14} {total:>9.2f}   (issue 19's target for everything: {TARGET_US:.0f})")
    print(f"  {'rocksdb floor':<14} {floor_us:>9.2f}   wall, one process, same runs")
    steps = " ".join(f"{step.replace(' ', '_')}_us={us[step]:.2f}" for step in STEPS)
    print(
        f"RESULT bench=pipeline_floor events={n} {steps} total_us={total:.2f} "
        f"rocksdb_floor_us={floor_us:.2f} total_vs_rocksdb_floor={total / floor_us:.2f} "
        f"target_us={TARGET_US:.0f} runs={args.runs}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
