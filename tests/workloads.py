"""Computations the tests run (in the harness and in real node processes), and their oracle.

Stage 1 ``WindowCounts``: per key, counts records in tumbling event-time
windows; when the watermark passes a window it emits
``{"key", "window", "count"}`` to ``window_counts``.
Stage 2 ``WindowTotals``: keyed by window, sums the counts and counts the
keys; when the watermark passes the window it emits
``{"window", "total", "keys"}`` to ``window_totals``.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from millrace.computations import JSON, Computation, Context, FiredTimer, Record, Topology

WINDOW_MS = 10_000


class WindowCounts(Computation):
    """Stage 1: per-key tumbling-window counts, emitted when the window closes."""

    def setup(self, params: Mapping[str, Any]) -> None:
        self.window_ms = int(params.get("window_ms", WINDOW_MS))

    def process_record(self, ctx: Context, record: Record) -> None:
        start = record.event_time_ms - record.event_time_ms % self.window_ms
        tag = str(start)
        ctx.put_state(tag, (ctx.get_state(tag, JSON) or 0) + 1, JSON)
        ctx.set_timer(tag, start + self.window_ms - 1)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        count = ctx.get_state(timer.tag, JSON)
        body = {"key": ctx.key.decode(), "window": int(timer.tag), "count": count}
        ctx.produce("window_counts", ctx.key, json.dumps(body).encode(), timer.time_ms)
        ctx.delete_state(timer.tag)


class WindowTotals(Computation):
    """Stage 2: per-window sum of stage-1 counts, keyed by window."""

    def setup(self, params: Mapping[str, Any]) -> None:
        self.window_ms = int(params.get("window_ms", WINDOW_MS))

    def process_record(self, ctx: Context, record: Record) -> None:
        body = json.loads(record.value)
        totals = ctx.get_state("totals", JSON) or {"total": 0, "keys": 0}
        totals["total"] += body["count"]
        totals["keys"] += 1
        ctx.put_state("totals", totals, JSON)
        ctx.set_timer("close", body["window"] + self.window_ms - 1)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        totals = ctx.get_state("totals", JSON) or {"total": 0, "keys": 0}
        body = {"window": int(ctx.key), **totals}
        ctx.produce("window_totals", ctx.key, json.dumps(body).encode(), timer.time_ms)
        ctx.delete_state("totals")


class Poison(Computation):
    """Counts records per key, but fails on any record whose value is ``b"poison"``."""

    def process_record(self, ctx: Context, record: Record) -> None:
        if record.value == b"poison":
            raise ValueError(f"cannot digest {record.value!r}")
        ctx.put_state("n", (ctx.get_state("n", JSON) or 0) + 1, JSON)
        ctx.produce("ok", ctx.key, record.value)


class FailsOnce(Computation):
    """Appends each value to its key's ``seen`` list; the first call for a value starting
    with ``b"flaky"`` raises (a transient failure: the retry succeeds)."""

    def setup(self, params: Mapping[str, Any]) -> None:
        self._failed: set[bytes] = set()

    def process_record(self, ctx: Context, record: Record) -> None:
        if record.value.startswith(b"flaky") and record.value not in self._failed:
            self._failed.add(record.value)
            raise RuntimeError("transient")
        ctx.put_state("seen", [*(ctx.get_state("seen", JSON) or []), record.value.decode()], JSON)
        ctx.produce("ok", ctx.key, record.value)


def two_stage_topology_toml(window_ms: int = WINDOW_MS, intervals: tuple[int, int] = (2, 2)) -> str:
    """events -> WindowCounts -> window_counts -> WindowTotals -> window_totals, as a
    topology file's text."""
    return f"""
[streams.events]
[streams.window_counts]
[streams.window_totals]

[computations.counts]
handler = "tests.workloads:WindowCounts"
intervals = {intervals[0]}
inputs = {{ events = "key" }}
outputs = ["window_counts"]
params = {{ window_ms = {window_ms} }}

[computations.totals]
handler = "tests.workloads:WindowTotals"
intervals = {intervals[1]}
inputs = {{ window_counts = "json:window" }}
outputs = ["window_totals"]
params = {{ window_ms = {window_ms} }}
"""


def two_stage_topology(intervals: tuple[int, int] = (2, 2), window_ms: int = WINDOW_MS) -> Topology:
    """:func:`two_stage_topology_toml`, loaded."""
    return Topology.from_dict(tomllib.loads(two_stage_topology_toml(window_ms, intervals)))


def expected_totals(
    events: Iterable[tuple[bytes, int]], window_ms: int = WINDOW_MS
) -> dict[int, dict[str, int]]:
    """The oracle: per window, total records and distinct keys, from ``(key, ts)`` pairs."""
    per_key: defaultdict[int, Counter[bytes]] = defaultdict(Counter)
    for key, ts in events:
        per_key[ts - ts % window_ms][key] += 1
    return {
        window: {"window": window, "total": sum(c.values()), "keys": len(c)}
        for window, c in per_key.items()
    }


def totals_from_outputs(values: Iterable[bytes]) -> dict[int, dict[str, int]]:
    """Sink records of ``window_totals`` as the oracle's shape; fails on a window emitted twice."""
    result: dict[int, dict[str, int]] = {}
    for value in values:
        body = json.loads(value)
        assert body["window"] not in result, f"window {body['window']} emitted twice"
        result[body["window"]] = body
    return result


class FlakyTimers(Computation):
    """Appends records' values and fired timers' tags to its key's ``seen`` list.

    A record ``b"timers:T1@10,T2@20"`` sets event-time timers ``T1`` and ``T2`` that
    many ms after the record. A timer whose tag starts with ``flaky`` raises the
    first time it fires; one starting with ``poison`` raises every time.
    """

    def setup(self, params: Mapping[str, Any]) -> None:
        self._failed: set[str] = set()

    def process_record(self, ctx: Context, record: Record) -> None:
        if record.value.startswith(b"timers:"):
            for spec in record.value[len(b"timers:") :].decode().split(","):
                tag, offset = spec.split("@")
                ctx.set_timer(tag, record.event_time_ms + int(offset))
            return
        self._see(ctx, record.value.decode())

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        if timer.tag.startswith("poison") or (
            timer.tag.startswith("flaky") and timer.tag not in self._failed
        ):
            self._failed.add(timer.tag)
            raise RuntimeError(f"timer {timer.tag} failed")
        self._see(ctx, timer.tag)

    def _see(self, ctx: Context, item: str) -> None:
        ctx.put_state("seen", [*(ctx.get_state("seen", JSON) or []), item], JSON)
        ctx.produce("ok", ctx.key, item.encode())


class LatenessAudit(Computation):
    """Forwards every record unchanged and reports each one that arrives behind the
    computation's input low watermark (``{"stage", "id", "ts", "watermark"}`` on stream
    ``late``): the invariant "no record is ever late unless its source delivered it late".

    ``params``: ``stage`` (its name in reports), ``output`` (the stream to forward to),
    ``delay_ms`` (time spent per record, so a downstream stage lags and its upstream
    holds unacked productions).
    """

    def setup(self, params: Mapping[str, Any]) -> None:
        self.stage = str(params["stage"])
        self.output = str(params["output"])
        self.delay_s = float(params.get("delay_ms", 0)) / 1000

    def process_record(self, ctx: Context, record: Record) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)
        mark = ctx.low_watermark
        if mark is not None and record.event_time_ms < mark:
            body = {"stage": self.stage, "id": record.value.decode(),
                    "ts": record.event_time_ms, "watermark": mark}  # fmt: skip
            ctx.produce("late", ctx.key, json.dumps(body).encode(), mark)
        ctx.produce(self.output, ctx.key, record.value, record.event_time_ms)


class Forward(Computation):
    """Counts records per key (state ``n``) and forwards each to ``params["output"]``."""

    def setup(self, params: Mapping[str, Any]) -> None:
        self.output = str(params["output"])

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.put_state("n", (ctx.get_state("n", JSON) or 0) + 1, JSON)
        ctx.produce(self.output, ctx.key, record.value, record.event_time_ms)


class LateReporter(Computation):
    """Forwards each record, and reports those whose value is ``b"late"`` as too late
    (``Context.report_late``), as a dataflow computation does past allowed lateness."""

    def process_record(self, ctx: Context, record: Record) -> None:
        if record.value == b"late":
            ctx.report_late(record)
        ctx.produce("ok", ctx.key, record.value)


class PastTimer(Computation):
    """Each record sets timer ``t`` at event time 0, whatever the watermark; each fire
    produces one record: a timer set again at a time that already fired fires again."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.set_timer("t", 0)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        ctx.produce("fired", ctx.key, b"", 0)
