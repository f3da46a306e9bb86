//! The durable log's entries (`docs/log-format.md`): a request's RECORD entries and
//! its COMMIT, as the log appends them.
//!
//! An entry is `body length u32 | crc32 u32 | body` (big-endian; crc32 is zlib's).
//! RECORD body: `1 | offset u64 | event ms i64 | ingest ms i64 | key length u32 | key |
//! value`. COMMIT body: `2 | first offset u64 | count u32 | idempotency key length u16 |
//! key | source length u32 | source | commit ms i64`.

use crate::batch::RecordBatch;

pub const PREFIX_SIZE: usize = 8;
pub const RECORD_HEAD_SIZE: usize = 1 + 8 + 8 + 8 + 4;
pub const COMMIT_HEAD_SIZE: usize = 1 + 8 + 4 + 2;
pub const RECORD: u8 = 1;
pub const COMMIT: u8 = 2;

/// Where a request's entries go and which offsets the sparse index wants.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    /// Offset of the first record.
    pub offset: u64,
    /// Ingest time of every record, and the commit time.
    pub ingest_ms: i64,
    /// File position of the first entry.
    pub position: u64,
    /// The next offset the index wants an entry for; then every `index_every` offsets.
    pub next_index: u64,
    pub index_every: u64,
}

/// A request's entries and what the segment learns from them.
#[derive(Debug, Default)]
pub struct Encoded {
    pub bytes: Vec<u8>,
    /// `(offset, file position)` of the records the index wanted.
    pub index: Vec<(u64, u64)>,
    /// File position after the COMMIT.
    pub position: u64,
    pub next_index: u64,
    /// Oldest and newest event time; `(0, 0)` without records.
    pub time_range: (i64, i64),
}

/// Why a request cannot be encoded (nothing was produced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeError {
    IdempotencyKeyTooLong(usize),
    SourceTooLong(usize),
    TooManyRecords(usize),
    KeyTooLong(usize),
    OffsetOverflow(u64),
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::IdempotencyKeyTooLong(n) => {
                write!(f, "idempotency_key has {n} bytes; at most 65535 fit")
            }
            Self::SourceTooLong(n) => write!(f, "source has {n} bytes; at most 2^32 - 1 fit"),
            Self::TooManyRecords(n) => write!(f, "{n} records; at most 2^32 - 1 fit a COMMIT"),
            Self::KeyTooLong(n) => write!(f, "a key has {n} bytes; at most 2^32 - 1 fit"),
            Self::OffsetOverflow(o) => write!(f, "offsets from {o} run past 2^64 - 1"),
        }
    }
}

/// The entries of one request: its records from `at.offset`, then its COMMIT.
pub fn encode_request(
    batch: &RecordBatch,
    idempotency_key: &[u8],
    source: &[u8],
    at: Placement,
) -> Result<Encoded, EncodeError> {
    let key_len = u16::try_from(idempotency_key.len())
        .map_err(|_| EncodeError::IdempotencyKeyTooLong(idempotency_key.len()))?;
    let source_len =
        u32::try_from(source.len()).map_err(|_| EncodeError::SourceTooLong(source.len()))?;
    let count = u32::try_from(batch.len()).map_err(|_| EncodeError::TooManyRecords(batch.len()))?;
    let commit_body = COMMIT_HEAD_SIZE + idempotency_key.len() + 4 + source.len() + 8;
    let records_size = batch.len() * (PREFIX_SIZE + RECORD_HEAD_SIZE) + batch.payload_bytes();
    let mut bytes = Vec::with_capacity(records_size + PREFIX_SIZE + commit_body);
    let mut index = Vec::new();
    let mut next_index = at.next_index;
    if at.offset.checked_add(u64::from(count)).is_none() {
        return Err(EncodeError::OffsetOverflow(at.offset));
    }
    for (i, record) in batch.records().iter().enumerate() {
        let offset = at.offset + i as u64;
        let record_key_len = u32::try_from(record.key.len())
            .map_err(|_| EncodeError::KeyTooLong(record.key.len()))?;
        if offset == next_index {
            index.push((offset, at.position + bytes.len() as u64));
            next_index = offset + at.index_every.max(1);
        }
        let start = bytes.len();
        let body_len = RECORD_HEAD_SIZE + record.key.len() + record.value.len();
        bytes.extend_from_slice(&(body_len as u32).to_be_bytes());
        bytes.extend_from_slice(&[0; 4]); // crc, once the body is written
        bytes.push(RECORD);
        bytes.extend_from_slice(&offset.to_be_bytes());
        bytes.extend_from_slice(&record.event_time_ms.to_be_bytes());
        bytes.extend_from_slice(&at.ingest_ms.to_be_bytes());
        bytes.extend_from_slice(&record_key_len.to_be_bytes());
        bytes.extend_from_slice(&record.key);
        bytes.extend_from_slice(&record.value);
        let crc = crc32fast::hash(&bytes[start + PREFIX_SIZE..]);
        bytes[start + 4..start + PREFIX_SIZE].copy_from_slice(&crc.to_be_bytes());
    }
    let start = bytes.len();
    bytes.extend_from_slice(&(commit_body as u32).to_be_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.push(COMMIT);
    bytes.extend_from_slice(&at.offset.to_be_bytes());
    bytes.extend_from_slice(&count.to_be_bytes());
    bytes.extend_from_slice(&key_len.to_be_bytes());
    bytes.extend_from_slice(idempotency_key);
    bytes.extend_from_slice(&source_len.to_be_bytes());
    bytes.extend_from_slice(source);
    bytes.extend_from_slice(&at.ingest_ms.to_be_bytes());
    let crc = crc32fast::hash(&bytes[start + PREFIX_SIZE..]);
    bytes[start + 4..start + PREFIX_SIZE].copy_from_slice(&crc.to_be_bytes());
    let position = at.position + bytes.len() as u64;
    Ok(Encoded {
        bytes,
        index,
        position,
        next_index,
        time_range: batch.time_range(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Record;
    use bytes::Bytes;

    fn batch(n: u64) -> RecordBatch {
        (0..n)
            .map(|i| Record {
                key: Bytes::from(format!("k{i}")),
                value: Bytes::from_static(b"value"),
                event_time_ms: 1000 - i as i64,
            })
            .collect()
    }

    fn at(next_index: u64) -> Placement {
        Placement {
            offset: 10,
            ingest_ms: 7,
            position: 16,
            next_index,
            index_every: 3,
        }
    }

    #[test]
    fn entries_are_framed_and_checksummed() {
        let encoded = encode_request(&batch(2), b"ik", b"src", at(100)).unwrap();
        let mut cursor = 0;
        let mut kinds = vec![];
        while cursor < encoded.bytes.len() {
            let b = &encoded.bytes;
            let len = u32::from_be_bytes(b[cursor..cursor + 4].try_into().unwrap()) as usize;
            let crc = u32::from_be_bytes(b[cursor + 4..cursor + 8].try_into().unwrap());
            let body = &b[cursor + 8..cursor + 8 + len];
            assert_eq!(crc, crc32fast::hash(body));
            kinds.push(body[0]);
            cursor += 8 + len;
        }
        assert_eq!(kinds, [RECORD, RECORD, COMMIT]);
        assert_eq!(encoded.position, 16 + encoded.bytes.len() as u64);
        assert_eq!(encoded.time_range, (999, 1000));
        assert!(encoded.index.is_empty());
        assert_eq!(encoded.next_index, 100);
    }

    #[test]
    fn the_index_gets_every_nth_offset() {
        let encoded = encode_request(&batch(7), b"", b"", at(11)).unwrap();
        let offsets: Vec<u64> = encoded.index.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, [11, 14]);
        assert_eq!(encoded.next_index, 17);
        let entry = (PREFIX_SIZE + RECORD_HEAD_SIZE + 2 + 5) as u64;
        assert_eq!(encoded.index[0].1, 16 + entry);
    }

    #[test]
    fn a_long_idempotency_key_is_refused() {
        let key = vec![b'x'; 70_000];
        let error = encode_request(&batch(1), &key, b"", at(0)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "idempotency_key has 70000 bytes; at most 65535 fit"
        );
    }
}
