"""The vectorized path of ``WindowedAggregation`` equals the one-record-at-a-time path.

Two ``IntervalProcessor``s over real RocksDB stores get the same batches
(valid and invalid values, ints and floats, duplicates, records that arrive
late or cross early-trigger counts), the same watermarks and the same clock:
one with ``vectorized = true``, one with ``false``. After every step, what
each committed, dead-lettered and produced, and the whole state and timer
contents of both stores, are byte for byte equal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from millrace.computations import Topology
from millrace.engine import BatchOutcome, IntervalProcessor, state_key
from millrace.statestore import StateStore, StoreConfig, TimeDomain
from millrace.wire.v1 import record_pb2

TOPOLOGY = """
[streams.events]
[streams.out]
[streams.late]

[computations.agg]
handler = "millrace.dataflow:WindowedAggregation"
inputs = {{ events = "key" }}
outputs = ["out", "late"]
max_attempts = {attempts}
params = {params}
"""

CONFIGS = [
    {"window": "tumbling:100", "aggregate": "count+sum", "field": "v"},
    {"window": "tumbling:100", "aggregate": "sum", "field": "v", "early_every_records": 3},
    {"window": "hopping:100:40", "aggregate": "min", "field": "v", "allowed_lateness_ms": 150},
    {"window": "tumbling:50", "aggregate": "mean", "field": "v", "late_output": "late",
     "allowed_lateness_ms": 60, "accumulation": "retracting"},
    {"window": "global", "aggregate": "max", "field": "v", "early_every_ms": 10},
    {"window": "tumbling:100", "aggregate": "distinct", "field": "v",
     "accumulation": "accumulating"},
    {"window": "tumbling:100", "aggregate": "count"},
    {"window": "tumbling:100", "aggregate": "count+sum+max"},  # values are bare numbers
    {"window": "hopping:90:30", "aggregate": "mean", "early_every_records": 4},
    {"window": "tumbling:100", "aggregate": "count+sum", "field": "v",
     "allowed_lateness_ms": 120, "accumulation": "accumulating", "late_output": "late"},
    {"window": "tumbling:50", "aggregate": "count+max", "allowed_lateness_ms": 80,
     "accumulation": "discarding"},
    # windows read from the values (grouped in Python): from the event time to a field,
    # and between two fields
    {"window": "field:closes", "aggregate": "count+sum", "field": "v",
     "allowed_lateness_ms": 50},
    {"window": "field:opened:closes", "aggregate": "max_by:v", "early_every_records": 5},
]  # fmt: skip

VALUES: list[Any] = [1, 2, 7, 100, -3, 2**40, 2.5, 0.1, "text", True, None, "missing", "{bad"]
BARE = [b"5", b"17", b"-0", b"2.5", b"01", b" 5", b"1_0", b"1\n2", b'"x"', b"9" * 20, b"NaN"]


def _value(choice: Any, bare: bool, key: int = 0, ts: int = 0) -> bytes:
    """A record's value: a bare number, or an object with the field ``v`` and (for
    windows read from the value) a window ``[opened, closes)`` holding ``ts``, whose
    length depends on the key."""
    if bare:
        return BARE[VALUES.index(choice) % len(BARE)] if VALUES.index(choice) % 3 else b"3"
    if choice == "missing":
        return b'{"w": 1}'
    if choice == "{bad":
        return b"{bad"
    opened = ts - ts % 100
    return json.dumps(
        {"v": choice, "pad": "x", "opened": opened, "closes": opened + 100 + 50 * (key % 2)}
    ).encode()


steps = st.lists(
    st.one_of(
        st.lists(
            st.tuples(
                st.integers(0, 5),  # key
                st.integers(0, 400),  # event time
                st.sampled_from(VALUES),
                st.integers(0, 60),  # record id (repeats are duplicate deliveries)
            ),
            min_size=1,
            max_size=40,
        ),
        st.integers(0, 450).map(lambda w: ("watermark", w)),
    ),
    min_size=1,
    max_size=12,
)


@contextmanager
def _processors(
    tmp: Path, params: dict[str, Any], attempts: int = 1
) -> Iterator[list[IntervalProcessor]]:
    stores, processors = [], []
    clock = [1_000]
    for vectorized in (True, False):
        inline = ", ".join(f"{k} = {json.dumps(v)}" for k, v in {**params, "output": "out"}.items())
        path = tmp / f"v{vectorized}"
        path.mkdir()
        (path / "t.toml").write_text(
            TOPOLOGY.format(
                params="{ " + inline + f", vectorized = {str(vectorized).lower()} }}",
                attempts=attempts,
            )
        )
        store = StateStore.open_rocksdb(path / "store", config=StoreConfig(sync=False))
        stores.append(store)
        processors.append(
            IntervalProcessor(
                topology=Topology.load(path / "t.toml"),
                computation="agg",
                interval=0,
                store=store,
                epoch=1,
                clock=lambda: clock[0],
            )
        )
    try:
        yield processors
    finally:
        for store in stores:
            store.close()


def _seen(outcome: BatchOutcome) -> tuple[Any, ...]:
    return (
        sorted(outcome.committed),
        sorted(outcome.duplicates),
        sorted(outcome.dead_lettered),
        sorted(outcome.retry),
        [(p.record.record_id, p.record.key, p.record.value) for p in outcome.productions],
        sorted(outcome.late_ms),
    )


def _contents(processor: IntervalProcessor) -> tuple[Any, ...]:
    store = processor.store
    timers = [
        store.due_timers(domain, None)
        for domain in (TimeDomain.EVENT_TIME, TimeDomain.PROCESSING_TIME)
    ]
    return list(store.scan_state(b"")), timers


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(config=st.sampled_from(CONFIGS), steps=steps, attempts=st.sampled_from([1, 3]))
def test_vectorized_equals_one_at_a_time(
    tmp_path_factory: Any, config: dict[str, Any], steps: list[Any], attempts: int
) -> None:
    """With ``attempts`` 3, a failing record holds its key and is resent (with the
    records held behind it) in the next batch, as a sender does."""
    tmp = tmp_path_factory.mktemp("vec")
    bare = "field" not in config and not config["window"].startswith("field:")
    with _processors(tmp, config, attempts) as (vectorized, plain):
        resend: list[record_pb2.Record] = []
        for step in steps:
            if isinstance(step, tuple):
                for processor in (vectorized, plain):
                    processor.advance_watermark(step[1])
                outcomes = [p.fire_timers() for p in (vectorized, plain)]
            else:
                batch = [
                    record_pb2.Record(
                        record_id=rid.to_bytes(4, "big"),
                        key=f"k{key}".encode(),
                        value=_value(value, bare, key, ts),
                        event_time_ms=ts,
                        stream="events",
                    )
                    for key, ts, value, rid in step
                ]
                batch = resend + batch
                outcomes = [p.process_records(batch) for p in (vectorized, plain)]
                retried = set(outcomes[0].retry)
                resend = [r for r in batch if r.record_id in retried]
            assert _seen(outcomes[0]) == _seen(outcomes[1])
            assert _contents(vectorized) == _contents(plain)


@pytest.mark.parametrize("window", ["tumbling:1000", "field:opened:closes"])
def test_a_batch_without_late_or_due_records_is_folded_by_the_vectorized_path(
    tmp_path: Path, window: str
) -> None:
    """Guards the test above: the fast path really takes records (one state write per
    (key, window) instead of one per record), windows read from the values too."""
    params = {"window": window, "aggregate": "count+sum", "field": "v"}
    with _processors(tmp_path, params) as (vectorized, plain):
        batch = [
            record_pb2.Record(
                record_id=i.to_bytes(4, "big"),
                key=f"k{i % 3}".encode(),
                value=_value(i, False, 0, 0) if window.startswith("field") else _value(i, False),
                event_time_ms=i,
                stream="events",
            )
            for i in range(300)
        ]
        writes = []
        for processor in (vectorized, plain):
            user = processor._user  # the computation object, to count its calls
            calls = {"records": 0}
            original = user.process_record

            def counted(
                ctx: Any, record: Any, original: Any = original, calls: Any = calls
            ) -> None:
                calls["records"] += 1
                original(ctx, record)

            user.process_record = counted  # type: ignore[method-assign]
            processor.process_records(batch)
            writes.append(calls["records"])
        assert writes == [0, 300]
        assert _contents(vectorized) == _contents(plain)
        tag = "w:0/1000" if window.startswith("tumbling") else "w:0/100"
        state = json.loads(dict(vectorized.store.scan_state(b""))[state_key(b"k0", tag)])
        assert state["acc"] == [100, sum(range(0, 300, 3))]
