"""``IntervalJoin``: a stream-stream join of records close in event time.

Records of two input streams with equal keys join when
``left.t + lower_ms <= right.t <= left.t + upper_ms`` (Flink's interval join).
Each record is buffered in the key's state, one row per record (``L/<time>/<id>``
and ``R/<time>/<id>``, read by time range with ``Context.scan_state``, so a record's
cost is its partners, not the key's backlog), until no record of the other side
can match it any more: the watermark passes its *horizon*
(``left.t + upper_ms``, or ``right.t - lower_ms``) plus the allowed
lateness. Then it is dropped and, in an outer join, emitted unmatched if it
never matched. A record is late when the watermark is past its own time plus
the allowed lateness: it joins nothing and goes to ``late_output`` (or the
key's ``late_dropped`` count). Every record that is not late meets every
partner, whatever the arrival order.

Output value (version 1, JSON)::

    {"v": 1, "key": "k", "left": {"t": 5, "value": "..."}, "right": null}

a side's ``value`` is UTF-8 text, or ``{"base64": ...}``. A pair's event
time is the later of the two; an unmatched record keeps its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from computations import (
    JSON,
    MAX_EVENT_TIME_MS,
    MIN_EVENT_TIME_MS,
    Computation,
    Context,
    FiredTimer,
    Record,
)
from dataflow._durations import duration_ms
from dataflow._outputs import json_bytes, json_output, send_late
from dataflow._rows import time_tag


class JoinType(Enum):
    """Which unmatched records an interval join emits (when they expire)."""

    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"


class IntervalJoin(Computation):
    """Joins ``left`` and ``right`` records of one key within an event-time interval."""

    left: str = ""
    right: str = ""
    lower_ms: int = 0
    upper_ms: int = 0
    how: JoinType = JoinType.INNER
    allowed_lateness_ms: int = 0
    output: str = ""
    late_output: str | None = None

    def setup(self, params: Mapping[str, Any]) -> None:
        """Settings from the topology's ``params`` override the class's."""
        for name in ("left", "right", "output"):
            if name in params:
                setattr(self, name, str(params[name]))
        for name in ("lower_ms", "upper_ms", "allowed_lateness_ms"):
            if name in params:
                setattr(self, name, duration_ms(params[name], name))
        if "how" in params:
            self.how = JoinType(params["how"])
        if "late_output" in params:
            self.late_output = str(params["late_output"]) or None
        if not (self.left and self.right and self.output):
            raise ValueError(f"{type(self).__name__} needs left, right and output streams")
        if self.lower_ms > self.upper_ms:
            raise ValueError(f"lower_ms {self.lower_ms} is above upper_ms {self.upper_ms}")

    # -- records ------------------------------------------------------------------

    def process_record(self, ctx: Context, record: Record) -> None:
        if record.stream == self.left:
            side, other = "L", "R"
        elif record.stream == self.right:
            side, other = "R", "L"
        else:
            raise ValueError(f"{record.stream!r} is neither {self.left!r} nor {self.right!r}")
        t = record.event_time_ms
        watermark = ctx.low_watermark
        if watermark is not None and watermark > t + self.allowed_lateness_ms:
            # Later than the lateness allows: partners it would have met may be gone.
            send_late(ctx, record, self.late_output)
            return
        _migrate(ctx)
        entry = {"t": t, "id": record.record_id.hex(), "v": json_bytes(record.value), "m": False}
        # The partners' times: left.t + lower <= right.t <= left.t + upper.
        low, high = (
            (t + self.lower_ms, t + self.upper_ms)
            if side == "L"
            else (t - self.upper_ms, t - self.lower_ms)
        )
        for tag, candidate in ctx.scan_state(
            f"{other}/", JSON, start=time_tag(low), end=time_tag(high + 1)
        ):
            left, right = (entry, candidate) if side == "L" else (candidate, entry)
            self._emit(ctx, left, right)
            entry["m"] = True
            if not candidate["m"]:
                candidate["m"] = True
                ctx.put_state(tag, candidate, JSON)
        ctx.put_state(_element_tag(side, t, entry["id"]), entry, JSON)
        ctx.set_timer(f"x:{side}:{time_tag(t)}:{entry['id']}", self._expiry(side, t))

    def _expiry(self, side: str, t: int) -> int:
        """When no record of the other side that is not late can match one at ``t``."""
        horizon = t + self.upper_ms if side == "L" else t - self.lower_ms
        return max(MIN_EVENT_TIME_MS, min(horizon + self.allowed_lateness_ms, MAX_EVENT_TIME_MS))

    # -- expiry -------------------------------------------------------------------

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        parts = timer.tag.split(":")
        if len(parts) == 3:  # set by the format that kept a side as one list
            _migrate(ctx)
            _, side, rid = parts
            found = [(tag, e) for tag, e in ctx.scan_state(f"{side}/", JSON) if e["id"] == rid]
        else:
            _, side, time_tag, rid = parts
            tag = f"{side}/{time_tag}/{rid}"
            entry = ctx.get_state(tag, JSON)
            found = [] if entry is None else [(tag, entry)]
        outer = {"L": (JoinType.LEFT, JoinType.FULL), "R": (JoinType.RIGHT, JoinType.FULL)}
        for tag, entry in found:
            ctx.delete_state(tag)
            if not entry["m"] and self.how in outer[side]:
                self._emit(ctx, entry if side == "L" else None, entry if side == "R" else None)

    # -- output -------------------------------------------------------------------

    def _emit(
        self, ctx: Context, left: dict[str, Any] | None, right: dict[str, Any] | None
    ) -> None:
        body = {
            "v": 1,
            "key": json_bytes(ctx.key),
            "left": None if left is None else {"t": left["t"], "value": left["v"]},
            "right": None if right is None else {"t": right["t"], "value": right["v"]},
        }
        times = [side["t"] for side in (left, right) if side is not None]
        value = json_output(body)
        ctx.produce(self.output, ctx.key, value, max(times))


def _element_tag(side: str, t: int, rid: str) -> str:
    """Where one buffered record of ``side`` lives: one state row per record."""
    return f"{side}/{time_tag(t)}/{rid}"


def _migrate(ctx: Context) -> None:
    """A key's sides kept as one JSON list each (the format before one row per record)
    become one row per record, once."""
    for side in ("L", "R"):
        entries = ctx.get_state(side, JSON)
        if entries is not None:
            for entry in entries:
                ctx.put_state(_element_tag(side, entry["t"], entry["id"]), entry, JSON)
            ctx.delete_state(side)
