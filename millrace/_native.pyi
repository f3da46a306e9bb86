"""Stubs of the native data plane (``native/python``); see ``millrace.dataplane``."""

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar, final

__all__ = [
    "AckBook",
    "BloomBits",
    "BloomHasher",
    "BloomPositions",
    "LogBatch",
    "LogEntryError",
    "ProductionPlan",
    "RecordBatch",
    "StateCache",
    "TimerIndex",
    "UndecodableRequestError",
    "columns_shape",
    "decode_deliveries",
    "decode_ingest_request",
    "decode_commit",
    "encode_log_request",
    "fold_groups",
    "fold_window_states",
    "window_tags",
    "ingest_request",
    "ingest_response",
    "json_field_keys",
    "on_time_panes",
    "parse_json_lines",
    "scan_columns",
    "scan_log",
    "scan_requests",
    "state_key",
    "state_keys",
    "timer_fire_causes",
]

class UndecodableRequestError(ValueError): ...
class LogEntryError(ValueError): ...

_T = TypeVar("_T", bound=tuple[object, ...])

@final
class BloomHasher:
    def __new__(cls, slices: int, bits_per_slice: int, seed: int) -> Self: ...
    def positions(self, record_ids: Sequence[bytes]) -> BloomPositions: ...

@final
class BloomPositions:
    def __len__(self) -> int: ...
    def rows(self, start: int, stop: int) -> BloomPositions: ...
    def row(self, row: int) -> list[int]: ...

@final
class BloomBits:
    def __new__(cls, bits: int) -> Self: ...
    def maybe_rows(self, positions: BloomPositions) -> list[int]: ...
    def add(self, positions: BloomPositions) -> None: ...
    def ones(self) -> int: ...
    def to_bytes(self) -> bytes: ...

@final
class ProductionPlan:
    def __new__(
        cls,
        producer: str,
        consumers: Sequence[str],
        streams: Sequence[tuple[str, Sequence[tuple[int, int, bool, list[int]]]]],
        *,
        frame_bytes: int,
    ) -> Self: ...
    def frames(
        self,
        causes: Iterable[bytes],
        emitted: Iterable[Iterable[tuple[str, bytes, bytes, int]]],
        given: Sequence[int],
    ) -> list[tuple[int, int, bytes, list[bytes], int]]: ...

@final
class LogBatch:
    @staticmethod
    def concat(batches: Sequence[LogBatch]) -> LogBatch: ...
    def __len__(self) -> int: ...
    def head_within(self, budget: int) -> LogBatch: ...
    @property
    def first_offset(self) -> int | None: ...
    def log_records(self, record_type: type[_T], stream_tag: bytes) -> list[_T]: ...
    def keys(self) -> list[bytes]: ...
    def values(self) -> list[bytes]: ...
    def frames(
        self,
        consumer: str,
        count: int,
        intervals: Sequence[int] | None,
        start: int,
        *,
        stream_tag: bytes,
        producer: str,
        stream: str,
    ) -> list[tuple[int, bytes, list[int], list[bytes], int]]: ...

def fold_groups(
    keys: list[bytes],
    values: list[bytes],
    times: list[int],
    *,
    window: tuple[str, int] | tuple[str, int, int] | tuple[str, int, int, int],
    int_values: bool,
    field: str | None = None,
) -> (
    tuple[
        list[bytes],
        list[int],
        list[int],
        list[int],
        list[int],
        tuple[list[int], list[int], list[int]] | None,
    ]
    | None
): ...
def fold_window_states(
    raws: Sequence[bytes | None],
    counts: Sequence[int],
    starts: Sequence[int],
    columns: tuple[Sequence[int], Sequence[int], Sequence[int]] | None,
    *,
    parts: Sequence[str],
    combined: bool,
    early_count: int | None,
    size_ms: int,
    end_ms: int,
    passed_ms: int,
    max_ms: int,
) -> tuple[list[int], list[bytes], list[int], list[int], list[int]]: ...
def window_tags(starts: Sequence[int], *, size_ms: int, end_ms: int, prefix: str) -> list[str]: ...
def on_time_panes(
    raws: Sequence[bytes | None],
    keys: Sequence[bytes],
    windows: Sequence[str],
    *,
    parts: Sequence[str],
    names: Sequence[str],
    combined: bool,
    max_ms: int,
    after: str = "forget",
    row: Sequence[tuple[str, str]] | None = None,
) -> tuple[list[int], list[bytes], list[int], list[bytes], list[int], list[int]]: ...
def decode_commit(body: bytes) -> tuple[int, int, bytes, bytes, int]: ...
def scan_columns(
    data: bytes, *, position: int, expected: int, complete: bool
) -> tuple[
    tuple[bytes, bytes, bytes, bytes, bytes, bytes] | None,
    int,
    int,
    tuple[int, str, bool, int] | None,
]: ...
def scan_requests(
    data: bytes,
    *,
    position: int,
    expected: int,
    complete: bool,
    keep_records: bool = True,
) -> tuple[
    list[
        tuple[
            list[tuple[int, bytes, int, int, int, int]],
            tuple[int, int, bytes, bytes, int],
            int,
        ]
    ],
    int,
    int,
    tuple[int, str, bool, int] | None,
]: ...
def scan_log(
    data: bytes,
    *,
    position: int,
    expected: int,
    from_offset: int,
    stop_offset: int,
    max_records: int,
    complete: bool,
) -> tuple[LogBatch, int, int, bool]: ...

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

@final
class AckBook:
    def __new__(cls) -> Self: ...
    def send(
        self, first: int, start: int, count: int, frames: list[tuple[list[int], int | None]]
    ) -> None: ...
    def ack_keys(self, keys: list[bytes], consumer: bytes) -> list[bytes]: ...
    def first_pending(self) -> int | None: ...
    def oldest_ms(self) -> int | None: ...
    def __len__(self) -> int: ...

@final
class TimerIndex:
    def __new__(cls) -> Self: ...
    @staticmethod
    def load(entries: list[tuple[bytes, bytes]]) -> TimerIndex: ...
    def __len__(self) -> int: ...
    def time_of(self, domain: int, key: bytes, tag: str) -> int | None: ...
    def stage(self, changes: Mapping[Any, Any]) -> tuple[list[bytes], list[bytes], list[bytes]]: ...
    def apply(self, changes: Mapping[Any, Any]) -> None: ...
    def apply_staged(self) -> None: ...
    def earliest(self, domain: int) -> int | None: ...
    def due(
        self, domain: int, up_to_ms: int | None, limit: int | None
    ) -> list[tuple[bytes, str, int, bytes]]: ...

@final
class StateCache:
    def __new__(cls, capacity: int) -> Self: ...
    def lookup(self, keys: list[bytes]) -> tuple[list[bytes | None], list[int]]: ...
    def fill(
        self,
        keys: list[bytes],
        values: list[bytes | None],
        missing: list[int],
        read: list[bytes | None],
    ) -> None: ...
    def get(self, key: bytes) -> tuple[bool, bytes | None]: ...
    def put(self, key: bytes, value: bytes | None) -> None: ...
    def update(self, changes: Mapping[bytes, bytes | None]) -> None: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: bytes, /) -> bool: ...

def decode_deliveries(
    wires: list[bytes], *, interval: int, intervals: int
) -> tuple[
    list[bytes],
    list[str],
    list[bytes],
    list[bytes],
    list[int],
    list[str],
    tuple[bool, bool, int, int, int],
]: ...
def columns_shape(
    ids: Sequence[bytes],
    streams: Sequence[str],
    keys: Sequence[bytes],
    times: Sequence[int],
    *,
    interval: int,
    intervals: int,
) -> tuple[bool, bool, int, int, int]: ...
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
def json_field_keys(values: Sequence[bytes], field: str) -> list[bytes | None]: ...
def state_key(key: bytes, tag: str) -> bytes: ...
def state_keys(keys: list[bytes], tags: list[str]) -> list[bytes]: ...
def timer_fire_causes(
    computation: str, timers: Sequence[tuple[int, bytes, str, int, bytes]]
) -> list[bytes]: ...
