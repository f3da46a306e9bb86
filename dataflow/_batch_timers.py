"""The batch path of :class:`WindowedAggregation`'s timers
(:meth:`~computations.Computation.process_timers`): a round's on-time timers fire many
at once, their windows' states read in one store read and their panes (and the states
kept for late records) written natively (:func:`millrace.dataplane.on_time_panes`,
``native/core/src/panes.rs``); a window's quiet expiry only drops its state. What
cannot be fired so (a late pane, an early or late clock to stop, retractions) leaves
its key to ``process_timer``; ``tests/dataflow/test_vectorized.py`` compares both
paths byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from millrace.computations import MAX_EVENT_TIME_MS, FiredTimer, TimeDomain, TimerBatchContext
from millrace.dataflow._combiners import Combined
from millrace.dataflow._panes import Pane, Timing
from millrace.dataflow._triggers import Accumulation
from millrace.dataflow._vectorized import native_parts, native_window
from millrace.dataflow._window_ops import WindowOps
from millrace.dataflow._windows import Window
from millrace.dataplane import on_time_panes


def fire_on_time(
    agg: WindowOps, batch: TimerBatchContext, timers: Sequence[FiredTimer]
) -> Sequence[FiredTimer]:
    """Fire a round's on-time timers (no retractions, no early clock running) as
    ``process_timer`` does: each emits its pane; the window's state goes, or, with an
    allowed lateness, stays for late records (the pane counted, ``fired`` set). The
    panes of the built-in combiners, and the states kept, are written natively
    (:func:`~millrace.dataplane.on_time_panes`). With an allowed lateness, the expiry
    timers of windows that took no late record only drop their state. Returns the
    other timers, which leave their keys to ``process_timer``."""
    if agg.accumulation is Accumulation.RETRACTING or native_window(agg) is None:
        return timers
    lateness = agg.allowed_lateness_ms
    kinds = ("on:", "gc:") if lateness else ("on:",)
    left_keys = {
        t.key for t in timers if t.domain is not TimeDomain.EVENT_TIME or t.tag[:3] not in kinds
    }
    seen: set[tuple[bytes, str]] = set()
    for t in timers:  # a window's on-time and expiry timers in one round: in order, alone
        if (t.key, t.tag[3:]) in seen:
            left_keys.add(t.key)
        seen.add((t.key, t.tag[3:]))
    taken = [i for i, t in enumerate(timers) if t.key not in left_keys]
    on = [i for i in taken if timers[i].tag[:3] == "on:"]
    if lateness:
        _expire(agg, batch, [timers[i] for i in taken if timers[i].tag[:3] == "gc:"], left_keys)
    keys = [timers[i].key for i in on]
    windows = [timers[i].tag[3:] for i in on]
    tags = ["w:" + w for w in windows]
    raws = batch.read_states(keys, tags)
    combiner = agg.aggregate
    row = None if agg.native_panes else agg.native_row
    parts = native_parts(combiner) if agg.native_panes or row is not None else None
    after = "forget" if not lateness else _AFTER_PANE[agg.accumulation]
    fired: list[int] = []
    panes: list[bytes] = []
    times: list[int] = []
    kept: list[bytes] = []
    python: Sequence[int] = range(len(on))
    if parts is not None:
        names = list(combiner.parts) if type(combiner) is Combined else []
        fired, panes, times, kept, left, python = on_time_panes(
            raws, keys, windows, parts=parts[0], names=names, combined=parts[1],
            max_ms=MAX_EVENT_TIME_MS, after=after, row=row,
        )  # fmt: skip
        left_keys.update(keys[j] for j in left)
    produced = list(fired)
    output_keys = [keys[j] for j in fired]
    for j, outputs, state in _on_time_in_python(
        agg, keys=keys, windows=windows, raws=raws, which=python, left_keys=left_keys
    ):
        fired.append(j)
        for out_key, value in outputs:  # the records the computation writes for the pane
            produced.append(j)
            output_keys.append(out_key)
            panes.append(value)
            times.append(Window.from_tag(windows[j]).last_ms)
        if lateness:
            kept.append(state)
    batch.produce_many([on[j] for j in produced], agg.output, output_keys, panes, times)
    if lateness:
        batch.write_states([keys[j] for j in fired], [tags[j] for j in fired], kept)
    else:
        batch.delete_states(keys, tags)
    return [t for t in timers if t.key in left_keys]


_AFTER_PANE = {Accumulation.ACCUMULATING: "accumulate", Accumulation.DISCARDING: "discard"}


def _on_time_in_python(
    agg: WindowOps,
    *,
    keys: list[bytes],
    windows: list[str],
    raws: list[bytes | None],
    which: Iterable[int],
    left_keys: set[bytes],
) -> Iterator[tuple[int, Sequence[tuple[bytes, bytes]], bytes]]:
    """``(j, (key, value) of each of the pane's records, state after)`` of the on-time
    timers ``which`` that fire, as ``process_timer`` makes them (the state as kept for
    late records)."""
    serde, combiner = agg.state_serde, agg.aggregate
    for j in which:
        raw = raws[j]
        if raw is None:
            continue  # gone: nothing to fire
        state = serde.loads(raw)
        if "early_at" in state:
            left_keys.add(keys[j])  # its early timer is to be deleted: process_timer does that
            continue
        window = Window.from_tag(windows[j])
        result = combiner.result(state["acc"])
        pane = agg.pane_records(Pane(keys[j], window, state["pane"], Timing.ON_TIME, result))
        state["pane"] += 1  # as _emit and process_timer leave it
        state["since"] = 0
        if agg.accumulation is Accumulation.DISCARDING:
            state["acc"] = combiner.create()
        state["fired"] = True
        yield j, pane, serde.dumps(state)


def _expire(
    agg: WindowOps, batch: TimerBatchContext, timers: list[FiredTimer], left_keys: set[bytes]
) -> None:
    """Expiry timers of windows past their allowed lateness: a window whose on-time pane
    fired and that took no late record since only drops its state; any other leaves its
    key to ``process_timer`` (a pane to emit, a late clock to stop)."""
    keys = [t.key for t in timers]
    tags = ["w:" + t.tag[3:] for t in timers]
    gone_keys, gone_tags = [], []
    serde = agg.state_serde
    for key, tag, raw in zip(keys, tags, batch.read_states(keys, tags), strict=True):
        if raw is None:
            continue  # gone already: nothing to do
        state = serde.loads(raw)
        if state.get("fired") is True and not state.get("since") and "late_at" not in state:
            gone_keys.append(key)
            gone_tags.append(tag)
        else:
            left_keys.add(key)
    batch.delete_states(gone_keys, gone_tags)
