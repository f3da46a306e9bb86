"""What every dataflow computation shares in its outputs: bytes as JSON, strict JSON, late
records, and the joins' record values as parsed JSON (output version 2) with the reader
of both versions."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from millrace.computations import JSON, Context, JsonSerde, Record

LATE_DROPPED = "late_dropped"
"""State tag counting a key's late records that had no ``late_output`` to go to."""


def json_bytes(data: bytes) -> Any:
    """``data`` as a JSON value: UTF-8 text, or ``{"base64": ...}`` when it is not."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def from_json_bytes(value: Any) -> bytes:
    """Inverse of :func:`json_bytes`."""
    return base64.b64decode(value["base64"]) if isinstance(value, dict) else value.encode()


JOIN_OUTPUT_VERSION = 2
"""The joins' output format: 2 embeds each record's value as parsed JSON (``"value"``,
or ``"raw"`` with its text when it is not JSON); 1 embedded the text."""


def embedded(data: bytes, name: str = "value") -> dict[str, Any]:
    """A record's value inside a join's output (version 2): ``{name: parsed JSON}``, or
    ``{"raw": text or {"base64": ...}}`` when it is not JSON (``name + "_raw"`` for
    another ``name``)."""
    try:
        return {name: JSON.loads(data)}
    except (ValueError, UnicodeDecodeError):
        return {"raw" if name == "value" else name + "_raw": json_bytes(data)}


def decode_join(value: bytes) -> dict[str, Any]:
    """A join's output (an ``IntervalJoin`` pair or a ``TableJoin`` record), version 1
    or 2, as version 2 reads: each embedded record's value parsed."""
    body: dict[str, Any] = json.loads(value)
    if body.get("v") != 1:
        return body
    body = {**body, "v": 2}
    if "record" in body:  # a TableJoin's: the record's value as text
        record = body.pop("record")
        body.update(embedded(from_json_bytes(record), "record"))
        return body
    for side in ("left", "right"):
        if body.get(side) is not None:
            text = body[side]["value"]
            body[side] = {"t": body[side]["t"], **embedded(from_json_bytes(text))}
    return body


_STRICT = JsonSerde(sort_keys=False, allow_nan=False).dumps


def json_output(body: Any) -> bytes:
    """``body`` as compact, strict JSON. A float that is not finite (a record's value
    may hold ``NaN`` or ``Infinity``, which ``json.loads`` reads) is written as the
    string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``: strict parsers refuse the bare
    words."""
    try:
        return _STRICT(body)
    except ValueError:  # a non-finite float somewhere in it
        return _STRICT(finite(body))


def finite(value: Any) -> Any:
    """``value`` with every non-finite float as its string; ``value`` itself when it has
    none."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, list):
        items = [finite(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        fields = {key: finite(item) for key, item in value.items()}
        return value if all(fields[k] is v for k, v in value.items()) else fields
    return value


def send_late(ctx: Context, record: Record, late_output: str | None) -> None:
    """A record too late to change any result: reported (the node's lateness histogram),
    and unchanged to ``late_output`` or, with none, counted in the key's ``late_dropped``
    state. Never dropped silently."""
    ctx.report_late(record)
    if late_output:
        ctx.produce(late_output, record.key, record.value, record.event_time_ms)
    else:
        ctx.put_state(LATE_DROPPED, (ctx.get_state(LATE_DROPPED, JSON) or 0) + 1, JSON)
