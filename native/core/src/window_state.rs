//! A window's state with a batch's group folded in: the step `dataflow/_vectorized.py`
//! runs once per (key, window) of a delivered batch, for the built-in integer folds.
//!
//! A window's state is the JSON object `WindowedAggregation` keeps (`acc`, `fired`,
//! `pane`, `since`, and the trigger clocks `early_at`, `late_at`, `last`,
//! `last_timing`), written with sorted keys and no spaces as msgspec writes it (the
//! Python side's `PLAIN_STATE` serde): what this writes is byte for byte what the
//! Python fold writes. A state it cannot fold exactly (a float anywhere, an integer
//! beyond int64, a string that would need escaping, a shape it does not know) is
//! [`Outcome::Python`]: the group is folded in Python, as before.

use serde_json::{Map, Number, Value};

/// One built-in combiner over integer values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Count,
    Sum,
    Min,
    Max,
    Mean,
}

/// A window's combiner: one part (its accumulator is the part's), or several combined
/// (the accumulator is the list of the parts' accumulators).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aggregate {
    pub parts: Vec<Part>,
    pub combined: bool,
}

/// A group's records: how many, and (when the values are read) their exact sum, min
/// and max.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contribution {
    pub count: i64,
    pub values: Option<(i64, i64, i64)>,
}

/// What became of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The window's existing state, with the group folded in.
    Folded(Vec<u8>),
    /// A new window's state, with the group folded in (its timers are to be set).
    Opened(Vec<u8>),
    /// The group's key goes to `process_record`: a pane may be due (the window fired,
    /// or an early trigger's record count is reached).
    Leave,
    /// Not foldable here, exactly: fold the group in Python.
    Python,
}

/// Folds a group into a window's state (`raw`, None for a window without one yet).
/// `early_count`: the early trigger's record count, if it has one.
pub fn fold(
    raw: Option<&[u8]>,
    aggregate: &Aggregate,
    group: Contribution,
    early_count: Option<i64>,
) -> Outcome {
    let due = |since: i64| early_count.is_some_and(|n| since >= n);
    let (mut state, opened) = match raw {
        None => {
            if due(group.count) {
                return Outcome::Leave;
            }
            (new_state(aggregate), true)
        }
        Some(raw) => match serde_json::from_slice::<Value>(raw) {
            Ok(Value::Object(state)) if state.iter().all(|(k, v)| plain_str(k) && plain(v)) => {
                (state, false)
            }
            _ => return Outcome::Python,
        },
    };
    let Some(since) = state.get("since").and_then(Value::as_i64) else {
        return Outcome::Python;
    };
    if !opened {
        match state.get("fired") {
            Some(Value::Bool(true)) => return Outcome::Leave,
            Some(Value::Bool(false)) => {}
            _ => return Outcome::Python,
        }
        match since.checked_add(group.count) {
            Some(total) if due(total) => return Outcome::Leave,
            Some(_) => {}
            None => return Outcome::Python,
        }
    }
    let Some(acc) = state
        .get("acc")
        .and_then(|acc| fold_acc(acc, aggregate, group))
    else {
        return Outcome::Python;
    };
    let Some(since) = since.checked_add(group.count) else {
        return Outcome::Python;
    };
    state.insert("acc".into(), acc);
    state.insert("since".into(), since.into());
    let mut out = Vec::with_capacity(64);
    write_sorted(&Value::Object(state), &mut out);
    if opened {
        Outcome::Opened(out)
    } else {
        Outcome::Folded(out)
    }
}

/// The combiner's `create()`: an empty accumulator.
pub(crate) fn empty_acc(aggregate: &Aggregate) -> Value {
    if aggregate.combined {
        Value::Array(aggregate.parts.iter().map(|&p| create(p)).collect())
    } else {
        aggregate.parts.first().map_or(Value::Null, |&p| create(p))
    }
}

/// `{"acc": create(), "pane": 0, "since": 0, "fired": false}`, as `_open` makes it for a
/// window the watermark has not passed.
fn new_state(aggregate: &Aggregate) -> Map<String, Value> {
    let mut state = Map::new();
    state.insert("acc".into(), empty_acc(aggregate));
    state.insert("fired".into(), Value::Bool(false));
    state.insert("pane".into(), 0.into());
    state.insert("since".into(), 0.into());
    state
}

fn create(part: Part) -> Value {
    match part {
        Part::Count | Part::Sum => 0.into(),
        Part::Min | Part::Max => Value::Null,
        Part::Mean => Value::Array(vec![0.into(), 0.into()]),
    }
}

fn fold_acc(acc: &Value, aggregate: &Aggregate, group: Contribution) -> Option<Value> {
    if !aggregate.combined {
        return fold_part(acc, *aggregate.parts.first()?, group);
    }
    let accs = acc.as_array()?;
    if accs.len() != aggregate.parts.len() {
        return None;
    }
    let folded = accs
        .iter()
        .zip(&aggregate.parts)
        .map(|(acc, &part)| fold_part(acc, part, group))
        .collect::<Option<Vec<_>>>()?;
    Some(Value::Array(folded))
}

/// The part's `add` applied to each of the group's values, for integers: exact.
fn fold_part(acc: &Value, part: Part, group: Contribution) -> Option<Value> {
    let int = |v: &Value| if v.is_i64() { v.as_i64() } else { None };
    match part {
        Part::Count => Some(int(acc)?.checked_add(group.count)?.into()),
        Part::Sum => Some(int(acc)?.checked_add(group.values?.0)?.into()),
        Part::Min | Part::Max => {
            let (_, min, max) = group.values?;
            let value = if part == Part::Min { min } else { max };
            Some(match acc {
                Value::Null => value.into(),
                other => {
                    let acc = int(other)?;
                    if part == Part::Min {
                        acc.min(value)
                    } else {
                        acc.max(value)
                    }
                    .into()
                }
            })
        }
        Part::Mean => {
            let pair = acc.as_array()?;
            let [sum, count] = pair.as_slice() else {
                return None;
            };
            let sum = int(sum)?.checked_add(group.values?.0)?;
            let count = int(count)?.checked_add(group.count)?;
            Some(Value::Array(vec![sum.into(), count.into()]))
        }
    }
}

/// True for values this module writes back exactly as msgspec would: integers within
/// int64, booleans, null, strings of printable ASCII without quotes or backslashes,
/// and lists and objects of those.
pub(crate) fn plain(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(_) => true,
        Value::Number(n) => n.is_i64(),
        Value::String(s) => plain_str(s),
        Value::Array(items) => items.iter().all(plain),
        Value::Object(map) => map.iter().all(|(k, v)| plain_str(k) && plain(v)),
    }
}

pub(crate) fn plain_str(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

/// Compact JSON with object keys in sorted order (of [`plain`] values only).
pub(crate) fn write_sorted(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_sorted(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.push(b'"');
                out.extend_from_slice(key.as_bytes());
                out.extend_from_slice(b"\":");
                write_sorted(item, out);
            }
            out.push(b'}');
        }
    }
}

fn write_number(n: &Number, out: &mut Vec<u8>) {
    let mut buffer = itoa::Buffer::new();
    if let Some(i) = n.as_i64() {
        out.extend_from_slice(buffer.format(i).as_bytes());
    } else {
        // Never reached for plain values; a number written as serde_json would.
        out.extend_from_slice(n.to_string().as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_sum() -> Aggregate {
        Aggregate {
            parts: vec![Part::Count, Part::Sum],
            combined: true,
        }
    }

    fn group(count: i64, sum: i64, min: i64, max: i64) -> Contribution {
        Contribution {
            count,
            values: Some((sum, min, max)),
        }
    }

    #[test]
    fn opens_a_window_and_folds_the_group_in() {
        let out = fold(None, &count_sum(), group(3, 12, 1, 7), None);
        assert_eq!(
            out,
            Outcome::Opened(br#"{"acc":[3,12],"fired":false,"pane":0,"since":3}"#.to_vec())
        );
    }

    #[test]
    fn folds_into_an_existing_state_keeping_its_other_entries() {
        let raw = br#"{"acc":[1,5],"early_at":17,"fired":false,"pane":2,"since":0}"#;
        let out = fold(Some(raw), &count_sum(), group(2, 9, 4, 5), None);
        assert_eq!(
            out,
            Outcome::Folded(
                br#"{"acc":[3,14],"early_at":17,"fired":false,"pane":2,"since":2}"#.to_vec()
            )
        );
    }

    #[test]
    fn min_max_and_mean_fold_like_their_add() {
        let aggregate = Aggregate {
            parts: vec![Part::Min, Part::Max, Part::Mean],
            combined: true,
        };
        let opened = fold(None, &aggregate, group(2, 10, 3, 7), None);
        assert_eq!(
            opened,
            Outcome::Opened(br#"{"acc":[3,7,[10,2]],"fired":false,"pane":0,"since":2}"#.to_vec())
        );
        let raw = br#"{"acc":[3,7,[10,2]],"fired":false,"pane":0,"since":2}"#;
        let folded = fold(Some(raw), &aggregate, group(1, -4, -4, -4), None);
        assert_eq!(
            folded,
            Outcome::Folded(br#"{"acc":[-4,7,[6,3]],"fired":false,"pane":0,"since":3}"#.to_vec())
        );
    }

    #[test]
    fn a_count_alone_needs_no_values() {
        let aggregate = Aggregate {
            parts: vec![Part::Count],
            combined: false,
        };
        let out = fold(
            None,
            &aggregate,
            Contribution {
                count: 4,
                values: None,
            },
            None,
        );
        assert_eq!(
            out,
            Outcome::Opened(br#"{"acc":4,"fired":false,"pane":0,"since":4}"#.to_vec())
        );
    }

    #[test]
    fn leaves_a_fired_window_and_a_due_early_pane() {
        let fired = br#"{"acc":[1,5],"fired":true,"pane":1,"since":0}"#;
        assert_eq!(
            fold(Some(fired), &count_sum(), group(1, 1, 1, 1), None),
            Outcome::Leave
        );
        let open = br#"{"acc":[1,5],"fired":false,"pane":0,"since":1}"#;
        assert_eq!(
            fold(Some(open), &count_sum(), group(2, 1, 1, 1), Some(3)),
            Outcome::Leave
        );
        assert!(matches!(
            fold(Some(open), &count_sum(), group(1, 1, 1, 1), Some(3)),
            Outcome::Folded(_)
        ));
        assert_eq!(
            fold(None, &count_sum(), group(3, 1, 1, 1), Some(3)),
            Outcome::Leave
        );
    }

    #[test]
    fn what_it_cannot_fold_exactly_goes_to_python() {
        let cases: [&[u8]; 7] = [
            br#"{"acc":[1,5.5],"fired":false,"pane":0,"since":1}"#,
            br#"{"acc":[1,99999999999999999999],"fired":false,"pane":0,"since":1}"#,
            br#"{"acc":[1,5],"fired":false,"pane":0,"since":1,"last_timing":"\u00e9"}"#,
            br#"{"acc":[1,5],"pane":0,"since":1}"#,
            br#"{"acc":[1],"fired":false,"pane":0,"since":1}"#,
            br#"[1,2]"#,
            b"not json",
        ];
        for raw in cases {
            assert_eq!(
                fold(Some(raw), &count_sum(), group(1, 1, 1, 1), None),
                Outcome::Python,
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        let near_max = format!(
            r#"{{"acc":[1,{}],"fired":false,"pane":0,"since":1}}"#,
            i64::MAX
        );
        assert_eq!(
            fold(
                Some(near_max.as_bytes()),
                &count_sum(),
                group(1, 1, 1, 1),
                None
            ),
            Outcome::Python
        );
    }
}
