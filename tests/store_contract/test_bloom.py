"""The batched Bloom filters: no false negatives, false positives at the rate the
filters are sized for, one bit per slice, and a hash of the store's own."""

from __future__ import annotations

import random

import numpy as np
import pytest
from pybloom_live import BloomFilter

from statestore._bloom import BloomBatch, BloomHasher


@pytest.mark.parametrize(
    ("capacity", "error_rate"),
    [(100, 0.5), (1000, 0.01), (20_000, 0.001), (50_000, 1e-6)],
)
def test_filled_to_capacity_every_id_is_found_and_others_at_the_error_rate(
    capacity: int, error_rate: float
) -> None:
    rng = random.Random(capacity)
    bloom = BloomFilter(capacity, error_rate)
    hasher = BloomHasher(bloom, seed=capacity)
    ids = [rng.randbytes(16) for _ in range(capacity)]
    batch = BloomBatch(bloom)
    batch.add(hasher.positions(ids))
    assert bloom.count == capacity
    assert batch.contains(hasher.positions(ids)).all(), "no false negative"
    probes = [rng.randbytes(rng.randint(0, 40)) for _ in range(20_000)]
    rate = batch.contains(hasher.positions(probes)).mean()
    # Binomial over 20,000 probes: 3x the designed rate plus 5 probes' worth of slack.
    assert rate <= 3 * error_rate + 5 / len(probes)


def test_an_id_sets_one_bit_in_each_slice() -> None:
    bloom = BloomFilter(1_000_000, 0.001)
    positions = BloomHasher(bloom, seed=1).positions([random.Random(1).randbytes(16)])[0]
    slices = positions // bloom.bits_per_slice
    assert slices.tolist() == list(range(bloom.num_slices))
    assert ((positions % bloom.bits_per_slice) < bloom.bits_per_slice).all()
    batch = BloomBatch(bloom)
    batch.add(positions[None, :])
    bits = np.unpackbits(np.frombuffer(bloom.bitarray.tobytes(), dtype=np.uint8))
    assert int(bits.sum()) == bloom.num_slices


def test_hashers_agree_on_a_seed_and_differ_across_seeds() -> None:
    bloom = BloomFilter(10_000, 0.01)
    ids = [bytes([i]) * 16 for i in range(50)]
    same = BloomHasher(bloom, seed=7).positions(ids)
    assert (same == BloomHasher(bloom, seed=7).positions(ids)).all()
    assert not (same == BloomHasher(bloom, seed=8).positions(ids)).all()
    assert not (same == BloomHasher(bloom).positions(ids)).all(), "unseeded: a random seed"


def test_empty_batches() -> None:
    bloom = BloomFilter(1000, 0.01)
    hasher = BloomHasher(bloom)
    positions = hasher.positions([])
    assert positions.shape == (0, bloom.num_slices)
    BloomBatch(bloom).add(positions)
    assert bloom.count == 0
    assert BloomBatch(bloom).contains(positions).tolist() == []
