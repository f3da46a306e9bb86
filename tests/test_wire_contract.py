"""Tests of the v1 gRPC/protobuf wire contract (``proto/`` and ``millrace.wire.v1``).

They pin the contract's shape (services, streaming kinds, field numbers and
types), check that representative messages survive a serialize/parse round
trip, require every declaration in the ``.proto`` files to be documented, and
check that the committed generated code is fresh.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from google.protobuf import descriptor

from millrace.wire.v1 import (
    admin_pb2,
    control_pb2,
    delivery_pb2,
    ingest_pb2,
    record_pb2,
    watermark_pb2,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO_ROOT / "proto" / "millrace" / "wire" / "v1"
GENERATED_DIR = REPO_ROOT / "millrace" / "wire" / "v1"
GENERATOR = REPO_ROOT / "scripts" / "gen_protos.py"

PROTO_NAMES = ("admin", "control", "delivery", "ingest", "record", "sink", "watermark")

# ---------------------------------------------------------------------------
# (1) Generated modules and the shape of the contract
# ---------------------------------------------------------------------------

# service -> rpc -> (request type, response type, client_streaming, server_streaming)
EXPECTED_SERVICES: dict[str, dict[str, dict[str, tuple[str, str, bool, bool]]]] = {
    "admin": {
        "Admin": {
            "Status": ("StatusRequest", "StatusResponse", False, False),
            "GetState": ("GetStateRequest", "GetStateResponse", False, False),
            "ListDeadLetters": ("ListDeadLettersRequest", "ListDeadLettersResponse", False, False),
        },
    },
    "control": {
        "Control": {
            "RegisterNode": ("RegisterNodeRequest", "RegisterNodeResponse", False, False),
            "GetAssignment": ("GetAssignmentRequest", "Assignment", False, False),
            "WatchAssignment": ("GetAssignmentRequest", "Assignment", False, True),
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
        "Sender": ("string sender_id = 1", "KeyInterval interval = 2", "int64 epoch = 3"),
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
        ),
    },
    "watermark": {
        "WatermarkReport": (
            "KeyInterval interval = 1",
            "int64 epoch = 2",
            "optional int64 oldest_work_ms = 3",
            "int64 reported_at_ms = 4",
            "string node_id = 5",
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
        ),
        "RegisterNodeResponse": ("repeated IntervalLease leases = 1",),
        "GetAssignmentRequest": ("repeated string computations = 1",),
        "Assignment": ("repeated IntervalLease leases = 1", "int64 version = 2"),
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


def _pb2(name: str) -> ModuleType:
    return importlib.import_module(f"millrace.wire.v1.{name}_pb2")


def _pb2_grpc(name: str) -> ModuleType:
    return importlib.import_module(f"millrace.wire.v1.{name}_pb2_grpc")


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
    module = _pb2(name)
    _pb2_grpc(name)
    file_descriptor: descriptor.FileDescriptor = module.DESCRIPTOR
    assert file_descriptor.package == "millrace.wire.v1"
    assert file_descriptor.name == f"millrace/wire/v1/{name}.proto"


@pytest.mark.parametrize("name", PROTO_NAMES)
def test_services_have_expected_rpcs_and_streaming_kinds(name: str) -> None:
    file_descriptor: descriptor.FileDescriptor = _pb2(name).DESCRIPTOR
    grpc_module = _pb2_grpc(name)
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
    file_descriptor: descriptor.FileDescriptor = _pb2(name).DESCRIPTOR
    actual = {
        message_name: tuple(_render_field(fd) for fd in message.fields)
        for message_name, message in file_descriptor.message_types_by_name.items()
    }
    assert actual == EXPECTED_MESSAGES[name]


@pytest.mark.parametrize("name", PROTO_NAMES)
def test_enums_keep_their_values(name: str) -> None:
    file_descriptor: descriptor.FileDescriptor = _pb2(name).DESCRIPTOR
    actual = {
        enum_name: {value.name: value.number for value in enum.values}
        for enum_name, enum in file_descriptor.enum_types_by_name.items()
    }
    assert actual == EXPECTED_ENUMS.get(name, {})


# ---------------------------------------------------------------------------
# (2) Round trips
# ---------------------------------------------------------------------------

RECORD_ID = bytes(range(16))
INTERVAL = record_pb2.KeyInterval(computation="sessionize", index=3, count=8)


def _record() -> Any:
    return record_pb2.Record(
        record_id=RECORD_ID,
        key=b"user-42",
        value=b"\x00\xffpayload",
        event_time_ms=1_700_000_000_123,
        producer="injector",
        stream="clicks",
    )


def _representative_messages() -> list[Any]:
    record = _record()
    return [
        record,
        INTERVAL,
        delivery_pb2.DeliveryBatch(
            batch_seq=2**64 - 1,
            sender=delivery_pb2.Sender(sender_id="node-a", interval=INTERVAL, epoch=7),
            target=record_pb2.KeyInterval(computation="count", index=0, count=1),
            target_epoch=0,
            records=[record, record],
        ),
        delivery_pb2.DeliveryAck(
            batch_seq=5,
            committed_ids=[RECORD_ID],
            duplicate_ids=[b"\x01" * 16],
            rejected=[
                delivery_pb2.Rejection(
                    record_id=b"\x02" * 16,
                    reason=delivery_pb2.WRONG_INTERVAL,
                    message="key hashes into interval 5",
                )
            ],
            receiver_epoch=9,
        ),
        watermark_pb2.ReportWatermarksRequest(
            reports=[
                watermark_pb2.WatermarkReport(
                    interval=INTERVAL,
                    epoch=2,
                    oldest_work_ms=0,
                    reported_at_ms=1_700_000_001_000,
                    node_id="node-a",
                ),
                watermark_pb2.WatermarkReport(interval=INTERVAL, epoch=2, node_id="node-a"),
            ]
        ),
        watermark_pb2.ReportWatermarksResponse(accepted=1, ignored_stale=[INTERVAL]),
        watermark_pb2.WatermarkUpdates(
            updates=[
                watermark_pb2.WatermarkUpdate(
                    computation="count", low_watermark_ms=-1, computed_at_ms=1_700_000_002_000
                )
            ]
        ),
        control_pb2.RegisterNodeRequest(
            node_id="node-a", computation="count", address="10.0.0.1:7070", interval_indexes=[0, 3]
        ),
        control_pb2.Assignment(
            leases=[
                control_pb2.IntervalLease(
                    interval=INTERVAL, epoch=4, node_id="node-a", address="10.0.0.1:7070"
                )
            ],
            version=12,
        ),
        ingest_pb2.IngestRequest(
            stream="clicks",
            idempotency_key="batch-0001",
            records=[ingest_pb2.IngestRecord(key=b"k", value=b"v", event_time_ms=1)],
        ),
        ingest_pb2.IngestResponse(record_ids=[RECORD_ID], first_offset=1024, replayed=True),
        admin_pb2.StatusRequest(),
        admin_pb2.StatusResponse(
            node_id="node-a",
            role="node",
            version="0.1.0",
            intervals=[
                admin_pb2.IntervalStatus(
                    interval=INTERVAL,
                    epoch=4,
                    outbox_size=10,
                    pending_timers=2,
                    input_low_watermark_ms=1_699_999_999_000,
                    records_committed=123_456,
                )
            ],
            started_at_ms=1_700_000_000_000,
        ),
        admin_pb2.GetStateResponse(
            found=True,
            entries=[admin_pb2.StateEntry(tag="count", value=b"\x05")],
            interval=INTERVAL,
        ),
        admin_pb2.ListDeadLettersResponse(
            dead_letters=[
                admin_pb2.DeadLetter(
                    record=record,
                    computation="count",
                    error="ValueError: bad payload",
                    attempts=3,
                    failed_at_ms=1_700_000_003_000,
                )
            ]
        ),
    ]


@pytest.mark.parametrize(
    "message", _representative_messages(), ids=lambda m: str(m.DESCRIPTOR.name)
)
def test_round_trip(message: Any) -> None:
    data = message.SerializeToString()
    parsed = type(message).FromString(data)
    assert parsed == message
    assert parsed.SerializeToString(deterministic=True) == message.SerializeToString(
        deterministic=True
    )


def test_optional_fields_distinguish_absent_from_zero() -> None:
    zero = watermark_pb2.WatermarkReport(oldest_work_ms=0)
    absent = watermark_pb2.WatermarkReport()
    assert watermark_pb2.WatermarkReport.FromString(zero.SerializeToString()).HasField(
        "oldest_work_ms"
    )
    assert not watermark_pb2.WatermarkReport.FromString(absent.SerializeToString()).HasField(
        "oldest_work_ms"
    )
    status = admin_pb2.IntervalStatus.FromString(admin_pb2.IntervalStatus().SerializeToString())
    assert not status.HasField("input_low_watermark_ms")


def test_defaults_of_an_empty_message() -> None:
    ack = delivery_pb2.DeliveryAck.FromString(b"")
    assert ack.batch_seq == 0
    assert list(ack.committed_ids) == []
    assert ack.receiver_epoch == 0
    rejection = delivery_pb2.Rejection()
    assert rejection.reason == delivery_pb2.REJECT_REASON_UNSPECIFIED
    assert delivery_pb2.RejectReason.Name(delivery_pb2.NOT_OWNER) == "NOT_OWNER"


def test_unknown_fields_from_a_newer_version_are_preserved() -> None:
    """A v1 reader keeps fields added later, so relaying a record loses nothing."""
    newer = _record().SerializeToString() + b"\xa0\x06\x2a"  # field 100, varint 42
    parsed = record_pb2.Record.FromString(newer)
    assert parsed.record_id == RECORD_ID
    assert parsed.SerializeToString() == newer


# ---------------------------------------------------------------------------
# (3) Every declaration in the .proto files is documented
# ---------------------------------------------------------------------------

_BLOCK_DECL = re.compile(r"^(message|enum|service|oneof)\s+(\w+)\s*\{")
_RPC_DECL = re.compile(r"^rpc\s+(\w+)\s*\(")
_FIELD_DECL = re.compile(
    r"^(?:(?:repeated|optional)\s+)?(?:map\s*<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*\d+\s*(?:\[[^\]]*\])?\s*;"
)
_ENUM_VALUE_DECL = re.compile(r"^(\w+)\s*=\s*-?\d+\s*(?:\[[^\]]*\])?\s*;")
_NOT_DECLARATIONS = re.compile(r"^(syntax|edition|package|import|option|reserved)\b|^\}")


@dataclass
class ProtoDeclarations:
    """The declarations found in one .proto file, by kind, with qualified names."""

    declared: dict[str, set[str]] = field(default_factory=dict)
    undocumented: list[str] = field(default_factory=list)

    def add(self, kind: str, name: str, documented: bool, where: str) -> None:
        """Record one declaration and whether it carries a comment."""
        self.declared.setdefault(kind, set()).add(name)
        if not documented:
            self.undocumented.append(f"{where}: {kind} {name}")


def _split_comment(line: str) -> tuple[str, str]:
    """Split a line into code and the text of its ``//`` comment (no strings contain //)."""
    code, sep, comment = line.partition("//")
    return code.strip(), comment.strip() if sep else ""


def parse_proto(path: Path) -> ProtoDeclarations:
    """Find every declaration of a .proto file and whether it is documented.

    A declaration is documented when the lines directly above it (no blank line
    in between) are ``//`` comments with some text, or when it has a trailing
    ``//`` comment. Fails on any line it does not understand, so a declaration
    cannot slip past unchecked.
    """
    result = ProtoDeclarations()
    scopes: list[tuple[str, str]] = []  # (kind, name) of the enclosing blocks
    comment_above: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        where = f"{path.name}:{number}"
        code, trailing = _split_comment(raw)
        if not code:
            # A comment line extends the block above the next declaration; a
            # blank line ends it.
            comment_above = [*comment_above, trailing] if raw.strip() else []
            continue
        documented = any(comment_above) or bool(trailing)
        comment_above = []
        prefix = ".".join(name for kind, name in scopes if kind != "oneof")
        enclosing = scopes[-1][0] if scopes else ""

        def qualified(name: str, prefix: str = prefix) -> str:
            return f"{prefix}.{name}" if prefix else name

        if block := _BLOCK_DECL.match(code):
            kind, name = block.groups()
            result.add(kind, qualified(name), documented, where)
            scopes.append((kind, name))
        elif rpc := _RPC_DECL.match(code):
            assert enclosing == "service", f"{where}: rpc outside a service"
            result.add("rpc", qualified(rpc.group(1)), documented, where)
            if "{" in code:
                scopes.append(("rpc", rpc.group(1)))
        elif enclosing == "enum" and (value := _ENUM_VALUE_DECL.match(code)):
            result.add("enum value", qualified(value.group(1)), documented, where)
        elif enclosing in ("message", "oneof") and (decl := _FIELD_DECL.match(code)):
            result.add("field", qualified(decl.group(1)), documented, where)
        elif not _NOT_DECLARATIONS.match(code):
            pytest.fail(f"{where}: line not understood by the doc check: {raw.strip()!r}")
        for _ in range(code.count("}")):
            assert scopes, f"{where}: unbalanced '}}'"
            scopes.pop()
    assert not scopes, f"{path.name}: unclosed block {scopes[-1]}"
    return result


def _declarations_from_descriptor(
    file_descriptor: descriptor.FileDescriptor,
) -> dict[str, set[str]]:
    """The same qualified names as ``parse_proto``, from the compiled descriptor."""
    declared: dict[str, set[str]] = {}

    def add(kind: str, name: str) -> None:
        declared.setdefault(kind, set()).add(name)

    def add_enum(enum: descriptor.EnumDescriptor, prefix: str) -> None:
        add("enum", prefix + enum.name)
        for value in enum.values:
            add("enum value", f"{prefix}{enum.name}.{value.name}")

    def add_message(message: descriptor.Descriptor, prefix: str) -> None:
        name = prefix + message.name
        add("message", name)
        for fd in message.fields:
            add("field", f"{name}.{fd.name}")
        for nested in message.nested_types:
            add_message(nested, f"{name}.")
        for enum in message.enum_types:
            add_enum(enum, f"{name}.")

    for message in file_descriptor.message_types_by_name.values():
        add_message(message, "")
    for enum in file_descriptor.enum_types_by_name.values():
        add_enum(enum, "")
    for service in file_descriptor.services_by_name.values():
        add("service", service.name)
        for method in service.methods:
            add("rpc", f"{service.name}.{method.name}")
    return declared


@pytest.mark.parametrize("name", PROTO_NAMES)
def test_every_declaration_is_documented(name: str) -> None:
    parsed = parse_proto(PROTO_DIR / f"{name}.proto")
    assert parsed.undocumented == [], "declarations without a // comment directly above"
    # The parser saw exactly what protoc compiled, so nothing escaped the check.
    declared = {kind: names for kind, names in parsed.declared.items() if kind != "oneof"}
    assert declared == _declarations_from_descriptor(_pb2(name).DESCRIPTOR)


def test_doc_check_catches_an_undocumented_field(tmp_path: Path) -> None:
    proto = tmp_path / "sample.proto"
    proto.write_text(
        'syntax = "proto3";\n'
        "// Documented.\n"
        "message A {\n"
        "  // Documented.\n"
        "  int64 x_ms = 1;\n"
        "\n"
        "  int64 y_ms = 2;\n"
        "  int64 z_ms = 3;  // Trailing comment counts.\n"
        "}\n"
        "\n"
        "enum E {\n"
        "  // Documented.\n"
        "  E_UNSPECIFIED = 0;\n"
        "}\n"
        "// Documented.\n"
        "service S {\n"
        "  rpc R(A) returns (A);\n"
        "}\n",
        encoding="utf-8",
    )
    parsed = parse_proto(proto)
    assert parsed.undocumented == [
        "sample.proto:7: field A.y_ms",
        "sample.proto:11: enum E",
        "sample.proto:17: rpc S.R",
    ]


# ---------------------------------------------------------------------------
# (4) The committed generated code is fresh
# ---------------------------------------------------------------------------


def _run_generator(repo_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(repo_root / "scripts" / "gen_protos.py"), *args],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_generator_check_passes_on_committed_tree() -> None:
    result = _run_generator(REPO_ROOT, "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_generator_check_flags_stale_missing_and_extra_files(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy2(GENERATOR, tmp_path / "scripts" / "gen_protos.py")
    shutil.copytree(REPO_ROOT / "proto", tmp_path / "proto")
    generated = tmp_path / "millrace" / "wire" / "v1"
    shutil.copytree(GENERATED_DIR, generated, ignore=shutil.ignore_patterns("__pycache__"))

    assert _run_generator(tmp_path, "--check").returncode == 0

    stale = generated / "ingest_pb2.pyi"
    stale.write_text(stale.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    (generated / "admin_pb2_grpc.py").unlink()
    (generated / "removed_pb2.py").write_text("", encoding="utf-8")
    result = _run_generator(tmp_path, "--check")
    assert result.returncode == 1
    assert "out of date: millrace/wire/v1/ingest_pb2.pyi" in result.stderr
    assert "missing: millrace/wire/v1/admin_pb2_grpc.py" in result.stderr
    assert "millrace/wire/v1/removed_pb2.py" in result.stderr
    assert "run `make proto`" in result.stderr

    # Regenerating repairs all three, after which the check passes again.
    assert _run_generator(tmp_path).returncode == 0
    assert not (generated / "removed_pb2.py").exists()
    assert _run_generator(tmp_path, "--check").returncode == 0
    for path in GENERATED_DIR.glob("*_pb2*"):
        if path.is_file():
            assert (generated / path.name).read_bytes() == path.read_bytes(), path.name
