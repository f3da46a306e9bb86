"""One key interval of one computation over its whole input, with a perfect watermark.

What a backfill's Spark task runs per interval, without Spark: the interval's
records come sorted by ``(event_time_ms, record_id)``; an
:class:`~engine.IntervalDriver` over a real RocksDB store in a scratch
directory processes them in batches, exactly as a node's worker does, while
a simulated *perfect* watermark walks through the data:

- before a batch whose first record is at ``t``, the watermark becomes ``t``
  (every record before ``t`` has been seen), so every event-time timer before
  ``t`` fires first, in time order;
- a batch never runs past the earliest pending event-time timer ``T``: the
  records at or before ``T`` are processed before it fires, the later ones
  after (so a window's on-time pane holds exactly its records); nor does it run
  a key past a timer one of the key's own records in it set (the processor's
  ``cut_at_timers``: the key's later records come back, the watermark moves to
  them, the timer fires, and they come again);
- processing time is the watermark (processing-time timers fire as the data's
  time passes them);
- after the last record the watermark goes to +infinity: every event-time
  timer fires, the ones that fired timers set included.

No record is ever late under a perfect watermark. Productions are
acknowledged as soon as they are handed on (the next stage or the sink gets
them), so the outbox stays empty. Production ids come from the input ids and
the timers, never from the batching (docs/spark.md, "What equals what"); each
production carries its place in production order (:attr:`OutputRow.seq`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from millrace.computations import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS, Topology
from millrace.engine import BatchOutcome, IntervalDriver, IntervalProcessor, Received
from millrace.spark_jobs.batch._upcoming import InputColumns, Upcoming
from millrace.statestore import StateStore, StoreConfig
from millrace.statestore.types import TimeDomain

END_OF_TIME = MAX_EVENT_TIME_MS + 1
"""The watermark after the last record: every event-time timer is then due."""
RETRY_ROUNDS = 20
"""Rounds a batch's failing records get before the job gives up (user code that
fails ``max_attempts`` times is dead-lettered long before)."""


class OutputRow(NamedTuple):
    """A production: where it goes (a computation's interval, or ``sink:<stream>`` 0)
    and the record."""

    consumer: str
    interval: int
    record_id: bytes
    key: bytes
    value: bytes
    event_time_ms: int
    producer: str
    stream: str
    seq: int = 0
    """Its place in production order: the producing interval (above bit 40), then
    how many productions that interval made before it. 0 for a source record (its
    record id follows the log's order)."""


@dataclass(frozen=True, slots=True)
class OutputColumns:
    """Productions of one commit as columns (one list per :class:`OutputRow` field)."""

    consumers: list[str]
    intervals: list[int]
    record_ids: list[bytes]
    keys: list[bytes]
    values: list[bytes]
    times: list[int]
    producers: list[str]
    streams: list[str]
    seqs: list[int]

    def __len__(self) -> int:
        return len(self.record_ids)

    def rows(self) -> Iterator[OutputRow]:
        """The productions one by one."""
        return map(OutputRow._make, zip(
            self.consumers, self.intervals, self.record_ids, self.keys, self.values,
            self.times, self.producers, self.streams, self.seqs, strict=True,
        ))  # fmt: skip


SEQ_INTERVAL_SHIFT = 40
"""``OutputRow.seq`` keeps the producing interval above this bit."""


@dataclass(slots=True)
class IntervalStats:
    """What one interval's run did."""

    records_in: int = 0
    duplicates: int = 0
    productions: int = 0
    timers_fired: int = 0
    dead_letters: int = 0


class BackfillError(Exception):
    """Records that neither commit nor dead-letter (user code failing for good)."""


def run_interval(
    topology: Topology,
    computation: str,
    interval: int,
    inputs: Iterable[InputColumns],
    stats: IntervalStats,
    *,
    batch_size: int = 2000,
    scratch: str | None = None,
    keep_store: Path | None = None,
    final_watermark: int = END_OF_TIME,
) -> Iterator[OutputColumns]:
    """Every production of ``computation``'s ``interval`` over ``inputs`` (one after
    the other, sorted by event time), the end-of-input timers' included; ``stats`` is
    filled in as it goes, a commit's productions at a time. The store lives in a
    scratch directory removed at the end, and the processor is ephemeral: no record
    id is remembered, no production checkpointed (a failed task runs again from the
    start).

    With ``keep_store`` (a state bootstrap) the store is made there and kept, synced,
    for a node to open: the watermark stops at ``final_watermark`` (timers after it
    stay pending) and productions stay in the outbox, unacknowledged, for the node
    to send when it starts."""
    if keep_store is None:
        directory = Path(
            tempfile.mkdtemp(prefix=f"backfill-{computation}-{interval}-", dir=scratch)
        )
        path = directory / "store"
    else:
        directory, path = None, keep_store
    clock = _Clock()
    store = StateStore.open_rocksdb(path, config=StoreConfig(sync=False))
    try:
        processor = IntervalProcessor(
            topology=topology, computation=computation, interval=interval, store=store,
            epoch=1, clock=clock, cut_at_timers=True, ephemeral=keep_store is None,
        )  # fmt: skip
        run = _Run(IntervalDriver(processor), clock, stats, computation)
        run.next_seq = (interval << SEQ_INTERVAL_SHIFT) + 1
        upcoming = Upcoming(inputs)
        while (first := upcoming.first_time()) is not None:
            yield from run.advance(first)
            pending = store.next_timer_ms(TimeDomain.EVENT_TIME)
            batch = upcoming.take(batch_size, up_to=END_OF_TIME if pending is None else pending)
            upcoming.put_back((yield from run.process(batch)))
        if final_watermark > run.last_watermark:
            yield from run.advance(final_watermark, processing_time=run.last_watermark)
        stats.dead_letters += len(processor.dead_letters())
        if keep_store is not None:
            store.sync()
    finally:
        store.close()
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


class _Clock:
    """Processing time in a backfill: the perfect watermark."""

    def __init__(self) -> None:
        self.now_ms = MIN_EVENT_TIME_MS

    def __call__(self) -> int:
        return self.now_ms


class _Run:
    def __init__(
        self,
        driver: IntervalDriver,
        clock: _Clock,
        stats: IntervalStats,
        computation: str,
    ) -> None:
        self._driver = driver
        self._clock = clock
        self._stats = stats
        self._computation = computation
        self.last_watermark = MIN_EVENT_TIME_MS
        self._stalled = 0
        """Commits in a row that finished none of their records."""
        self.next_seq = 1
        """The :attr:`OutputRow.seq` of the next production."""

    def process(self, records: InputColumns) -> Generator[OutputColumns, None, InputColumns]:
        """One commit of ``records``; returns those to come again (in order): the ones a
        timer set earlier in the commit must fire before, and the ones user code
        asked to retry."""
        processor = self._driver.processor
        received = Received.of_columns(
            ids=records.record_ids, streams=records.streams, keys=records.keys,
            values=records.values, times=records.times, producers=records.producers,
            interval=processor.interval, intervals=processor.spec.intervals,
        )  # fmt: skip
        outcome = processor.process_records(received, durable=False)
        self._stats.duplicates += len(outcome.duplicates)
        yield from self._hand_on(outcome)
        done = {*outcome.committed, *outcome.duplicates, *outcome.dead_lettered}
        done.update(rid for rid, _, _ in outcome.rejected)
        self._stats.records_in += len(done)
        self._stalled = 0 if done else self._stalled + 1
        if len(done) == len(records):
            return InputColumns.of_rows(())
        ids = records.record_ids
        again = records.pick([i for i, rid in enumerate(ids) if rid not in done])
        if self._stalled > RETRY_ROUNDS:
            raise BackfillError(
                f"{self._computation}: {len(again)} record(s) neither committed nor "
                f"dead-lettered after {RETRY_ROUNDS} rounds (first: {again.record_ids[0].hex()})"
            )
        return again

    def advance(
        self, watermark: int, *, processing_time: int | None = None
    ) -> Iterator[OutputColumns]:
        """Move the perfect watermark (and the clock) to ``watermark``; fire what is due."""
        self._clock.now_ms = max(self._clock.now_ms, processing_time or watermark)
        self._driver.advance_watermark(watermark)
        if watermark < END_OF_TIME:
            self.last_watermark = watermark
        yield from self._fire(watermark)

    def _fire(self, watermark: int | None) -> Iterator[OutputColumns]:
        for _ in range(1_000_000):
            outcome = self._driver.fire_timers(durable=False)
            self._stats.timers_fired += outcome.timers_fired
            yield from self._hand_on(outcome)
            if not outcome.timers_fired and not outcome.timers_failed:
                return
        raise BackfillError(f"{self._computation}: timers keep firing at watermark {watermark}")

    def _hand_on(self, outcome: BatchOutcome) -> Iterator[OutputColumns]:
        """The commit's productions, numbered in production order. A backfill's are
        not in the outbox (the processor is ephemeral); a bootstrap's stay there, for
        the node to send."""
        if not outcome.produced:
            return
        consumers, intervals, records = outcome.production_columns()
        made = len(consumers)
        self._stats.productions += made
        first, self.next_seq = self.next_seq, self.next_seq + made
        yield OutputColumns(
            consumers, intervals, records.ids, records.keys, records.values, records.times,
            records.producers, records.streams, list(range(first, first + made)),
        )  # fmt: skip
