//! Every committed timer of one store, in memory, and the `TIMERS` column's operations
//! of a commit that changes them (`statestore/_timer_index.py`, `docs/store-format.md`).
//!
//! A timer is `(domain, key, tag)` set for a time. The column holds one entry per
//! timer, its index entry `I, domain, key length (4 bytes big-endian), key, tag`
//! whose value is the time (8 bytes, order-preserving) and the cause. Due timers come
//! in time order, then in the byte order of their identity (key length, key, tag):
//! the order of the time-ordered entries `T, domain, time, identity` that stores
//! before this one also wrote (nothing reads them; a store drops them when opened).
//!
//! Each timer's index key is made once, when a commit's changes are read, and shared
//! by the map of times and the ordered set: a change costs no key copies.

use hashbrown::HashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

/// First byte of an index entry.
pub const TIMER_INDEX: u8 = b'I';
const SIGN: u64 = 1 << 63;
/// Bytes before the key in an index key: `I`, domain, key length.
const HEAD: usize = 6;

/// `(domain, key, tag)`: which timer.
pub type Ident = (u8, Vec<u8>, String);

/// A timer's index key, shared.
pub type IndexKey = Arc<[u8]>;

/// The place of a timer in time order: domain, time, index key (whose bytes after
/// the shared `I, domain` are the identity's).
type Slot = (u8, i64, IndexKey);

/// A timer that is due: its key, tag, time and cause.
pub type Due = (Vec<u8>, String, i64, Vec<u8>);

/// A timer's time and cause.
pub type Setting = (i64, Vec<u8>);

/// One change of a commit: the timer's index key and its new setting (None: deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub index: IndexKey,
    pub setting: Option<Setting>,
}

impl Change {
    /// The change of timer `(domain, key, tag)` to `setting`.
    pub fn new(domain: u8, key: &[u8], tag: &str, setting: Option<Setting>) -> Self {
        Self {
            index: index_key(domain, key, tag).into(),
            setting,
        }
    }
}

/// What a commit writes to the `TIMERS` column for its timer changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ColumnOps {
    pub deletes: Vec<IndexKey>,
    pub puts: Vec<(IndexKey, Vec<u8>)>,
}

/// The committed timers of one store.
#[derive(Debug, Default)]
pub struct TimerIndex {
    /// Each timer's time and cause by its index key.
    times: HashMap<IndexKey, Setting>,
    order: BTreeSet<Slot>,
}

/// `time_ms` as 8 bytes whose byte order is numeric order.
pub fn encode_time(time_ms: i64) -> [u8; 8] {
    ((time_ms as u64) ^ SIGN).to_be_bytes()
}

/// Inverse of [`encode_time`].
pub fn decode_time(bytes: [u8; 8]) -> i64 {
    (u64::from_be_bytes(bytes) ^ SIGN) as i64
}

/// The index entry's key of a timer.
pub fn index_key(domain: u8, key: &[u8], tag: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD + key.len() + tag.len());
    out.push(TIMER_INDEX);
    out.push(domain);
    // Keys longer than 4 GiB cannot reach a store (messages are far smaller).
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(tag.as_bytes());
    out
}

/// The key and tag of an index key (well formed: made here or checked by
/// [`decode_index_key`]).
fn key_and_tag(index: &[u8]) -> (&[u8], &[u8]) {
    let len = u32::from_be_bytes([index[2], index[3], index[4], index[5]]) as usize;
    index[HEAD..].split_at(len)
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
        let index = index_key(*domain, key, tag);
        self.times.get(&index[..]).map(|s| s.0)
    }

    /// The column's operations for a commit's changes, against the committed timers;
    /// a timer set again to its time writes nothing (it keeps the cause it has).
    pub fn stage(&self, changes: &[Change]) -> ColumnOps {
        let mut ops = ColumnOps::default();
        for Change { index, setting } in changes {
            let old = self.times.get(index).map(|s| s.0);
            match setting {
                None if old.is_some() => ops.deletes.push(index.clone()),
                None => {}
                Some((time_ms, _)) if old == Some(*time_ms) => {}
                Some((time_ms, cause)) => {
                    let mut value = Vec::with_capacity(8 + cause.len());
                    value.extend_from_slice(&encode_time(*time_ms));
                    value.extend_from_slice(cause);
                    ops.puts.push((index.clone(), value));
                }
            }
        }
        ops
    }

    /// A commit's changes, once it is durable.
    pub fn apply(&mut self, changes: Vec<Change>) {
        for Change { index, setting } in changes {
            let domain = index[1];
            match setting {
                None => {
                    if let Some((index, (old, _))) = self.times.remove_entry(&index) {
                        self.order.remove(&(domain, old, index));
                    }
                }
                Some(setting) => {
                    let time_ms = setting.0;
                    match self.times.get_mut(&index) {
                        Some(old) if old.0 == time_ms => continue, // set again: as staged
                        Some(old) => {
                            let old = std::mem::replace(old, setting).0;
                            self.order.remove(&(domain, old, index.clone()));
                        }
                        None => {
                            self.times.insert(index.clone(), setting);
                        }
                    }
                    self.order.insert((domain, time_ms, index));
                }
            }
        }
    }

    /// The earliest timer time of `domain`.
    pub fn earliest(&self, domain: u8) -> Option<i64> {
        self.of_domain(domain).next().map(|slot| slot.1)
    }

    /// Timers of `domain` at or before `up_to_ms` (None: all), in time order, at most
    /// `limit` of them (None: all).
    pub fn due(&self, domain: u8, up_to_ms: Option<i64>, limit: Option<usize>) -> Vec<Due> {
        self.of_domain(domain)
            .take_while(|slot| up_to_ms.is_none_or(|up_to| slot.1 <= up_to))
            .take(limit.unwrap_or(usize::MAX))
            .map(|(_, time_ms, index)| {
                let cause = self
                    .times
                    .get(index)
                    .map(|s| s.1.clone())
                    .unwrap_or_default();
                let (key, tag) = key_and_tag(index);
                let tag = String::from_utf8_lossy(tag).into_owned();
                (key.to_vec(), tag, *time_ms, cause)
            })
            .collect()
    }

    fn of_domain(&self, domain: u8) -> impl Iterator<Item = &Slot> {
        let start: Slot = (domain, i64::MIN, Arc::from(&[][..]));
        self.order
            .range(start..)
            .take_while(move |slot| slot.0 == domain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(domain: u8, key: &[u8], tag: &str) -> Ident {
        (domain, key.to_vec(), tag.to_string())
    }

    fn change((domain, key, tag): &Ident, setting: Option<Setting>) -> Change {
        Change::new(*domain, key, tag, setting)
    }

    /// The time-ordered entry earlier versions wrote (`T`, domain, time, identity): the
    /// order due timers come in.
    fn order_key(domain: u8, key: &[u8], tag: &str, time_ms: i64) -> Vec<u8> {
        let mut out = vec![b'T', domain];
        out.extend_from_slice(&encode_time(time_ms));
        out.extend_from_slice(&(key.len() as u32).to_be_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(tag.as_bytes());
        out
    }

    fn keys(ops: &[IndexKey]) -> Vec<Vec<u8>> {
        ops.iter().map(|k| k.to_vec()).collect()
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
                .map(|(i, t)| change(i, Some((*t, b"c".to_vec()))))
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
        index.apply(vec![change(&t, Some((10, b"a".to_vec())))]);
        index.apply(vec![change(&t, Some((20, b"b".to_vec())))]);
        let due = (b"k".to_vec(), "on".into(), 20, b"b".to_vec());
        assert_eq!(index.due(1, None, None), vec![due]);
        index.apply(vec![change(&t, None)]);
        assert!(index.due(1, None, None).is_empty() && index.is_empty());
        assert_eq!(index.earliest(1), None);
    }

    #[test]
    fn staging_writes_what_changes_against_committed_times() {
        let mut index = TimerIndex::default();
        let t = ident(1, b"k", "on");
        index.apply(vec![change(&t, Some((10, b"first".to_vec())))]);
        let again = change(&t, Some((10, b"second".to_vec())));
        assert_eq!(
            index.stage(std::slice::from_ref(&again)),
            ColumnOps::default()
        );
        index.apply(vec![again]); // set again: keeps its cause
        assert_eq!(index.due(1, None, None)[0].3, b"first");
        let moved = index.stage(&[change(&t, Some((20, b"x".to_vec())))]);
        assert!(
            moved.deletes.is_empty(),
            "one entry per timer: a move overwrites it"
        );
        let mut value = encode_time(20).to_vec();
        value.extend_from_slice(b"x");
        let puts: Vec<_> = moved
            .puts
            .iter()
            .map(|(k, v)| (k.to_vec(), v.clone()))
            .collect();
        assert_eq!(puts, vec![(index_key(1, b"k", "on"), value)]);
        let gone = index.stage(&[change(&t, None)]);
        assert_eq!(keys(&gone.deletes), vec![index_key(1, b"k", "on")]);
        assert!(gone.puts.is_empty());
        let never = index.stage(&[change(&ident(1, b"other", "x"), None)]);
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
        /// Commits of any changes (set, moved, set again, deleted, never set): the
        /// operations each stages keep the column (a map of its entries) holding
        /// exactly the index's timers, each entry's value its time and cause.
        #[test]
        fn staged_operations_keep_the_column_equal_to_the_index(
            commits in proptest::collection::vec(
                proptest::collection::btree_map(
                    (0u8..2, proptest::collection::vec(0u8..3, 0..4), "[ab]{0,2}"),
                    proptest::option::of((-3i64..3, proptest::collection::vec(0u8..2, 0..3))),
                    0..12,
                ),
                1..20,
            )
        ) {
            let mut index = TimerIndex::default();
            let mut column: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = Default::default();
            for commit in commits {
                let changes: Vec<Change> =
                    commit.into_iter().map(|(id, setting)| change(&id, setting)).collect();
                let ops = index.stage(&changes);
                for key in &ops.deletes {
                    proptest::prop_assert!(column.remove(&key.to_vec()).is_some());
                }
                for (key, value) in ops.puts {
                    column.insert(key.to_vec(), value);
                }
                index.apply(changes);
                proptest::prop_assert_eq!(index.len(), column.len());
                for (key, value) in &column {
                    let id = decode_index_key(key).unwrap();
                    let (time, cause) = value.split_at(8);
                    let time = decode_time(time.try_into().unwrap());
                    proptest::prop_assert_eq!(index.time_of(&id), Some(time));
                    let due = index.due(id.0, None, None);
                    let found = due.iter().find(|d| d.0 == id.1 && d.1 == id.2).unwrap();
                    proptest::prop_assert_eq!((found.2, &found.3[..]), (time, cause));
                }
            }
        }
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
                index.apply(vec![Change::new(id.0, &id.1, &id.2, change)]);
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
