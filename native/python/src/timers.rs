//! `TimerIndex`: a store's committed timers, natively (`statestore/_timer_index.py`).

use millrace_core::timer_index::{self, Change, TimerIndex};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

/// Every committed timer of one store, in time order per domain, and the `TIMERS`
/// column's operations of a commit that changes them. A timer is `(domain, key, tag)`;
/// a commit's changes are a dict of those to a `Timer` named tuple (its `time_ms` and
/// `cause` read by place), or None (deleted).
#[pyclass(module = "millrace._native", name = "TimerIndex")]
#[derive(Default)]
pub struct PyTimerIndex {
    inner: TimerIndex,
    /// The changes of the last [`PyTimerIndex::stage`], read once, for
    /// [`PyTimerIndex::apply_staged`].
    staged: Option<Vec<Change>>,
}

fn changes_of(changes: &Bound<'_, PyDict>) -> PyResult<Vec<Change>> {
    let mut out = Vec::with_capacity(changes.len());
    for (ident, timer) in changes.iter() {
        let (domain, key, tag): (u8, Bound<'_, PyBytes>, Bound<'_, PyString>) = ident.extract()?;
        let setting = if timer.is_none() {
            None
        } else {
            // A `Timer` named tuple: (domain, key, tag, time_ms, cause).
            let timer = timer.cast_into::<PyTuple>()?;
            Some((timer.get_item(3)?.extract()?, timer.get_item(4)?.extract()?))
        };
        out.push(Change::new(domain, key.as_bytes(), tag.to_str()?, setting));
    }
    Ok(out)
}

#[pymethods]
impl PyTimerIndex {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// The index of the column's index entries `(key, value)`; ValueError for an
    /// entry that is not one.
    #[staticmethod]
    fn load(entries: Vec<(Vec<u8>, Vec<u8>)>) -> PyResult<Self> {
        let mut changes = Vec::with_capacity(entries.len());
        for (raw, value) in entries {
            if timer_index::decode_index_key(&raw).is_none() {
                let message = format!("not a timer index entry: {raw:?}");
                return Err(PyValueError::new_err(message));
            }
            let Some((time, cause)) = value.split_first_chunk::<8>() else {
                let message = format!("a timer's value is 8 bytes or more, not {}", value.len());
                return Err(PyValueError::new_err(message));
            };
            let time = timer_index::decode_time(*time);
            let setting = Some((time, cause.to_vec()));
            changes.push(Change {
                index: raw.into(),
                setting,
            });
        }
        let mut index = Self::default();
        index.inner.apply(changes);
        Ok(index)
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The committed time of timer `(domain, key, tag)`, or None.
    fn time_of(&self, domain: u8, key: Vec<u8>, tag: String) -> Option<i64> {
        self.inner.time_of(&(domain, key, tag))
    }

    /// `(deletes, put_keys, put_values)`: what a commit with `changes` writes to the
    /// column, against the committed times.
    /// The changes are kept for [`PyTimerIndex::apply_staged`].
    fn stage<'py>(&mut self, changes: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyTuple>> {
        let py = changes.py();
        let read = changes_of(changes)?;
        let ops = self.inner.stage(&read);
        self.staged = Some(read);
        let deletes = PyList::new(py, ops.deletes.iter().map(|k| PyBytes::new(py, k)))?;
        let keys = PyList::new(py, ops.puts.iter().map(|(k, _)| PyBytes::new(py, k)))?;
        let values = PyList::new(py, ops.puts.iter().map(|(_, v)| PyBytes::new(py, v)))?;
        PyTuple::new(py, [deletes, keys, values])
    }

    /// A commit's `changes`, once it is durable.
    fn apply(&mut self, changes: &Bound<'_, PyDict>) -> PyResult<()> {
        self.inner.apply(changes_of(changes)?);
        Ok(())
    }

    /// The changes of the last `stage`, once that commit is durable; ValueError if
    /// none is staged (or they were applied already).
    fn apply_staged(&mut self) -> PyResult<()> {
        let staged = self.staged.take();
        let changes = staged.ok_or_else(|| PyValueError::new_err("no timer changes staged"))?;
        self.inner.apply(changes);
        Ok(())
    }

    /// The earliest time of `domain`'s timers, or None.
    fn earliest(&self, domain: u8) -> Option<i64> {
        self.inner.earliest(domain)
    }

    /// `(key, tag, time_ms, cause)` of `domain`'s timers at or before `up_to_ms` (None:
    /// all), in time order, at most `limit` (None: all).
    #[pyo3(signature = (domain, up_to_ms, limit))]
    fn due<'py>(
        &self,
        py: Python<'py>,
        domain: u8,
        up_to_ms: Option<i64>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let due = self.inner.due(domain, up_to_ms, limit);
        PyList::new(
            py,
            due.into_iter().map(|(key, tag, time_ms, cause)| {
                (
                    PyBytes::new(py, &key),
                    tag,
                    time_ms,
                    PyBytes::new(py, &cause),
                )
            }),
        )
    }
}
