"""The lines of a JSON-lines sink file (``millrace sink``, a backfill's ``--jsonl``):
one record each, in two versions. A leaf below every layer: ``millrace view`` prints a
record as a line without loading the sinks.

Version 2, written now::

    {"v":2,"record_id":"<hex>","key":"alice","value":{"page":"/"},"event_time_ms":1700000000000,"producer":"..."}

- ``value``: the value's own bytes, unchanged, when they are one JSON document on one
  line (the usual case: a ``dataflow`` pane, a JSON record): a reader of the line gets
  it parsed. Any other value is ``value_text`` (UTF-8 text) or ``value_base64``.
- ``key``: UTF-8 text, or ``{"base64": ...}``; ``event_time_ms``: the record's event
  time (the API's name); ``seq``: a backfill's place in production order, when given.

Version 1, written before (no ``v``): ``{"record_id","key","value","ts","producer"}``,
the value always text (JSON inside a JSON string) or ``{"base64": ...}``.

Both are read, line by line: a file may hold both (a sink upgraded mid-file). Reading a
line back gives the record's bytes exactly as received, whichever version wrote it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import msgspec

from millrace.wire.v1 import record_pb2

VERSION = 2
"""The version :func:`sink_line` writes."""


class _Line(msgspec.Struct):
    """What a line holds, the value as its raw JSON (either version)."""

    record_id: str
    key: str | dict[str, str]
    value: msgspec.Raw = msgspec.Raw(b"")
    value_text: str | None = None
    value_base64: str | None = None
    event_time_ms: int | None = None
    ts: int | None = None
    producer: str = ""
    v: int = 1


_decode = msgspec.json.Decoder(_Line).decode
_check_json = msgspec.json.Decoder().decode
_skip_json = msgspec.json.Decoder(msgspec.Raw).decode
"""Checks one JSON document as the reader's ``Raw`` field takes it, without building
its values (a third of a full decode); it does not check UTF-8 inside strings."""
_json = msgspec.json.encode
"""A string (or ``{"base64": ...}``) as JSON: a twentieth of ``json.dumps``'s time."""


@dataclass(frozen=True, slots=True)
class SinkLine:
    """One record line, read back: the record as the sink received it."""

    record_id: bytes
    key: bytes
    value: bytes
    event_time_ms: int
    producer: str

    def record(self) -> record_pb2.Record:
        """The record as the sink received it."""
        return record_pb2.Record(
            record_id=self.record_id,
            key=self.key,
            value=self.value,
            event_time_ms=self.event_time_ms,
            producer=self.producer,
        )


def sink_line(record: record_pb2.Record, *, seq: int | None = None) -> bytes:
    """One line of a JSON-lines sink file: what the sink writes for ``record`` (a
    backfill's output also gives its place in production order, ``seq``)."""
    value = record.value
    parts = [
        b'{"v":2,"record_id":"', record.record_id.hex().encode(),
        b'","key":', _json(_text(record.key)),
    ]  # fmt: skip
    if _one_line_document(value):
        parts += [b',"value":', value]
    else:
        try:
            parts += [b',"value_text":', _json(value.decode())]
        except UnicodeDecodeError:
            parts += [b',"value_base64":', _json(base64.b64encode(value).decode())]
    parts += [
        b',"event_time_ms":', str(record.event_time_ms).encode(),
        b',"producer":', _json(record.producer),
    ]  # fmt: skip
    if seq is not None:
        parts += [b',"seq":', str(seq).encode()]
    parts.append(b"}\n")
    return b"".join(parts)


def parse_line(line: bytes) -> SinkLine | None:
    """A record line read back (either version), or None when the line is not one."""
    try:
        body = _decode(line)
        record_id = bytes.fromhex(body.record_id)
        key = _bytes(body.key)
        if body.v >= VERSION:
            value = _value_v2(body)
            event_time_ms = body.event_time_ms
        else:
            value = _bytes(_check_json(body.value))
            event_time_ms = body.ts
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError, KeyError):
        return None
    if value is None or event_time_ms is None:
        return None
    return SinkLine(record_id, key, value, event_time_ms, body.producer)


def _value_v2(body: _Line) -> bytes | None:
    if body.value_text is not None:
        return body.value_text.encode()
    if body.value_base64 is not None:
        return base64.b64decode(body.value_base64, validate=True)
    raw = bytes(body.value)
    return raw or None


def _one_line_document(value: bytes) -> bool:
    """True when ``value`` is one JSON document, on one line, with nothing around it:
    written unchanged, it is read back byte for byte."""
    if not value or value[:1].isspace() or value[-1:].isspace() or b"\n" in value:
        return False
    if b"\r" in value:
        return False
    try:
        _skip_json(value)
        if not value.isascii():
            value.decode()  # a reader's json.loads decodes the whole line first
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False
    return True


def _text(data: bytes) -> Any:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def _bytes(text: Any) -> bytes:
    if isinstance(text, dict):
        return base64.b64decode(text["base64"], validate=True)
    if isinstance(text, str):
        return text.encode()
    raise TypeError(f"not text: {text!r}")


__all__ = ["VERSION", "SinkLine", "parse_line", "sink_line"]
