//! Millrace's per-record data plane, without Python.
//!
//! Everything here works on whole batches of records and on bytes: the v1 wire
//! contract's messages ([`wire`]), a batch of records ([`batch`]), the ingest path from
//! request bytes to log entries ([`ingest`], [`log_format`]) and JSON lines
//! ([`json_lines`]). The `millrace-python` crate exposes it to Python as
//! `millrace._native`, one call per batch.
//!
//! Nothing here blocks, starts a thread or touches a file: callers own the I/O.

#![forbid(unsafe_code)]

pub mod ack_book;
pub mod batch;
pub mod bloom;
pub mod delivery;
pub mod fold;
pub mod frames;
pub mod ingest;
pub mod json_keys;
pub mod json_lines;
pub mod log_format;
pub mod log_scan;
pub mod panes;
pub mod productions;
pub mod state_keys;
pub mod timer_index;
pub mod window_state;
pub mod wire;

pub use batch::{Record, RecordBatch};
