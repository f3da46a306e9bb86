from millrace.wire.v1 import record_pb2 as _record_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class IntervalStatus(_message.Message):
    __slots__ = ("interval", "epoch", "outbox_size", "pending_timers", "input_low_watermark_ms", "records_committed", "fenced_reason")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_SIZE_FIELD_NUMBER: _ClassVar[int]
    PENDING_TIMERS_FIELD_NUMBER: _ClassVar[int]
    INPUT_LOW_WATERMARK_MS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    FENCED_REASON_FIELD_NUMBER: _ClassVar[int]
    interval: _record_pb2.KeyInterval
    epoch: int
    outbox_size: int
    pending_timers: int
    input_low_watermark_ms: int
    records_committed: int
    fenced_reason: str
    def __init__(self, interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., epoch: _Optional[int] = ..., outbox_size: _Optional[int] = ..., pending_timers: _Optional[int] = ..., input_low_watermark_ms: _Optional[int] = ..., records_committed: _Optional[int] = ..., fenced_reason: _Optional[str] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("node_id", "role", "version", "intervals", "started_at_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    role: str
    version: str
    intervals: _containers.RepeatedCompositeFieldContainer[IntervalStatus]
    started_at_ms: int
    def __init__(self, node_id: _Optional[str] = ..., role: _Optional[str] = ..., version: _Optional[str] = ..., intervals: _Optional[_Iterable[_Union[IntervalStatus, _Mapping]]] = ..., started_at_ms: _Optional[int] = ...) -> None: ...

class GetStateRequest(_message.Message):
    __slots__ = ("computation", "key")
    COMPUTATION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    computation: str
    key: bytes
    def __init__(self, computation: _Optional[str] = ..., key: _Optional[bytes] = ...) -> None: ...

class StateEntry(_message.Message):
    __slots__ = ("tag", "value")
    TAG_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    tag: str
    value: bytes
    def __init__(self, tag: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class GetStateResponse(_message.Message):
    __slots__ = ("found", "entries", "interval")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    found: bool
    entries: _containers.RepeatedCompositeFieldContainer[StateEntry]
    interval: _record_pb2.KeyInterval
    def __init__(self, found: _Optional[bool] = ..., entries: _Optional[_Iterable[_Union[StateEntry, _Mapping]]] = ..., interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ("record", "computation", "error", "attempts", "failed_at_ms")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    COMPUTATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    FAILED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    record: _record_pb2.Record
    computation: str
    error: str
    attempts: int
    failed_at_ms: int
    def __init__(self, record: _Optional[_Union[_record_pb2.Record, _Mapping]] = ..., computation: _Optional[str] = ..., error: _Optional[str] = ..., attempts: _Optional[int] = ..., failed_at_ms: _Optional[int] = ...) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = ("computation", "limit", "after_record_id")
    COMPUTATION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    computation: str
    limit: int
    after_record_id: bytes
    def __init__(self, computation: _Optional[str] = ..., limit: _Optional[int] = ..., after_record_id: _Optional[bytes] = ...) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ("dead_letters",)
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    dead_letters: _containers.RepeatedCompositeFieldContainer[DeadLetter]
    def __init__(self, dead_letters: _Optional[_Iterable[_Union[DeadLetter, _Mapping]]] = ...) -> None: ...

class HandOverRequest(_message.Message):
    __slots__ = ("interval", "to_node_id", "before_fence", "have")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    TO_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FENCE_FIELD_NUMBER: _ClassVar[int]
    HAVE_FIELD_NUMBER: _ClassVar[int]
    interval: _record_pb2.KeyInterval
    to_node_id: str
    before_fence: bool
    have: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., to_node_id: _Optional[str] = ..., before_fence: _Optional[bool] = ..., have: _Optional[_Iterable[str]] = ...) -> None: ...

class StoreFilePiece(_message.Message):
    __slots__ = ("name", "data", "done", "epoch", "files")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    name: str
    data: bytes
    done: bool
    epoch: int
    files: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., data: _Optional[bytes] = ..., done: _Optional[bool] = ..., epoch: _Optional[int] = ..., files: _Optional[_Iterable[str]] = ...) -> None: ...
