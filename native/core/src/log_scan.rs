//! Reading the durable log: the RECORD entries of a stretch of a segment file, checked
//! (length, crc32, entry type, dense offsets) as the segment's reader must.
//!
//! The caller reads the file and hands over what it read; a scan stops at the end of
//! the bytes (asking for more unless they reach the durable end of the segment), at
//! `stop_offset`, or after `max_records` records.

use bytes::Bytes;

use crate::log_format::{COMMIT, COMMIT_HEAD_SIZE, PREFIX_SIZE, RECORD, RECORD_HEAD_SIZE};

/// Records read from the log, in offset order (consecutive offsets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogRecords {
    pub offsets: Vec<u64>,
    pub event_times: Vec<i64>,
    pub ingest_times: Vec<i64>,
    pub keys: Vec<Bytes>,
    pub values: Vec<Bytes>,
}

impl LogRecords {
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// How many leading records have keys and values totalling at most `budget`
    /// bytes, at least one (a record larger than the budget goes alone).
    pub fn count_within(&self, budget: usize) -> usize {
        let mut total = 0usize;
        let mut count = 0;
        for (key, value) in self.keys.iter().zip(&self.values) {
            total = total.saturating_add(key.len() + value.len());
            if count > 0 && total > budget {
                break;
            }
            count += 1;
        }
        count
    }

    /// The first `count` records.
    pub fn head(&self, count: usize) -> LogRecords {
        let count = count.min(self.len());
        LogRecords {
            offsets: self.offsets[..count].to_vec(),
            event_times: self.event_times[..count].to_vec(),
            ingest_times: self.ingest_times[..count].to_vec(),
            keys: self.keys[..count].to_vec(),
            values: self.values[..count].to_vec(),
        }
    }

    /// Appends every record of `other` (whose offsets follow this one's).
    pub fn extend(&mut self, other: LogRecords) {
        self.offsets.extend(other.offsets);
        self.event_times.extend(other.event_times);
        self.ingest_times.extend(other.ingest_times);
        self.keys.extend(other.keys);
        self.values.extend(other.values);
    }
}

/// Where a scan of some bytes ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scanned {
    pub records: LogRecords,
    /// Bytes of the input fully gone through (whole entries).
    pub consumed: usize,
    /// The offset the next RECORD entry must carry.
    pub expected: u64,
    /// True once `stop_offset` or `max_records` was reached: read no further.
    pub finished: bool,
}

/// An entry failed its checks at file position `position`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryError {
    pub position: u64,
    pub reason: String,
}

/// What to read from `data`, the bytes of a segment from file position `position` on.
#[derive(Clone, Copy, Debug)]
pub struct ScanRange {
    pub position: u64,
    /// The offset the first RECORD entry in `data` must carry.
    pub expected: u64,
    /// Records below this offset are checked but not returned.
    pub from_offset: u64,
    /// The scan finishes at the first record at or past this offset.
    pub stop_offset: u64,
    pub max_records: usize,
    /// `data` reaches the durable end of the segment: an entry cut short is torn.
    pub complete: bool,
}

/// The records of `data` within `range` (see [`ScanRange`]).
pub fn scan_records(data: &Bytes, range: ScanRange) -> Result<Scanned, EntryError> {
    let mut records = LogRecords::default();
    let mut at = 0usize;
    let mut expected = range.expected;
    let error = |at: usize, reason: String| EntryError {
        position: range.position + at as u64,
        reason,
    };
    let mut finished = false;
    while at < data.len() {
        let avail = data.len() - at;
        if avail < PREFIX_SIZE {
            if range.complete {
                return Err(error(
                    at,
                    format!("torn entry header: {avail} bytes left, {PREFIX_SIZE} needed"),
                ));
            }
            break;
        }
        let length = u32::from_be_bytes(data[at..at + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(data[at + 4..at + 8].try_into().expect("4 bytes"));
        if length == 0 {
            return Err(error(at, "bad entry length 0".into()));
        }
        if avail < PREFIX_SIZE + length {
            if range.complete {
                let needed = PREFIX_SIZE + length;
                return Err(error(
                    at,
                    format!("torn entry: {avail} bytes left, {needed} needed"),
                ));
            }
            break;
        }
        let body = &data[at + PREFIX_SIZE..at + PREFIX_SIZE + length];
        if crc32fast::hash(body) != crc {
            return Err(error(at, "crc mismatch".into()));
        }
        match body[0] {
            RECORD => {
                if body.len() < RECORD_HEAD_SIZE {
                    return Err(error(at, "RECORD entry too short".into()));
                }
                let offset = u64::from_be_bytes(body[1..9].try_into().expect("8 bytes"));
                if offset != expected {
                    return Err(error(
                        at,
                        format!("record offset {offset}, expected {expected}"),
                    ));
                }
                expected += 1;
                if offset >= range.stop_offset {
                    finished = true;
                    break;
                }
                if offset >= range.from_offset {
                    let key_len =
                        u32::from_be_bytes(body[25..29].try_into().expect("4 bytes")) as usize;
                    if RECORD_HEAD_SIZE + key_len > body.len() {
                        return Err(error(at, "RECORD key overruns the entry".into()));
                    }
                    let start = at + PREFIX_SIZE;
                    let key_at = start + RECORD_HEAD_SIZE;
                    records.offsets.push(offset);
                    records
                        .event_times
                        .push(i64::from_be_bytes(body[9..17].try_into().expect("8 bytes")));
                    records.ingest_times.push(i64::from_be_bytes(
                        body[17..25].try_into().expect("8 bytes"),
                    ));
                    records.keys.push(data.slice(key_at..key_at + key_len));
                    records
                        .values
                        .push(data.slice(key_at + key_len..start + length));
                }
            }
            COMMIT => {}
            kind => return Err(error(at, format!("unknown entry type {kind}"))),
        }
        at += PREFIX_SIZE + length;
        if records.len() >= range.max_records {
            finished = true;
            break;
        }
    }
    Ok(Scanned {
        records,
        consumed: at,
        expected,
        finished,
    })
}

/// One RECORD entry of a request, as the segment holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    /// File position of the entry.
    pub position: u64,
    /// The entry's body (head, key and value).
    pub body: Bytes,
    pub offset: u64,
    pub event_time_ms: i64,
    pub ingest_time_ms: i64,
    pub key_len: u32,
}

/// A request's COMMIT entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitEntry {
    pub first_offset: u64,
    pub count: u32,
    pub idempotency_key: Bytes,
    pub source: Bytes,
    pub committed_at_ms: i64,
}

/// A whole request: its records (when kept), its COMMIT, and the file position after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub records: Vec<RecordEntry>,
    pub commit: CommitEntry,
    pub end: u64,
}

/// The first entry that breaks the rules of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestError {
    pub position: u64,
    pub reason: String,
    /// False when the problem is not an entry at all (records lacking a COMMIT at the end).
    pub complete: bool,
    /// Complete records after the last valid COMMIT.
    pub uncommitted: u64,
}

/// The whole requests of some bytes, and where the next scan starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestScan {
    pub requests: Vec<Request>,
    /// Bytes of the input up to the end of the last whole request.
    pub consumed: usize,
    /// The offset of the first record after the last whole request.
    pub expected: u64,
    /// The entry that stopped the scan, if one did (the requests before it are good).
    pub error: Option<RequestError>,
}

/// The whole requests of `data`, the bytes of a segment from `position` on (a request's
/// start), checked entry by entry: framing, crc32, entry types, dense offsets from
/// `expected`, every COMMIT covering exactly the records since the previous one. With
/// `complete`, `data` reaches the durable end: a cut entry is torn and records without
/// their COMMIT are an error; otherwise the scan stops at the last whole request.
pub fn scan_requests(
    data: &Bytes,
    position: u64,
    expected: u64,
    complete: bool,
    keep_records: bool,
) -> RequestScan {
    let mut scan = RequestScan {
        expected,
        ..RequestScan::default()
    };
    let mut pending: Vec<RecordEntry> = Vec::new();
    let mut next = expected; // the offset the next RECORD must carry
    let mut first_position = position;
    let mut at = 0usize;
    let fail = |scan: &mut RequestScan, at: usize, reason: String, next: u64| {
        scan.error = Some(RequestError {
            position: position + at as u64,
            reason,
            complete: true,
            uncommitted: next - scan.expected,
        });
    };
    while at < data.len() {
        let avail = data.len() - at;
        if avail < PREFIX_SIZE {
            if complete {
                let reason = format!("torn entry header: {avail} bytes left, {PREFIX_SIZE} needed");
                fail(&mut scan, at, reason, next);
                return scan;
            }
            break;
        }
        let length = u32::from_be_bytes(data[at..at + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(data[at + 4..at + 8].try_into().expect("4 bytes"));
        if length == 0 {
            fail(&mut scan, at, "bad entry length 0".into(), next);
            return scan;
        }
        if avail < PREFIX_SIZE + length {
            if complete {
                let needed = PREFIX_SIZE + length;
                let reason = format!("torn entry: {avail} bytes left, {needed} needed");
                fail(&mut scan, at, reason, next);
                return scan;
            }
            break;
        }
        let start = at + PREFIX_SIZE;
        let body = data.slice(start..start + length);
        if crc32fast::hash(&body) != crc {
            fail(&mut scan, at, "crc mismatch".into(), next);
            return scan;
        }
        let entry_position = position + at as u64;
        match body[0] {
            RECORD => {
                if length < RECORD_HEAD_SIZE {
                    let reason = format!("RECORD entry too short ({length} bytes)");
                    fail(&mut scan, at, reason, next);
                    return scan;
                }
                let offset = u64::from_be_bytes(body[1..9].try_into().expect("8 bytes"));
                let key_len = u32::from_be_bytes(body[25..29].try_into().expect("4 bytes"));
                if RECORD_HEAD_SIZE + key_len as usize > length {
                    fail(&mut scan, at, "RECORD key overruns the entry".into(), next);
                    return scan;
                }
                if offset != next {
                    let reason = format!("record offset {offset}, expected {next}");
                    fail(&mut scan, at, reason, next);
                    return scan;
                }
                if next == scan.expected {
                    first_position = entry_position;
                }
                next += 1;
                if keep_records {
                    pending.push(RecordEntry {
                        position: entry_position,
                        offset,
                        event_time_ms: i64::from_be_bytes(body[9..17].try_into().expect("8")),
                        ingest_time_ms: i64::from_be_bytes(body[17..25].try_into().expect("8")),
                        key_len,
                        body,
                    });
                }
            }
            COMMIT => {
                let commit = match decode_commit(&body) {
                    Ok(commit) => commit,
                    Err(reason) => {
                        fail(&mut scan, at, reason, next);
                        return scan;
                    }
                };
                let preceding = next - scan.expected;
                if commit.first_offset != scan.expected || u64::from(commit.count) != preceding {
                    let reason = format!(
                        "COMMIT covers {} records from {} but {} records from {} precede it",
                        commit.count, commit.first_offset, preceding, scan.expected
                    );
                    fail(&mut scan, at, reason, next);
                    return scan;
                }
                at += PREFIX_SIZE + length;
                scan.requests.push(Request {
                    records: std::mem::take(&mut pending),
                    commit,
                    end: position + at as u64,
                });
                scan.consumed = at;
                scan.expected = next;
                continue;
            }
            kind => {
                fail(&mut scan, at, format!("unknown entry type {kind}"), next);
                return scan;
            }
        }
        at += PREFIX_SIZE + length;
    }
    if complete && at >= data.len() && next != scan.expected {
        scan.error = Some(RequestError {
            position: first_position,
            reason: format!("{} records without a COMMIT", next - scan.expected),
            complete: false,
            uncommitted: next - scan.expected,
        });
    }
    scan
}

/// The records of a scan's requests as columns; positions relative to the scanned data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordColumns {
    pub offset: Vec<i64>,
    pub event_time_ms: Vec<i64>,
    pub ingest_time_ms: Vec<i64>,
    pub key_start: Vec<i64>,
    pub key_end: Vec<i64>,
    pub value_end: Vec<i64>,
}

/// The records of `scan`'s requests (the data scanned started at file `position`) as
/// columns: where each key and value lies in that data.
pub fn columns_of(scan: &RequestScan, position: u64) -> RecordColumns {
    let mut columns = RecordColumns::default();
    for record in scan.requests.iter().flat_map(|r| &r.records) {
        let body_start = (record.position - position) as i64 + PREFIX_SIZE as i64;
        let key_start = body_start + RECORD_HEAD_SIZE as i64;
        columns.offset.push(record.offset as i64);
        columns.event_time_ms.push(record.event_time_ms);
        columns.ingest_time_ms.push(record.ingest_time_ms);
        columns.key_start.push(key_start);
        columns.key_end.push(key_start + i64::from(record.key_len));
        columns
            .value_end
            .push(body_start + record.body.len() as i64);
    }
    columns
}

/// A COMMIT body's fields, or why its lengths do not add up.
pub fn decode_commit(body: &Bytes) -> Result<CommitEntry, String> {
    const MIN: usize = COMMIT_HEAD_SIZE + 4 + 8;
    if body.len() < MIN {
        return Err(format!("COMMIT entry too short ({} bytes)", body.len()));
    }
    let first_offset = u64::from_be_bytes(body[1..9].try_into().expect("8 bytes"));
    let count = u32::from_be_bytes(body[9..13].try_into().expect("4 bytes"));
    let key_len = u16::from_be_bytes(body[13..15].try_into().expect("2 bytes")) as usize;
    let at = COMMIT_HEAD_SIZE + key_len;
    if at + 4 > body.len() {
        return Err("COMMIT idempotency key overruns the entry".into());
    }
    let source_len = u32::from_be_bytes(body[at..at + 4].try_into().expect("4 bytes")) as usize;
    let source_at = at + 4;
    if source_at + source_len + 8 != body.len() {
        return Err("COMMIT lengths do not add up to the entry length".into());
    }
    let time_at = source_at + source_len;
    Ok(CommitEntry {
        first_offset,
        count,
        idempotency_key: body.slice(COMMIT_HEAD_SIZE..at),
        source: body.slice(source_at..time_at),
        committed_at_ms: i64::from_be_bytes(body[time_at..].try_into().expect("8 bytes")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{Record, RecordBatch};
    use crate::log_format::{encode_request, Placement};

    fn sized(sizes: &[(usize, usize)]) -> LogRecords {
        let mut records = LogRecords::default();
        for (i, (k, v)) in sizes.iter().enumerate() {
            records.offsets.push(10 + i as u64);
            records.event_times.push(i as i64);
            records.ingest_times.push(0);
            records.keys.push(Bytes::from(vec![b'k'; *k]));
            records.values.push(Bytes::from(vec![b'v'; *v]));
        }
        records
    }

    #[test]
    fn a_byte_budget_takes_the_leading_records_and_at_least_one() {
        let records = sized(&[(1, 9), (2, 8), (0, 10), (5, 5)]);
        assert_eq!(records.count_within(40), 4);
        assert_eq!(records.count_within(25), 2);
        assert_eq!(records.count_within(20), 2);
        assert_eq!(
            records.count_within(3),
            1,
            "a record over the budget goes alone"
        );
        assert_eq!(LogRecords::default().count_within(0), 0);
        let first = records.head(1);
        assert_eq!(first.offsets, vec![10]);
        assert_eq!(first.values, vec![records.values[0].clone()]);
        assert_eq!(records.head(9), records);
    }

    fn segment(records: u64) -> Bytes {
        let batch: RecordBatch = (0..records)
            .map(|i| Record {
                key: Bytes::from(format!("k{i}")),
                value: Bytes::from(format!("value {i}")),
                event_time_ms: i as i64 * 10,
            })
            .collect();
        let at = Placement {
            offset: 100,
            ingest_ms: 5,
            position: 16,
            next_index: 0,
            index_every: 1000,
        };
        Bytes::from(encode_request(&batch, b"ik", b"", at).unwrap().bytes)
    }

    fn range(complete: bool) -> ScanRange {
        ScanRange {
            position: 16,
            expected: 100,
            from_offset: 0,
            stop_offset: u64::MAX,
            max_records: usize::MAX,
            complete,
        }
    }

    #[test]
    fn every_record_is_read_with_its_fields() {
        let data = segment(3);
        let scanned = scan_records(&data, range(true)).unwrap();
        assert_eq!(scanned.records.offsets, [100, 101, 102]);
        assert_eq!(scanned.records.event_times, [0, 10, 20]);
        assert_eq!(scanned.records.ingest_times, [5, 5, 5]);
        assert_eq!(&scanned.records.keys[2][..], b"k2");
        assert_eq!(&scanned.records.values[1][..], b"value 1");
        assert_eq!(scanned.consumed, data.len());
        assert_eq!(scanned.expected, 103);
        assert!(!scanned.finished);
    }

    #[test]
    fn a_scan_stops_where_asked() {
        let data = segment(5);
        let mut r = range(true);
        r.from_offset = 101;
        r.stop_offset = 104;
        let scanned = scan_records(&data, r).unwrap();
        assert_eq!(scanned.records.offsets, [101, 102, 103]);
        assert!(scanned.finished);
        r.stop_offset = u64::MAX;
        r.max_records = 2;
        let scanned = scan_records(&data, r).unwrap();
        assert_eq!(scanned.records.offsets, [101, 102]);
        assert!(scanned.finished);
    }

    #[test]
    fn a_cut_entry_asks_for_more_or_is_torn() {
        let data = segment(2);
        let cut = data.slice(..data.len() - 3);
        let scanned = scan_records(&cut, range(false)).unwrap();
        assert_eq!(scanned.records.len(), 2);
        assert!(scanned.consumed < cut.len());
        let torn = scan_records(&cut, range(true)).unwrap_err();
        assert!(torn.reason.starts_with("torn entry:"), "{torn:?}");
    }

    #[test]
    fn damage_is_named_with_its_position() {
        let mut bytes = segment(2).to_vec();
        bytes[12] ^= 0xff; // inside the first entry's body
        let error = scan_records(&Bytes::from(bytes), range(true)).unwrap_err();
        assert_eq!(
            error,
            EntryError {
                position: 16,
                reason: "crc mismatch".into()
            }
        );
        let mut r = range(true);
        r.expected = 7;
        let error = scan_records(&segment(1), r).unwrap_err();
        assert_eq!(error.reason, "record offset 100, expected 7");
    }

    #[test]
    fn requests_come_whole_with_their_commits() {
        let data = segment(3);
        let scan = scan_requests(&data, 16, 100, true, true);
        assert_eq!(scan.error, None);
        assert_eq!(scan.requests.len(), 1);
        let request = &scan.requests[0];
        assert_eq!(request.records.len(), 3);
        assert_eq!(request.records[1].offset, 101);
        assert_eq!(request.commit.first_offset, 100);
        assert_eq!(request.commit.count, 3);
        assert_eq!(&request.commit.idempotency_key[..], b"ik");
        assert_eq!(request.end, 16 + data.len() as u64);
        assert_eq!((scan.consumed, scan.expected), (data.len(), 103));
    }

    #[test]
    fn records_without_their_commit_are_not_a_request() {
        let data = segment(2);
        let cut = data.slice(..data.len() - 3);
        let partial = scan_requests(&cut, 16, 100, false, true);
        assert_eq!(
            (partial.requests.len(), partial.consumed, partial.error),
            (0, 0, None)
        );
        let torn = scan_requests(&cut, 16, 100, true, true).error.unwrap();
        assert!(
            torn.reason.starts_with("torn entry:") && torn.complete,
            "{torn:?}"
        );
        assert_eq!(torn.uncommitted, 2);
        // The whole records, but not their COMMIT.
        let records_only = data.slice(..data.len() - (PREFIX_SIZE + COMMIT_HEAD_SIZE + 2 + 4 + 8));
        let missing = scan_requests(&records_only, 16, 100, true, true)
            .error
            .unwrap();
        assert_eq!(missing.reason, "2 records without a COMMIT");
        assert!(!missing.complete);
        assert_eq!(missing.position, 16);
    }
}
