"""``Forwarder``: per-consumer acknowledged offsets, persisted and resumed.

A real :class:`StreamLog` in ``tmp_path``; the network edge is a fake sender
that records what each consumer was sent and acknowledges it (or not) on the
spot, so acks usually arrive before the forwarder has moved its read offset.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from millrace.computations import Topology
from millrace.delivery._sender import Origin
from millrace.engine._frames import Frame, encode_frame
from millrace.injector.forwarder import READ_BYTES, Forwarder
from millrace.injector.log import AppendRequest, LogConfig, StreamLog
from tests.support import wait_until

STREAM = "events"
RECORDS = 10
BASE_MS = 1_000_000


def two_consumer_topology() -> Topology:
    """``events`` feeds two computations: ``a`` (2 intervals) and ``b``."""
    reads = {"handler": "tests.workloads:Poison", "inputs": {STREAM: "key"}}
    return Topology.from_dict(
        {"streams": {STREAM: {}}, "computations": {"a": {**reads, "intervals": 2}, "b": reads}}
    )


class FakeNodes:
    """Every address's sender: records deliveries per consumer, acks the ``acking`` ones."""

    def __init__(self, acking: set[str]) -> None:
        self.acking = acking
        self.sent: dict[str, list[int]] = {}
        self.forwarder: Forwarder | None = None
        self.failures = 0
        self._lock = threading.Lock()

    def __call__(self, address: str) -> FakeNodes:
        return self

    def submit_frames(self, origin: Origin, frames: Sequence[Frame]) -> None:
        for frame in frames:  # built in place: the bytes encode_frame makes of its records
            assert frame.payload == encode_frame(frame.consumer, frame.interval, frame.productions)
        productions = [p for frame in frames for p in frame.productions]
        if self.failures:
            self.failures -= 1
            raise OSError("the network is down")
        acked = []
        with self._lock:
            for production in productions:
                offset = int.from_bytes(production.record.record_id[8:], "big")
                self.sent.setdefault(production.consumer, []).append(offset)
                if production.consumer in self.acking:
                    acked.append(production.outbox_key)
        assert self.forwarder is not None
        if acked:
            self.forwarder.acked_keys(acked)

    def offsets(self, consumer: str) -> list[int]:
        with self._lock:
            return sorted(self.sent.get(consumer, []))


@pytest.fixture
def stream_log(tmp_path: Path) -> Iterator[StreamLog]:
    log = StreamLog.open(tmp_path / STREAM, STREAM, config=LogConfig(fsync=False))
    log.append(
        [AppendRequest(records=[(f"k{i}".encode(), b"v", BASE_MS + i) for i in range(RECORDS)])]
    )
    yield log
    log.close()


def forwarder_for(log: StreamLog, nodes: FakeNodes) -> Forwarder:
    forwarder = Forwarder(
        log,
        two_consumer_topology(),
        lambda name, interval: nodes(f"{name}/{interval}"),
        log.directory / "forwarded.json",
    )
    nodes.forwarder = forwarder
    return forwarder


def run(log: StreamLog, nodes: FakeNodes, done: Callable[[Forwarder], bool]) -> Forwarder:
    """Forward until ``done``, then stop (which persists the offsets)."""
    forwarder = forwarder_for(log, nodes)
    forwarder.start()
    try:
        wait_until(lambda: done(forwarder), 20, "forwarding")
    finally:
        forwarder.stop()
    return forwarder


def saved(log: StreamLog) -> dict[str, object]:
    state: dict[str, object] = json.loads((log.directory / "forwarded.json").read_text())
    return state


def test_each_consumer_has_its_own_acknowledged_offset(stream_log: StreamLog) -> None:
    nodes = FakeNodes(acking={"a"})
    forwarder = run(
        stream_log,
        nodes,
        lambda f: f.forwarded_offset == RECORDS and len(nodes.offsets("b")) == RECORDS,
    )
    assert nodes.offsets("a") == nodes.offsets("b") == list(range(RECORDS))
    # The acks came back before the read offset moved past these records.
    assert forwarder.consumer_acked_offset("a") == RECORDS
    assert forwarder.consumer_acked_offset("b") == 0
    assert forwarder.acked_offset == 0, "the minimum: what retention may delete below"
    assert forwarder.lag_records("a") == 0
    assert forwarder.lag_records("b") == RECORDS
    assert forwarder.lag_records() == RECORDS
    assert forwarder.oldest_unfinished_ms("a") is None
    assert forwarder.oldest_unfinished_ms("b") == BASE_MS
    assert forwarder.oldest_unfinished_ms() == BASE_MS
    assert saved(stream_log) == {
        "stream": STREAM,
        "acked_offset": 0,
        "consumers": {"a": RECORDS, "b": 0},
    }


def test_a_restart_resends_only_to_the_consumer_that_did_not_ack(stream_log: StreamLog) -> None:
    first = FakeNodes(acking={"a"})
    run(stream_log, first, lambda f: f.consumer_acked_offset("a") == RECORDS)

    again = FakeNodes(acking={"a", "b"})
    forwarder = run(stream_log, again, lambda f: f.acked_offset == RECORDS)
    # ``a`` acked everything before the restart: an ack of a resend would have
    # come back (synchronously) before the minimum could reach the end.
    assert again.offsets("a") == []
    assert again.offsets("b") == list(range(RECORDS))
    assert forwarder.lag_records("a") == forwarder.lag_records("b") == 0
    assert saved(stream_log)["consumers"] == {"a": RECORDS, "b": RECORDS}


def test_a_restart_resumes_each_consumer_at_its_own_offset(stream_log: StreamLog) -> None:
    (stream_log.directory / "forwarded.json").write_text(
        json.dumps({"stream": STREAM, "acked_offset": 3, "consumers": {"a": 7, "b": 3}})
    )
    nodes = FakeNodes(acking={"a", "b"})
    forwarder = run(stream_log, nodes, lambda f: f.acked_offset == RECORDS)
    assert nodes.offsets("a") == list(range(7, RECORDS))
    assert nodes.offsets("b") == list(range(3, RECORDS))
    assert forwarder.lag_records() == 0


def test_the_earlier_format_gives_every_consumer_the_streams_offset(
    stream_log: StreamLog,
) -> None:
    (stream_log.directory / "forwarded.json").write_text(
        json.dumps({"stream": STREAM, "acked_offset": 4})
    )
    nodes = FakeNodes(acking={"a", "b"})
    forwarder = forwarder_for(stream_log, nodes)
    assert forwarder.consumer_acked_offset("a") == forwarder.consumer_acked_offset("b") == 4
    assert forwarder.acked_offset == forwarder.forwarded_offset == 4
    forwarder.start()
    try:
        wait_until(lambda: forwarder.acked_offset == RECORDS, 20, "forwarding")
    finally:
        forwarder.stop()
    assert nodes.offsets("a") == nodes.offsets("b") == list(range(4, RECORDS))
    assert saved(stream_log) == {
        "stream": STREAM,
        "acked_offset": RECORDS,
        "consumers": {"a": RECORDS, "b": RECORDS},
    }


def test_a_consumer_the_file_does_not_name_starts_at_the_streams_offset(
    stream_log: StreamLog,
) -> None:
    (stream_log.directory / "forwarded.json").write_text(
        json.dumps({"stream": STREAM, "acked_offset": 2, "consumers": {"a": 6}})
    )
    forwarder = forwarder_for(stream_log, FakeNodes(acking=set()))
    assert forwarder.consumer_acked_offset("a") == 6
    assert forwarder.consumer_acked_offset("b") == 2
    assert forwarder.forwarded_offset == 2


def test_acks_in_any_order_move_a_consumer_to_its_first_unacked_offset(
    stream_log: StreamLog,
) -> None:
    nodes = FakeNodes(acking=set())
    keys: dict[tuple[str, int], bytes] = {}

    def keep(origin: Origin, frames: Sequence[Frame]) -> None:
        for production in (p for frame in frames for p in frame.productions):
            offset = int.from_bytes(production.record.record_id[8:], "big")
            keys[production.consumer, offset] = production.outbox_key

    nodes.submit_frames = keep  # type: ignore[method-assign]
    forwarder = forwarder_for(stream_log, nodes)
    forwarder.start()
    try:
        wait_until(lambda: forwarder.forwarded_offset == RECORDS, 20, "forwarding")
        forwarder.acked_keys([keys["a", i] for i in (1, 2, 5)])
        assert forwarder.consumer_acked_offset("a") == 0, "offset 0 is still unacked"
        forwarder.acked_keys([keys["a", 0], keys["a", 0], keys["b", 0]])  # a repeated ack
        assert forwarder.consumer_acked_offset("a") == 3
        assert forwarder.consumer_acked_offset("b") == 1
        assert forwarder.acked_offset == 1
        forwarder.acked_keys([b"gone\x00" + keys["a", 3][2:]])  # a consumer no longer here
        assert forwarder.consumer_acked_offset("a") == 3
        forwarder.acked_keys([b"short", keys["a", 3][:-1], keys["a", 3][1:]])  # not keys
        assert forwarder.consumer_acked_offset("a") == 3
        assert forwarder.lag_records("a") == RECORDS - 3
        assert forwarder.oldest_unfinished_ms("a") == BASE_MS, "a group's minimum holds"
    finally:
        forwarder.stop()
    assert saved(stream_log)["consumers"] == {"a": 3, "b": 1}


def test_a_failed_send_is_retried(stream_log: StreamLog) -> None:
    nodes = FakeNodes(acking={"a", "b"})
    nodes.failures = 1
    run(stream_log, nodes, lambda f: f.acked_offset == RECORDS)
    assert set(nodes.offsets("a")) == set(nodes.offsets("b")) == set(range(RECORDS))


def test_a_step_of_big_records_stops_at_its_byte_budget(tmp_path: Path) -> None:
    """Frames stay under gRPC's message limit whatever the records' size: a step reads
    records only up to ``READ_BYTES`` of keys and values; every record still goes."""
    log = StreamLog.open(tmp_path / STREAM, STREAM, config=LogConfig(fsync=False))
    value = b"x" * (1 << 20)
    count = 3 * (READ_BYTES >> 20) + 2  # a little more than three budgets' worth
    log.append([AppendRequest(records=[(b"k%d" % i, value, BASE_MS) for i in range(count)])])
    nodes = FakeNodes(acking={"a", "b"})
    biggest: list[int] = []
    submit = nodes.submit_frames

    def measured(origin: Origin, frames: Sequence[Frame]) -> None:
        biggest.extend(len(frame.payload or b"") for frame in frames)
        submit(origin, frames)

    nodes.submit_frames = measured  # type: ignore[method-assign]
    try:
        run(log, nodes, lambda f: f.acked_offset == count)
    finally:
        log.close()
    assert nodes.offsets("a") == nodes.offsets("b") == list(range(count))
    assert 0 < max(biggest) <= READ_BYTES + (64 << 10)
