"""``WindowedAggregation``: a keyed, windowed aggregate as a ready computation.

Per key and window it keeps one accumulator (JSON state ``w:START/END``) and
two event-time timers: ``on:START/END`` at the window's last instant (the
on-time pane) and, with allowed lateness, ``gc:START/END`` at that instant
plus the lateness (late records not yet in a pane are flushed, and the
window's state and timers dropped then); processing-time triggers add
``early:START/END`` and ``late:START/END``. A record that misses an expired
window (all of its windows, or with hopping windows some) goes once to
``late_output`` unchanged (or, without one, is counted in the key's
``late_dropped`` state); it never changes an expired window's result. Merging windows
(``_merging.py``) and sliding windows (``_sliding.py``) add their own state
around these windows. Everything goes through the public ``Context``, so the
same class runs on nodes, in ``TestHarness`` and in backfills.

Declare one in Python::

    class PageCounts(WindowedAggregation):
        window = Tumbling(size_ms=60_000)
        aggregate = Count()
        allowed_lateness_ms = 3_600_000
        trigger = AfterWatermark(early=EveryRecords(100))
        accumulation = Accumulation.RETRACTING
        output = "page_counts"

or in a topology, with ``handler = "millrace.dataflow:WindowedAggregation"`` and
``params = { window = "tumbling:60000", aggregate = "sum", field = "value",
output = "sums", allowed_lateness_ms = 0, accumulation = "discarding",
early_every_records = 0, early_every_ms = 0, late = "each", late_output = "late" }``
(or ``late_every_records`` / ``late_every_ms`` instead of ``late``: batched late panes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.computations import (
    JSON,
    MAX_EVENT_TIME_MS,
    BatchContext,
    Computation,
    Context,
    FiredTimer,
    Record,
    Serde,
    TimeDomain,
    TimerBatchContext,
)
from millrace.dataflow._batch_timers import fire_on_time
from millrace.dataflow._builtins import parse_aggregate
from millrace.dataflow._combiners import Combiner, Count
from millrace.dataflow._durations import duration_ms
from millrace.dataflow._merging import add_live, drop_live, merge_into
from millrace.dataflow._outputs import send_late
from millrace.dataflow._panes import Pane, Timing
from millrace.dataflow._settings import check_settings
from millrace.dataflow._sliding import BUCKET_TIMER, add_sliding, drop_bucket
from millrace.dataflow._state_serde import window_state_serde
from millrace.dataflow._triggers import Accumulation, AfterWatermark, firing, parse_trigger
from millrace.dataflow._vectorized import fold_batch
from millrace.dataflow._windows import (
    FieldWindows,
    Sliding,
    Tumbling,
    Window,
    WindowAssigner,
    parse_window,
)


class WindowedAggregation(Computation):
    """Aggregates each key's records per window; emits panes as the trigger says."""

    setup_at_load = True

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
    vectorized: bool = True
    """Fold each delivered batch per (key, window) with column operations where that
    cannot emit (same state and outputs as one record at a time; False: always one
    at a time, for comparison)."""
    native_row: list[tuple[str, str]] | None = None
    """For a subclass that writes its panes in a shape of its own (:meth:`pane_records`):
    the JSON object its on-time panes are written natively as, when that is what
    :meth:`pane_records` writes (``millrace.dataplane.on_time_panes``'s ``row``)."""
    input_panes: bool = False
    """The input is another aggregation's output (``Pane`` values): each pane's value is
    aggregated, and a retraction subtracts what it retracts (``Combiner.retract``), so a
    two-stage topology over a retracting stream stays exact."""

    SETTINGS = frozenset({
        "window", "aggregate", "field", "allowed_lateness_ms", "trigger", "accumulation",
        "output", "late_output", "vectorized", "input_panes", "input", "early_every_records",
        "early_every_ms", "late", "late_every_records", "late_every_ms",
    })  # fmt: skip
    """What ``params`` (and a subclass's attributes) may set."""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Take settings from the topology's ``params`` (they override the class's)."""
        check_settings(self, params, self.SETTINGS)
        if "window" in params:
            self.window = parse_window(str(params["window"]))
        if "aggregate" in params:
            self.aggregate = parse_aggregate(str(params["aggregate"]))
        if "field" in params:
            self.field = str(params["field"])
        if "allowed_lateness_ms" in params:
            self.allowed_lateness_ms = duration_ms(
                params["allowed_lateness_ms"], "allowed_lateness_ms"
            )
        if "accumulation" in params:
            self.accumulation = Accumulation(params["accumulation"])
        if "output" in params:
            self.output = str(params["output"])
        if "input" in params:
            if params["input"] not in ("records", "panes"):
                raise ValueError(f"input {params['input']!r}: expected records or panes")
            self.input_panes = params["input"] == "panes"
        if "vectorized" in params:
            self.vectorized = bool(params["vectorized"])
        if "late_output" in params:
            self.late_output = str(params["late_output"]) or None
        trigger_params = {"early_every_records", "early_every_ms", "late"}
        if {*trigger_params, "late_every_records", "late_every_ms"} & set(params):
            self.trigger = parse_trigger(params)
        if not self.output:
            raise ValueError(f"{type(self).__name__} needs an output stream (output = ...)")
        if self.allowed_lateness_ms < 0:
            raise ValueError("allowed_lateness_ms must be >= 0")
        if self.input_panes and not self.aggregate.retractable:
            raise ValueError(
                f"{type(self.aggregate).__name__} cannot retract: it cannot consume panes"
            )

    @property
    def state_serde(self) -> Serde[Any]:
        """How window states are encoded (msgspec for the built-in combiners)."""
        return window_state_serde(self.aggregate.plain_accumulator)

    # -- records ------------------------------------------------------------------

    def process_record(self, ctx: Context, record: Record) -> None:
        watermark = ctx.low_watermark
        by_field = (
            self.window if isinstance(self.window, FieldWindows) and not self.input_panes else None
        )
        value, retract, body = self._input(record, parse=by_field is not None)
        if isinstance(self.window, Sliding):
            t = record.event_time_ms
            missed = not add_sliding(self, ctx, t, value, watermark, retract=retract)
        else:
            missed = False
            windows = (
                self.window.assign_record(record)
                if by_field is None
                else by_field.assign_value(body, record.event_time_ms)
            )
            for assigned in windows:
                if watermark is not None and watermark > self._expiry(assigned):
                    missed = True  # expired: its result is final
                    continue
                merging = self.window.merging
                window = merge_into(self, ctx, assigned, watermark) if merging else assigned
                self._add(ctx, window, value, watermark, retract=retract)
        if missed:
            send_late(ctx, record, self.late_output)

    def _input(self, record: Record, *, parse: bool) -> tuple[Any, bool, Any]:
        """``(value to fold, whether it retracts, the parsed value)`` of a record (the
        value parsed once, when it is needed or ``parse``)."""
        if self.input_panes:
            pane = Pane.decode(record.value)
            json_value = self.aggregate.json_values
            value = self.aggregate.checked(pane.value) if json_value else self._number(pane.value)
            return value, pane.retraction, None
        if self.aggregate.needs_value or parse:
            body = JSON.loads(record.value)  # once, for the value and the window
            return (self._value_of(body) if self.aggregate.needs_value else 0), False, body
        return 0, False, None

    def process_batch(self, batch: BatchContext, records: Sequence[Record]) -> Sequence[Record]:
        """The vectorized path (``dataflow/_vectorized.py``): folds a batch per (key,
        window) where that cannot emit; leaves the rest to :meth:`process_record`."""
        return fold_batch(self, batch, records)

    def handles_batches(self) -> bool:
        """Unless ``vectorized`` is off."""
        return self.vectorized

    def process_timers(
        self, batch: TimerBatchContext, timers: Sequence[FiredTimer]
    ) -> Sequence[FiredTimer]:
        """The vectorized path's timers (``dataflow/_vectorized.py``): fires on-time
        panes of windows that end with them; leaves the rest to :meth:`process_timer`."""
        return fire_on_time(self, batch, timers)

    def handles_timer_batches(self) -> bool:
        """Unless ``vectorized`` is off."""
        return self.vectorized

    def _add(
        self,
        ctx: Context,
        window: Window,
        value: float,
        watermark: int | None,
        *,
        retract: bool = False,
    ) -> None:
        tag, serde = "w:" + window.tag(), self.state_serde
        state = ctx.get_state(tag, serde)
        if state is None:
            state = self._open(ctx, window, self.aggregate.create(), watermark)
        fold = self.aggregate.retract if retract else self.aggregate.add
        state["acc"] = fold(state["acc"], value)
        state["since"] += 1
        self._fire_on_record(ctx, window, state)
        ctx.put_state(tag, state, serde)

    def _fire_on_record(self, ctx: Context, window: Window, state: dict[str, Any]) -> None:
        """An early pane (before the on-time one) or a late pane (after it) when its
        trigger's record count is reached, cancelling its clock; else the clock started
        at the first record since the previous pane (``early_at`` / ``late_at``)."""
        late = state["fired"]
        when = firing(self.trigger.late if late else self.trigger.early)
        phase = "late" if late else "early"
        if when.count is not None and state["since"] >= when.count:
            self._emit(ctx, window, state, Timing.LATE if late else Timing.EARLY)
            if state.pop(phase + "_at", None):
                ctx.delete_timer(f"{phase}:{window.tag()}", TimeDomain.PROCESSING_TIME)
        elif when.interval_ms is not None and not state.get(phase + "_at"):
            state[phase + "_at"] = ctx.processing_time_ms + when.interval_ms
            ctx.set_timer(
                f"{phase}:{window.tag()}", state[phase + "_at"], TimeDomain.PROCESSING_TIME
            )

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
            add_live(ctx, window)
        return state

    def _forget(self, ctx: Context, window: Window) -> None:
        """Drop a window's state (and its entry in the key's live windows)."""
        ctx.delete_state("w:" + window.tag())
        if self.window.merging:
            drop_live(ctx, [window])

    def _value_of(self, body: Any) -> float:
        """The value to aggregate of a record whose value parses to ``body``."""
        if self.field is not None:
            if not isinstance(body, dict) or self.field not in body:
                raise ValueError(f"record value has no field {self.field!r}")
            body = body[self.field]
        if self.aggregate.json_values:
            return self.aggregate.checked(body)  # type: ignore[no-any-return]  # any JSON
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
        if kind == BUCKET_TIMER:
            drop_bucket(ctx, int(window_tag))
            return
        window = Window.from_tag(window_tag)
        tag, serde = "w:" + window_tag, self.state_serde
        state = ctx.get_state(tag, serde)
        if state is None:
            return
        if kind in ("early", "late"):
            state.pop(kind + "_at", None)
            if state["fired"] == (kind == "late") and state["since"]:
                self._emit(ctx, window, state, Timing(kind))
            ctx.put_state(tag, state, serde)
        elif kind == "on":
            self._emit(ctx, window, state, Timing.ON_TIME)
            state["fired"] = True
            if state.pop("early_at", None):
                ctx.delete_timer("early:" + window_tag, TimeDomain.PROCESSING_TIME)
            if not self.allowed_lateness_ms:
                self._forget(ctx, window)  # nothing can join it any more
                return
            ctx.put_state(tag, state, serde)
        elif kind == "gc":
            if not state["fired"]:
                # Expiry at the window's last instant too (clamped at the end of event
                # time): its on-time timer, due at the same instant, may fire second.
                self._emit(ctx, window, state, Timing.ON_TIME)
                ctx.delete_timer("on:" + window_tag)
                if state.pop("early_at", None):
                    ctx.delete_timer("early:" + window_tag, TimeDomain.PROCESSING_TIME)
            elif state["since"]:
                self._emit(ctx, window, state, Timing.LATE)  # late records not yet in a pane
            if state.pop("late_at", None):
                ctx.delete_timer("late:" + window_tag, TimeDomain.PROCESSING_TIME)
            self._forget(ctx, window)

    # -- panes --------------------------------------------------------------------

    def _emit(self, ctx: Context, window: Window, state: dict[str, Any], timing: Timing) -> None:
        result = self.aggregate.result(state["acc"])
        key, index = ctx.key, state["pane"]
        self._retract_last(ctx, window, state)
        for out_key, value in self.pane_records(Pane(key, window, index, timing, result)):
            ctx.produce(self.output, out_key, value, window.last_ms)
        state["pane"] = index + 1
        state["since"] = 0
        if self.accumulation is Accumulation.DISCARDING:
            state["acc"] = self.aggregate.create()
        elif self.accumulation is Accumulation.RETRACTING:
            state["last"], state["last_timing"] = result, timing.value

    @property
    def native_panes(self) -> bool:
        """Whether on-time panes may be written natively: unless a subclass writes them
        in a shape of its own (:meth:`pane_records`)."""
        return type(self).pane_records is WindowedAggregation.pane_records

    def pane_records(self, pane: Pane) -> Sequence[tuple[bytes, bytes]]:
        """The output records' keys and values for ``pane`` (none, one or several).
        Default: one, the pane's key and the pane in format version 1
        (``dataflow/_panes.py``). A subclass that writes its panes in a shape of its own
        overrides this; its on-time panes are then made here rather than natively."""
        return ((pane.key, pane.encode()),)

    def _retract_last(self, ctx: Context, window: Window, state: dict[str, Any]) -> None:
        """In retracting mode, the retraction of the window's last pane (if any)."""
        if self.accumulation is Accumulation.RETRACTING and "last" in state:
            retracted = Pane(
                ctx.key, window, state["pane"] - 1, Timing(state["last_timing"]),
                state["last"], True,
            )  # fmt: skip
            for out_key, value in self.pane_records(retracted):
                ctx.produce(self.output, out_key, value, window.last_ms)
