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

The interval may depend on the left record: ``left_from`` and ``left_until`` name
JSON fields of its value holding absolute times that bound its partners' times too
(``right.t <= left.until``: "bids before the auction's ``expires``"), within the
``lower_ms``/``upper_ms`` interval, which still bounds how long records are kept (a
left record leaves at its ``until`` if that comes first). ``where`` (a function of
the left and the right :class:`computations.Record`, or the :meth:`matches` method)
is a residual predicate: a pair is emitted, and counts as matched, only when it
holds. ``ttl_ms`` makes the join unbounded in form: records join whatever their
order, while their event times are at most ``ttl_ms`` apart (the interval
``[-ttl_ms, +ttl_ms]``), and state is freed once the watermark is ``ttl_ms`` past a
record (Flink's regular join with a state time-to-live, but in event time: the
same pairs online and in a backfill, whatever the arrival order).

``left_unique`` declares at most one left record per key (the left stream's key is
its primary key, as an auction's id): a right record arriving once its key's left
record is there is decided at once (joined, or in a right/full join emitted
unmatched) and never kept, and the right records that came first are decided when
the left one arrives; only those wait in state. A second left record for a key
whose first is still kept is dead-lettered. ``select`` (a function of the left and
the right record, either None when unmatched) makes the output instead of the pair,
as ``Map``'s function does (Flink's ``ProcessJoinFunction``), saving a stage; with
``select_values`` it gets the two values parsed from JSON instead of the records.

Output value (version 2, JSON)::

    {"v": 2, "key": "k", "left": {"t": 5, "value": {...}}, "right": null}

a side's ``value`` is the record's value as parsed JSON, or, when it is not JSON,
``"raw"`` with its UTF-8 text (or ``{"base64": ...}``). ``output_version = 1``
keeps version 1 (each ``value`` as text); :func:`dataflow.decode_join` reads both. A
pair's event time is the later of the two; an unmatched record keeps its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from millrace.computations import (
    JSON,
    MAX_EVENT_TIME_MS,
    MIN_EVENT_TIME_MS,
    Computation,
    Context,
    FiredTimer,
    Record,
)
from millrace.dataflow._durations import duration_ms
from millrace.dataflow._join_rows import (
    UNIQUE_LEFT,
    element_tag,
    entry_of,
    expiry_tag,
    forget_unique_left,
    migrate,
    unique_left,
)
from millrace.dataflow._operators import emit_result, load_function
from millrace.dataflow._outputs import (
    JOIN_OUTPUT_VERSION,
    embedded,
    from_json_bytes,
    json_bytes,
    json_output,
    send_late,
)
from millrace.dataflow._rows import time_tag
from millrace.dataflow._settings import check_settings

_KEPT_LEFTS = 4096
"""How many keys' left records a ``left_unique`` join keeps parsed in memory."""


class JoinType(Enum):
    """Which unmatched records an interval join emits (when they expire)."""

    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"


class IntervalJoin(Computation):
    """Joins ``left`` and ``right`` records of one key within an event-time interval."""

    setup_at_load = True

    left: str = ""
    right: str = ""
    lower_ms: int = 0
    upper_ms: int = 0
    how: JoinType = JoinType.INNER
    allowed_lateness_ms: int = 0
    output: str = ""
    late_output: str | None = None
    left_from: str | None = None
    """A JSON field of the left record's value: its partners' times are at least it."""
    left_until: str | None = None
    """A JSON field of the left record's value: its partners' times are at most it."""
    where: Callable[[Record, Record], bool] | None = None
    """A residual predicate of (left, right); None: :meth:`matches` (every pair)."""
    output_version: int = JOIN_OUTPUT_VERSION
    """2: each side's value as parsed JSON; 1: as text (the format before)."""
    left_unique: bool = False
    """At most one left record per key: a right record meeting it is not kept."""
    select: Callable[[Any, Any], Any] | None = None
    """The output of (left, right), either None when unmatched: a value (bytes, str or
    JSON) or a Record; None: the pair (``output_version``'s format)."""
    select_values: bool = False
    """``select`` gets the two records' values parsed from JSON, not the records."""

    SETTINGS = frozenset({
        "left", "right", "lower_ms", "upper_ms", "how", "allowed_lateness_ms", "output",
        "late_output", "left_from", "left_until", "where", "ttl_ms", "output_version",
        "left_unique", "select", "select_values",
    })  # fmt: skip
    """What ``params`` (and a subclass's attributes) may set."""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Settings from the topology's ``params`` override the class's."""
        check_settings(self, params, self.SETTINGS)
        self._lefts: dict[bytes, tuple[bytes, dict[str, Any], Record]] = {}
        """``left_unique``: each key's left record as parsed (:meth:`_kept_left`)."""
        for name in ("left", "right", "output"):
            if name in params:
                setattr(self, name, str(params[name]))
        for name in ("lower_ms", "upper_ms", "allowed_lateness_ms"):
            if name in params:
                setattr(self, name, duration_ms(params[name], name))
        if "ttl_ms" in params:
            if {"lower_ms", "upper_ms"} & set(params):
                raise ValueError("ttl_ms replaces lower_ms and upper_ms: give one or the other")
            ttl = duration_ms(params["ttl_ms"], "ttl_ms")
            self.lower_ms, self.upper_ms = -ttl, ttl
        for name in ("left_from", "left_until"):
            if name in params:
                setattr(self, name, str(params[name]) or None)
        if "where" in params:
            self.where = load_function(params["where"], "where")
        if "select" in params:
            self.select = load_function(params["select"], "select")
        for name in ("left_unique", "select_values"):
            if name in params:
                if not isinstance(params[name], bool):
                    raise ValueError(f"{name} {params[name]!r}: expected true or false")
                setattr(self, name, params[name])
        if self.select_values and self.select is None:
            raise ValueError("select_values needs a select function")
        if "how" in params:
            self.how = JoinType(params["how"])
        if "late_output" in params:
            self.late_output = str(params["late_output"]) or None
        if "output_version" in params:
            self.output_version = int(params["output_version"])
        if self.output_version not in (1, 2):
            raise ValueError(f"output_version {self.output_version}: expected 1 or 2")
        if not (self.left and self.right and self.output):
            raise ValueError(f"{type(self).__name__} needs left, right and output streams")
        if self.lower_ms > self.upper_ms:
            raise ValueError(f"lower_ms {self.lower_ms} is above upper_ms {self.upper_ms}")

    def matches(self, left: Record, right: Record) -> bool:
        """The residual predicate (``where`` when given; default: every pair in the
        interval). Override it in a subclass; it must depend on the two records only."""
        return True if self.where is None else bool(self.where(left, right))

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
        if self.left_unique and side == "R":
            if not self._metunique_left(ctx, record):
                self._keep(ctx, side, entry_of(record), t - self.lower_ms)
            return
        entry = entry_of(record)
        # The partners' times: left.t + lower <= right.t <= left.t + upper (narrowed by
        # the left record's own bounds, checked per pair).
        low, high = (
            (t + self.lower_ms, t + self.upper_ms)
            if side == "L"
            else (t - self.upper_ms, t - self.lower_ms)
        )
        if side == "L" and (self.left_from or self.left_until):
            low, high = self._left_bounds(record.value, entry, low, high)
        if self.left_unique:  # a left record: the right ones above
            migrate(ctx, "LR")
            self._meet_waiting_rights(ctx, entry)
            self._keep(ctx, side, entry, high)
            ctx.put_state(UNIQUE_LEFT, entry, JSON)
            return
        migrate(ctx, other)  # the rows this record reads
        for tag, candidate in ctx.scan_state(
            f"{other}/", JSON, start=time_tag(low), end=time_tag(high + 1)
        ):
            left, right = (entry, candidate) if side == "L" else (candidate, entry)
            if not self._pair(ctx, left, right):
                continue
            self._emit(ctx, left, right)
            entry["m"] = True
            if not candidate["m"]:
                candidate["m"] = True
                ctx.put_state(tag, candidate, JSON)
        self._keep(ctx, side, entry, high)

    def _keep(self, ctx: Context, side: str, entry: dict[str, Any], high: int) -> None:
        """Buffer a record until no partner can come: its row and its expiry timer."""
        t = entry["t"]
        ctx.put_state(element_tag(side, t, entry["id"]), entry, JSON)
        ctx.set_timer(expiry_tag(side, t, entry["id"]), self._expiry(side, t, high))

    def _metunique_left(self, ctx: Context, record: Record) -> bool:
        """``left_unique``: decide a right ``record`` now if its key's left record is
        kept (no other can come); False when there is none yet. The hot path of a key
        with many right records: the left one is read as parsed (:meth:`_kept_left`),
        the right one never becomes a row, and ``select`` gets the records as they are."""
        kept = self._kept_left(ctx)
        if kept is None:
            return False
        left, left_record = kept
        t = record.event_time_ms
        met = left["t"] + self.lower_ms <= t <= left["t"] + self.upper_ms
        met = met and left.get("lo", t) <= t <= left.get("hi", t)  # the left one's bounds
        if met and (self.where is not None or type(self).matches is not IntervalJoin.matches):
            met = self.matches(left_record, self._as_right(ctx, record))
        if met:
            if self.select is not None:
                right = record if self.select_values else self._as_right(ctx, record)
                result = self._selected(left_record, right)  # select_values reads its value only
                emit_result(ctx, self.output, ctx.key, max(left["t"], t), result)
            else:
                self._emit(ctx, left, entry_of(record))
            if not left["m"]:
                marked = {**left, "m": True}  # the cached entry stays as its row was
                ctx.put_state(element_tag("L", left["t"], left["id"]), marked, JSON)
                ctx.put_state(UNIQUE_LEFT, marked, JSON)
        elif self.how in (JoinType.RIGHT, JoinType.FULL):
            self._emit(ctx, None, entry_of(record))
        return True

    def _as_right(self, ctx: Context, record: Record) -> Record:
        return Record(self.right, ctx.key, record.value, record.event_time_ms, record.record_id)

    def _kept_left(self, ctx: Context) -> tuple[dict[str, Any], Record] | None:
        """``left_unique``: the key's left record's entry and record, or None. Parsed
        once per state value: a key's copy is reused while its row's bytes are the same
        (state is what decides, so a rolled-back change or another writer is seen)."""
        raw = ctx.get_state(UNIQUE_LEFT)
        if raw is None:
            left = unique_left(ctx)  # a row kept without its copy, or none
            return None if left is None else (left, self._record(ctx, self.left, left))
        cache = self._lefts
        cached = cache.get(ctx.key)
        if cached is not None and cached[0] == raw:
            return cached[1], cached[2]
        entry = JSON.loads(raw)
        found = entry, self._record(ctx, self.left, entry)
        if len(cache) >= _KEPT_LEFTS:
            cache.clear()
        cache[ctx.key] = (raw, *found)
        return found

    def _meet_waiting_rights(self, ctx: Context, left: dict[str, Any]) -> None:
        """``left_unique``: the first left record of a key decides every right record
        waiting for it (joined, or emitted unmatched in a right/full join) and frees
        them; a second one while the first is kept is refused."""
        kept = unique_left(ctx)
        if kept is not None:
            raise ValueError(
                f"left_unique: key {ctx.key!r} already has a left record "
                f"(t={kept['t']}, id {kept['id']})"
            )
        for tag, right in ctx.scan_state("R/", JSON):
            if self._in_interval(left, right) and self._pair(ctx, left, right):
                self._emit(ctx, left, right)
                left["m"] = True
            elif self.how in (JoinType.RIGHT, JoinType.FULL) and not right["m"]:
                self._emit(ctx, None, right)
            ctx.delete_state(tag)
            ctx.delete_timer(expiry_tag("R", right["t"], right["id"]))

    def _in_interval(self, left: dict[str, Any], right: dict[str, Any]) -> bool:
        return bool(left["t"] + self.lower_ms <= right["t"] <= left["t"] + self.upper_ms)

    def _left_bounds(
        self, value: bytes, entry: dict[str, Any], low: int, high: int
    ) -> tuple[int, int]:
        """The left record's own bounds (``left_from``/``left_until``), kept in its
        entry for the right records that come later; ``ValueError`` dead-letters it."""
        body = JSON.loads(value)
        if not isinstance(body, dict):
            raise ValueError("left_from/left_until: the left record's value is not an object")
        for name, field in (("lo", self.left_from), ("hi", self.left_until)):
            if field is None:
                continue
            found = body.get(field)
            if isinstance(found, bool) or not isinstance(found, int):
                raise ValueError(f"field {field!r} is {found!r}, not a time in ms")
            entry[name] = found
        return max(low, entry.get("lo", low)), min(high, entry.get("hi", high))

    def _pair(self, ctx: Context, left: dict[str, Any], right: dict[str, Any]) -> bool:
        """Whether a left and a right record in the interval join: the left record's own
        bounds, then the residual predicate."""
        if not left.get("lo", right["t"]) <= right["t"] <= left.get("hi", right["t"]):
            return False
        if self.where is None and type(self).matches is IntervalJoin.matches:
            return True
        return self.matches(
            self._record(ctx, self.left, left), self._record(ctx, self.right, right)
        )

    @staticmethod
    def _record(ctx: Context, stream: str, entry: dict[str, Any]) -> Record:
        value = from_json_bytes(entry["v"])
        return Record(stream, ctx.key, value, entry["t"], bytes.fromhex(entry["id"]))

    def _expiry(self, side: str, t: int, high: int | None = None) -> int:
        """When no record of the other side that is not late can match one at ``t``
        (a left one: none after ``high``, its own bound when it has one)."""
        if side == "L":
            horizon = t + self.upper_ms if high is None else high
        else:
            horizon = t - self.lower_ms
        return max(MIN_EVENT_TIME_MS, min(horizon + self.allowed_lateness_ms, MAX_EVENT_TIME_MS))

    # -- expiry -------------------------------------------------------------------

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        parts = timer.tag.split(":")
        if len(parts) == 3:  # set by the format that kept a side as one list
            migrate(ctx, "LR")
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
            if side == "L":
                forget_unique_left(ctx, entry)
            if not entry["m"] and self.how in outer[side]:
                self._emit(ctx, entry if side == "L" else None, entry if side == "R" else None)

    # -- output -------------------------------------------------------------------

    def _emit(
        self, ctx: Context, left: dict[str, Any] | None, right: dict[str, Any] | None
    ) -> None:
        t = max(side["t"] for side in (left, right) if side is not None)
        if self.select is not None:
            result = self._selected(
                None if left is None else self._record(ctx, self.left, left),
                None if right is None else self._record(ctx, self.right, right),
            )
            emit_result(ctx, self.output, ctx.key, t, result)
            return
        body = {
            "v": self.output_version,
            "key": json_bytes(ctx.key),
            "left": None if left is None else self._side(left),
            "right": None if right is None else self._side(right),
        }
        ctx.produce(self.output, ctx.key, json_output(body), t)

    def _selected(self, left: Record | None, right: Record | None) -> Any:
        """``select`` of the pair: of the records, or (``select_values``) of their values
        as parsed JSON (each value parsed per call: a function may change what it gets)."""
        assert self.select is not None
        if not self.select_values:
            return self.select(left, right)
        return self.select(_parsed(left, "left"), _parsed(right, "right"))

    def _side(self, entry: dict[str, Any]) -> dict[str, Any]:
        if self.output_version == 1:
            return {"t": entry["t"], "value": entry["v"]}
        return {"t": entry["t"], **embedded(from_json_bytes(entry["v"]))}


def _parsed(record: Record | None, side: str) -> Any:
    if record is None:
        return None
    try:
        return JSON.loads(record.value)
    except ValueError as error:
        message = f"select_values: the {side} record's value is not JSON ({error})"
        raise ValueError(message) from None
