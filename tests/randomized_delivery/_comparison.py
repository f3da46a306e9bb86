"""What the randomized delivery test compares: committed state and sink outputs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from millrace.computations import MAX_TIME, IntervalId
from millrace.computations.testing import TestHarness
from millrace.engine._processor import IntervalProcessor
from millrace.statestore import TimeDomain, Timer
from tests.randomized_delivery._setup import SINK_STREAM, SOURCE_STREAM, STAGES, TOPOLOGY, Event
from tests.workloads import expected_totals, totals_from_outputs


@dataclass(frozen=True)
class Snapshot:
    """Committed state of both intervals and the sink's outputs at one watermark."""

    sink: dict[bytes, bytes]  # record id -> value, once each
    state: dict[str, list[tuple[bytes, bytes]]]  # every state entry, in key order
    timers: dict[str, list[Timer]]  # every pending timer, in time order
    outbox: dict[str, list[bytes]]  # committed, unacknowledged productions


def snapshot(processors: Mapping[str, IntervalProcessor], sink: Mapping[bytes, bytes]) -> Snapshot:
    """Read what is committed in ``processors``' stores, plus the sink's outputs."""
    stores = {name: processor.store for name, processor in processors.items()}
    return Snapshot(
        sink=dict(sink),
        state={name: list(store.scan_state(b"")) for name, store in stores.items()},
        timers={
            name: store.due_timers(TimeDomain.EVENT_TIME, None)
            + store.due_timers(TimeDomain.PROCESSING_TIME, None)
            for name, store in stores.items()
        },
        outbox={name: [key for key, _ in store.outbox()] for name, store in stores.items()},
    )


def no_duplicate_effects(sink: Mapping[bytes, bytes]) -> bool:
    """Every window was emitted under one record id only: a resend keeps its id (and the
    sink drops it), so a second id for a window means an effect happened twice."""
    windows = [json.loads(value)["window"] for value in sink.values()]
    return len(windows) == len(set(windows))


def matches_oracle(sink: Mapping[bytes, bytes], events: Sequence[Event]) -> bool:
    """The sink holds exactly the oracle's per-window totals of ``events``."""
    expected = expected_totals((key, ts) for _, key, ts in events)
    return totals_from_outputs(sink.values()) == expected


def converges_to_fault_free_run(run: Snapshot, reference: Snapshot) -> bool:
    """Same outputs and the same committed state as the run without faults."""
    return run == reference


def divergence(run: Snapshot, reference: Snapshot) -> str:
    """Where ``run`` differs from ``reference``, readably (for failure messages)."""
    lines = []
    for field in ("sink", "state", "timers", "outbox"):
        ours, theirs = getattr(run, field), getattr(reference, field)
        if field == "sink":
            ours, theirs = {"sink": sorted(ours.values())}, {"sink": sorted(theirs.values())}
        for name in sorted(set(ours) | set(theirs)):
            if ours.get(name) != theirs.get(name):
                lines.append(
                    f"{field}[{name}]: {ours.get(name)!r} != fault-free {theirs.get(name)!r}"
                )
    return "\n".join(lines)


def fault_free_run(events: Sequence[Event], checkpoint_ms: int) -> tuple[Snapshot, Snapshot]:
    """The reference: ``events`` through :class:`TestHarness` (FIFO, no faults), snapshotted
    at source watermark ``checkpoint_ms`` and at the end of time."""
    harness = TestHarness(TOPOLOGY)
    for record_id, key, ts in events:
        harness.feed(SOURCE_STREAM, key, b"", ts, record_id=record_id)
    harness.run()
    snapshots = []
    for mark in (checkpoint_ms, MAX_TIME):
        harness.advance_watermark(mark)
        processors = {name: harness.processors[IntervalId(name, 0)] for name in STAGES}
        sink = {r.record_id: r.value for r in harness.outputs(SINK_STREAM)}
        snapshots.append(snapshot(processors, sink))
    return snapshots[0], snapshots[1]
