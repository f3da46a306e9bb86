//! The ingest path: `Ingest` request and response bytes, log entries, JSON lines.

use bytes::Bytes;
use millrace_core::ingest::{self, Limits, Problem};
use millrace_core::json_lines::{self, LineLimits};
use millrace_core::log_format::{self, Placement};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::records::PyRecordBatch;
use crate::{PyBackedLine, UndecodableRequestError};

/// `(stream, idempotency_key, records, problem)` of an `IngestRequest`'s bytes.
///
/// `problem` is None, or the first thing wrong with the request as a tuple:
/// `("no_records",)`, `("too_many_records", count)`, `("idempotency_key_too_long",
/// bytes)`, `("record_too_large", index, bytes)`, `("event_time", index, ms)`. Raises
/// `UndecodableRequestError` for bytes that are not an `IngestRequest`.
#[pyfunction]
#[pyo3(signature = (raw, *, max_records, max_record_bytes, max_idempotency_key_bytes, min_event_time_ms, max_event_time_ms))]
pub(crate) fn decode_ingest_request<'py>(
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
pub(crate) fn ingest_response<'py>(
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
pub(crate) fn ingest_request<'py>(
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
pub(crate) fn encode_log_request<'py>(
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
pub(crate) fn parse_json_lines(
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
