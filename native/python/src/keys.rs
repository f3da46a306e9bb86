//! Keys made or read a batch at a time: `json:FIELD` keys of a batch's values
//! (`computations/_keys.py`) and the store keys of user state (`engine/_scope.py`).

use millrace_core::json_keys;
use millrace_core::state_keys as layout;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

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

/// Where `key`'s state `tag` lives in the state column family
/// (`engine/_scope.py`'s `state_key`); with an empty tag, the prefix of all of its
/// state.
#[pyfunction]
pub(crate) fn state_key<'py>(
    py: Python<'py>,
    key: PyBackedLine,
    tag: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let (key, tag) = (&key.0[..], tag.as_bytes());
    PyBytes::new_with(py, layout::state_key_len(key, tag), |out| {
        layout::write_state_key(out, key, tag);
        Ok(())
    })
}

/// `[state_key(key, tag) for key, tag in zip(keys, tags)]` in one call (lists of
/// bytes and of str); ValueError when their lengths differ.
#[pyfunction]
pub(crate) fn state_keys<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyList>,
    tags: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyList>> {
    if keys.len() != tags.len() {
        let message = format!("{} keys but {} tags", keys.len(), tags.len());
        return Err(PyValueError::new_err(message));
    }
    let made = PyList::empty(py);
    for (key, tag) in keys.iter().zip(tags.iter()) {
        let key = key.cast_into::<PyBytes>()?;
        let tag = tag.cast_into::<PyString>()?;
        let (key, tag) = (key.as_bytes(), tag.to_str()?.as_bytes());
        let size = layout::state_key_len(key, tag);
        made.append(PyBytes::new_with(py, size, |out| {
            layout::write_state_key(out, key, tag);
            Ok(())
        })?)?;
    }
    Ok(made)
}
