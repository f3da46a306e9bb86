//! The messages of the v1 wire contract (`proto/millrace/wire/v1/`) that the native
//! data plane reads or writes, declared with prost's derive so that no `protoc` is
//! needed to build. Field numbers and types mirror the `.proto` files; the Python tests
//! check these encodings byte for byte against the generated Python code.

use bytes::Bytes;

/// `millrace.wire.v1.IngestRecord`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IngestRecord {
    #[prost(bytes = "bytes", tag = "1")]
    pub key: Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
    #[prost(int64, tag = "3")]
    pub event_time_ms: i64,
}

/// `millrace.wire.v1.IngestRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IngestRequest {
    #[prost(string, tag = "1")]
    pub stream: String,
    #[prost(string, tag = "2")]
    pub idempotency_key: String,
    #[prost(message, repeated, tag = "3")]
    pub records: Vec<IngestRecord>,
}

/// `millrace.wire.v1.IngestResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IngestResponse {
    #[prost(bytes = "bytes", repeated, tag = "1")]
    pub record_ids: Vec<Bytes>,
    #[prost(uint64, tag = "2")]
    pub first_offset: u64,
    #[prost(bool, tag = "3")]
    pub replayed: bool,
}

/// `millrace.wire.v1.Record`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Record {
    #[prost(bytes = "bytes", tag = "1")]
    pub record_id: Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    pub key: Bytes,
    #[prost(bytes = "bytes", tag = "3")]
    pub value: Bytes,
    #[prost(int64, tag = "4")]
    pub event_time_ms: i64,
    #[prost(string, tag = "5")]
    pub producer: String,
    #[prost(string, tag = "6")]
    pub stream: String,
}

/// `millrace.wire.v1.KeyInterval`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyInterval {
    #[prost(string, tag = "1")]
    pub computation: String,
    #[prost(uint32, tag = "2")]
    pub index: u32,
    #[prost(uint32, tag = "3")]
    pub count: u32,
}

/// `millrace.wire.v1.DeliveryBatch`, as a frame carries it: its target and records
/// (the sender's header fields, `batch_seq`, `sender` and `target_epoch`, are written
/// by the sender in front of the frames; concatenated messages parse as their merge).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeliveryFrame {
    #[prost(message, optional, tag = "3")]
    pub target: Option<KeyInterval>,
    #[prost(message, repeated, tag = "5")]
    pub records: Vec<Record>,
}
