"""Zombie fencing between real node processes over real gRPC.

Acceptance: *a node still running with a stale epoch cannot get a delivery
accepted or commit.*

Two stages, each in its own ``millrace node`` process::

    in -> up (tests.workloads:Poison, node "z") -> ok -> down (Relay, node "d") -> relayed -> sink

The test process plays the source (:class:`tests.support.SourceDriver`), the
sink (:class:`tests.support.CollectingSink`) and, with a raw
``delivery_pb2_grpc.DeliveryStub``, the "newer owner" of an interval that Z
does not know it has lost. Two ways a running node learns it is a zombie are
exercised:

1. A receiver (D) has seen a newer epoch of Z's interval: Z's productions are
   rejected with ``STALE_SENDER_EPOCH``, never reach the sink, stay in Z's
   outbox (not dead-lettered, not acked), and Z fences itself: it answers
   every later delivery with ``NOT_OWNER`` and commits nothing.
2. A sender addresses Z with a ``target_epoch`` newer than Z's: Z answers
   ``NOT_OWNER`` for that batch but does not believe it (epochs come from the
   ownership registry, not from messages) and serves every later delivery.

Synchronisation point: Admin ``Status`` does not say whether an interval is
fenced (it keeps reporting the epoch the interval started with), so the tests
wait for the worker's ``interval up/0 fenced: ...`` warning in Z's log before
probing Z.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from millrace.computations import JSON, Computation, Context, IntervalId, Record, Topology
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc, delivery_pb2, delivery_pb2_grpc, record_pb2
from tests.support import CollectingSink, NodeProcess, SourceDriver, free_port, wait_until

pytestmark = pytest.mark.slow

Z_ASSIGNED_EPOCH = 3
"""The epoch the deployment gives node Z (not 1, so nothing passes by accident)."""


class Relay(Computation):
    """Downstream stage: counts records per key (state ``n``) and forwards each one."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.put_state("n", (ctx.get_state("n", JSON) or 0) + 1, JSON)
        ctx.produce("relayed", ctx.key, record.value)


# -- the cluster ----------------------------------------------------------------


@dataclass
class Cluster:
    """Z (upstream), D (downstream), the sink and the source, with admin/delivery stubs."""

    topology: Topology
    z: NodeProcess
    d: NodeProcess
    z_address: str
    d_address: str
    sink: CollectingSink
    driver: SourceDriver
    channels: list[grpc.Channel]

    def admin(self, address: str) -> admin_pb2_grpc.AdminStub:
        """An Admin stub on ``address``."""
        channel = grpc.insecure_channel(address)
        self.channels.append(channel)
        return admin_pb2_grpc.AdminStub(channel)

    def deliver(self, address: str, batch: delivery_pb2.DeliveryBatch) -> delivery_pb2.DeliveryAck:
        """Send one batch on a fresh ``Deliver`` stream and return its single ack."""
        channel = grpc.insecure_channel(address)
        self.channels.append(channel)
        acks = list(delivery_pb2_grpc.DeliveryStub(channel).Deliver(iter([batch]), timeout=20))
        assert len(acks) == 1, acks
        ack: delivery_pb2.DeliveryAck = acks[0]
        assert ack.batch_seq == batch.batch_seq
        return ack

    def z_status(self) -> admin_pb2.IntervalStatus:
        """Admin ``Status`` of Z's only interval (``up``/0)."""
        response = self.admin(self.z_address).Status(admin_pb2.StatusRequest())
        status: admin_pb2.IntervalStatus
        [status] = response.intervals
        assert (status.interval.computation, status.interval.index) == ("up", 0)
        return status

    def state(self, address: str, computation: str, key: bytes) -> admin_pb2.GetStateResponse:
        """Admin ``GetState`` of ``key`` in ``computation`` on the node at ``address``."""
        request = admin_pb2.GetStateRequest(computation=computation, key=key)
        response: admin_pb2.GetStateResponse = self.admin(address).GetState(request)
        return response

    def dead_letters(self, address: str, computation: str) -> list[admin_pb2.DeadLetter]:
        """Admin ``ListDeadLetters`` of ``computation`` on the node at ``address``."""
        request = admin_pb2.ListDeadLettersRequest(computation=computation)
        return list(self.admin(address).ListDeadLetters(request).dead_letters)

    def sink_values(self) -> set[bytes]:
        """Values the sink has received (each record once)."""
        return set(self.sink.values())


def write_cluster(tmp_path: Path, sink: str, z_port: int, d_port: int) -> Path:
    """Topology and deployment files for ``in -> up (z) -> ok -> down (d) -> relayed -> sink``."""
    (tmp_path / "topology.toml").write_text(
        """
[streams.in]
[streams.ok]
[streams.relayed]

[computations.up]
handler = "tests.workloads:Poison"
intervals = 1
inputs = { in = "key" }
outputs = ["ok"]

[computations.down]
handler = "tests.test_zombie_fencing:Relay"
intervals = 1
inputs = { ok = "key" }
outputs = ["relayed"]
"""
    )
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"

[nodes.z]
computation = "up"
intervals = [0]
address = "127.0.0.1:{z_port}"
epoch = {Z_ASSIGNED_EPOCH}

[nodes.d]
computation = "down"
intervals = [0]
address = "127.0.0.1:{d_port}"

[sinks.relayed]
address = "{sink}"
"""
    )
    return deployment


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A running two-stage cluster; torn down (processes terminated) after the test."""
    sink = CollectingSink()
    z_port, d_port = free_port(), free_port()
    deployment = write_cluster(tmp_path, sink.address, z_port, d_port)
    z = NodeProcess(deployment, "z", tmp_path / "data", tmp_path)
    d = NodeProcess(deployment, "d", tmp_path / "data", tmp_path)
    topology = Topology.load(tmp_path / "topology.toml")
    z_address, d_address = f"127.0.0.1:{z_port}", f"127.0.0.1:{d_port}"
    driver = SourceDriver(topology, "in", {IntervalId("up", 0): z_address})
    built = Cluster(topology, z, d, z_address, d_address, sink, driver, [])
    try:
        d.start()
        z.start()
        yield built
    finally:
        driver.stop()
        for channel in built.channels:
            channel.close()
        z.terminate()
        d.terminate()
        sink.stop()


# -- helpers ----------------------------------------------------------------------


def source_records(prefix: str, count: int) -> list[record_pb2.Record]:
    """``count`` records of stream ``in``, one key each, value ``<prefix>-<i>``."""
    return [
        record_pb2.Record(
            record_id=f"{prefix}-{i:04d}".encode(),
            key=f"k-{prefix}-{i}".encode(),
            value=f"{prefix}-{i}".encode(),
            event_time_ms=1_000 + i,
            stream="in",
            producer="source",
        )
        for i in range(count)
    ]


def fenced_in_log(node: NodeProcess) -> bool:
    """True once the node's worker logged that ``up``/0 was fenced."""
    return "interval up/0 fenced" in node.log_path.read_text(errors="replace")


def rejections(ack: delivery_pb2.DeliveryAck) -> dict[bytes, tuple[int, str]]:
    """Rejected record ids of an ack with their reason code and message."""
    return {r.record_id: (r.reason, r.message) for r in ack.rejected}


def direct_batch(
    *,
    target: IntervalId,
    records: list[record_pb2.Record],
    sender_interval: IntervalId | None = None,
    sender_epoch: int = 0,
    target_epoch: int = 0,
    sender_id: str = "test",
) -> delivery_pb2.DeliveryBatch:
    """A hand-made ``DeliveryBatch``, as some other (possibly newer) sender would send it."""
    batch = delivery_pb2.DeliveryBatch(
        batch_seq=1,
        target=record_pb2.KeyInterval(computation=target[0], index=target[1], count=1),
        target_epoch=target_epoch,
        records=records,
    )
    batch.sender.sender_id = sender_id
    batch.sender.epoch = sender_epoch
    if sender_interval is not None:
        batch.sender.interval.computation = sender_interval[0]
        batch.sender.interval.index = sender_interval[1]
        batch.sender.interval.count = 1
    return batch


def flow_through(cluster: Cluster, records: list[record_pb2.Record]) -> None:
    """Send ``records`` from the source and wait until all of them reach the sink."""
    cluster.driver.send(records)
    wait_until(lambda: cluster.driver.unacked() == 0, 20, "the source records to be acked by Z")
    expected = {r.value for r in records}
    wait_until(lambda: expected <= cluster.sink_values(), 20, "the records to reach the sink")
    wait_until(lambda: cluster.z_status().outbox_size == 0, 20, "Z's outbox to drain")


# -- 1. a receiver knows a newer epoch of the sender's interval ---------------------------


def test_zombie_sender_is_rejected_downstream_and_fences_itself(cluster: Cluster) -> None:
    """D learns that ``up``/0 has a newer owner; Z's later productions are rejected with
    ``STALE_SENDER_EPOCH`` and never reach the sink; Z fences itself and commits nothing more.

    What "no silent merge" is checked as, through Admin:

    - Z: its outbox still holds exactly the rejected productions (``outbox_size``);
      none was dead-lettered (the records are fine; their sender is not) and none was
      acked, so nothing pretends they were delivered.
    - D: no state for the zombie's keys, no dead letters; the sink never sees them.
    - A probe delivered to Z afterwards is answered ``NOT_OWNER`` naming the newer
      owner, and leaves no state behind on Z.
    """
    before = source_records("before", 20)
    flow_through(cluster, before)
    z_epoch = cluster.z_status().epoch
    assert z_epoch == Z_ASSIGNED_EPOCH

    # The "successor" of up/0 (epoch z_epoch + 1) delivers one harmless record to D.
    successor_record = record_pb2.Record(
        record_id=b"successor-0000",
        key=b"k-successor",
        value=b"from-the-successor",
        event_time_ms=5_000,
        stream="ok",
        producer="up",
    )
    ack = cluster.deliver(
        cluster.d_address,
        direct_batch(
            target=IntervalId("down", 0),
            records=[successor_record],
            sender_interval=IntervalId("up", 0),
            sender_epoch=z_epoch + 1,
            sender_id="z-successor",
        ),
    )
    assert list(ack.committed_ids) == [successor_record.record_id], ack
    assert not ack.rejected and ack.receiver_epoch > 0
    wait_until(lambda: b"from-the-successor" in cluster.sink_values(), 20, "the successor's record")

    # D must remember the newer epoch durably: SIGKILL it and start it again.
    cluster.d.kill()
    cluster.d.start()

    # Z still thinks it owns up/0: it commits new records (it cannot know yet) ...
    after = source_records("after", 10)
    cluster.driver.send(after)
    wait_until(lambda: cluster.driver.unacked() == 0, 20, "Z to commit the new records")
    # ... but D rejects their productions, and Z fences itself.
    wait_until(lambda: fenced_in_log(cluster.z), 20, "Z to log that it was fenced")
    time.sleep(2.0)  # a production that slipped through would reach the sink by now

    after_values = {r.value for r in after}
    assert not after_values & cluster.sink_values(), "a zombie's production reached the sink"
    assert cluster.sink_values() == {r.value for r in before} | {b"from-the-successor"}
    for record in after:
        assert not cluster.state(cluster.d_address, "down", record.key).found
    assert cluster.dead_letters(cluster.d_address, "down") == []

    status = cluster.z_status()
    assert status.outbox_size == len(after), "the rejected productions must stay withheld"
    assert cluster.dead_letters(cluster.z_address, "up") == []

    # The zombie can no longer commit: a further delivery is refused as NOT_OWNER.
    probe = source_records("probe", 1)
    ack = cluster.deliver(
        cluster.z_address, direct_batch(target=IntervalId("up", 0), records=probe)
    )
    assert not ack.committed_ids and not ack.duplicate_ids, ack
    [(reason, message)] = rejections(ack).values()
    assert reason == delivery_pb2.NOT_OWNER, ack
    assert "newer owner" in message and f"epoch {z_epoch}" in message, message
    assert ack.receiver_epoch == 0
    assert not cluster.state(cluster.z_address, "up", probe[0].key).found

    # Nothing leaked afterwards either (the outbox is not resent to anyone).
    time.sleep(0.5)
    assert not after_values & cluster.sink_values()
    assert cluster.z_status().outbox_size == len(after)


# -- 2. a sender knows a newer epoch of the receiver's interval ---------------------------


def test_a_newer_target_epoch_is_refused_not_believed(cluster: Cluster) -> None:
    """A batch whose ``target_epoch`` is newer than Z's own epoch is refused ``NOT_OWNER``,
    but Z does not fence itself on a message's word (issue 15: anyone can send one):
    epochs come from the registry. Z keeps its epoch and serves every later delivery."""
    flow_through(cluster, source_records("before", 5))
    z_epoch = cluster.z_status().epoch
    assert z_epoch == Z_ASSIGNED_EPOCH

    # Control: a sender that names Z's current epoch is served normally.
    current = source_records("current", 1)
    ack = cluster.deliver(
        cluster.z_address,
        direct_batch(target=IntervalId("up", 0), records=current, target_epoch=z_epoch),
    )
    assert list(ack.committed_ids) == [current[0].record_id], ack
    assert ack.receiver_epoch == z_epoch
    wait_until(lambda: b"current-0" in cluster.sink_values(), 20, "the control record")

    for forged in (z_epoch + 1, z_epoch + 100, 2**63 - 1):
        newer = source_records(f"newer{forged}", 1)
        ack = cluster.deliver(
            cluster.z_address,
            direct_batch(target=IntervalId("up", 0), records=newer, target_epoch=forged),
        )
        assert not ack.committed_ids and not ack.duplicate_ids, ack
        [(reason, message)] = rejections(ack).values()
        assert reason == delivery_pb2.NOT_OWNER, ack
        assert f"the batch is for epoch {forged}" in message, message
        assert not cluster.state(cluster.z_address, "up", newer[0].key).found

    # Z was not fenced: it keeps its epoch and commits what genuine senders send.
    flow_through(cluster, source_records("after", 5))
    assert cluster.z_status().epoch == z_epoch
    assert not fenced_in_log(cluster.z)
    assert cluster.dead_letters(cluster.z_address, "up") == []
