from millrace.wire.v1 import record_pb2 as _record_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RejectReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REJECT_REASON_UNSPECIFIED: _ClassVar[RejectReason]
    STALE_SENDER_EPOCH: _ClassVar[RejectReason]
    NOT_OWNER: _ClassVar[RejectReason]
    UNKNOWN_STREAM: _ClassVar[RejectReason]
    MALFORMED_RECORD: _ClassVar[RejectReason]
    WRONG_INTERVAL: _ClassVar[RejectReason]
    OVERLOADED: _ClassVar[RejectReason]
    UNKNOWN_SENDER_EPOCH: _ClassVar[RejectReason]
REJECT_REASON_UNSPECIFIED: RejectReason
STALE_SENDER_EPOCH: RejectReason
NOT_OWNER: RejectReason
UNKNOWN_STREAM: RejectReason
MALFORMED_RECORD: RejectReason
WRONG_INTERVAL: RejectReason
OVERLOADED: RejectReason
UNKNOWN_SENDER_EPOCH: RejectReason

class Sender(_message.Message):
    __slots__ = ("sender_id", "interval", "epoch", "progress")
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    sender_id: str
    interval: _record_pb2.KeyInterval
    epoch: int
    progress: SendProgress
    def __init__(self, sender_id: _Optional[str] = ..., interval: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., epoch: _Optional[int] = ..., progress: _Optional[_Union[SendProgress, _Mapping]] = ...) -> None: ...

class SendProgress(_message.Message):
    __slots__ = ("sequence", "floor", "first", "last", "retired")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    sequence: str
    floor: int
    first: int
    last: int
    retired: _record_pb2.KeyInterval
    def __init__(self, sequence: _Optional[str] = ..., floor: _Optional[int] = ..., first: _Optional[int] = ..., last: _Optional[int] = ..., retired: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ...) -> None: ...

class DeliveryBatch(_message.Message):
    __slots__ = ("batch_seq", "sender", "target", "target_epoch", "records")
    BATCH_SEQ_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TARGET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    batch_seq: int
    sender: Sender
    target: _record_pb2.KeyInterval
    target_epoch: int
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    def __init__(self, batch_seq: _Optional[int] = ..., sender: _Optional[_Union[Sender, _Mapping]] = ..., target: _Optional[_Union[_record_pb2.KeyInterval, _Mapping]] = ..., target_epoch: _Optional[int] = ..., records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ...) -> None: ...

class Rejection(_message.Message):
    __slots__ = ("record_id", "reason", "message")
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    record_id: bytes
    reason: RejectReason
    message: str
    def __init__(self, record_id: _Optional[bytes] = ..., reason: _Optional[_Union[RejectReason, str]] = ..., message: _Optional[str] = ...) -> None: ...

class DeliveryAck(_message.Message):
    __slots__ = ("batch_seq", "committed_ids", "duplicate_ids", "rejected", "receiver_epoch", "progress_noted")
    BATCH_SEQ_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_IDS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_IDS_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_NOTED_FIELD_NUMBER: _ClassVar[int]
    batch_seq: int
    committed_ids: _containers.RepeatedScalarFieldContainer[bytes]
    duplicate_ids: _containers.RepeatedScalarFieldContainer[bytes]
    rejected: _containers.RepeatedCompositeFieldContainer[Rejection]
    receiver_epoch: int
    progress_noted: bool
    def __init__(self, batch_seq: _Optional[int] = ..., committed_ids: _Optional[_Iterable[bytes]] = ..., duplicate_ids: _Optional[_Iterable[bytes]] = ..., rejected: _Optional[_Iterable[_Union[Rejection, _Mapping]]] = ..., receiver_epoch: _Optional[int] = ..., progress_noted: _Optional[bool] = ...) -> None: ...
