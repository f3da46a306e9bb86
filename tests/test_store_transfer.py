"""An interval's store sent over ``Admin.HandOver`` (issue 34), on a real RocksDB store:
it arrives whole or not at all, and bad pieces from the network are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.node._store_transfer import (
    TransferError,
    copy_ahead,
    receive_store,
    store_pieces,
)
from millrace.statestore import StateStore, StoreConfig
from millrace.wire.v1 import admin_pb2
from tests.support.store_files import fill_outbox_with_tombstone_files


def _store(path: Path, rows: int) -> None:
    store = StateStore.open_rocksdb(path, config=StoreConfig(sync=True))
    store.claim_epoch(3)
    txn = store.begin(epoch=3)
    for i in range(rows):
        txn.put(f"k{i}".encode(), b"x" * 1000)
    txn.commit()
    store.close()


def test_a_store_sent_in_pieces_opens_with_its_state_and_epoch(tmp_path: Path) -> None:
    _store(tmp_path / "from", 3000)  # a few MiB: several pieces
    pieces = list(store_pieces(tmp_path / "from", 3))
    assert len(pieces) > 3 and pieces[-1].done and pieces[-1].epoch == 3
    assert not any(p.name in ("LOCK", "LOG") for p in pieces)
    (tmp_path / "to").mkdir()
    (tmp_path / "to" / "stale").write_text("an older copy, replaced whole")
    assert receive_store(iter(pieces), tmp_path / "to") == 3
    assert not (tmp_path / "to" / "stale").exists()
    store = StateStore.open_rocksdb(tmp_path / "to")
    try:
        assert store.owner_epoch == 3
        assert store.get(b"k2999") == b"x" * 1000
    finally:
        store.close()


@pytest.mark.parametrize(
    ("pieces", "says"),
    [
        ([admin_pb2.StoreFilePiece(name="CURRENT", data=b"x")], "ended before"),
        ([admin_pb2.StoreFilePiece(name="../escape", data=b"x")], "plain file name"),
        ([admin_pb2.StoreFilePiece(name="", data=b"x")], "plain file name"),
        ([admin_pb2.StoreFilePiece(name="a/b", data=b"x")], "plain file name"),
        (
            [
                admin_pb2.StoreFilePiece(name="A", data=b"x"),
                admin_pb2.StoreFilePiece(name="B", data=b"x"),
                admin_pb2.StoreFilePiece(name="A", data=b"x"),
            ],
            "sent twice",
        ),
    ],
)
def test_a_cut_or_bad_stream_leaves_the_old_store_as_it_was(
    tmp_path: Path, pieces: list[admin_pb2.StoreFilePiece], says: str
) -> None:
    target = tmp_path / "to"
    target.mkdir()
    (target / "CURRENT").write_text("the store that was here")
    with pytest.raises(TransferError, match=says):
        receive_store(iter(pieces), target)
    assert (target / "CURRENT").read_text() == "the store that was here"
    assert not (tmp_path / "to.incoming").exists()
    assert not (tmp_path / "escape").exists()


def test_a_copy_ahead_then_only_what_changed_makes_the_same_store(tmp_path: Path) -> None:
    source, target = tmp_path / "from", tmp_path / "to"
    _store(source, 6000)
    store = StateStore.open_rocksdb(source)
    fill_outbox_with_tombstone_files(store, rounds=400)  # flushes: table files on disk
    store.close()
    ahead = list(store_pieces(source, 0, only_immutable=True))
    assert ahead[:-1] and all(p.name.endswith(".sst") for p in ahead[:-1])
    have = copy_ahead(iter(ahead), target)
    (target.with_name("to.incoming") / "000001.sst").write_bytes(b"compacted away since")
    store = StateStore.open_rocksdb(source)  # the owner goes on writing, then stops
    txn = store.begin(epoch=3)
    txn.put(b"written-after", b"y")
    txn.commit()
    store.close()
    rest = list(store_pieces(source, 3, have=have))
    assert not {p.name for p in rest if not p.done} & set(have), "nothing sent twice"
    assert receive_store(iter(rest), target, ahead=True) == 3
    assert not (target / "000001.sst").exists(), "a file no longer in the store is dropped"
    copy = StateStore.open_rocksdb(target)
    try:
        assert copy.get(b"k5999") == b"x" * 1000 and copy.get(b"written-after") == b"y"
    finally:
        copy.close()
