"""The low-watermark authority: interval reports in, one monotonic watermark per name out.

Interval owners report the event time of their oldest unfinished work (see
``WatermarkReport`` in ``proto/millrace/wire/v1/watermark.proto``); the
injector sets the watermark of each source stream. The authority folds both
into ``LW(C) = min(oldest work of C, LW of everything that feeds C)`` with
:func:`computations.compute_watermarks` and publishes the result:

* per computation under its name, and per source stream as ``"source:<stream>"``;
* never decreasing: a restarted node may report work older than what was
  already published (those records are late), but a published watermark stays;
* held at ``MIN_TIME`` for a computation while any of its intervals has never
  reported, because work nobody has reported may be arbitrarily old (so, after an
  interval splits, until both halves report: the published value stays meanwhile).

Reports carry the reporter's epoch for the interval. A report with a lower
epoch than the one the authority already holds comes from a fenced-off owner
and is ignored, so a zombie cannot hold the watermark back or push it ahead.

Pure logic, no gRPC: ``injector.authority_service`` serves it. Thread-safe:
one lock guards all state, and a condition on that lock wakes watchers
(:meth:`WatermarkAuthority.wait_for_change`) whenever the published map changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from millrace.computations import MAX_TIME, MIN_TIME, IntervalId, Topology
from millrace.engine import SOURCE_PREFIX, compute_watermarks, feeders, saturate, source_name
from millrace.injector.authority_journal import AuthorityJournal
from millrace.statestore import MAX_EPOCH, Clock, wall_clock_ms

"""Published names of source-stream watermarks: ``"source:<stream>"``."""


@dataclass(frozen=True, slots=True)
class IntervalReport:
    """One interval owner's report, independent of the wire format.

    ``oldest_work_ms`` is the event time of the interval's oldest unfinished
    work, or None when it has none. ``count`` is the number of intervals the
    reporter believes the computation has; None skips that check.
    ``sequence`` orders one reporter's reports at one epoch: a report that is
    not newer than the last accepted one is dropped (a delayed retry).
    """

    computation: str
    index: int
    epoch: int
    oldest_work_ms: int | None
    count: int | None = None
    sequence: int = 0
    """Increases per report of one process at one epoch; 0: unordered."""


@dataclass(frozen=True, slots=True)
class PublishedWatermark:
    """A published watermark and the authority's clock when it took that value."""

    low_ms: int
    computed_at_ms: int


@dataclass(frozen=True, slots=True)
class _Latest:
    epoch: int
    oldest_work_ms: int | None
    sequence: int = 0


class WatermarkAuthority:
    """Aggregates interval reports and source watermarks into published low watermarks."""

    def __init__(
        self,
        topology: Topology,
        *,
        clock: Clock = wall_clock_ms,
        leased_epoch: Callable[[str, int], int] | None = None,
        intervals_now: Callable[[str], list[int]] | None = None,
    ) -> None:
        """``leased_epoch``: the ownership registry's current epoch of an interval;
        ``intervals_now``: the ids of a computation's intervals now (some split), else
        its first intervals."""
        for name in topology.computations:
            if name.startswith(SOURCE_PREFIX):
                raise ValueError(
                    f"computation {name!r} clashes with the published names of source "
                    f"watermarks ({SOURCE_PREFIX}<stream>); rename the computation"
                )
        self._topology = topology
        self._clock = clock
        # The ownership registry's current epoch per interval: a report below it comes
        # from an owner that has been replaced, even before the new one reports.
        self._leased_epoch = leased_epoch
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._intervals = {name: spec.intervals for name, spec in topology.computations.items()}
        self._intervals_now = intervals_now or (lambda name: list(range(self._intervals[name])))
        self._sources = frozenset(topology.sources())
        self._latest: dict[IntervalId, _Latest] = {}
        """Reports received by this incarnation: an interval without one holds back its
        computation and everything downstream (MIN_TIME), even after a restart."""
        self._epoch_floor: dict[IntervalId, int] = {}
        """Epochs an earlier incarnation accepted: reports below them are stale."""
        self._source_watermarks: dict[str, int] = {}
        self._idle: set[str] = set()
        """Sources idle and excluded: they gate no computation meanwhile."""
        self._version = 0
        self._durable: dict[str, PublishedWatermark] | None = None
        now = clock()
        self._published: dict[str, PublishedWatermark] = {
            name: PublishedWatermark(MIN_TIME, now)
            for name in [*topology.computations, *map(source_name, topology.sources())]
        }

    @property
    def topology(self) -> Topology:
        """The topology whose watermarks this authority publishes."""
        return self._topology

    # -- inputs --------------------------------------------------------------

    def report(self, reports: Iterable[IntervalReport]) -> tuple[int, list[IntervalId]]:
        """Fold interval reports in, in order. Returns ``(accepted, ignored)``.

        A report replaces the interval's previous one when its epoch is equal
        or higher. It is ignored, and its ``(computation, index)`` listed in
        ``ignored``, when its epoch is lower than the last accepted one or than the
        interval's current lease (a fenced-off owner), or when the
        computation is unknown, the index out of range, or ``count`` differs
        from the topology's interval count: in every case the reporter does
        not own a live interval and should stop reporting it.
        """
        accepted = 0
        ignored: list[IntervalId] = []
        with self._lock:
            for item in reports:
                if self._accept(item):
                    accepted += 1
                else:
                    ignored.append(IntervalId(item.computation, item.index))
            if accepted:
                self._republish()
        return accepted, ignored

    def _accept(self, item: IntervalReport) -> bool:
        intervals = self._intervals.get(item.computation)
        if intervals is None or item.index not in self._intervals_now(item.computation):
            return False
        if item.count is not None and item.count != intervals:
            return False
        key = IntervalId(item.computation, item.index)
        previous = self._latest.get(key)
        if previous is not None and item.epoch < previous.epoch:
            return False
        if item.epoch < self._epoch_floor.get(key, 0) or not 0 <= item.epoch < MAX_EPOCH:
            return False
        leased = 0 if self._leased_epoch is None else self._leased_epoch(*key)
        if leased and item.epoch != leased:
            # Below the lease: a replaced owner. Above it: an epoch nobody granted (forged).
            return False
        if (
            previous is not None
            and item.epoch == previous.epoch
            and item.sequence
            and item.sequence <= previous.sequence
        ):
            return True  # a late retry of an older report: the newer one stands
        self._latest[key] = _Latest(item.epoch, item.oldest_work_ms, item.sequence)
        return True

    def set_source_watermark(self, stream: str, ms: int) -> int:
        """Move the watermark of source ``stream`` forward to ``ms``; returns the current value.

        A value behind the current one is ignored: source watermarks only move forward.
        """
        if stream not in self._sources:
            raise ValueError(
                f"{stream!r} is not a source stream of the topology; "
                f"sources are {sorted(self._sources)}"
            )
        ms = saturate(ms)
        with self._lock:
            current = self._source_watermarks.get(stream, MIN_TIME)
            if ms > current:
                self._source_watermarks[stream] = current = ms
                self._republish()
            return current

    def set_source_idle(self, stream: str, idle: bool) -> None:
        """Whether source ``stream`` is idle and excluded (Flink's idleness): while it is,
        computations fed by it do not wait for it (its own watermark stays as it is, so
        its records after the idle spell may be late for them)."""
        with self._lock:
            if idle == (stream in self._idle):
                return
            if idle:
                self._idle.add(stream)
            else:
                self._idle.discard(stream)
            self._republish()

    # -- outputs -------------------------------------------------------------

    def watermarks(self) -> dict[str, int]:
        """The published low watermark of every computation and every ``"source:<stream>"``."""
        with self._lock:
            return {name: mark.low_ms for name, mark in self._visible().items()}

    def snapshot(self) -> tuple[int, dict[str, PublishedWatermark]]:
        """The current version and published map, with the time each value was computed."""
        with self._lock:
            return self._version, dict(self._visible())

    def require_durability(self) -> None:
        """From now on publish only values :meth:`mark_durable` confirmed were journaled,
        so nothing a watcher saw can move back after a crash (what a restore gives back
        is durable by definition)."""
        with self._lock:
            self._durable = dict(self._published)

    def mark_durable(self, journaled: Mapping[str, int], *, as_of: int | None = None) -> int:
        """The values in ``journaled`` (from :meth:`journal`) are on disk: publish them.

        ``as_of``: the :attr:`version` the journal was taken at (:meth:`versioned_journal`).
        Returns the version the journal on disk now covers: the current one when nothing
        changed since it was taken (publishing it changes no journaled content), else
        ``as_of``, so a change that landed while the journal was being written is
        journaled (and published) at the next call, never taken as written."""
        with self._lock:
            untouched = as_of is None or self._version == as_of
            changed = False
            if self._durable is not None:
                for name, low_ms in journaled.items():
                    current = self._durable.get(name)
                    if current is not None and low_ms > current.low_ms:
                        self._durable[name] = PublishedWatermark(low_ms, self._clock())
                        changed = True
            if changed:
                self._version += 1
                self._changed.notify_all()
            return self._version if untouched or as_of is None else as_of

    def _visible(self) -> dict[str, PublishedWatermark]:
        return self._published if self._durable is None else self._durable

    def input_watermark(self, computation: str) -> int:
        """The watermark ``computation``'s event-time timers fire on.

        The minimum of the published low watermarks of what feeds it: each
        source stream it reads (``"source:<stream>"``) and each computation
        producing a stream it reads. It excludes the computation's own work,
        so its pending timers can fire; they hold back only ``LW(computation)``,
        which is what its consumers see.
        """
        if computation not in self._intervals:
            raise KeyError(f"unknown computation {computation!r}")
        with self._lock:
            return min(
                self._published[name].low_ms for name in feeders(self._topology, computation)
            )

    def oldest_work(self) -> dict[str, int | None]:
        """Per computation, the oldest work its intervals report (MIN_TIME while one never has)."""
        with self._lock:
            return self._oldest_work()

    def source_watermarks(self) -> dict[str, int]:
        """The watermark of every source stream, as set by :meth:`set_source_watermark`."""
        with self._lock:
            return {s: self._source_watermarks.get(s, MIN_TIME) for s in self._sources}

    @property
    def version(self) -> int:
        """A counter bumped every time a published value changes."""
        with self._lock:
            return self._version

    def wait_for_change(self, version: int, timeout: float) -> tuple[int, dict[str, int]]:
        """Block until the published version differs from ``version`` or ``timeout`` seconds pass.

        Returns the version and the published map at return (the same version
        on a timeout).
        """
        current, published = self.wait_for_updates(version, timeout)
        return current, {name: mark.low_ms for name, mark in published.items()}

    def wait_for_updates(
        self, version: int, timeout: float
    ) -> tuple[int, dict[str, PublishedWatermark]]:
        """Like :meth:`wait_for_change`, with the time each value was computed."""
        with self._changed:
            self._changed.wait_for(lambda: self._version != version, timeout)
            return self._version, dict(self._visible())

    # -- internals (lock held) ----------------------------------------------

    def _oldest_work(self) -> dict[str, int | None]:
        result: dict[str, int | None] = {}
        for name in self._intervals:
            works: list[int] = []
            now = self._intervals_now(name)
            for key in [k for k in self._latest if k[0] == name and k[1] not in now]:
                # Split or merged away: its last report must not stand for it if it
                # comes back (merged), nor be taken again.
                gone = self._latest.pop(key)
                self._epoch_floor[key] = max(self._epoch_floor.get(key, 0), gone.epoch + 1)
            for index in now:
                latest = self._latest.get(IntervalId(name, index))
                if latest is None:
                    works = [MIN_TIME]
                    break
                if latest.oldest_work_ms is not None:
                    works.append(latest.oldest_work_ms)
            result[name] = min(works, default=None)
        return result

    # -- journal ------------------------------------------------------------------

    def reported_epochs(self) -> dict[IntervalId, int]:
        """The newest epoch known per interval, from reports or an earlier incarnation."""
        with self._lock:
            return self._known_epochs()

    def journal(self) -> AuthorityJournal:
        """Everything needed to resume without publishing anything older: published
        values, the newest epoch per interval, source watermarks."""
        return self.versioned_journal()[1]

    def versioned_journal(self) -> tuple[int, AuthorityJournal]:
        """:meth:`journal` and the :attr:`version` it reflects, taken together."""
        with self._lock:
            return self._version, AuthorityJournal(
                published={name: p.low_ms for name, p in self._published.items()},
                epochs=self._known_epochs(),
                sources=dict(self._source_watermarks),
            )

    def _known_epochs(self) -> dict[IntervalId, int]:
        epochs = dict(self._epoch_floor)
        for key, latest in self._latest.items():
            epochs[key] = max(epochs.get(key, 0), latest.epoch)
        return epochs

    def restore(self, journal: AuthorityJournal) -> None:
        """Resume from a :meth:`journal` (unknown names are ignored).

        Published values and source watermarks come back as they were. Reports
        do not: the oldest work they named may have moved earlier since (a hold
        reported, then the ack it protected), so every interval must report to
        this incarnation before its computation, or anything downstream of it,
        is published past the restored values. Their epochs come back as floors.
        """
        now = self._clock()
        with self._lock:
            for name, low_ms in journal.published.items():
                if name in self._published and low_ms > self._published[name].low_ms:
                    self._published[name] = PublishedWatermark(low_ms, now)
            for (name, index), epoch in journal.epochs.items():
                if name in self._intervals and 0 <= index < MAX_EPOCH:
                    key = IntervalId(name, index)
                    self._epoch_floor[key] = max(self._epoch_floor.get(key, 0), epoch)
            for stream, ms in journal.sources.items():
                if stream in self._sources:
                    self._source_watermarks[stream] = ms
            self._version += 1
            self._changed.notify_all()

    def _republish(self) -> None:
        gating = {
            stream: MAX_TIME if stream in self._idle else ms
            for stream, ms in self._source_watermarks.items()
        }
        gating.update((stream, MAX_TIME) for stream in self._idle)
        marks = compute_watermarks(self._topology, gating, self._oldest_work())
        candidates = {name: mark.low_ms for name, mark in marks.items()}
        for stream in self._sources:
            candidates[source_name(stream)] = self._source_watermarks.get(stream, MIN_TIME)
        now: int | None = None
        for name, low_ms in candidates.items():
            if low_ms > self._published[name].low_ms:
                now = self._clock() if now is None else now
                self._published[name] = PublishedWatermark(low_ms, now)
        if now is not None:
            self._version += 1
            self._changed.notify_all()
