"""Changelog tables, and ``TableChanges``: a table as a retracting stream.

A *changelog* stream carries a table's changes by key: plain upserts (the
value is the new row; an empty value or JSON ``null`` deletes it) or
Debezium-style envelopes (``{"op": "c"|"u"|"r"|"d", "before": ..., "after":
...}``, optionally inside ``"payload"``; ``d`` deletes, the others set
``after``). The joins over tables are ``TableJoin`` (stream-table,
``_stream_table``) and ``TableTableJoin`` (``_table_table``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import Enum
from typing import Any

from millrace.computations import JSON, Computation, Context, Record
from millrace.dataflow._outputs import json_bytes
from millrace.dataflow._panes import Pane, Timing
from millrace.dataflow._settings import check_settings
from millrace.dataflow._windows import GlobalWindows


class Changelog(Enum):
    """How a changelog stream encodes a table's changes."""

    UPSERT = "upsert"
    DEBEZIUM = "debezium"


def parse_change(value: bytes, changelog: Changelog) -> tuple[bool, Any]:
    """``(deleted, row)`` of one change; ``row`` is JSON when the value is JSON, else
    text. Raises ValueError (the record is then retried and dead-lettered) for a
    Debezium envelope without a known ``op``."""
    if changelog is Changelog.UPSERT:
        if not value or value.strip() == b"null":
            return True, None
        try:
            return False, JSON.loads(value)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return False, json_bytes(value)
    body = JSON.loads(value)
    if isinstance(body, dict) and "payload" in body and "op" not in body:
        body = body["payload"]
    if not isinstance(body, dict) or body.get("op") not in ("c", "u", "r", "d"):
        raise ValueError("not a Debezium change: expected an object with op c, u, r or d")
    if body["op"] == "d":
        return True, None
    return False, body.get("after")


class TableChanges(Computation):
    """A changelog as a retracting stream, so aggregations over a table apply each
    change as retract + add.

    Each change of a row emits a retraction of the row's previous contribution (if
    any) and its new one, as :class:`~dataflow.Pane` values in the global window keyed
    by ``group_by`` (a field of the row; None: the table's key), with ``field``'s
    number (None: the row itself) as the value. A downstream ``WindowedAggregation``
    with ``input_panes = True`` keyed by ``key`` then keeps, say, the sum per group
    exact through updates, moves between groups and deletes.
    """

    setup_at_load = True

    table: str = ""
    changelog: Changelog = Changelog.UPSERT
    group_by: str | None = None
    field: str | None = None
    output: str = ""

    SETTINGS = frozenset({"table", "changelog", "group_by", "field", "output"})
    """What ``params`` (and a subclass's attributes) may set."""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Settings from the topology's ``params`` override the class's."""
        check_settings(self, params, self.SETTINGS)
        for name in ("table", "output", "group_by", "field"):
            if name in params:
                setattr(self, name, str(params[name]))
        if "changelog" in params:
            self.changelog = Changelog(params["changelog"])
        if not (self.table and self.output):
            raise ValueError(f"{type(self).__name__} needs table and output")

    def process_record(self, ctx: Context, record: Record) -> None:
        deleted, row = parse_change(record.value, self.changelog)
        previous = ctx.get_state(CONTRIBUTION, JSON)
        sequence = previous["n"] + 1 if previous else 0
        if previous is not None:
            group, value = previous["group"], previous["value"]
            self._emit(ctx, record, group, value, index=sequence, retraction=True)
        if deleted:
            ctx.delete_state(CONTRIBUTION)
            return
        group = self._group_of(ctx.key, row)
        value = self._number(row)
        self._emit(ctx, record, group, value, index=sequence, retraction=False)
        ctx.put_state(CONTRIBUTION, {"group": group, "value": value, "n": sequence}, JSON)

    def _group_of(self, key: bytes, row: Any) -> str:
        if self.group_by is None:
            return key.decode(errors="replace")
        if not isinstance(row, dict) or self.group_by not in row:
            raise ValueError(f"row has no field {self.group_by!r}")
        found = row[self.group_by]
        return found if isinstance(found, str) else json.dumps(found)

    def _number(self, row: Any) -> float:
        value = row
        if self.field is not None:
            if not isinstance(row, dict) or self.field not in row:
                raise ValueError(f"row has no field {self.field!r}")
            value = row[self.field]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"cannot aggregate {value!r}: not a number")
        return value

    def _emit(
        self,
        ctx: Context,
        record: Record,
        group: str,
        value: float,
        *,
        index: int,
        retraction: bool,
    ) -> None:
        [window] = GlobalWindows().assign(0)
        pane = Pane(group.encode(), window, index, Timing.ON_TIME, value, retraction)
        ctx.produce(self.output, group.encode(), pane.encode(), record.event_time_ms)


CONTRIBUTION = "contribution"
"""State tag of a table key's current contribution (its group and value)."""
