//! `json:FIELD` keys: the key of a record whose value is a JSON object is its field
//! `FIELD`, a string as its UTF-8 and an integer as its decimal text (what Python's
//! `json.dumps` writes for one).
//!
//! The meaning is defined in Python (`computations/_keys.py`, `_JsonField`). This
//! module reads the values whose reading is plain (UTF-8, an object with the field once,
//! a string or an integer) and leaves every other one (not JSON, the field missing or
//! twice, a float, a nested value, a lone surrogate...) to that reference, which says
//! what is wrong. So the two together key every value as the reference alone does.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// The key of one value when its reading is plain; None leaves it to the reference.
pub fn field_key(value: &[u8], field: &str) -> Option<Vec<u8>> {
    // The whole value must be UTF-8 (serde_json skips the other fields unchecked).
    let text = std::str::from_utf8(value).ok()?;
    if too_deep(value) {
        return None;
    }
    let mut reader = serde_json::Deserializer::from_str(text);
    let found = Field { name: field }.deserialize(&mut reader).ok()??;
    reader.end().ok()?;
    plain_bytes(found)
}

/// Deeper than the reference reads: Python's parser gives up (RecursionError) at
/// around a thousand levels, where serde_json skips the other fields at any depth.
const MAX_DEPTH: usize = 64;

/// Whether arrays and objects nest deeper than [`MAX_DEPTH`] (brackets in strings
/// aside): such a value goes to the reference.
fn too_deep(value: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in value {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// The keys of a batch's values: each one's, or None where the reference decides.
pub fn field_keys<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    field: &str,
) -> Vec<Option<Vec<u8>>> {
    values.into_iter().map(|v| field_key(v, field)).collect()
}

/// A string's UTF-8, or an integer's decimal text (what `json.dumps` writes for one);
/// None for any other JSON value.
pub(crate) fn plain_bytes(raw: &RawValue) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    plain_bytes_into(raw, &mut out)?;
    Some(out)
}

/// [`plain_bytes`] appended to `out` (nothing appended when None).
pub(crate) fn plain_bytes_into(raw: &RawValue, out: &mut Vec<u8>) -> Option<()> {
    let text = raw.get();
    match text.as_bytes().first()? {
        b'"' => {
            let s: Cow<'_, str> = serde_json::from_str(text).ok()?;
            out.extend_from_slice(s.as_bytes());
        }
        b'-' | b'0'..=b'9' => {
            let mut buffer = itoa::Buffer::new();
            let digits = if let Ok(n) = serde_json::from_str::<i64>(text) {
                buffer.format(n)
            } else {
                buffer.format(serde_json::from_str::<u64>(text).ok()?)
            };
            out.extend_from_slice(digits.as_bytes());
        }
        _ => return None,
    }
    Some(())
}

/// An object's field `name`: Some(None) when the object lacks it; an error when the
/// value is not an object or has the field twice (the reference decides those).
struct Field<'f> {
    name: &'f str,
}

impl<'de> DeserializeSeed<'de> for Field<'_> {
    type Value = Option<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Field<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(name) = map.next_key::<Cow<'de, str>>()? {
            if name != self.name {
                map.next_value::<IgnoredAny>()?;
            } else if found.is_some() {
                return Err(de::Error::custom("the field twice"));
            } else {
                found = Some(map.next_value::<&'de RawValue>()?);
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(value: &str, field: &str) -> Option<String> {
        field_key(value.as_bytes(), field).map(|k| String::from_utf8(k).unwrap())
    }

    #[test]
    fn plain_values_are_keyed() {
        assert_eq!(
            key(r#"{"auction": 17, "price": 5}"#, "auction"),
            Some("17".into())
        );
        assert_eq!(
            key(r#" {"a": [1, {"b": 2}], "id": "u\u00e9"} "#, "id"),
            Some("ué".into())
        );
        assert_eq!(
            key(r#"{"id": 18446744073709551615}"#, "id"),
            Some("18446744073709551615".into())
        );
        assert_eq!(key(r#"{"i\u0064": "x"}"#, "id"), Some("x".into()));
    }

    #[test]
    fn the_rest_goes_to_the_reference() {
        for value in [
            r#"{"price": 5}"#,                 // no field
            r#"{"id": 1, "id": 2}"#,           // twice
            r#"{"id": 1.5}"#,                  // a float
            r#"{"id": 1e3}"#,                  // a float, written as one
            r#"{"id": [1]}"#,                  // nested
            r#"{"id": null}"#,                 // null, true, false: json.dumps words them
            r#"{"id": 18446744073709551616}"#, // beyond 64 bits
            r#"{"id": "\ud800"}"#,             // a lone surrogate
            r#"{"id": 1, "x": NaN}"#,          // not JSON
            r#"[{"id": 1}]"#,                  // not an object
            r#"{"id": 1} {}"#,                 // more after it
            r#"{"id": 1,}"#,                   // a trailing comma
        ] {
            assert_eq!(key(value, "id"), None, "{value}");
        }
        assert_eq!(field_key(b"{\"id\": 1, \"x\": \"\xff\"}", "id"), None); // not UTF-8
        let deep = format!("{{\"id\": 1, \"x\": {}{}}}", "[".repeat(65), "]".repeat(65));
        assert_eq!(key(&deep, "id"), None); // the reference gives up
        let shallow = format!("{{\"id\": 1, \"x\": {}{}}}", "[".repeat(60), "]".repeat(60));
        assert_eq!(key(&shallow, "id"), Some("1".into()));
        assert_eq!(key(r#"{"id": 1, "x": "[[[[\"]]"}"#, "id"), Some("1".into()));
        // in a string
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = field_key(&bytes, "id");
        }

        #[test]
        fn an_integer_field_is_its_decimal_text(n in any::<i64>(), pad in "[ \t\n]{0,3}") {
            let value = format!("{{{pad}\"x\":[1,\"2\"],\"id\":{pad}{n}{pad}}}");
            prop_assert_eq!(key(&value, "id"), Some(n.to_string()));
        }

        #[test]
        fn a_string_field_is_its_text(s in "\\PC{0,12}") {
            let value = serde_json::json!({"id": s, "other": {"id": 1}}).to_string();
            prop_assert_eq!(key(&value, "id"), Some(s));
        }
    }
}
