//! A computation's productions of one commit, framed per destination (`ProductionPlan`),
//! and the causes of a round's timer fires that name them.

use millrace_core::productions::{self, FrameSet, Plan, PlanError, Route, Routing};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

/// Where one computation's output streams go; built once per computation.
#[pyclass(name = "ProductionPlan", module = "millrace._native", frozen)]
pub(crate) struct PyProductionPlan {
    plan: Plan,
}

/// A stream's routes as Python gives them: `(consumer index, intervals, given, table)`.
type RouteTuples = Vec<(usize, u32, bool, Vec<u32>)>;

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
    /// intervals, given, table)`; `given` routes take their intervals from the caller;
    /// a non-empty `table` names the interval (by id) of each of its equal ranges of
    /// the key-hash space (the consumer's intervals were split). A frame takes no record
    /// that would carry it past `frame_bytes` (a bigger record goes alone).
    #[new]
    #[pyo3(signature = (producer, consumers, streams, *, frame_bytes))]
    fn new(
        producer: String,
        consumers: Vec<String>,
        streams: Vec<(String, RouteTuples)>,
        frame_bytes: usize,
    ) -> PyResult<Self> {
        let mut planned = Vec::with_capacity(streams.len());
        for (stream, routes) in streams {
            let mut out = Vec::with_capacity(routes.len());
            for (consumer, intervals, given, table) in routes {
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
                out.push(Route::new(consumer, intervals, routing, table));
            }
            planned.push((stream, out));
        }
        Ok(Self {
            plan: Plan {
                producer,
                consumers,
                streams: planned,
                frame_bytes,
            },
        })
    }

    /// One commit's frames `(consumer index, interval, payload, outbox keys, oldest event
    /// time)`, in order of their first production (a destination's records over
    /// `frame_bytes` in several). `causes[i]` emitted `emitted[i]`, a list
    /// of `(stream, key, value, event_time_ms)`; `given` holds the intervals of the
    /// `given` routes, in production order.
    fn frames<'py>(
        &self,
        py: Python<'py>,
        causes: &Bound<'py, PyAny>,
        emitted: &Bound<'py, PyAny>,
        given: Vec<u32>,
    ) -> PyResult<Vec<Framed<'py>>> {
        // Records are read in place from their `bytes` (the GIL stays held: nothing is
        // copied, and the encoding is a few hundred nanoseconds a record).
        let mut set = FrameSet::new(&self.plan);
        let mut given = given.into_iter();
        let mut emitted = emitted.try_iter()?;
        for cause in causes.try_iter()? {
            let cause = cause?;
            let cause = cause.cast::<PyBytes>()?.as_bytes();
            let records = emitted.next().ok_or_else(|| {
                PyValueError::new_err("one sequence of emitted records per cause")
            })??;
            for (index, record) in (0u32..).zip(records.try_iter()?) {
                let record = record?.cast_into::<PyTuple>()?;
                let key = record.get_item(1)?;
                let value = record.get_item(2)?;
                set.add(
                    cause,
                    index,
                    self.stream_index(&record.get_item(0)?)?,
                    key.cast::<PyBytes>()?.as_bytes(),
                    value.cast::<PyBytes>()?.as_bytes(),
                    record.get_item(3)?.extract()?,
                    &mut given,
                )
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            }
        }
        if emitted.next().is_some() {
            return Err(PyValueError::new_err(
                "one sequence of emitted records per cause",
            ));
        }
        let left = given.count();
        if left > 0 {
            return Err(PyValueError::new_err(
                PlanError::UnusedIntervals(left).to_string(),
            ));
        }
        let built = set.finish();
        built
            .into_iter()
            .map(|frame| {
                let size = frame.prefix.len() + 16;
                let keys = frame
                    .ids
                    .iter()
                    .map(|id| {
                        PyBytes::new_with(py, size, |key| {
                            key[..frame.prefix.len()].copy_from_slice(&frame.prefix);
                            key[frame.prefix.len()..].copy_from_slice(id);
                            Ok(())
                        })
                    })
                    .collect::<PyResult<_>>()?;
                Ok((
                    frame.consumer,
                    frame.interval,
                    PyBytes::new(py, &frame.payload),
                    keys,
                    frame.oldest_event_time_ms,
                ))
            })
            .collect()
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

/// The causes of the fires of `timers` (each a `Timer` named tuple: domain, key, tag,
/// time, setter) of `computation`: `engine/_production_ids.py`'s `timer_fire_cause`,
/// a round's in one call.
#[pyfunction]
pub(crate) fn timer_fire_causes<'py>(
    py: Python<'py>,
    computation: &str,
    timers: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let made = PyList::empty(py);
    for timer in timers.try_iter()? {
        let timer = timer?.cast_into::<PyTuple>()?;
        let domain: u8 = timer.get_item(0)?.extract()?;
        let key = timer.get_item(1)?.cast_into::<PyBytes>()?;
        let tag = timer.get_item(2)?.cast_into::<PyString>()?;
        let time_ms: i64 = timer.get_item(3)?.extract()?;
        let setter = timer.get_item(4)?.cast_into::<PyBytes>()?;
        let cause = productions::fire_cause(
            computation.as_bytes(),
            domain,
            key.as_bytes(),
            tag.to_str()?.as_bytes(),
            time_ms,
            setter.as_bytes(),
        );
        made.append(PyBytes::new(py, &cause))?;
    }
    Ok(made)
}
