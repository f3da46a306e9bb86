"""The Context user code sees: one record's (or timer's) effects, buffered.

A scope collects state changes, timer changes and productions of one call.
If the call returns, :meth:`RecordScope.apply` moves them into the batch's
transaction; if it raises, they are dropped and the rest of the batch is
unaffected.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from millrace.computations import (
    BYTES,
    MAX_EVENT_TIME_MS,
    MAX_PRODUCED_BYTES,
    MIN_EVENT_TIME_MS,
    Record,
    Serde,
)
from millrace.computations.errors import ProduceError, TimerError
from millrace.dataplane import state_key
from millrace.engine._tuples import new_tuple
from millrace.event_time import event_time_problem
from millrace.statestore import Transaction, prefix_end
from millrace.statestore.types import TimeDomain, Timer

RESERVED_PREFIX = b"\xff" * 12
"""The state the engine keeps for itself starts with this: a user key's entries start
with its 8-byte hash and 4-byte length, and no key is 4 GiB long."""


def state_prefix(key: bytes) -> bytes:
    """The prefix of every state entry of ``key``: the key's 64-bit hash (big-endian, as
    :func:`computations.key_hash`), so that the state of a range of the hash space (a
    key interval, or either half of one being split) is one range of store keys; then
    the key's length and the key. An entry's key is the prefix and its tag
    (:func:`state_key`; a batch's: :func:`~millrace.dataplane.state_keys`)."""
    return state_key(key, "")


_RECORD_SETTER = b"r"


def record_setter(record_id: bytes) -> bytes:
    """What a timer set while processing record ``record_id`` keeps as its setter."""
    return _RECORD_SETTER + record_id


def record_setters(record_ids: Iterable[bytes]) -> list[bytes]:
    """:func:`record_setter` of each record id."""
    return list(map(_RECORD_SETTER.__add__, record_ids))


def timer_setter(domain: TimeDomain, time_ms: int, fired: int | None, setter: bytes) -> bytes:
    """What a timer set by ``setter`` keeps as its setter: nothing for an event-time
    timer for after ``fired``, the highest time up to which event-time timers ever fired
    (its fire is then named by the timer alone: it has never fired at its time and
    will once, since the watermark never goes back), else ``setter`` (a timer may fire
    at a passed time again; a setter sets it once)."""
    if domain == TimeDomain.EVENT_TIME and (fired is None or time_ms > fired):
        return b""
    return setter


def too_big(stream: str, key: bytes, value: bytes) -> ProduceError:
    """The error for a produced record over :data:`~computations.MAX_PRODUCED_BYTES`."""
    return ProduceError(
        f"produced to {stream!r} a record of {len(key) + len(value):,} bytes of key and "
        f"value; the most a record may hold is {MAX_PRODUCED_BYTES:,} (one delivery "
        "message): keep big payloads out of records"
    )


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
        setter: bytes = b"",
        fired_watermark: int | None = None,
    ) -> None:
        """``setter``: what the timers this call sets keep as their setter
        (``engine/_production_ids.py``: it names their fires); ``fired_watermark``: the
        highest time up to which event-time timers of this store fired."""
        self.fired_watermark = fired_watermark
        self._record_id: bytes | None = None
        """The record being processed (:meth:`reset`): its setter is made only when it
        sets a timer."""
        self._computation = computation
        self._outputs = outputs
        self._handles_timers = handles_timers
        self._txn = txn
        self._key = key
        self._prefix: bytes | None = None
        """``state_prefix(key)``, made on the first state access (:meth:`_key_prefix`)."""
        self._timestamp_ms = event_time_ms
        self._low_watermark = low_watermark
        self._now_ms = now_ms
        self._state: dict[str, bytes | None] = {}
        self._timers: dict[tuple[TimeDomain, str], int | None] = {}
        self._setters: dict[tuple[TimeDomain, str], bytes] = {}
        """Setters of timers set on another's account than this call's (bulk calls)."""
        self._may_produce = may_produce
        self.setter = setter
        self.emitted: list[Emitted] = []
        self.late_ms: list[int] = []
        """The lateness of each record reported late (``report_late``)."""

    @property
    def timer_changes(self) -> Mapping[tuple[TimeDomain, str], int | None]:
        """This call's timer changes: ``(domain, tag)`` -> time, or None (deleted)."""
        return self._timers

    def reset(self, key: bytes, event_time_ms: int, record_id: bytes) -> RecordScope:
        """Reuse this scope for the next call (cheaper than a new one per record): the
        processing of record ``record_id`` (the setter of the timers it sets). Its
        collections are replaced only when the last call filled them: an empty one is
        reused (whoever took a filled one keeps it)."""
        self._key = key
        self._record_id = record_id
        self._prefix = None
        self._timestamp_ms = event_time_ms
        if self._state:
            self._state = {}
        if self._timers:
            self._timers = {}
        if self._setters:
            self._setters = {}
        if self.emitted:
            self.emitted = []
        if self.late_ms:
            self.late_ms = []
        return self

    def _key_prefix(self) -> bytes:
        prefix = self._prefix
        if prefix is None:
            prefix = self._prefix = state_prefix(self._key)
        return prefix

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
            raw = self._txn.get(self._key_prefix() + tag.encode())
        return None if raw is None else serde.loads(raw)

    def put_state(self, tag: str, value: Any, serde: Serde[Any] = BYTES) -> None:
        self._state[tag] = serde.dumps(value)

    def scan_state(
        self,
        prefix: str,
        serde: Serde[Any] = BYTES,
        *,
        start: str = "",
        end: str | None = None,
        limit: int | None = None,
    ) -> list[tuple[str, Any]]:
        low_tag = prefix + start
        high_tag = None if end is None else prefix + end
        key_prefix = self._key_prefix()
        low = key_prefix + low_tag.encode()
        high = key_prefix + high_tag.encode() if high_tag is not None else None
        if high is None:
            high = prefix_end(key_prefix + prefix.encode())
        own = {  # this call's own changes in the range
            tag.encode(): raw
            for tag, raw in self._state.items()
            if tag.startswith(prefix) and low_tag <= tag and (high_tag is None or tag < high_tag)
        }
        wanted = None if limit is None else limit + sum(1 for raw in own.values() if raw is None)
        skip = len(key_prefix)
        found = {k[skip:]: raw for k, raw in self._txn.scan_state(low, high, wanted)}
        if own:
            for tag, raw in own.items():
                if raw is None:
                    found.pop(tag, None)
                else:
                    found[tag] = raw
            entries = sorted(found.items())[:limit]
        else:
            entries = list(found.items())
        return [(tag.decode(), serde.loads(raw)) for tag, raw in entries]

    def delete_state(self, tag: str) -> None:
        self._state[tag] = None

    def set_timer(self, tag: str, time_ms: int, domain: TimeDomain = TimeDomain.EVENT_TIME) -> None:
        self._timers[(TimeDomain(domain), tag)] = self.checked_timer_time(tag, time_ms)
        if self._setters:
            self._setters.pop((TimeDomain(domain), tag), None)

    def set_timer_by(self, tag: str, time_ms: int, domain: TimeDomain, setter: bytes) -> None:
        """:meth:`set_timer` on ``setter``'s account rather than this call's."""
        self.set_timer(tag, time_ms, domain)
        self._setters[(TimeDomain(domain), tag)] = setter

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

    def checked_timer_times(self, tags: Sequence[str], times_ms: Sequence[int]) -> list[int]:
        """:meth:`checked_timer_time` of each timer, the first that is refused raising."""
        if self._handles_timers and times_ms:
            times = list(map(int, times_ms))
            if min(times) >= MIN_EVENT_TIME_MS and max(times) <= MAX_EVENT_TIME_MS:
                return times
        return [self.checked_timer_time(t, ms) for t, ms in zip(tags, times_ms, strict=True)]

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
        if stream not in self._outputs:
            self.check_output(stream)  # raises, naming the outputs
        if event_time_ms is None:
            ts = self._timestamp_ms  # the record's or timer's own: in range already
        else:
            ts = event_time_ms if type(event_time_ms) is int else _time_of(stream, event_time_ms)
            if not MIN_EVENT_TIME_MS <= ts <= MAX_EVENT_TIME_MS:
                checked_time(stream, ts)  # raises, saying why
        # bytes() copies a bytearray or memoryview; bytes stay as they are, without a call.
        if type(key) is not bytes:
            key = _bytes_of(stream, "key", key)
        if type(value) is not bytes:
            value = _bytes_of(stream, "value", value)
        if len(key) + len(value) > MAX_PRODUCED_BYTES:
            raise too_big(stream, key, value)
        self.emitted.append(new_tuple(Emitted, (stream, key, value, ts)))

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
        if not self._state and not self._timers:
            return
        txn, prefix = self._txn, self._key_prefix()
        for tag, raw in self._state.items():
            if raw is None:
                txn.delete(prefix + tag.encode())
            else:
                txn.put(prefix + tag.encode(), raw)
        setters, setter, watermark = self._setters, self.setter, self.fired_watermark
        if self._timers and self._record_id is not None:
            setter = record_setter(self._record_id)
        for ident, time_ms in self._timers.items():
            domain, tag = ident
            if time_ms is None:
                txn.delete_timer(domain, self._key, tag)
            else:
                cause = setters.get(ident, setter) if setters else setter
                cause = timer_setter(domain, time_ms, watermark, cause)
                txn.set_timer(new_tuple(Timer, (domain, self._key, tag, time_ms, cause)))


def _bytes_of(stream: str, what: str, given: Any) -> bytes:
    """``given`` as bytes (a bytearray or memoryview copied); a ``ProduceError`` saying
    what to do for anything else (a str, a dict: bytes are not guessed)."""
    if isinstance(given, bytes | bytearray | memoryview):
        return bytes(given)
    hint = (
        f"encode it ({what}.encode())"
        if isinstance(given, str)
        else "serialize it (json.dumps(...).encode()), or pass serde=JSON"
    )
    raise ProduceError(
        f"produce to {stream!r}: the {what} must be bytes, not {type(given).__name__}: {hint}"
    )


def _time_of(stream: str, given: Any) -> int:
    if isinstance(given, numbers.Integral) and not isinstance(given, bool):
        return int(given)  # numpy's integers too
    raise ProduceError(
        f"produce to {stream!r}: event_time_ms must be an integer (ms), "
        f"not {type(given).__name__} {given!r}"
    )
