"""``TableJoin``: a record stream enriched with its key's row of a changelog table.

Two modes, chosen by ``versioned``:

- **Arrival order** (default, as Kafka Streams' stream-table join): a record
  meets the row its key has when the record is processed. The key's latest
  row is its state (``row``). Records and changes of one key are processed
  in arrival order, so the result depends on it: a record that arrives
  before its row meets nothing.
- **Event time** (``versioned = True``, as Flink's event-time temporal join):
  a record at ``t`` meets the version with the greatest change event time
  ``<= t``, whatever the arrival order. The key keeps its version history,
  one state row per version (``v/<time>``), and buffers its records, one row
  each (``p/<time>/<id>``), until the watermark passes their time (an
  event-time timer ``at:T``): then every change up to ``t`` has arrived, and
  the record is joined. Rows are read by time range (``Context.scan_state``),
  so a record's cost does not grow with its key's backlog.

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

Output value (version 2, JSON), at the record's event time::

    {"v": 2, "key": "k", "record": {...}, "row": {...}}

``record`` is the record's value as parsed JSON (``"record_raw"`` with its text
instead when it is not JSON), ``row`` null in a left join when the record meets no
row (none yet, or deleted). ``output_version = 1`` keeps version 1 (``record`` as
text); :func:`dataflow.decode_join` reads both.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from millrace.computations import JSON, Computation, Context, FiredTimer, Record
from millrace.dataflow._durations import duration_ms
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
from millrace.dataflow._tables import Changelog, parse_change
from millrace.dataflow._versions import Version, row_of

ROW = "row"
"""State tag of a key's current row in arrival mode (``{"t": event time, "value": row}``)."""
VERSION_ROWS = "v/"
"""Event-time mode: a key's version history, one row per version (``v/<time>``:
``{"t": ms, "row": row}`` or ``{"t": ms, "deleted": true}``)."""
PENDING_ROWS = "p/"
"""Event-time mode: a key's records waiting for the watermark, one row each
(``p/<time>/<record id>``: ``{"t": ms, "v": value}``)."""
VERSIONS = "versions"
PENDING = "pending"
"""The format before one row per version and per record: one JSON list each, moved
to rows on first touch (:func:`_migrate`)."""


class TableJoin(Computation):
    """Enriches each record of ``stream`` with its key's row of ``table``."""

    setup_at_load = True

    stream: str = ""
    table: str = ""
    changelog: Changelog = Changelog.UPSERT
    how: str = "inner"
    """``"left"``: a record with no row is emitted with ``"row": null`` (``"inner"``:
    dropped). The same name and values as in a topology's ``params``."""
    output: str = ""
    mode: str = "arrival"
    """``"event_time"``: each record meets the row as of its own event time (see the
    module); ``"arrival"``: the row its key has when it is processed."""
    allowed_lateness_ms: int = 0
    """Event-time mode: how far behind the watermark a record may still be joined."""
    late_output: str | None = None
    output_version: int = JOIN_OUTPUT_VERSION
    """2: the record's value as parsed JSON; 1: as text (the format before)."""
    """Event-time mode: where late records and changes go (None: counted per key)."""

    SETTINGS = frozenset({
        "stream", "table", "changelog", "how", "output", "mode", "allowed_lateness_ms",
        "late_output", "output_version", "left_join", "versioned",
    })  # fmt: skip
    """What ``params`` (and a subclass's attributes) may set (``left_join`` and
    ``versioned``: the names before ``how`` and ``mode``)."""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Settings from the topology's ``params`` override the class's: ``stream``,
        ``table``, ``output``, ``changelog``, ``how`` (inner, left), ``mode`` (arrival,
        event_time), ``allowed_lateness_ms``, ``late_output``."""
        check_settings(self, params, self.SETTINGS)
        for name in ("stream", "table", "output"):
            if name in params:
                setattr(self, name, str(params[name]))
        if "changelog" in params:
            self.changelog = Changelog(params["changelog"])
        self._read_old_names()
        self.how = str(params.get("how", self.how))
        self.mode = str(params.get("mode", self.mode))
        if self.how not in ("inner", "left"):
            raise ValueError(f"how {self.how!r}: expected inner or left")
        if self.mode not in ("arrival", "event_time"):
            raise ValueError(f"mode {self.mode!r}: expected arrival or event_time")
        self.left_join = self.how == "left"
        self.versioned = self.mode == "event_time"
        if "allowed_lateness_ms" in params:
            self.allowed_lateness_ms = duration_ms(
                params["allowed_lateness_ms"], "allowed_lateness_ms"
            )
        if "late_output" in params:
            self.late_output = str(params["late_output"]) or None
        if "output_version" in params:
            self.output_version = int(params["output_version"])
        if self.output_version not in (1, 2):
            raise ValueError(f"output_version {self.output_version}: expected 1 or 2")
        name = type(self).__name__
        if not (self.stream and self.table and self.output):
            raise ValueError(f"{name} needs stream, table and output")
        if self.stream == self.table:
            raise ValueError(f"{name}: stream and table are both {self.stream!r}")
        if self.allowed_lateness_ms < 0:
            raise ValueError("allowed_lateness_ms must be >= 0")
        if not self.versioned and (self.allowed_lateness_ms or self.late_output):
            raise ValueError(f"{name}: allowed lateness and late_output need event-time mode")

    def _read_old_names(self) -> None:
        """A subclass written with the names before ``how`` and ``mode`` (``left_join =
        True``, ``versioned = True``) still works, with a warning."""
        for old, new, value in (("left_join", "how", "left"), ("versioned", "mode", "event_time")):
            if getattr(type(self), old, False) is True:
                warnings.warn(
                    f"{type(self).__name__}.{old} = True is now {new} = {value!r}",
                    DeprecationWarning,
                    stacklevel=3,
                )
                setattr(self, new, value)

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
        _migrate(ctx)
        horizon = self._horizon(ctx)
        if horizon is not None and record.event_time_ms < horizon:
            send_late(ctx, record, self.late_output)  # the history before H is final
            return
        deleted, row = parse_change(record.value, self.changelog)
        t = record.event_time_ms
        # One row per version; a change at an existing version's time replaces it (of
        # two changes at one instant, the later to arrive wins).
        version = {"t": t, "deleted": True} if deleted else {"t": t, "row": row}
        ctx.put_state(f"{VERSION_ROWS}{time_tag(t)}", version, JSON)
        self._prune(ctx, horizon)

    def _probe(self, ctx: Context, record: Record) -> None:
        t, watermark = record.event_time_ms, ctx.low_watermark
        if watermark is not None and t < watermark - self.allowed_lateness_ms:
            send_late(ctx, record, self.late_output)
        elif watermark is not None and t < watermark:
            # Late within the lateness: every change up to t that is not late is here.
            _migrate(ctx)
            self._emit(ctx, json_bytes(record.value), *row_of(self._as_of(ctx, t)), t)
        else:
            tag = f"{PENDING_ROWS}{time_tag(t)}/{record.record_id.hex()}"
            ctx.put_state(tag, {"t": t, "v": json_bytes(record.value)}, JSON)
            ctx.set_timer(f"at:{t}", t)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        """The watermark passed ``timer.time_ms``: join the records buffered up to it."""
        _migrate(ctx)
        due = ctx.scan_state(PENDING_ROWS, JSON, end=time_tag(timer.time_ms + 1))
        for tag, entry in due:
            self._emit(ctx, entry["v"], *row_of(self._as_of(ctx, entry["t"])), entry["t"])
            ctx.delete_state(tag)
        for t in {entry["t"] for _, entry in due} - {timer.time_ms}:
            ctx.delete_timer(f"at:{t}")  # joined early, with this one
        self._prune(ctx, self._horizon(ctx))

    @staticmethod
    def _as_of(ctx: Context, t: int) -> Version | None:
        """The version in force at ``t``: the one with the greatest time ``<= t``."""
        found = ctx.scan_state(VERSION_ROWS, JSON, end=time_tag(t + 1))
        return found[-1][1] if found else None

    def _horizon(self, ctx: Context) -> int | None:
        """The oldest time a record of this key may still be joined at: the watermark
        minus the lateness, or the oldest buffered record's time if that is older (its
        timer may be due but not fired yet). None before the first watermark."""
        watermark = ctx.low_watermark
        if watermark is None:
            return None
        oldest = ctx.scan_state(PENDING_ROWS, JSON, limit=1)
        floor = watermark - self.allowed_lateness_ms
        return min(floor, oldest[0][1]["t"]) if oldest else floor

    @staticmethod
    def _prune(ctx: Context, horizon: int | None) -> None:
        """Drop the versions no lookup at ``horizon`` or later can meet: those before the
        one in force at ``horizon``, and that one too if it is a deletion."""
        if horizon is None:
            return
        before = ctx.scan_state(VERSION_ROWS, JSON, end=time_tag(horizon + 1))
        if not before:
            return
        floor_tag, floor = before[-1]
        for tag, _ in before[:-1]:
            ctx.delete_state(tag)
        if floor.get("deleted"):
            ctx.delete_state(floor_tag)

    # -- output -----------------------------------------------------------------------

    def _emit(self, ctx: Context, value: Any, found: bool, row: Any, t: int) -> None:
        if not found and not self.left_join:
            return
        encoded = self.joined_value(ctx.key, from_json_bytes(value), row if found else None)
        if encoded is not None:
            ctx.produce(self.output, ctx.key, encoded, t)

    def joined_value(self, key: bytes, record: bytes, row: Any) -> bytes | None:
        """The output value of a record (its value's bytes) joined with its key's
        ``row`` (None: no row, in a left join); None: no output. Default: the format
        above (``output_version``). A subclass writing its own shape overrides it."""
        if self.output_version == 1:
            body = {"v": 1, "key": json_bytes(key), "record": json_bytes(record), "row": row}
        else:
            body = {"v": 2, "key": json_bytes(key), **embedded(record, "record"), "row": row}
        return json_output(body)


def _migrate(ctx: Context) -> None:
    """A key's history and buffered records kept as one JSON list each (the format
    before one row per version and per record) become rows, once."""
    history = ctx.get_state(VERSIONS, JSON)
    if history is not None:
        for version in history:
            ctx.put_state(f"{VERSION_ROWS}{time_tag(version['t'])}", version, JSON)
        ctx.delete_state(VERSIONS)
    pending = ctx.get_state(PENDING, JSON)
    if pending is not None:
        for number, entry in enumerate(pending):  # no id was kept: their order is
            ctx.put_state(f"{PENDING_ROWS}{time_tag(entry['t'])}/{number:08x}", entry, JSON)
        ctx.delete_state(PENDING)
