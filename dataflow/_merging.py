"""Merging windows (sessions, or any assigner with ``merging = True``): a key's live
windows, and how a record's window merges with them through the assigner's ``merge``.

A key's live windows are listed in its ``sessions`` state (``[[start, end], ...]``).
When a record arrives, the assigner's ``merge`` sees them with the record's window;
each group it returns becomes its result window: the replaced windows' accumulators
merge into it (``Combiner.merge``), their state and timers are dropped and, in
retracting mode, their last panes retracted. A result that is already a live window
keeps its state (pane index, timing) and takes the others in.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from millrace.computations import JSON, Context, TimeDomain
from millrace.dataflow._window_ops import WindowOps
from millrace.dataflow._windows import Window

SESSIONS = "sessions"
"""State tag listing a key's live windows of a merging assigner (``[[start, end], ...]``)."""


def live_windows(ctx: Context) -> list[Window]:
    """The key's live windows, sorted."""
    return [Window(start, end) for start, end in ctx.get_state(SESSIONS, JSON) or []]


def add_live(ctx: Context, window: Window) -> None:
    """List a newly opened window."""
    live = ctx.get_state(SESSIONS, JSON) or []
    ctx.put_state(SESSIONS, sorted([*live, [window.start, window.end]]), JSON)


def drop_live(ctx: Context, windows: Collection[Window]) -> None:
    """Unlist ``windows`` (merged away, or expired)."""
    live = [w for w in live_windows(ctx) if w not in windows]
    if live:
        ctx.put_state(SESSIONS, [[w.start, w.end] for w in live], JSON)
    else:
        ctx.delete_state(SESSIONS)


def merge_into(agg: WindowOps, ctx: Context, window: Window, watermark: int | None) -> Window:
    """The window a record assigned ``window`` goes to: ``window`` itself, or the result
    of the group the assigner merged it into. Every group the assigner returns is
    merged, also ones without ``window`` (an assigner may merge on more than overlap)."""
    live = live_windows(ctx)
    candidates = sorted({*live, window})
    groups = agg.window.merge(candidates)
    _check(groups, candidates)
    target = window
    for group, result in groups:
        if window in group:
            target = result
        _merge_group(agg, ctx, [w for w in group if w in live], result, watermark)
    return target


def _merge_group(
    agg: WindowOps,
    ctx: Context,
    existing: list[Window],
    result: Window,
    watermark: int | None,
) -> None:
    """Move the state of the live windows ``existing`` into ``result``'s."""
    replaced = [w for w in existing if w != result]
    if not replaced:
        return  # ``result`` is the group's only live window, or a new one
    accumulator, since, serde = agg.aggregate.create(), 0, agg.state_serde
    for old in replaced:
        state = ctx.get_state("w:" + old.tag(), serde)
        if state is not None:
            accumulator = agg.aggregate.merge(accumulator, state["acc"])
            since += state["since"]
            agg._retract_last(ctx, old, state)
        _drop(ctx, old)
    drop_live(ctx, replaced)
    tag = "w:" + result.tag()
    state = ctx.get_state(tag, serde)  # a live window's (only live windows have state)
    if state is None:
        state = agg._open(ctx, result, accumulator, watermark)
        state["since"] = since
    else:
        state["acc"] = agg.aggregate.merge(state["acc"], accumulator)
        state["since"] += since
    ctx.put_state(tag, state, serde)


def _drop(ctx: Context, window: Window) -> None:
    """A merged-away window's state and timers."""
    ctx.delete_state("w:" + window.tag())
    ctx.delete_timer("on:" + window.tag())
    ctx.delete_timer("gc:" + window.tag())
    ctx.delete_timer("early:" + window.tag(), TimeDomain.PROCESSING_TIME)
    ctx.delete_timer("late:" + window.tag(), TimeDomain.PROCESSING_TIME)


def _check(groups: Sequence[tuple[list[Window], Window]], candidates: list[Window]) -> None:
    """A merge the aggregation can carry out: groups of given windows, each window in
    one group at most, results ending no earlier than what they replace."""
    seen: set[Window] = set()
    for group, result in groups:
        if not group or any(w not in candidates or w in seen for w in group):
            raise ValueError(
                f"merge gave group {group}: each group takes windows it was given "
                "(at most once across groups)"
            )
        if result.end < max(w.end for w in group):
            raise ValueError(f"merge result {result} ends before a window it replaces")
        seen.update(group)
