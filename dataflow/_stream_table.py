"""``TableJoin``: a record stream enriched with its key's row of a changelog table.

Two modes, chosen by ``versioned``:

- **Arrival order** (default, as Kafka Streams' stream-table join): a record
  meets the row its key has when the record is processed. The key's latest
  row is its state (``row``). Records and changes of one key are processed
  in arrival order, so the result depends on it: a record that arrives
  before its row meets nothing.
- **Event time** (``versioned = True``, as Flink's event-time temporal join):
  a record at ``t`` meets the version with the greatest change event time
  ``<= t``, whatever the arrival order. The key keeps its version history
  (``versions``, see ``_versions``) and buffers its records (``pending``)
  until the watermark passes their time (an event-time timer ``at:T``):
  then every change up to ``t`` has arrived, and the record is joined.

Lateness in event-time mode, with ``W`` the low watermark and ``L`` the
allowed lateness: a record with ``t < W - L`` is late: it joins nothing and
goes to ``late_output`` (or the key's ``late_dropped`` count). One with
``W - L <= t < W`` is joined at once. The history keeps every version from
its *horizon* ``H`` on, plus the one in force at ``H``, where ``H`` is
``W - L``, or the time of the key's oldest buffered record if that is older.
A change older than ``H`` is late and goes the same way. A change behind the
watermark but not older than ``H`` is applied, but results already emitted
for records between its time and the watermark stay as they are (no
retraction): only records joined after it arrives see it.

Output value (version 1, JSON), at the record's event time::

    {"v": 1, "key": "k", "record": "...", "row": {...}}

with ``row`` null in a left join when the record meets no row (none yet, or
deleted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from computations import JSON, Computation, Context, FiredTimer, Record
from dataflow._outputs import json_bytes, json_output, send_late
from dataflow._tables import Changelog, parse_change
from dataflow._versions import as_of, insert, prune, row_of

ROW = "row"
"""State tag of a key's current row in arrival mode (``{"t": event time, "value": row}``)."""
VERSIONS = "versions"
"""State tag of a key's version history in event-time mode."""
PENDING = "pending"
"""State tag of a key's records waiting for the watermark (``[{"t": ms, "v": value}]``)."""


class TableJoin(Computation):
    """Enriches each record of ``stream`` with its key's row of ``table``."""

    stream: str = ""
    table: str = ""
    changelog: Changelog = Changelog.UPSERT
    left_join: bool = False
    """True: a record with no row is emitted with ``"row": null`` (inner join: dropped)."""
    output: str = ""
    versioned: bool = False
    """True: each record meets the row as of its own event time (see the module)."""
    allowed_lateness_ms: int = 0
    """Event-time mode: how far behind the watermark a record may still be joined."""
    late_output: str | None = None
    """Event-time mode: where late records and changes go (None: counted per key)."""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Settings from the topology's ``params`` override the class's: ``stream``,
        ``table``, ``output``, ``changelog``, ``how`` (inner, left), ``mode`` (arrival,
        event_time), ``allowed_lateness_ms``, ``late_output``."""
        for name in ("stream", "table", "output"):
            if name in params:
                setattr(self, name, str(params[name]))
        if "changelog" in params:
            self.changelog = Changelog(params["changelog"])
        if "how" in params:
            if params["how"] not in ("inner", "left"):
                raise ValueError(f"how {params['how']!r}: expected inner or left")
            self.left_join = params["how"] == "left"
        if "mode" in params:
            if params["mode"] not in ("arrival", "event_time"):
                raise ValueError(f"mode {params['mode']!r}: expected arrival or event_time")
            self.versioned = params["mode"] == "event_time"
        if "allowed_lateness_ms" in params:
            self.allowed_lateness_ms = int(params["allowed_lateness_ms"])
        if "late_output" in params:
            self.late_output = str(params["late_output"]) or None
        name = type(self).__name__
        if not (self.stream and self.table and self.output):
            raise ValueError(f"{name} needs stream, table and output")
        if self.stream == self.table:
            raise ValueError(f"{name}: stream and table are both {self.stream!r}")
        if self.allowed_lateness_ms < 0:
            raise ValueError("allowed_lateness_ms must be >= 0")
        if not self.versioned and (self.allowed_lateness_ms or self.late_output):
            raise ValueError(f"{name}: allowed lateness and late_output need event-time mode")

    def process_record(self, ctx: Context, record: Record) -> None:
        if record.stream not in (self.stream, self.table):
            raise ValueError(f"{record.stream!r} is neither {self.stream!r} nor {self.table!r}")
        if self.versioned:
            if record.stream == self.table:
                self._add_version(ctx, record)
            else:
                self._probe(ctx, record)
        elif record.stream == self.table:
            deleted, row = parse_change(record.value, self.changelog)
            if deleted:
                ctx.delete_state(ROW)
            else:
                ctx.put_state(ROW, {"t": record.event_time_ms, "value": row}, JSON)
        else:
            current = ctx.get_state(ROW, JSON)
            found, row = (False, None) if current is None else (True, current["value"])
            self._emit(ctx, json_bytes(record.value), found, row, record.event_time_ms)

    # -- event-time mode ------------------------------------------------------------

    def _add_version(self, ctx: Context, record: Record) -> None:
        horizon = self._horizon(ctx, ctx.get_state(PENDING, JSON) or [])
        if horizon is not None and record.event_time_ms < horizon:
            send_late(ctx, record, self.late_output)  # the history before H is final
            return
        deleted, row = parse_change(record.value, self.changelog)
        history = insert(ctx.get_state(VERSIONS, JSON) or [], record.event_time_ms, deleted, row)
        self._keep(ctx, history, horizon)

    def _probe(self, ctx: Context, record: Record) -> None:
        t, watermark = record.event_time_ms, ctx.low_watermark
        if watermark is not None and t < watermark - self.allowed_lateness_ms:
            send_late(ctx, record, self.late_output)
        elif watermark is not None and t < watermark:
            # Late within the lateness: every change up to t that is not late is here.
            history = ctx.get_state(VERSIONS, JSON) or []
            self._emit(ctx, json_bytes(record.value), *row_of(as_of(history, t)), t)
        else:
            pending = ctx.get_state(PENDING, JSON) or []
            ctx.put_state(PENDING, [*pending, {"t": t, "v": json_bytes(record.value)}], JSON)
            ctx.set_timer(f"at:{t}", t)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        """The watermark passed ``timer.time_ms``: join the records buffered up to it."""
        pending = ctx.get_state(PENDING, JSON) or []
        due = [p for p in pending if p["t"] <= timer.time_ms]
        waiting = [p for p in pending if p["t"] > timer.time_ms]
        history = ctx.get_state(VERSIONS, JSON) or []
        for entry in sorted(due, key=lambda p: p["t"]):
            self._emit(ctx, entry["v"], *row_of(as_of(history, entry["t"])), entry["t"])
        for t in {p["t"] for p in due} - {timer.time_ms}:
            ctx.delete_timer(f"at:{t}")  # joined early, with this one
        if waiting:
            ctx.put_state(PENDING, waiting, JSON)
        else:
            ctx.delete_state(PENDING)
        horizon = self._horizon(ctx, waiting)
        if horizon is not None and len(prune(history, horizon)) < len(history):
            self._keep(ctx, history, horizon)

    def _horizon(self, ctx: Context, pending: list[dict[str, Any]]) -> int | None:
        """The oldest time a record of this key may still be joined at: the watermark
        minus the lateness, or the oldest buffered record's time if that is older (its
        timer may be due but not fired yet). None before the first watermark."""
        watermark = ctx.low_watermark
        if watermark is None:
            return None
        oldest: int = min([watermark - self.allowed_lateness_ms, *(p["t"] for p in pending)])
        return oldest

    @staticmethod
    def _keep(ctx: Context, history: list[dict[str, Any]], horizon: int | None) -> None:
        """Store ``history`` pruned to ``horizon`` (no state at all when nothing is left)."""
        if horizon is not None:
            history = prune(history, horizon)
        if history:
            ctx.put_state(VERSIONS, history, JSON)
        else:
            ctx.delete_state(VERSIONS)

    # -- output -----------------------------------------------------------------------

    def _emit(self, ctx: Context, value: Any, found: bool, row: Any, t: int) -> None:
        if not found and not self.left_join:
            return
        body = {"v": 1, "key": json_bytes(ctx.key), "record": value, "row": row}
        encoded = json_output(body)
        ctx.produce(self.output, ctx.key, encoded, t)
