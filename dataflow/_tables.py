"""Changelog tables and the stream-table join.

A *changelog* stream carries a table's changes by key: plain upserts (the
value is the new row; an empty value or JSON ``null`` deletes it) or
Debezium-style envelopes (``{"op": "c"|"u"|"r"|"d", "before": ..., "after":
...}``, optionally inside ``"payload"``; ``d`` deletes, the others set
``after``). :class:`TableJoin` keeps the latest row per key as state and
enriches a record stream with it.

Which version a record meets: the row of its key as committed at this
interval before the record is processed, in arrival order (as Kafka
Streams' stream-table join). Table changes and records of one key are
processed one at a time in the order they arrive; a record that arrives
before its row meets nothing (inner: no output; left: ``"row": null``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from enum import Enum
from typing import Any

from computations import JSON, Computation, Context, Record

ROW = "row"
"""State tag of a key's current row (``{"t": event time, "value": row}``)."""


class Changelog(Enum):
    """How a changelog stream encodes a table's changes."""

    UPSERT = "upsert"
    DEBEZIUM = "debezium"


def _text(data: bytes) -> Any:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def parse_change(value: bytes, changelog: Changelog) -> tuple[bool, Any]:
    """``(deleted, row)`` of one change; ``row`` is JSON when the value is JSON, else
    text. Raises ValueError (the record is then retried and dead-lettered) for a
    Debezium envelope without a known ``op``."""
    if changelog is Changelog.UPSERT:
        if not value or value.strip() == b"null":
            return True, None
        try:
            return False, json.loads(value)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return False, _text(value)
    body = json.loads(value)
    if isinstance(body, dict) and "payload" in body and "op" not in body:
        body = body["payload"]
    if not isinstance(body, dict) or body.get("op") not in ("c", "u", "r", "d"):
        raise ValueError("not a Debezium change: expected an object with op c, u, r or d")
    if body["op"] == "d":
        return True, None
    return False, body.get("after")


class TableJoin(Computation):
    """Enriches each record of ``stream`` with its key's current row of ``table``."""

    stream: str = ""
    table: str = ""
    changelog: Changelog = Changelog.UPSERT
    left_join: bool = False
    """True: a record with no row is emitted with ``"row": null`` (inner join: dropped)."""
    output: str = ""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Settings from the topology's ``params`` override the class's."""
        for name in ("stream", "table", "output"):
            if name in params:
                setattr(self, name, str(params[name]))
        if "changelog" in params:
            self.changelog = Changelog(params["changelog"])
        if "how" in params:
            if params["how"] not in ("inner", "left"):
                raise ValueError(f"how {params['how']!r}: expected inner or left")
            self.left_join = params["how"] == "left"
        if not (self.stream and self.table and self.output):
            raise ValueError(f"{type(self).__name__} needs stream, table and output")

    def process_record(self, ctx: Context, record: Record) -> None:
        if record.stream == self.table:
            deleted, row = parse_change(record.value, self.changelog)
            if deleted:
                ctx.delete_state(ROW)
            else:
                ctx.put_state(ROW, {"t": record.event_time_ms, "value": row}, JSON)
            return
        if record.stream != self.stream:
            raise ValueError(f"{record.stream!r} is neither {self.stream!r} nor {self.table!r}")
        current = ctx.get_state(ROW, JSON)
        if current is None and not self.left_join:
            return
        body = {
            "v": 1,
            "key": _text(ctx.key),
            "record": _text(record.value),
            "row": None if current is None else current["value"],
        }
        value = json.dumps(body, separators=(",", ":")).encode()
        ctx.produce(self.output, ctx.key, value, record.event_time_ms)
