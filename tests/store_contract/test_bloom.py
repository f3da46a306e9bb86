"""The batched Bloom filters: no false negatives, false positives at the rate the
filters are sized for, one bit per slice, and a hash of the store's own.

The native hasher (``native/core/src/bloom.rs``) is checked against the numpy
formulation it replaced (:func:`oracle_positions`): the same seed gives the same bits.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xxhash import xxh3_128_digest

from millrace.statestore._bloom import BloomBatch, BloomHasher, FilterSize


def oracle_positions(size: FilterSize, seed: int, record_ids: list[bytes]) -> list[list[int]]:
    """The positions as the earlier numpy code computed them: xxh3-128 digests read as
    two little-endian u64, ``h1 + i * (h2 | 1)`` wrapping, mod the slice's bits."""
    if not record_ids:
        return []
    halves = np.frombuffer(b"".join(xxh3_128_digest(r, seed=seed) for r in record_ids), "<u8")
    halves = halves.reshape(len(record_ids), 2)
    steps = np.arange(size.num_slices, dtype=np.uint64)[None, :]
    first, step = halves[:, :1], halves[:, 1:] | np.uint64(1)
    bits = (first + steps * step) % np.uint64(size.bits_per_slice)
    offsets = np.arange(size.num_slices, dtype=np.int64) * size.bits_per_slice
    positions: list[list[int]] = (bits.astype(np.int64) + offsets[None, :]).tolist()
    return positions


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=40), max_size=30),
    st.integers(0, 2**64 - 1),
    st.sampled_from([(100, 0.5), (1000, 0.01), (50_000, 1e-6)]),
)
def test_the_native_hash_is_the_documented_one(
    ids: list[bytes], seed: int, sizing: tuple[int, float]
) -> None:
    size = FilterSize.of(*sizing)
    positions = BloomHasher(size, seed=seed).positions(ids)
    got = [positions.row(i) for i in range(len(positions))]
    assert got == oracle_positions(size, seed, ids)


@pytest.mark.parametrize(
    ("capacity", "error_rate"),
    [(100, 0.5), (1000, 0.01), (20_000, 0.001), (50_000, 1e-6)],
)
def test_filled_to_capacity_every_id_is_found_and_others_at_the_error_rate(
    capacity: int, error_rate: float
) -> None:
    rng = random.Random(capacity)
    size = FilterSize.of(capacity, error_rate)
    hasher = BloomHasher(size, seed=capacity)
    ids = [rng.randbytes(16) for _ in range(capacity)]
    batch = BloomBatch(size)
    batch.add(hasher.positions(ids))
    assert batch.count == capacity and batch.room == 0
    assert batch.maybe_rows(hasher.positions(ids)) == list(range(capacity)), "no false negative"
    probes = [rng.randbytes(rng.randint(0, 40)) for _ in range(20_000)]
    rate = len(batch.maybe_rows(hasher.positions(probes))) / len(probes)
    # Binomial over 20,000 probes: 3x the designed rate plus 5 probes' worth of slack.
    assert rate <= 3 * error_rate + 5 / len(probes)


def test_an_id_sets_one_bit_in_each_slice() -> None:
    size = FilterSize.of(1_000_000, 0.001)
    positions = BloomHasher(size, seed=1).positions([random.Random(1).randbytes(16)])
    row = positions.row(0)
    assert [p // size.bits_per_slice for p in row] == list(range(size.num_slices))
    batch = BloomBatch(size)
    batch.add(positions)
    assert batch.bits.ones() == size.num_slices


def test_hashers_agree_on_a_seed_and_differ_across_seeds() -> None:
    size = FilterSize.of(10_000, 0.01)
    ids = [bytes([i]) * 16 for i in range(50)]

    def rows(hasher: BloomHasher) -> list[list[int]]:
        positions = hasher.positions(ids)
        return [positions.row(i) for i in range(len(positions))]

    same = rows(BloomHasher(size, seed=7))
    assert same == rows(BloomHasher(size, seed=7))
    assert same != rows(BloomHasher(size, seed=8))
    assert same != rows(BloomHasher(size)), "unseeded: a random seed"


def test_empty_batches() -> None:
    size = FilterSize.of(1000, 0.01)
    positions = BloomHasher(size).positions([])
    assert len(positions) == 0
    batch = BloomBatch(size)
    batch.add(positions)
    assert batch.count == 0
    assert batch.maybe_rows(positions) == []
