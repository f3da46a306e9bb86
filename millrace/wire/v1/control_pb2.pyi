from millrace.wire.v1 import record_pb2 as _record_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IntervalLease(_message.Message):
    __slots__ = ("interval", "epoch", "node_id", "address")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    interval: _record_pb2.KeyInterval
    epoch: int
    node_id: str
    address: str
    def __init__(self, interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., epoch: _Optional[int] = ..., node_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class RegisterNodeRequest(_message.Message):
    __slots__ = ("node_id", "computation", "address", "interval_indexes", "stored_epochs")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    COMPUTATION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_INDEXES_FIELD_NUMBER: _ClassVar[int]
    STORED_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    computation: str
    address: str
    interval_indexes: _containers.RepeatedScalarFieldContainer[int]
    stored_epochs: _containers.RepeatedCompositeFieldContainer[StoredEpoch]
    def __init__(self, node_id: _Optional[str] = ..., computation: _Optional[str] = ..., address: _Optional[str] = ..., interval_indexes: _Optional[_Iterable[int]] = ..., stored_epochs: _Optional[_Iterable[_Union[StoredEpoch, _Mapping]]] = ...) -> None: ...

class StoredEpoch(_message.Message):
    __slots__ = ("index", "epoch")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    index: int
    epoch: int
    def __init__(self, index: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class RegisterNodeResponse(_message.Message):
    __slots__ = ("leases", "moved_away")
    LEASES_FIELD_NUMBER: _ClassVar[int]
    MOVED_AWAY_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[IntervalLease]
    moved_away: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, leases: _Optional[_Iterable[_Union[IntervalLease, _Mapping]]] = ..., moved_away: _Optional[_Iterable[int]] = ...) -> None: ...

class IntervalMove(_message.Message):
    __slots__ = ("interval", "to_node_id")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    TO_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    interval: _record_pb2.KeyInterval
    to_node_id: str
    def __init__(self, interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., to_node_id: _Optional[str] = ...) -> None: ...

class MoveIntervalRequest(_message.Message):
    __slots__ = ("interval", "to_node_id")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    TO_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    interval: _record_pb2.KeyInterval
    to_node_id: str
    def __init__(self, interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., to_node_id: _Optional[str] = ...) -> None: ...

class MoveIntervalResponse(_message.Message):
    __slots__ = ("move", "current")
    MOVE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    move: IntervalMove
    current: IntervalLease
    def __init__(self, move: _Optional[_Union[IntervalMove, _Mapping]] = ..., current: _Optional[_Union[IntervalLease, _Mapping]] = ...) -> None: ...

class GetAssignmentRequest(_message.Message):
    __slots__ = ("computations",)
    COMPUTATIONS_FIELD_NUMBER: _ClassVar[int]
    computations: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, computations: _Optional[_Iterable[str]] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("leases", "version", "moves")
    LEASES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MOVES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[IntervalLease]
    version: int
    moves: _containers.RepeatedCompositeFieldContainer[IntervalMove]
    def __init__(self, leases: _Optional[_Iterable[_Union[IntervalLease, _Mapping]]] = ..., version: _Optional[int] = ..., moves: _Optional[_Iterable[_Union[IntervalMove, _Mapping]]] = ...) -> None: ...
