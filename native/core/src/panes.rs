//! A window's on-time pane, from its stored state: the record value
//! `dataflow/_panes.py` `Pane.encode` writes, byte for byte, for the built-in integer
//! combiners (`window_state.rs` folds their states).
//!
//! The pane is `json.dumps`'s compact form with keys in the format's order: strings
//! escaped to ASCII as `json` escapes them, floats (a mean) written as Python's `repr`
//! writes them. A state it cannot turn into the same bytes (a float accumulator, a key
//! that is not UTF-8, a sum beyond 2^53 for a mean) is [`Fired::Python`].

use serde_json::{Map, Value};

use crate::window_state::{empty_acc, plain, plain_str, write_sorted, Aggregate, Part};

/// What firing a window's on-time timer makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fired {
    /// The pane's record value, and the window's state after it when the window is
    /// kept for late records (None: its state goes).
    Pane(Vec<u8>, Option<Vec<u8>>),
    /// The window has no state: nothing to fire.
    Empty,
    /// An early trigger's clock runs: its timer must go too (left to Python's path).
    Leave,
    /// Not written here exactly: fire it in Python.
    Python,
}

/// How a window lives on after its on-time pane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterPane {
    /// Its state goes (no allowed lateness).
    Forget,
    /// Kept for late records, its accumulator as it is (accumulating panes)...
    Accumulate,
    /// ...or emptied (discarding panes).
    Discard,
}

/// The on-time pane of `key`'s window `[start, end)` from its state `raw`; `names` are
/// the combined parts' names (the result object's keys). With `after` other than
/// [`AfterPane::Forget`], also the state `process_timer` keeps: the pane counted,
/// `since` 0, `fired` true (and the accumulator emptied when discarding).
pub fn on_time_pane(
    raw: Option<&[u8]>,
    key: &[u8],
    window: (i64, i64),
    aggregate: &Aggregate,
    names: &[String],
    after: AfterPane,
) -> Fired {
    fire(raw, aggregate, after, |acc, index, out| {
        let Ok(key) = std::str::from_utf8(key) else {
            return false; // written as {"base64": ...}
        };
        out.extend_from_slice(b"{\"v\":1,\"key\":");
        write_ascii_str(key, out);
        out.extend_from_slice(b",\"window\":[");
        write_int(window.0, out);
        out.push(b',');
        write_int(window.1, out);
        out.extend_from_slice(b"],\"pane\":");
        write_int(index, out);
        out.extend_from_slice(b",\"timing\":\"on_time\",\"retraction\":false,\"value\":");
        if !write_result(acc, aggregate, names, out) {
            return false;
        }
        out.push(b'}');
        true
    })
}

/// A column of a row an on-time pane is written as (a SQL query's row,
/// `streamsql/_runtime.py` `SqlWindowAggregate`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowColumn {
    /// The key's UTF-8 text, as a JSON string.
    KeyText,
    /// The key, JSON text of an integer, `true`, `false` or `null`, as it is.
    KeyJson,
    /// The window's start.
    WindowStart,
    /// The window's end.
    WindowEnd,
    /// The result of the aggregate's part `i`.
    Part(usize),
}

/// The on-time pane of `key`'s window as the JSON object of `columns` (names and what
/// each holds, in order), as `json.dumps` writes the row Python makes of it; state as
/// [`on_time_pane`].
pub fn on_time_row(
    raw: Option<&[u8]>,
    key: &[u8],
    window: (i64, i64),
    aggregate: &Aggregate,
    columns: &[(String, RowColumn)],
    after: AfterPane,
) -> Fired {
    fire(raw, aggregate, after, |acc, _index, out| {
        out.push(b'{');
        for (i, (name, column)) in columns.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_ascii_str(name, out);
            out.push(b':');
            let written = match column {
                RowColumn::KeyText => std::str::from_utf8(key)
                    .map(|key| write_ascii_str(key, out))
                    .is_ok(),
                RowColumn::KeyJson => write_json_key(key, out),
                RowColumn::WindowStart => {
                    write_int(window.0, out);
                    true
                }
                RowColumn::WindowEnd => {
                    write_int(window.1, out);
                    true
                }
                RowColumn::Part(part) => write_one_part(acc, aggregate, *part, out),
            };
            if !written {
                return false;
            }
        }
        out.push(b'}');
        true
    })
}

/// A key of JSON text as Python reads and writes it back: only the texts it writes
/// back unchanged (a canonical integer, `true`, `false`, `null`).
fn write_json_key(key: &[u8], out: &mut Vec<u8>) -> bool {
    let Ok(text) = std::str::from_utf8(key) else {
        return false;
    };
    let canonical = matches!(text, "true" | "false" | "null")
        || text.parse::<i64>().is_ok_and(|n| n.to_string() == text);
    if canonical {
        out.extend_from_slice(key);
    }
    canonical
}

fn write_one_part(acc: &Value, aggregate: &Aggregate, part: usize, out: &mut Vec<u8>) -> bool {
    let Some(&kind) = aggregate.parts.get(part) else {
        return false;
    };
    if !aggregate.combined {
        return part == 0 && write_part(acc, kind, out);
    }
    match acc.as_array() {
        Some(accs) if accs.len() == aggregate.parts.len() => write_part(&accs[part], kind, out),
        _ => false,
    }
}

/// What firing shares: the state read and checked, the record written by `write` (from
/// the accumulator and the pane's index; false: not exactly, fire it in Python), the
/// state after it.
fn fire(
    raw: Option<&[u8]>,
    aggregate: &Aggregate,
    after: AfterPane,
    write: impl FnOnce(&Value, i64, &mut Vec<u8>) -> bool,
) -> Fired {
    let Some(raw) = raw else {
        return Fired::Empty;
    };
    let mut state: Map<String, Value> = match serde_json::from_slice(raw) {
        Ok(Value::Object(state)) if state.iter().all(|(k, v)| plain_str(k) && plain(v)) => state,
        _ => return Fired::Python,
    };
    if state.contains_key("early_at") {
        return Fired::Leave;
    }
    if state.contains_key("late_at") || state.contains_key("last") {
        return Fired::Python;
    }
    let (Some(acc), Some(index)) = (state.get("acc"), state.get("pane").and_then(Value::as_i64))
    else {
        return Fired::Python;
    };
    let mut out = Vec::with_capacity(128);
    if !write(acc, index, &mut out) {
        return Fired::Python;
    }
    if after == AfterPane::Forget {
        return Fired::Pane(out, None);
    }
    let Some(next) = index.checked_add(1) else {
        return Fired::Python;
    };
    state.insert("pane".into(), next.into());
    state.insert("since".into(), 0.into());
    state.insert("fired".into(), Value::Bool(true));
    if after == AfterPane::Discard {
        state.insert("acc".into(), empty_acc(aggregate));
    }
    let mut kept = Vec::with_capacity(raw.len() + 8);
    write_sorted(&Value::Object(state), &mut kept);
    Fired::Pane(out, Some(kept))
}

fn write_result(acc: &Value, aggregate: &Aggregate, names: &[String], out: &mut Vec<u8>) -> bool {
    if !aggregate.combined {
        return aggregate
            .parts
            .first()
            .is_some_and(|&part| write_part(acc, part, out));
    }
    let Some(accs) = acc.as_array() else {
        return false;
    };
    if accs.len() != aggregate.parts.len() || names.len() != accs.len() {
        return false;
    }
    out.push(b'{');
    for (i, ((acc, &part), name)) in accs.iter().zip(&aggregate.parts).zip(names).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_ascii_str(name, out);
        out.push(b':');
        if !write_part(acc, part, out) {
            return false;
        }
    }
    out.push(b'}');
    true
}

/// The part's `result` of an integer accumulator.
fn write_part(acc: &Value, part: Part, out: &mut Vec<u8>) -> bool {
    const EXACT: i64 = 1 << 53; // integers a double holds exactly
    match (part, acc) {
        (Part::Min | Part::Max, Value::Null) => {
            out.extend_from_slice(b"null");
            true
        }
        (Part::Count | Part::Sum | Part::Min | Part::Max, acc) => match acc.as_i64() {
            Some(n) if acc.is_i64() => {
                write_int(n, out);
                true
            }
            _ => false,
        },
        (Part::Mean, Value::Array(pair)) => match pair.as_slice() {
            [sum, count] if sum.is_i64() && count.is_i64() => {
                let (sum, count) = (sum.as_i64().unwrap_or(0), count.as_i64().unwrap_or(0));
                if count == 0 {
                    out.extend_from_slice(b"null");
                    return true;
                }
                // Python divides the exact integers with one rounding; so does this,
                // where both convert to doubles exactly.
                if !(-EXACT..=EXACT).contains(&sum) || !(-EXACT..=EXACT).contains(&count) {
                    return false;
                }
                #[allow(clippy::cast_precision_loss)] // exact: within 2^53
                let mean = sum as f64 / count as f64;
                write_py_float(mean, out)
            }
            _ => false,
        },
        (Part::Mean, _) => false,
    }
}

fn write_int(n: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// A string as `json.dumps` writes it (`ensure_ascii`): escapes for `"`, `\`, and the
/// control characters with short forms, `\uXXXX` (lowercase, surrogate pairs beyond
/// the BMP) for every other character outside printable ASCII.
pub fn write_ascii_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            ' '..='~' => out.push(c as u8),
            _ => {
                let mut units = [0u16; 2];
                for &unit in c.encode_utf16(&mut units).iter() {
                    out.extend_from_slice(b"\\u");
                    for shift in [12, 8, 4, 0] {
                        out.push(HEX[usize::from((unit >> shift) & 0xf)]);
                    }
                }
            }
        }
    }
    out.push(b'"');
}

/// A finite double as Python's `repr` writes it: the shortest digits that read back
/// to it, in positional form for decimal exponents from -4 to 15 (with `.0` for a
/// whole number), else as `d.ddde+XX`. False for NaN and the infinities.
pub fn write_py_float(x: f64, out: &mut Vec<u8>) -> bool {
    if !x.is_finite() {
        return false;
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as `repr` does.
    let text = format!("{x:e}");
    let Some((mantissa, exponent)) = text.split_once('e') else {
        return false;
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return false;
    };
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let digits: Vec<u8> = mantissa.bytes().filter(|&b| b != b'.').collect();
    if negative {
        out.push(b'-');
    }
    if (-4..16).contains(&exponent) {
        if exponent >= 0 {
            let whole = usize::try_from(exponent).unwrap_or(0) + 1;
            for i in 0..whole {
                out.push(digits.get(i).copied().unwrap_or(b'0'));
            }
            out.push(b'.');
            if digits.len() > whole {
                out.extend_from_slice(&digits[whole..]);
            } else {
                out.push(b'0');
            }
        } else {
            out.extend_from_slice(b"0.");
            for _ in 0..(-exponent - 1) {
                out.push(b'0');
            }
            out.extend_from_slice(&digits);
        }
    } else {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exponent < 0 { b'-' } else { b'+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(magnitude.to_string().as_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(x: f64) -> String {
        let mut out = Vec::new();
        assert!(write_py_float(x, &mut out));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_read_as_python_writes_them() {
        let cases: [(f64, &str); 14] = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (2.0, "2.0"),
            (0.1, "0.1"),
            (1.5, "1.5"),
            (1.0 / 3.0, "0.3333333333333333"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123_456_789.25, "123456789.25"),
            (-2.5e-7, "-2.5e-07"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
        ];
        for (x, want) in cases {
            assert_eq!(repr(x), want);
        }
        assert!(!write_py_float(f64::NAN, &mut Vec::new()));
    }

    #[test]
    fn strings_escape_as_json_dumps() {
        let mut out = Vec::new();
        write_ascii_str("a\"b\\c\n\u{1}é😀\u{7f}", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#""a\"b\\c\n\u0001\u00e9\ud83d\ude00\u007f""#
        );
    }

    #[test]
    fn a_count_and_sum_pane() {
        let aggregate = Aggregate {
            parts: vec![Part::Count, Part::Sum],
            combined: true,
        };
        let names = ["count".to_string(), "sum".to_string()];
        let raw = br#"{"acc":[3,12],"fired":false,"pane":0,"since":3}"#;
        let fire = |after| on_time_pane(Some(raw), b"alice", (0, 60000), &aggregate, &names, after);
        let fired = fire(AfterPane::Forget);
        let pane = br#"{"v":1,"key":"alice","window":[0,60000],"pane":0,"timing":"on_time","retraction":false,"value":{"count":3,"sum":12}}"#;
        assert_eq!(fired, Fired::Pane(pane.to_vec(), None));
        let kept = fire(AfterPane::Accumulate);
        let state = br#"{"acc":[3,12],"fired":true,"pane":1,"since":0}"#;
        assert_eq!(kept, Fired::Pane(pane.to_vec(), Some(state.to_vec())));
        let emptied = fire(AfterPane::Discard);
        let state = br#"{"acc":[0,0],"fired":true,"pane":1,"since":0}"#;
        assert_eq!(emptied, Fired::Pane(pane.to_vec(), Some(state.to_vec())));
        assert_eq!(
            on_time_pane(None, b"a", (0, 1), &aggregate, &names, AfterPane::Forget),
            Fired::Empty
        );
        let early = br#"{"acc":[3,12],"early_at":5,"fired":false,"pane":0,"since":3}"#;
        assert_eq!(
            on_time_pane(
                Some(early),
                b"a",
                (0, 1),
                &aggregate,
                &names,
                AfterPane::Forget
            ),
            Fired::Leave
        );
        assert_eq!(
            on_time_pane(
                Some(raw),
                b"\xff",
                (0, 1),
                &aggregate,
                &names,
                AfterPane::Forget
            ),
            Fired::Python
        );
    }

    #[test]
    fn a_row_of_the_key_the_window_and_the_parts() {
        let aggregate = Aggregate {
            parts: vec![Part::Count, Part::Max],
            combined: true,
        };
        let raw = br#"{"acc":[3,12],"fired":false,"pane":0,"since":3}"#;
        let columns = [
            ("user".to_string(), RowColumn::KeyText),
            ("top".to_string(), RowColumn::Part(1)),
            ("n".to_string(), RowColumn::Part(0)),
            ("ws".to_string(), RowColumn::WindowStart),
            ("we".to_string(), RowColumn::WindowEnd),
        ];
        let row = |key: &[u8], columns: &[(String, RowColumn)]| {
            on_time_row(
                Some(raw),
                key,
                (0, 60000),
                &aggregate,
                columns,
                AfterPane::Forget,
            )
        };
        let written = br#"{"user":"\u00e9","top":12,"n":3,"ws":0,"we":60000}"#;
        assert_eq!(
            row("é".as_bytes(), &columns),
            Fired::Pane(written.to_vec(), None)
        );
        let json = [("id".to_string(), RowColumn::KeyJson)];
        assert_eq!(
            row(b"-42", &json),
            Fired::Pane(br#"{"id":-42}"#.to_vec(), None)
        );
        for not_canonical in [&b"-0"[..], b"1.5", b"\"x\"", b"007", b"x"] {
            assert_eq!(row(not_canonical, &json), Fired::Python);
        }
        let beyond = [("x".to_string(), RowColumn::Part(2))];
        assert_eq!(row(b"a", &beyond), Fired::Python);
    }
}
