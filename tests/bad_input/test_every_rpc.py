"""The bad-input suite: every RPC of every service, every class of bad input (issue 15).

Against a real pipeline (injector, nodes ``up`` and ``down``) and a real
``millrace sink``, each RPC is sent:

- bytes that are not a protobuf;
- a message of another type (valid protobuf, wrong fields and wire types);
- its own message with every string and bytes field a megabyte long and every
  integer at its type's limit (forged epochs, ids, positions, times);
- an empty message.

Each answer must be a clear status (never UNKNOWN or INTERNAL, a message
saying what is wrong) or a normal answer; afterwards every service is
healthy, legitimate records ingested reach the sink exactly once, and the
real sink still takes and serves a record.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor, message_factory
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

from millrace.wire.v1 import (
    admin_pb2,
    control_pb2,
    delivery_pb2,
    delivery_pb2_grpc,
    ingest_pb2,
    record_pb2,
    sink_pb2,
    sink_pb2_grpc,
    watermark_pb2,
)
from tests.bad_input.pipeline import Pipeline, pipeline
from tests.support import ROOT, free_port

pytestmark = pytest.mark.slow

UNCLEAR = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
BIG = 1 << 20
SERVICES = {
    "injector": [
        (ingest_pb2, "Ingest"),
        (control_pb2, "Control"),
        (watermark_pb2, "WatermarkAuthority"),
    ],
    "down": [(delivery_pb2, "Delivery"), (admin_pb2, "Admin")],
    "sink": [(delivery_pb2, "Delivery"), (sink_pb2, "Subscribe"), (sink_pb2, "View")],
}


def extreme(message_class: Any) -> Message:
    """A message with every field at an extreme: 1 MB strings and bytes, integers at the
    limit of their type, nested messages filled the same way (one level), repeated
    fields with one such element."""
    made: Message = message_class()
    fields: list[Any] = list(made.DESCRIPTOR.fields)
    for field in fields:
        repeated = field.is_repeated
        if field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                continue
            nested = message_factory.GetMessageClass(field.message_type)
            inner = nested() if nested is message_class else extreme(nested)
            if repeated:
                getattr(made, field.name).append(inner)
            else:
                getattr(made, field.name).CopyFrom(inner)
            continue
        value = _extreme_scalar(field)
        if value is None:
            continue
        if repeated:
            getattr(made, field.name).append(value)
        else:
            setattr(made, field.name, value)
    return made


def _extreme_scalar(field: Any) -> object:
    kind = field.type
    if kind == descriptor.FieldDescriptor.TYPE_STRING:
        return "n" * BIG
    if kind == descriptor.FieldDescriptor.TYPE_BYTES:
        return b"b" * BIG
    if kind in (descriptor.FieldDescriptor.TYPE_INT64, descriptor.FieldDescriptor.TYPE_SINT64):
        return 2**63 - 1
    if kind in (descriptor.FieldDescriptor.TYPE_UINT64, descriptor.FieldDescriptor.TYPE_FIXED64):
        return 2**64 - 1
    if kind in (descriptor.FieldDescriptor.TYPE_INT32, descriptor.FieldDescriptor.TYPE_SINT32):
        return 2**31 - 1
    if kind in (descriptor.FieldDescriptor.TYPE_UINT32, descriptor.FieldDescriptor.TYPE_FIXED32):
        return 2**32 - 1
    if kind == descriptor.FieldDescriptor.TYPE_BOOL:
        return True
    if kind == descriptor.FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values[-1].number
    return None


def payloads(input_class: Any) -> dict[str, bytes]:
    other = delivery_pb2.DeliveryBatch(
        batch_seq=7, records=[record_pb2.Record(record_id=b"i", key=b"k", value=b"v")]
    )
    if input_class is delivery_pb2.DeliveryBatch:
        other = ingest_pb2.IngestRequest(stream="in", idempotency_key="k")  # type: ignore[assignment]
    return {
        "not protobuf": b"\xff\xff\xff\xff not a protobuf",
        "another message": other.SerializeToString(),
        "extreme fields": extreme(input_class).SerializeToString(),
        "empty": b"",
    }


def send(channel: grpc.Channel, method: Any, data: bytes) -> str:
    """Call ``method`` with ``data``; "" for a normal answer, else the status it ended with."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    kwargs = {"request_serializer": lambda b: b, "response_deserializer": lambda b: b}
    try:
        if method.client_streaming and method.server_streaming:
            call = channel.stream_stream(path, **kwargs)(iter([data]), timeout=5)
            _drain(call)
        elif method.server_streaming:
            call = channel.unary_stream(path, **kwargs)(data, timeout=5)
            _drain(call)
        elif method.client_streaming:
            channel.stream_unary(path, **kwargs)(iter([data]), timeout=5)
        else:
            channel.unary_unary(path, **kwargs)(data, timeout=5)
    except grpc.RpcError as error:
        code = error.code()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return ""  # a stream that stayed open, serving: a normal answer
        assert code not in UNCLEAR, f"{path}: {code} {error.details()}"
        assert error.details(), f"{path}: {code} without a message"
        return str(code.name)
    return ""


def _drain(call: Iterator[bytes]) -> None:
    for count, _ in enumerate(call):
        if count >= 2:
            call.cancel()  # type: ignore[attr-defined]
            return


def healthy(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
    assert status.status == health_pb2.HealthCheckResponse.SERVING, address


def start_sink(p: Pipeline) -> tuple[subprocess.Popen[str], str]:
    """A real ``millrace sink`` for a stream of its own (a deployment of its own)."""
    port = free_port()
    directory = p.tmp_path / "sinkside"
    directory.mkdir()
    (directory / "topology.toml").write_text(
        '[streams.in]\n[streams.kept]\n[computations.fwd]\nhandler = "tests.workloads:Forward"\n'
        'inputs = { in = "key" }\noutputs = ["kept"]\nparams = { output = "kept" }\n'
    )
    (directory / "deployment.toml").write_text(
        f'topology = "topology.toml"\n[nodes.fwd]\ncomputation = "fwd"\nintervals = [0]\n'
        f'address = "127.0.0.1:{free_port()}"\n[sinks.kept]\naddress = "127.0.0.1:{port}"\n'
        f'path = "kept.jsonl"\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "millrace", "sink", "--config",
         str(directory / "deployment.toml"), "--stream", "kept"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().startswith("sink kept serving")
    return process, f"127.0.0.1:{port}"


def test_every_rpc_answers_bad_input_clearly_and_loses_nothing(tmp_path: Path) -> None:
    with pipeline(tmp_path) as p:
        sink, sink_address = start_sink(p)
        addresses = {"injector": p.address("injector"), "down": p.address("down"),
                     "sink": sink_address}  # fmt: skip
        answers: dict[str, str] = {}
        try:
            p.ingest(10)
            for role, services in SERVICES.items():
                with grpc.insecure_channel(
                    addresses[role], options=[("grpc.max_send_message_length", 64 << 20)]
                ) as channel:
                    for module, name in services:
                        service = module.DESCRIPTOR.services_by_name[name]
                        for method in service.methods:
                            input_class = message_factory.GetMessageClass(method.input_type)
                            for kind, data in payloads(input_class).items():
                                answers[f"{role} {name}.{method.name} {kind}"] = send(
                                    channel, method, data
                                )
            assert any(answers.values()), "the bad input was refused somewhere"
            for address in (*addresses.values(), p.address("up")):
                healthy(address)
            p.ingest(20)
            p.legit_records_arrive()
            batch = delivery_pb2.DeliveryBatch(
                batch_seq=1, records=[record_pb2.Record(record_id=b"legit", key=b"k", value=b"v")]
            )
            batch.target.computation = "sink:kept"
            with grpc.insecure_channel(sink_address) as channel:
                [ack] = list(
                    delivery_pb2_grpc.DeliveryStub(channel).Deliver(iter([batch]), timeout=10)
                )
                assert list(ack.committed_ids) + list(ack.duplicate_ids) == [b"legit"]
                view = sink_pb2_grpc.ViewStub(channel).Get(
                    sink_pb2.ViewGetRequest(stream="kept", key=b"k"), timeout=10
                )
            assert view.found and view.latest.record.value == b"v"
        finally:
            sink.terminate()
            sink.wait(30)
