"""A split interval's store, cut down to one half of its key range.

An interval splits by copying its closed store once per half
(:func:`statestore.copy_store`) and cutting each copy down to its half here: the state
of the other half's keys goes with two RocksDB range deletions (state is laid out by
key hash, ``engine/_state_layout.py``), the other half's timers one by one (a store
holds far fewer timers than state entries), and what belongs to the interval as a
whole -- the productions still to send, the dead letters -- stays with the lower half
only, so that each is sent or kept once. Record ids stay in both: a record either half
already committed is a duplicate to both.
"""

from __future__ import annotations

import struct

from millrace.computations import KeyInterval
from millrace.computations._intervals import HASH_SPACE
from millrace.engine._dead_letters import DEAD_LETTER_PREFIX
from millrace.engine._scope import RESERVED_PREFIX
from millrace.statestore import StateStore, prefix_end
from millrace.statestore.types import TimeDomain

_U64 = struct.Struct(">Q")


def keeps_whole_interval_entries(half: KeyInterval) -> bool:
    """Whether ``half`` is the lower half: the one that keeps the outbox and the
    dead letters of the interval it was split from."""
    return half.index % 2 == 0


def cut_to_half(store: StateStore, half: KeyInterval, epoch: int) -> None:
    """Drop from ``store`` (a copy of the store of the interval ``half`` was split
    from) what ``half`` does not hold, under ``epoch``. Not atomic as a whole: cut a
    copy no one runs yet, and start from a new copy if it is interrupted."""
    ranges = []
    if half.start:
        ranges.append((b"", _U64.pack(half.start)))
    if half.end < HASH_SPACE:
        ranges.append((_U64.pack(half.end), RESERVED_PREFIX))
    lower = keeps_whole_interval_entries(half)
    if not lower:
        end = prefix_end(DEAD_LETTER_PREFIX)
        assert end is not None
        ranges.append((DEAD_LETTER_PREFIX, end))
    store.drop_state(epoch, ranges)
    txn = store.begin(epoch)
    for domain in TimeDomain:
        for timer in store.due_timers(domain, None):
            if not half.holds(timer.key):
                txn.delete_timer(domain, timer.key, timer.tag)
    if not lower:
        for production_id, _ in store.outbox():
            txn.remove_outbox(production_id)
    txn.commit(sync=True)
