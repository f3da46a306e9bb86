//! `StateCache`: a store's write-through cache of committed state values
//! (`statestore/store.py`), least recently used first out.
//!
//! A batch's keys are looked up, the misses filled from one store read, and a commit's
//! changes written through, one call each: no Python loop per key.

use std::num::NonZeroUsize;

use lru::LruCache;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

/// A cached value: the committed bytes, or None when the key is known to be absent.
type Cached = Option<Py<PyBytes>>;

/// Committed state values by state key, at most `capacity` of them; a use (a hit, a
/// fill, a write) makes a key the most recent.
#[pyclass(module = "millrace._native", name = "StateCache")]
pub struct PyStateCache {
    entries: LruCache<Vec<u8>, Cached>,
}

fn cached_of(value: &Bound<'_, PyAny>) -> PyResult<Cached> {
    if value.is_none() {
        Ok(None)
    } else {
        Ok(Some(value.cast::<PyBytes>()?.clone().unbind()))
    }
}

fn value_of(py: Python<'_>, cached: &Cached) -> Py<PyAny> {
    match cached {
        Some(bytes) => bytes.clone_ref(py).into_any(),
        None => py.None(),
    }
}

#[pymethods]
impl PyStateCache {
    #[new]
    fn new(capacity: usize) -> PyResult<Self> {
        let capacity = NonZeroUsize::new(capacity)
            .ok_or_else(|| PyValueError::new_err("a state cache holds at least one entry"))?;
        Ok(Self {
            entries: LruCache::new(capacity),
        })
    }

    /// `(values, missing)`: per key its cached value (None where not cached), and the
    /// positions of the keys not cached, to be read from the store and given to
    /// :meth:`fill`.
    fn lookup<'py>(
        &mut self,
        keys: &Bound<'py, PyList>,
    ) -> PyResult<(Bound<'py, PyList>, Vec<usize>)> {
        let py = keys.py();
        let mut values = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let key = key.cast::<PyBytes>()?;
            match self.entries.get(key.as_bytes()) {
                Some(cached) => values.push(value_of(py, cached)),
                None => {
                    values.push(py.None());
                    missing.push(i);
                }
            }
        }
        Ok((PyList::new(py, values)?, missing))
    }

    /// Puts the store's values `read` of the keys at `missing` (as :meth:`lookup` gave
    /// them) into `values` and into the cache.
    fn fill(
        &mut self,
        keys: &Bound<'_, PyList>,
        values: &Bound<'_, PyList>,
        missing: Vec<usize>,
        read: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        if missing.len() != read.len() {
            return Err(PyValueError::new_err(format!(
                "{} values read for {} missing keys",
                read.len(),
                missing.len()
            )));
        }
        for (i, value) in missing.into_iter().zip(read.iter()) {
            let key = keys.get_item(i)?;
            let key = key.cast::<PyBytes>()?;
            self.entries
                .put(key.as_bytes().to_vec(), cached_of(&value)?);
            values.set_item(i, value)?;
        }
        Ok(())
    }

    /// `(found, value)`: whether `key` is cached, and its cached value.
    fn get(&mut self, key: &Bound<'_, PyBytes>) -> (bool, Option<Py<PyBytes>>) {
        let py = key.py();
        match self.entries.get(key.as_bytes()) {
            Some(cached) => (true, cached.as_ref().map(|bytes| bytes.clone_ref(py))),
            None => (false, None),
        }
    }

    /// Caches one key's committed value (None: absent).
    fn put(&mut self, key: &Bound<'_, PyBytes>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.entries.put(key.as_bytes().to_vec(), cached_of(value)?);
        Ok(())
    }

    /// A commit's state changes, key to value (None: deleted), written through.
    fn update(&mut self, changes: &Bound<'_, PyDict>) -> PyResult<()> {
        for (key, value) in changes.iter() {
            let key = key.cast::<PyBytes>()?;
            let value = cached_of(&value)?;
            // Most writes change a cached key: its entry takes the value in place (made
            // most recent, as a put would), without a copy of the key.
            match self.entries.get_mut(key.as_bytes()) {
                Some(entry) => *entry = value,
                None => {
                    self.entries.put(key.as_bytes().to_vec(), value);
                }
            }
        }
        Ok(())
    }

    /// Forgets every entry.
    fn clear(&mut self) {
        self.entries.clear();
    }

    fn __len__(&self) -> usize {
        self.entries.len()
    }

    fn __contains__(&self, key: &Bound<'_, PyBytes>) -> bool {
        self.entries.contains(key.as_bytes())
    }
}
