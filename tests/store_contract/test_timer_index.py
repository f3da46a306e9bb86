"""The in-memory timer index answers as a scan of the TIMERS column would.

Random timer sets, moves and deletes over many commits (keys of different
lengths, so the column's order is length first; many moves), half of the commits also firing due
timers as the engine does (deleting, moving or setting again what
``due_timers`` handed out), checked after every commit and after a reopen
against the oracle: the column's entries read back from the engine, put in the
documented order (time, then key length, key and tag, as the time-ordered entries
of earlier versions sorted). Stores of earlier versions lose those entries when
opened, and keep their timers.
"""

from __future__ import annotations

import random
import struct

import pytest

from millrace.statestore import StateStore, TimeDomain, Timer, _keys
from millrace.statestore._engine import Column
from tests.store_contract.conftest import StoreFactory

KEYS = [b"", b"a", b"b", b"ab", b"ba", b"zzz", b"\x00", b"\xff\xfe"]
TAGS = ["on", "gc", "early", "\u00e9"]


def order(timer: Timer) -> tuple[int, bytes]:
    """The documented order of due timers: time, then key length, key and tag."""
    return timer.time_ms, struct.pack(">I", len(timer.key)) + timer.key + timer.tag.encode()


def scanned(store: StateStore, domain: TimeDomain, up_to_ms: int | None) -> list[Timer]:
    """Due timers of the column's entries, in the documented order (the oracle)."""
    every = []
    for raw, value in store._engine.scan(Column.TIMERS, b"", None):
        assert raw.startswith(_keys.TIMER_INDEX), "one entry per timer, its index entry"
        timer_domain, key, tag = _keys.decode_timer_index_key(raw)
        time_ms = _keys.decode_time(value[:8])
        if timer_domain == domain and (up_to_ms is None or time_ms <= up_to_ms):
            every.append(Timer(domain, key, tag, time_ms, value[8:]))
    return sorted(every, key=order)


def check(store: StateStore, rng: random.Random) -> None:
    total = 0
    for domain in TimeDomain:
        every = scanned(store, domain, None)
        total += len(every)
        assert store.due_timers(domain, None) == every
        assert store.next_timer_ms(domain) == (every[0].time_ms if every else None)
        up_to = rng.randrange(-120, 120)
        limit = rng.choice([None, 1, 2, 5])
        expected = scanned(store, domain, up_to)
        assert store.due_timers(domain, up_to, limit) == expected[:limit]
        for timer in every:
            assert store.get_timer(domain, timer.key, timer.tag) == timer.time_ms
    assert store.pending_timers == total


@pytest.mark.parametrize("seed", range(4))
def test_index_equals_the_column(factory: StoreFactory, seed: int) -> None:
    rng = random.Random(seed)
    store = factory.open()
    for step in range(300):
        txn = store.begin()
        if rng.random() < 0.5:  # fire some due timers as the engine does: delete or reset
            domain = rng.choice(list(TimeDomain))
            for timer in store.due_timers(domain, rng.randrange(-120, 120), rng.choice([None, 3])):
                roll = rng.random()
                if roll < 0.6:
                    txn.delete_timer(timer.domain, timer.key, timer.tag)
                elif roll < 0.8:
                    txn.set_timer(Timer(domain, timer.key, timer.tag, rng.randrange(-100, 100)))
                elif roll < 0.9:
                    txn.set_timer(timer)  # set again to the time it had
        for _ in range(rng.randrange(1, 12)):
            domain = rng.choice(list(TimeDomain))
            key, tag = rng.choice(KEYS), rng.choice(TAGS)
            if rng.random() < 0.7:
                time_ms = rng.randrange(-100, 100)
                txn.set_timer(Timer(domain=domain, key=key, tag=tag, time_ms=time_ms))
            else:
                txn.delete_timer(domain, key, tag)
        if rng.random() < 0.1:
            txn.abort()
        else:
            txn.commit()
        check(store, rng)
        if step % 100 == 99:
            store = factory.reopen()
            check(store, rng)


def test_firing_in_order_drains_every_timer(factory: StoreFactory) -> None:
    """Fire-and-delete rounds (as the engine does) see each timer once, in time order."""
    store = factory.open()
    rng = random.Random(7)
    txn = store.begin()
    for i in range(500):
        txn.set_timer(Timer(TimeDomain.EVENT_TIME, b"k%d" % (i % 37), f"t{i}", rng.randrange(1000)))
    txn.commit()
    fired: list[Timer] = []
    while due := store.due_timers(TimeDomain.EVENT_TIME, None, 64):
        txn = store.begin()
        for timer in due:
            txn.delete_timer(timer.domain, timer.key, timer.tag)
        txn.commit()
        fired.extend(due)
    assert [t.time_ms for t in fired] == sorted(t.time_ms for t in fired)
    assert len({(t.key, t.tag) for t in fired}) == 500
    assert store.pending_timers == 0


def test_a_commit_that_failed_after_staging_leaves_nothing_behind(factory: StoreFactory) -> None:
    """The index keeps the changes it read when staging for the commit's apply: a
    commit whose write failed after staging must not leak them into the next."""
    from millrace.statestore._timer_index import TimerIndex

    store = factory.open()
    index = TimerIndex()
    first = {(TimeDomain.EVENT_TIME, b"a", "on"): Timer(TimeDomain.EVENT_TIME, b"a", "on", 5)}
    index.stage(store._engine.new_batch(), first)  # its write fails: never applied
    second = {(TimeDomain.EVENT_TIME, b"b", "on"): Timer(TimeDomain.EVENT_TIME, b"b", "on", 7)}
    index.stage(store._engine.new_batch(), second)
    index.apply(second)
    assert index.due(TimeDomain.EVENT_TIME, None, None) == [second[next(iter(second))]]
    index.apply(first)  # changes it did not stage last: read again
    assert [t.key for t in index.due(TimeDomain.EVENT_TIME, None, None)] == [b"a", b"b"]


def test_a_store_drops_the_time_ordered_entries_of_earlier_versions(
    factory: StoreFactory,
) -> None:
    """Earlier versions wrote a time-ordered entry beside each timer's index entry;
    nothing reads them now and no commit deletes them: opening drops them, timers kept."""
    store = factory.open()
    txn = store.begin()
    timers = [Timer(TimeDomain.EVENT_TIME, b"k%d" % i, "on", 100 - i) for i in range(5)]
    for timer in timers:
        txn.set_timer(timer)
    txn.commit()
    batch = store._engine.new_batch()  # as an earlier version wrote them
    for timer in timers:
        identity = struct.pack(">I", len(timer.key)) + timer.key + timer.tag.encode()
        ordered = b"T" + bytes((timer.domain,)) + _keys.encode_time(timer.time_ms) + identity
        batch.put(Column.TIMERS, ordered, b"")
    store._engine.write(batch, sync=True)
    store = factory.reopen()
    left = [raw for raw, _ in store._engine.scan(Column.TIMERS, b"", None)]
    assert left and all(raw.startswith(_keys.TIMER_INDEX) for raw in left)
    assert store.due_timers(TimeDomain.EVENT_TIME, None) == sorted(timers, key=order)
