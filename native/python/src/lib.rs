//! `millrace._native`: the Python face of `millrace-core`.
//!
//! Every function takes or returns a whole batch: the seam is crossed once per request
//! or group of lines, never once per record. Work on owned data runs with the GIL
//! released, so gRPC threads decode while the log's writer encodes. Nothing is started
//! at import (no thread, no runtime): Spark forks its Python workers.

#![forbid(unsafe_code)]

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod ack_book;
mod bloom;
mod delivery;
mod fold;
mod ingest;
mod keys;
mod log;
mod productions;
mod records;
mod state_cache;
mod timers;

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

/// One line's bytes, held without a copy (a `bytes` object keeps them alive).
pub(crate) struct PyBackedLine(pub(crate) pyo3::pybacked::PyBackedBytes);

impl<'a, 'py> FromPyObject<'a, 'py> for PyBackedLine {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Self(obj.extract()?))
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<records::PyRecordBatch>()?;
    m.add_class::<ack_book::PyAckBook>()?;
    m.add_class::<log::PyLogBatch>()?;
    m.add_class::<bloom::PyBloomHasher>()?;
    m.add_class::<bloom::PyBloomPositions>()?;
    m.add_class::<bloom::PyBloomBits>()?;
    m.add_class::<productions::PyProductionPlan>()?;
    m.add_class::<timers::PyTimerIndex>()?;
    m.add_class::<state_cache::PyStateCache>()?;
    m.add("LogEntryError", m.py().get_type::<LogEntryError>())?;
    m.add_function(wrap_pyfunction!(log::scan_log, m)?)?;
    m.add_function(wrap_pyfunction!(log::scan_requests, m)?)?;
    m.add_function(wrap_pyfunction!(log::scan_columns, m)?)?;
    m.add_function(wrap_pyfunction!(log::decode_commit, m)?)?;
    m.add_function(wrap_pyfunction!(fold::fold_groups, m)?)?;
    m.add_function(wrap_pyfunction!(fold::fold_window_states, m)?)?;
    m.add_function(wrap_pyfunction!(fold::window_tags, m)?)?;
    m.add_function(wrap_pyfunction!(fold::on_time_panes, m)?)?;
    m.add(
        "UndecodableRequestError",
        m.py().get_type::<UndecodableRequestError>(),
    )?;
    m.add_function(wrap_pyfunction!(ingest::decode_ingest_request, m)?)?;
    m.add_function(wrap_pyfunction!(delivery::decode_deliveries, m)?)?;
    m.add_function(wrap_pyfunction!(delivery::columns_shape, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::ingest_response, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::ingest_request, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::encode_log_request, m)?)?;
    m.add_function(wrap_pyfunction!(ingest::parse_json_lines, m)?)?;
    m.add_function(wrap_pyfunction!(keys::json_field_keys, m)?)?;
    m.add_function(wrap_pyfunction!(keys::state_key, m)?)?;
    m.add_function(wrap_pyfunction!(keys::state_keys, m)?)?;
    m.add_function(wrap_pyfunction!(productions::timer_fire_causes, m)?)?;
    Ok(())
}
