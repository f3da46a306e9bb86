"""The v1 contract keeps its shape: services, streaming kinds, field numbers and types."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor

from tests.wire_contract._common import (
    GENERATED_DIR,
    PROTO_DIR,
    PROTO_NAMES,
    pb2_grpc_module,
    pb2_module,
)

# service -> rpc -> (request type, response type, client_streaming, server_streaming)
EXPECTED_SERVICES: dict[str, dict[str, dict[str, tuple[str, str, bool, bool]]]] = {
    "admin": {
        "Admin": {
            "Status": ("StatusRequest", "StatusResponse", False, False),
            "GetState": ("GetStateRequest", "GetStateResponse", False, False),
            "ListDeadLetters": ("ListDeadLettersRequest", "ListDeadLettersResponse", False, False),
            "HandOver": ("HandOverRequest", "StoreFilePiece", False, True),
        },
    },
    "control": {
        "Control": {
            "RegisterNode": ("RegisterNodeRequest", "RegisterNodeResponse", False, False),
            "GetAssignment": ("GetAssignmentRequest", "Assignment", False, False),
            "WatchAssignment": ("GetAssignmentRequest", "Assignment", False, True),
            "MoveInterval": ("MoveIntervalRequest", "MoveIntervalResponse", False, False),
            "ReportLoad": ("ReportLoadRequest", "ReportLoadResponse", False, False),
            "DrainNode": ("DrainNodeRequest", "DrainNodeResponse", False, False),
            "GetLayout": ("GetLayoutRequest", "Layout", False, False),
            "SplitInterval": ("SplitIntervalRequest", "SplitIntervalResponse", False, False),
            "MergeInterval": ("MergeIntervalRequest", "MergeIntervalResponse", False, False),
        },
    },
    "delivery": {
        "Delivery": {
            "Deliver": ("DeliveryBatch", "DeliveryAck", True, True),
        },
    },
    "ingest": {
        "Ingest": {
            "Ingest": ("IngestRequest", "IngestResponse", False, False),
            "IngestStream": ("IngestRequest", "IngestResponse", True, True),
            "FinishStream": ("FinishStreamRequest", "FinishStreamResponse", False, False),
        },
    },
    "record": {},
    "sink": {
        "Subscribe": {
            "Subscribe": ("SubscribeRequest", "SubscribeBatch", False, True),
        },
        "View": {
            "Get": ("ViewGetRequest", "ViewGetResponse", False, False),
        },
    },
    "watermark": {
        "WatermarkAuthority": {
            "ReportWatermarks": (
                "ReportWatermarksRequest",
                "ReportWatermarksResponse",
                False,
                False,
            ),
            "WatchWatermarks": ("WatchWatermarksRequest", "WatermarkUpdates", False, True),
        },
    },
}

# Every message's fields, written as in the .proto. Field numbers and types are
# the wire contract: this table may only grow (see proto/README.md).
EXPECTED_MESSAGES: dict[str, dict[str, tuple[str, ...]]] = {
    "record": {
        "Record": (
            "bytes record_id = 1",
            "bytes key = 2",
            "bytes value = 3",
            "int64 event_time_ms = 4",
            "string producer = 5",
            "string stream = 6",
        ),
        "KeyInterval": ("string computation = 1", "uint32 index = 2", "uint32 count = 3"),
    },
    "delivery": {
        "Sender": (
            "string sender_id = 1",
            "KeyInterval interval = 2",
            "int64 epoch = 3",
            "SendProgress progress = 4",
        ),
        "SendProgress": (
            "string sequence = 1",
            "uint64 floor = 2",
            "uint64 first = 3",
            "uint64 last = 4",
            "KeyInterval retired = 5",
        ),
        "DeliveryBatch": (
            "uint64 batch_seq = 1",
            "Sender sender = 2",
            "KeyInterval target = 3",
            "int64 target_epoch = 4",
            "repeated Record records = 5",
        ),
        "Rejection": ("bytes record_id = 1", "RejectReason reason = 2", "string message = 3"),
        "DeliveryAck": (
            "uint64 batch_seq = 1",
            "repeated bytes committed_ids = 2",
            "repeated bytes duplicate_ids = 3",
            "repeated Rejection rejected = 4",
            "int64 receiver_epoch = 5",
            "bool progress_noted = 6",
        ),
    },
    "watermark": {
        "WatermarkReport": (
            "KeyInterval interval = 1",
            "int64 epoch = 2",
            "optional int64 oldest_work_ms = 3",
            "int64 reported_at_ms = 4",
            "string node_id = 5",
            "uint64 sequence = 6",
        ),
        "ReportWatermarksRequest": ("repeated WatermarkReport reports = 1",),
        "ReportWatermarksResponse": (
            "uint32 accepted = 1",
            "repeated KeyInterval ignored_stale = 2",
        ),
        "WatchWatermarksRequest": ("repeated string computations = 1",),
        "WatermarkUpdate": (
            "string computation = 1",
            "int64 low_watermark_ms = 2",
            "int64 computed_at_ms = 3",
        ),
        "WatermarkUpdates": ("repeated WatermarkUpdate updates = 1",),
    },
    "control": {
        "IntervalLease": (
            "KeyInterval interval = 1",
            "int64 epoch = 2",
            "string node_id = 3",
            "string address = 4",
        ),
        "RegisterNodeRequest": (
            "string node_id = 1",
            "string computation = 2",
            "string address = 3",
            "repeated uint32 interval_indexes = 4",
            "repeated StoredEpoch stored_epochs = 5",
        ),
        "StoredEpoch": ("uint32 index = 1", "int64 epoch = 2"),
        "RegisterNodeResponse": (
            "repeated IntervalLease leases = 1",
            "repeated uint32 moved_away = 2",
        ),
        "IntervalMove": ("KeyInterval interval = 1", "string to_node_id = 2"),
        "MoveIntervalRequest": ("KeyInterval interval = 1", "string to_node_id = 2"),
        "MoveIntervalResponse": ("IntervalMove move = 1", "IntervalLease current = 2"),
        "GetAssignmentRequest": ("repeated string computations = 1",),
        "Assignment": (
            "repeated IntervalLease leases = 1",
            "int64 version = 2",
            "repeated IntervalMove moves = 3",
            "repeated string draining = 4",
            "repeated KeyInterval layout = 5",
        ),
        "SplitIntervalRequest": ("KeyInterval interval = 1",),
        "SplitIntervalResponse": ("repeated KeyInterval halves = 1",),
        "MergeIntervalRequest": ("KeyInterval interval = 1",),
        "MergeIntervalResponse": ("KeyInterval whole = 1",),
        "IntervalLoad": (
            "uint32 index = 1",
            "int64 epoch = 2",
            "uint64 records_committed = 3",
            "double cpu_seconds = 4",
        ),
        "ReportLoadRequest": (
            "string node_id = 1",
            "string computation = 2",
            "repeated IntervalLoad intervals = 3",
        ),
        "ReportLoadResponse": (),
        "DrainNodeRequest": ("string node_id = 1", "bool resume = 2"),
        "DrainNodeResponse": ("repeated IntervalMove moves = 1",),
        "GetLayoutRequest": ("repeated string computations = 1",),
        "IntervalState": (
            "KeyInterval interval = 1",
            "string node_id = 2",
            "int64 epoch = 3",
            "double records_per_second = 4",
            "double cpu = 5",
            "string moving_to = 6",
        ),
        "NodeState": (
            "string node_id = 1",
            "string computation = 2",
            "bool live = 3",
            "bool draining = 4",
        ),
        "LayoutChange": (
            "int64 at_ms = 1",
            "KeyInterval interval = 2",
            "string from_node_id = 3",
            "string to_node_id = 4",
            "string reason = 5",
        ),
        "Layout": (
            "repeated IntervalState intervals = 1",
            "repeated NodeState nodes = 2",
            "repeated LayoutChange changes = 3",
            "bool rebalancing = 4",
        ),
    },
    "ingest": {
        "IngestRecord": ("bytes key = 1", "bytes value = 2", "int64 event_time_ms = 3"),
        "IngestRequest": (
            "string stream = 1",
            "string idempotency_key = 2",
            "repeated IngestRecord records = 3",
        ),
        "IngestResponse": (
            "repeated bytes record_ids = 1",
            "uint64 first_offset = 2",
            "bool replayed = 3",
        ),
        "FinishStreamRequest": ("string stream = 1",),
        "FinishStreamResponse": ("uint64 end_offset = 1", "bool already_finished = 2"),
    },
    "sink": {
        "SubscribeRequest": (
            "string stream = 1",
            "uint64 from_position = 2",
            "uint32 max_batch = 3",
        ),
        "SinkRecord": ("uint64 position = 1", "Record record = 2"),
        "SubscribeBatch": ("repeated SinkRecord records = 1", "uint64 next_position = 2"),
        "ViewGetRequest": ("string stream = 1", "bytes key = 2"),
        "ViewGetResponse": ("bool found = 1", "SinkRecord latest = 2"),
    },
    "admin": {
        "StatusRequest": (),
        "IntervalStatus": (
            "KeyInterval interval = 1",
            "int64 epoch = 2",
            "uint64 outbox_size = 3",
            "uint64 pending_timers = 4",
            "optional int64 input_low_watermark_ms = 5",
            "uint64 records_committed = 6",
            "string fenced_reason = 7",
        ),
        "StatusResponse": (
            "string node_id = 1",
            "string role = 2",
            "string version = 3",
            "repeated IntervalStatus intervals = 4",
            "int64 started_at_ms = 5",
        ),
        "GetStateRequest": ("string computation = 1", "bytes key = 2"),
        "StateEntry": ("string tag = 1", "bytes value = 2"),
        "GetStateResponse": (
            "bool found = 1",
            "repeated StateEntry entries = 2",
            "KeyInterval interval = 3",
        ),
        "DeadLetter": (
            "Record record = 1",
            "string computation = 2",
            "string error = 3",
            "uint32 attempts = 4",
            "int64 failed_at_ms = 5",
        ),
        "ListDeadLettersRequest": (
            "string computation = 1",
            "uint32 limit = 2",
            "bytes after_record_id = 3",
        ),
        "ListDeadLettersResponse": ("repeated DeadLetter dead_letters = 1",),
        "HandOverRequest": (
            "KeyInterval interval = 1",
            "string to_node_id = 2",
            "bool before_fence = 3",
            "repeated string have = 4",
        ),
        "StoreFilePiece": (
            "string name = 1",
            "bytes data = 2",
            "bool done = 3",
            "int64 epoch = 4",
            "repeated string files = 5",
        ),
    },
}

EXPECTED_ENUMS: dict[str, dict[str, dict[str, int]]] = {
    "delivery": {
        "RejectReason": {
            "REJECT_REASON_UNSPECIFIED": 0,
            "STALE_SENDER_EPOCH": 1,
            "NOT_OWNER": 2,
            "UNKNOWN_STREAM": 3,
            "MALFORMED_RECORD": 4,
            "WRONG_INTERVAL": 5,
            "OVERLOADED": 6,
            "UNKNOWN_SENDER_EPOCH": 7,
        },
    },
}

_SCALAR_TYPE_NAMES = {
    descriptor.FieldDescriptor.TYPE_BOOL: "bool",
    descriptor.FieldDescriptor.TYPE_BYTES: "bytes",
    descriptor.FieldDescriptor.TYPE_DOUBLE: "double",
    descriptor.FieldDescriptor.TYPE_FLOAT: "float",
    descriptor.FieldDescriptor.TYPE_INT32: "int32",
    descriptor.FieldDescriptor.TYPE_INT64: "int64",
    descriptor.FieldDescriptor.TYPE_STRING: "string",
    descriptor.FieldDescriptor.TYPE_UINT32: "uint32",
    descriptor.FieldDescriptor.TYPE_UINT64: "uint64",
}


def _render_field(fd: descriptor.FieldDescriptor) -> str:
    """A field as it is declared in the .proto, e.g. ``repeated bytes ids = 2``."""
    if fd.message_type is not None:
        type_name = fd.message_type.name
    elif fd.enum_type is not None:
        type_name = fd.enum_type.name
    else:
        type_name = _SCALAR_TYPE_NAMES[fd.type]
    if fd.is_repeated:
        label = "repeated "
    elif fd.has_presence and fd.message_type is None:
        label = "optional "
    else:
        label = ""
    return f"{label}{type_name} {fd.name} = {fd.number}"


def test_generated_files_exist_for_every_proto() -> None:
    protos = sorted(path.stem for path in PROTO_DIR.glob("*.proto"))
    assert protos == sorted(PROTO_NAMES)
    for name in PROTO_NAMES:
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"):
            assert (GENERATED_DIR / f"{name}{suffix}").is_file(), f"{name}{suffix}"


@pytest.mark.parametrize("name", PROTO_NAMES)
def test_module_imports_and_declares_package(name: str) -> None:
    module = pb2_module(name)
    pb2_grpc_module(name)
    file_descriptor: descriptor.FileDescriptor = module.DESCRIPTOR
    assert file_descriptor.package == "millrace.wire.v1"
    assert file_descriptor.name == f"millrace/wire/v1/{name}.proto"


@pytest.mark.parametrize("name", PROTO_NAMES)
def test_services_have_expected_rpcs_and_streaming_kinds(name: str) -> None:
    file_descriptor: descriptor.FileDescriptor = pb2_module(name).DESCRIPTOR
    grpc_module = pb2_grpc_module(name)
    expected = EXPECTED_SERVICES[name]
    assert set(file_descriptor.services_by_name) == set(expected)
    for service_name, rpcs in expected.items():
        service = file_descriptor.services_by_name[service_name]
        actual = {
            method.name: (
                method.input_type.name,
                method.output_type.name,
                method.client_streaming,
                method.server_streaming,
            )
            for method in service.methods
        }
        assert actual == rpcs, service_name
        # The generated gRPC module offers a stub, a servicer and a registration hook.
        assert hasattr(grpc_module, f"{service_name}Stub")
        servicer = getattr(grpc_module, f"{service_name}Servicer")
        assert all(callable(getattr(servicer, rpc)) for rpc in rpcs)
        assert callable(getattr(grpc_module, f"add_{service_name}Servicer_to_server"))


@pytest.mark.parametrize("name", PROTO_NAMES)
def test_messages_keep_their_field_numbers_and_types(name: str) -> None:
    file_descriptor: descriptor.FileDescriptor = pb2_module(name).DESCRIPTOR
    actual = {
        message_name: tuple(_render_field(fd) for fd in message.fields)
        for message_name, message in file_descriptor.message_types_by_name.items()
    }
    assert actual == EXPECTED_MESSAGES[name]


@pytest.mark.parametrize("name", PROTO_NAMES)
def test_enums_keep_their_values(name: str) -> None:
    file_descriptor: descriptor.FileDescriptor = pb2_module(name).DESCRIPTOR
    actual = {
        enum_name: {value.name: value.number for value in enum.values}
        for enum_name, enum in file_descriptor.enum_types_by_name.items()
    }
    assert actual == EXPECTED_ENUMS.get(name, {})
