"""Bad ingest requests (issue 15, defects 3, 4, 5) against a real injector and pipeline.

- An oversized idempotency key, an oversized record, an event time out of range:
  INVALID_ARGUMENT naming the field and the limit, checked before the request joins
  a group commit, so the valid requests sent at the same moment all succeed.
- A key reused for other records: FAILED_PRECONDITION naming the key (also after a
  restart, and for concurrent clients sharing a key: one wins, the others are told);
  an identical retry is still a replay.
- Extreme event times on the file source and ``millrace inject``: the line goes to the
  rejects (or the malformed list) with its number, the rest is ingested; the
  watermark feed keeps working.

Afterwards legitimate records reach the sink exactly once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import pytest

from millrace.wire.v1 import ingest_pb2, ingest_pb2_grpc, watermark_pb2, watermark_pb2_grpc
from tests.bad_input.pipeline import Pipeline, pipeline
from tests.support import ROOT

pytestmark = pytest.mark.slow


def request(key: str, values: list[str], ts: int = 5_000) -> ingest_pb2.IngestRequest:
    return ingest_pb2.IngestRequest(
        stream="in",
        idempotency_key=key,
        records=[
            ingest_pb2.IngestRecord(key=b"k1", value=v.encode(), event_time_ms=ts) for v in values
        ],
    )


def call(p: Pipeline, message: ingest_pb2.IngestRequest) -> ingest_pb2.IngestResponse:
    with grpc.insecure_channel(p.address("injector")) as channel:
        response: ingest_pb2.IngestResponse = ingest_pb2_grpc.IngestStub(channel).Ingest(
            message, timeout=20
        )
    return response


def refused(p: Pipeline, message: ingest_pb2.IngestRequest) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call(p, message)
    return raised.value


def watermarks_answer(p: Pipeline) -> dict[str, int]:
    with grpc.insecure_channel(p.address("injector")) as channel:
        watch = watermark_pb2_grpc.WatermarkAuthorityStub(channel).WatchWatermarks(
            watermark_pb2.WatchWatermarksRequest(), timeout=10
        )
        first = next(iter(watch))
        watch.cancel()
    return {u.computation: u.low_watermark_ms for u in first.updates}


def test_a_bad_request_fails_alone_and_says_why(tmp_path: Path) -> None:
    with pipeline(tmp_path) as p:
        results: dict[int, object] = {}

        def valid(n: int) -> None:
            results[n] = call(p, request(f"ok-{n}", [f"ok{n}"]))

        threads = [threading.Thread(target=valid, args=(n,)) for n in range(39)]
        for thread in threads:
            thread.start()
        error = refused(p, request("x" * 70_000, ["bad"]))
        for thread in threads:
            thread.join(30)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "idempotency_key is 70000 bytes; the limit is 1024" in (error.details() or "")
        assert len(results) == 39, "every valid request sent meanwhile succeeded"
        p.ingested += [f"ok{n}".encode() for n in range(39)]

        for ts in (2**63 - 1, -(2**63), 2**62):
            error = refused(p, request(f"ts-{ts}", ["late"], ts=ts))
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "record 0: event time" in (error.details() or "")
            assert "outside the accepted range" in (error.details() or "")
        error = refused(p, request("big", ["x" * (5 << 20)]))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "the limit is 4194304" in (error.details() or "")
        assert watermarks_answer(p)["source:in"] < 2**53, "the watermark feed still answers"
        p.ingest(20)
        p.legit_records_arrive()


def test_a_reused_idempotency_key_is_refused_and_an_identical_retry_replays(
    tmp_path: Path,
) -> None:
    with pipeline(tmp_path) as p:
        first = call(p, request("order-1", ["a", "b"]))
        again = call(p, request("order-1", ["a", "b"]))
        assert again.replayed and again.first_offset == first.first_offset
        error = refused(p, request("order-1", ["a", "c"]))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "'order-1' was already used for other records" in (error.details() or "")

        outcomes: list[str] = []
        lock = threading.Lock()

        def client(value: str) -> None:
            try:
                call(p, request("shared", [value]))
                outcome = "ok:" + value
            except grpc.RpcError as exc:
                outcome = exc.code().name
            with lock:
                outcomes.append(outcome)

        clients = [threading.Thread(target=client, args=(f"s{n}",)) for n in range(4)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(30)
        winners = [o for o in outcomes if o.startswith("ok:")]
        assert len(winners) == 1, outcomes
        assert sorted(o for o in outcomes if not o.startswith("ok:")) == ["FAILED_PRECONDITION"] * 3
        p.ingested += [b"a", b"b", winners[0][3:].encode()]

        p.injector.kill()
        p.injector.start()
        error = refused(p, request("order-1", ["z", "z"]))  # remembered from the log
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        p.ingest(10)
        p.legit_records_arrive()


def test_extreme_event_times_on_the_file_paths(tmp_path: Path) -> None:
    with pipeline(tmp_path) as p:
        lines = [
            json.dumps({"key": "k2", "value": "f0", "ts": 1}),
            json.dumps({"key": "k2", "value": "huge", "ts": 2**70}),
            json.dumps({"key": "k2", "value": "max", "ts": 2**63 - 1}),
            json.dumps({"key": "k2", "value": "f1", "ts": 2}),
        ]
        data = tmp_path / "extreme.jsonl"
        data.write_text("\n".join(lines) + "\n")
        result = subprocess.run(
            [sys.executable, "-m", "millrace", "inject", "--config", str(p.deployment),
             "--stream", "in", str(data)],
            capture_output=True, text=True, cwd=ROOT, check=False, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert "records accepted: 2" in result.stdout
        assert "line 2: 'ts': event time" in result.stdout
        assert "line 3: 'ts': event time" in result.stdout
        p.ingested += [b"f0", b"f1"]
        # The file source: the same lines, then a later file; both files are read.
        (p.tmp_path / "incoming" / "a.jsonl").write_text(
            "\n".join(line.replace('"f', '"g') for line in lines) + "\n"
        )
        (p.tmp_path / "incoming" / "b.jsonl").write_text(
            json.dumps({"key": "k3", "value": "later", "ts": 3}) + "\n"
        )
        p.ingested += [b"g0", b"g1", b"later"]
        p.legit_records_arrive()
        rejects = [
            json.loads(line)
            for line in (p.tmp_path / "log" / "in" / "rejects.jsonl").read_text().splitlines()
        ]
        assert [(r["file"], r["line"]) for r in rejects] == [("a.jsonl", 2), ("a.jsonl", 3)]
        assert all("outside the accepted range" in r["reason"] for r in rejects)
        assert watermarks_answer(p)["source:in"] < 2**53
        p.ingest(10)
        p.legit_records_arrive()
