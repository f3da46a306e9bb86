from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IngestRecord(_message.Message):
    __slots__ = ("key", "value", "event_time_ms")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    event_time_ms: int
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., event_time_ms: _Optional[int] = ...) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ("stream", "idempotency_key", "records")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    stream: str
    idempotency_key: str
    records: _containers.RepeatedCompositeFieldContainer[IngestRecord]
    def __init__(self, stream: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., records: _Optional[_Iterable[_Union[IngestRecord, _Mapping]]] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("record_ids", "first_offset", "replayed")
    RECORD_IDS_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    record_ids: _containers.RepeatedScalarFieldContainer[bytes]
    first_offset: int
    replayed: bool
    def __init__(self, record_ids: _Optional[_Iterable[bytes]] = ..., first_offset: _Optional[int] = ..., replayed: _Optional[bool] = ...) -> None: ...

class FinishStreamRequest(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: str
    def __init__(self, stream: _Optional[str] = ...) -> None: ...

class FinishStreamResponse(_message.Message):
    __slots__ = ("end_offset", "already_finished")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ALREADY_FINISHED_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    already_finished: bool
    def __init__(self, end_offset: _Optional[int] = ..., already_finished: _Optional[bool] = ...) -> None: ...
