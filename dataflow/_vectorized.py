"""The vectorized path of :class:`WindowedAggregation`: a delivered batch folded per
(key, window) with column operations, then one state read and write per window.

What runs per record is a few C-level column steps: event times into a numpy
array, values parsed by pyarrow's JSON reader in one call, window starts by
array arithmetic, and a sort grouping the batch by (key, window). Python runs
once per group: read the window's state, fold the group in, write it back.

It only *folds*; it never emits. A key whose records could emit a pane or be
late (a window the watermark has passed, a fired window, an early trigger
due within the batch) is left, whole, to ``process_record``, as are batches
it cannot read as columns (a value pyarrow cannot parse, a float where exact
integer sums are needed...). Folding uses the combiner's own ``add`` in
arrival order wherever integer column sums would not be bit-identical, so
state and outputs equal the one-at-a-time path's
(``tests/dataflow/test_vectorized.py`` compares them byte for byte).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from computations import (
    MAX_EVENT_TIME_MS,
    MIN_EVENT_TIME_MS,
    BatchContext,
    Record,
    TimeDomain,
)
from dataflow._combiners import Combined, Combiner, Count, Max, Mean, Min, Sum
from dataflow._triggers import firing
from dataflow._window_ops import WindowOps
from dataflow._windows import GlobalWindows, Hopping, Tumbling, Window, WindowAssigner

_INT_FOLDS = (Count, Sum, Min, Max, Mean)
GLOBAL = GlobalWindows().assign(0)[0]
_SAFE_TOTAL = 2**62
"""Column sums below this cannot overflow int64."""


class _Groups(NamedTuple):
    """A batch's (record, window) pairs grouped by (key, window start)."""

    keys: list[bytes]
    """Each group's key."""
    starts: list[int]
    """Each group's window start."""
    slots: np.ndarray
    """Record indices, grouped: group ``g`` is ``slots[bounds[g]:bounds[g + 1]]``."""
    bounds: list[int]
    size: int
    """The windows' size (0: the global window)."""


def fold_batch(agg: WindowOps, batch: BatchContext, records: Sequence[Record]) -> Sequence[Record]:
    """Fold what can be folded; return the records of the keys left to
    ``process_record`` (the engine discards what this did to those keys)."""
    if agg.input_panes or type(agg.window) not in (Tumbling, Hopping, GlobalWindows):
        return records
    values = _values(agg, records)
    groups = None if values is None else _group(agg.window, records)
    if values is None or groups is None:
        return records
    folds = _Folds(values, groups.slots, groups.bounds)
    counts = folds.counts
    watermark = batch.low_watermark
    passed = MIN_EVENT_TIME_MS - 1 if watermark is None else watermark
    early = firing(agg.trigger.early)
    due_at, interval_ms = early.count, early.interval_ms
    combiner, size, fold = agg.aggregate, groups.size, folds.folder(agg.aggregate)
    serde = agg.state_serde
    left_keys: set[bytes] = set()
    for g, (key, start) in enumerate(zip(groups.keys, groups.starts, strict=True)):
        if key in left_keys:
            continue
        end = start + size if size else GLOBAL.end
        if passed > min(end - 1, MAX_EVENT_TIME_MS):
            left_keys.add(key)  # the window has passed: late panes, or late records
            continue
        ctx = batch.for_key(key)
        tag = f"w:{start}/{end}"
        state = ctx.get_state(tag, serde)
        if state is None:
            if due_at is not None and counts[g] >= due_at:
                left_keys.add(key)  # an early pane is due
                continue
            state = agg._open(ctx, Window(start, end), combiner.create(), watermark)
        elif state["fired"] or (due_at is not None and state["since"] + counts[g] >= due_at):
            left_keys.add(key)  # a late pane, or an early pane is due
            continue
        state["acc"] = fold(state["acc"], g)
        state["since"] += counts[g]
        if interval_ms is not None and not state.get("early_at"):
            state["early_at"] = ctx.processing_time_ms + interval_ms
            ctx.set_timer("early:" + tag[2:], state["early_at"], TimeDomain.PROCESSING_TIME)
        ctx.put_state(tag, state, serde)
    return [r for r in records if r.key in left_keys] if left_keys else ()


def _group(window: WindowAssigner, records: Sequence[Record]) -> _Groups | None:
    count = len(records)
    times = np.fromiter((r.event_time_ms for r in records), np.int64, count)
    assigned = _assign(window, times)
    if assigned is None:
        return None
    slots, starts, size = assigned
    key_ids: dict[bytes, int] = {}
    kids = np.fromiter((key_ids.setdefault(r.key, len(key_ids)) for r in records), np.int64, count)
    keys = list(key_ids)
    slot_kids = kids[slots]
    order = np.lexsort((slots, starts, slot_kids))  # by key, window, then arrival
    slots, starts, slot_kids = slots[order], starts[order], slot_kids[order]
    change = np.flatnonzero((np.diff(slot_kids) != 0) | (np.diff(starts) != 0)) + 1
    bounds = np.concatenate(([0], change, [len(slots)])).tolist()
    firsts = bounds[:-1]
    return _Groups(
        [keys[k] for k in slot_kids[firsts].tolist()],
        starts[firsts].tolist(),
        slots,
        bounds,
        size,
    )


def _values(agg: WindowOps, records: Sequence[Record]) -> Any:
    """``True`` when the combiner ignores values, an int64 array when every value is
    an integer and the combiner folds integers exactly, else a list of Python values
    as ``process_record`` reads them; None when some value is invalid (left to
    ``process_record``, which dead-letters it)."""
    if not agg.aggregate.needs_value:
        return True
    if _int_foldable(agg.aggregate):
        values = [r.value for r in records]
        column = _ints(values) if agg.field is None else _int_field(values, agg.field)
        if column is not None:
            return column
    try:
        return [agg._value_of(r) for r in records]
    except ValueError:
        return None


def _int_foldable(combiner: Combiner) -> bool:
    if type(combiner) is Combined:
        return all(_int_foldable(part) for part in combiner.parts.values())
    return type(combiner) in _INT_FOLDS


_INTEGERS = re.compile(rb"-?(?:0|[1-9][0-9]{0,17})(?:\n-?(?:0|[1-9][0-9]{0,17}))*")
"""Newline-separated JSON integers that fit int64, nothing else (no spaces, no ``+``)."""


def _ints(values: list[bytes]) -> np.ndarray | None:
    """Values that are each a JSON integer, as int64; else None."""
    if not _INTEGERS.fullmatch(b"\n".join(values)):
        return None
    try:
        return np.array(list(map(int, values)), dtype=np.int64)
    except ValueError:
        return None  # a value holding a newline: not one integer


def _int_field(values: list[bytes], field: str) -> np.ndarray | None:
    """``field`` of values that are each a JSON object whose ``field`` is an integer, as
    int64; else None. Parsed by pyarrow in one call; the bytes must be UTF-8 (which
    Python's parser demands and pyarrow's does not check inside strings)."""
    joined = b"\n".join(values)
    try:
        joined.decode()
        table = pa_json.read_json(io.BytesIO(joined), parse_options=_JSON_LINES)
    except (UnicodeDecodeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(values) or field not in table.column_names:
        return None
    column = table.column(field)
    if column.type != pa.int64() or column.null_count:
        return None
    array: np.ndarray = column.to_numpy()
    return array


_JSON_LINES = pa_json.ParseOptions(newlines_in_values=True)


def _assign(window: WindowAssigner, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``(record index, window start)`` per (record, window) pair, and the window size
    (0: the global window)."""
    indices = np.arange(len(times), dtype=np.int64)
    if isinstance(window, Tumbling):
        return indices, times - (times - window.offset_ms) % window.size_ms, window.size_ms
    if isinstance(window, Hopping):
        last = times - (times - window.offset_ms) % window.slide_ms
        slots, starts = [], []
        for hop in range(-(-window.size_ms // window.slide_ms)):
            start = last - hop * window.slide_ms
            inside = start > times - window.size_ms
            slots.append(indices[inside])
            starts.append(start[inside])
        return np.concatenate(slots), np.concatenate(starts), window.size_ms
    if isinstance(window, GlobalWindows):
        return indices, np.full(len(times), GLOBAL.start, dtype=np.int64), 0
    return None


class _Folds:
    """Each group's count and, for integer columns, its sum, min and max, computed for
    all groups at once; :meth:`folder` makes the function folding a group in."""

    def __init__(self, values: Any, slots: np.ndarray, bounds: list[int]) -> None:
        starts = np.asarray(bounds[:-1], dtype=np.int64)
        self.counts: list[int] = np.diff(bounds).tolist()
        self._values = values
        self._slots = slots
        self._bounds = bounds
        self._sums = self._mins = self._maxs = None
        if isinstance(values, np.ndarray) and len(slots):
            column = values[slots]
            if int(np.abs(column).max()) * max(self.counts) < _SAFE_TOTAL:
                self._sums = np.add.reduceat(column, starts).tolist()
            self._mins = np.minimum.reduceat(column, starts).tolist()
            self._maxs = np.maximum.reduceat(column, starts).tolist()

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
            # Integer sums are exact in any order; a float accumulator is not.
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
        for value in self._group_values(g):
            acc = combiner.add(acc, value)
        return acc

    def _group_values(self, g: int) -> list[Any]:
        slots = self._slots[self._bounds[g] : self._bounds[g + 1]].tolist()
        values = self._values
        if isinstance(values, np.ndarray):
            return values[slots].tolist()  # type: ignore[no-any-return]
        return [values[i] for i in slots]
