//! The ingest path's wire side: an `IngestRequest`'s bytes to a checked
//! [`RecordBatch`], the `IngestResponse` that acknowledges it, and the request bytes a
//! client sends.

use bytes::Bytes;
use prost::Message;

use crate::batch::{Record, RecordBatch};
use crate::wire::{IngestRecord, IngestRequest, IngestResponse};

/// What the `Ingest` service accepts (set by the Python service, which owns the values).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_records: usize,
    pub max_record_bytes: usize,
    pub max_idempotency_key_bytes: usize,
    pub min_event_time_ms: i64,
    pub max_event_time_ms: i64,
}

/// The first thing wrong with a request, in the order the service checks them. The
/// service words the message (the event-time wording is shared with other checks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    NoRecords,
    TooManyRecords { count: usize },
    IdempotencyKeyTooLong { bytes: usize },
    RecordTooLarge { index: usize, bytes: usize },
    EventTimeOutOfRange { index: usize, event_time_ms: i64 },
}

/// A decoded request: where to append, its idempotency key, its records, and what is
/// wrong with it (None: it may be appended).
#[derive(Debug)]
pub struct DecodedRequest {
    pub stream: String,
    pub idempotency_key: String,
    pub batch: RecordBatch,
    pub problem: Option<Problem>,
}

/// Bytes that are not an `IngestRequest` (malformed protobuf, a string field that is
/// not UTF-8); the text says what the decoder found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undecodable(pub String);

/// Decodes `request` (the bytes a client sent) and checks it against `limits`; keys and
/// values are slices of `request`, not copies.
pub fn decode_request(request: Bytes, limits: &Limits) -> Result<DecodedRequest, Undecodable> {
    let message = IngestRequest::decode(request).map_err(|e| Undecodable(e.to_string()))?;
    let batch: RecordBatch = message
        .records
        .into_iter()
        .map(|r| Record {
            key: r.key,
            value: r.value,
            event_time_ms: r.event_time_ms,
        })
        .collect();
    let problem = problem_of(&batch, message.idempotency_key.len(), limits);
    Ok(DecodedRequest {
        stream: message.stream,
        idempotency_key: message.idempotency_key,
        batch,
        problem,
    })
}

/// The first problem of a request with these records and idempotency key length.
pub fn problem_of(batch: &RecordBatch, key_bytes: usize, limits: &Limits) -> Option<Problem> {
    if batch.is_empty() {
        return Some(Problem::NoRecords);
    }
    if batch.len() > limits.max_records {
        return Some(Problem::TooManyRecords { count: batch.len() });
    }
    if key_bytes > limits.max_idempotency_key_bytes {
        return Some(Problem::IdempotencyKeyTooLong { bytes: key_bytes });
    }
    let times = limits.min_event_time_ms..=limits.max_event_time_ms;
    batch.records().iter().enumerate().find_map(|(index, r)| {
        let bytes = r.key.len() + r.value.len();
        if bytes > limits.max_record_bytes {
            Some(Problem::RecordTooLarge { index, bytes })
        } else if !times.contains(&r.event_time_ms) {
            Some(Problem::EventTimeOutOfRange {
                index,
                event_time_ms: r.event_time_ms,
            })
        } else {
            None
        }
    })
}

/// The `IngestResponse` of `count` records appended from `first_offset` to the stream
/// whose record ids start with `tag` (ids: `tag` then the big-endian offset).
pub fn response_bytes(tag: [u8; 8], first_offset: u64, count: u64, replayed: bool) -> Vec<u8> {
    let record_ids = (first_offset..first_offset.saturating_add(count))
        .map(|offset| {
            let mut id = Vec::with_capacity(16);
            id.extend_from_slice(&tag);
            id.extend_from_slice(&offset.to_be_bytes());
            Bytes::from(id)
        })
        .collect();
    IngestResponse {
        record_ids,
        first_offset,
        replayed,
    }
    .encode_to_vec()
}

/// The `IngestRequest` bytes of `batch`, as protobuf writes them.
pub fn request_bytes(stream: &str, idempotency_key: &str, batch: &RecordBatch) -> Vec<u8> {
    IngestRequest {
        stream: stream.to_owned(),
        idempotency_key: idempotency_key.to_owned(),
        records: batch
            .records()
            .iter()
            .map(|r| IngestRecord {
                key: r.key.clone(),
                value: r.value.clone(),
                event_time_ms: r.event_time_ms,
            })
            .collect(),
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_records: 3,
        max_record_bytes: 8,
        max_idempotency_key_bytes: 4,
        min_event_time_ms: -10,
        max_event_time_ms: 10,
    };

    fn record(key: &'static [u8], value: &'static [u8], ts: i64) -> Record {
        Record {
            key: Bytes::from_static(key),
            value: Bytes::from_static(value),
            event_time_ms: ts,
        }
    }

    #[test]
    fn request_round_trip_slices_the_input() {
        let batch: RecordBatch = [record(b"k", b"v", 1), record(b"", b"", -3)]
            .into_iter()
            .collect();
        let raw = Bytes::from(request_bytes("s", "ik", &batch));
        let decoded = decode_request(raw.clone(), &LIMITS).unwrap();
        assert_eq!(decoded.stream, "s");
        assert_eq!(decoded.idempotency_key, "ik");
        assert_eq!(decoded.batch, batch);
        assert_eq!(decoded.problem, None);
        let key = &decoded.batch.records()[0].key;
        let inside = raw.as_ptr() as usize..raw.as_ptr() as usize + raw.len();
        assert!(inside.contains(&(key.as_ptr() as usize)));
    }

    #[test]
    fn problems_come_in_the_service_order() {
        let check = |records: Vec<Record>, key: usize| {
            problem_of(&records.into_iter().collect(), key, &LIMITS)
        };
        assert_eq!(check(vec![], 9), Some(Problem::NoRecords));
        let four = vec![record(b"k", b"v", 0); 4];
        assert_eq!(check(four, 9), Some(Problem::TooManyRecords { count: 4 }));
        let one = vec![record(b"k", b"v", 0)];
        assert_eq!(
            check(one, 5),
            Some(Problem::IdempotencyKeyTooLong { bytes: 5 })
        );
        let big = vec![record(b"k", b"v", 99), record(b"kkkk", b"vvvvv", 0)];
        assert_eq!(
            check(big, 0),
            Some(Problem::EventTimeOutOfRange {
                index: 0,
                event_time_ms: 99
            })
        );
        let big = vec![record(b"k", b"v", 1), record(b"kkkk", b"vvvvv", 99)];
        assert_eq!(
            check(big, 0),
            Some(Problem::RecordTooLarge { index: 1, bytes: 9 })
        );
    }

    #[test]
    fn garbage_is_undecodable() {
        assert!(decode_request(Bytes::from_static(b"\xff\xff"), &LIMITS).is_err());
        // field 1 (stream) with bytes that are not UTF-8
        assert!(decode_request(Bytes::from_static(b"\x0a\x01\xff"), &LIMITS).is_err());
    }

    #[test]
    fn response_ids_are_tag_and_offset() {
        let bytes = response_bytes(*b"TAGTAGTA", 5, 2, true);
        let response = IngestResponse::decode(bytes.as_slice()).unwrap();
        assert_eq!(response.first_offset, 5);
        assert!(response.replayed);
        assert_eq!(response.record_ids.len(), 2);
        assert_eq!(&response.record_ids[1][..8], b"TAGTAGTA");
        assert_eq!(&response.record_ids[1][8..], &6u64.to_be_bytes());
    }
}
