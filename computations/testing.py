"""``TestHarness``: run a topology in one process, step by step, and crash it at will.

For users' unit tests (and ours). Every key interval gets an in-memory store
and an :class:`~engine.IntervalDriver`, exactly the code a node's worker
runs; the network is a :class:`~engine.LocalNetwork` of whole batches in
their wire encoding: each step hands every batch queued for the next
destination to its interval in one turn (a group commit), and the acks go
back to the senders. Processing
time and the source watermark are set by the test::

    harness = TestHarness(Topology.load("topology.toml"))
    harness.feed("clicks", b"alice", b'{"page": "/"}', event_time_ms=1_000)
    harness.run()                        # deliver until nothing moves
    harness.advance_watermark(120_000)   # windows close, timers fire
    assert harness.outputs("page_counts") == [...]
    harness.crash()                      # lose every in-flight message and object
    harness.run()                        # outboxes are resent; dedup drops repeats

What survives :meth:`crash` is what a real node keeps: committed store
contents. Fed records not yet acknowledged are resent, like the injector does.

User code that keeps failing fails the test: once a record or timer is given up on
(after the computation's ``max_attempts``), :meth:`run` raises :class:`UserCodeError`
with the error. ``TestHarness(..., dead_letters=True)`` keeps such records as dead
letters instead, as a node does (:meth:`dead_letters` lists them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, TypeVar, overload

from millrace.computations._intervals import IntervalId
from millrace.computations._keys import interval_of
from millrace.computations._records import Record
from millrace.computations._serde import BYTES, Serde
from millrace.computations._topology import Topology
from millrace.engine import (
    SINK_PREFIX,
    ComputationWatermark,
    InFlight,
    IntervalDriver,
    IntervalProcessor,
    LocalNetwork,
    Production,
    compute_watermarks,
    receive,
    routes_of,
    source_productions,
    state_key,
)
from millrace.event_time import MIN_TIME
from millrace.statestore import MemoryEngine, StateStore, StoreConfig
from millrace.wire.v1 import admin_pb2, delivery_pb2, record_pb2

T = TypeVar("T")

Ack = delivery_pb2.DeliveryAck

SOURCE = "source"
"""The producer name of fed records."""


class UserCodeError(AssertionError):
    """User code failed for good on a record or timer in a :class:`TestHarness` (which
    dead-letters it only with ``dead_letters=True``)."""


class TestHarness:
    """A whole topology in one process with a controllable clock and watermark."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        topology: Topology,
        *,
        start_ms: int = 0,
        config: StoreConfig | None = None,
        dead_letters: bool = False,
    ) -> None:
        """``dead_letters``: keep records and timers user code fails on for good as dead
        letters, as a node does (default: :meth:`run` raises :class:`UserCodeError`)."""
        self.topology = topology
        self._keep_letters = dead_letters
        self.now_ms = start_ms
        self._config = config or StoreConfig(sync=False)
        self._engines = {
            (name, i): MemoryEngine()
            for name, spec in topology.computations.items()
            for i in range(spec.intervals)
        }
        self._epoch = 0
        self._source_watermarks: dict[str, int] = {}
        self._unacked_source: dict[bytes, Production] = {}
        self._sink_outputs: dict[str, dict[bytes, Record]] = {s: {} for s in topology.sinks()}
        self._fed = 0
        self.processors: dict[IntervalId, IntervalProcessor] = {}
        self._drivers: dict[IntervalId, IntervalDriver] = {}
        self._network = LocalNetwork()
        self.group_commits = 0
        """Turns that committed more than one batch at once."""
        self._reported_late: dict[str, list[int]] = {name: [] for name in topology.computations}
        self._start()

    def _clock(self) -> int:
        return self.now_ms

    def _start(self) -> None:
        self._epoch += 1
        self.processors = {
            IntervalId(name, i): IntervalProcessor(
                topology=self.topology,
                computation=name,
                interval=i,
                store=StateStore.open_memory(engine, config=self._config, clock=self._clock),
                epoch=self._epoch,
                clock=self._clock,
            )
            for (name, i), engine in self._engines.items()
        }
        self._drivers = {at: IntervalDriver(p) for at, p in self.processors.items()}
        self._network = LocalNetwork()
        for at, driver in self._drivers.items():
            self._network.send(at, self._epoch, driver.resend())
        self._network.send_productions(None, 0, list(self._unacked_source.values()))

    # -- driving ----------------------------------------------------------

    def feed(
        self,
        stream: str,
        key: bytes | str,
        value: Any,
        event_time_ms: int,
        *,
        record_id: bytes | None = None,
        serde: Serde[Any] | None = None,
    ) -> bytes:
        """Send a record into source ``stream`` (delivered by :meth:`step`). Returns its id.

        ``key``: bytes, or text (sent as UTF-8); ``value``: bytes, or any value ``serde``
        encodes (``serde=JSON``: a dict, a list, a number). Feeding the same
        ``record_id`` again is a duplicate delivery.
        """
        if stream not in self.topology.sources():
            raise ValueError(f"{stream!r} is not a source stream of the topology")
        if isinstance(key, str):
            key = key.encode()
        if serde is not None:
            value = serde.dumps(value)
        if not isinstance(key, bytes) or not isinstance(value, bytes):
            wrong = "key" if not isinstance(key, bytes) else "value"
            given = type(key if wrong == "key" else value).__name__
            raise TypeError(
                f"feed {stream!r}: the {wrong} must be bytes, not {given}"
                + (": pass serde=JSON (or another serde) to send a Python value"
                   if wrong == "value" else "")
            )  # fmt: skip
        if record_id is None:
            self._fed += 1
            record_id = hashlib.blake2b(f"fed-{self._fed}".encode(), digest_size=16).digest()
        record = record_pb2.Record(
            record_id=record_id,
            key=key,
            value=value,
            event_time_ms=event_time_ms,
            producer=SOURCE,
            stream=stream,
        )
        productions = source_productions(routes_of(self.topology, stream), record)
        for production in productions:
            self._unacked_source[production.outbox_key] = production
        self._network.send_productions(None, 0, productions)
        return record_id

    def step(self) -> bool:
        """Deliver every batch in flight to the destination of the oldest one, in one turn
        of that interval (a group commit); False when the network is empty."""
        return self._deliver_next() is not None

    def run(self, max_steps: int = 1_000_000) -> None:
        """Deliver until the network is empty, firing timers that become due.

        Timers also get a turn after every delivery left unacked: a record may be
        waiting for a failed timer of its key to be retried. Raises
        :class:`UserCodeError` once user code fails for good (unless ``dead_letters``)."""
        for _ in range(max_steps):
            acked = self._deliver_next()
            self._check_letters()
            if acked:
                continue
            fired = self._fire_due_timers()
            self._check_letters()
            if not fired and acked is None:
                return
        raise RuntimeError(f"topology did not settle within {max_steps} steps")

    def advance_watermark(self, watermark_ms: int, stream: str | None = None) -> None:
        """Move the source watermark of ``stream`` (default: every source), then :meth:`run`."""
        for source in [stream] if stream else self.topology.sources():
            self._source_watermarks[source] = max(
                watermark_ms, self._source_watermarks.get(source, MIN_TIME)
            )
        self.run()

    def advance_processing_time(self, delta_ms: int) -> None:
        """Move the processing-time clock forward, then :meth:`run`."""
        self.now_ms += delta_ms
        self.run()

    def crash(self) -> None:
        """Lose every in-memory object and in-flight message; restart from the stores."""
        for processor in self.processors.values():
            processor.store.close()
        self._start()

    # -- inspecting -------------------------------------------------------

    def in_flight(self) -> int:
        """Batches on the network now (each step delivers every one bound for the oldest
        one's destination)."""
        return len(self._network.in_flight)

    def outputs(self, stream: str) -> list[Record]:
        """Records delivered to sink ``stream``, once each, in arrival order."""
        return list(self._sink_outputs[stream].values())

    def output_values(self, stream: str, serde: Serde[T]) -> list[T]:
        """The values of :meth:`outputs`, decoded by ``serde`` (``JSON``: Python values)."""
        return [serde.loads(record.value) for record in self.outputs(stream)]

    @overload
    def state(self, computation: str, key: bytes, tag: str) -> bytes | None: ...
    @overload
    def state(self, computation: str, key: bytes, tag: str, serde: Serde[T]) -> T | None: ...
    def state(self, computation: str, key: bytes, tag: str, serde: Serde[Any] = BYTES) -> Any:
        """Committed state ``tag`` of ``key`` in ``computation`` (decoded by ``serde``)."""
        spec = self.topology.computations[computation]
        processor = self.processors[IntervalId(computation, interval_of(key, spec.intervals))]
        raw = processor.store.get(state_key(key, tag))
        return None if raw is None else serde.loads(raw)

    def state_rows(self, computation: str, key: bytes, prefix: str) -> list[tuple[str, bytes]]:
        """Committed state of ``key`` in ``computation`` whose tags start with ``prefix``,
        as ``(tag, raw value)`` in tag order (what ``Context.scan_state`` reads)."""
        spec = self.topology.computations[computation]
        processor = self.processors[IntervalId(computation, interval_of(key, spec.intervals))]
        head = state_key(key, "")
        return [
            (found[len(head) :].decode(), raw)
            for found, raw in processor.store.scan_state(state_key(key, prefix))
        ]

    def reported_late(self, computation: str) -> list[int]:
        """The lateness (ms behind the low watermark) of each record ``computation``
        reported late (``Context.report_late``): what a node's
        ``millrace_late_record_lateness_seconds`` histogram observes."""
        return list(self._reported_late[computation])

    def dead_letters(self, computation: str) -> list[admin_pb2.DeadLetter]:
        """Dead letters of every interval of ``computation``."""
        return [
            letter
            for (name, _), processor in sorted(self.processors.items())
            if name == computation
            for letter in processor.dead_letters()
        ]

    def watermarks(self) -> dict[str, ComputationWatermark]:
        """Input and low watermarks of every computation, as the authority computes them."""
        oldest: dict[str, int | None] = {}
        for (name, _), processor in self.processors.items():
            work = processor.oldest_work()
            current = oldest.get(name)
            if work is not None and (current is None or work < current):
                oldest[name] = work
            else:
                oldest.setdefault(name, current)
        sources = dict(self._source_watermarks)
        for production in self._unacked_source.values():
            stream = production.record.stream
            held = production.record.event_time_ms
            sources[stream] = min(sources.get(stream, MIN_TIME), held)
        return compute_watermarks(self.topology, sources, oldest)

    # -- internals ----------------------------------------------------------

    def _check_letters(self) -> None:
        if self._keep_letters:
            return
        for (name, _), processor in self.processors.items():
            if processor.letters_written:
                letters = processor.dead_letters()
                errors = "; ".join(f"{letter.error}" for letter in letters[-3:]) or "?"
                raise UserCodeError(
                    f"computation {name!r} gave up on {processor.letters_written} record(s) or "
                    f"timer(s): {errors} (TestHarness(..., dead_letters=True) keeps them as "
                    "dead letters instead)"
                )

    def _deliver_next(self) -> bool | None:
        """Deliver what is in flight to the oldest batch's destination: None if nothing is
        in flight, else whether anything was acknowledged (what was not goes to the back
        of the network: its sender retries it)."""
        destination = self._network.next_destination()
        if destination is None:
            return None
        messages = self._network.take(destination)
        if destination[0].startswith(SINK_PREFIX):
            answered = [(m, self._to_sink(m)) for m in messages]
        else:
            driver = self._drivers[destination]
            answered, outcome = receive(driver, messages)
            if outcome is not None:
                self.group_commits += len(messages) > 1
                self._reported_late[destination[0]].extend(outcome.late_ms)
                self._network.send(destination, self._epoch, outcome.frames)
        acked = False
        for message, ack in answered:
            done, again = message.settle(ack)
            acked = acked or bool(done)
            self._acknowledged(message, done)
            self._network.send_productions(message.sender, message.epoch, again)
        return acked

    def _fire_due_timers(self) -> bool:
        fired = False
        marks = self.watermarks()
        for (name, interval), driver in self._drivers.items():
            if marks[name].input_ms > MIN_TIME:
                driver.advance_watermark(marks[name].input_ms)
            outcome = driver.fire_timers()
            if outcome.timers_fired or outcome.timers_failed:
                fired = True  # a failed timer is retried next round, until dead-lettered
                self._network.send(IntervalId(name, interval), self._epoch, outcome.frames)
        return fired

    def _acknowledged(self, message: InFlight, outbox_keys: list[bytes]) -> None:
        if message.sender is None:
            for key in outbox_keys:
                self._unacked_source.pop(key, None)
        elif outbox_keys:
            self._drivers[message.sender].acknowledged(outbox_keys)

    def _to_sink(self, message: InFlight) -> Ack:
        batch = message.batch()
        stream = batch.target.computation[len(SINK_PREFIX) :]
        for record in batch.records:
            self._sink_outputs[stream].setdefault(
                record.record_id,
                Record(
                    stream=stream,
                    key=record.key,
                    value=record.value,
                    event_time_ms=record.event_time_ms,
                    record_id=record.record_id,
                    producer=record.producer,
                ),
            )
        return Ack(batch_seq=batch.batch_seq, committed_ids=[r.record_id for r in batch.records])

    def feed_many(
        self,
        stream: str,
        items: Iterable[tuple[bytes | str, Any, int]],
        *,
        serde: Serde[Any] | None = None,
    ) -> list[bytes]:
        """:meth:`feed` each ``(key, value, event_time_ms)``; returns the record ids."""
        return [self.feed(stream, key, value, ts, serde=serde) for key, value, ts in items]
