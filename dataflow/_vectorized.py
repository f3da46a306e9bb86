"""The vectorized path of :class:`WindowedAggregation`: a delivered batch folded per
(key, window) with column operations, then into every window's state at once.

What runs per record runs natively, in one call per batch
(:func:`millrace.dataplane.fold_groups`, ``native/core/src/fold.rs``): window starts,
integer values read as ``json`` reads them, a sort grouping the batch by (key,
window), each group's count and exact integer sum, min and max. The groups' window
states are then read in one store read (``BatchContext.read_states``), folded natively
for the built-in combiners (:func:`millrace.dataplane.fold_window_states`,
``native/core/src/window_state.rs``) and written back in one call; a group that cannot
be folded there exactly (a float accumulator, a user's combiner, an early trigger by
processing time) is folded here in Python, one group at a time. Windows read from the
records' values (``field:...``) are grouped here, each value parsed once, and folded
in Python.

It only *folds*; it never emits. A key whose records could emit a pane or be
late (a window the watermark has passed, a fired window, an early trigger
due within the batch) is left, whole, to ``process_record``, as are batches
whose values are invalid (``process_record`` dead-letters them). Values that are not
all integers (floats, strings for distinct counts) are read in Python and folded one
by one. Folding uses the combiner's own ``add`` in
arrival order wherever integer column sums would not be bit-identical, so
state and outputs equal the one-at-a-time path's
(``tests/dataflow/test_vectorized.py`` compares them byte for byte).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from typing import Any

from millrace.computations import (
    MAX_EVENT_TIME_MS,
    MIN_EVENT_TIME_MS,
    BatchContext,
    Record,
    TimeDomain,
    record_columns,
)
from millrace.dataflow._combiners import Combined, Combiner, Count, Max, Mean, Min, Sum
from millrace.dataflow._triggers import firing
from millrace.dataflow._window_ops import WindowOps
from millrace.dataflow._windows import FieldWindows, GlobalWindows, Hopping, Tumbling, Window
from millrace.dataplane import fold_groups, fold_window_states, window_tags

_INT_FOLDS = (Count, Sum, Min, Max, Mean)
_NATIVE_PARTS: dict[type[Combiner], str] = {
    Count: "count",
    Sum: "sum",
    Min: "min",
    Max: "max",
    Mean: "mean",
}
GLOBAL = GlobalWindows().assign(0)[0]


def fold_batch(agg: WindowOps, batch: BatchContext, records: Sequence[Record]) -> Sequence[Record]:
    """Fold what can be folded; return the records of the keys left to
    ``process_record`` (the engine discards what this did to those keys)."""
    window = native_window(agg)
    if window is None:
        if type(agg.window) is FieldWindows and not agg.input_panes:
            return _fold_field_windows(agg, batch, records)
        return records
    combiner = agg.aggregate
    int_values = combiner.needs_value and _int_foldable(combiner)
    fields = record_columns(records)  # as the engine hands them: no copy
    grouped = fold_groups(
        fields.keys, fields.values, fields.times,
        window=window, int_values=int_values, field=agg.field,
    )  # fmt: skip
    if grouped is None:
        return records
    keys, starts, counts, slots, bounds, columns = grouped
    values = columns if columns is not None else _values(agg, records)
    if values is None:
        return records
    folds = _Folds(values, slots, bounds, counts, lambda: _values(agg, records))
    size = window[1] if window[0] != "global" else 0
    step = _FoldStep(agg, batch, keys=keys, starts=starts, folds=folds, size=size)
    ids = fields.record_ids
    step.openers = lambda groups: [ids[slots[bounds[g]]] for g in groups]
    parts = native_parts(combiner)
    if parts is not None and step.interval_ms is None and (columns or not combiner.needs_value):
        step.in_python(step.natively(columns, *parts))
    else:
        step.in_python(range(len(keys)))
    left_keys = step.left_keys
    if not left_keys:
        return ()
    return [fields[i] for i, key in enumerate(fields.keys) if key in left_keys]


def _fold_field_windows(
    agg: WindowOps, batch: BatchContext, records: Sequence[Record]
) -> Sequence[Record]:
    """:func:`fold_batch` for windows read from each record's value
    (:class:`FieldWindows`): each value parsed once, here, for its window and the value
    it folds; the batch grouped by (key, window) in arrival order and folded one group
    at a time. Any value ``process_record`` would refuse leaves the batch to it."""
    bounds = agg.window.bounds  # type: ignore[attr-defined]  # a FieldWindows
    index: dict[tuple[bytes, int, int], int] = {}
    keys: list[bytes] = []
    windows: list[Window] = []
    members: list[list[int]] = []
    values: list[Any] = []
    for i, record in enumerate(records):
        try:
            value, _, body = agg._input(record, parse=True)
            start, end = bounds(body, record.event_time_ms)
        except Exception:  # process_record dead-letters it, with the error
            return records
        values.append(value)
        g = index.setdefault((record.key, start, end), len(keys))
        if g == len(keys):
            keys.append(record.key)
            windows.append(Window(start, end))
            members.append([])
        members[g].append(i)
    slots = [i for group in members for i in group]
    bounds = [0, *accumulate(len(group) for group in members)]
    counts = [len(group) for group in members]
    folds = _Folds(values, slots, bounds, counts, lambda: values)
    starts = [window.start for window in windows]
    step = _FoldStep(agg, batch, keys=keys, starts=starts, folds=folds, size=0, windows=windows)
    step.openers = lambda groups: [records[members[g][0]].record_id for g in groups]
    step.in_python(range(len(keys)))
    left_keys = step.left_keys
    return [r for r in records if r.key in left_keys] if left_keys else ()


class _FoldStep:
    """One batch's groups folded into their windows' states: natively
    (:func:`~millrace.dataplane.fold_window_states`) where the combiner is built in and
    its values are integers, else one group at a time in Python."""

    def __init__(
        self,
        agg: WindowOps,
        batch: BatchContext,
        *,
        keys: list[bytes],
        starts: list[int],
        folds: _Folds,
        size: int,
        windows: list[Window] | None = None,
    ) -> None:
        """``size``: of every group's window (0: global), unless ``windows`` gives each
        group's."""
        self.agg, self.batch, self.keys, self.starts, self.folds = agg, batch, keys, starts, folds
        self.size = size
        self._windows = windows
        watermark = batch.low_watermark
        self.passed = MIN_EVENT_TIME_MS - 1 if watermark is None else watermark
        early = firing(agg.trigger.early)
        self.due_at, self.interval_ms = early.count, early.interval_ms
        self.left_keys: set[bytes] = set()
        self.openers: Callable[[list[int]], list[bytes]] = lambda groups: []
        """The record ids of the groups' first records (which open their windows)."""

    def window(self, g: int) -> Window:
        if self._windows is not None:
            return self._windows[g]
        start = self.starts[g]
        return Window(start, start + self.size if self.size else GLOBAL.end)

    def natively(self, columns: Any, names: list[str], combined: bool) -> list[int]:
        """Folds every group natively that it can; returns the groups left to Python."""
        batch, keys = self.batch, self.keys
        size, starts = self.size, self.starts
        # Window.tag's form, without a Window or a format per group.
        tags = window_tags(starts, size_ms=size, end_ms=GLOBAL.end, prefix="w:")
        written, states, opened, left, python = fold_window_states(
            batch.read_states(keys, tags),
            self.folds.counts,
            self.starts,
            columns,
            parts=names,
            combined=combined,
            early_count=self.due_at,
            size_ms=self.size,
            end_ms=GLOBAL.end,
            passed_ms=self.passed,
            max_ms=MAX_EVENT_TIME_MS,
        )
        batch.write_states([keys[g] for g in written], [tags[g] for g in written], states)
        if opened:
            self.set_open_timers(opened)
        self.left_keys.update(keys[g] for g in left)
        return python

    def set_open_timers(self, opened: list[int]) -> None:
        """The timers of newly opened windows, as ``WindowOps._open`` sets them, set on
        the account of each window's first record, as one record at a time would."""
        agg, batch, keys = self.agg, self.batch, self.keys
        opened_keys = [keys[g] for g in opened]
        openers = self.openers(opened)
        windows = [self.window(g) for g in opened]
        tags = [w.tag() for w in windows]
        last = [w.last_ms for w in windows]
        batch.set_timers(opened_keys, ["on:" + t for t in tags], last, record_ids=openers)
        if agg.allowed_lateness_ms:
            expiry = [agg._expiry(w) for w in windows]
            gc = ["gc:" + t for t in tags]
            batch.set_timers(opened_keys, gc, expiry, record_ids=openers)

    def in_python(self, groups: Iterable[int]) -> None:
        """Folds ``groups`` one at a time, as ``process_record`` would."""
        agg, batch, keys, left_keys = self.agg, self.batch, self.keys, self.left_keys
        counts, due_at, interval_ms = self.folds.counts, self.due_at, self.interval_ms
        passed = self.passed
        combiner = agg.aggregate
        fold, serde = self.folds.folder(combiner), agg.state_serde
        watermark = batch.low_watermark
        for g in groups:
            key = keys[g]
            if key in left_keys:
                continue
            window = self.window(g)
            if passed > window.last_ms:
                left_keys.add(key)  # the window has passed: late panes, or late records
                continue
            ctx = batch.for_key(key)
            tag = "w:" + window.tag()
            state = ctx.get_state(tag, serde)
            if state is None:
                if due_at is not None and counts[g] >= due_at:
                    left_keys.add(key)  # an early pane is due
                    continue
                state = agg._open(ctx, window, combiner.create(), watermark)
                self.set_open_timers([g])  # again, on the opening record's account
            elif state["fired"] or (due_at is not None and state["since"] + counts[g] >= due_at):
                left_keys.add(key)  # a late pane, or an early pane is due
                continue
            state["acc"] = fold(state["acc"], g)
            state["since"] += counts[g]
            if interval_ms is not None and not state.get("early_at"):
                state["early_at"] = ctx.processing_time_ms + interval_ms
                batch.set_timers(  # on the account of the group's first record, as it sets it
                    [key],
                    ["early:" + tag[2:]],
                    [state["early_at"]],
                    TimeDomain.PROCESSING_TIME,
                    record_ids=self.openers([g]),
                )
            ctx.put_state(tag, state, serde)


def native_parts(combiner: Combiner) -> tuple[list[str], bool] | None:
    """The combiner as :func:`~millrace.dataplane.fold_window_states` names it (its
    parts, and whether they are combined), or None when it has no native fold."""
    if type(combiner) is Combined:
        names = [_NATIVE_PARTS.get(type(part)) for part in combiner.parts.values()]
        return None if None in names else ([n for n in names if n], True)
    name = _NATIVE_PARTS.get(type(combiner))
    return None if name is None else ([name], False)


def native_window(
    agg: WindowOps,
) -> tuple[str, int] | tuple[str, int, int] | tuple[str, int, int, int] | None:
    """The window assigner as :func:`~millrace.dataplane.fold_groups` takes it; None for
    what is not folded in batches (merging and sliding windows, input panes)."""
    window = agg.window
    if agg.input_panes:
        return None
    if type(window) is Tumbling:
        return ("tumbling", window.size_ms, window.offset_ms)
    if type(window) is Hopping:
        return ("hopping", window.size_ms, window.slide_ms, window.offset_ms)
    if type(window) is GlobalWindows:
        return ("global", GLOBAL.start)
    return None


def _values(agg: WindowOps, records: Sequence[Record]) -> Any:
    """``True`` when the combiner ignores values, else a list of Python values as
    ``process_record`` reads them (integer columns come natively); None when some value
    is invalid (left to ``process_record``, which dead-letters it) or retracts (an
    updating input's retraction is folded one record at a time)."""
    if not agg.aggregate.needs_value:
        return True
    try:
        inputs = [agg._input(r, parse=False) for r in records]
    except Exception:  # process_record dead-letters it, with the error
        return None
    if any(retract for _, retract, _ in inputs):
        return None
    return [value for value, _, _ in inputs]


def _int_foldable(combiner: Combiner) -> bool:
    if type(combiner) is Combined:
        return all(_int_foldable(part) for part in combiner.parts.values())
    return type(combiner) in _INT_FOLDS


class _Folds:
    """Each group's count and, for integer columns, its exact sum, min and max (computed
    natively for all groups at once); :meth:`folder` makes the function folding a group
    in."""

    def __init__(
        self,
        values: Any,
        slots: list[int],
        bounds: list[int],
        counts: list[int],
        read_values: Callable[[], Any],
    ) -> None:
        """``values``: the integer columns ``(sums, mins, maxs)``, or the records' values;
        ``read_values``: the records' values as ``process_record`` reads them, for a group
        an integer column cannot fold (a float accumulator)."""
        self.counts = counts
        self._values = values
        self._read_values = read_values
        self._slots = slots
        self._bounds = bounds
        self._sums = self._mins = self._maxs = None
        if isinstance(values, tuple):
            self._sums, self._mins, self._maxs = values

    def folder(self, combiner: Combiner) -> Callable[[Any, int], Any]:
        """``fold(acc, g)``: ``acc`` with group ``g`` folded in, equal to ``add``
        applied value by value (specialized once per batch: it runs per group)."""
        kind, counts, sums = type(combiner), self.counts, self._sums
        if kind is Count:
            return lambda acc, g: acc + counts[g]
        if kind is Combined:
            parts = [self.folder(c) for c in combiner.parts.values()]  # type: ignore[attr-defined]
            if len(parts) == 2:
                first, second = parts
                return lambda acc, g: [first(acc[0], g), second(acc[1], g)]
            return lambda acc, g: [fold(a, g) for fold, a in zip(parts, acc, strict=True)]
        if kind is Min and self._mins is not None:
            mins = self._mins
            return lambda acc, g: combiner.add(acc, mins[g])
        if kind is Max and self._maxs is not None:
            maxs = self._maxs
            return lambda acc, g: combiner.add(acc, maxs[g])
        one_by_one = self._one_by_one
        if kind is Sum and sums is not None:
            # Integer sums are exact in any order; a float accumulator is not (then the
            # group's values are added one by one, as process_record would).
            return lambda acc, g: (
                acc + sums[g] if type(acc) is int else one_by_one(combiner, acc, g)
            )
        if kind is Mean and sums is not None:
            return lambda acc, g: (
                [acc[0] + sums[g], acc[1] + counts[g]]
                if type(acc[0]) is int
                else one_by_one(combiner, acc, g)
            )
        return lambda acc, g: one_by_one(combiner, acc, g)

    def _one_by_one(self, combiner: Combiner, acc: Any, g: int) -> Any:
        return combiner.add_all(acc, self._group_values(g))

    def _group_values(self, g: int) -> list[Any]:
        slots = self._slots[self._bounds[g] : self._bounds[g + 1]]
        if isinstance(self._values, tuple):  # columns: read the values once, when needed
            self._values = self._read_values()
        values = self._values
        return [values[i] for i in slots]
