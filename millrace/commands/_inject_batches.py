"""``millrace inject``'s batches: the input's lines parsed into requests, and the
idempotency key each batch derives from its records and first line number."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, islice
from operator import itemgetter

from injector.ingest_service import MAX_RECORD_BYTES
from injector.json_lines import parse_record

MAX_BATCH_BYTES = 16 << 20
"""A batch also ends at this many key + value bytes (the injector accepts 64 MiB messages)."""

Record = tuple[bytes, bytes, int]
_LENGTHS = struct.Struct(">QQq")
_KEY, _VALUE = itemgetter(0), itemgetter(1)


@dataclass(frozen=True, slots=True)
class Malformed:
    """A skipped input line and why."""

    line: int
    reason: str


@dataclass(slots=True)
class Batch:
    """Consecutive records of the input, sent as one request."""

    first_line: int
    records: list[Record] = field(default_factory=list)
    size_bytes: int = 0

    def idempotency_key(self, source_name: str) -> str:
        """``<source>:<sha256 of the records>:<first line>``: the same for the same input.

        The digest covers each record's ``>QQq`` (key length, value length, event time),
        key and value, in order.
        """
        if not self.records:
            return f"{source_name}:{hashlib.sha256().hexdigest()}:{self.first_line}"
        # Column by column through C-level maps: no Python step per record.
        keys, values, times = zip(*self.records, strict=True)
        heads = map(_LENGTHS.pack, map(len, keys), map(len, values), times)
        data = b"".join(chain.from_iterable(zip(heads, keys, values, strict=True)))
        return f"{source_name}:{hashlib.sha256(data).hexdigest()}:{self.first_line}"


def read_batches(
    lines: Iterable[bytes], batch_records: int, malformed: list[Malformed]
) -> Iterator[Batch]:
    """Parse numbered lines into batches; malformed ones are appended to ``malformed``.

    Boundaries depend only on the input and ``batch_records``: at most
    ``batch_records`` records and about :data:`MAX_BATCH_BYTES` per batch.
    Blank lines are skipped silently, as the file source does.

    Lines are taken as many at a time as the batch has room for and parsed in one
    go; only a group with a malformed line, or one that reaches the byte limit, is
    gone through line by line (the same boundaries either way).
    """
    source = iter(lines)
    number = 1  # of the next line
    batch: Batch | None = None
    while group := list(islice(source, batch_records - (len(batch.records) if batch else 0))):
        try:
            parsed = list(map(parse_record, group))
        except ValueError:
            parsed = None
        if parsed is not None:
            records = list(filter(None, parsed))  # None: a blank line
            size = sum(map(len, map(_KEY, records))) + sum(map(len, map(_VALUE, records)))
            if records and (batch.size_bytes if batch else 0) + size < MAX_BATCH_BYTES:
                if batch is None:
                    batch = Batch(first_line=number + parsed.index(records[0]))
                batch.records += records
                batch.size_bytes += size
                number += len(group)
                if len(batch.records) >= batch_records:
                    yield batch
                    batch = None
                continue
        for raw in group:
            full = _add_line(batch, raw, number, malformed)
            if full is not None:
                batch = full
                if len(batch.records) >= batch_records or batch.size_bytes >= MAX_BATCH_BYTES:
                    yield batch
                    batch = None
            number += 1
    if batch is not None:
        yield batch


def _add_line(
    batch: Batch | None, raw: bytes, number: int, malformed: list[Malformed]
) -> Batch | None:
    """Add line ``number`` to ``batch`` (a new batch if None); the batch, or None if the
    line was blank or malformed (then in ``malformed``)."""
    try:
        record = parse_record(raw)
    except UnicodeDecodeError as exc:
        malformed.append(Malformed(number, f"not UTF-8: {exc.reason} at byte {exc.start}"))
        return None
    except ValueError as exc:
        malformed.append(Malformed(number, str(exc)))
        return None
    if record is None:  # a blank line
        return None
    key, value, _ = record
    size = len(key) + len(value)
    if size > MAX_RECORD_BYTES:
        reason = f"record is {size} bytes; the injector takes at most {MAX_RECORD_BYTES}"
        malformed.append(Malformed(number, reason))
        return None
    if batch is None:
        batch = Batch(first_line=number)
    batch.records.append(record)
    batch.size_bytes += size
    return batch
