//! [`RecordBatch`]: the records of one request or one group of lines.

use bytes::Bytes;

/// One record as a client supplies it: key, value, event time (ms since the epoch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub key: Bytes,
    pub value: Bytes,
    pub event_time_ms: i64,
}

/// Records in order. Keys and values are [`Bytes`]: slices of the request they were
/// decoded from, so decoding copies no record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordBatch {
    records: Vec<Record>,
}

impl RecordBatch {
    /// An empty batch with room for `capacity` records.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            records: Vec::with_capacity(capacity),
        }
    }

    /// Appends one record.
    pub fn push(&mut self, record: Record) {
        self.records.push(record);
    }

    /// Appends every record of `other`.
    pub fn extend(&mut self, other: RecordBatch) {
        self.records.extend(other.records);
    }

    /// The records, in order.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True without records.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Key plus value bytes of every record.
    pub fn payload_bytes(&self) -> usize {
        self.records
            .iter()
            .map(|r| r.key.len() + r.value.len())
            .sum()
    }

    /// SHA-256 over each record's key length (u64), value length (u64) and event time
    /// (i64), big-endian, then its key and value, in order.
    pub fn sha256(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut digest = Sha256::new();
        for r in &self.records {
            digest.update((r.key.len() as u64).to_be_bytes());
            digest.update((r.value.len() as u64).to_be_bytes());
            digest.update(r.event_time_ms.to_be_bytes());
            digest.update(&r.key);
            digest.update(&r.value);
        }
        digest.finalize().into()
    }

    /// The oldest and newest event times; `(0, 0)` without records.
    pub fn time_range(&self) -> (i64, i64) {
        let mut times = self.records.iter().map(|r| r.event_time_ms);
        match times.next() {
            None => (0, 0),
            Some(first) => times.fold((first, first), |(lo, hi), t| (lo.min(t), hi.max(t))),
        }
    }
}

impl FromIterator<Record> for RecordBatch {
    fn from_iter<I: IntoIterator<Item = Record>>(iter: I) -> Self {
        Self {
            records: iter.into_iter().collect(),
        }
    }
}
