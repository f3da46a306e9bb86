"""Sliding windows in DDIA's sense (``Sliding(span_ms)``): per key, one window
``W_t = [t - span + 1, t + 1)`` for every distinct event time ``t``, holding the key's
records with ``t - span < ts <= t``.

State holds accumulators, never records. Per key: ``slides``, the sorted distinct
event times that have a *bucket*; ``b:T``, bucket ``T`` (``{"acc": ..., "n": ...}``:
the accumulator of the key's records at ``T``, and how many); and each ``W_T`` as
an ordinary window (state ``w:START/END``, its timers, triggers and panes). A record
at ``t``, when ``W_t`` has not expired:

1. folds into bucket ``t``;
2. if the bucket is new, opens ``W_t`` with the merge of the buckets in
   ``(t - span, t)`` (their records count as not yet in a pane), and sets the
   bucket's timer ``bucket:T``;
3. joins, through the aggregation's ordinary path, every window ``W_s`` with
   ``t <= s < t + span`` (``W_t`` included).

A record whose own ``W_t`` has expired changes nothing (late side output), though
later windows may still be open: so results never depend on arrival order. A
bucket is dropped when the watermark passes ``t + span - 1 + allowed lateness``:
no window that can still open includes it then.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from millrace.computations import JSON, MAX_EVENT_TIME_MS, Context
from millrace.dataflow._window_ops import WindowOps
from millrace.dataflow._windows import Sliding

SLIDES = "slides"
"""State tag listing the event times of a key's buckets (sorted)."""
BUCKET_TIMER = "bucket"


def add_sliding(
    agg: WindowOps,
    ctx: Context,
    time_ms: int,
    value: Any,
    watermark: int | None,
    *,
    retract: bool,
) -> bool:
    """Add a record at ``time_ms`` (steps above); False when its window has expired
    (nothing changed)."""
    assigner = agg.window
    assert isinstance(assigner, Sliding)
    span, combiner, serde = assigner.span_ms, agg.aggregate, agg.state_serde
    own = assigner.window_at(time_ms)
    if watermark is not None and watermark > agg._expiry(own):
        return False
    times: list[int] = ctx.get_state(SLIDES, JSON) or []
    at = bisect_left(times, time_ms)
    new = at == len(times) or times[at] != time_ms
    bucket = (None if new else ctx.get_state(f"b:{time_ms}", serde)) or _empty(agg)
    fold = combiner.retract if retract else combiner.add
    bucket["acc"], bucket["n"] = fold(bucket["acc"], value), bucket["n"] + 1
    ctx.put_state(f"b:{time_ms}", bucket, serde)
    if new:
        accumulator, count = combiner.create(), 0
        for earlier in times[bisect_left(times, time_ms - span + 1) : at]:
            held = ctx.get_state(f"b:{earlier}", serde) or _empty(agg)
            accumulator, count = combiner.merge(accumulator, held["acc"]), count + held["n"]
        state = agg._open(ctx, own, accumulator, watermark)
        state["since"] = count
        ctx.put_state("w:" + own.tag(), state, serde)
        times.insert(at, time_ms)
        ctx.put_state(SLIDES, times, JSON)
        expiry = time_ms + span - 1 + agg.allowed_lateness_ms
        ctx.set_timer(f"{BUCKET_TIMER}:{time_ms}", min(expiry, MAX_EVENT_TIME_MS))
    for later in times[at : bisect_left(times, time_ms + span)]:
        agg._add(ctx, assigner.window_at(later), value, watermark, retract=retract)
    return True


def _empty(agg: WindowOps) -> dict[str, Any]:
    return {"acc": agg.aggregate.create(), "n": 0}


def drop_bucket(ctx: Context, time_ms: int) -> None:
    """Bucket ``time_ms`` can join no window any more."""
    ctx.delete_state(f"b:{time_ms}")
    times = [t for t in ctx.get_state(SLIDES, JSON) or [] if t != time_ms]
    if times:
        ctx.put_state(SLIDES, times, JSON)
    else:
        ctx.delete_state(SLIDES)
