"""RocksDB's info log (``LOG``, ``LOG.old.*``) of a store stays bounded (real RocksDB).

It records every flush and compaction and was rolled only when a store opened, with
a thousand old files kept: a node restarted often, or running long, filled its disk
with them (the 30-minute soak: 21 MiB of LOG files in four stores, growing).
"""

from __future__ import annotations

from pathlib import Path

from millrace.statestore import StateStore

PAYLOAD = b"x" * 200


def _info_logs(path: Path) -> list[Path]:
    return [p for p in path.iterdir() if p.name == "LOG" or p.name.startswith("LOG.old")]


def test_info_logs_are_rolled_and_few_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "store"
    for round_ in range(8):  # restarts: each open starts a new LOG
        store = StateStore.open_rocksdb(path)
        for batch in range(40):  # flushes and compactions, each logged
            txn = store.begin()
            for i in range(2_000):
                txn.put(b"%d-%d-%d" % (round_, batch, i), PAYLOAD)
            txn.commit(sync=False)
        store.compact_deletions()
        store.close()
    logs = _info_logs(path)
    assert len(logs) <= 4, sorted(p.name for p in logs)
    assert all(p.stat().st_size <= 2 << 20 for p in logs), [p.stat().st_size for p in logs]
