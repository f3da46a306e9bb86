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
    __slots__ = ("leases", "version", "moves", "draining", "layout")
    LEASES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    MOVES_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[IntervalLease]
    version: int
    moves: _containers.RepeatedCompositeFieldContainer[IntervalMove]
    draining: _containers.RepeatedScalarFieldContainer[str]
    layout: _containers.RepeatedCompositeFieldContainer[_record_pb2.KeyInterval]
    def __init__(self, leases: _Optional[_Iterable[_Union[IntervalLease, _Mapping]]] = ..., version: _Optional[int] = ..., moves: _Optional[_Iterable[_Union[IntervalMove, _Mapping]]] = ..., draining: _Optional[_Iterable[str]] = ..., layout: _Optional[_Iterable[_Union[_record_pb2.KeyInterval, _Mapping]]] = ...) -> None: ...

class SplitIntervalRequest(_message.Message):
    __slots__ = ("interval",)
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    interval: _record_pb2.KeyInterval
    def __init__(self, interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ...) -> None: ...

class SplitIntervalResponse(_message.Message):
    __slots__ = ("halves",)
    HALVES_FIELD_NUMBER: _ClassVar[int]
    halves: _containers.RepeatedCompositeFieldContainer[_record_pb2.KeyInterval]
    def __init__(self, halves: _Optional[_Iterable[_Union[_record_pb2.KeyInterval, _Mapping]]] = ...) -> None: ...

class MergeIntervalRequest(_message.Message):
    __slots__ = ("interval",)
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    interval: _record_pb2.KeyInterval
    def __init__(self, interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ...) -> None: ...

class MergeIntervalResponse(_message.Message):
    __slots__ = ("whole",)
    WHOLE_FIELD_NUMBER: _ClassVar[int]
    whole: _record_pb2.KeyInterval
    def __init__(self, whole: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ...) -> None: ...

class IntervalLoad(_message.Message):
    __slots__ = ("index", "epoch", "records_committed", "cpu_seconds")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECORDS_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    index: int
    epoch: int
    records_committed: int
    cpu_seconds: float
    def __init__(self, index: _Optional[int] = ..., epoch: _Optional[int] = ..., records_committed: _Optional[int] = ..., cpu_seconds: _Optional[float] = ...) -> None: ...

class ReportLoadRequest(_message.Message):
    __slots__ = ("node_id", "computation", "intervals")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    COMPUTATION_FIELD_NUMBER: _ClassVar[int]
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    computation: str
    intervals: _containers.RepeatedCompositeFieldContainer[IntervalLoad]
    def __init__(self, node_id: _Optional[str] = ..., computation: _Optional[str] = ..., intervals: _Optional[_Iterable[_Union[IntervalLoad, _Mapping]]] = ...) -> None: ...

class ReportLoadResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ("node_id", "resume")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    resume: bool
    def __init__(self, node_id: _Optional[str] = ..., resume: _Optional[bool] = ...) -> None: ...

class DrainNodeResponse(_message.Message):
    __slots__ = ("moves",)
    MOVES_FIELD_NUMBER: _ClassVar[int]
    moves: _containers.RepeatedCompositeFieldContainer[IntervalMove]
    def __init__(self, moves: _Optional[_Iterable[_Union[IntervalMove, _Mapping]]] = ...) -> None: ...

class GetLayoutRequest(_message.Message):
    __slots__ = ("computations",)
    COMPUTATIONS_FIELD_NUMBER: _ClassVar[int]
    computations: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, computations: _Optional[_Iterable[str]] = ...) -> None: ...

class IntervalState(_message.Message):
    __slots__ = ("interval", "node_id", "epoch", "records_per_second", "cpu", "moving_to")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECORDS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    MOVING_TO_FIELD_NUMBER: _ClassVar[int]
    interval: _record_pb2.KeyInterval
    node_id: str
    epoch: int
    records_per_second: float
    cpu: float
    moving_to: str
    def __init__(self, interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., node_id: _Optional[str] = ..., epoch: _Optional[int] = ..., records_per_second: _Optional[float] = ..., cpu: _Optional[float] = ..., moving_to: _Optional[str] = ...) -> None: ...

class NodeState(_message.Message):
    __slots__ = ("node_id", "computation", "live", "draining")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    COMPUTATION_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    computation: str
    live: bool
    draining: bool
    def __init__(self, node_id: _Optional[str] = ..., computation: _Optional[str] = ..., live: _Optional[bool] = ..., draining: _Optional[bool] = ...) -> None: ...

class LayoutChange(_message.Message):
    __slots__ = ("at_ms", "interval", "from_node_id", "to_node_id", "reason")
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TO_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    interval: _record_pb2.KeyInterval
    from_node_id: str
    to_node_id: str
    reason: str
    def __init__(self, at_ms: _Optional[int] = ..., interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., from_node_id: _Optional[str] = ..., to_node_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Layout(_message.Message):
    __slots__ = ("intervals", "nodes", "changes", "rebalancing")
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    REBALANCING_FIELD_NUMBER: _ClassVar[int]
    intervals: _containers.RepeatedCompositeFieldContainer[IntervalState]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeState]
    changes: _containers.RepeatedCompositeFieldContainer[LayoutChange]
    rebalancing: bool
    def __init__(self, intervals: _Optional[_Iterable[_Union[IntervalState, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[NodeState, _Mapping]]] = ..., changes: _Optional[_Iterable[_Union[LayoutChange, _Mapping]]] = ..., rebalancing: _Optional[bool] = ...) -> None: ...
