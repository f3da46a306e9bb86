//! The core on bytes nobody checked: arbitrary bytes and damaged valid encodings.
//!
//! - `ingest::decode_request` never panics, and what it decodes re-encodes (with
//!   `ingest::request_bytes`) to bytes that decode to the same request.
//! - `json_lines::parse_line` never panics, and a record it returns is within the limits
//!   and is what the line, read as a JSON object, says.
//! - `log_format::encode_request` writes entries that a small parser written here (from
//!   `docs/log-format.md`, not from the encoder) reads back to the same records.

use bytes::Bytes;
use millrace_core::ingest::{self, Limits};
use millrace_core::json_lines::{self, LineLimits};
use millrace_core::log_format::{self, Placement};
use millrace_core::{Record, RecordBatch};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

const MIN_EVENT_TIME_MS: i64 = -62_135_596_800_000;
const MAX_EVENT_TIME_MS: i64 = 253_402_300_799_999;

/// Tight enough that decoded requests run into every problem.
const LIMITS: Limits = Limits {
    max_records: 4,
    max_record_bytes: 200,
    max_idempotency_key_bytes: 8,
    min_event_time_ms: MIN_EVENT_TIME_MS,
    max_event_time_ms: MAX_EVENT_TIME_MS,
};

// ---------------------------------------------------------------------------------------
// Byte-level damage.

#[derive(Clone, Debug)]
enum Mutation {
    Flip { at: usize, bit: u8 },
    Set { at: usize, byte: u8 },
    Insert { at: usize, bytes: Vec<u8> },
    Remove { at: usize, len: usize },
    Duplicate { at: usize, len: usize },
    Truncate { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), any::<u8>()).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        2 => (any::<usize>(), vec(any::<u8>(), 1..4))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        2 => (any::<usize>(), 1usize..4).prop_map(|(at, len)| Mutation::Remove { at, len }),
        1 => (any::<usize>(), 1usize..12).prop_map(|(at, len)| Mutation::Duplicate { at, len }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let n = bytes.len();
        match m {
            Mutation::Flip { at, bit } if n > 0 => bytes[at % n] ^= 1 << (bit % 8),
            Mutation::Set { at, byte } if n > 0 => bytes[at % n] = *byte,
            Mutation::Insert { at, bytes: new } => {
                let i = at % (n + 1);
                bytes.splice(i..i, new.iter().copied());
            }
            Mutation::Remove { at, len } if n > 0 => {
                let i = at % n;
                bytes.drain(i..(i + len).min(n));
            }
            Mutation::Duplicate { at, len } if n > 0 => {
                let i = at % n;
                let piece = bytes[i..(i + len).min(n)].to_vec();
                bytes.splice(i..i, piece);
            }
            Mutation::Truncate { at } => bytes.truncate(at % (n + 1)),
            _ => {}
        }
    }
    bytes
}

// ---------------------------------------------------------------------------------------
// Records.

/// Lengths at the edges of one- and two-byte varints, and a few small ones.
fn blob() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        3 => vec(any::<u8>(), 0..4),
        1 => select(vec![0usize, 1, 127, 128, 129, 255, 16_383, 16_384])
            .prop_flat_map(|n| vec(any::<u8>(), n..=n)),
    ]
    .prop_map(Bytes::from)
}

fn event_time() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        -200i64..200,
        select(vec![
            0,
            -1,
            127,
            128,
            i64::MIN,
            i64::MAX,
            MIN_EVENT_TIME_MS,
            MAX_EVENT_TIME_MS,
            MIN_EVENT_TIME_MS - 1,
            MAX_EVENT_TIME_MS + 1,
            1_700_000_000_000,
        ]),
    ]
}

fn batch(max_records: usize) -> impl Strategy<Value = RecordBatch> {
    vec(
        (blob(), blob(), event_time()).prop_map(|(key, value, event_time_ms)| Record {
            key,
            value,
            event_time_ms,
        }),
        0..max_records,
    )
    .prop_map(|records| records.into_iter().collect())
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{0,6}", "\\PC{0,6}", "\\PC{129,140}"]
}

// ---------------------------------------------------------------------------------------
// decode_request

/// Decodes `raw` (must not panic); when it decodes, the request re-encodes to bytes that
/// decode to the same request, and re-encoding those gives the same bytes again.
fn decodes_consistently(raw: &[u8]) -> Result<(), TestCaseError> {
    let Ok(decoded) = ingest::decode_request(Bytes::copy_from_slice(raw), &LIMITS) else {
        return Ok(());
    };
    prop_assert_eq!(
        &decoded.problem,
        &ingest::problem_of(&decoded.batch, decoded.idempotency_key.len(), &LIMITS)
    );
    let again = ingest::request_bytes(&decoded.stream, &decoded.idempotency_key, &decoded.batch);
    let redecoded = ingest::decode_request(Bytes::from(again.clone()), &LIMITS)
        .map_err(|e| TestCaseError::fail(format!("re-encoded request undecodable: {e:?}")))?;
    prop_assert_eq!(&redecoded.stream, &decoded.stream);
    prop_assert_eq!(&redecoded.idempotency_key, &decoded.idempotency_key);
    prop_assert_eq!(&redecoded.batch, &decoded.batch);
    prop_assert_eq!(&redecoded.problem, &decoded.problem);
    let third = ingest::request_bytes(
        &redecoded.stream,
        &redecoded.idempotency_key,
        &redecoded.batch,
    );
    prop_assert_eq!(third, again);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_bytes_decode_or_are_refused(raw in vec(any::<u8>(), 0..256)) {
        decodes_consistently(&raw)?;
    }

    /// Bytes that look like protobuf: a tag-ish byte then a length or varint.
    #[test]
    fn protobuf_shaped_bytes_decode_or_are_refused(
        pieces in vec(
            (
                select(vec![0x0au8, 0x12, 0x1a, 0x08, 0x10, 0x18, 0x22, 0x0b, 0x0c, 0x1b,
                            0x1c, 0x0d, 0x09, 0x0e, 0x0f, 0x00, 0x80, 0xff]),
                vec(any::<u8>(), 0..6),
            ),
            0..12,
        )
    ) {
        let raw: Vec<u8> = pieces
            .into_iter()
            .flat_map(|(tag, rest)| std::iter::once(tag).chain(rest))
            .collect();
        decodes_consistently(&raw)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn valid_requests_round_trip(
        stream in name(),
        key in name(),
        batch in batch(6),
    ) {
        let raw = ingest::request_bytes(&stream, &key, &batch);
        let decoded = ingest::decode_request(Bytes::from(raw.clone()), &LIMITS)
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(&decoded.stream, &stream);
        prop_assert_eq!(&decoded.idempotency_key, &key);
        prop_assert_eq!(&decoded.batch, &batch);
        prop_assert_eq!(
            ingest::request_bytes(&decoded.stream, &decoded.idempotency_key, &decoded.batch),
            raw
        );
    }

    #[test]
    fn damaged_requests_decode_or_are_refused(
        stream in name(),
        key in name(),
        batch in batch(6),
        mutations in vec(mutation(), 1..5),
    ) {
        let raw = mutate(ingest::request_bytes(&stream, &key, &batch), &mutations);
        decodes_consistently(&raw)?;
    }
}

#[test]
fn deeply_nested_unknown_groups_are_refused_or_decoded_without_panicking() {
    // An unknown field 4 as a group, nested `depth` times.
    for depth in [1usize, 50, 99, 100, 101, 200, 10_000] {
        let mut raw = vec![0x23; depth]; // field 4, start group
        raw.extend(std::iter::repeat_n(0x24, depth)); // field 4, end group
        decodes_consistently(&raw).unwrap();
        let mut open = vec![0x23; depth];
        open.push(0x0a);
        assert!(ingest::decode_request(Bytes::from(open), &LIMITS).is_err());
    }
}

// ---------------------------------------------------------------------------------------
// json_lines::parse_line

fn line_limits() -> impl Strategy<Value = LineLimits> {
    prop_oneof![
        Just(LineLimits {
            min_event_time_ms: MIN_EVENT_TIME_MS,
            max_event_time_ms: MAX_EVENT_TIME_MS,
            max_record_bytes: 4 << 20,
        }),
        (-300i64..300, 0i64..600, 0usize..40).prop_map(|(low, span, max_record_bytes)| {
            LineLimits {
                min_event_time_ms: low,
                max_event_time_ms: low + span,
                max_record_bytes,
            }
        }),
    ]
}

/// A JSON string literal of `s`, each character raw or `\u` escaped (as a pair beyond
/// the BMP), or one lone surrogate escape when `lone` says so.
fn json_string() -> impl Strategy<Value = String> {
    (
        vec((any::<char>(), 0u8..4), 0..8),
        prop::option::weighted(0.1, 0xd800u32..0xe000),
    )
        .prop_map(|(chars, lone)| {
            let mut out = String::from("\"");
            for (c, how) in chars {
                match (c, how) {
                    ('"', _) => out.push_str("\\\""),
                    ('\\', _) => out.push_str("\\\\"),
                    ('/', 0) => out.push_str("\\/"),
                    (c, _) if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    (c, 0) => {
                        let mut units = [0u16; 2];
                        for unit in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{unit:04X}"));
                        }
                    }
                    (c, _) => out.push(c),
                }
            }
            if let Some(unit) = lone {
                out.push_str(&format!("\\u{unit:04x}"));
            }
            out.push('"');
            out
        })
}

fn json_number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        (-300i64..900).prop_map(|n| n.to_string()),
        select(vec![
            "-0",
            "0",
            "-0.0",
            "1.0",
            "1e2",
            "1E+2",
            "-1e-2",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "123456789012345678901234567890",
            "NaN",
            "Infinity",
            "-Infinity",
        ])
        .prop_map(String::from),
    ]
}

fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        3 => json_string(),
        3 => json_number(),
        1 => select(vec!["true", "false", "null"]).prop_map(String::from),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(|items| format!("[{}]", items.join(","))),
            vec((json_string(), inner), 0..3).prop_map(|fields| {
                let fields: Vec<String> = fields
                    .into_iter()
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect();
                format!("{{{}}}", fields.join(","))
            }),
        ]
    })
}

/// A key or value: mostly a string or an integer, sometimes anything.
fn json_field() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => json_string(),
        2 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => json_number(),
        1 => json_value(),
    ]
}

/// An extra field's name: mostly an ignored one, sometimes one of the three again.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => select(vec!["\"x\"", "\"Key\"", "\"keys\"", "\"\"", "\"\\ud800\""]),
        1 => select(vec!["\"key\"", "\"value\"", "\"ts\"", "\"k\\u0065y\"", "\"t\\u0073\""]),
    ]
    .prop_map(String::from)
}

/// A JSON line with key, value and ts (and sometimes more, or a field twice).
fn json_line() -> impl Strategy<Value = Vec<u8>> {
    let ws = || select(vec!["", " ", "  ", "\t", "\r", "\n", " \r\n"]);
    (
        json_field(),
        json_field(),
        prop_oneof![
            4 => (-300i64..600).prop_map(|t| t.to_string()),
            2 => event_time().prop_map(|t| t.to_string()),
            1 => json_number(),
            1 => json_value(),
        ],
        vec((field_name(), json_value()), 0..3),
        ws(),
        ws(),
        ws(),
    )
        .prop_flat_map(|(key, value, ts, extra, a, b, c)| {
            let mut fields = vec![
                ("\"key\"".to_owned(), key),
                ("\"value\"".to_owned(), value),
                ("\"ts\"".to_owned(), ts),
            ];
            fields.extend(extra);
            (Just(fields).prop_shuffle(), Just((a, b, c)))
        })
        .prop_map(|(fields, (a, b, c))| {
            let fields: Vec<String> = fields
                .into_iter()
                .map(|(k, v)| format!("{b}{k}{b}:{c}{v}{b}"))
                .collect();
            format!("{a}{{{}}}{c}", fields.join(",")).into_bytes()
        })
}

/// What a line accepted by `parse_line` must be: within the limits, and a JSON object
/// whose `ts` is an integer in range and whose key and value are strings (their UTF-8)
/// or integers (their text).
fn accepted_consistently(line: &[u8], limits: &LineLimits) -> Result<(), TestCaseError> {
    let Some(record) = json_lines::parse_line(line, limits) else {
        return Ok(());
    };
    prop_assert!(record.key.len() + record.value.len() <= limits.max_record_bytes);
    prop_assert!(
        (limits.min_event_time_ms..=limits.max_event_time_ms).contains(&record.event_time_ms)
    );
    let text = std::str::from_utf8(line).map_err(|e| TestCaseError::fail(e.to_string()))?;
    // serde_json's `Value` refuses lone surrogate escapes (`"\ud800"`) in ignored fields,
    // which Python's `json` (and so the reference) reads: no oracle for those lines here
    // (tests/native/test_json_lines_differential.py compares them with the reference).
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(());
    };
    let Some(object) = value.as_object() else {
        return Err(TestCaseError::fail(format!(
            "accepted a non-object: {value}"
        )));
    };
    let as_bytes = |field: &str| -> Option<Vec<u8>> {
        match object.get(field)? {
            serde_json::Value::String(s) => Some(s.as_bytes().to_vec()),
            serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => {
                Some(n.to_string().into_bytes())
            }
            _ => None,
        }
    };
    prop_assert_eq!(as_bytes("key"), Some(record.key.to_vec()));
    prop_assert_eq!(as_bytes("value"), Some(record.value.to_vec()));
    prop_assert_eq!(
        object.get("ts").and_then(serde_json::Value::as_i64),
        Some(record.event_time_ms)
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_bytes_as_a_line(line in vec(any::<u8>(), 0..96), limits in line_limits()) {
        accepted_consistently(&line, &limits)?;
    }

    #[test]
    fn json_lines_are_read_within_limits(line in json_line(), limits in line_limits()) {
        accepted_consistently(&line, &limits)?;
    }

    #[test]
    fn damaged_json_lines_are_read_within_limits(
        line in json_line(),
        mutations in vec(mutation(), 1..4),
        limits in line_limits(),
    ) {
        accepted_consistently(&mutate(line, &mutations), &limits)?;
    }

    /// The plain lines of the standard workload are all taken.
    #[test]
    fn plain_lines_are_taken(
        user in 0u32..1_000_000,
        value in any::<i64>(),
        ts in MIN_EVENT_TIME_MS..=MAX_EVENT_TIME_MS,
    ) {
        let line = format!(r#"{{"key": "u{user}", "value": {value}, "ts": {ts}}}"#);
        let limits = LineLimits {
            min_event_time_ms: MIN_EVENT_TIME_MS,
            max_event_time_ms: MAX_EVENT_TIME_MS,
            max_record_bytes: 4 << 20,
        };
        let record = json_lines::parse_line(line.as_bytes(), &limits);
        prop_assert_eq!(
            record,
            Some(Record {
                key: Bytes::from(format!("u{user}")),
                value: Bytes::from(value.to_string()),
                event_time_ms: ts,
            })
        );
    }
}

#[test]
fn records_at_the_size_limit() {
    let limits = LineLimits {
        min_event_time_ms: 0,
        max_event_time_ms: 10,
        max_record_bytes: 10,
    };
    let line = |key: &str, value: &str| format!(r#"{{"key": {key}, "value": {value}, "ts": 1}}"#);
    assert!(json_lines::parse_line(line("\"12345\"", "12345").as_bytes(), &limits).is_some());
    assert!(json_lines::parse_line(line("\"12345\"", "123456").as_bytes(), &limits).is_none());
    // The limit counts UTF-8 bytes, not escapes nor characters.
    assert!(json_lines::parse_line(line("\"\\u00e9\"", "12345678").as_bytes(), &limits).is_some());
    assert!(json_lines::parse_line(line("\"é\"", "123456789").as_bytes(), &limits).is_none());
}

/// serde's derived struct visitor also accepts a JSON array of the fields in declaration
/// order; the reference (`injector/json_lines.py`, `parse_line`) refuses it ("expected a
/// JSON object, got list"), so the native reader must leave it to the reference.
#[test]
fn a_json_array_is_not_a_line() {
    let limits = LineLimits {
        min_event_time_ms: 0,
        max_event_time_ms: 10,
        max_record_bytes: 10,
    };
    assert_eq!(json_lines::parse_line(br#"["u1", 7, 5]"#, &limits), None);
}

// ---------------------------------------------------------------------------------------
// log_format::encode_request

#[derive(Debug, PartialEq, Eq)]
enum Entry {
    Record {
        offset: u64,
        event_ms: i64,
        ingest_ms: i64,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Commit {
        first_offset: u64,
        count: u32,
        idempotency_key: Vec<u8>,
        source: Vec<u8>,
        commit_ms: i64,
    },
}

/// A cursor over a body; every read checks the bounds.
struct Body<'a>(&'a [u8]);

impl<'a> Body<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        assert!(self.0.len() >= n, "body ends early");
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        self.take(N).try_into().unwrap()
    }
}

/// `(file position, entry)` of every entry of `bytes`, written from `position` on.
fn parse_entries(bytes: &[u8], position: u64) -> Vec<(u64, Entry)> {
    let mut entries = vec![];
    let mut cursor = 0;
    while cursor < bytes.len() {
        let mut prefix = Body(&bytes[cursor..]);
        let len = u32::from_be_bytes(prefix.array()) as usize;
        let crc = u32::from_be_bytes(prefix.array());
        let mut body = Body(prefix.take(len));
        assert_eq!(crc, crc32fast::hash(body.0), "crc of the entry at {cursor}");
        let entry = match body.array::<1>()[0] {
            1 => {
                let offset = u64::from_be_bytes(body.array());
                let event_ms = i64::from_be_bytes(body.array());
                let ingest_ms = i64::from_be_bytes(body.array());
                let key_len = u32::from_be_bytes(body.array()) as usize;
                let key = body.take(key_len).to_vec();
                let value = body.take(body.0.len()).to_vec();
                Entry::Record {
                    offset,
                    event_ms,
                    ingest_ms,
                    key,
                    value,
                }
            }
            2 => {
                let first_offset = u64::from_be_bytes(body.array());
                let count = u32::from_be_bytes(body.array());
                let key_len = u16::from_be_bytes(body.array()) as usize;
                let idempotency_key = body.take(key_len).to_vec();
                let source_len = u32::from_be_bytes(body.array()) as usize;
                let source = body.take(source_len).to_vec();
                let commit_ms = i64::from_be_bytes(body.array());
                assert!(body.0.is_empty(), "bytes after the COMMIT's fields");
                Entry::Commit {
                    first_offset,
                    count,
                    idempotency_key,
                    source,
                    commit_ms,
                }
            }
            kind => panic!("unknown entry type {kind}"),
        };
        entries.push((position + cursor as u64, entry));
        cursor += 8 + len;
    }
    entries
}

fn placement() -> impl Strategy<Value = Placement> {
    (
        prop_oneof![0u64..100, 0u64..(u64::MAX / 2)],
        any::<i64>(),
        prop_oneof![0u64..100, 0u64..(u64::MAX / 2)],
        0u64..20,
        0u64..5,
    )
        .prop_map(
            |(offset, ingest_ms, position, ahead, index_every)| Placement {
                offset,
                ingest_ms,
                position,
                next_index: offset + ahead,
                index_every,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn log_entries_parse_back_to_the_request(
        batch in batch(12),
        idempotency_key in prop_oneof![
            4 => vec(any::<u8>(), 0..20),
            1 => select(vec![65_535usize, 65_536]).prop_flat_map(|n| vec(any::<u8>(), n..=n)),
        ],
        source in vec(any::<u8>(), 0..40),
        at in placement(),
    ) {
        let encoded = match log_format::encode_request(&batch, &idempotency_key, &source, at) {
            Ok(encoded) => encoded,
            Err(error) => {
                prop_assert!(idempotency_key.len() > 65_535, "{}", error);
                prop_assert_eq!(
                    error,
                    log_format::EncodeError::IdempotencyKeyTooLong(idempotency_key.len())
                );
                return Ok(());
            }
        };
        let entries = parse_entries(&encoded.bytes, at.position);
        prop_assert_eq!(entries.len(), batch.len() + 1);
        for (i, ((_, entry), record)) in entries.iter().zip(batch.records()).enumerate() {
            let expected = Entry::Record {
                offset: at.offset + i as u64,
                event_ms: record.event_time_ms,
                ingest_ms: at.ingest_ms,
                key: record.key.to_vec(),
                value: record.value.to_vec(),
            };
            prop_assert_eq!(entry, &expected);
        }
        let commit = Entry::Commit {
            first_offset: at.offset,
            count: batch.len() as u32,
            idempotency_key: idempotency_key.clone(),
            source: source.clone(),
            commit_ms: at.ingest_ms,
        };
        prop_assert_eq!(&entries[batch.len()].1, &commit);
        prop_assert_eq!(encoded.position, at.position + encoded.bytes.len() as u64);
        prop_assert_eq!(encoded.time_range, batch.time_range());

        // The index: from `next_index` (when it falls on one of the records) every
        // `index_every` offsets (at least 1), at the position of that record's entry.
        let every = at.index_every.max(1);
        let end = at.offset + batch.len() as u64;
        let wanted: Vec<u64> = if (at.offset..end).contains(&at.next_index) {
            (at.next_index..end).step_by(every as usize).collect()
        } else {
            vec![]
        };
        let index: Vec<(u64, u64)> = wanted
            .iter()
            .map(|&offset| (offset, entries[(offset - at.offset) as usize].0))
            .collect();
        prop_assert_eq!(&encoded.index, &index);
        let next = wanted.last().map_or(at.next_index, |last| last + every);
        prop_assert_eq!(encoded.next_index, next);
    }
}
