"""What the SQL computations share: rows read and written as JSON objects, a group's key
written and read back, and their ``params`` read strictly.

A group's key is its column value (a string as UTF-8, anything else as JSON text: what
the ``json:FIELD`` key extractor gives) or, for several columns, the JSON array of
their values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.computations import JSON, JsonSerde, Record
from millrace.streamsql import _functions as F  # noqa: N812 - F. reads as SQL's functions

ROWS = JsonSerde(sort_keys=False, allow_nan=False)

KEY_FORMATS = ("string", "json", "array")
"""How a group's key is written: one string column as its UTF-8 text (``string``), one
column of any other kind as JSON text (``json``), several as a JSON array (``array``)."""


def group_key(values: Sequence[Any], key_format: str) -> bytes:
    """The record key of a group, in ``key_format`` (``string`` and ``json``: one value,
    as the ``json:FIELD`` key extractor writes it)."""
    if key_format != "array":
        value = values[0]
        return value.encode() if isinstance(value, str) else json.dumps(value).encode()
    return json.dumps(list(values), separators=(",", ":")).encode()


def group_values(key: bytes, key_format: str, count: int) -> list[Any]:
    """The group's column values read back from its key."""
    if key_format == "string":
        return [key.decode()]
    if key_format == "array" and count == 0:
        return []
    try:
        found = JSON.loads(key)
    except ValueError:  # a json-format column that held a string after all
        return [key.decode(errors="replace")]
    if key_format == "json":
        return [found]
    if not isinstance(found, list) or len(found) != count:
        raise F.SqlRuntimeError(f"group key {key!r} is not an array of {count} values")
    return found


def canonical_text(row: Mapping[str, Any]) -> str:
    """A row's canonical JSON text (keys sorted, no spaces): how rows of equal rank are
    ordered, so a backfill orders them as the online run does."""
    return json.dumps(row, sort_keys=True, separators=(",", ":"))


def row_of(record: Record) -> dict[str, Any]:
    row = JSON.loads(record.value)
    if not isinstance(row, dict):
        raise F.SqlRuntimeError(f"a row is a JSON object, not {row!r}")
    return row


def columns_param(params: Mapping[str, Any], name: str) -> list[tuple[str, str]]:
    raw = params.get(name, [])
    if not isinstance(raw, list) or not all(
        isinstance(c, list | tuple) and len(c) == 2 and all(isinstance(p, str) for p in c)
        for c in raw
    ):
        raise ValueError(f"{name} must be a list of [name, SQL expression] pairs")
    return [(c[0], c[1]) for c in raw]


def library_settings(
    computation: Any, params: Mapping[str, Any], library: frozenset[str]
) -> dict[str, Any]:
    """The ``params`` the library class it extends takes (ValueError naming a setting
    neither it nor the SQL computation has)."""
    unknown = sorted(set(params) - library - computation.SETTINGS)
    if unknown:
        raise ValueError(f"{type(computation).__name__} has no setting {unknown[0]!r}")
    return {k: v for k, v in params.items() if k in library}


def key_format_param(params: Mapping[str, Any], name: str, default: str) -> str:
    """A key format setting, one of :data:`KEY_FORMATS`."""
    found = str(params.get(name, default))
    if found not in KEY_FORMATS:
        raise ValueError(f"{name} {found!r}: expected one of {KEY_FORMATS}")
    return found


def strings_param(params: Mapping[str, Any], name: str) -> list[str]:
    raw = params.get(name, [])
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise ValueError(f"{name} must be a list of strings")
    return list(raw)


def no_key(key: bytes, value: bytes) -> bytes:
    """The key extractor of a group of no columns (``GROUP BY window_start,
    window_end``): every row in one group."""
    return b""
