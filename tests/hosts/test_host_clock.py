"""The test hosts' fake wall clock (``tests/support/host_clock/sitecustomize.py``): a
process started with it reads the machine's clock plus its file's offset, follows the
file when it changes (a clock step, forward or back), and gRPC's modules keep the
machine's clock. And what the nemesis's clock steps found, on real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from millrace.injector.client import IngestClient
from tests.support import ROOT, InjectorProcess, NodeProcess, free_port
from tests.support.watermarks import published_watermarks
from tests.workloads import two_stage_topology_toml

HOST_CLOCK = ROOT / "tests" / "support" / "host_clock"
PROBE = """
import json, sys, time
import grpc._channel as channel
print(json.dumps([time.time(), channel.time.time()]), flush=True)
sys.stdin.readline()  # the test has stepped the clock
time.sleep(0.2)  # past the fake's re-read interval
print(json.dumps([time.time(), channel.time.time()]), flush=True)
"""


def test_a_host_clock_is_offset_and_jumps_when_its_file_changes(tmp_path: Path) -> None:
    clock = tmp_path / "host.clock"
    clock.write_text("70000\n")
    probe = subprocess.Popen(
        [sys.executable, "-c", PROBE],
        env={"PYTHONPATH": f"{HOST_CLOCK}:{ROOT}", "MILLRACE_TEST_CLOCK_FILE": str(clock)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert probe.stdin is not None and probe.stdout is not None
    faked, grpcs = json.loads(probe.stdout.readline())
    now = time.time()
    assert abs(faked - now - 70) < 5 and abs(grpcs - now) < 5
    clock.with_suffix(".new").write_text("-50000\n")
    clock.with_suffix(".new").replace(clock)  # a step back by two minutes
    probe.stdin.write("\n")
    probe.stdin.flush()
    faked, grpcs = json.loads(probe.stdout.readline())
    now = time.time()
    assert abs(faked - now + 50) < 5 and abs(grpcs - now) < 5
    assert probe.wait(30) == 0


@pytest.mark.slow
def test_a_wall_clock_stepped_forward_does_not_make_a_busy_source_idle(tmp_path: Path) -> None:
    """Found by the nemesis's clock steps: the injector measured a source's idleness on
    the wall clock, so a step forward by more than the idle timeout made a source that
    was receiving records every 50 ms look idle, and its watermark jumped ahead of its
    newest record by the step (every window in between fired early, then again).
    Idleness is elapsed time: the source watermark must stay behind what was ingested."""
    (tmp_path / "topology.toml").write_text(two_stage_topology_toml(2_000))
    at = {name: f"127.0.0.1:{free_port()}" for name in ("injector", "counts", "totals")}
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "{at["injector"]}"
out_of_orderness_ms = 1000
idle_timeout_ms = 2000
[nodes.counts]
computation = "counts"
intervals = [0, 1]
address = "{at["counts"]}"
[nodes.totals]
computation = "totals"
intervals = [0, 1]
address = "{at["totals"]}"
[sinks.window_totals]
address = "127.0.0.1:{free_port()}"
"""
    )
    clock = tmp_path / "injector.clock"
    clock.write_text("0\n")
    injector = InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log")
    injector.env = {"PYTHONPATH": f"{HOST_CLOCK}:{ROOT}", "MILLRACE_TEST_CLOCK_FILE": str(clock)}
    nodes = [
        NodeProcess(deployment, name, tmp_path / name, tmp_path) for name in ("counts", "totals")
    ]
    children = [injector, *nodes]
    try:
        for child in children:
            child.start()
        client = IngestClient(at["injector"], timeout_s=5)
        t0, sent, newest, ahead = 1_700_000_000_000, 0, 0, []

        def ingest_for(seconds: float) -> None:
            nonlocal sent, newest
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                rows = [(f"k{i % 7}".encode(), b"1", t0 + (sent + i) * 5) for i in range(50)]
                client.ingest("events", rows, idempotency_key=f"b{sent}", give_up_after_s=60)
                sent += len(rows)
                newest = t0 + (sent - 1) * 5
                mark = published_watermarks(at["injector"]).get("source:events", 0)
                if mark > newest:
                    ahead.append(mark - newest)
                time.sleep(0.05)

        ingest_for(3.0)
        clock.with_suffix(".new").write_text("60000\n")
        clock.with_suffix(".new").replace(clock)  # the injector's wall clock: a minute ahead
        ingest_for(3.0)
        assert sent > 0 and ahead == [], (
            f"the source watermark ran ahead of its records by {ahead[:3]} ms"
        )
    finally:
        for child in children:
            child.kill()
