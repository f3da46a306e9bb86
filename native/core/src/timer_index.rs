//! Every committed timer of one store, in memory, and the `TIMERS` column's operations
//! of a commit that changes them (`statestore/_timer_index.py`, `docs/store-format.md`).
//!
//! A timer is `(domain, key, tag)` set for a time. The column holds two entries per
//! timer: the time-ordered entry `T, domain, time (8 bytes, order-preserving), key
//! length (4 bytes big-endian), key, tag` with an empty value, and the index entry
//! `I, domain, key length, key, tag` whose value is the time. The order here is the
//! order of the time-ordered entries' bytes, so due timers come out as a scan would
//! give them.

use hashbrown::HashMap;
use std::collections::BTreeSet;

/// First byte of a time-ordered entry.
pub const TIMER_ORDER: u8 = b'T';
/// First byte of an index entry.
pub const TIMER_INDEX: u8 = b'I';
const SIGN: u64 = 1 << 63;

/// `(domain, key, tag)`: which timer.
pub type Ident = (u8, Vec<u8>, String);

/// The time-ordered position of a timer: the byte order of its ordered entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Position {
    domain: u8,
    time_ms: i64,
    key_len: usize,
    key: Vec<u8>,
    tag: String,
}

impl Position {
    fn new(domain: u8, time_ms: i64, key: Vec<u8>, tag: String) -> Self {
        Self {
            domain,
            time_ms,
            key_len: key.len(),
            key,
            tag,
        }
    }
}

/// A timer that is due: its key, tag, time and cause.
pub type Due = (Vec<u8>, String, i64, Vec<u8>);

/// A timer's time and cause.
pub type Setting = (i64, Vec<u8>);

/// What a commit writes to the `TIMERS` column for its timer changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ColumnOps {
    pub deletes: Vec<Vec<u8>>,
    pub puts: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The committed timers of one store.
#[derive(Debug, Default)]
pub struct TimerIndex {
    /// Each timer's time and cause by its index entry's key (looked up without
    /// building an [`Ident`]).
    times: HashMap<Vec<u8>, Setting>,
    order: BTreeSet<Position>,
}

/// `time_ms` as 8 bytes whose byte order is numeric order.
pub fn encode_time(time_ms: i64) -> [u8; 8] {
    ((time_ms as u64) ^ SIGN).to_be_bytes()
}

/// Inverse of [`encode_time`].
pub fn decode_time(bytes: [u8; 8]) -> i64 {
    (u64::from_be_bytes(bytes) ^ SIGN) as i64
}

fn identity(out: &mut Vec<u8>, key: &[u8], tag: &str) {
    // Keys longer than 4 GiB cannot reach a store (messages are far smaller).
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(tag.as_bytes());
}

/// The index entry's key of a timer.
pub fn index_key(domain: u8, key: &[u8], tag: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + key.len() + tag.len());
    out.push(TIMER_INDEX);
    out.push(domain);
    identity(&mut out, key, tag);
    out
}

/// The time-ordered entry's key of a timer.
pub fn order_key(domain: u8, key: &[u8], tag: &str, time_ms: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(14 + key.len() + tag.len());
    out.push(TIMER_ORDER);
    out.push(domain);
    out.extend_from_slice(&encode_time(time_ms));
    identity(&mut out, key, tag);
    out
}

/// The timer of an index entry's key, or None for bytes that are not one.
pub fn decode_index_key(raw: &[u8]) -> Option<Ident> {
    let (&kind, rest) = raw.split_first()?;
    let (&domain, rest) = rest.split_first()?;
    if kind != TIMER_INDEX || rest.len() < 4 {
        return None;
    }
    let (len, rest) = rest.split_at(4);
    let len = u32::from_be_bytes(len.try_into().ok()?) as usize;
    if rest.len() < len {
        return None;
    }
    let (key, tag) = rest.split_at(len);
    Some((domain, key.to_vec(), String::from_utf8(tag.to_vec()).ok()?))
}

impl TimerIndex {
    pub fn len(&self) -> usize {
        self.times.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The committed time of a timer.
    pub fn time_of(&self, (domain, key, tag): &Ident) -> Option<i64> {
        self.times.get(&index_key(*domain, key, tag)).map(|s| s.0)
    }

    /// The column's operations for a commit's changes (a time and cause, or None:
    /// deleted), against the committed timers; a timer set again to its time writes
    /// nothing (it keeps the cause it has).
    pub fn stage(&self, changes: &[(Ident, Option<Setting>)]) -> ColumnOps {
        let mut ops = ColumnOps::default();
        for ((domain, key, tag), new) in changes {
            let index = index_key(*domain, key, tag);
            let old = self.times.get(&index).map(|s| s.0);
            let new_time = new.as_ref().map(|s| s.0);
            if new.is_some() && old == new_time {
                continue;
            }
            if let Some(old) = old {
                ops.deletes.push(order_key(*domain, key, tag, old));
            }
            match new {
                None => {
                    if old.is_some() {
                        ops.deletes.push(index);
                    }
                }
                Some((time_ms, cause)) => {
                    let order = order_key(*domain, key, tag, *time_ms);
                    ops.puts.push((order, Vec::new()));
                    let mut value = encode_time(*time_ms).to_vec();
                    value.extend_from_slice(cause);
                    ops.puts.push((index, value));
                }
            }
        }
        ops
    }

    /// A commit's changes, once it is durable.
    pub fn apply(&mut self, changes: Vec<(Ident, Option<Setting>)>) {
        for ((domain, key, tag), new) in changes {
            let index = index_key(domain, &key, &tag);
            let new_time = new.as_ref().map(|s| s.0);
            let old = match new {
                None => self.times.remove(&index).map(|s| s.0),
                Some(setting) => match self.times.get_mut(&index) {
                    Some(old) if old.0 == setting.0 => continue, // set again: as staged
                    Some(old) => Some(std::mem::replace(old, setting).0),
                    None => {
                        self.times.insert(index, setting);
                        None
                    }
                },
            };
            if let Some(old) = old {
                self.order
                    .remove(&Position::new(domain, old, key.clone(), tag.clone()));
            }
            if let Some(time_ms) = new_time {
                self.order.insert(Position::new(domain, time_ms, key, tag));
            }
        }
    }

    /// The earliest timer time of `domain`.
    pub fn earliest(&self, domain: u8) -> Option<i64> {
        self.of_domain(domain).next().map(|p| p.time_ms)
    }

    /// Timers of `domain` at or before `up_to_ms` (None: all), in time order, at most
    /// `limit` of them (None: all).
    pub fn due(&self, domain: u8, up_to_ms: Option<i64>, limit: Option<usize>) -> Vec<Due> {
        self.of_domain(domain)
            .take_while(|p| up_to_ms.is_none_or(|up_to| p.time_ms <= up_to))
            .take(limit.unwrap_or(usize::MAX))
            .map(|p| {
                let cause = self
                    .times
                    .get(&index_key(domain, &p.key, &p.tag))
                    .map(|s| s.1.clone())
                    .unwrap_or_default();
                (p.key.clone(), p.tag.clone(), p.time_ms, cause)
            })
            .collect()
    }

    fn of_domain(&self, domain: u8) -> impl Iterator<Item = &Position> {
        let start = Position::new(domain, i64::MIN, Vec::new(), String::new());
        self.order
            .range(start..)
            .take_while(move |p| p.domain == domain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(domain: u8, key: &[u8], tag: &str) -> Ident {
        (domain, key.to_vec(), tag.to_string())
    }

    #[test]
    fn times_encode_in_numeric_byte_order() {
        let times = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for pair in times.windows(2) {
            assert!(encode_time(pair[0]) < encode_time(pair[1]));
        }
        for t in times {
            assert_eq!(decode_time(encode_time(t)), t);
        }
    }

    #[test]
    fn due_timers_come_in_the_order_of_their_entries_bytes() {
        let mut index = TimerIndex::default();
        let timers = [
            (ident(1, b"bb", "x"), 5),
            (ident(1, b"a", "y"), 5),
            (ident(1, b"c", "a"), 3),
            (ident(2, b"a", "z"), 1),
            (ident(1, b"a", "x"), 9),
        ];
        index.apply(
            timers
                .iter()
                .map(|(i, t)| (i.clone(), Some((*t, b"c".to_vec()))))
                .collect(),
        );
        let due = index.due(1, Some(5), None);
        let mut expected: Vec<_> = timers[..3]
            .iter()
            .map(|((d, k, t), ms)| {
                let due = (k.clone(), t.clone(), *ms, b"c".to_vec());
                (order_key(*d, k, t, *ms), due)
            })
            .collect();
        expected.sort();
        assert_eq!(
            due,
            expected.into_iter().map(|(_, d)| d).collect::<Vec<_>>()
        );
        assert_eq!(index.earliest(1), Some(3));
        assert_eq!(index.earliest(2), Some(1));
        assert_eq!(index.due(1, None, Some(1)).len(), 1);
        assert_eq!(index.len(), 5);
    }

    #[test]
    fn a_moved_or_deleted_timer_leaves_nothing_behind() {
        let mut index = TimerIndex::default();
        let t = ident(1, b"k", "on");
        index.apply(vec![(t.clone(), Some((10, b"a".to_vec())))]);
        index.apply(vec![(t.clone(), Some((20, b"b".to_vec())))]);
        let due = (b"k".to_vec(), "on".into(), 20, b"b".to_vec());
        assert_eq!(index.due(1, None, None), vec![due]);
        index.apply(vec![(t.clone(), None)]);
        assert!(index.due(1, None, None).is_empty() && index.is_empty());
        assert_eq!(index.earliest(1), None);
    }

    #[test]
    fn staging_writes_what_changes_against_committed_times() {
        let mut index = TimerIndex::default();
        let t = ident(1, b"k", "on");
        index.apply(vec![(t.clone(), Some((10, b"first".to_vec())))]);
        let again = Some((10, b"second".to_vec()));
        assert_eq!(
            index.stage(&[(t.clone(), again.clone())]),
            ColumnOps::default()
        );
        index.apply(vec![(t.clone(), again)]); // set again: keeps its cause
        assert_eq!(index.due(1, None, None)[0].3, b"first");
        let moved = index.stage(&[(t.clone(), Some((20, b"x".to_vec())))]);
        assert_eq!(moved.deletes, vec![order_key(1, b"k", "on", 10)]);
        let mut value = encode_time(20).to_vec();
        value.extend_from_slice(b"x");
        assert_eq!(
            moved.puts,
            vec![
                (order_key(1, b"k", "on", 20), vec![]),
                (index_key(1, b"k", "on"), value)
            ]
        );
        let gone = index.stage(&[(t.clone(), None)]);
        assert_eq!(
            gone.deletes,
            vec![order_key(1, b"k", "on", 10), index_key(1, b"k", "on")]
        );
        let never = index.stage(&[(ident(1, b"other", "x"), None)]);
        assert_eq!(never, ColumnOps::default());
    }

    #[test]
    fn index_keys_decode_back() {
        let raw = index_key(2, b"\x00key", "tag/\u{e9}");
        assert_eq!(
            decode_index_key(&raw),
            Some(ident(2, b"\x00key", "tag/\u{e9}"))
        );
        assert_eq!(decode_index_key(b"I\x01\x00\x00\x00\x09ab"), None);
        assert_eq!(decode_index_key(b"T"), None);
    }
    proptest::proptest! {
        /// Any timers (keys of any length, sharing prefixes and times), moved and
        /// deleted: due comes in the byte order of their time-ordered entries.
        #[test]
        fn due_is_the_entries_byte_order_for_any_timers(
            settings in proptest::collection::vec(
                (0u8..2, proptest::collection::vec(0u8..3, 0..20), "[ab]{0,2}", -3i64..3, proptest::bool::ANY),
                1..60,
            )
        ) {
            let mut index = TimerIndex::default();
            let mut model: std::collections::BTreeMap<Ident, i64> = Default::default();
            for (domain, key, tag, time_ms, delete) in settings {
                let id = (domain, key, tag);
                let change = if delete { None } else { Some((time_ms, Vec::new())) };
                match change {
                    None => { model.remove(&id); }
                    Some((t, _)) => { model.insert(id.clone(), t); }
                }
                index.apply(vec![(id, change)]);
            }
            for domain in 0..2u8 {
                let mut expected: Vec<_> = model
                    .iter()
                    .filter(|((d, _, _), _)| *d == domain)
                    .map(|((d, k, t), ms)| (order_key(*d, k, t, *ms), (k.clone(), t.clone(), *ms, Vec::new())))
                    .collect();
                expected.sort();
                let expected: Vec<Due> = expected.into_iter().map(|(_, due)| due).collect();
                proptest::prop_assert_eq!(index.due(domain, None, None), expected);
            }
        }
    }
}
