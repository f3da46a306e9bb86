"""Finishing a stream (a bounded input): the group committer refuses new requests but
answers replays, every request queued before is written first, and the finished mark
survives a restart of the stream."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from millrace.computations import Topology
from millrace.dataplane import RecordBatch
from millrace.injector.forwarder import Submitter
from millrace.injector.group_commit import GroupCommitter, StreamFinishedError
from millrace.injector.ingest_stream import FINISHED_FILE, IngestStream, finished_offset
from millrace.injector.injector_metrics import InjectorMetrics
from millrace.injector.log import AppendRequest, LogConfig, StreamLog
from millrace.injector.watermark_authority import WatermarkAuthority

TOPOLOGY = {
    "streams": {"events": {}, "out": {}},
    "computations": {
        "count": {"handler": "tests.workloads:Poison", "inputs": {"events": "key"},
                  "outputs": ["out"]},
    },
}  # fmt: skip


def request(key: str, count: int = 3) -> AppendRequest:
    records = RecordBatch([(b"k", f"{key}-{i}".encode(), i) for i in range(count)])
    return AppendRequest(records=records, idempotency_key=key.encode())


def test_finish_writes_what_was_queued_then_refuses_new_requests_but_answers_replays(
    tmp_path: Path,
) -> None:
    log = StreamLog.open(tmp_path / "events", "events", config=LogConfig(fsync=False))
    committer = GroupCommitter(log)
    queued = [committer.submit(request(f"r{i}")) for i in range(20)]  # before the writer runs
    committer.start()
    finisher = threading.Thread(target=lambda: ends.append(committer.finish()))
    ends: list[int] = []
    finisher.start()
    finisher.join(10)
    assert ends == [60], "the 20 queued requests were written before the finish returned"
    assert all(not f.result().replayed for f in queued)
    with pytest.raises(StreamFinishedError, match="'events' is finished"):
        committer.submit(request("new")).result(5)
    replay = committer.submit(request("r3")).result(5)
    assert replay.replayed and replay.first_offset == 9
    committer.stop()
    assert log.next_offset == 60
    log.close()


def no_sender(consumer: str, interval: int) -> Submitter:
    raise AssertionError("nothing is forwarded in this test")


def test_a_finished_stream_stays_finished_after_a_restart(tmp_path: Path) -> None:
    topology = Topology.from_dict(TOPOLOGY)

    def open_stream() -> IngestStream:
        log = StreamLog.open(tmp_path / "events", "events", config=LogConfig(fsync=False))
        metrics = InjectorMetrics({}, {}, WatermarkAuthority(topology))
        return IngestStream(
            log, topology=topology, sender=no_sender, metrics=metrics,
            out_of_orderness_ms=0, idle_timeout_ms=10**9, published_ms=0, clock=lambda: 0,
        )  # fmt: skip

    stream = open_stream()
    stream.committer.start()
    stream.submit(request("a", 5)).result(5)
    assert stream.finish() == 5 and stream.finish() == 5, "idempotent"
    assert finished_offset(tmp_path / "events") == 5
    assert (tmp_path / "events" / FINISHED_FILE).exists()
    stream.committer.stop()
    stream.log.close()
    again = open_stream()
    again.committer.start()
    assert again.finished_at == 5 and again.committer.finished
    with pytest.raises(StreamFinishedError):
        again.submit(request("b")).result(5)
    assert again.submit(request("a", 5)).result(5).replayed
    again.committer.stop()
    again.log.close()
