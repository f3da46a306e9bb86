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
    let key = field_bytes(parsed.key)?;
    let value = field_bytes(parsed.value)?;
    if key.len() + value.len() > limits.max_record_bytes {
        return None;
    }
    Some(Record {
        key,
        value,
        event_time_ms,
    })
}

/// A string's UTF-8, or an integer's decimal text (what `json.dumps` writes for one).
fn field_bytes(raw: &RawValue) -> Option<Bytes> {
    json_keys::plain_bytes(raw).map(Bytes::from)
}

/// The records of `lines`, and the positions (in `lines`) of the lines left to the
/// reference reading (their records are not in the batch).
pub fn parse_lines<'a>(
    lines: impl IntoIterator<Item = &'a [u8]>,
    limits: &LineLimits,
) -> (RecordBatch, Vec<usize>) {
    let mut batch = RecordBatch::default();
    let mut others = Vec::new();
    for (at, line) in lines.into_iter().enumerate() {
        match parse_line(line, limits) {
            Some(record) => batch.push(record),
            None => others.push(at),
        }
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
}
