//! The records of delivered `DeliveryBatch` messages, as columns for admission.

use millrace_core::delivery::{Delivered, Shape, UndecodableBatch};
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::UndecodableRequestError;

/// `(record_ids, streams, keys, values, event_times_ms, producers, shape)` of the
/// records of `wires` (serialized `DeliveryBatch` messages), in order; `shape` is
/// `(ids_distinct, one_stream, min_event_ms, max_event_ms, keys_in_interval)`, the
/// wire keys hashed into `intervals` ranges and counted for `interval`. Raises
/// `UndecodableRequestError` for bytes that are not a `DeliveryBatch`.
#[pyfunction]
#[pyo3(signature = (wires, *, interval, intervals))]
pub(crate) fn decode_deliveries<'py>(
    py: Python<'py>,
    wires: Vec<PyBackedBytes>,
    interval: u32,
    intervals: u32,
) -> PyResult<Bound<'py, PyTuple>> {
    // Read in place: the records' fields are slices of the callers' bytes objects,
    // which `wires` keeps alive (immutable, so readable without the GIL).
    let slices: Vec<&[u8]> = wires.iter().map(|w| &w[..]).collect();
    let (delivered, shape) = py
        .detach(|| {
            let delivered = Delivered::decode(&slices)?;
            let shape = delivered.shape(interval, intervals);
            Ok((delivered, shape))
        })
        .map_err(|e: UndecodableBatch| {
            UndecodableRequestError::new_err(format!("undecodable DeliveryBatch: {e}"))
        })?;
    let records = &delivered.records;
    let ids = PyList::new(py, records.iter().map(|r| PyBytes::new(py, r.record_id)))?;
    let keys = PyList::new(py, records.iter().map(|r| PyBytes::new(py, r.key)))?;
    let values = PyList::new(py, records.iter().map(|r| PyBytes::new(py, r.value)))?;
    let times = PyList::new(py, records.iter().map(|r| r.event_time_ms))?;
    let streams = PyList::new(py, interned(py, records.iter().map(|r| r.stream)))?;
    let producers = PyList::new(py, interned(py, records.iter().map(|r| r.producer)))?;
    let shape = (
        shape.ids_distinct,
        shape.one_stream,
        shape.min_event_ms,
        shape.max_event_ms,
        shape.keys_in_interval,
    );
    PyTuple::new(
        py,
        [
            ids.into_any(),
            streams.into_any(),
            keys.into_any(),
            values.into_any(),
            times.into_any(),
            producers.into_any(),
            shape.into_pyobject(py)?.into_any(),
        ],
    )
}

/// `(ids_distinct, one_stream, min_event_ms, max_event_ms, keys_in_interval)` of
/// records given as columns (as `decode_deliveries` gives them): the shape admission
/// asks of a batch, for a caller that holds the records' fields already.
#[pyfunction]
#[pyo3(signature = (ids, streams, keys, times, *, interval, intervals))]
pub(crate) fn columns_shape(
    py: Python<'_>,
    ids: Vec<PyBackedBytes>,
    streams: Vec<PyBackedStr>,
    keys: Vec<PyBackedBytes>,
    times: Vec<i64>,
    interval: u32,
    intervals: u32,
) -> PyResult<(bool, bool, i64, i64, usize)> {
    let count = ids.len();
    if streams.len() != count || keys.len() != count || times.len() != count {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "columns of different lengths: {count} ids, {} streams, {} keys, {} times",
            streams.len(),
            keys.len(),
            times.len()
        )));
    }
    let shape = py.detach(|| {
        let ids: Vec<&[u8]> = ids.iter().map(|b| &b[..]).collect();
        let streams: Vec<&str> = streams.iter().map(|s| &s[..]).collect();
        let keys: Vec<&[u8]> = keys.iter().map(|b| &b[..]).collect();
        Shape::of_columns(&ids, &streams, &keys, &times, interval, intervals)
    });
    Ok((
        shape.ids_distinct,
        shape.one_stream,
        shape.min_event_ms,
        shape.max_event_ms,
        shape.keys_in_interval,
    ))
}

/// One Python string per run of equal strings (a batch's records share their stream
/// and producer), instead of one per record.
fn interned<'py, 'a>(
    py: Python<'py>,
    texts: impl Iterator<Item = &'a str>,
) -> Vec<Bound<'py, PyString>> {
    let mut last: Option<(&str, Bound<'py, PyString>)> = None;
    texts
        .map(|text| match &last {
            Some((seen, string)) if *seen == text => string.clone(),
            _ => {
                let string = PyString::new(py, text);
                last = Some((text, string.clone()));
                string
            }
        })
        .collect()
}
