"""The Context user code sees: one record's (or timer's) effects, buffered.

A scope collects state changes, timer changes and productions of one call.
If the call returns, :meth:`RecordScope.apply` moves them into the batch's
transaction; if it raises, they are dropped and the rest of the batch is
unaffected.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from computations import BYTES, MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS, Record, Serde
from computations.errors import ProduceError, TimerError
from engine._tuples import new_tuple
from engine._watermarks import event_time_problem
from statestore import Transaction
from statestore.types import TimeDomain, Timer

_U32 = struct.Struct(">I")

RESERVED_PREFIX = b"\xff\xff\xff\xff"
"""State keys of user state start with a 4-byte key length, never this."""


def state_key(key: bytes, tag: str) -> bytes:
    """Where ``key``'s state ``tag`` lives in the state column family."""
    return _U32.pack(len(key)) + key + tag.encode()


def state_prefix(key: bytes) -> bytes:
    """The prefix of every state entry of ``key``."""
    return _U32.pack(len(key)) + key


def checked_time(stream: str, event_time_ms: int) -> int:
    """The event time of a record produced to ``stream``, if in range; else
    :class:`~computations.errors.ProduceError`."""
    if not MIN_EVENT_TIME_MS <= event_time_ms <= MAX_EVENT_TIME_MS:
        raise ProduceError(f"produced to {stream!r}: {event_time_problem(event_time_ms)}")
    return event_time_ms


class Emitted(NamedTuple):
    """A produce() call, before routing."""

    stream: str
    key: bytes
    value: bytes
    event_time_ms: int


class RecordScope:
    """Implements :class:`computations.Context` for one call of user code."""

    def __init__(
        self,
        *,
        computation: str,
        outputs: frozenset[str],
        handles_timers: bool,
        txn: Transaction,
        key: bytes,
        event_time_ms: int,
        low_watermark: int | None,
        now_ms: int,
        may_produce: bool = True,
    ) -> None:
        self._computation = computation
        self._outputs = outputs
        self._handles_timers = handles_timers
        self._txn = txn
        self._key = key
        self._prefix = state_prefix(key)
        self._timestamp_ms = event_time_ms
        self._low_watermark = low_watermark
        self._now_ms = now_ms
        self._state: dict[str, bytes | None] = {}
        self._timers: dict[tuple[TimeDomain, str], int | None] = {}
        self._may_produce = may_produce
        self.emitted: list[Emitted] = []
        self.late_ms: list[int] = []
        """The lateness of each record reported late (``report_late``)."""

    def reset(self, key: bytes, event_time_ms: int) -> RecordScope:
        """Reuse this scope for the next call (cheaper than a new one per record)."""
        self._key = key
        self._prefix = state_prefix(key)
        self._timestamp_ms = event_time_ms
        self._state = {}
        self._timers = {}
        self.emitted = []
        if self.late_ms:
            self.late_ms = []
        return self

    @property
    def key(self) -> bytes:
        return self._key

    @property
    def low_watermark(self) -> int | None:
        return self._low_watermark

    @property
    def processing_time_ms(self) -> int:
        return self._now_ms

    def get_state(self, tag: str, serde: Serde[Any] = BYTES) -> Any:
        if tag in self._state:
            raw = self._state[tag]
        else:
            raw = self._txn.get(self._prefix + tag.encode())
        return None if raw is None else serde.loads(raw)

    def put_state(self, tag: str, value: Any, serde: Serde[Any] = BYTES) -> None:
        self._state[tag] = serde.dumps(value)

    def delete_state(self, tag: str) -> None:
        self._state[tag] = None

    def set_timer(self, tag: str, time_ms: int, domain: TimeDomain = TimeDomain.EVENT_TIME) -> None:
        self._timers[(TimeDomain(domain), tag)] = self.checked_timer_time(tag, time_ms)

    def checked_timer_time(self, tag: str, time_ms: int) -> int:
        """``time_ms`` as an int, if this computation may set timer ``tag`` for then;
        else :class:`~computations.errors.TimerError`."""
        if not self._handles_timers:
            raise TimerError(
                f"computation {self._computation!r} sets timer {tag!r} "
                "but its class does not implement process_timer"
            )
        if not MIN_EVENT_TIME_MS <= int(time_ms) <= MAX_EVENT_TIME_MS:
            raise TimerError(f"timer {tag!r}: {event_time_problem(int(time_ms))}")
        return int(time_ms)

    def delete_timer(self, tag: str, domain: TimeDomain = TimeDomain.EVENT_TIME) -> None:
        self._timers[(TimeDomain(domain), tag)] = None

    def produce(
        self,
        stream: str,
        key: bytes,
        value: Any,
        event_time_ms: int | None = None,
        *,
        serde: Serde[Any] | None = None,
    ) -> None:
        if not self._may_produce:
            raise ProduceError(
                f"computation {self._computation!r} produced to {stream!r} in process_batch: "
                "leave records that produce to process_record"
            )
        if serde is not None:
            value = serde.dumps(value)
        self.check_output(stream)
        ts = self._timestamp_ms if event_time_ms is None else int(event_time_ms)
        self.emitted.append(
            new_tuple(Emitted, (stream, bytes(key), bytes(value), checked_time(stream, ts)))
        )

    def check_output(self, stream: str) -> None:
        """:class:`~computations.errors.ProduceError` unless ``stream`` is an output."""
        if stream not in self._outputs:
            raise ProduceError(
                f"computation {self._computation!r} produced to {stream!r}, "
                f"which is not among its declared outputs {sorted(self._outputs)}"
            )

    def report_late(self, record: Record) -> None:
        watermark = self._low_watermark
        self.late_ms.append(0 if watermark is None else max(0, watermark - record.event_time_ms))

    def apply(self) -> None:
        """Move the buffered state and timer changes into the transaction."""
        txn, prefix = self._txn, self._prefix
        for tag, raw in self._state.items():
            if raw is None:
                txn.delete(prefix + tag.encode())
            else:
                txn.put(prefix + tag.encode(), raw)
        for (domain, tag), time_ms in self._timers.items():
            if time_ms is None:
                txn.delete_timer(domain, self._key, tag)
            else:
                txn.set_timer(Timer(domain=domain, key=self._key, tag=tag, time_ms=time_ms))
