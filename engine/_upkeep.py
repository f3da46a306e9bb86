"""``StoreUpkeep``: what an interval does to its store besides its work, each part on
its own schedule so that the worker may ask every turn.

- Dead letters older than the computation's ``dead_letter_retention_ms`` go (a scan of
  the reserved dead-letter prefix, once a minute).
- The per-key timer-fire counters of stores from before timers kept their setters
  (``engine/_production_ids.py``) go, a few thousand per sweep, with the dead letters.
- The outbox and timer columns are rewritten when one holds more than a few files:
  RocksDB leaves a flushed file of tombstones alone for good otherwise
  (:meth:`statestore.StateStore.compact_deletions`).
"""

from __future__ import annotations

from itertools import islice

from millrace.engine._dead_letters import expired_letters
from millrace.engine._production_ids import RETIRED_TIMER_FIRES_PREFIX
from millrace.statestore import Clock, StateStore

LETTER_SWEEP_MS = 60_000
"""How often an interval looks for dead letters past their retention."""
RETIRED_PER_SWEEP = 10_000
"""How many retired timer-fire counters one sweep deletes at most."""
COMPACTION_CHECK_MS = 30_000
"""How often an interval counts the files of its outbox and timer columns..."""
COMPACTION_FILES = 8
"""...and rewrites one holding more than this many (tombstones left by flushes)."""


class StoreUpkeep:
    """The upkeep of one interval's store."""

    def __init__(self, store: StateStore, letter_retention_ms: int, clock: Clock) -> None:
        """``letter_retention_ms``: how long a dead letter is kept (0: for good)."""
        self._store = store
        self._retention_ms = letter_retention_ms
        self._clock = clock
        self._next_letter_sweep_ms = 0
        self._retired_left = True
        # Not at once: a process restarting in a loop would compact every time.
        self._next_compaction_ms = clock() + COMPACTION_CHECK_MS

    def sweep(self, epoch: int) -> int:
        """Delete the dead letters past their retention (and retired counters),
        committing under ``epoch``; returns how many dead letters went."""
        now = self._clock()
        if now < self._next_letter_sweep_ms:
            return 0
        self._next_letter_sweep_ms = now + LETTER_SWEEP_MS
        self._drop_retired_counters(epoch)
        if not self._retention_ms:
            return 0
        expired = expired_letters(self._store, now - self._retention_ms)
        if expired:
            txn = self._store.begin(epoch)
            txn.write_many((key, None) for key in expired)
            txn.commit(sync=False)  # a delete lost in a crash is made again next sweep
        return len(expired)

    def _drop_retired_counters(self, epoch: int) -> None:
        if not self._retired_left:
            return
        rows = self._store.scan_state(RETIRED_TIMER_FIRES_PREFIX)
        retired = [key for key, _ in islice(rows, RETIRED_PER_SWEEP)]
        if retired:
            txn = self._store.begin(epoch)
            txn.write_many((key, None) for key in retired)
            txn.commit(sync=False)  # a delete lost in a crash is made again next sweep
        self._retired_left = len(retired) == RETIRED_PER_SWEEP

    def compact(self) -> list[str]:
        """Rewrite the outbox or timer column if it holds more than ``COMPACTION_FILES``
        files; returns the columns rewritten."""
        now = self._clock()
        if now < self._next_compaction_ms:
            return []
        self._next_compaction_ms = now + COMPACTION_CHECK_MS
        return self._store.compact_deletions(max_files=COMPACTION_FILES)
