//! A windowed aggregation's batch fold (`fold_groups`).

use millrace_core::fold::{self, WindowSpec};
use millrace_core::panes::{self, AfterPane, Fired, RowColumn};
use millrace_core::window_state::{self, Aggregate, Contribution, Outcome, Part};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyBytes, PyList, PyTuple};

/// `prefix` then `"{start}/{end}"` for each window start: how a window's state and
/// timers are tagged (`Window.tag`), `end` being `start + size_ms`, or `end_ms` for
/// every window when `size_ms` is 0 (the global window). Exact for any int64 bounds.
#[pyfunction]
#[pyo3(signature = (starts, *, size_ms, end_ms, prefix))]
pub(crate) fn window_tags(
    starts: Vec<i64>,
    size_ms: i64,
    end_ms: i64,
    prefix: &str,
) -> Vec<String> {
    use std::fmt::Write;
    starts
        .into_iter()
        .map(|start| {
            let end = if size_ms == 0 {
                i128::from(end_ms)
            } else {
                i128::from(start) + i128::from(size_ms)
            };
            let mut tag = String::with_capacity(prefix.len() + 28);
            tag.push_str(prefix);
            // Writing to a String cannot fail.
            let _ = write!(tag, "{start}/{end}");
            tag
        })
        .collect()
}

/// `(keys, starts, counts, slots, bounds, columns)`: the windowed aggregation's batch
/// grouped by (key, window start), the batch given as columns: each record's key,
/// value and event time (`computations.RecordColumns` holds them so; equal lengths,
/// else ValueError).
///
/// `window`: `("tumbling", size_ms, offset_ms)`, `("hopping", size_ms, slide_ms,
/// offset_ms)` or `("global", start_ms)`. Groups come by key (first appearance), then
/// window start; `keys` and `starts` per group, `counts` its records, group `g`'s record
/// indices `slots[bounds[g]:bounds[g + 1]]` in arrival order. `columns`: with
/// `int_values`, each group's exact `(sums, mins, maxs)` when every value (or its
/// object's `field`) is a JSON integer within int64, else None. Returns None when a
/// window start falls outside int64.
#[pyfunction]
#[pyo3(signature = (keys, values, times, *, window, int_values, field = None))]
pub(crate) fn fold_groups<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyList>,
    values: &Bound<'py, PyList>,
    times: Vec<i64>,
    window: &Bound<'py, PyTuple>,
    int_values: bool,
    field: Option<&str>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let spec = window_spec(window)?;
    if keys.len() != times.len() || values.len() != times.len() {
        return Err(PyValueError::new_err(format!(
            "columns of different lengths: {} keys, {} values, {} times",
            keys.len(),
            values.len(),
            times.len()
        )));
    }
    let mut key_ids: Vec<u32> = Vec::with_capacity(times.len());
    let mut column: Option<Vec<i64>> = int_values.then(|| Vec::with_capacity(times.len()));
    let mut distinct: Vec<Bound<'py, PyBytes>> = Vec::new();
    let mut ids: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::new();
    // The keys' bytes are borrowed from the list's objects, which the list keeps alive.
    let key_objects: Vec<Bound<'py, PyBytes>> = keys
        .iter()
        .map(|key| key.cast_into::<PyBytes>().map_err(PyErr::from))
        .collect::<PyResult<_>>()?;
    for key in &key_objects {
        let id = match ids.get(key.as_bytes()) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(distinct.len())
                    .map_err(|_| PyValueError::new_err("too many keys in one batch"))?;
                ids.insert(key.as_bytes(), id);
                distinct.push(key.clone());
                id
            }
        };
        key_ids.push(id);
    }
    if column.is_some() {
        for value in values.iter() {
            match fold::int_value(value.cast::<PyBytes>()?.as_bytes(), field) {
                Some(v) => column.as_mut().expect("checked").push(v),
                None => {
                    column = None;
                    break;
                }
            }
        }
    }
    let values = column;
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

/// `(written, states, opened, left, python)`: each group of a `fold_groups` result
/// folded into its window's state (`window_state.rs`).
///
/// `raws`: each group's stored state (None: no state yet); `counts`, `starts` and
/// `columns` as `fold_groups` returned them. `parts` names the combiner's parts
/// (`count`, `sum`, `min`, `max`, `mean`), `combined` says its accumulator is their
/// list. A group whose window's last instant (`start + size_ms - 1`, or `end_ms - 1`
/// without a size, at most `max_ms`) is before `passed_ms` is left. Returns the
/// indices of the groups written and their new states, those of them whose windows
/// opened, the groups whose keys go to `process_record`, and the groups to fold in
/// Python.
#[pyfunction]
#[pyo3(signature = (raws, counts, starts, columns, *, parts, combined, early_count, size_ms, end_ms, passed_ms, max_ms))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(crate) fn fold_window_states<'py>(
    py: Python<'py>,
    raws: Vec<Option<PyBackedBytes>>,
    counts: Vec<i64>,
    starts: Vec<i64>,
    columns: Option<(Vec<i64>, Vec<i64>, Vec<i64>)>,
    parts: Vec<String>,
    combined: bool,
    early_count: Option<i64>,
    size_ms: i64,
    end_ms: i64,
    passed_ms: i64,
    max_ms: i64,
) -> PyResult<(
    Vec<usize>,
    Vec<Bound<'py, PyBytes>>,
    Vec<usize>,
    Vec<usize>,
    Vec<usize>,
)> {
    let n = raws.len();
    if counts.len() != n
        || starts.len() != n
        || columns
            .as_ref()
            .is_some_and(|c| c.0.len() != n || c.1.len() != n || c.2.len() != n)
    {
        return Err(PyValueError::new_err("one entry per group in each list"));
    }
    let aggregate = Aggregate {
        parts: parts.iter().map(|p| part(p)).collect::<PyResult<_>>()?,
        combined,
    };
    let outcomes = py.detach(|| {
        (0..n)
            .map(|g| {
                let end = if size_ms > 0 {
                    starts[g].checked_add(size_ms)
                } else {
                    Some(end_ms)
                };
                match end {
                    Some(end) if passed_ms <= (end - 1).min(max_ms) => {}
                    _ => return Outcome::Leave, // passed, or beyond event time
                }
                let group = Contribution {
                    count: counts[g],
                    values: columns.as_ref().map(|(s, lo, hi)| (s[g], lo[g], hi[g])),
                };
                window_state::fold(raws[g].as_deref(), &aggregate, group, early_count)
            })
            .collect::<Vec<_>>()
    });
    let (mut written, mut states, mut opened, mut left, mut python) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (g, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Outcome::Folded(state) => {
                written.push(g);
                states.push(PyBytes::new(py, &state));
            }
            Outcome::Opened(state) => {
                written.push(g);
                opened.push(g);
                states.push(PyBytes::new(py, &state));
            }
            Outcome::Leave => left.push(g),
            Outcome::Python => python.push(g),
        }
    }
    Ok((written, states, opened, left, python))
}

fn part(name: &str) -> PyResult<Part> {
    match name {
        "count" => Ok(Part::Count),
        "sum" => Ok(Part::Sum),
        "min" => Ok(Part::Min),
        "max" => Ok(Part::Max),
        "mean" => Ok(Part::Mean),
        other => Err(PyValueError::new_err(format!(
            "no native fold for the combiner {other:?}"
        ))),
    }
}

/// `(fired, panes, times, states, left, python)`: the on-time panes of windows whose
/// timers fire (`panes.rs`), from their stored states `raws` (None: no state, nothing
/// fires); with `after` `"accumulate"` or `"discard"` (a window kept for late records),
/// `states` holds each fired window's state after its pane (else it is empty).
///
/// `keys` and `windows` (tags `"start/end"`) per window; `parts` and `combined` as for
/// [`fold_window_states`], `names` the parts' names in a combined result. Returns the
/// indices of the windows that fired, their panes and the panes' event times (the
/// window's last instant, at most `max_ms`); the indices of those whose keys go to
/// `process_timer` (an early clock runs), and of those to fire in Python. With `row`
/// (`(name, what)` pairs, `what` one of `key_text`, `key_json`, `window_start`,
/// `window_end`, `part:<i>`), each pane is written as that JSON object instead.
#[pyfunction]
#[pyo3(signature = (raws, keys, windows, *, parts, names, combined, max_ms, after = "forget", row = None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(crate) fn on_time_panes<'py>(
    py: Python<'py>,
    raws: Vec<Option<PyBackedBytes>>,
    keys: Vec<PyBackedBytes>,
    windows: Vec<PyBackedStr>,
    parts: Vec<String>,
    names: Vec<String>,
    combined: bool,
    max_ms: i64,
    after: &str,
    row: Option<Vec<(String, String)>>,
) -> PyResult<(
    Vec<usize>,
    Vec<Bound<'py, PyBytes>>,
    Vec<i64>,
    Vec<Bound<'py, PyBytes>>,
    Vec<usize>,
    Vec<usize>,
)> {
    let n = raws.len();
    if keys.len() != n || windows.len() != n {
        return Err(PyValueError::new_err("one entry per window in each list"));
    }
    let after = match after {
        "forget" => AfterPane::Forget,
        "accumulate" => AfterPane::Accumulate,
        "discard" => AfterPane::Discard,
        other => {
            return Err(PyValueError::new_err(format!(
                "after must be forget, accumulate or discard, not {other:?}"
            )))
        }
    };
    let aggregate = Aggregate {
        parts: parts.iter().map(|p| part(p)).collect::<PyResult<_>>()?,
        combined,
    };
    let row = row
        .map(|columns| {
            columns
                .into_iter()
                .map(|(name, what)| Ok((name, row_column(&what)?)))
                .collect::<PyResult<Vec<_>>>()
        })
        .transpose()?;
    let fired = py.detach(|| {
        (0..n)
            .map(|i| {
                let Some(span) = window_span(&windows[i]) else {
                    return (Fired::Python, 0);
                };
                let last = span.1.saturating_sub(1).min(max_ms);
                let raw = raws[i].as_deref();
                let pane = match &row {
                    Some(columns) => {
                        panes::on_time_row(raw, &keys[i], span, &aggregate, columns, after)
                    }
                    None => panes::on_time_pane(raw, &keys[i], span, &aggregate, &names, after),
                };
                (pane, last)
            })
            .collect::<Vec<_>>()
    });
    let (mut shown, mut panes_out, mut times, mut kept) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut left, mut python) = (Vec::new(), Vec::new());
    for (i, (outcome, last)) in fired.into_iter().enumerate() {
        match outcome {
            Fired::Pane(pane, state) => {
                shown.push(i);
                panes_out.push(PyBytes::new(py, &pane));
                times.push(last);
                if let Some(state) = state {
                    kept.push(PyBytes::new(py, &state));
                }
            }
            Fired::Empty => {}
            Fired::Leave => left.push(i),
            Fired::Python => python.push(i),
        }
    }
    Ok((shown, panes_out, times, kept, left, python))
}

fn row_column(what: &str) -> PyResult<RowColumn> {
    Ok(match what {
        "key_text" => RowColumn::KeyText,
        "key_json" => RowColumn::KeyJson,
        "window_start" => RowColumn::WindowStart,
        "window_end" => RowColumn::WindowEnd,
        other => match other.strip_prefix("part:").and_then(|i| i.parse().ok()) {
            Some(i) => RowColumn::Part(i),
            None => {
                return Err(PyValueError::new_err(format!(
                    "a row column is key_text, key_json, window_start, window_end or \
                     part:<i>, not {other:?}"
                )))
            }
        },
    })
}

/// `(start, end)` of a window tag `"start/end"` as `Window.tag` writes it.
fn window_span(tag: &str) -> Option<(i64, i64)> {
    let (start, end) = tag.split_once('/')?;
    let canonical = |s: &str| {
        let n: i64 = s.parse().ok()?;
        (n.to_string() == s).then_some(n)
    };
    Some((canonical(start)?, canonical(end)?))
}
