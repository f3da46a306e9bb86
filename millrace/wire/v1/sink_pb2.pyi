from millrace.wire.v1 import record_pb2 as _record_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubscribeRequest(_message.Message):
    __slots__ = ("stream", "from_position", "max_batch")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    FROM_POSITION_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    stream: str
    from_position: int
    max_batch: int
    def __init__(self, stream: _Optional[str] = ..., from_position: _Optional[int] = ..., max_batch: _Optional[int] = ...) -> None: ...

class SinkRecord(_message.Message):
    __slots__ = ("position", "record")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    position: int
    record: _record_pb2.Record
    def __init__(self, position: _Optional[int] = ..., record: _Optional[_Union[_record_pb2.Record, _Mapping]] = ...) -> None: ...

class SubscribeBatch(_message.Message):
    __slots__ = ("records", "next_position")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_POSITION_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[SinkRecord]
    next_position: int
    def __init__(self, records: _Optional[_Iterable[_Union[SinkRecord, _Mapping]]] = ..., next_position: _Optional[int] = ...) -> None: ...

class ViewGetRequest(_message.Message):
    __slots__ = ("stream", "key")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    stream: str
    key: bytes
    def __init__(self, stream: _Optional[str] = ..., key: _Optional[bytes] = ...) -> None: ...

class ViewGetResponse(_message.Message):
    __slots__ = ("found", "latest")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    LATEST_FIELD_NUMBER: _ClassVar[int]
    found: bool
    latest: SinkRecord
    def __init__(self, found: _Optional[bool] = ..., latest: _Optional[_Union[SinkRecord, _Mapping]] = ...) -> None: ...
