"""The batched Bloom path agrees bit for bit with pybloom-live's own methods."""

from __future__ import annotations

import random

import pytest
from pybloom_live import BloomFilter

from statestore._bloom import BloomBatch, BloomHasher, pybloom_key


@pytest.mark.parametrize(
    ("capacity", "error_rate"),
    [
        (100, 0.5),  # one slice: xxh128
        (1000, 0.01),  # 16-bit words: sha-1/sha-256
        (1_000_000, 0.001),  # 32-bit words: sha-384, the default
        (50_000, 1e-6),  # two salts: sha-512
    ],
)
def test_batch_path_matches_pybloom(capacity: int, error_rate: float) -> None:
    rng = random.Random(capacity)
    native = BloomFilter(capacity, error_rate)
    batched = BloomFilter(capacity, error_rate)
    hasher = BloomHasher(native)
    ids = [rng.randbytes(16) for _ in range(min(capacity, 3000))]
    for record_id in ids:
        native.add(pybloom_key(record_id))
    BloomBatch(batched).add(hasher.positions(ids))
    assert native.bitarray == batched.bitarray
    probes = ids[:200] + [rng.randbytes(16) for _ in range(3000)]
    got = BloomBatch(batched).contains(hasher.positions(probes)).tolist()
    assert got == [pybloom_key(p) in native for p in probes]
    assert hasher.positions(ids[:1]).tolist()[0] == [
        slot * native.bits_per_slice + bit
        for slot, bit in enumerate(native.make_hashes(pybloom_key(ids[0])))
    ]


def test_empty_batches() -> None:
    bloom = BloomFilter(1000, 0.01)
    hasher = BloomHasher(bloom)
    positions = hasher.positions([])
    assert positions.shape == (0, bloom.num_slices)
    BloomBatch(bloom).add(positions)
    assert bloom.count == 0
    assert BloomBatch(bloom).contains(positions).tolist() == []
