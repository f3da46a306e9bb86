//! The segmented dedup's Bloom filters (`statestore/dedup.py`): record ids hashed to one
//! bit per slice, and the bits of one filter.
//!
//! An id's hash is the 128-bit xxh3 of the id with the store's seed, read as Python's
//! `xxhash.xxh3_128_digest` bytes taken as two little-endian u64 (`h1`, then `h2 | 1`);
//! slice `i`'s bit is `(h1 + i * h2) mod bits_per_slice` (double hashing, Kirsch and
//! Mitzenmacher, in wrapping u64 arithmetic), offset by `i * bits_per_slice`. Filters
//! live in memory only and are rebuilt from the stored ids on open.

use xxhash_rust::xxh3::xxh3_128_with_seed;

/// Ids to bit positions for filters of `slices` slices of `bits_per_slice` bits.
#[derive(Clone, Copy, Debug)]
pub struct BloomHasher {
    pub seed: u64,
    pub slices: usize,
    pub bits_per_slice: u64,
}

impl BloomHasher {
    /// Absolute bit positions, `slices` per id, ids in order.
    pub fn positions<'a>(&self, ids: impl IntoIterator<Item = &'a [u8]>) -> Vec<u64> {
        let mut out = Vec::new();
        for id in ids {
            let hash = xxh3_128_with_seed(id, self.seed);
            // The digest's bytes are the hash big-endian; numpy read them as two
            // little-endian words: the high half, then the low half, byte-swapped.
            let first = ((hash >> 64) as u64).swap_bytes();
            let step = (hash as u64).swap_bytes() | 1;
            for i in 0..self.slices as u64 {
                let bit = first.wrapping_add(i.wrapping_mul(step)) % self.bits_per_slice;
                out.push(bit + i * self.bits_per_slice);
            }
        }
        out
    }
}

/// The bits of one filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BloomBits {
    words: Vec<u64>,
}

impl BloomBits {
    /// A filter of `bits` bits, all clear.
    pub fn new(bits: u64) -> Self {
        Self {
            words: vec![0; bits.div_ceil(64) as usize],
        }
    }

    /// Per row of `slices` positions: are all its bits set ("maybe seen")?
    pub fn contains(&self, positions: &[u64], slices: usize) -> Vec<bool> {
        positions
            .chunks(slices.max(1))
            .map(|row| row.iter().all(|&p| self.get(p)))
            .collect()
    }

    /// Sets every bit of `positions`.
    pub fn add(&mut self, positions: &[u64]) {
        for &p in positions {
            self.words[(p >> 6) as usize] |= 1 << (p & 63);
        }
    }

    /// How many bits the filter has (rounded up to a whole word).
    pub fn len(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// True for a filter of no bits.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// How many bits are set.
    pub fn ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The bits, word by word, little-endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn get(&self, p: u64) -> bool {
        self.words
            .get((p >> 6) as usize)
            .is_some_and(|w| w >> (p & 63) & 1 == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASHER: BloomHasher = BloomHasher {
        seed: 7,
        slices: 5,
        bits_per_slice: 1000,
    };

    #[test]
    fn one_bit_per_slice() {
        let positions = HASHER.positions([&b"record"[..]]);
        assert_eq!(positions.len(), 5);
        for (i, p) in positions.iter().enumerate() {
            assert_eq!(p / 1000, i as u64);
        }
    }

    #[test]
    fn added_ids_are_found_and_seeds_differ() {
        let ids: Vec<Vec<u8>> = (0..500u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let positions = HASHER.positions(ids.iter().map(Vec::as_slice));
        let mut bits = BloomBits::new(5000);
        bits.add(&positions[..250 * 5]);
        let found = bits.contains(&positions, 5);
        assert!(found[..250].iter().all(|&f| f));
        assert!(found[250..].iter().filter(|&&f| f).count() < 100);
        let other = BloomHasher { seed: 8, ..HASHER };
        assert_ne!(
            other.positions([&b"record"[..]]),
            HASHER.positions([&b"record"[..]])
        );
    }
}
