//! JSON lines `{"key": ..., "value": ..., "event_time_ms": <ms>}` (or the older name
//! `ts` for the event time) as records: the fast path of `millrace inject` and the
//! file source.
//!
//! The meaning is defined in Python (`injector/json_lines.py`, `parse_line`): `key`
//! and `value` become bytes (a string its UTF-8, any other JSON value its text as
//! Python's `json.dumps` writes it), the event time must be integer milliseconds in
//! the accepted range, other fields are ignored. This module takes the lines whose
//! reading is plain (an object whose key and value are strings or integers and whose
//! one event time is an integer in range, no field twice) and leaves every other line
//! (blank, malformed, floats, nested values, duplicate fields, both time names...) to
//! that reference, which words the errors. So the two together read every line exactly
//! as the reference alone does.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::batch::{Record, RecordBatch};
use crate::json_keys;

/// The accepted event times and the largest key plus value of one line's record.
#[derive(Clone, Copy, Debug)]
pub struct LineLimits {
    pub min_event_time_ms: i64,
    pub max_event_time_ms: i64,
    pub max_record_bytes: usize,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    key: &'a RawValue,
    #[serde(borrow)]
    value: &'a RawValue,
    // Raw, so that a field present but null counts as present (the reference refuses
    // a line with both names, whatever their values).
    #[serde(default, borrow, deserialize_with = "present")]
    event_time_ms: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    ts: Option<&'a RawValue>,
}

/// A field that is there, whatever its value (serde reads a null `Option` as absent).
fn present<'de, D: serde::Deserializer<'de>>(field: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(field).map(Some)
}

/// The record of one line when its reading is plain; None leaves it to the reference.
pub fn parse_line(line: &[u8], limits: &LineLimits) -> Option<Record> {
    let mut arena = Vec::new();
    let read = read_line(line, limits, &mut arena)?;
    Some(read.record(&Bytes::from(arena)))
}

/// Where one line's key and value went in the batch's buffer, and its event time.
struct Read {
    key_at: usize,
    value_at: usize,
    end: usize,
    event_time_ms: i64,
}

impl Read {
    fn record(&self, arena: &Bytes) -> Record {
        Record {
            key: arena.slice(self.key_at..self.value_at),
            value: arena.slice(self.value_at..self.end),
            event_time_ms: self.event_time_ms,
        }
    }
}

/// One line read as [`parse_line`] reads it, its key then its value appended to
/// `arena` (nothing left there when None).
fn read_line(line: &[u8], limits: &LineLimits, arena: &mut Vec<u8>) -> Option<Read> {
    // The whole line must be UTF-8, the ignored fields too (serde_json skips those
    // without checking): the reference decodes the line before it parses it.
    let text = std::str::from_utf8(line).ok()?;
    // Only an object is a line (serde's derive would also take an array of the fields).
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return None;
    }
    let parsed: Line<'_> = serde_json::from_str(text).ok()?;
    let event_time_ms: i64 = match (parsed.event_time_ms, parsed.ts) {
        (Some(time), None) | (None, Some(time)) => serde_json::from_str(time.get()).ok()?,
        _ => return None, // neither or both: the reference says which
    };
    if !(limits.min_event_time_ms..=limits.max_event_time_ms).contains(&event_time_ms) {
        return None;
    }
    let key_at = arena.len();
    let read = (|| {
        json_keys::plain_bytes_into(parsed.key, arena)?;
        let value_at = arena.len();
        json_keys::plain_bytes_into(parsed.value, arena)?;
        (arena.len() - key_at <= limits.max_record_bytes).then_some(value_at)
    })();
    match read {
        Some(value_at) => Some(Read {
            key_at,
            value_at,
            end: arena.len(),
            event_time_ms,
        }),
        None => {
            arena.truncate(key_at);
            None
        }
    }
}

/// The records of `lines`, and the positions (in `lines`) of the lines left to the
/// reference reading (their records are not in the batch). The records' keys and
/// values are slices of one buffer: no allocation per record.
pub fn parse_lines<'a>(
    lines: impl IntoIterator<Item = &'a [u8]>,
    limits: &LineLimits,
) -> (RecordBatch, Vec<usize>) {
    let mut arena = Vec::new();
    let mut reads = Vec::new();
    let mut others = Vec::new();
    for (at, line) in lines.into_iter().enumerate() {
        match read_line(line, limits, &mut arena) {
            Some(read) => reads.push(read),
            None => others.push(at),
        }
    }
    let arena = Bytes::from(arena);
    let mut batch = RecordBatch::with_capacity(reads.len());
    for read in &reads {
        batch.push(read.record(&arena));
    }
    (batch, others)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: LineLimits = LineLimits {
        min_event_time_ms: -100,
        max_event_time_ms: 1_000_000,
        max_record_bytes: 20,
    };

    fn plain(line: &str) -> Option<(Vec<u8>, Vec<u8>, i64)> {
        parse_line(line.as_bytes(), &LIMITS)
            .map(|r| (r.key.to_vec(), r.value.to_vec(), r.event_time_ms))
    }

    #[test]
    fn plain_lines_are_read() {
        assert_eq!(
            plain(r#"{"key": "u1", "value": 7, "ts": 5}"#),
            Some((b"u1".to_vec(), b"7".to_vec(), 5))
        );
        assert_eq!(
            plain("{\"ts\": 0, \"value\": \"\\u00e9\\n\", \"key\": -3, \"x\": [1, {}]}\r"),
            Some((b"-3".to_vec(), "é\n".as_bytes().to_vec(), 0))
        );
        assert_eq!(
            plain(r#"{"key": 18446744073709551615, "value": "", "ts": 1}"#),
            Some((b"18446744073709551615".to_vec(), vec![], 1))
        );
        assert_eq!(
            plain(r#"{"key": "u1", "value": 7, "event_time_ms": 5}"#),
            Some((b"u1".to_vec(), b"7".to_vec(), 5))
        );
    }

    #[test]
    fn everything_else_goes_to_the_reference() {
        for line in [
            "",
            "   ",
            "[]",
            r#"{"key": "a", "value": 1.5, "ts": 1}"#,
            r#"{"key": "a", "value": 1e2, "ts": 1}"#,
            r#"{"key": true, "value": 1, "ts": 1}"#,
            r#"{"key": "a", "value": {"b": 1}, "ts": 1}"#,
            r#"{"key": "a", "value": 1, "ts": 1.0}"#,
            r#"{"key": "a", "value": 1, "ts": 1000001}"#,
            r#"{"key": "a", "value": 1, "ts": 9223372036854775808}"#,
            r#"{"key": "a", "key": "b", "value": 1, "ts": 1}"#,
            r#"{"key": "\ud800", "value": 1, "ts": 1}"#,
            r#"{"key": "a", "value": 1}"#,
            r#"{"key": -0, "value": 1, "ts": 1}"#,
            r#"{"key": "a", "value": 1, "ts": -0}"#,
            r#"{"key": "0123456789", "value": "01234567890", "ts": 1}"#,
            r#"{"key": 123456789012345678901, "value": 1, "ts": 1}"#,
            "{\"key\": \"a\", \"value\": 1, \"ts\": 1} x",
            "\u{feff}{\"key\": \"a\", \"value\": 1, \"ts\": 1}",
            r#"{"key": "a", "value": 1, "ts": 1, "event_time_ms": 1}"#,
            r#"{"key": "a", "value": 1, "event_time_ms": null}"#,
            r#"{"key": "a", "value": 1, "ts": null, "event_time_ms": 1}"#,
            r#"{"key": "a", "value": 1, "event_time_ms": 1, "event_time_ms": 2}"#,
        ] {
            assert_eq!(plain(line), None, "{line}");
        }
        assert_eq!(
            parse_line(b"{\"key\": \"\xff\", \"value\": 1, \"ts\": 1}", &LIMITS),
            None
        );
        // An ignored field that is not UTF-8: the reference refuses the whole line.
        let ignored = b"{\"key\": \"a\", \"value\": 1, \"ts\": 1, \"x\": \"\xff\"}";
        assert_eq!(parse_line(ignored, &LIMITS), None);
    }

    #[test]
    fn lines_left_to_the_reference_are_named_by_position() {
        let lines: [&[u8]; 3] = [br#"{"key": "a", "value": 1, "ts": 1}"#, b"nope", b""];
        let (batch, others) = parse_lines(lines, &LIMITS);
        assert_eq!(batch.len(), 1);
        assert_eq!(others, [1, 2]);
    }
    #[test]
    fn a_batch_reads_each_line_as_alone_whatever_was_left_before_it() {
        let lines: [&[u8]; 5] = [
            br#"{"key": "a", "value": 1, "ts": 1}"#,
            br#"{"key": "bb", "value": 1.5, "ts": 2}"#, // key read, value refused
            br#"{"key": "ccc", "value": "0123456789012345678", "ts": 3}"#, // too big
            br#"{"key": "d", "value": "\u00e9", "ts": 4}"#,
            b"not json",
        ];
        let (batch, others) = parse_lines(lines, &LIMITS);
        assert_eq!(others, [1, 2, 4]);
        let alone: Vec<Record> = [0, 3]
            .iter()
            .map(|&i| parse_line(lines[i], &LIMITS).unwrap())
            .collect();
        assert_eq!(batch.records(), &alone[..]);
        assert_eq!(&batch.records()[1].key[..], b"d");
    }
}
