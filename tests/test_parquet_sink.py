"""The Parquet sink: one part file per acked group, duplicates, leftovers, SIGKILLs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pyarrow.parquet as pq
import pytest

from millrace.computations import IntervalId, Topology
from millrace.deployment import Deployment, DeploymentError
from millrace.sinks import SinkLockedError
from millrace.sinks.parquet_sink import SCHEMA, ParquetSink, committed_parts, read_parquet_sink
from millrace.sinks.read_service import SubscribeService, ViewService
from millrace.wire.v1 import delivery_pb2, delivery_pb2_grpc, record_pb2, sink_pb2, sink_pb2_grpc
from tests.support import (
    ROOT,
    NodeProcess,
    SourceDriver,
    forwarding_deployment,
    free_port,
    wait_quiescent,
)


def record(i: int, key: str = "k") -> record_pb2.Record:
    return record_pb2.Record(
        record_id=i.to_bytes(16, "big"),
        key=key.encode(),
        value=str(i).encode(),
        event_time_ms=1000 + i,
        producer="fwd",
        stream="out",
    )


def batch(seq: int, ids: list[int]) -> delivery_pb2.DeliveryBatch:
    return delivery_pb2.DeliveryBatch(batch_seq=seq, records=[record(i) for i in ids])


def ints(ids: Iterable[bytes]) -> list[int]:
    return [int.from_bytes(i, "big") for i in ids]


def test_each_record_is_committed_once_across_redelivery_and_reopen(tmp_path: Path) -> None:
    directory = tmp_path / "out"
    sink = ParquetSink(directory)
    ack = sink.write(batch(1, [1, 2, 2, 3]))
    assert (ack.batch_seq, ints(ack.committed_ids), ints(ack.duplicate_ids)) == (1, [1, 2, 3], [2])
    ack = sink.write(batch(2, [3, 4]))  # a redelivery overlapping a new record
    assert (ints(ack.committed_ids), ints(ack.duplicate_ids)) == ([4], [3])
    ack = sink.write(batch(3, [1, 4]))  # all duplicates: no file at all
    assert (ints(ack.committed_ids), ints(ack.duplicate_ids)) == ([], [1, 4])
    assert [p.name for p in committed_parts(directory)] == [
        "part-0000000000.parquet",
        "part-0000000001.parquet",
    ]
    sink.close()

    leftover = directory / ".part-0000000002.parquet.tmp"
    leftover.write_bytes(b"PAR1 torn by a crash")  # a crash before the rename
    sink = ParquetSink(directory)
    assert sink.removed_tmp_files == 1 and not leftover.exists()
    assert len(sink) == 4
    ack = sink.write(batch(4, [4, 3, 2, 1]))  # the ids were rebuilt from the part files
    assert (ints(ack.committed_ids), ints(ack.duplicate_ids)) == ([], [4, 3, 2, 1])
    ack = sink.write(batch(5, [5, 1]))
    assert (ints(ack.committed_ids), ints(ack.duplicate_ids)) == ([5], [1])
    sink.close()

    names = [p.name for p in committed_parts(directory)]
    assert names == sorted(names) and len(names) == 3, "sequence numbers strictly increase"
    assert not list(directory.glob("*.tmp"))
    table = pq.read_table(directory)  # the whole directory, as any Parquet reader sees it
    assert table.schema.equals(SCHEMA)
    assert sorted(ints(table.column("record_id").to_pylist())) == [1, 2, 3, 4, 5]
    rows = read_parquet_sink(directory).to_pylist()
    assert [row["value"] for row in rows] == [b"1", b"2", b"3", b"4", b"5"], "commit order"
    assert rows[0] == {
        "record_id": (1).to_bytes(16, "big"),
        "key": b"k",
        "value": b"1",
        "event_time_ms": 1001,
        "producer": "fwd",
        "stream": "out",
    }


def test_a_group_of_batches_is_one_part_file(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    sink.write(batch(1, [1]))
    acks = sink.write_group([batch(7, [1, 2]), batch(8, [2, 3]), batch(9, [1])])
    assert [a.batch_seq for a in acks] == [7, 8, 9]
    assert [(ints(a.committed_ids), ints(a.duplicate_ids)) for a in acks] == [
        ([2], [1]),
        ([3], [2]),
        ([], [1]),
    ]
    assert len(committed_parts(tmp_path)) == 2
    assert pq.read_table(committed_parts(tmp_path)[1]).num_rows == 2


def test_deliver_over_grpc_acks_every_batch_and_writes_each_record_once(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path / "out")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    delivery_pb2_grpc.add_DeliveryServicer_to_server(sink, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        stub = delivery_pb2_grpc.DeliveryStub(grpc.insecure_channel(f"127.0.0.1:{port}"))

        def batches() -> Iterator[delivery_pb2.DeliveryBatch]:
            for seq in range(200):  # each batch resends the previous one's ids too
                yield batch(seq, [seq * 5 + j for j in range(-5, 5) if seq * 5 + j >= 0])

        acks = list(stub.Deliver(batches(), timeout=30))
        assert sorted(a.batch_seq for a in acks) == list(range(200))
        committed = [i for a in acks for i in ints(a.committed_ids)]
        assert sorted(committed) == list(range(1000))
    finally:
        server.stop(0.5).wait()
    ids = ints(read_parquet_sink(tmp_path / "out").column("record_id").to_pylist())
    assert sorted(ids) == list(range(1000))
    assert 1 <= len(committed_parts(tmp_path / "out")) <= 200


def test_subscribe_and_view_read_parquet_parts(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path)
    sink.write(delivery_pb2.DeliveryBatch(records=[record(1, "a"), record(2, "b")]))
    sink.write(delivery_pb2.DeliveryBatch(records=[record(3, "a")]))
    with pytest.raises(SinkLockedError, match="written by another process"):
        ParquetSink(tmp_path)
    sink.close()
    sink = ParquetSink(tmp_path)  # positions and the view survive a reopen
    sink.write(delivery_pb2.DeliveryBatch(records=[record(4, "c"), record(3, "a")]))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    sink_pb2_grpc.add_SubscribeServicer_to_server(SubscribeService("out", sink), server)
    sink_pb2_grpc.add_ViewServicer_to_server(ViewService("out", sink), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        call = sink_pb2_grpc.SubscribeStub(channel).Subscribe(
            sink_pb2.SubscribeRequest(stream="out", from_position=1, max_batch=10), timeout=10
        )
        first = next(call)
        assert [(r.position, r.record.value) for r in first.records] == [
            (1, b"2"),
            (2, b"3"),
            (3, b"4"),
        ], "positions run across part files; the duplicate was dropped"
        assert first.next_position == 4
        call.cancel()
        view = sink_pb2_grpc.ViewStub(channel)
        latest = view.Get(sink_pb2.ViewGetRequest(stream="out", key=b"a"), timeout=5)
        assert latest.found and latest.latest.position == 2
        assert latest.latest.record == record(3, "a")
        assert not view.Get(sink_pb2.ViewGetRequest(stream="out", key=b"zz"), timeout=5).found
    finally:
        server.stop(0.5).wait()


def test_the_sink_format_is_validated(tmp_path: Path) -> None:
    (tmp_path / "topology.toml").write_text(
        '[streams.in]\n[streams.ok]\n[computations.fwd]\nhandler = "tests.workloads:Poison"\n'
        'inputs = { in = "key" }\noutputs = ["ok"]\n'
    )
    topology = Topology.load(tmp_path / "topology.toml")
    nodes = {"fwd": {"computation": "fwd", "intervals": [0], "address": "127.0.0.1:1"}}

    def load(sink: dict[str, str]) -> Deployment:
        return Deployment.from_dict(topology, {"nodes": nodes, "sinks": {"ok": sink}})

    assert load({"address": "127.0.0.1:2"}).sink_format("ok") == "jsonl"
    assert load({"address": "127.0.0.1:2", "format": "parquet"}).sink_format("ok") == "parquet"
    with pytest.raises(DeploymentError, match=r"\[sinks.ok\] format must be"):
        load({"address": "127.0.0.1:2", "format": "csv"})


@pytest.mark.slow
def test_parquet_sink_process_survives_sigkill_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(5)
    node_port, sink_port = free_port(), free_port()
    deployment = forwarding_deployment(
        tmp_path, node_port, f"127.0.0.1:{sink_port}", 'format = "parquet"'
    )
    command = [sys.executable, "-m", "millrace", "sink", "--deployment", str(deployment),
               "--stream", "ok"]  # fmt: skip
    env = {**os.environ, "MILLRACE_DATA_DIR": str(tmp_path / "sink-data")}
    directory = tmp_path / "sink-data" / "sinks" / "ok"  # the default path for parquet

    def start_sink() -> subprocess.Popen[str]:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("sink ok serving") and str(directory) in line, line
        return process

    sink = start_sink()
    node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path)
    node.start()
    driver = SourceDriver(
        Topology.load(tmp_path / "topology.toml"),
        "in",
        {IntervalId("fwd", 0): f"127.0.0.1:{node_port}"},
    )
    total = 20_000
    kills = 0
    # A second sender that lost its acks: each round it resends every record it ever sent
    # (straight to the sink) until all are acked, so after each SIGKILL the sink must know
    # the earlier rounds' ids from its part files alone.
    chunk = 400
    direct = [
        record_pb2.Record(record_id=f"d{i:07d}".encode(), key=f"d{i % 7}".encode(),
                          value=json.dumps(total + i).encode(), producer="fwd", stream="ok")
        for i in range(chunk * 6)
    ]  # fmt: skip

    def redeliver(rounds: int) -> None:
        sent = direct[: rounds * chunk]
        batches = [
            delivery_pb2.DeliveryBatch(batch_seq=n, records=sent[s : s + 100])
            for n, s in enumerate(range(0, len(sent), 100))
        ]
        with grpc.insecure_channel(f"127.0.0.1:{sink_port}") as channel:
            stub = delivery_pb2_grpc.DeliveryStub(channel)
            acks = list(stub.Deliver(iter(batches), timeout=30, wait_for_ready=True))
        committed = {i for a in acks for i in a.committed_ids}
        duplicates = {i for a in acks for i in a.duplicate_ids}
        assert committed == {r.record_id for r in sent[-chunk:]}, "only the new round is new"
        assert duplicates == {r.record_id for r in sent[:-chunk]}, "earlier rounds: duplicates"

    try:
        records = [
            record_pb2.Record(record_id=f"r{i:07d}".encode(), key=f"k{i % 13}".encode(),
                              value=json.dumps(i).encode(), event_time_ms=i, stream="in")
            for i in range(total)
        ]  # fmt: skip
        for start in range(0, total, 1000):
            driver.send(records[start : start + 1000])
            if start % 4000 == 0:
                redeliver(kills + 1)
                time.sleep(rng.uniform(0.05, 0.2))
                sink.send_signal(signal.SIGKILL)
                sink.wait()
                kills += 1
                sink = start_sink()
        redeliver(kills + 1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if read_parquet_sink(directory).num_rows >= total + len(direct):
                break
            time.sleep(0.1)
        wait_quiescent([f"127.0.0.1:{node_port}"], 60)  # nothing left to resend: final
    finally:
        driver.stop()
        node.terminate()
        sink.terminate()
        sink.wait()
    assert kills == 5
    assert not list(directory.glob("*.tmp"))
    table = pq.read_table(directory)  # every part file of the directory
    values = sorted(json.loads(v) for v in table.column("value").to_pylist())
    assert values == list(range(total + len(direct))), "every record exactly once"
    assert set(table.column("stream").to_pylist()) == {"ok"}
    assert set(table.column("producer").to_pylist()) == {"fwd"}
