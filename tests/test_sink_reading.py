"""Subscribe (resumable, follows new records) and View (latest per key) over a real sink."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc

from millrace.sinks import FileSink
from millrace.sinks.read_service import SubscribeService, ViewService
from millrace.wire.v1 import delivery_pb2, record_pb2, sink_pb2, sink_pb2_grpc
from tests.support import ROOT


def batch(seq: int, items: list[tuple[int, str, str]]) -> delivery_pb2.DeliveryBatch:
    return delivery_pb2.DeliveryBatch(
        batch_seq=seq,
        records=[
            record_pb2.Record(record_id=i.to_bytes(16, "big"), key=k.encode(), value=v.encode())
            for i, k, v in items
        ],
    )


def serve(sink: FileSink) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    sink_pb2_grpc.add_SubscribeServicer_to_server(SubscribeService("out", sink), server)
    sink_pb2_grpc.add_ViewServicer_to_server(ViewService("out", sink), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def test_subscribe_resumes_and_follows_and_view_has_latest(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "out.jsonl")
    sink.write(batch(1, [(1, "a", "1"), (2, "b", "1"), (3, "a", "2")]))
    sink.close()
    sink = FileSink(tmp_path / "out.jsonl")  # positions and the view survive a restart
    server, address = serve(sink)
    try:
        channel = grpc.insecure_channel(address)
        subscribe = sink_pb2_grpc.SubscribeStub(channel)
        call = subscribe.Subscribe(
            sink_pb2.SubscribeRequest(stream="out", from_position=1), timeout=10
        )
        first = next(call)
        assert [r.position for r in first.records] == [1, 2]
        assert first.next_position == 3
        threading.Timer(0.2, lambda: sink.write(batch(2, [(4, "c", "1"), (3, "a", "2")]))).start()
        follow = next(call)
        assert [(r.position, r.record.key) for r in follow.records] == [(3, b"c")], "dup dropped"
        call.cancel()

        view = sink_pb2_grpc.ViewStub(channel)
        latest = view.Get(sink_pb2.ViewGetRequest(stream="out", key=b"a"), timeout=5)
        assert latest.found and latest.latest.position == 2 and latest.latest.record.value == b"2"
        assert not view.Get(sink_pb2.ViewGetRequest(stream="out", key=b"zz"), timeout=5).found
        try:
            list(subscribe.Subscribe(sink_pb2.SubscribeRequest(stream="other"), timeout=5))
            raise AssertionError("an unknown stream must be refused")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND
    finally:
        server.stop(0.5).wait()
        sink.close()


def test_view_get_command(tmp_path: Path) -> None:
    sink = FileSink(tmp_path / "out.jsonl")
    sink.write(batch(1, [(1, "alice", "3")]))
    server, address = serve(sink)
    (tmp_path / "topology.toml").write_text(
        '[streams.in]\n[streams.out]\n[computations.c]\nhandler = "tests.workloads:Poison"\n'
        'inputs = { in = "key" }\noutputs = ["out"]\n'
    )
    (tmp_path / "deployment.toml").write_text(
        f'topology = "topology.toml"\n[nodes.c]\ncomputation = "c"\nintervals = [0]\n'
        f'address = "127.0.0.1:1"\n[sinks.out]\naddress = "{address}"\n'
    )
    try:
        command = [sys.executable, "-m", "millrace", "view", "get", "--deployment",
                   str(tmp_path / "deployment.toml"), "--stream", "out"]  # fmt: skip
        found = subprocess.run(
            [*command, "--key", "alice"], capture_output=True, text=True, cwd=ROOT, check=False
        )
        assert found.returncode == 0, found.stderr
        shown = json.loads(found.stdout)  # the record's sink line, with its position
        assert (shown["key"], shown["value"], shown["v"]) == ("alice", 3, 2)
        assert isinstance(shown["position"], int) and "event_time_ms" in shown
        missing = subprocess.run(
            [*command, "--key", "bob"], capture_output=True, text=True, cwd=ROOT, check=False
        )
        assert missing.returncode == 1
    finally:
        server.stop(0.5).wait()
        sink.close()


def test_a_sink_address_already_taken_says_how_to_leave_it_to_its_own_process(
    tmp_path: Path,
) -> None:
    """``millrace up`` starts a ``millrace sink`` per sink: one served by the user's own
    process fails to bind, and says what to mark."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "deployment.toml").write_text(
            '[nodes.c]\ncomputation = "c"\nintervals = [0]\naddress = "127.0.0.1:1"\n'
            f'[sinks.out]\naddress = "127.0.0.1:{port}"\n'
        )
        done = subprocess.run(
            [sys.executable, "-m", "millrace", "sink", "--config",
             str(tmp_path / "deployment.toml"), "--stream", "out",
             "--path", str(tmp_path / "out.jsonl")],
            capture_output=True, text=True, cwd=ROOT, check=False, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2
    assert "external = true in [sinks.out]" in done.stderr.splitlines()[-1]
