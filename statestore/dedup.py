"""Record-id deduplication: time-segmented Bloom filters over the dedup column family.

Layout: the dedup column family holds ``segment | chain | record_id`` keys.
A segment covers ``dedup_segment_ms`` of commit time; within it, ids go to
filter ``chain`` 0 until it reaches capacity, then 1, and so on, so each
pybloom-live filter in memory holds exactly the ids stored under its
``(segment, chain)`` prefix. That makes three things exact:

- a "maybe" from filter ``(s, c)`` is confirmed by one RocksDB get of
  ``s | c | id`` (all maybes of a batch in one multi-get);
- rebuilding on open replays each prefix into its own filter with the store's
  hash seed, so the rebuilt filters are bit-for-bit the ones that were lost;
- forgetting a segment is dropping its filters and one range delete.

A segment expires when its whole span is older than ``dedup_retention_ms``
of the store's own clock (running time: see ``StateStore``) *and* every sender
that delivered into it has reported progress past what it delivered
(:class:`~statestore._dedup_progress.ProgressBook`): time alone never makes a
retry look new. Lookups ignore an expired segment at once, and the next
commit range-deletes its ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from millrace.statestore._bloom import BloomBatch, BloomHasher, FilterSize, Positions
from millrace.statestore._dedup_progress import ProgressBook, StagedProgress
from millrace.statestore._engine import Batch, Column, Engine
from millrace.statestore._keys import dedup_key, dedup_segment_prefix, split_dedup_key
from millrace.statestore.config import StoreConfig
from millrace.statestore.types import DedupStats, SenderProgress

_REBUILD_CHUNK = 8192


@dataclass(frozen=True, slots=True)
class StagedIds:
    """Ids written into a batch, to be added to the filters once the batch commits."""

    segment: int
    runs: tuple[tuple[int, int, int], ...]  # (chain, first row, end row)
    positions: Positions
    expired: tuple[int, ...]
    progress: StagedProgress


class DedupIndex:
    """The Bloom filters of one store plus the counters operators watch."""

    def __init__(self, engine: Engine, config: StoreConfig, *, seed: int | None = None) -> None:
        """``seed``: of the ids' hash (the store keeps one; random when None)."""
        self._engine = engine
        self._config = config
        self._size = FilterSize.of(config.bloom_capacity, config.bloom_error_rate)
        self._hasher = BloomHasher(self._size, seed)
        self._segments: dict[int, list[BloomBatch]] = {}
        self._expired_on_disk: set[int] = set()
        self.progress = ProgressBook()
        """Which senders may still retry into which segment."""
        self.lookups = 0
        self.bloom_negatives = 0
        self.confirmations = 0
        self.false_positives = 0

    def positions(self, record_ids: Sequence[bytes]) -> Positions:
        """Hash ids once; the result serves lookups and adds in every filter."""
        return self._hasher.positions(record_ids)

    def segment_at(self, now_ms: int) -> int:
        """The segment a commit at ``now_ms`` writes its ids to."""
        return now_ms // self._config.dedup_segment_ms

    def _first_live_segment(self, now_ms: int) -> int:
        # Segment s is old enough once its end, (s + 1) * width, is retention or more ago.
        return (now_ms - self._config.dedup_retention_ms) // self._config.dedup_segment_ms

    def _expired(self, segment: int, first_live: int) -> bool:
        return segment < first_live and self.progress.released(segment)

    def rebuild(self, now_ms: int) -> int:
        """Refill the filters from the dedup column family; returns the ids loaded."""
        self._segments.clear()
        self.progress.load(self._engine)
        first_live = self._first_live_segment(now_ms)
        loaded = 0
        group: tuple[int, int] | None = None
        pending: list[bytes] = []
        for key, _ in self._engine.scan(Column.DEDUP, b"", None):
            segment, chain, record_id = split_dedup_key(key)
            if self._expired(segment, first_live):
                self._expired_on_disk.add(segment)
                continue
            if (segment, chain) != group or len(pending) >= _REBUILD_CHUNK:
                loaded += self._load(group, pending)
                group, pending = (segment, chain), []
            pending.append(record_id)
        loaded += self._load(group, pending)
        return loaded

    def _load(self, group: tuple[int, int] | None, record_ids: list[bytes]) -> int:
        if group is None or not record_ids:
            return 0
        segment, chain = group
        self._filter(segment, chain).add(self._hasher.positions(record_ids))
        return len(record_ids)

    def _filter(self, segment: int, chain: int) -> BloomBatch:
        chains = self._segments.setdefault(segment, [])
        while len(chains) <= chain:
            chains.append(BloomBatch(self._size))
        return chains[chain]

    def lookup(self, record_ids: Sequence[bytes], positions: Positions, now_ms: int) -> list[bool]:
        """Which ids were committed before (within retention). One multi-get for all maybes."""
        count = len(record_ids)
        seen = [False] * count
        if count == 0:
            return seen
        self.lookups += count
        first_live = self._first_live_segment(now_ms)
        maybe_any = [False] * count
        keys: list[bytes] = []
        rows: list[int] = []
        for segment, chains in self._segments.items():
            if self._expired(segment, first_live):
                continue
            for chain, bloom in enumerate(chains):
                for row in bloom.maybe_rows(positions):
                    maybe_any[row] = True
                    keys.append(dedup_key(segment, chain, record_ids[row]))
                    rows.append(row)
        maybes = sum(maybe_any)
        self.bloom_negatives += count - maybes
        if not keys:
            return seen
        for row, value in zip(rows, self._engine.multi_get(Column.DEDUP, keys), strict=True):
            if value is not None:
                seen[row] = True
        confirmed = sum(seen)
        self.confirmations += confirmed
        self.false_positives += maybes - confirmed
        return seen

    def stage(
        self,
        batch: Batch,
        record_ids: Sequence[bytes],
        positions: Positions,
        now_ms: int,
        marks: Sequence[SenderProgress] = (),
    ) -> StagedIds:
        """Write ids, the senders' progress (``marks``) and expired-segment deletes into
        ``batch``; filters and the progress book change on :meth:`apply`."""
        segment = self.segment_at(now_ms)
        chains = self._segments.get(segment, [])
        chain = max(len(chains) - 1, 0)
        room = chains[-1].room if chains else self._config.bloom_capacity
        runs: list[tuple[int, int, int]] = []
        start = 0
        while start < len(record_ids):
            if room == 0:
                chain, room = chain + 1, self._config.bloom_capacity
            end = start + min(room, len(record_ids) - start)
            prefix = dedup_key(segment, chain, b"")
            batch.put_keys(Column.DEDUP, map(prefix.__add__, record_ids[start:end]), b"")
            runs.append((chain, start, end))
            room -= end - start
            start = end
        progress = self.progress.stage(batch, segment, marks)
        first_live = self._first_live_segment(now_ms)
        expired = tuple(
            s
            for s in sorted(self._segments.keys() | self._expired_on_disk)
            if s != segment and self._expired(s, first_live)
        )
        for old in expired:
            batch.delete_range(
                Column.DEDUP, dedup_segment_prefix(old), dedup_segment_prefix(old + 1)
            )
            self.progress.stage_forget(batch, old)
        return StagedIds(
            segment=segment,
            runs=tuple(runs),
            positions=positions,
            expired=expired,
            progress=progress,
        )

    def apply(self, staged: StagedIds) -> None:
        """The batch of :meth:`stage` committed: make the filters agree with the store."""
        for chain, start, end in staged.runs:
            self._filter(staged.segment, chain).add(staged.positions.rows(start, end))
        for old in staged.expired:
            self._segments.pop(old, None)
            self._expired_on_disk.discard(old)
        self.progress.apply(staged.progress, staged.expired)

    def has_expired(self, now_ms: int) -> bool:
        """True when some segment awaits its range delete."""
        first_live = self._first_live_segment(now_ms)
        return any(
            self._expired(s, first_live) for s in self._segments.keys() | self._expired_on_disk
        )

    def stored_segments(self) -> dict[int, int]:
        """Ids stored in the dedup column family per segment (a full scan: for tools and tests)."""
        counts: dict[int, int] = {}
        for key, _ in self._engine.scan(Column.DEDUP, b"", None):
            segment = split_dedup_key(key)[0]
            counts[segment] = counts.get(segment, 0) + 1
        return counts

    def in_filters(self, record_ids: Sequence[bytes]) -> list[bool]:
        """Per id: does some filter answer "maybe seen" (no RocksDB read; for tests and
        tools: a committed id must always be in one)."""
        positions = self._hasher.positions(record_ids)
        found = [False] * len(record_ids)
        for chains in self._segments.values():
            for bloom in chains:
                for row in bloom.maybe_rows(positions):
                    found[row] = True
        return found

    def segment_filters(self) -> dict[int, list[BloomBatch]]:
        """The live filters by segment (for inspection and tests)."""
        return {segment: list(chains) for segment, chains in self._segments.items()}

    def stats(self) -> DedupStats:
        """A snapshot of the counters."""
        return DedupStats(
            lookups=self.lookups,
            bloom_negatives=self.bloom_negatives,
            confirmations=self.confirmations,
            false_positives=self.false_positives,
            segments=len(self._segments),
            filters=sum(len(chains) for chains in self._segments.values()),
        )
