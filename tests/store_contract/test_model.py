"""Seeded random operation sequences against a plain-Python model of the store.

Each sequence mixes state writes, timer moves, outbox changes, dedup marks,
commits, aborts and reopens; after every step the store must read exactly
what the model says. Runs against both backends.
"""

from __future__ import annotations

import random

import pytest

from millrace.statestore import StateStore, TimeDomain, Timer, Transaction
from tests.store_contract.conftest import StoreFactory

KEYS = [b"a", b"b", b"c", b"d"]
TAGS = ["x", "y"]


class Model:
    """The committed contents the store must show."""

    def __init__(self) -> None:
        self.state: dict[bytes, bytes] = {}
        self.timers: dict[tuple[TimeDomain, bytes, str], int] = {}
        self.outbox: dict[bytes, bytes] = {}
        self.seen: set[bytes] = set()

    def copy(self) -> Model:
        other = Model()
        other.state = dict(self.state)
        other.timers = dict(self.timers)
        other.outbox = dict(self.outbox)
        other.seen = set(self.seen)
        return other


def random_change(rng: random.Random, txn: Transaction, pending: Model, step: int) -> None:
    key = rng.choice(KEYS)
    match rng.randrange(7):
        case 0:
            txn.put(key, f"{step}".encode())
            pending.state[key] = f"{step}".encode()
        case 1:
            txn.delete(key)
            pending.state.pop(key, None)
        case 2:
            domain = rng.choice(list(TimeDomain))
            tag = rng.choice(TAGS)
            time_ms = rng.randrange(-50, 50)
            txn.set_timer(Timer(domain=domain, key=key, tag=tag, time_ms=time_ms))
            pending.timers[(domain, key, tag)] = time_ms
        case 3:
            domain = rng.choice(list(TimeDomain))
            tag = rng.choice(TAGS)
            txn.delete_timer(domain, key, tag)
            pending.timers.pop((domain, key, tag), None)
        case 4:
            txn.add_outbox(key, f"{step}".encode())
            pending.outbox[key] = f"{step}".encode()
        case 5:
            txn.remove_outbox(key)
            pending.outbox.pop(key, None)
        case _:
            rid = rng.randbytes(2)
            txn.mark_seen([rid])
            pending.seen.add(rid)


def matches(store: StateStore, model: Model) -> None:
    assert dict(store.scan_state(b"")) == model.state
    timers = {
        (t.domain, t.key, t.tag): t.time_ms
        for domain in TimeDomain
        for t in store.due_timers(domain, None)
    }
    assert timers == model.timers
    for domain in TimeDomain:
        times = [t.time_ms for t in store.due_timers(domain, None)]
        assert times == sorted(times)
    assert store.pending_timers == len(model.timers)
    assert dict(store.outbox()) == model.outbox
    assert store.outbox_count() == len(model.outbox)
    probes = [*sorted(model.seen), b"never-marked-id!"]
    assert store.begin().seen(probes) == [True] * len(model.seen) + [False]


@pytest.mark.parametrize("seed", range(12))
def test_random_sequences_match_the_model(factory: StoreFactory, seed: int) -> None:
    rng = random.Random(seed)
    store = factory.open()
    model = Model()
    for step in range(120):
        txn = store.begin()
        pending = model.copy()
        for _ in range(rng.randrange(1, 6)):
            random_change(rng, txn, pending, step)
        outcome = rng.random()
        if outcome < 0.75:
            txn.commit()
            model = pending
        else:
            txn.abort()
        if rng.random() < 0.1:
            store = factory.reopen()
        matches(store, model)
