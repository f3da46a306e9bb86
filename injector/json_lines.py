"""JSON lines ``{"key": ..., "value": ..., "event_time_ms": <ms>}`` as log records.

The one reading of such lines, shared by ``millrace inject`` and the file source.
``key`` and ``value`` become bytes: a string its UTF-8, any other JSON value its text
as ``json.dumps`` writes it (``7``, ``1.5``, ``true``, ``null``, ``{"a": [1, 2]}``);
the event time, ``event_time_ms`` (the API's name; ``ts``, its older name, is read
too, but not both), must be integer milliseconds in the accepted event-time range;
other fields are ignored.

Two readers, one meaning. :func:`parse_line` (the standard library's ``json``) is the
definition and words every error. The hot paths read whole groups of lines natively
(:func:`parse_plain_lines`, serde_json in ``native/core/src/json_lines.rs``): a line
whose reading is plain (an object whose key and value are strings or integers, an
integer event time in range, no field twice) becomes a record without a Python object per
line, and every other line -- blank, malformed, or with floats, nested values or escapes
``json`` alone takes -- is left to :func:`parse_line`. So the two together return and
raise exactly what :func:`parse_line` does, only faster.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from millrace.dataplane import RecordBatch, parse_json_lines
from millrace.event_time import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS, event_time_problem

MAX_LINE_RECORD_BYTES = 4 << 20
"""Key plus value of one line's record (what the Ingest service accepts too)."""

LineRecord = tuple[bytes, bytes, int]
"""``(key, value, event time ms)``."""

_LIMITS = {
    "min_event_time_ms": MIN_EVENT_TIME_MS,
    "max_event_time_ms": MAX_EVENT_TIME_MS,
    "max_record_bytes": MAX_LINE_RECORD_BYTES,
}
_dumps = json.dumps


def parse_plain_lines(lines: Sequence[bytes]) -> tuple[RecordBatch, list[int]]:
    """The records of the lines whose reading is plain, in order, and the positions (in
    ``lines``) of the others, left to :func:`parse_record`; one native call."""
    return parse_json_lines(lines, **_LIMITS)


def parse_lines(lines: Sequence[bytes]) -> tuple[RecordBatch, list[tuple[int, ValueError]]]:
    """The records of ``lines`` in line order, and the malformed lines as ``(position in
    lines, the error parse_record raised)``; blank lines give nothing. Plain lines are
    read natively in one call; the others, one at a time, by the reference."""
    plain, others = parse_plain_lines(lines)
    if not others:
        return plain, []
    pieces: list[RecordBatch] = []
    errors: list[tuple[int, ValueError]] = []
    taken = after = 0  # plain records used; the line after the previous other one
    for at in others:
        run = at - after
        pieces.append(plain.slice(taken, taken + run))
        taken += run
        try:
            record = _reference(lines[at])  # the native reader declined it already
        except ValueError as exc:  # UnicodeDecodeError included
            errors.append((at, exc))
        else:
            if record is not None:
                pieces.append(RecordBatch([record]))
        after = at + 1
    pieces.append(plain.slice(taken, len(plain)))
    return RecordBatch.concat(pieces), errors


def parse_line(text: str) -> LineRecord:
    """A JSON line as ``(key, value, event time ms)``; ValueError says what is wrong."""
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, got {type(body).__name__}")
    if "event_time_ms" in body and "ts" in body:
        raise ValueError("two event times: give 'event_time_ms' (or its older name 'ts'), once")
    time_field = "ts" if "ts" in body else "event_time_ms"
    missing = [field for field in ("key", "value", time_field) if field not in body]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    ts = body[time_field]
    if not isinstance(ts, int) or isinstance(ts, bool):
        raise ValueError(f"{time_field!r} must be integer milliseconds, got {ts!r}")
    problem = event_time_problem(ts)
    if problem is not None:
        raise ValueError(f"{time_field!r}: {problem}")
    key, value = _as_bytes(body["key"]), _as_bytes(body["value"])
    if len(key) + len(value) > MAX_LINE_RECORD_BYTES:
        raise ValueError(
            f"key + value are {len(key) + len(value)} bytes; the limit is {MAX_LINE_RECORD_BYTES}"
        )
    return key, value, ts


def _as_bytes(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if type(value) is int:  # what json.dumps writes for an int, without its encoder
        return b"%d" % value
    return _dumps(value).encode()


def parse_record(raw: bytes) -> LineRecord | None:
    """:func:`parse_line` of ``raw`` (one line, its newline optional) decoded as UTF-8;
    None for a blank line. Raises ``UnicodeDecodeError`` for a line that is not UTF-8 and
    ValueError, worded as :func:`parse_line` words it, for any other malformed line."""
    plain, _ = parse_json_lines((raw,), **_LIMITS)
    if plain:
        [record] = plain.records()
        return record
    return _reference(raw)


def _reference(raw: bytes) -> LineRecord | None:
    """The reference reading of a line the native reader does not take: None if blank."""
    if not raw.strip():
        return None
    return parse_line(raw.decode())
