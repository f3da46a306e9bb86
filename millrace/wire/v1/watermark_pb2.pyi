from millrace.wire.v1 import record_pb2 as _record_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WatermarkReport(_message.Message):
    __slots__ = ("interval", "epoch", "oldest_work_ms", "reported_at_ms", "node_id", "sequence")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OLDEST_WORK_MS_FIELD_NUMBER: _ClassVar[int]
    REPORTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    interval: _record_pb2.KeyInterval
    epoch: int
    oldest_work_ms: int
    reported_at_ms: int
    node_id: str
    sequence: int
    def __init__(self, interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., epoch: _Optional[int] = ..., oldest_work_ms: _Optional[int] = ..., reported_at_ms: _Optional[int] = ..., node_id: _Optional[str] = ..., sequence: _Optional[int] = ...) -> None: ...

class ReportWatermarksRequest(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: _containers.RepeatedCompositeFieldContainer[WatermarkReport]
    def __init__(self, reports: _Optional[_Iterable[_Union[WatermarkReport, _Mapping]]] = ...) -> None: ...

class ReportWatermarksResponse(_message.Message):
    __slots__ = ("accepted", "ignored_stale")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    IGNORED_STALE_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    ignored_stale: _containers.RepeatedCompositeFieldContainer[_record_pb2.KeyInterval]
    def __init__(self, accepted: _Optional[int] = ..., ignored_stale: _Optional[_Iterable[_Union[_record_pb2.KeyInterval, _Mapping]]] = ...) -> None: ...

class WatchWatermarksRequest(_message.Message):
    __slots__ = ("computations",)
    COMPUTATIONS_FIELD_NUMBER: _ClassVar[int]
    computations: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, computations: _Optional[_Iterable[str]] = ...) -> None: ...

class WatermarkUpdate(_message.Message):
    __slots__ = ("computation", "low_watermark_ms", "computed_at_ms")
    COMPUTATION_FIELD_NUMBER: _ClassVar[int]
    LOW_WATERMARK_MS_FIELD_NUMBER: _ClassVar[int]
    COMPUTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    computation: str
    low_watermark_ms: int
    computed_at_ms: int
    def __init__(self, computation: _Optional[str] = ..., low_watermark_ms: _Optional[int] = ..., computed_at_ms: _Optional[int] = ...) -> None: ...

class WatermarkUpdates(_message.Message):
    __slots__ = ("updates",)
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[WatermarkUpdate]
    def __init__(self, updates: _Optional[_Iterable[_Union[WatermarkUpdate, _Mapping]]] = ...) -> None: ...
