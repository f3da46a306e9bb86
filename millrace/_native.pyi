"""Stubs of the native data plane (``native/python``); see ``millrace.dataplane``."""

from collections.abc import Iterable, Iterator, Sequence
from typing import Self, final

__all__ = [
    "RecordBatch",
    "UndecodableRequestError",
    "decode_ingest_request",
    "encode_log_request",
    "ingest_request",
    "ingest_response",
    "parse_json_lines",
]

class UndecodableRequestError(ValueError): ...

@final
class RecordBatch:
    def __new__(cls, records: Iterable[tuple[bytes, bytes, int]] | None = None) -> Self: ...
    @staticmethod
    def concat(batches: Sequence[RecordBatch]) -> RecordBatch: ...
    def __len__(self) -> int: ...
    def __bool__(self) -> bool: ...
    def __iter__(self) -> Iterator[tuple[bytes, bytes, int]]: ...
    def records(self) -> list[tuple[bytes, bytes, int]]: ...
    def payload_bytes(self) -> int: ...
    def sha256(self) -> bytes: ...
    def time_range(self) -> tuple[int, int]: ...
    def slice(self, start: int, stop: int) -> RecordBatch: ...

def decode_ingest_request(
    raw: bytes,
    *,
    max_records: int,
    max_record_bytes: int,
    max_idempotency_key_bytes: int,
    min_event_time_ms: int,
    max_event_time_ms: int,
) -> tuple[str, str, RecordBatch, tuple[str] | tuple[str, int] | tuple[str, int, int] | None]: ...
def ingest_response(tag: bytes, first_offset: int, count: int, replayed: bool) -> bytes: ...
def ingest_request(stream: str, idempotency_key: str, batch: RecordBatch) -> bytes: ...
def encode_log_request(
    batch: RecordBatch,
    idempotency_key: bytes,
    source: bytes,
    *,
    offset: int,
    ingest_ms: int,
    position: int,
    next_index: int,
    index_every: int,
) -> tuple[bytes, list[tuple[int, int]], int, int, int, int]: ...
def parse_json_lines(
    lines: Sequence[bytes],
    *,
    min_event_time_ms: int,
    max_event_time_ms: int,
    max_record_bytes: int,
) -> tuple[RecordBatch, list[int]]: ...
