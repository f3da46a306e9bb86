"""What every dataflow computation shares in its outputs: bytes as JSON, late records."""

from __future__ import annotations

import base64
from typing import Any

from computations import JSON, Context, Record

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


def send_late(ctx: Context, record: Record, late_output: str | None) -> None:
    """A record too late to change any result: reported (the node's lateness histogram),
    and unchanged to ``late_output`` or, with none, counted in the key's ``late_dropped``
    state. Never dropped silently."""
    ctx.report_late(record)
    if late_output:
        ctx.produce(late_output, record.key, record.value, record.event_time_ms)
    else:
        ctx.put_state(LATE_DROPPED, (ctx.get_state(LATE_DROPPED, JSON) or 0) + 1, JSON)
