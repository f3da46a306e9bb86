//! The dedup's Bloom filters: `BloomHasher`, `BloomPositions`, `BloomBits`.

use millrace_core::bloom::{BloomBits, BloomHasher};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::PyBackedLine;

/// Record ids to Bloom bit positions (see `native/core/src/bloom.rs`).
#[pyclass(frozen, module = "millrace._native", name = "BloomHasher")]
pub struct PyBloomHasher {
    inner: BloomHasher,
}

#[pymethods]
impl PyBloomHasher {
    #[new]
    fn new(slices: usize, bits_per_slice: u64, seed: u64) -> PyResult<Self> {
        if slices == 0 || bits_per_slice == 0 {
            return Err(PyValueError::new_err("a filter needs slices and bits"));
        }
        Ok(Self {
            inner: BloomHasher {
                seed,
                slices,
                bits_per_slice,
            },
        })
    }

    /// The positions of `record_ids`, one row of a bit per slice each.
    fn positions(&self, py: Python<'_>, record_ids: Vec<PyBackedLine>) -> PyBloomPositions {
        let hasher = self.inner;
        let data = py.detach(|| hasher.positions(record_ids.iter().map(|id| &id.0[..])));
        PyBloomPositions {
            data,
            slices: hasher.slices,
        }
    }
}

/// Rows of bit positions, one row per id.
#[pyclass(frozen, module = "millrace._native", name = "BloomPositions")]
pub struct PyBloomPositions {
    data: Vec<u64>,
    slices: usize,
}

#[pymethods]
impl PyBloomPositions {
    fn __len__(&self) -> usize {
        self.data.len() / self.slices
    }

    /// Rows `start..stop` (clamped).
    fn rows(&self, start: usize, stop: usize) -> Self {
        let stop = stop.min(self.__len__());
        let start = start.min(stop);
        Self {
            data: self.data[start * self.slices..stop * self.slices].to_vec(),
            slices: self.slices,
        }
    }

    /// Every position of row `row`.
    fn row(&self, row: usize) -> PyResult<Vec<u64>> {
        self.data
            .chunks(self.slices)
            .nth(row)
            .map(<[u64]>::to_vec)
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(row))
    }
}

/// The bits of one Bloom filter.
#[pyclass(module = "millrace._native", name = "BloomBits")]
pub struct PyBloomBits {
    inner: BloomBits,
}

#[pymethods]
impl PyBloomBits {
    #[new]
    fn new(bits: u64) -> Self {
        Self {
            inner: BloomBits::new(bits),
        }
    }

    /// The rows of `positions` whose bits are all set ("maybe seen"), in order.
    fn maybe_rows(&self, positions: &PyBloomPositions) -> Vec<usize> {
        self.inner
            .contains(&positions.data, positions.slices)
            .into_iter()
            .enumerate()
            .filter_map(|(row, maybe)| maybe.then_some(row))
            .collect()
    }

    /// Sets the bits of every row of `positions`.
    fn add(&mut self, positions: &PyBloomPositions) -> PyResult<()> {
        let bits = self.inner.len();
        if positions.data.iter().any(|&p| p >= bits) {
            return Err(PyValueError::new_err("a position past the filter's bits"));
        }
        self.inner.add(&positions.data);
        Ok(())
    }

    /// How many bits are set.
    fn ones(&self) -> u64 {
        self.inner.ones()
    }

    /// The bits as bytes (word by word, little-endian): to compare two filters.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }
}
