//! `AckBook`: what one consumer of a stream was sent and has not acknowledged, by log
//! offset (`injector/forwarder.py`).

use millrace_core::ack_book::{AckBook, SentFrame};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyList};

/// Whether `key` is an outbox key of `consumer`: `consumer | 0x00 | interval u32 |
/// record id (16 bytes)`, its consumer read as the caller reads it (all but the last
/// 21 bytes), so every key of the name the caller took from a key is taken.
fn is_of(key: &[u8], consumer: &[u8]) -> bool {
    key.len() == consumer.len() + 21 && key.starts_with(consumer)
}

/// Offsets sent to one consumer and not acknowledged, with the oldest event time of
/// the frames that carried them. Not thread-safe by itself: the forwarder holds its
/// lock around every call.
#[pyclass(module = "millrace._native", name = "AckBook")]
#[derive(Default)]
pub struct PyAckBook {
    inner: AckBook,
}

#[pymethods]
impl PyAckBook {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Offsets `first + start .. first + count` were sent, in `frames`: each
    /// `(positions, oldest_event_time_ms)`, its records' positions from `first`.
    /// ValueError for a stretch that starts before the end of the last one, or a
    /// position outside the stretch.
    #[pyo3(signature = (first, start, count, frames))]
    fn send(
        &mut self,
        first: u64,
        start: usize,
        count: usize,
        frames: Vec<SentFrame>,
    ) -> PyResult<()> {
        self.inner
            .send(first, start, count, &frames)
            .map_err(PyValueError::new_err)
    }

    /// The productions of these outbox keys were acknowledged, those of `consumer`:
    /// `consumer | 0x00 | interval u32 | record id`, the id ending with the record's
    /// offset (big-endian u64). Returns the keys of other consumers, untouched (an ack
    /// is of one destination: usually none). Offsets not pending change nothing.
    fn ack_keys<'py>(
        &mut self,
        py: Python<'py>,
        keys: Vec<PyBackedBytes>,
        consumer: &[u8],
    ) -> PyResult<Bound<'py, PyList>> {
        let book = &mut self.inner;
        let (mine, others): (Vec<_>, Vec<_>) =
            keys.into_iter().partition(|key| is_of(key, consumer));
        py.detach(|| {
            book.ack(mine.iter().map(|key| {
                let tail: [u8; 8] = key[key.len() - 8..].try_into().expect("8 bytes");
                u64::from_be_bytes(tail)
            }))
        });
        PyList::new(py, others.iter().map(|key| PyBytes::new(py, key)))
    }

    /// The first offset sent and not acknowledged; None when every one was.
    fn first_pending(&mut self) -> Option<u64> {
        self.inner.first_pending()
    }

    /// The oldest event time of the frames still waiting for an acknowledgement.
    fn oldest_ms(&self) -> Option<i64> {
        self.inner.oldest_ms()
    }

    fn __len__(&self) -> usize {
        self.inner.pending()
    }
}
