"""The DataFrame the log becomes: its columns, as Spark DDL and as the Arrow schema of a batch."""

from __future__ import annotations

import pyarrow as pa

COLUMNS: tuple[tuple[str, str], ...] = (
    ("record_id", "binary"),
    ("key", "binary"),
    ("value", "binary"),
    ("event_time_ms", "bigint"),
    ("ingest_time_ms", "bigint"),
    ("stream", "string"),
    ("offset", "bigint"),
    ("segment", "string"),
    ("corrupt_position", "bigint"),
    ("corrupt_reason", "string"),
)
"""Name and Spark SQL type of every column, in order. All are nullable."""

SCHEMA = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
"""The schema as a Spark DDL string (what ``MillraceLogSource.schema()`` returns)."""

_ARROW_TYPES = {"binary": pa.binary(), "bigint": pa.int64(), "string": pa.string()}
ARROW_SCHEMA = pa.schema([pa.field(name, _ARROW_TYPES[kind]) for name, kind in COLUMNS])
"""The Arrow schema of every batch a reader yields (Spark checks the first one against it)."""

RECORD_COLUMNS = frozenset(
    ("record_id", "key", "value", "event_time_ms", "ingest_time_ms", "offset")
)
"""Columns set on record rows and NULL on problem rows."""

VANISHED = "vanished"
"""``corrupt_reason`` of a segment that was deleted between planning and reading
(retention); its ``corrupt_position`` is NULL."""
