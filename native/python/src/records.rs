//! `RecordBatch`: records held natively, built from Python tuples or decoded bytes.

use bytes::Bytes;
use millrace_core::{Record, RecordBatch as CoreBatch};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyIterator, PyList, PyTuple};

/// Records in order, held natively (keys and values are not Python objects).
#[pyclass(frozen, module = "millrace._native", name = "RecordBatch")]
pub struct PyRecordBatch {
    pub(crate) inner: CoreBatch,
}

#[pymethods]
impl PyRecordBatch {
    /// A batch of `(key, value, event_time_ms)` tuples; keys and values bytes-like.
    #[new]
    #[pyo3(signature = (records = None))]
    fn new(records: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let mut inner = CoreBatch::default();
        if let Some(records) = records {
            for item in records.try_iter()? {
                inner.push(record_of(&item?)?);
            }
        }
        Ok(Self { inner })
    }

    /// One batch of the records of `batches`, in order.
    #[staticmethod]
    fn concat(batches: Vec<PyRef<'_, PyRecordBatch>>) -> Self {
        let mut inner = CoreBatch::with_capacity(batches.iter().map(|b| b.inner.len()).sum());
        for batch in batches {
            inner.extend(batch.inner.clone());
        }
        Self { inner }
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __bool__(&self) -> bool {
        !self.inner.is_empty()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyRecordBatch>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __repr__(&self) -> String {
        format!("RecordBatch(<{} records>)", self.inner.len())
    }

    /// The records as `(key, value, event_time_ms)` tuples (for the rare paths).
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let tuples = self.inner.records().iter().map(|r| {
            (
                PyBytes::new(py, &r.key),
                PyBytes::new(py, &r.value),
                r.event_time_ms,
            )
        });
        PyList::new(py, tuples)
    }

    /// Iterates over the records as tuples (a list is made first: for the rare paths).
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        self.records(py)?.try_iter()
    }

    /// Key plus value bytes of every record.
    fn payload_bytes(&self) -> usize {
        self.inner.payload_bytes()
    }

    /// SHA-256 over each record's `>QQq` (key length, value length, event time), key
    /// and value, in order: what `millrace inject`'s idempotency keys are made of.
    fn sha256<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let digest = py.detach(|| self.inner.sha256());
        PyBytes::new(py, &digest)
    }

    /// The oldest and newest event times; `(0, 0)` without records.
    fn time_range(&self) -> (i64, i64) {
        self.inner.time_range()
    }

    /// The records of positions `start..stop` (clamped), as a new batch.
    fn slice(&self, start: usize, stop: usize) -> Self {
        let records = self.inner.records();
        let stop = stop.min(records.len());
        let start = start.min(stop);
        Self {
            inner: records[start..stop].iter().cloned().collect(),
        }
    }
}

fn record_of(item: &Bound<'_, PyAny>) -> PyResult<Record> {
    let tuple = item.cast::<PyTuple>().map_err(|_| {
        PyTypeError::new_err(format!(
            "a record is a (key, value, event_time_ms) tuple, got {}",
            item.get_type()
                .name()
                .map_or_else(|_| "?".into(), |n| n.to_string())
        ))
    })?;
    if tuple.len() != 3 {
        return Err(PyTypeError::new_err(format!(
            "a record is a (key, value, event_time_ms) tuple, got {} items",
            tuple.len()
        )));
    }
    let key = bytes_of(&tuple.get_item(0)?, "key")?;
    let value = bytes_of(&tuple.get_item(1)?, "value")?;
    let time = tuple.get_item(2)?;
    let event_time_ms: i64 = time.extract().map_err(|_| {
        if time.is_instance_of::<PyInt>() {
            PyValueError::new_err("a record's event_time_ms must be an integer within int64")
        } else {
            PyTypeError::new_err(format!(
                "a record's event_time_ms must be an integer, got {}",
                type_name(&time)
            ))
        }
    })?;
    Ok(Record {
        key,
        value,
        event_time_ms,
    })
}

fn type_name(item: &Bound<'_, PyAny>) -> String {
    item.get_type()
        .name()
        .map_or_else(|_| "?".into(), |n| n.to_string())
}

fn bytes_of(item: &Bound<'_, PyAny>, what: &str) -> PyResult<Bytes> {
    if let Ok(b) = item.cast::<PyBytes>() {
        return Ok(Bytes::copy_from_slice(b.as_bytes()));
    }
    let buffer: Vec<u8> = item.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "a record's {what} must be bytes, got {}",
            item.get_type()
                .name()
                .map_or_else(|_| "?".into(), |n| n.to_string())
        ))
    })?;
    Ok(Bytes::from(buffer))
}
