"""The user API: subclass :class:`Computation`; the runtime hands it a :class:`Context`.

Call order, per key interval, one call at a time (user code needs no locks):

1. ``setup(params)`` once, when the interval starts (and again after a restart);
2. ``process_record(ctx, record)`` for each new record (duplicates never
   reach user code), in arrival order per key; a class that implements
   ``process_batch`` first gets each delivered batch's new records at once
   and takes what it can fold with column operations (see there);
3. ``process_timer(ctx, timer)`` when a timer fires: event-time timers once
   the input low watermark is past their time, processing-time timers once
   the node's clock reaches it; per key, in time order.

Everything a call does through ``ctx`` (state changes, timers, productions)
takes effect atomically with the record or timer that caused it, or not at
all: if the call raises, its changes are discarded and the record is retried
(then dead-lettered after ``max_attempts``). Keep user code deterministic
(same state and input, same effects) and free of process-global state: the
same classes run inside PySpark executors for backfills.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar, overload

from millrace.computations._records import FiredTimer, Record
from millrace.computations._serde import BYTES, Serde
from millrace.statestore.types import TimeDomain

T = TypeVar("T")


class Context(Protocol):
    """What user code may do while processing one record or timer of one key."""

    @property
    def key(self) -> bytes:
        """The key being processed; state and timers are scoped to it."""
        ...

    @property
    def low_watermark(self) -> int | None:
        """The computation's input low watermark in ms (None before the first one)."""
        ...

    @property
    def processing_time_ms(self) -> int:
        """The node's clock, in ms since the epoch."""
        ...

    @overload
    def get_state(self, tag: str) -> bytes | None: ...
    @overload
    def get_state(self, tag: str, serde: Serde[T]) -> T | None: ...
    def get_state(self, tag: str, serde: Serde[Any] = BYTES) -> Any:
        """This key's state under ``tag`` (decoded by ``serde``; raw bytes without one),
        or None."""
        ...

    @overload
    def put_state(self, tag: str, value: bytes) -> None: ...
    @overload
    def put_state(self, tag: str, value: T, serde: Serde[T]) -> None: ...
    def put_state(self, tag: str, value: Any, serde: Serde[Any] = BYTES) -> None:
        """Replace this key's state under ``tag`` (encoded by ``serde``)."""
        ...

    def delete_state(self, tag: str) -> None:
        """Remove this key's state under ``tag``."""
        ...

    @overload
    def scan_state(
        self, prefix: str, *, start: str = "", end: str | None = None, limit: int | None = None
    ) -> list[tuple[str, bytes]]: ...
    @overload
    def scan_state(
        self,
        prefix: str,
        serde: Serde[T],
        *,
        start: str = "",
        end: str | None = None,
        limit: int | None = None,
    ) -> list[tuple[str, T]]: ...
    def scan_state(
        self,
        prefix: str,
        serde: Serde[Any] = BYTES,
        *,
        start: str = "",
        end: str | None = None,
        limit: int | None = None,
    ) -> list[tuple[str, Any]]:
        """This key's state entries whose tags start with ``prefix`` (and, after it, are
        ``>= start`` and ``< end``), as ``(tag, value)`` in tag order (UTF-8 bytes), the
        first ``limit`` of them (None: all; the store reads no further).

        One row per entry, read as a range: a list, map or time-ordered buffer of a key
        kept as one tag per element (``f"buf/{time:016x}/{id}"``) costs per record what
        it reads, not the whole collection (Flink's ``MapState`` on RocksDB). This
        call's own changes are included."""
        ...

    def set_timer(self, tag: str, time_ms: int, domain: TimeDomain = TimeDomain.EVENT_TIME) -> None:
        """Set (or move) this key's timer ``tag`` of ``domain`` to ``time_ms``."""
        ...

    def delete_timer(self, tag: str, domain: TimeDomain = TimeDomain.EVENT_TIME) -> None:
        """Cancel this key's timer ``tag`` of ``domain`` (no error if unset)."""
        ...

    @overload
    def produce(
        self, stream: str, key: bytes, value: bytes, event_time_ms: int | None = None
    ) -> None: ...
    @overload
    def produce(
        self,
        stream: str,
        key: bytes,
        value: T,
        event_time_ms: int | None = None,
        *,
        serde: Serde[T],
    ) -> None: ...
    def produce(
        self,
        stream: str,
        key: bytes,
        value: Any,
        event_time_ms: int | None = None,
        *,
        serde: Serde[Any] | None = None,
    ) -> None:
        """Emit a record to a declared output stream: ``value`` as bytes, or encoded by
        ``serde`` (as state is).

        ``event_time_ms`` defaults to the timestamp of the record or timer
        being processed.
        """
        ...

    def report_late(self, record: Record) -> None:
        """Report that ``record`` came too late to change any result (past the allowed
        lateness). The node counts it, with its lateness (the low watermark minus its
        event time), in a per-computation Prometheus histogram; reporting is not
        handling: send the record somewhere (a late side output) too."""
        ...


class BatchContext(Protocol):
    """What :meth:`Computation.process_batch` may do: one :class:`Context` per key."""

    @property
    def low_watermark(self) -> int | None:
        """The computation's input low watermark in ms (None before the first one)."""
        ...

    @property
    def processing_time_ms(self) -> int:
        """The node's clock, in ms since the epoch."""
        ...

    def for_key(self, key: bytes) -> Context:
        """The context of ``key`` within this batch (the same object on each call). It
        reads and changes state and timers like any context, but may not produce.
        Timers it sets are set on the account of ``key``'s last record of the batch
        (what names their fires' outputs)."""
        ...

    def read_states(self, keys: Sequence[bytes], tags: Sequence[str]) -> list[bytes | None]:
        """The stored bytes of state ``tags[i]`` of ``keys[i]`` for each ``i`` (None where
        there is none), read in one go: what ``for_key(keys[i]).get_state(tags[i])``
        returns, this call's changes included, without a context per key."""
        ...

    def write_states(
        self, keys: Sequence[bytes], tags: Sequence[str], values: Sequence[bytes]
    ) -> None:
        """``for_key(keys[i]).put_state(tags[i], values[i])`` for each ``i``, bytes."""
        ...

    def delete_states(self, keys: Sequence[bytes], tags: Sequence[str]) -> None:
        """``for_key(keys[i]).delete_state(tags[i])`` for each ``i``."""
        ...

    def set_timers(
        self,
        keys: Sequence[bytes],
        tags: Sequence[str],
        times_ms: Sequence[int],
        domain: TimeDomain = TimeDomain.EVENT_TIME,
        *,
        record_ids: Sequence[bytes] | None = None,
    ) -> None:
        """``for_key(keys[i]).set_timer(tags[i], times_ms[i], domain)`` for each ``i``;
        with ``record_ids``, each timer set on the account of the record of that id (of
        this batch, of ``keys[i]``), as if set while processing it (its fire's outputs
        are then named as they would be one record at a time)."""
        ...


class TimerBatchContext(BatchContext, Protocol):
    """What :meth:`Computation.process_timers` may do: a :class:`BatchContext` over the
    round's timers, whose productions each name the timer that made them."""

    def produce_many(
        self,
        timers: Sequence[int],
        stream: str,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        times_ms: Sequence[int],
    ) -> None:
        """For each ``i``, what the ``timers[i]``-th timer of the call produces: a record
        of ``keys[i]``, ``values[i]`` (bytes) and event time ``times_ms[i]`` to output
        ``stream``, as ``Context.produce`` would while firing that timer (in the order
        given). The timer's key must be ``keys[i]``'s or the timer left."""
        ...


class Computation(ABC):
    """Base class of user computations. Implement ``process_record``; override
    ``process_timer`` if the computation sets timers."""

    setup_at_load = False
    """True: the topology runs :meth:`setup` with the computation's ``params`` when it
    loads, so a bad setting is an error of the topology file, naming the computation,
    before anything starts (the ``dataflow`` library's classes do; a computation whose
    setup is cheap and has no side effects may too). An ``output`` or ``late_output``
    attribute it then has must be one of the computation's outputs."""

    def setup(self, params: Mapping[str, Any]) -> None:  # noqa: B027 (optional, empty)
        """Receive the computation's ``params`` from the topology. Optional."""

    @abstractmethod
    def process_record(self, ctx: Context, record: Record) -> None:
        """Handle one new record of one of the computation's input streams."""

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        """Handle a fired timer of ``timer.key``."""
        raise NotImplementedError(f"{type(self).__name__} sets timers but has no process_timer")

    def process_batch(self, batch: BatchContext, records: Sequence[Record]) -> Sequence[Record]:
        """Optional fast path: one delivered batch's new records (of every key, in
        arrival order), to fold with column operations before touching state once per
        key. Returns the records it leaves: every record of a key with a left record
        then goes through :meth:`process_record`, in order, and what this call did
        to that key is discarded. So that results equal the one-at-a-time path,
        leave a key whose records could produce (a production is named after the
        record that made it: this call may not produce). If it raises, nothing it
        did is kept and every record is processed one at a time. The default takes
        nothing."""
        return records

    def process_timers(
        self, batch: TimerBatchContext, timers: Sequence[FiredTimer]
    ) -> Sequence[FiredTimer]:
        """Optional fast path: one round's due timers (of every key, in firing order),
        to fire many at once. Returns the timers it leaves: every timer of a key with a
        left timer then goes through :meth:`process_timer`, in order, and what this
        call did to that key is discarded. A production names the timer that made it
        (:meth:`TimerBatchContext.produce_many`), so results and ids equal the
        one-at-a-time path's. If it raises, nothing it did is kept and every timer
        fires one at a time. The default takes nothing."""
        return timers

    def handles_timer_batches(self) -> bool:
        """True when :meth:`process_timers` may take timers: by default, when the class
        overrides it (asked once, after :meth:`setup`)."""
        return type(self).process_timers is not Computation.process_timers

    def handles_batches(self) -> bool:
        """True when :meth:`process_batch` may take records: by default, when the class
        overrides it (asked once, after :meth:`setup`)."""
        return type(self).process_batch is not Computation.process_batch

    @classmethod
    def handles_timers(cls) -> bool:
        """True when the class overrides :meth:`process_timer`."""
        return cls.process_timer is not Computation.process_timer

    @classmethod
    def handles_records(cls) -> bool:
        """True when the class overrides :meth:`process_record`."""
        return cls.process_record is not Computation.process_record
