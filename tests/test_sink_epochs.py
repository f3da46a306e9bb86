"""A sink refuses what a node refuses of a batch's header: another target, and a sender
epoch no ownership registry can grant (the real FileSink on disk)."""

from __future__ import annotations

from pathlib import Path

from millrace.sinks import FileSink, read_sink_file
from millrace.statestore import MAX_EPOCH
from millrace.wire.v1 import delivery_pb2, record_pb2


def batch(epoch: int, target: str = "sink:ok") -> delivery_pb2.DeliveryBatch:
    made = delivery_pb2.DeliveryBatch(
        batch_seq=1,
        target=record_pb2.KeyInterval(computation=target, index=0),
        records=[record_pb2.Record(record_id=b"r1", key=b"k", value=b"v", stream="ok")],
    )
    made.sender.interval.computation = "up"
    made.sender.epoch = epoch
    return made


def test_a_sink_refuses_forged_epochs_and_other_targets_and_takes_the_rest(
    tmp_path: Path,
) -> None:
    sink = FileSink(tmp_path / "ok.jsonl")
    sink.stream = "ok"
    forged = sink.write(batch(MAX_EPOCH))
    assert [r.reason for r in forged.rejected] == [delivery_pb2.UNKNOWN_SENDER_EPOCH]
    elsewhere = sink.write(batch(3, target="sink:other"))
    assert [r.reason for r in elsewhere.rejected] == [delivery_pb2.NOT_OWNER]
    assert sink.written == 0, "nothing of a refused batch is written"
    genuine = sink.write(batch(3))
    assert list(genuine.committed_ids) == [b"r1"]
    assert [line["value_text"] for line in read_sink_file(tmp_path / "ok.jsonl")] == ["v"]
