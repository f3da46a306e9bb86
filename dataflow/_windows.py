"""Window assigners: which windows an event time belongs to, and which windows merge.

A window is ``[start, end)`` in event-time milliseconds; its last instant,
``end - 1``, is when it is complete (the watermark passing it fires the
on-time pane) and the event time of its output records. A merging assigner
(Beam's ``WindowFn``: ``assign`` and ``merge``) also says which of a key's
windows become one as records arrive, as sessions do. An assigner may read the
whole record (:meth:`WindowAssigner.assign_record`), as :class:`FieldWindows`
does: a window that ends at a field of the record.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from millrace.computations import JSON, MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS, Record
from millrace.dataflow._durations import duration_ms


@dataclass(frozen=True, order=True, slots=True)
class Window:
    """``[start, end)`` in event-time milliseconds."""

    start: int
    end: int

    @property
    def last_ms(self) -> int:
        """The window's last instant (its output time), within the event-time range."""
        return min(self.end - 1, MAX_EVENT_TIME_MS)

    def tag(self) -> str:
        """How state and timer tags name the window."""
        return f"{self.start}/{self.end}"

    @classmethod
    def from_tag(cls, tag: str) -> Window:
        """Inverse of :meth:`tag`."""
        start, end = tag.split("/")
        return cls(int(start), int(end))


class WindowAssigner(ABC):
    """Assigns each event time to the windows that contain it; a merging one (``merging =
    True``) also says, with :meth:`merge`, which of a key's windows become one."""

    merging = False
    """True when windows of one key merge as records arrive (:meth:`merge` is used)."""

    @abstractmethod
    def assign(self, event_time_ms: int) -> list[Window]:
        """The windows containing ``event_time_ms`` (at least one)."""

    def assign_record(self, record: Record) -> list[Window]:
        """The windows of ``record`` (at least one). Default: :meth:`assign` of its event
        time; override it to read the record (a ``ValueError`` dead-letters it)."""
        return self.assign(record.event_time_ms)

    def merge(self, windows: Sequence[Window]) -> list[tuple[list[Window], Window]]:
        """Which of a key's ``windows`` merge: each entry is a group of two or more of them
        (or one to be replaced) and the window the group becomes; windows in no group stay
        as they are. Default: nothing merges.

        ``windows`` are the key's live windows and the window a new record was assigned
        (sorted, distinct). The aggregation merges each group's accumulators into the
        result window with the combiner's ``merge``. Give each window to one group at
        most, and make the result end no earlier than the windows it replaces (it must
        not expire before them). Results are independent of arrival order when merging
        is: merging any subset first must lead to the same final windows (overlap or
        distance rules are; "merge unless the result gets too long" is not, as the
        windows one record joins could depend on which came first).
        """
        return []


@dataclass(frozen=True, slots=True)
class Tumbling(WindowAssigner):
    """Fixed, non-overlapping windows of ``size_ms``, aligned to ``offset_ms``."""

    size_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0:
            raise ValueError(f"a tumbling window needs size_ms > 0, not {self.size_ms}")

    def assign(self, event_time_ms: int) -> list[Window]:
        start = event_time_ms - (event_time_ms - self.offset_ms) % self.size_ms
        return [Window(start, start + self.size_ms)]


@dataclass(frozen=True, slots=True)
class Hopping(WindowAssigner):
    """Windows of ``size_ms`` starting every ``slide_ms`` (overlapping when the slide is
    shorter than the size): each event time is in ``ceil(size / slide)`` of them."""

    size_ms: int
    slide_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.slide_ms <= 0:
            raise ValueError("a hopping window needs size_ms > 0 and slide_ms > 0")

    def assign(self, event_time_ms: int) -> list[Window]:
        last_start = event_time_ms - (event_time_ms - self.offset_ms) % self.slide_ms
        windows = []
        start = last_start
        while start > event_time_ms - self.size_ms:
            windows.append(Window(start, start + self.size_ms))
            start -= self.slide_ms
        return sorted(windows)


@dataclass(frozen=True, slots=True)
class Cumulating(WindowAssigner):
    """Windows growing by ``step_ms`` from the start of each ``size_ms`` period (Flink's
    ``CUMULATE``): ``[S, S + step)``, ``[S, S + 2 step)``, ... ``[S, S + size)``; a
    record at ``t`` is in each of them that ends after ``t`` (a day's running total,
    written every hour)."""

    size_ms: int
    step_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.step_ms <= 0 or self.size_ms % self.step_ms:
            raise ValueError("a cumulating window needs a size that is a multiple of its step")

    def assign(self, event_time_ms: int) -> list[Window]:
        start = event_time_ms - (event_time_ms - self.offset_ms) % self.size_ms
        first = (event_time_ms - start) // self.step_ms + 1
        steps = self.size_ms // self.step_ms
        return [Window(start, start + k * self.step_ms) for k in range(first, steps + 1)]


@dataclass(frozen=True, slots=True)
class GlobalWindows(WindowAssigner):
    """One window holding all of time: it completes when the watermark reaches the end
    of the event-time range (a bounded input that finished); use early triggers to see
    results before that."""

    def assign(self, event_time_ms: int) -> list[Window]:
        return [Window(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS + 1)]


@dataclass(frozen=True, slots=True)
class Sessions(WindowAssigner):
    """Per key, activity separated by gaps of at least ``gap_ms``: each record opens
    ``[t, t + gap)``, and windows that overlap merge (their accumulators too), also
    when a late record bridges two sessions.

    ``merge_touching``: also merge windows that only touch (one ends where the next
    begins: records exactly ``gap_ms`` apart), as Flink's session windows do. Without
    it (the default, Beam's rule) those are two sessions."""

    gap_ms: int
    merge_touching: bool = False
    merging = True

    def __post_init__(self) -> None:
        if self.gap_ms <= 0:
            raise ValueError(f"sessions need gap_ms > 0, not {self.gap_ms}")

    def assign(self, event_time_ms: int) -> list[Window]:
        return [Window(event_time_ms, event_time_ms + self.gap_ms)]

    def merge(self, windows: Sequence[Window]) -> list[tuple[list[Window], Window]]:
        """Every chain of overlapping windows becomes their span."""
        groups: list[tuple[list[Window], Window]] = []
        for window in sorted(windows):
            end = groups[-1][1].end if groups else None
            if end is not None and (
                window.start < end or (self.merge_touching and window.start == end)
            ):
                members, span = groups[-1]
                groups[-1] = ([*members, window], Window(span.start, max(span.end, window.end)))
            else:
                groups.append(([window], window))
        return [(members, span) for members, span in groups if len(members) > 1]


@dataclass(frozen=True, slots=True)
class Sliding(WindowAssigner):
    """Sliding windows in the sense of *Designing Data-Intensive Applications* (ch. 11):
    per key, one window for every distinct event time ``t``, ``[t - span + 1, t + 1)``,
    holding the key's events with ``t - span < ts <= t``, so every group of events less
    than ``span_ms`` apart is in the window of its latest event (Kafka Streams' sliding
    windows' left windows, without their right windows).

    :meth:`assign` gives the window a record's own time opens; ``WindowedAggregation``
    also adds the record to the key's existing windows of times ``t`` to
    ``t + span - 1``, from per-time accumulators it keeps (see ``docs/windows.md``).
    """

    span_ms: int

    def __post_init__(self) -> None:
        if self.span_ms <= 0:
            raise ValueError(f"a sliding window needs span_ms > 0, not {self.span_ms}")

    def assign(self, event_time_ms: int) -> list[Window]:
        return [self.window_at(event_time_ms)]

    def window_at(self, time_ms: int) -> Window:
        """The window of the events up to ``time_ms``: ``[time - span + 1, time + 1)``."""
        return Window(time_ms - self.span_ms + 1, time_ms + 1)


@dataclass(frozen=True, slots=True)
class FieldWindows(WindowAssigner):
    """Each record's window is ``[start, end)`` read from its JSON value: ``end`` from the
    field ``end_field``, ``start`` from ``start_field`` (None: the record's event time).
    Records of a key with the same window aggregate together, and the window fires when
    the watermark passes its end: e.g. the bids joined with their auction, in a window
    ending at the auction's ``expires`` (the highest bid when it closes)."""

    end_field: str
    start_field: str | None = None

    def assign(self, event_time_ms: int) -> list[Window]:
        raise ValueError(f"{type(self).__name__} reads the record: use assign_record")

    def assign_record(self, record: Record) -> list[Window]:
        return self.assign_value(JSON.loads(record.value), record.event_time_ms)

    def assign_value(self, body: Any, event_time_ms: int) -> list[Window]:
        """:meth:`assign_record` of a record whose value parses to ``body`` (for a caller
        that has parsed it already)."""
        return [Window(*self.bounds(body, event_time_ms))]

    def bounds(self, body: Any, event_time_ms: int) -> tuple[int, int]:
        """The ``(start, end)`` of the one window of a record whose value parses to
        ``body`` (``ValueError`` when the fields are missing, not times, or empty)."""
        if type(body) is dict:  # the common case, checked cheaply
            end = body.get(self.end_field)
            start = event_time_ms if self.start_field is None else body.get(self.start_field)
            if type(start) is int and type(end) is int:  # noqa: SIM102 (short lines)
                if MIN_EVENT_TIME_MS <= start < end <= MAX_EVENT_TIME_MS + 1:
                    return start, end
        if not isinstance(body, dict):
            raise ValueError(f"{type(self).__name__}: the record's value is not a JSON object")
        end = _time_field(body, self.end_field)
        start = event_time_ms if self.start_field is None else _time_field(body, self.start_field)
        if end <= start:
            raise ValueError(f"window [{start}, {end}) is empty ({self.end_field!r} <= start)")
        return start, end


def _time_field(body: dict[str, object], name: str) -> int:
    found = body.get(name)
    if isinstance(found, bool) or not isinstance(found, int):
        raise ValueError(f"field {name!r} is {found!r}, not a time in ms")
    if not MIN_EVENT_TIME_MS <= found <= MAX_EVENT_TIME_MS + 1:
        raise ValueError(f"field {name!r} = {found} is out of the event-time range")
    return found


def parse_window(spec: str) -> WindowAssigner:
    """A window from its text form (topology ``params``): ``tumbling:SIZE_MS``,
    ``hopping:SIZE_MS:SLIDE_MS``, ``cumulate:SIZE_MS:STEP_MS``, ``session:GAP_MS``
    (``session:GAP_MS:touching``: sessions exactly a gap apart merge, Flink's rule),
    ``sliding:SPAN_MS`` or ``global``, or ``field:END_FIELD`` / ``field:START_FIELD:END_FIELD``
    (:class:`FieldWindows`); a duration is milliseconds or a number with a unit
    (``tumbling:1m``, ``hopping:1h:5m``: ``dataflow/_durations.py``)."""
    kind, *numbers = spec.split(":")
    if kind == "field" and 1 <= len(numbers) <= 2 and all(numbers):
        return FieldWindows(numbers[-1], numbers[0] if len(numbers) == 2 else None)
    touching = kind == "session" and numbers[-1:] == ["touching"]
    if touching:
        numbers = numbers[:-1]
    try:
        values = [duration_ms(n, "window") for n in numbers]
        if kind == "tumbling" and len(values) == 1:
            return Tumbling(values[0])
        if kind == "hopping" and len(values) == 2:
            return Hopping(values[0], values[1])
        if kind == "cumulate" and len(values) == 2:
            return Cumulating(values[0], values[1])
        if kind == "global" and not values:
            return GlobalWindows()
        if kind == "session" and len(values) == 1:
            return Sessions(values[0], merge_touching=touching)
        if kind == "sliding" and len(values) == 1:
            return Sliding(values[0])
    except ValueError as exc:
        raise ValueError(f"window {spec!r}: {exc}") from None
    raise ValueError(
        f"window {spec!r}: expected tumbling:SIZE_MS, hopping:SIZE_MS:SLIDE_MS, "
        "cumulate:SIZE_MS:STEP_MS, session:GAP_MS[:touching], sliding:SPAN_MS, global or "
        "field:[START_FIELD:]END_FIELD"
    )
