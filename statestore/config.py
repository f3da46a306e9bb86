"""Configuration of one state store."""

from __future__ import annotations

from dataclasses import dataclass

MINUTE_MS = 60_000


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """Settings of one key interval's store.

    Attributes:
        sync: fsync the write-ahead log on every commit. Off trades the last
            commits before a machine crash (not a process crash) for speed.
        dedup_segment_ms: width of one dedup segment; one Bloom filter chain
            per segment, dropped whole when it expires.
        dedup_retention_ms: how long a record id is remembered at least, counted
            on the store's own clock (time the store was open: wall-clock steps
            and downtime do not count). Past it, an id from a sender that reports
            its progress (every Millrace node and injector) is forgotten only
            once that sender can no longer resend it; an id from any other
            sender is forgotten then.
        bloom_capacity: ids one Bloom filter holds at ``bloom_error_rate``
            before the segment chains another filter.
        bloom_error_rate: false-positive rate of each filter; a false positive
            costs one RocksDB lookup, never a wrong answer.
        state_cache_entries: committed state values kept in memory (write-through
            LRU, absent keys included); 0 disables the cache.
    """

    sync: bool = True
    dedup_segment_ms: int = 10 * MINUTE_MS
    dedup_retention_ms: int = 60 * MINUTE_MS
    bloom_capacity: int = 1_000_000
    bloom_error_rate: float = 0.001
    state_cache_entries: int = 100_000

    def __post_init__(self) -> None:
        if self.dedup_segment_ms <= 0:
            raise ValueError(f"dedup_segment_ms must be positive, got {self.dedup_segment_ms}")
        if self.dedup_retention_ms < self.dedup_segment_ms:
            raise ValueError(
                "dedup_retention_ms must be at least one segment "
                f"({self.dedup_retention_ms} < {self.dedup_segment_ms})"
            )
        if self.bloom_capacity <= 0:
            raise ValueError(f"bloom_capacity must be positive, got {self.bloom_capacity}")
        if not 0 < self.bloom_error_rate < 1:
            raise ValueError(f"bloom_error_rate must be in (0, 1), got {self.bloom_error_rate}")

    @classmethod
    def for_retention(cls, retention_ms: int | None, *, sync: bool = True) -> StoreConfig:
        """The defaults with ``dedup_retention_ms`` (None: the default), its segments
        narrowed to a sixth of it when it is shorter than the default's six."""
        if retention_ms is None:
            return cls(sync=sync)
        segment = min(cls.dedup_segment_ms, max(1, retention_ms // 6))
        return cls(sync=sync, dedup_retention_ms=retention_ms, dedup_segment_ms=segment)
