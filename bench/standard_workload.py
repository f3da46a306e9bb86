"""The standard workload of the speed benchmarks (issue 19), its exact answers and its floors.

1,000,000 events ``{"key": "u<id>", "value": 1..100, "ts": ms}`` by default,
10,000 Zipf(1.1) keys, timestamps 1 ms apart jittered up to 5 s backwards; the
1-minute tumbling count + sum per key (``millrace.dataflow:WindowedAggregation``) and
5-minute-gap sessions computed exactly; a plain-Python floor and the issue's
RocksDB floor over the same events. ``bench/windows_bench.py`` and the other
benches measure Millrace against them.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from millrace.wire.v1 import record_pb2

KEYS = 10_000
ZIPF = 1.1
JITTER_MS = 5_000
MINUTE_MS = 60_000
GAP_MS = 5 * MINUTE_MS
BASE_MS = 1_700_000_000_000
TOPOLOGY = """
[streams.events]
[streams.panes]

[computations.agg]
handler = "{handler}"
inputs = {{ events = "key" }}
outputs = ["panes"]
{params}
"""


def topology(window: str, vectorized: bool) -> str:
    """The benchmark's topology: count + sum of ``window`` windows."""
    params = (
        f'params = {{ window = "{window}", aggregate = "count+sum", output = "panes", '
        f"vectorized = {str(vectorized).lower()} }}"
    )
    return TOPOLOGY.format(handler="millrace.dataflow:WindowedAggregation", params=params)


Events = tuple[list[str], np.ndarray, np.ndarray]
"""Keys, event times and values, in arrival order."""


def workload(events: int, seed: int = 11) -> Events:
    """The standard workload (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    ids = np.empty(0, dtype=np.int64)
    while len(ids) < events:  # Zipf(1.1) truncated to KEYS keys
        draw = rng.zipf(ZIPF, events)
        ids = np.concatenate([ids, draw[draw <= KEYS]])
    ids = ids[:events]
    times = BASE_MS + np.arange(events, dtype=np.int64) - rng.integers(0, JITTER_MS, events)
    values = rng.integers(1, 101, events)
    return [f"u{i}" for i in ids.tolist()], times, values


def exact_windows(data: Events, window: str) -> dict[tuple[str, int, int], list[int]]:
    """``(key, start, end) -> [count, sum]`` for tumbling minutes or 5-minute sessions."""
    keys, times, values = data
    result: dict[tuple[str, int, int], list[int]] = {}
    if window.startswith("tumbling"):
        for key, t, v in zip(
            keys, (times - times % MINUTE_MS).tolist(), values.tolist(), strict=True
        ):
            acc = result.setdefault((key, t, t + MINUTE_MS), [0, 0])
            acc[0] += 1
            acc[1] += v
        return result
    per_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for key, t, v in zip(keys, times.tolist(), values.tolist(), strict=True):
        per_key[key].append((t, v))
    for key, items in per_key.items():
        items.sort()
        start, last, count, total = items[0][0], items[0][0], 0, 0
        for t, v in items:
            if t >= last + GAP_MS:
                result[(key, start, last + GAP_MS)] = [count, total]
                start, count, total = t, 0, 0
            last, count, total = t, count + 1, total + v
        result[(key, start, last + GAP_MS)] = [count, total]
    return result


def delivered(data: Events) -> list[record_pb2.Record]:
    """The workload's events as a node receives them (ids in arrival order)."""
    keys, times, values = data
    return [
        record_pb2.Record(
            record_id=i.to_bytes(8, "big"), key=k.encode(), value=str(v).encode(),
            event_time_ms=t, stream="events",
        )
        for i, (k, t, v) in enumerate(zip(keys, times.tolist(), values.tolist(), strict=True))
    ]  # fmt: skip


def plain_python_floor(data: Events) -> float:
    """CPU seconds of a dict of [count, sum] per (key, minute) over the same events,
    reading each value from its text as the node does (the floor of any Python engine)."""
    keys, times, values = data
    texts = [str(v).encode() for v in values.tolist()]
    started = time.process_time()
    windows: dict[tuple[str, int], list[int]] = {}
    for key, t, text in zip(keys, times.tolist(), texts, strict=True):
        value = json.loads(text)
        acc = windows.get((key, t - t % MINUTE_MS))
        if acc is None:
            acc = windows[(key, t - t % MINUTE_MS)] = [0, 0]
        acc[0] += 1
        acc[1] += value
    return time.process_time() - started


def rocksdb_floor(lines: list[bytes], work: Path) -> float:
    """Wall seconds of issue 19's floor: plain Python that parses the same JSON lines,
    keeps the same windows in a dict and writes each window changed by 1,000 events to
    RocksDB in one WriteBatch, synced (what any exactly-once Python engine must do)."""
    from rocksdict import Options, Rdict, WriteBatch, WriteOptions

    path = work / f"floor-{time.monotonic_ns()}"
    db = Rdict(str(path), Options())
    synced = WriteOptions()
    synced.sync = True
    started = time.perf_counter()
    windows: dict[tuple[str, int], list[int]] = {}
    for at in range(0, len(lines), 1_000):
        changed = {}
        for line in lines[at : at + 1_000]:
            event = json.loads(line)
            ts = event["ts"]
            window = (event["key"], ts - ts % MINUTE_MS)
            acc = windows.get(window)
            if acc is None:
                acc = windows[window] = [0, 0]
            acc[0] += 1
            acc[1] += event["value"]
            changed[window] = acc
        batch = WriteBatch()
        for (key, window_start), acc in changed.items():
            batch.put(f"{key}/{window_start}".encode(), json.dumps(acc).encode())
        db.write(batch, synced)
    seconds = time.perf_counter() - started
    db.close()
    Rdict.destroy(str(path))
    return seconds


def event_lines(data: Events) -> list[bytes]:
    """The events as the JSON lines of the input (no newlines)."""
    keys, times, values = data
    return [
        b'{"key":"%s","value":%d,"ts":%d}' % (key.encode(), v, t)
        for key, t, v in zip(keys, times.tolist(), values.tolist(), strict=True)
    ]


def write_events(data: Events, path: Path) -> int:
    """The JSON-lines input plus an end marker past the last window; its event time."""
    end_ts = int(data[1].max()) + 3 * GAP_MS
    with path.open("wb") as out:
        out.writelines(line + b"\n" for line in event_lines(data))
        out.write(b'{"key":"end-marker","value":0,"ts":%d}\n' % end_ts)
    return end_ts
