"""Representative v1 messages survive a serialize/parse round trip; unknown fields survive."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.wire.v1 import (
    admin_pb2,
    control_pb2,
    delivery_pb2,
    ingest_pb2,
    record_pb2,
    watermark_pb2,
)

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
