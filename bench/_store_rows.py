"""Exact rows per column family of stores running nodes hold (for the soak).

RocksDB's own estimate (``millrace_store_rows``) counts every overwrite and delete until
a flush or compaction settles them, so it cannot tell a bounded store from a growing
one. This opens each store read-only (RocksDB reads its files and write-ahead log
without the owner's lock: a point in time) and counts each column's keys, in a child
process with a deadline, so that a store being recovered or rewritten cannot stall the
soak.

    python -m bench._store_rows STORE_DIR...   # prints {dir: {column: rows}} as JSON
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 20.0


def exact_rows(store_dirs: list[Path]) -> dict[str, dict[str, int]]:
    """Keys per column family of each store (a store that cannot be read now, being
    made or recovered, or a count past the deadline, is left out)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench._store_rows", *map(str, store_dirs)],
            cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE_S, check=True,
        )  # fmt: skip
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
        return {}
    counts: dict[str, dict[str, int]] = json.loads(done.stdout)
    return counts


def _count(store_dir: str) -> dict[str, int] | None:
    from rocksdict import AccessType, Options, Rdict

    from millrace.statestore._engine import Column

    options = Options(raw_mode=True)
    families = {column.family: Options(raw_mode=True) for column in Column}
    try:
        db = Rdict(store_dir, options, column_families=families, access_type=AccessType.read_only())
    except Exception:  # rocksdict raises bare Exception with RocksDB's status text
        return None
    try:
        columns = [db.get_column_family(column.family) for column in Column]
        # keys() walks an iterator; iterating an Rdict itself is not supported in raw mode.
        counts = [sum(1 for _ in column.keys()) for column in columns]  # noqa: SIM118
        return {column.family: n for column, n in zip(Column, counts, strict=True)}
    finally:
        db.close()


if __name__ == "__main__":
    found = {path: _count(path) for path in sys.argv[1:]}
    print(json.dumps({path: counts for path, counts in found.items() if counts is not None}))
