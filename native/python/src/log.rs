//! Reading the durable log: `scan_log` and `LogBatch`, and the forwarder's frames.

use bytes::Bytes;
use millrace_core::frames::{self, FrameSpec};
use millrace_core::log_scan::{self, LogRecords, ScanRange};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::LogEntryError;

/// Records read from a stream's log, in offset order, held natively.
#[pyclass(frozen, module = "millrace._native", name = "LogBatch")]
pub struct PyLogBatch {
    inner: LogRecords,
}

#[pymethods]
impl PyLogBatch {
    /// One batch of the records of `batches` (consecutive stretches of one log).
    #[staticmethod]
    fn concat(batches: Vec<PyRef<'_, PyLogBatch>>) -> Self {
        let mut inner = LogRecords::default();
        for batch in batches {
            inner.extend(batch.inner.clone());
        }
        Self { inner }
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The leading records whose keys and values total at most `budget` bytes (at
    /// least one: a record larger than the budget comes alone); this batch itself
    /// when all of it fits.
    fn head_within<'py>(slf: &Bound<'py, Self>, budget: usize) -> PyResult<Bound<'py, Self>> {
        let inner = &slf.get().inner;
        let count = inner.count_within(budget);
        if count == inner.len() {
            return Ok(slf.clone());
        }
        Bound::new(
            slf.py(),
            Self {
                inner: inner.head(count),
            },
        )
    }

    /// The offset of the first record (None when empty).
    #[getter]
    fn first_offset(&self) -> Option<u64> {
        self.inner.offsets.first().copied()
    }

    /// The records as `record_type(offset, record_id, key, value, event_time_ms,
    /// ingest_time_ms)` tuples (`record_type` a tuple subclass: `LogRecord`), each id
    /// `stream_tag` then the big-endian offset.
    fn log_records<'py>(
        &self,
        py: Python<'py>,
        record_type: &Bound<'py, pyo3::types::PyType>,
        stream_tag: &[u8],
    ) -> PyResult<Bound<'py, PyList>> {
        let tag = tag_of(stream_tag)?;
        let new = py.get_type::<PyTuple>().getattr("__new__")?;
        let r = &self.inner;
        let out = PyList::empty(py);
        for i in 0..r.len() {
            let id = frames::record_id(&tag, r.offsets[i]);
            let fields = (
                r.offsets[i],
                PyBytes::new(py, &id),
                PyBytes::new(py, &r.keys[i]),
                PyBytes::new(py, &r.values[i]),
                r.event_times[i],
                r.ingest_times[i],
            );
            out.append(new.call1((record_type, fields))?)?;
        }
        Ok(out)
    }

    /// The keys, in order (for routing by a key extractor of the user's).
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.inner.keys.iter().map(|k| PyBytes::new(py, k)))
    }

    /// The values, in order.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.inner.values.iter().map(|v| PyBytes::new(py, v)))
    }

    /// One `DeliveryBatch` frame per destination interval of `consumer` for the records
    /// from position `start` on: `(interval, payload, slots, outbox_keys, oldest)` in
    /// order of first appearance, `slots` the records' positions, `outbox_keys` their
    /// outbox keys and `oldest` their smallest event time. `intervals`: each record's interval
    /// (None: by the xxh3 of its key, among `count` intervals).
    #[pyo3(signature = (consumer, count, intervals, start, *, stream_tag, producer, stream))]
    #[allow(clippy::too_many_arguments)]
    fn frames<'py>(
        &self,
        py: Python<'py>,
        consumer: &str,
        count: u32,
        intervals: Option<Vec<u32>>,
        start: usize,
        stream_tag: &[u8],
        producer: &str,
        stream: &str,
    ) -> PyResult<Bound<'py, PyList>> {
        let tag = tag_of(stream_tag)?;
        if let Some(given) = &intervals {
            if given.len() != self.inner.len() {
                return Err(PyValueError::new_err(format!(
                    "{} intervals for {} records",
                    given.len(),
                    self.inner.len()
                )));
            }
        }
        let spec = FrameSpec {
            consumer,
            intervals: count,
            stream_tag: &tag,
            producer,
            stream,
        };
        let records = &self.inner;
        let built = py.detach(|| frames::frames(records, start, intervals.as_deref(), spec));
        let out = PyList::empty(py);
        for frame in built {
            let keys = PyList::new(py, frame.outbox_keys.iter().map(|k| PyBytes::new(py, k)))?;
            out.append((
                frame.interval,
                PyBytes::new(py, &frame.payload),
                frame.slots,
                keys,
                frame.oldest_event_time_ms,
            ))?;
        }
        Ok(out)
    }
}

fn tag_of(stream_tag: &[u8]) -> PyResult<[u8; 8]> {
    stream_tag.try_into().map_err(|_| {
        PyValueError::new_err(format!(
            "a stream tag has 8 bytes, got {}",
            stream_tag.len()
        ))
    })
}

/// `(records, consumed, expected, finished)`: the RECORD entries of `data`, the bytes
/// of a segment from file position `position` on, checked as the segment's reader
/// checks them (see `native/core/src/log_scan.rs`). Raises `LogEntryError(position,
/// reason)` at the first entry that fails.
#[pyfunction]
#[pyo3(signature = (data, *, position, expected, from_offset, stop_offset, max_records, complete))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan_log(
    py: Python<'_>,
    data: &[u8],
    position: u64,
    expected: u64,
    from_offset: u64,
    stop_offset: u64,
    max_records: usize,
    complete: bool,
) -> PyResult<(PyLogBatch, usize, u64, bool)> {
    let owned = Bytes::copy_from_slice(data);
    let range = ScanRange {
        position,
        expected,
        from_offset,
        stop_offset,
        max_records,
        complete,
    };
    let scanned = py
        .detach(|| log_scan::scan_records(&owned, range))
        .map_err(|e| LogEntryError::new_err((e.position, e.reason)))?;
    Ok((
        PyLogBatch {
            inner: scanned.records,
        },
        scanned.consumed,
        scanned.expected,
        scanned.finished,
    ))
}

/// `(requests, consumed, expected, error)`: the whole requests of `data`, the bytes of a
/// segment from `position` (a request's start) on, checked as `docs/log-format.md`
/// says (see `scan_requests` in `native/core/src/log_scan.rs`). Each request is
/// `(records, commit, end)`: records as `(position, body, offset, event_time_ms,
/// ingest_time_ms, key_len)` (none unless `keep_records`), the commit as
/// `(first_offset, count, idempotency_key, source, committed_at_ms)`, the position after
/// it. `error`: `(position, reason, complete, uncommitted)` of the entry that stopped
/// the scan, or None.
#[pyfunction]
#[pyo3(signature = (data, *, position, expected, complete, keep_records = true))]
pub(crate) fn scan_requests<'py>(
    py: Python<'py>,
    data: &[u8],
    position: u64,
    expected: u64,
    complete: bool,
    keep_records: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let owned = Bytes::copy_from_slice(data);
    let scan =
        py.detach(|| log_scan::scan_requests(&owned, position, expected, complete, keep_records));
    let requests = PyList::empty(py);
    for request in &scan.requests {
        let records = PyList::empty(py);
        for r in &request.records {
            let body = PyBytes::new(py, &r.body);
            records.append((
                r.position,
                body,
                r.offset,
                r.event_time_ms,
                r.ingest_time_ms,
                r.key_len,
            ))?;
        }
        let c = &request.commit;
        let commit = (
            c.first_offset,
            c.count,
            PyBytes::new(py, &c.idempotency_key),
            PyBytes::new(py, &c.source),
            c.committed_at_ms,
        );
        requests.append((records, commit, request.end))?;
    }
    let error = scan
        .error
        .map(|e| (e.position, e.reason, e.complete, e.uncommitted));
    (requests, scan.consumed, scan.expected, error).into_pyobject(py)
}

/// A COMMIT entry's body as `(first_offset, count, idempotency_key, source,
/// committed_at_ms)`; raises ValueError saying why its lengths do not add up.
#[pyfunction]
pub(crate) fn decode_commit<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Bound<'py, PyTuple>> {
    let c =
        log_scan::decode_commit(&Bytes::copy_from_slice(body)).map_err(PyValueError::new_err)?;
    (
        c.first_offset,
        c.count,
        PyBytes::new(py, &c.idempotency_key),
        PyBytes::new(py, &c.source),
        c.committed_at_ms,
    )
        .into_pyobject(py)
}

/// `(columns, consumed, expected, error)`: `scan_requests` over `data` with the records of
/// its whole requests as columns, for the segment scanners (Spark). `columns` is None
/// without records, else `(offset, event_time_ms, ingest_time_ms, key_start, key_end,
/// value_end)`, each the bytes of a native-endian int64 array; the key of record `i` is
/// `data[key_start[i]:key_end[i]]` and its value `data[key_end[i]:value_end[i]]`.
#[pyfunction]
#[pyo3(signature = (data, *, position, expected, complete))]
pub(crate) fn scan_columns<'py>(
    py: Python<'py>,
    data: &[u8],
    position: u64,
    expected: u64,
    complete: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let owned = Bytes::copy_from_slice(data);
    let (scan, columns) = py.detach(|| {
        let scan = log_scan::scan_requests(&owned, position, expected, complete, true);
        let columns = log_scan::columns_of(&scan, position);
        (scan, columns)
    });
    let columns: Bound<'py, PyAny> = if columns.offset.is_empty() {
        py.None().into_bound(py)
    } else {
        let as_bytes = |column: &[i64]| {
            let raw: Vec<u8> = column.iter().flat_map(|v| v.to_ne_bytes()).collect();
            PyBytes::new(py, &raw)
        };
        (
            as_bytes(&columns.offset),
            as_bytes(&columns.event_time_ms),
            as_bytes(&columns.ingest_time_ms),
            as_bytes(&columns.key_start),
            as_bytes(&columns.key_end),
            as_bytes(&columns.value_end),
        )
            .into_pyobject(py)?
            .into_any()
    };
    let error = scan
        .error
        .map(|e| (e.position, e.reason, e.complete, e.uncommitted));
    (columns, scan.consumed, scan.expected, error).into_pyobject(py)
}
