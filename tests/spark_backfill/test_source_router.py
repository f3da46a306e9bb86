"""The backfill's source stage routes every log record as the injector's forwarder
does (``engine.source_productions``), whatever the batch: mixed streams, records a
key extractor cannot key, streams nobody consumes, streams of other topologies."""

from __future__ import annotations

import json
import tomllib
from itertools import zip_longest
from pathlib import Path

import pytest

from millrace.computations import Topology
from millrace.engine import routes_of, source_productions
from millrace.spark_jobs.batch import OutputRow
from millrace.wire.v1 import record_pb2
from tests.spark_backfill._topologies import (
    join_and_sessions,
    log_records,
    routed,
    two_stages,
    write_log,
    write_orders,
)

UNCONSUMED = """
[streams.events]
[streams.audit]
[streams.counts]

[computations.count]
handler = "millrace.dataflow:WindowedAggregation"
intervals = 4
inputs = { events = "key" }
outputs = ["counts"]
params = { window = "tumbling:10000", aggregate = "count", output = "counts" }
"""


def forwarded(
    topology: Topology, records: list[tuple[bytes, bytes, bytes, int, str]]
) -> list[OutputRow]:
    """The oracle: the forwarder's routing, a record at a time."""
    routes = {stream: routes_of(topology, stream) for stream in topology.sources()}
    rows = []
    for record_id, key, value, ts, stream in records:
        record = record_pb2.Record(
            record_id=record_id, key=key, value=value, event_time_ms=ts, stream=stream
        )
        for p in source_productions(routes.get(stream, []), record):
            rows.append(OutputRow(p.consumer, p.interval, record_id, key, value, ts,
                                  "injector", stream))  # fmt: skip
    return rows


def by_id(rows: list[OutputRow]) -> list[OutputRow]:
    return sorted(rows, key=lambda r: (r.record_id, r.consumer))


@pytest.mark.parametrize("batch", [1, 13, 1000])
def test_two_streams_mixed_in_batches_with_unkeyable_records(tmp_path: Path, batch: int) -> None:
    write_orders(tmp_path, 300)
    orders, shipments = log_records(tmp_path, "orders"), log_records(tmp_path, "shipments")
    # Interleave the streams so batches hold both; add shipments json:order cannot key.
    mixed = [r for pair in zip_longest(orders, shipments) for r in pair if r is not None]
    unkeyable = (b"not json", json.dumps({"no": 1}).encode(), b"[]")
    mixed += [(b"bad%d" % i, b"p", v, 1_000 + i, "shipments") for i, v in enumerate(unkeyable)]
    topology = join_and_sessions()
    got = routed(topology, mixed, batch=batch)
    assert by_id(got) == by_id(forwarded(topology, mixed))
    assert {r.interval for r in got if r.record_id.startswith(b"bad")} == {0}


def test_unconsumed_and_foreign_streams(tmp_path: Path) -> None:
    write_log(tmp_path, 500)
    events = log_records(tmp_path)
    records = events + [(b"a%d" % i, b"k", b"v", i, "audit") for i in range(5)]
    records += [(b"x%d" % i, b"k", b"v", i, "elsewhere") for i in range(5)]
    topology = Topology.from_dict(tomllib.loads(UNCONSUMED))
    got = routed(topology, records, batch=64)
    assert by_id(got) == by_id(forwarded(topology, records))
    assert {r.consumer for r in got} == {"count", "sink:audit"}
    assert {r.interval for r in got if r.consumer == "count"} == {0, 1, 2, 3}
    assert by_id(routed(two_stages(), events)) == by_id(forwarded(two_stages(), events))
