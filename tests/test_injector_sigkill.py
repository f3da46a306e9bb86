"""The injector under SIGKILL: acknowledged appends survive exactly once.

Concurrent clients push requests with idempotency keys and retry each one
until it is acknowledged, while the injector process is SIGKILLed and
restarted at random moments. Afterwards the log, read directly, must hold
every request exactly once (acknowledged before a kill or after a retry),
at the offsets its acknowledgement named, with nothing partial.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from millrace.injector.client import IngestClient
from millrace.injector.log import StreamLog, offset_of
from tests.support import InjectorProcess, chaos_kills, chaos_rng, free_port

pytestmark = pytest.mark.slow

CLIENTS = 4
REQUESTS_PER_CLIENT = 60
RECORDS_PER_REQUEST = 50
MIN_KILLS = chaos_kills(20)


def write_deployment(tmp_path: Path, port: int) -> Path:
    (tmp_path / "topology.toml").write_text(
        """
[streams.events]
[streams.out]
[computations.count]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["out"]
"""
    )
    deployment = tmp_path / "deployment.toml"
    node_port = free_port()  # no node runs: forwarding simply keeps retrying
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{port}"
[nodes.count]
computation = "count"
intervals = [0]
address = "127.0.0.1:{node_port}"
[sinks.out]
address = "127.0.0.1:{node_port}"
"""
    )
    return deployment


def test_acknowledged_records_survive_sigkill_exactly_once(tmp_path: Path) -> None:
    rng = chaos_rng(4)
    port = free_port()
    deployment = write_deployment(tmp_path, port)
    log_dir = tmp_path / "log"
    injector = InjectorProcess(deployment, log_dir, tmp_path / "injector.log")
    injector.start()
    acked: dict[str, tuple[int, int]] = {}
    acked_lock = threading.Lock()
    done = threading.Event()

    def client(number: int) -> None:
        ingest = IngestClient(f"127.0.0.1:{port}", timeout_s=5)
        for request in range(REQUESTS_PER_CLIENT):
            key = f"c{number}-r{request}"
            records = [
                (f"k{i % 7}".encode(), f"{key}-{i}".encode(), request * 100 + i)
                for i in range(RECORDS_PER_REQUEST)
            ]
            response = ingest.ingest("events", records, idempotency_key=key)
            assert len(response.record_ids) == RECORDS_PER_REQUEST
            with acked_lock:
                acked[key] = (response.first_offset, len(response.record_ids))
            time.sleep(rng.uniform(0, 0.01))
        ingest.close()

    clients = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in clients:
        thread.start()
    kills = 0
    reopened_cleanly = 0
    while any(t.is_alive() for t in clients) or kills < MIN_KILLS:
        time.sleep(rng.uniform(0.05, 0.4))
        injector.kill()
        kills += 1
        stream_log = StreamLog.open(log_dir / "events", "events")  # must always reopen
        reopened_cleanly += 1
        stream_log.close()
        injector.start()
        if kills > 200:
            break
    for thread in clients:
        thread.join(60)
    done.set()
    injector.terminate()

    assert kills >= MIN_KILLS and reopened_cleanly == kills
    assert len(acked) == CLIENTS * REQUESTS_PER_CLIENT, "every request was eventually acked"
    stream_log = StreamLog.open(log_dir / "events", "events")
    records = stream_log.read(0, 10**9)
    stream_log.close()
    values = [r.value.decode() for r in records]
    assert len(values) == len(set(values)), "no record appears twice"
    assert [r.offset for r in records] == list(range(len(records))), "offsets are dense"
    assert len(records) == CLIENTS * REQUESTS_PER_CLIENT * RECORDS_PER_REQUEST
    by_offset = {r.offset: r for r in records}
    for key, (first, count) in acked.items():
        for i in range(count):
            record = by_offset[first + i]
            assert record.value == f"{key}-{i}".encode(), "the ack named the right offsets"
            assert offset_of(record.record_id) == first + i
