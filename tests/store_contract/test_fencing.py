"""Epoch fencing: a commit from an older owner epoch writes nothing."""

from __future__ import annotations

import pytest

from millrace.statestore import EpochFencedError, TimeDomain, Timer, TransactionStatus
from tests.store_contract.conftest import StoreFactory


def test_store_at_epoch_2_rejects_a_commit_from_epoch_1(factory: StoreFactory) -> None:
    store = factory.open()
    zombie = store.begin(epoch=1)
    store.claim_epoch(2)
    zombie.put(b"s", b"zombie")
    zombie.mark_seen([b"z" * 16])
    zombie.set_timer(Timer(domain=TimeDomain.EVENT_TIME, key=b"k", tag="t", time_ms=1))
    zombie.add_outbox(b"p", b"zombie")
    zombie.set_meta("m", b"zombie")
    with pytest.raises(EpochFencedError) as raised:
        zombie.commit()
    assert raised.value.epoch == 1
    assert raised.value.owner_epoch == 2
    assert "epoch 1 is fenced" in str(raised.value)
    assert zombie.status is TransactionStatus.FAILED

    def nothing_visible() -> None:
        current = factory.current
        assert current is not None
        assert current.get(b"s") is None
        assert current.begin().seen([b"z" * 16]) == [False]
        assert current.due_timers(TimeDomain.EVENT_TIME, None) == []
        assert list(current.outbox()) == []
        assert current.get_meta("m") is None

    nothing_visible()
    store = factory.reopen()
    assert store.owner_epoch == 2, "the claim is durable"
    nothing_visible()
    with pytest.raises(EpochFencedError):
        store.begin(epoch=1).commit()


def test_newer_epoch_commits_and_fences_older(factory: StoreFactory) -> None:
    store = factory.open()
    store.claim_epoch(2)
    txn = store.begin(epoch=3)
    txn.put(b"a", b"1")
    txn.commit()
    assert store.owner_epoch == 3, "a commit from a newer epoch takes ownership atomically"
    with pytest.raises(EpochFencedError):
        store.begin(epoch=2).commit()
    with pytest.raises(EpochFencedError):
        store.claim_epoch(2)
    assert factory.reopen().owner_epoch == 3


def test_default_epoch_is_the_current_owner(store: object) -> None:
    from millrace.statestore import StateStore

    assert isinstance(store, StateStore)
    store.claim_epoch(5)
    txn = store.begin()
    assert txn.epoch == 5
    txn.commit()
