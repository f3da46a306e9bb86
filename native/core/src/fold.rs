//! The fold of a windowed aggregation's batch: records grouped by (key, window start),
//! each group's count and, for integer values, its exact sum, min and max.
//!
//! What `dataflow/_vectorized.py` folds per group comes from here; the grouping is the
//! one it documents: groups ordered by key (in order of first appearance), then window
//! start, and a group's records in arrival order.

/// How records are assigned to windows (the assigners `dataflow` folds in batches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSpec {
    /// Fixed windows of `size_ms` aligned to `offset_ms`.
    Tumbling { size_ms: i64, offset_ms: i64 },
    /// Windows of `size_ms` starting every `slide_ms`, aligned to `offset_ms`.
    Hopping {
        size_ms: i64,
        slide_ms: i64,
        offset_ms: i64,
    },
    /// One window, starting at `start_ms`.
    Global { start_ms: i64 },
}

/// A batch's (record, window) pairs grouped by (key, window start).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Groups {
    /// Each group's key, as an index into the batch's distinct keys.
    pub keys: Vec<u32>,
    pub starts: Vec<i64>,
    /// Record indices, grouped: group `g` is `slots[bounds[g]..bounds[g + 1]]`.
    pub slots: Vec<u32>,
    pub bounds: Vec<usize>,
}

impl Groups {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn counts(&self) -> Vec<usize> {
        self.bounds.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// Groups the records (`key_ids[i]`, `times[i]`) by (key, window start); None when a
/// window start falls outside int64 (never for event times in the accepted range).
pub fn group(key_ids: &[u32], times: &[i64], window: WindowSpec) -> Option<Groups> {
    let mut pairs: Vec<(u32, i64, u32)> = Vec::with_capacity(times.len());
    for (slot, (&kid, &t)) in key_ids.iter().zip(times).enumerate() {
        let slot = u32::try_from(slot).ok()?;
        match window {
            WindowSpec::Tumbling { size_ms, offset_ms } => {
                let start = aligned(t, size_ms, offset_ms)?;
                pairs.push((kid, start, slot));
            }
            WindowSpec::Hopping {
                size_ms,
                slide_ms,
                offset_ms,
            } => {
                let last = aligned(t, slide_ms, offset_ms)?;
                let hops = (size_ms + slide_ms - 1) / slide_ms;
                for hop in 0..hops {
                    let start = last.checked_sub(hop.checked_mul(slide_ms)?)?;
                    if i128::from(start) > i128::from(t) - i128::from(size_ms) {
                        pairs.push((kid, start, slot));
                    }
                }
            }
            WindowSpec::Global { start_ms } => pairs.push((kid, start_ms, slot)),
        }
    }
    pairs.sort_unstable();
    let mut groups = Groups::default();
    for (i, &(kid, start, slot)) in pairs.iter().enumerate() {
        if i == 0 || pairs[i - 1].0 != kid || pairs[i - 1].1 != start {
            groups.keys.push(kid);
            groups.starts.push(start);
            groups.bounds.push(i);
        }
        groups.slots.push(slot);
    }
    groups.bounds.push(pairs.len());
    Some(groups)
}

/// `t - (t - offset) mod size` with Python's (floor) modulo.
fn aligned(t: i64, size_ms: i64, offset_ms: i64) -> Option<i64> {
    if size_ms <= 0 {
        return None;
    }
    let shifted = i128::from(t) - i128::from(offset_ms);
    i64::try_from(i128::from(t) - shifted.rem_euclid(i128::from(size_ms))).ok()
}

/// Each group's exact sum, min and max of integer `values` (indexed by record).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Columns {
    pub sums: Vec<i128>,
    pub mins: Vec<i64>,
    pub maxs: Vec<i64>,
}

/// The integer columns of `groups` over `values`.
pub fn columns(groups: &Groups, values: &[i64]) -> Columns {
    let mut out = Columns::default();
    for g in 0..groups.len() {
        let slots = &groups.slots[groups.bounds[g]..groups.bounds[g + 1]];
        let mut sum = 0i128;
        let mut min = i64::MAX;
        let mut max = i64::MIN;
        for &slot in slots {
            let v = values[slot as usize];
            sum += i128::from(v);
            min = min.min(v);
            max = max.max(v);
        }
        out.sums.push(sum);
        out.mins.push(min);
        out.maxs.push(max);
    }
    out
}

/// A record value read as Python's `json.loads` reads it, when that gives an integer
/// within int64 (of the whole value, or of its object's `field`); None otherwise (the
/// caller reads it the reference way).
pub fn int_value(value: &[u8], field: Option<&str>) -> Option<i64> {
    match field {
        None => serde_json::from_slice::<i64>(value).ok(),
        Some(name) => {
            let body: serde_json::Value = serde_json::from_slice(value).ok()?;
            body.as_object()?.get(name)?.as_i64()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tumbling_groups_by_key_then_start_then_arrival() {
        let spec = WindowSpec::Tumbling {
            size_ms: 10,
            offset_ms: 0,
        };
        let groups = group(&[1, 0, 1, 0, 1], &[15, 3, 12, -1, 25], spec).unwrap();
        assert_eq!(groups.keys, [0, 0, 1, 1]);
        assert_eq!(groups.starts, [-10, 0, 10, 20]);
        assert_eq!(groups.slots, [3, 1, 0, 2, 4]);
        assert_eq!(groups.bounds, [0, 1, 2, 4, 5]);
        assert_eq!(groups.counts(), [1, 1, 2, 1]);
    }

    #[test]
    fn hopping_puts_a_record_in_every_window_holding_it() {
        let spec = WindowSpec::Hopping {
            size_ms: 10,
            slide_ms: 4,
            offset_ms: 1,
        };
        let groups = group(&[0], &[9], spec).unwrap();
        // windows [1, 11), [5, 15), [9, 19) hold 9
        assert_eq!(groups.starts, [1, 5, 9]);
    }

    #[test]
    fn columns_are_exact() {
        let spec = WindowSpec::Global { start_ms: -5 };
        let groups = group(&[0, 0], &[1, 2], spec).unwrap();
        let cols = columns(&groups, &[i64::MAX, i64::MAX]);
        assert_eq!(cols.sums, [2 * i128::from(i64::MAX)]);
        assert_eq!((cols.mins[0], cols.maxs[0]), (i64::MAX, i64::MAX));
    }

    #[test]
    fn int_values_are_what_json_reads_as_integers() {
        assert_eq!(int_value(b" 42\n", None), Some(42));
        assert_eq!(int_value(b"-7", None), Some(-7));
        for not_int in [
            &b"4.0"[..],
            b"1e3",
            b"-0",
            b"\"5\"",
            b"true",
            b"",
            b"9223372036854775808",
        ] {
            assert_eq!(int_value(not_int, None), None);
        }
        assert_eq!(int_value(br#"{"n": 3, "m": 1.5}"#, Some("n")), Some(3));
        assert_eq!(int_value(br#"{"n": 3, "n": 4}"#, Some("n")), Some(4));
        assert_eq!(int_value(br#"{"m": 3}"#, Some("n")), None);
        assert_eq!(int_value(br#"{"n": null}"#, Some("n")), None);
        assert_eq!(int_value(br#"[1]"#, Some("n")), None);
    }
}
