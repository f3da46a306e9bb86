//! `millrace._native`: the Python face of `millrace-core`.
//!
//! Every function takes or returns a whole batch: the seam is crossed once per request
//! or group of lines, never once per record. Work on owned data runs with the GIL
//! released, so gRPC threads decode while the log's writer encodes. Nothing is started
//! at import (no thread, no runtime): Spark forks its Python workers.

#![forbid(unsafe_code)]

use bytes::Bytes;
use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyIterator, PyList, PyTuple};

use millrace_core::bloom::{BloomBits, BloomHasher};
use millrace_core::fold::{self, WindowSpec};
use millrace_core::frames::{self, FrameSpec};
use millrace_core::ingest::{self, Limits, Problem};
use millrace_core::json_lines::{self, LineLimits};
use millrace_core::log_format::{self, Placement};
use millrace_core::log_scan::{self, LogRecords, ScanRange};
use millrace_core::{Record, RecordBatch as CoreBatch};

create_exception!(
    _native,
    LogEntryError,
    PyValueError,
    "A log entry failed its checks: args are (file position, reason)."
);

create_exception!(
    _native,
    UndecodableRequestError,
    PyValueError,
    "Bytes that are not the message they should be (malformed protobuf, a string that is not UTF-8)."
);

/// Records in order, held natively (keys and values are not Python objects).
#[pyclass(frozen, module = "millrace._native", name = "RecordBatch")]
pub struct PyRecordBatch {
    inner: CoreBatch,
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

/// `(stream, idempotency_key, records, problem)` of an `IngestRequest`'s bytes.
///
/// `problem` is None, or the first thing wrong with the request as a tuple:
/// `("no_records",)`, `("too_many_records", count)`, `("idempotency_key_too_long",
/// bytes)`, `("record_too_large", index, bytes)`, `("event_time", index, ms)`. Raises
/// `UndecodableRequestError` for bytes that are not an `IngestRequest`.
#[pyfunction]
#[pyo3(signature = (raw, *, max_records, max_record_bytes, max_idempotency_key_bytes, min_event_time_ms, max_event_time_ms))]
fn decode_ingest_request<'py>(
    py: Python<'py>,
    raw: &[u8],
    max_records: usize,
    max_record_bytes: usize,
    max_idempotency_key_bytes: usize,
    min_event_time_ms: i64,
    max_event_time_ms: i64,
) -> PyResult<Bound<'py, PyTuple>> {
    let limits = Limits {
        max_records,
        max_record_bytes,
        max_idempotency_key_bytes,
        min_event_time_ms,
        max_event_time_ms,
    };
    let owned = Bytes::copy_from_slice(raw);
    let decoded = py
        .detach(|| ingest::decode_request(owned, &limits))
        .map_err(|e| UndecodableRequestError::new_err(e.0))?;
    let problem: Bound<'py, PyAny> = match decoded.problem {
        None => py.None().into_bound(py),
        Some(Problem::NoRecords) => ("no_records",).into_pyobject(py)?.into_any(),
        Some(Problem::TooManyRecords { count }) => {
            ("too_many_records", count).into_pyobject(py)?.into_any()
        }
        Some(Problem::IdempotencyKeyTooLong { bytes }) => ("idempotency_key_too_long", bytes)
            .into_pyobject(py)?
            .into_any(),
        Some(Problem::RecordTooLarge { index, bytes }) => ("record_too_large", index, bytes)
            .into_pyobject(py)?
            .into_any(),
        Some(Problem::EventTimeOutOfRange {
            index,
            event_time_ms,
        }) => ("event_time", index, event_time_ms)
            .into_pyobject(py)?
            .into_any(),
    };
    let batch = Bound::new(
        py,
        PyRecordBatch {
            inner: decoded.batch,
        },
    )?;
    PyTuple::new(
        py,
        [
            decoded.stream.into_pyobject(py)?.into_any(),
            decoded.idempotency_key.into_pyobject(py)?.into_any(),
            batch.into_any(),
            problem,
        ],
    )
}

/// The `IngestResponse` bytes for `count` records from `first_offset` of the stream
/// whose record ids start with the 8-byte `tag`.
#[pyfunction]
fn ingest_response<'py>(
    py: Python<'py>,
    tag: &[u8],
    first_offset: u64,
    count: u64,
    replayed: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let tag: [u8; 8] = tag.try_into().map_err(|_| {
        PyValueError::new_err(format!("a stream tag has 8 bytes, got {}", tag.len()))
    })?;
    let bytes = py.detach(|| ingest::response_bytes(tag, first_offset, count, replayed));
    Ok(PyBytes::new(py, &bytes))
}

/// The `IngestRequest` bytes of `batch`, as protobuf writes them.
#[pyfunction]
fn ingest_request<'py>(
    py: Python<'py>,
    stream: &str,
    idempotency_key: &str,
    batch: &Bound<'py, PyRecordBatch>,
) -> Bound<'py, PyBytes> {
    let batch = &batch.get().inner;
    let bytes = py.detach(|| ingest::request_bytes(stream, idempotency_key, batch));
    PyBytes::new(py, &bytes)
}

/// The log entries of one request: its records from `offset`, then its COMMIT.
///
/// Returns `(entries, index, position, next_index, min_event_ms, max_event_ms)`: the
/// bytes to append, the `(offset, position)` pairs the sparse index wanted (one every
/// `index_every` offsets from `next_index`), the position after the COMMIT, the next
/// offset to index, and the records' time range (0, 0 without records). Raises
/// ValueError for a request the format cannot hold (nothing is produced).
#[pyfunction]
#[pyo3(signature = (batch, idempotency_key, source, *, offset, ingest_ms, position, next_index, index_every))]
#[allow(clippy::too_many_arguments)]
fn encode_log_request<'py>(
    py: Python<'py>,
    batch: &Bound<'py, PyRecordBatch>,
    idempotency_key: &[u8],
    source: &[u8],
    offset: u64,
    ingest_ms: i64,
    position: u64,
    next_index: i64,
    index_every: u64,
) -> PyResult<Bound<'py, PyTuple>> {
    let batch = &batch.get().inner;
    // A negative next index (below every offset) wants no entry and stays as it is.
    let wanted = u64::try_from(next_index).ok();
    let at = Placement {
        offset,
        ingest_ms,
        position,
        next_index: wanted.unwrap_or(u64::MAX),
        index_every,
    };
    let encoded = py
        .detach(|| log_format::encode_request(batch, idempotency_key, source, at))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let (low, high) = encoded.time_range;
    let next_index = match wanted {
        Some(_) => i128::from(encoded.next_index),
        None => i128::from(next_index),
    };
    (
        PyBytes::new(py, &encoded.bytes),
        encoded.index,
        encoded.position,
        next_index,
        low,
        high,
    )
        .into_pyobject(py)
}

/// The records of JSON `lines` whose reading is plain, and the positions of the lines
/// left to the reference parser (`injector/json_lines.py`).
#[pyfunction]
#[pyo3(signature = (lines, *, min_event_time_ms, max_event_time_ms, max_record_bytes))]
fn parse_json_lines(
    py: Python<'_>,
    lines: Vec<PyBackedLine>,
    min_event_time_ms: i64,
    max_event_time_ms: i64,
    max_record_bytes: usize,
) -> (PyRecordBatch, Vec<usize>) {
    let limits = LineLimits {
        min_event_time_ms,
        max_event_time_ms,
        max_record_bytes,
    };
    let (inner, others) =
        py.detach(|| json_lines::parse_lines(lines.iter().map(|l| &l.0[..]), &limits));
    (PyRecordBatch { inner }, others)
}

/// One line's bytes, held without a copy (a `bytes` object keeps them alive).
struct PyBackedLine(pyo3::pybacked::PyBackedBytes);

impl<'a, 'py> FromPyObject<'a, 'py> for PyBackedLine {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Self(obj.extract()?))
    }
}

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

    /// The event times, in order.
    fn event_times(&self) -> Vec<i64> {
        self.inner.event_times.clone()
    }

    /// One `DeliveryBatch` frame per destination interval of `consumer` for the records
    /// from position `start` on: `(interval, payload, slots)` in order of first
    /// appearance, `slots` the records' positions. `intervals`: each record's interval
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
            out.append((
                frame.interval,
                PyBytes::new(py, &frame.payload),
                frame.slots,
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
fn scan_log(
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

/// `(keys, starts, counts, slots, bounds, columns)`: the windowed aggregation's batch
/// grouped by (key, window start), `records` being `computations.Record` tuples (key,
/// value and event time at positions 1, 2 and 3).
///
/// `window`: `("tumbling", size_ms, offset_ms)`, `("hopping", size_ms, slide_ms,
/// offset_ms)` or `("global", start_ms)`. Groups come by key (first appearance), then
/// window start; `keys` and `starts` per group, `counts` its records, group `g`'s record
/// indices `slots[bounds[g]:bounds[g + 1]]` in arrival order. `columns`: with
/// `int_values`, each group's exact `(sums, mins, maxs)` when every value (or its
/// object's `field`) is a JSON integer within int64, else None. Returns None when a
/// window start falls outside int64.
#[pyfunction]
#[pyo3(signature = (records, *, window, int_values, field = None))]
fn fold_groups<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    window: &Bound<'py, PyTuple>,
    int_values: bool,
    field: Option<&str>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let spec = window_spec(window)?;
    let mut key_ids: Vec<u32> = Vec::new();
    let mut times: Vec<i64> = Vec::new();
    let mut values: Option<Vec<i64>> = int_values.then(Vec::new);
    let mut distinct: Vec<Bound<'py, PyBytes>> = Vec::new();
    let mut ids: std::collections::HashMap<Vec<u8>, u32> = std::collections::HashMap::new();
    for item in records.try_iter()? {
        let item = item?;
        let record = item.cast::<PyTuple>()?;
        let key = record.get_item(1)?.cast_into::<PyBytes>()?;
        let id = match ids.get(key.as_bytes()) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(distinct.len())
                    .map_err(|_| PyValueError::new_err("too many keys in one batch"))?;
                ids.insert(key.as_bytes().to_vec(), id);
                distinct.push(key);
                id
            }
        };
        key_ids.push(id);
        times.push(record.get_item(3)?.extract()?);
        if let Some(column) = values.as_mut() {
            let value = record.get_item(2)?;
            match fold::int_value(value.cast::<PyBytes>()?.as_bytes(), field) {
                Some(v) => column.push(v),
                None => values = None,
            }
        }
    }
    let Some(groups) = py.detach(|| fold::group(&key_ids, &times, spec)) else {
        return Ok(None);
    };
    let columns: Bound<'py, PyAny> = match values {
        Some(values) => {
            let c = fold::columns(&groups, &values);
            (c.sums, c.mins, c.maxs).into_pyobject(py)?.into_any()
        }
        None => py.None().into_bound(py),
    };
    let keys = PyList::new(
        py,
        groups.keys.iter().map(|&k| distinct[k as usize].clone()),
    )?;
    let counts = groups.counts();
    let out = PyTuple::new(
        py,
        [
            keys.into_any(),
            groups.starts.into_pyobject(py)?.into_any(),
            counts.into_pyobject(py)?.into_any(),
            groups.slots.into_pyobject(py)?.into_any(),
            groups.bounds.into_pyobject(py)?.into_any(),
            columns,
        ],
    )?;
    Ok(Some(out))
}

fn window_spec(window: &Bound<'_, PyTuple>) -> PyResult<WindowSpec> {
    let kind: String = window.get_item(0)?.extract()?;
    let int = |i: usize| -> PyResult<i64> { window.get_item(i)?.extract() };
    match kind.as_str() {
        "tumbling" => Ok(WindowSpec::Tumbling {
            size_ms: int(1)?,
            offset_ms: int(2)?,
        }),
        "hopping" => Ok(WindowSpec::Hopping {
            size_ms: int(1)?,
            slide_ms: int(2)?,
            offset_ms: int(3)?,
        }),
        "global" => Ok(WindowSpec::Global { start_ms: int(1)? }),
        other => Err(PyValueError::new_err(format!(
            "no native fold for windows {other:?}"
        ))),
    }
}

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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRecordBatch>()?;
    m.add_class::<PyLogBatch>()?;
    m.add_class::<PyBloomHasher>()?;
    m.add_class::<PyBloomPositions>()?;
    m.add_class::<PyBloomBits>()?;
    m.add("LogEntryError", m.py().get_type::<LogEntryError>())?;
    m.add_function(wrap_pyfunction!(scan_log, m)?)?;
    m.add_function(wrap_pyfunction!(fold_groups, m)?)?;
    m.add(
        "UndecodableRequestError",
        m.py().get_type::<UndecodableRequestError>(),
    )?;
    m.add_function(wrap_pyfunction!(decode_ingest_request, m)?)?;
    m.add_function(wrap_pyfunction!(ingest_response, m)?)?;
    m.add_function(wrap_pyfunction!(ingest_request, m)?)?;
    m.add_function(wrap_pyfunction!(encode_log_request, m)?)?;
    m.add_function(wrap_pyfunction!(parse_json_lines, m)?)?;
    Ok(())
}
