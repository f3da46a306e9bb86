//! A computation's productions of one commit, framed per destination (`ProductionPlan`).

use bytes::Bytes;
use millrace_core::productions::{self, Caused, Emitted, Plan, Route, Routing};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

/// Where one computation's output streams go; built once per computation.
#[pyclass(name = "ProductionPlan", module = "millrace._native", frozen)]
pub(crate) struct PyProductionPlan {
    plan: Plan,
}

/// A stream's routes as Python gives them: `(consumer index, intervals, given)`.
type RouteTuples = Vec<(usize, u32, bool)>;

type Framed<'py> = (
    usize,
    u32,
    Bound<'py, PyBytes>,
    Vec<Bound<'py, PyBytes>>,
    i64,
);

#[pymethods]
impl PyProductionPlan {
    /// `streams`: per output stream, its name and its routes `(consumer index,
    /// intervals, given)`; `given` routes take their intervals from the caller.
    #[new]
    fn new(
        producer: String,
        consumers: Vec<String>,
        streams: Vec<(String, RouteTuples)>,
    ) -> PyResult<Self> {
        let mut planned = Vec::with_capacity(streams.len());
        for (stream, routes) in streams {
            let mut out = Vec::with_capacity(routes.len());
            for (consumer, intervals, given) in routes {
                if consumer >= consumers.len() {
                    return Err(PyValueError::new_err(format!(
                        "stream {stream:?}: consumer {consumer} of {}",
                        consumers.len()
                    )));
                }
                let routing = if given {
                    Routing::Given
                } else {
                    Routing::ByKey
                };
                out.push(Route {
                    consumer,
                    intervals,
                    routing,
                });
            }
            planned.push((stream, out));
        }
        Ok(Self {
            plan: Plan {
                producer,
                consumers,
                streams: planned,
            },
        })
    }

    /// One commit's frames `(consumer index, interval, payload, outbox keys, oldest event
    /// time)`, in order
    /// of each destination's first production. `causes[i]` emitted `emitted[i]`, a list
    /// of `(stream, key, value, event_time_ms)`; `given` holds the intervals of the
    /// `given` routes, in production order.
    fn frames<'py>(
        &self,
        py: Python<'py>,
        causes: &Bound<'py, PyAny>,
        emitted: &Bound<'py, PyAny>,
        given: Vec<u32>,
    ) -> PyResult<Vec<Framed<'py>>> {
        let mut caused = Vec::new();
        let mut emitted = emitted.try_iter()?;
        for cause in causes.try_iter()? {
            let cause = Bytes::copy_from_slice(cause?.cast::<PyBytes>()?.as_bytes());
            let records = emitted.next().ok_or_else(|| {
                PyValueError::new_err("one sequence of emitted records per cause")
            })??;
            let mut out = Vec::new();
            for record in records.try_iter()? {
                let record = record?.cast_into::<PyTuple>()?;
                out.push(Emitted {
                    stream: self.stream_index(&record.get_item(0)?)?,
                    key: Bytes::copy_from_slice(record.get_item(1)?.cast::<PyBytes>()?.as_bytes()),
                    value: Bytes::copy_from_slice(
                        record.get_item(2)?.cast::<PyBytes>()?.as_bytes(),
                    ),
                    event_time_ms: record.get_item(3)?.extract()?,
                });
            }
            caused.push(Caused {
                cause,
                emitted: out,
            });
        }
        if emitted.next().is_some() {
            return Err(PyValueError::new_err(
                "one sequence of emitted records per cause",
            ));
        }
        let plan = &self.plan;
        let built = py
            .detach(|| productions::build(plan, &caused, &given))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(built
            .into_iter()
            .map(|frame| {
                let keys = frame
                    .outbox_keys
                    .iter()
                    .map(|k| PyBytes::new(py, k))
                    .collect();
                (
                    frame.consumer,
                    frame.interval,
                    PyBytes::new(py, &frame.payload),
                    keys,
                    frame.oldest_event_time_ms,
                )
            })
            .collect())
    }
}

impl PyProductionPlan {
    fn stream_index(&self, stream: &Bound<'_, PyAny>) -> PyResult<usize> {
        let name = stream.cast::<PyString>()?.to_str()?;
        self.plan
            .streams
            .iter()
            .position(|(s, _)| s == name)
            .ok_or_else(|| PyValueError::new_err(format!("{name:?} is not an output stream")))
    }
}
