"""Zombies and refused starts: afterwards exactly one owner runs, every record arrives once.

Issue 14, with real processes (injector, node ``up``, a sink) and no restart by hand:

- a second ``up`` started beside the running one (same data directory, same port);
- a replacement started while ``up`` is paused (SIGSTOP): same or copied data
  directory, same or new port. A start that meets the store lock or the port
  fails before asking the registry for anything, so the paused owner carries
  on once resumed; a replacement with a copy on a new port becomes the owner,
  senders follow its registration, and the resumed zombie fences itself
  without acknowledging anything;
- a lost ``ownership.json``: the restarted node still gets an epoch above the
  one its store claimed;
- the registry lost, the owner paused, a replacement on a fresh disk, the owner
  resumed (issue 33): with any one record of the grants left, the replacement's
  epoch is newer and the zombie fences itself; with none left, the zombie finds
  the conflict, says so (log, ``Admin.Status``) and fences itself.

Afterwards the registry names one owner, every record ingested (20 before,
20 after) is at the sink, and the owner's state counted each record once.
"""

from __future__ import annotations

import shutil
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from millrace.injector.client import IngestClient
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc, control_pb2, control_pb2_grpc
from tests.support import CollectingSink, InjectorProcess, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow

KEY = b"k"


@dataclass
class Cluster:
    tmp_path: Path
    deployment: Path
    injector: InjectorProcess
    owner: NodeProcess
    sink: CollectingSink
    injector_address: str
    node_address: str
    ingested: int = 0

    def ingest(self, count: int) -> None:
        client = IngestClient(self.injector_address, timeout_s=5)
        for _ in range(count):
            n = self.ingested
            client.ingest("in", [(KEY, f"v{n}".encode(), n)], idempotency_key=f"r{n}")
            self.ingested += 1
        client.close()

    def all_arrive(self) -> None:
        expected = {f"v{n}".encode() for n in range(self.ingested)}
        wait_until(lambda: set(self.sink.values()) == expected, 60, "every record at the sink")

    def lease(self) -> control_pb2.IntervalLease:
        with grpc.insecure_channel(self.injector_address) as channel:
            stub = control_pb2_grpc.ControlStub(channel)
            leases = list(stub.GetAssignment(control_pb2.GetAssignmentRequest()).leases)
        lease: control_pb2.IntervalLease = leases[0]
        assert len(leases) == 1
        return lease

    def count_at(self, address: str) -> int:
        """The owner's state: how many records it counted for the one key."""
        with grpc.insecure_channel(address) as channel:
            response = admin_pb2_grpc.AdminStub(channel).GetState(
                admin_pb2.GetStateRequest(computation="up", key=KEY), timeout=10
            )
        [entry] = [e for e in response.entries if e.tag == "n"]
        return int(entry.value)

    def replacement(self, data_dir: Path, port: int | None, name: str) -> NodeProcess:
        address = None if port is None else f"127.0.0.1:{port}"
        return NodeProcess(
            self.deployment, "up", data_dir, self.tmp_path / name, address=address,
            log_level="INFO",
        )  # fmt: skip


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    ports = {name: free_port() for name in ("injector", "up")}
    sink = CollectingSink()
    (tmp_path / "topology.toml").write_text(
        """
[streams.in]
[streams.ok]
[computations.up]
handler = "tests.workloads:Poison"
inputs = { in = "key" }
outputs = ["ok"]
"""
    )
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
authority = "127.0.0.1:{ports["injector"]}"
[injector]
address = "127.0.0.1:{ports["injector"]}"
[nodes.up]
computation = "up"
intervals = [0]
address = "127.0.0.1:{ports["up"]}"
[sinks.ok]
address = "{sink.address}"
"""
    )
    injector = InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log")
    injector.start()
    owner = NodeProcess(
        deployment, "up", tmp_path / "data", tmp_path, log_level="INFO",
        metrics_port=free_port(),
    )  # fmt: skip
    owner.start()
    made = Cluster(
        tmp_path, deployment, injector, owner, sink,
        f"127.0.0.1:{ports['injector']}", f"127.0.0.1:{ports['up']}",
    )  # fmt: skip
    made.ingest(20)
    made.all_arrive()
    try:
        yield made
    finally:
        owner.kill()
        injector.kill()
        sink.stop()


def refused(node: NodeProcess, reason: str) -> None:
    """``node`` fails to start, exit status 2, saying ``reason``."""
    with pytest.raises(RuntimeError, match="did not start"):
        node.start()
    assert node.process is not None and node.process.wait(10) == 2
    assert reason in node.log_path.read_text()


def test_a_duplicate_start_leaves_the_running_owner_alone(cluster: Cluster) -> None:
    epoch = cluster.lease().epoch
    (cluster.tmp_path / "second").mkdir()
    duplicate = cluster.replacement(cluster.tmp_path / "data", None, "second")
    refused(duplicate, "is locked by another process")
    assert cluster.lease().epoch == epoch, "the refused start asked the registry for nothing"
    cluster.ingest(20)
    cluster.all_arrive()
    assert cluster.count_at(cluster.node_address) == 40


@pytest.mark.parametrize(
    ("copied", "new_port", "reason"),
    [
        (False, False, "is locked by another process"),
        (True, False, "is in use by another process"),
        (False, True, "is locked by another process"),
    ],
)
def test_a_refused_replacement_of_a_paused_owner_changes_nothing(
    cluster: Cluster, copied: bool, new_port: bool, reason: str
) -> None:
    epoch = cluster.lease().epoch
    cluster.owner.pause()
    try:
        data = cluster.tmp_path / "data"
        if copied:
            shutil.copytree(data, cluster.tmp_path / "copy")
            data = cluster.tmp_path / "copy"
        (cluster.tmp_path / "second").mkdir()
        replacement = cluster.replacement(data, free_port() if new_port else None, "second")
        refused(replacement, reason)
    finally:
        cluster.owner.resume()
    assert cluster.lease().epoch == epoch
    cluster.ingest(20)
    cluster.all_arrive()
    assert cluster.count_at(cluster.node_address) == 40


def test_a_replacement_with_a_copy_on_a_new_port_takes_over_from_the_paused_owner(
    cluster: Cluster,
) -> None:
    epoch = cluster.lease().epoch
    cluster.owner.pause()
    shutil.copytree(cluster.tmp_path / "data", cluster.tmp_path / "copy")
    (cluster.tmp_path / "second").mkdir()
    port = free_port()
    replacement = cluster.replacement(cluster.tmp_path / "copy", port, "second")
    try:
        replacement.start()
        lease = cluster.lease()
        assert lease.epoch > epoch and lease.address == f"127.0.0.1:{port}"
        cluster.ingest(10)  # routed to the replacement: the forwarder follows the lease
        cluster.owner.resume()  # the zombie wakes up with records it never acknowledged
        cluster.ingest(10)
        cluster.all_arrive()
        wait_until(
            lambda: "fenced" in cluster.owner.log_path.read_text(), 20, "the zombie to fence itself"
        )
        time.sleep(1.0)
        assert cluster.lease().address == f"127.0.0.1:{port}", "one owner: the replacement"
        assert cluster.count_at(f"127.0.0.1:{port}") == 40, "each record counted once"
    finally:
        replacement.kill()


def test_a_lost_ownership_journal_never_hands_out_an_old_epoch(cluster: Cluster) -> None:
    epoch = cluster.lease().epoch
    cluster.injector.terminate()
    (cluster.tmp_path / "log" / "ownership.json").unlink()
    (cluster.tmp_path / "log" / "watermarks.json").unlink(missing_ok=True)  # lost too
    (cluster.tmp_path / "log" / "epochs.json").unlink()  # and the grants' second record
    cluster.injector.start()
    cluster.owner.kill()
    cluster.owner.start()  # shows the epoch its store claimed
    assert cluster.lease().epoch > epoch
    cluster.ingest(20)
    cluster.all_arrive()
    assert cluster.count_at(cluster.node_address) == 40


def paused_owner_replaced_on_a_fresh_disk(
    cluster: Cluster, lost: tuple[str, ...]
) -> tuple[int, NodeProcess, str]:
    """The registry's files ``lost`` (injector restarted), the owner paused, a replacement
    on a fresh disk and a new port started: the old epoch, the replacement, its address."""
    epoch = cluster.lease().epoch
    cluster.injector.terminate()
    for name in lost:
        (cluster.tmp_path / "log" / name).unlink(missing_ok=True)
    cluster.injector.start()
    cluster.owner.pause()
    (cluster.tmp_path / "fresh").mkdir()
    port = free_port()
    replacement = cluster.replacement(cluster.tmp_path / "fresh" / "data", port, "fresh")
    try:
        replacement.start()
    except BaseException:
        cluster.owner.resume()
        raise
    assert cluster.lease().address == f"127.0.0.1:{port}"
    return epoch, replacement, f"127.0.0.1:{port}"


@pytest.mark.parametrize(
    "lost",
    [
        ("ownership.json",),
        ("ownership.json", "watermarks.json"),
        ("epochs.json", "watermarks.json"),
    ],
)
def test_a_paused_owner_is_fenced_by_a_fresh_replacement_after_the_registry_is_lost(
    cluster: Cluster, lost: tuple[str, ...]
) -> None:
    """Issue 33's case from outside (it failed with both ownership.json and
    watermarks.json lost: the replacement got the zombie's epoch): the replacement owns
    a newer epoch, the zombie fences itself, every record reaches the sink."""
    epoch, replacement, address = paused_owner_replaced_on_a_fresh_disk(cluster, lost)
    try:
        assert cluster.lease().epoch > epoch, "an epoch above every one granted before"
        cluster.ingest(10)
        cluster.owner.resume()
        cluster.ingest(10)
        cluster.all_arrive()
        wait_until(
            lambda: "fenced" in cluster.owner.log_path.read_text(), 20, "the zombie to fence itself"
        )
        assert cluster.lease().address == address, "one owner: the replacement"
    finally:
        replacement.kill()


def test_a_registry_that_lost_every_record_of_its_grants_is_a_conflict_said_loudly(
    cluster: Cluster,
) -> None:
    """Nothing left to know the old epoch by: the replacement is leased the zombie's own
    epoch. The zombie, resumed, sees its interval leased elsewhere at an epoch not above
    its own: it says so (an error in its log, the reason in ``Admin.Status``, a count in
    ``millrace_lease_conflicts_total``) and stops writing the interval; the replacement
    serves it and every record arrives."""
    lost = ("ownership.json", "epochs.json", "watermarks.json")
    epoch, replacement, address = paused_owner_replaced_on_a_fresh_disk(cluster, lost)
    try:
        assert cluster.lease().epoch <= epoch, "nothing recorded the old epoch"
        cluster.ingest(10)
        cluster.owner.resume()
        cluster.ingest(10)
        cluster.all_arrive()
        wait_until(
            lambda: "lease conflict" in cluster.owner.log_path.read_text(), 20, "the conflict"
        )
        with grpc.insecure_channel(cluster.node_address) as channel:
            status = admin_pb2_grpc.AdminStub(channel).Status(admin_pb2.StatusRequest(), timeout=10)
        [interval] = status.intervals
        assert "lease conflict" in interval.fenced_reason
        assert cluster.owner.metrics_port is not None
        url = f"http://127.0.0.1:{cluster.owner.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            metrics = response.read().decode()
        assert 'millrace_lease_conflicts_total{computation="up"} 1.0' in metrics
        assert cluster.lease().address == address, "one owner: the replacement"
    finally:
        replacement.kill()
