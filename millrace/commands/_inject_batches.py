"""``millrace inject``'s batches: the input's lines parsed into requests, and the
idempotency key each batch derives from its records and first line number."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

from millrace.dataplane import RecordBatch
from millrace.injector.json_lines import MAX_LINE_RECORD_BYTES as MAX_RECORD_BYTES
from millrace.injector.json_lines import parse_plain_lines, parse_record

MAX_BATCH_BYTES = 16 << 20
"""A batch also ends at this many key + value bytes (the injector accepts 64 MiB messages)."""


@dataclass(frozen=True, slots=True)
class Malformed:
    """A skipped input line and why."""

    line: int
    reason: str


@dataclass(slots=True, init=False)
class Batch:
    """Consecutive records of the input, sent as one request."""

    first_line: int
    size_bytes: int
    _pieces: list[RecordBatch]
    _count: int

    def __init__(
        self,
        first_line: int,
        records: RecordBatch | Iterable[tuple[bytes, bytes, int]] = (),
    ) -> None:
        batch = records if isinstance(records, RecordBatch) else RecordBatch(records)
        self.first_line = first_line
        self.size_bytes = batch.payload_bytes()
        self._pieces = [batch]
        self._count = len(batch)

    def __len__(self) -> int:
        return self._count

    def add(self, records: RecordBatch) -> None:
        """Append ``records`` (the next lines' records)."""
        self._pieces.append(records)
        self._count += len(records)
        self.size_bytes += records.payload_bytes()

    @property
    def records(self) -> RecordBatch:
        """The batch's records, in input order."""
        if len(self._pieces) > 1:
            self._pieces = [RecordBatch.concat(self._pieces)]
        return self._pieces[0]

    def idempotency_key(self, source_name: str) -> str:
        """``<source>:<sha256 of the records>:<first line>``: the same for the same input.

        The digest covers each record's ``>QQq`` (key length, value length, event time),
        key and value, in order (computed natively: :meth:`RecordBatch.sha256`).
        """
        return f"{source_name}:{self.records.sha256().hex()}:{self.first_line}"


def read_batches(
    lines: Iterable[bytes], batch_records: int, malformed: list[Malformed]
) -> Iterator[Batch]:
    """Parse numbered lines into batches; malformed ones are appended to ``malformed``.

    Boundaries depend only on the input and ``batch_records``: at most
    ``batch_records`` records and about :data:`MAX_BATCH_BYTES` per batch.
    Blank lines are skipped silently, as the file source does.

    Lines are taken as many at a time as the batch has room for and parsed in one
    native call; only a group with a line the native reader leaves to the reference
    (malformed, blank, or not plain), or one that reaches the byte limit, is gone
    through line by line (the same boundaries either way).
    """
    source = iter(lines)
    number = 1  # of the next line
    batch: Batch | None = None
    while group := list(islice(source, batch_records - (len(batch) if batch else 0))):
        records, others = parse_plain_lines(group)
        size = records.payload_bytes()
        if not others and (batch.size_bytes if batch else 0) + size < MAX_BATCH_BYTES:
            if batch is None:
                batch = Batch(number, records)
            else:
                batch.add(records)
            number += len(group)
            if len(batch) >= batch_records:
                yield batch
                batch = None
            continue
        for raw in group:
            full = _add_line(batch, raw, number, malformed)
            if full is not None:
                batch = full
                if len(batch) >= batch_records or batch.size_bytes >= MAX_BATCH_BYTES:
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
    one = RecordBatch([record])
    if batch is None:
        return Batch(number, one)
    batch.add(one)
    return batch
