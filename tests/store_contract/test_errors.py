"""Errors a user can act on: locked, corrupted, incompatible, closed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from millrace.statestore import (
    IncompatibleStoreError,
    StateStore,
    StoreClosedError,
    StoreCorruptedError,
    StoreLockedError,
)
from millrace.statestore._engine import Column
from millrace.statestore._keys import reserved_meta_key
from millrace.statestore._rocksdb import RocksDBEngine


def test_second_handle_in_one_process_is_refused(tmp_path: Path) -> None:
    with StateStore.open_rocksdb(tmp_path / "s"):
        with pytest.raises(StoreLockedError) as raised:
            StateStore.open_rocksdb(tmp_path / "s")
        assert "stop the other process" in str(raised.value)


@pytest.mark.slow
def test_store_held_by_another_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys
                from millrace.statestore import StateStore
                store = StateStore.open_rocksdb({str(path)!r})
                print("open", flush=True)
                sys.stdin.read()
            """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(StoreLockedError):
            StateStore.open_rocksdb(path)
    finally:
        holder.kill()
        holder.wait()
    StateStore.open_rocksdb(path).close()  # the lock dies with its holder


def test_corrupted_manifest_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with StateStore.open_rocksdb(path) as store:
        txn = store.begin()
        txn.put(b"a", b"1")
        txn.commit()
    manifest = sorted(path.glob("MANIFEST-*"))[-1]
    data = manifest.read_bytes()
    manifest.write_bytes(data[:20] + b"\xde\xad\xbe\xef" * 8 + data[52:])
    with pytest.raises(StoreCorruptedError) as raised:
        StateStore.open_rocksdb(path)
    assert "corrupted" in str(raised.value)


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    StateStore.open_rocksdb(path).close()
    engine = RocksDBEngine(path)
    batch = engine.new_batch()
    batch.put(Column.META, reserved_meta_key("format"), b"99")
    engine.write(batch, sync=True)
    engine.close()
    with pytest.raises(IncompatibleStoreError) as raised:
        StateStore.open_rocksdb(path)
    assert "'99'" in str(raised.value)


def test_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = StateStore.open_rocksdb(tmp_path / "s")
    txn = store.begin()
    txn.put(b"a", b"1")
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreClosedError):
        store.get(b"a")
    with pytest.raises(StoreClosedError):
        txn.commit()
