"""The RocksDB batch puts each bulk call's keys in key order (a faster memtable insert):
what a committed batch leaves must be what its calls, applied in order, say."""

from __future__ import annotations

import random
from pathlib import Path

from millrace.statestore._engine import Column
from millrace.statestore._rocksdb import RocksDBEngine


def test_bulk_calls_in_any_key_order_leave_what_their_calls_say(tmp_path: Path) -> None:
    engine = RocksDBEngine(tmp_path / "db")
    rng = random.Random(7)
    model: dict[bytes, bytes] = {}
    keys = [rng.randbytes(rng.randint(1, 6)) for _ in range(40)]
    try:
        for _ in range(60):
            batch = engine.new_batch()
            for _ in range(rng.randint(1, 5)):
                chosen = [rng.choice(keys) for _ in range(rng.randint(0, 12))]  # repeats too
                kind = rng.choice(("many", "keys", "delete"))
                if kind == "many":
                    items = [(key, rng.randbytes(3)) for key in chosen]
                    batch.put_many(Column.STATE, iter(items))  # any iterable, read once
                    model.update(items)  # a key given twice keeps its last value
                elif kind == "keys":
                    value = rng.randbytes(2)
                    batch.put_keys(Column.STATE, iter(chosen), value)
                    model.update(dict.fromkeys(chosen, value))
                else:
                    batch.delete_keys(Column.STATE, iter(chosen))
                    for key in chosen:
                        model.pop(key, None)
            engine.write(batch, sync=False)
            assert dict(engine.scan(Column.STATE, b"", None)) == model
    finally:
        engine.close()
