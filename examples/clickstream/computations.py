"""The click-stream demo's computations.

``PageWindowCounts`` (keyed by page): clicks per page in 1-minute event-time
windows. When the watermark passes a window it emits the count; a straggler
that arrives after that (within ``allowed_lateness_ms``) emits a corrected
count at once (accumulating mode), so the latest emission per
``page@window`` is always the full count.

``UserTopPages`` (keyed by user): each user's click count per page; after
every click it emits the user's top 3 pages, so the materialized view of
``user_top_pages`` holds each user's current top pages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from computations import JSON, Computation, Context, FiredTimer, Record

MINUTE_MS = 60_000


class PageWindowCounts(Computation):
    """Per page, tumbling 1-minute windows; corrections for late clicks."""

    def setup(self, params: Mapping[str, Any]) -> None:
        self.window_ms = int(params.get("window_ms", MINUTE_MS))
        self.lateness_ms = int(params.get("allowed_lateness_ms", 60 * MINUTE_MS))

    def process_record(self, ctx: Context, record: Record) -> None:
        start = record.event_time_ms - record.event_time_ms % self.window_ms
        tag = f"w{start}"
        window = ctx.get_state(tag, JSON) or {"count": 0, "fired": False}
        window["count"] += 1
        ctx.put_state(tag, window, JSON)
        if window["fired"]:
            self._emit(ctx, start, window["count"], record.event_time_ms)  # a correction
        else:
            ctx.set_timer(tag, start + self.window_ms - 1)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        if timer.tag.startswith("gc"):
            ctx.delete_state("w" + timer.tag[2:])
            return
        window = ctx.get_state(timer.tag, JSON)
        if window is None:
            return
        start = int(timer.tag[1:])
        window["fired"] = True
        ctx.put_state(timer.tag, window, JSON)
        self._emit(ctx, start, window["count"], timer.time_ms)
        ctx.set_timer("gc" + timer.tag[1:], start + self.window_ms + self.lateness_ms)

    def _emit(self, ctx: Context, start: int, count: int, event_time_ms: int) -> None:
        page = ctx.key.decode()
        body = {"page": page, "window_start_ms": start, "count": count}
        ctx.produce(
            "page_window_counts",
            f"{page}@{start}".encode(),
            json.dumps(body).encode(),
            event_time_ms,
        )


class UserTopPages(Computation):
    """Per user, the three pages clicked most (ties: page name)."""

    def process_record(self, ctx: Context, record: Record) -> None:
        page = json.loads(record.value)["page"]
        counts = ctx.get_state("pages", JSON) or {}
        counts[page] = counts.get(page, 0) + 1
        ctx.put_state("pages", counts, JSON)
        top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:3]
        body = {"user": ctx.key.decode(), "top_pages": [[p, n] for p, n in top]}
        ctx.produce("user_top_pages", ctx.key, json.dumps(body).encode())
