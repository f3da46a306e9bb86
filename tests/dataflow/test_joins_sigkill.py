"""Joins across real node processes, each SIGKILLed and restarted once.

``clicks, views -> pairs (dataflow:IntervalJoin) -> pairs -> enrich (dataflow:TableJoin,
event-time mode, 2 intervals) <- customers (Debezium) -> enriched -> sink``. The test
process is the source of the three streams (resending until acked, some records
twice), hosts the watermark authority (each stream's watermark held under its
newest time sent and its oldest unacked record) and the sink. Once the watermark
passes everything, the sink holds exactly one enriched pair per click and view
that meet, each with its customer's row as of the pair's time: a nested loop and
an as-of lookup in plain Python.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from millrace.computations import MAX_TIME, IntervalId, Topology
from millrace.injector.authority_service import create_authority_server
from millrace.injector.watermark_authority import WatermarkAuthority
from millrace.wire.v1 import record_pb2
from tests.support import (
    CollectingSink,
    NodeProcess,
    SourceDriver,
    chaos_rng,
    free_port,
    wait_quiescent,
    wait_until,
)

pytestmark = pytest.mark.slow

EVENTS = 6_000
KEYS = 30
STEP_MS = 2
BOUND_MS = 1_000
LOWER_MS, UPPER_MS = -200, 200
CHUNK = 500

TOPOLOGY = f"""
[streams.clicks]
[streams.views]
[streams.customers]
[streams.pairs]
[streams.enriched]
[streams.late_pairs]
[streams.late_enriched]

[computations.pairs]
handler = "millrace.dataflow:IntervalJoin"
inputs = {{ clicks = "key", views = "key" }}
outputs = ["pairs", "late_pairs"]
[computations.pairs.params]
left = "clicks"
right = "views"
lower_ms = {LOWER_MS}
upper_ms = {UPPER_MS}
output = "pairs"
late_output = "late_pairs"

[computations.enrich]
handler = "millrace.dataflow:TableJoin"
intervals = 2
inputs = {{ pairs = "key", customers = "key" }}
outputs = ["enriched", "late_enriched"]
[computations.enrich.params]
stream = "pairs"
table = "customers"
changelog = "debezium"
mode = "event_time"
how = "left"
output = "enriched"
late_output = "late_enriched"
"""


def write_deployment(tmp_path: Path, sink: str, authority: str, ports: dict[str, int]) -> Path:
    sinks = "".join(
        f'[sinks.{s}]\naddress = "{sink}"\n' for s in ("enriched", "late_pairs", "late_enriched")
    )
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
authority = "{authority}"
[nodes.pairs]
computation = "pairs"
intervals = [0]
address = "127.0.0.1:{ports["pairs"]}"
[nodes.enrich]
computation = "enrich"
intervals = [0, 1]
address = "127.0.0.1:{ports["enrich"]}"
{sinks}"""
    )
    return deployment


def source_records(rng: random.Random) -> list[record_pb2.Record]:
    """Clicks, views and customer changes on one timeline: event ``i`` at ``i * STEP_MS``
    moved back by less than ``BOUND_MS``, so no record of a stream is behind that
    stream's watermark. A key's customer changes have distinct times."""
    records = []
    changed: set[tuple[str, int]] = set()
    for i in range(EVENTS):
        key = f"user{rng.randrange(KEYS)}"
        t = max(0, i * STEP_MS - rng.randrange(BOUND_MS))
        kind = rng.choices(["clicks", "views", "customers"], [45, 45, 10])[0]
        value = f"{kind[0]}{i}".encode()
        if kind == "customers":
            if (key, t) in changed:
                continue
            changed.add((key, t))
            op = "d" if rng.random() < 0.15 else "u"
            after = None if op == "d" else {"tier": rng.randrange(5), "change": i}
            value = json.dumps({"payload": {"op": op, "before": None, "after": after}}).encode()
        records.append(
            record_pb2.Record(
                record_id=i.to_bytes(16, "big"), key=key.encode(), value=value,
                event_time_ms=t, stream=kind, producer="source",
            )
        )  # fmt: skip
    return records


Enriched = tuple[str, str, str, int, str]  # key, click, view, event time, row as JSON


def oracle(records: list[record_pb2.Record]) -> Counter[Enriched]:
    """Every click and view of a key within the interval, with the key's customer row as
    of the pair's time (the later of the two)."""
    by_stream: dict[str, list[record_pb2.Record]] = {"clicks": [], "views": [], "customers": []}
    for record in records:
        by_stream[record.stream].append(record)
    versions: dict[bytes, list[tuple[int, Any]]] = {}
    for change in by_stream["customers"]:
        after = json.loads(change.value)["payload"]["after"]
        versions.setdefault(change.key, []).append((change.event_time_ms, after))
    expected: Counter[Enriched] = Counter()
    for click in by_stream["clicks"]:
        for view in by_stream["views"]:
            tc, tv = click.event_time_ms, view.event_time_ms
            if click.key != view.key or not tc + LOWER_MS <= tv <= tc + UPPER_MS:
                continue
            t = max(tc, tv)
            before = [v for v in versions.get(click.key, []) if v[0] <= t]
            row = max(before, key=lambda v: v[0])[1] if before else None
            key = click.key.decode()
            expected[
                (key, click.value.decode(), view.value.decode(), t, json.dumps(row, sort_keys=True))
            ] += 1
    return expected


def enriched(sink: CollectingSink) -> Counter[Enriched]:
    found: Counter[Enriched] = Counter()
    for record in list(sink.records.values()):
        if record.stream != "enriched":
            continue
        body = json.loads(record.value)
        pair = body["record"]  # the interval join's pair, parsed (output version 2)
        left, right = pair["left"]["raw"], pair["right"]["raw"]
        row = json.dumps(body["row"], sort_keys=True)
        found[(body["key"], left, right, record.event_time_ms, row)] += 1
    return found


def test_interval_and_versioned_joins_are_exact_across_sigkills(tmp_path: Path) -> None:
    rng = chaos_rng(20261125)
    sink = CollectingSink()
    ports = {"pairs": free_port(), "enrich": free_port()}
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    topology = Topology.load(tmp_path / "topology.toml")
    authority = WatermarkAuthority(topology)
    server, authority_port = create_authority_server(authority, "127.0.0.1:0")
    deployment = write_deployment(tmp_path, sink.address, f"127.0.0.1:{authority_port}", ports)
    nodes = {name: NodeProcess(deployment, name, tmp_path / "data", tmp_path) for name in ports}
    for node in nodes.values():
        node.start()
    addresses = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    drivers = {
        "clicks": SourceDriver(topology, "clicks", {IntervalId("pairs", 0): addresses["pairs"]}),
        "views": SourceDriver(topology, "views", {IntervalId("pairs", 0): addresses["pairs"]}),
        "customers": SourceDriver(
            topology, "customers", {IntervalId("enrich", i): addresses["enrich"] for i in range(2)}
        ),
    }
    stop = threading.Event()

    def advance_watermarks() -> None:
        while not stop.wait(0.05):
            for stream, driver in drivers.items():
                mark = driver.watermark(BOUND_MS)
                if mark is not None:
                    authority.set_source_watermark(stream, mark)

    ticker = threading.Thread(target=advance_watermarks, daemon=True)
    ticker.start()
    records = source_records(rng)
    expected = oracle(records)
    try:
        chunks = range(0, len(records), CHUNK)
        kills = dict(
            zip(rng.sample(range(1, len(chunks) - 1), 2), ["enrich", "pairs"], strict=True)
        )
        for chunk, start in enumerate(chunks):
            batch = records[start : start + CHUNK]
            again = [r for r in batch if rng.random() < 0.02]  # delivered twice
            for stream, driver in drivers.items():
                driver.send([r for r in batch if r.stream == stream])
                driver.send([r for r in again if r.stream == stream])
            if chunk in kills:
                time.sleep(rng.uniform(0.0, 0.3))
                nodes[kills[chunk]].kill()
                nodes[kills[chunk]].start()
        wait_until(
            lambda: all(d.unacked() == 0 for d in drivers.values()), 120, "every record acked"
        )
        stop.set()
        ticker.join()
        for stream in drivers:
            authority.set_source_watermark(stream, MAX_TIME - 1)
        total = sum(expected.values())
        wait_until(lambda: len(sink.records) >= total, 120, "every pair, enriched")
        wait_quiescent(addresses.values(), 120)
        assert [r.stream for r in sink.records.values() if r.stream != "enriched"] == []
        assert enriched(sink) == expected
        assert all(n == 1 for n in expected.values()), "records are distinct"
        assert [node.starts for node in nodes.values()] == [2, 2], "each node was killed once"
    finally:
        stop.set()
        for driver in drivers.values():
            driver.stop()
        for node in nodes.values():
            node.terminate()
        sink.stop()
        server.stop(0.5).wait()
