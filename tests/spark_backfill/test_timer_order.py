"""A backfill fires every timer in event-time order, timers set inside a batch included.

Under the perfect watermark a backfill simulates, a timer at ``T`` fires after its
key's records at or before ``T`` and before those after it. The interval run once
cut a batch only at the timer pending when the batch began, so a timer set by the
batch's first record fired after up to a whole batch of later records (issue 31:
one key, records at 1000, 2000 and 3000 each setting a timer at its own time, and
all three timers saw 3 records).

The oracle needs no engine: a timer set at ``T`` sees exactly its key's records at
or before ``T``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.computations import JSON, Computation, Context, FiredTimer, Record, Topology
from millrace.spark_jobs.batch import (
    InputColumns,
    InputRow,
    IntervalStats,
    run_interval,
    with_intervals,
)
from tests.spark_backfill._topologies import local_backfill


class SeenAtTimer(Computation):
    """Counts its key's records; each record sets a timer ``delay`` ms after its own
    time (tag: the record's ``tag``), and a timer reports how many records its key
    had seen when it fired."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.put_state("n", (ctx.get_state("n", JSON) or 0) + 1, JSON)
        body = json.loads(record.value)
        ctx.set_timer(body["tag"], record.event_time_ms + body["delay"])

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        seen = ctx.get_state("n", JSON)
        value = json.dumps({"tag": timer.tag, "at": timer.time_ms, "seen": seen}).encode()
        ctx.produce("out", ctx.key, value, timer.time_ms)


def topology(intervals: int = 1) -> Topology:
    return Topology.from_dict(
        {
            "streams": {"in": {}, "out": {}},
            "computations": {
                "seen": {
                    "handler": SeenAtTimer,
                    "intervals": intervals,
                    "inputs": {"in": "key"},
                    "outputs": ["out"],
                }
            },
        }
    )


def fires(rows: list[InputRow], batch_size: int) -> list[dict[str, Any]]:
    inputs = [InputColumns.of_rows(rows)]
    outputs = run_interval(topology(), "seen", 0, inputs, IntervalStats(), batch_size=batch_size)
    return [json.loads(row.value) for chunk in outputs for row in chunk.rows()]


def row(number: int, key: bytes, time_ms: int, delay: int) -> InputRow:
    value = json.dumps({"tag": f"t{number}", "delay": delay}).encode()
    return InputRow(number.to_bytes(16, "big"), key, value, time_ms, "injector", "in")


def test_each_timer_set_in_a_batch_fires_before_the_records_after_it() -> None:
    rows = [row(1, b"k", 1000, 0), row(2, b"k", 2000, 0), row(3, b"k", 3000, 0)]
    for batch_size in (1, 2, 2000):
        assert [fire["seen"] for fire in fires(rows, batch_size)] == [1, 2, 3], batch_size


def test_a_timer_at_a_records_time_fires_after_it() -> None:
    """Records at ``T`` are at or before ``T``: they come before the timer fires."""
    rows = [row(1, b"k", 1000, 500), row(2, b"k", 1500, 0), row(3, b"k", 1600, 0)]
    assert [(f["tag"], f["seen"]) for f in fires(rows, 2000)] == [
        ("t1", 2), ("t2", 2), ("t3", 3),
    ]  # fmt: skip


keys = st.sampled_from([b"a", b"b", b"c", b"d"])
events = st.lists(st.tuples(keys, st.integers(0, 40), st.integers(0, 25)), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(events=events, batch_size=st.sampled_from([1, 3, 7, 2000]))
def test_every_fire_sees_exactly_its_keys_records_up_to_its_time(
    events: list[tuple[bytes, int, int]], batch_size: int
) -> None:
    rows = sorted(
        (row(n, key, time_s * 100, delay_s * 100) for n, (key, time_s, delay_s) in
         enumerate(events)),
        key=lambda r: (r.event_time_ms, r.record_id),
    )  # fmt: skip
    by_tag = {json.loads(r.value)["tag"]: r for r in rows}
    got = fires(rows, batch_size)
    assert sorted(f["tag"] for f in got) == sorted(by_tag)
    for fire in got:
        key = by_tag[fire["tag"]].key
        expected = sum(1 for r in rows if r.key == key and r.event_time_ms <= fire["at"])
        assert fire["seen"] == expected, fire


@settings(max_examples=25, deadline=None)
@given(events=events)
def test_ids_and_values_do_not_depend_on_intervals_or_batch_size(
    events: list[tuple[bytes, int, int]],
) -> None:
    records = [
        (n.to_bytes(16, "big"), key, json.dumps({"tag": f"t{n}", "delay": d * 100}).encode(),
         t * 100, "in")
        for n, (key, t, d) in enumerate(events)
    ]  # fmt: skip
    runs = [
        local_backfill(with_intervals(topology(), intervals), records, batch_size=batch_size)
        for intervals, batch_size in ((1, 2000), (2, 1), (3, 7), (8, 3))
    ]
    assert all(run == runs[0] for run in runs[1:])
    assert Counter(len(run["out"]) for run in runs) == Counter({len(events): len(runs)})
