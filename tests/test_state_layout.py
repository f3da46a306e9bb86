"""The state column family is laid out by key hash (``engine/_state_layout.py``): the
state of a range of the hash space is one range of store keys, and a store written in
the layout before is rewritten on open, losing nothing."""

from __future__ import annotations

import struct
from pathlib import Path

from millrace.computations import Computation, Context, Record, Topology, key_hash
from millrace.engine import IntervalProcessor, state_key
from millrace.engine._state_layout import HASHED_KEYS, LAYOUT_META
from millrace.statestore import StateStore, StoreConfig
from millrace.wire.v1 import record_pb2


class Counter(Computation):
    """Counts records per key in state ``n``."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.put_state("n", (ctx.get_state("n") or b"") + b"x")


TOPOLOGY = Topology.from_dict({
    "streams": {"in": {}},
    "computations": {
        "count": {
            "handler": f"{__name__}:Counter",
            "inputs": {"in": "key"},
            "intervals": 1,
        }
    }
})  # fmt: skip


def _record(i: int, key: bytes) -> record_pb2.Record:
    return record_pb2.Record(
        record_id=b"r%d" % i, stream="in", key=key, value=b"", event_time_ms=1000 + i
    )


def _open(path: Path, epoch: int) -> IntervalProcessor:
    store = StateStore.open_rocksdb(path, config=StoreConfig(sync=False))
    return IntervalProcessor(
        topology=TOPOLOGY, computation="count", interval=0, store=store, epoch=epoch
    )


def test_the_state_of_a_hash_range_is_one_range_of_store_keys(tmp_path: Path) -> None:
    processor = _open(tmp_path / "s", 1)
    keys = [b"key-%d" % i for i in range(400)]
    processor.process_records([_record(i, k) for i, k in enumerate(keys)])
    low, high = 1 << 62, 3 << 62  # the middle half of the hash space
    start, end = struct.pack(">Q", low), struct.pack(">Q", high)
    found = [k for k, _ in processor.store.scan_state_range(start, end)]
    expected = sorted(state_key(k, "n") for k in keys if low <= key_hash(k) < high)
    assert found == expected
    assert 100 < len(found) < 300  # both sides of the range hold keys too
    processor.store.close()


def test_a_store_in_the_layout_before_hashing_is_rewritten_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old"
    store = StateStore.open_rocksdb(path, config=StoreConfig(sync=False))
    store.claim_epoch(1)
    txn = store.begin(1)
    for key in (b"a", b"bb", b"ccc"):  # the layout before: len(key) | key | tag
        txn.put(struct.pack(">I", len(key)) + key + b"n", b"x" * len(key))
    txn.put(b"\xff\xff\xff\xffdead-letter/1", b"letter")
    txn.commit()
    store.close()

    processor = _open(path, 2)
    assert processor.store.get_meta(LAYOUT_META) == HASHED_KEYS
    processor.process_records([_record(1, b"bb")])
    state = dict(processor.store.scan_state_range(b"", None))
    assert state == {
        state_key(b"a", "n"): b"x",
        state_key(b"bb", "n"): b"xxx",  # the old count, one more
        state_key(b"ccc", "n"): b"xxx",
        b"\xff" * 12 + b"dead-letter/1": b"letter",
    }
    processor.store.close()
    processor = _open(path, 3)  # opened again: nothing rewritten twice
    assert dict(processor.store.scan_state_range(b"", None)) == state
    processor.store.close()
