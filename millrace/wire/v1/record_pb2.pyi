from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Record(_message.Message):
    __slots__ = ("record_id", "key", "value", "event_time_ms", "producer", "stream")
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    record_id: bytes
    key: bytes
    value: bytes
    event_time_ms: int
    producer: str
    stream: str
    def __init__(self, record_id: _Optional[bytes] = ..., key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., event_time_ms: _Optional[int] = ..., producer: _Optional[str] = ..., stream: _Optional[str] = ...) -> None: ...

class KeyInterval(_message.Message):
    __slots__ = ("computation", "index", "count")
    COMPUTATION_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    computation: str
    index: int
    count: int
    def __init__(self, computation: _Optional[str] = ..., index: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...
