"""``WindowedAggregation``: a keyed, windowed aggregate as a ready computation.

Per key and window it keeps one accumulator (JSON state ``w:START/END``) and
two event-time timers: ``on:START/END`` at the window's last instant (the
on-time pane) and, with allowed lateness, ``gc:START/END`` at that instant
plus the lateness (the window's state and timers are dropped then). A record
whose windows have all expired goes to ``late_output`` unchanged (or, without
one, is counted in the key's ``late_dropped`` state); it never changes a
result. Everything goes through the public ``Context``, so the same class
runs on nodes, in ``TestHarness`` and in backfills.

Declare one in Python::

    class PageCounts(WindowedAggregation):
        window = Tumbling(size_ms=60_000)
        aggregate = Count()
        allowed_lateness_ms = 3_600_000
        trigger = AfterWatermark(early=EveryRecords(100))
        accumulation = Accumulation.RETRACTING
        output = "page_counts"

or in a topology, with ``handler = "dataflow:WindowedAggregation"`` and
``params = { window = "tumbling:60000", aggregate = "sum", field = "value",
output = "sums", allowed_lateness_ms = 0, accumulation = "discarding",
early_every_records = 0, early_every_ms = 0, late = "each", late_output = "late" }``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from computations import (
    JSON,
    MAX_EVENT_TIME_MS,
    Computation,
    Context,
    FiredTimer,
    Record,
    TimeDomain,
)
from dataflow._builtins import parse_aggregate
from dataflow._combiners import Combiner, Count
from dataflow._outputs import send_late
from dataflow._panes import Pane, Timing
from dataflow._triggers import (
    Accumulation,
    AfterWatermark,
    AtExpiry,
    EachLateRecord,
    EveryProcessingTime,
    EveryRecords,
)
from dataflow._windows import Tumbling, Window, WindowAssigner, parse_window

SESSIONS = "sessions"
"""State tag listing a key's live session windows (``[[start, end], ...]``)."""


class WindowedAggregation(Computation):
    """Aggregates each key's records per window; emits panes as the trigger says."""

    window: WindowAssigner = Tumbling(60_000)
    aggregate: Combiner = Count()
    field: str | None = None
    """The JSON field of a record's value holding the number to aggregate (None: the
    value itself is a JSON number). Unused by ``Count``."""
    allowed_lateness_ms: int = 0
    trigger: AfterWatermark = AfterWatermark()
    accumulation: Accumulation = Accumulation.DISCARDING
    output: str = ""
    late_output: str | None = None
    input_panes: bool = False
    """The input is another aggregation's output (``Pane`` values): each pane's value is
    aggregated, and a retraction subtracts what it retracts (``Combiner.retract``), so a
    two-stage topology over a retracting stream stays exact."""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Take settings from the topology's ``params`` (they override the class's)."""
        if "window" in params:
            self.window = parse_window(str(params["window"]))
        if "aggregate" in params:
            self.aggregate = parse_aggregate(str(params["aggregate"]))
        if "field" in params:
            self.field = str(params["field"])
        if "allowed_lateness_ms" in params:
            self.allowed_lateness_ms = int(params["allowed_lateness_ms"])
        if "accumulation" in params:
            self.accumulation = Accumulation(params["accumulation"])
        if "output" in params:
            self.output = str(params["output"])
        if "input" in params:
            if params["input"] not in ("records", "panes"):
                raise ValueError(f"input {params['input']!r}: expected records or panes")
            self.input_panes = params["input"] == "panes"
        if "late_output" in params:
            self.late_output = str(params["late_output"]) or None
        if {"early_every_records", "early_every_ms", "late"} & set(params):
            every = int(params.get("early_every_records", 0))
            every_ms = int(params.get("early_every_ms", 0))
            if every and every_ms:
                raise ValueError("early_every_records and early_every_ms: choose one")
            early: EveryRecords | EveryProcessingTime | None = None
            if every or every_ms:
                early = EveryRecords(every) if every else EveryProcessingTime(every_ms)
            lates: dict[str, EachLateRecord | AtExpiry] = {
                "each": EachLateRecord(),
                "at_expiry": AtExpiry(),
            }
            late = lates[str(params.get("late", "each"))]
            self.trigger = AfterWatermark(early=early, late=late)
        if not self.output:
            raise ValueError(f"{type(self).__name__} needs an output stream (output = ...)")
        if self.allowed_lateness_ms < 0:
            raise ValueError("allowed_lateness_ms must be >= 0")
        if self.input_panes and not self.aggregate.retractable:
            raise ValueError(
                f"{type(self.aggregate).__name__} cannot retract: it cannot consume panes"
            )

    # -- records ------------------------------------------------------------------

    def process_record(self, ctx: Context, record: Record) -> None:
        watermark = ctx.low_watermark
        retract = False
        if self.input_panes:
            pane = Pane.decode(record.value)
            value, retract = self._number(pane.value), pane.retraction
        else:
            value = self._value_of(record) if self.aggregate.needs_value else 0
        missed = False
        for assigned in self.window.assign(record.event_time_ms):
            if watermark is not None and watermark > self._expiry(assigned):
                missed = True  # expired: its result is final
                continue
            window = self._merge_into(ctx, assigned, watermark) if self.window.merging else assigned
            self._add(ctx, window, value, watermark, retract=retract)
        if missed:
            send_late(ctx, record, self.late_output)

    def _add(
        self,
        ctx: Context,
        window: Window,
        value: float,
        watermark: int | None,
        *,
        retract: bool = False,
    ) -> None:
        tag = "w:" + window.tag()
        state = ctx.get_state(tag, JSON)
        if state is None:
            state = self._open(ctx, window, self.aggregate.create(), watermark)
        fold = self.aggregate.retract if retract else self.aggregate.add
        state["acc"] = fold(state["acc"], value)
        state["since"] += 1
        early = self.trigger.early
        if state["fired"]:
            if isinstance(self.trigger.late, EachLateRecord):
                self._emit(ctx, window, state, Timing.LATE)
        elif isinstance(early, EveryRecords) and state["since"] >= early.count:
            self._emit(ctx, window, state, Timing.EARLY)
        elif isinstance(early, EveryProcessingTime) and not state.get("early_at"):
            state["early_at"] = ctx.processing_time_ms + early.interval_ms
            ctx.set_timer("early:" + window.tag(), state["early_at"], TimeDomain.PROCESSING_TIME)
        ctx.put_state(tag, state, JSON)

    def _open(
        self, ctx: Context, window: Window, accumulator: Any, watermark: int | None
    ) -> dict[str, Any]:
        """A new window's state, and its timers. A window whose end the watermark has
        already passed (its first record is late) has had its on-time moment: its
        panes are late ones."""
        passed = watermark is not None and watermark > window.last_ms
        state = {"acc": accumulator, "pane": 0, "since": 0, "fired": passed}
        if not passed:
            ctx.set_timer("on:" + window.tag(), window.last_ms)
        if self.allowed_lateness_ms:
            ctx.set_timer("gc:" + window.tag(), self._expiry(window))
        if self.window.merging:
            live = ctx.get_state(SESSIONS, JSON) or []
            ctx.put_state(SESSIONS, sorted([*live, [window.start, window.end]]), JSON)
        return state

    def _merge_into(self, ctx: Context, window: Window, watermark: int | None) -> Window:
        """The session ``window`` joins: itself, an existing session that covers it, or
        the merge of every session it overlaps (their accumulators merged, their state
        and timers replaced; in retracting mode their emitted panes retracted)."""
        live = [Window(start, end) for start, end in ctx.get_state(SESSIONS, JSON) or []]
        touching = [w for w in live if w.start < window.end and window.start < w.end]
        if not touching:
            return window
        merged = Window(
            min(window.start, *(w.start for w in touching)),
            max(window.end, *(w.end for w in touching)),
        )
        if touching == [merged]:
            return merged
        accumulator = self.aggregate.create()
        since = 0
        for old in touching:
            tag = "w:" + old.tag()
            state = ctx.get_state(tag, JSON)
            if state is None:
                continue
            accumulator = self.aggregate.merge(accumulator, state["acc"])
            since += state["since"]
            if self.accumulation is Accumulation.RETRACTING and "last" in state:
                retracted = Pane(
                    ctx.key, old, state["pane"] - 1, Timing(state["last_timing"]),
                    state["last"], True,
                )  # fmt: skip
                ctx.produce(self.output, ctx.key, retracted.encode(), old.last_ms)
            ctx.delete_state(tag)
            ctx.delete_timer("on:" + old.tag())
            ctx.delete_timer("gc:" + old.tag())
            ctx.delete_timer("early:" + old.tag(), TimeDomain.PROCESSING_TIME)
        remaining = [[w.start, w.end] for w in live if w not in touching]
        ctx.put_state(SESSIONS, remaining, JSON)
        state = self._open(ctx, merged, accumulator, watermark)
        state["since"] = since
        ctx.put_state("w:" + merged.tag(), state, JSON)
        return merged

    def _forget(self, ctx: Context, window: Window) -> None:
        """Drop a window's state (and its entry in the key's session list)."""
        ctx.delete_state("w:" + window.tag())
        if self.window.merging:
            live = ctx.get_state(SESSIONS, JSON) or []
            ctx.put_state(SESSIONS, [w for w in live if w != [window.start, window.end]], JSON)

    def _value_of(self, record: Record) -> float:
        body = json.loads(record.value)
        if self.field is not None:
            if not isinstance(body, dict) or self.field not in body:
                raise ValueError(f"record value has no field {self.field!r}")
            body = body[self.field]
        if not self.aggregate.numeric:
            if isinstance(body, bool) or not isinstance(body, str | int | float):
                raise ValueError(f"cannot aggregate {body!r}: not a string or a number")
            return body  # type: ignore[return-value]  # a string, for distinct values
        return self._number(body)

    @staticmethod
    def _number(body: Any) -> float:
        if isinstance(body, bool) or not isinstance(body, int | float) or not math.isfinite(body):
            raise ValueError(f"cannot aggregate {body!r}: not a finite number")
        return body

    def _expiry(self, window: Window) -> int:
        return min(window.last_ms + self.allowed_lateness_ms, MAX_EVENT_TIME_MS)

    # -- timers -------------------------------------------------------------------

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        kind, _, window_tag = timer.tag.partition(":")
        window = Window.from_tag(window_tag)
        tag = "w:" + window_tag
        state = ctx.get_state(tag, JSON)
        if state is None:
            return
        if kind == "early":
            state.pop("early_at", None)
            if not state["fired"] and state["since"]:
                self._emit(ctx, window, state, Timing.EARLY)
            ctx.put_state(tag, state, JSON)
        elif kind == "on":
            self._emit(ctx, window, state, Timing.ON_TIME)
            state["fired"] = True
            if state.pop("early_at", None):
                ctx.delete_timer("early:" + window_tag, TimeDomain.PROCESSING_TIME)
            if not self.allowed_lateness_ms:
                self._forget(ctx, window)  # nothing can join it any more
                return
            ctx.put_state(tag, state, JSON)
        elif kind == "gc":
            if isinstance(self.trigger.late, AtExpiry) and state["fired"] and state["since"]:
                self._emit(ctx, window, state, Timing.LATE)
            self._forget(ctx, window)

    # -- panes --------------------------------------------------------------------

    def _emit(self, ctx: Context, window: Window, state: dict[str, Any], timing: Timing) -> None:
        result = self.aggregate.result(state["acc"])
        key, index = ctx.key, state["pane"]
        if self.accumulation is Accumulation.RETRACTING and "last" in state:
            retracted = Pane(
                key, window, index - 1, Timing(state["last_timing"]), state["last"], True
            )
            ctx.produce(self.output, key, retracted.encode(), window.last_ms)
        pane = Pane(key, window, index, timing, result)
        ctx.produce(self.output, key, pane.encode(), window.last_ms)
        state["pane"] = index + 1
        state["since"] = 0
        if self.accumulation is Accumulation.DISCARDING:
            state["acc"] = self.aggregate.create()
        elif self.accumulation is Accumulation.RETRACTING:
            state["last"], state["last_timing"] = result, timing.value
