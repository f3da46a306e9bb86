//! `json:FIELD` keys of a batch's values (`computations/_keys.py`).

use millrace_core::json_keys;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::PyBackedLine;

/// Each value's key by its JSON field `field` (a string's UTF-8, an integer's
/// decimal text), or None where the reference reading (`_JsonField`) decides.
#[pyfunction]
pub(crate) fn json_field_keys<'py>(
    py: Python<'py>,
    values: Vec<PyBackedLine>,
    field: &str,
) -> PyResult<Bound<'py, PyList>> {
    let keys = py.detach(|| json_keys::field_keys(values.iter().map(|v| &v.0[..]), field));
    PyList::new(
        py,
        keys.iter()
            .map(|key| key.as_deref().map(|k| PyBytes::new(py, k))),
    )
}
