//! `ingest::decode_request` on any bytes: never panics, and a request it decodes
//! re-encodes (`ingest::request_bytes`) to bytes that decode to the same request.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use millrace_core::ingest::{self, Limits};

const LIMITS: Limits = Limits {
    max_records: 10_000,
    max_record_bytes: 4 << 20,
    max_idempotency_key_bytes: 256,
    min_event_time_ms: -62_135_596_800_000,
    max_event_time_ms: 253_402_300_799_999,
};

fuzz_target!(|data: &[u8]| {
    let Ok(decoded) = ingest::decode_request(Bytes::copy_from_slice(data), &LIMITS) else {
        return;
    };
    assert_eq!(
        decoded.problem,
        ingest::problem_of(&decoded.batch, decoded.idempotency_key.len(), &LIMITS)
    );
    let again = ingest::request_bytes(&decoded.stream, &decoded.idempotency_key, &decoded.batch);
    let redecoded = ingest::decode_request(Bytes::from(again.clone()), &LIMITS)
        .expect("a re-encoded request decodes");
    assert_eq!(redecoded.stream, decoded.stream);
    assert_eq!(redecoded.idempotency_key, decoded.idempotency_key);
    assert_eq!(redecoded.batch, decoded.batch);
    assert_eq!(redecoded.problem, decoded.problem);
    let third = ingest::request_bytes(
        &redecoded.stream,
        &redecoded.idempotency_key,
        &redecoded.batch,
    );
    assert_eq!(third, again);
});
