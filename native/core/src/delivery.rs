//! What a receiver reads of `DeliveryBatch` messages: their records, in order, and
//! whether the batch is the usual one that admission takes whole (see
//! `engine/_keying.py`, `RecordKeying`).
//!
//! The header fields (`batch_seq`, `sender`, `target_epoch`) are not read here: the
//! receiver has them from the message gRPC parsed; this reads the same bytes once more
//! for the records alone, without a Python object per field access.

use bytes::Bytes;
use prost::Message;

use crate::frames::interval_of;
use crate::wire::{DeliveryFrame, Record};

/// The records of several `DeliveryBatch` messages, in order.
#[derive(Debug, Default)]
pub struct Delivered {
    pub records: Vec<Record>,
}

/// What admission asks of a delivered batch before taking it whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Every record has an id and no id is repeated.
    pub ids_distinct: bool,
    /// Every record is of the first record's stream.
    pub one_stream: bool,
    pub min_event_ms: i64,
    pub max_event_ms: i64,
    /// How many wire keys hash into the interval asked about.
    pub keys_in_interval: usize,
}

impl Delivered {
    /// The records of `wires` (each a serialized `DeliveryBatch`), in order.
    pub fn decode(wires: &[Bytes]) -> Result<Self, prost::DecodeError> {
        let mut records = Vec::new();
        for wire in wires {
            records.extend(DeliveryFrame::decode(wire.clone())?.records);
        }
        Ok(Self { records })
    }

    /// The batch's shape, the wire keys hashed into `count` intervals for `interval`.
    pub fn shape(&self, interval: u32, count: u32) -> Shape {
        let records = &self.records;
        let ids: Vec<&[u8]> = records.iter().map(|r| &r.record_id[..]).collect();
        let streams: Vec<&str> = records.iter().map(|r| r.stream.as_str()).collect();
        let keys: Vec<&[u8]> = records.iter().map(|r| &r.key[..]).collect();
        let times: Vec<i64> = records.iter().map(|r| r.event_time_ms).collect();
        Shape::of_columns(&ids, &streams, &keys, &times, interval, count)
    }
}

impl Shape {
    /// The shape of records given as columns (one entry per record, in order), the
    /// keys hashed into `count` intervals for `interval`.
    pub fn of_columns(
        ids: &[&[u8]],
        streams: &[&str],
        keys: &[&[u8]],
        times: &[i64],
        interval: u32,
        count: u32,
    ) -> Shape {
        let ids_present = ids.iter().all(|id| !id.is_empty());
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        let first = streams.first();
        Shape {
            ids_distinct: ids_present && sorted.windows(2).all(|w| w[0] != w[1]),
            one_stream: streams.iter().all(|s| Some(s) == first),
            min_event_ms: times.iter().copied().min().unwrap_or(0),
            max_event_ms: times.iter().copied().max().unwrap_or(0),
            keys_in_interval: if count <= 1 {
                keys.len()
            } else {
                keys.iter()
                    .filter(|k| interval_of(k, count) == interval)
                    .count()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::KeyInterval;

    fn record(id: &[u8], key: &[u8], stream: &str, ms: i64) -> Record {
        Record {
            record_id: Bytes::copy_from_slice(id),
            key: Bytes::copy_from_slice(key),
            value: Bytes::from_static(b"v"),
            event_time_ms: ms,
            producer: "injector".into(),
            stream: stream.into(),
        }
    }

    fn wire(records: Vec<Record>) -> Bytes {
        let frame = DeliveryFrame {
            target: Some(KeyInterval {
                computation: "c".into(),
                index: 0,
                count: 0,
            }),
            records,
        };
        Bytes::from(frame.encode_to_vec())
    }

    #[test]
    fn records_of_several_batches_in_order() {
        let a = wire(vec![record(b"1", b"k", "s", 5), record(b"2", b"k", "s", 3)]);
        let b = wire(vec![record(b"3", b"j", "s", 9)]);
        let got = Delivered::decode(&[a, b]).unwrap();
        let ids: Vec<&[u8]> = got.records.iter().map(|r| &r.record_id[..]).collect();
        assert_eq!(ids, [b"1", b"2", b"3"]);
        let shape = got.shape(0, 1);
        assert!(shape.ids_distinct && shape.one_stream);
        assert_eq!((shape.min_event_ms, shape.max_event_ms), (3, 9));
        assert_eq!(shape.keys_in_interval, 3);
    }

    #[test]
    fn repeated_or_missing_ids_and_mixed_streams_are_seen() {
        let repeated = Delivered::decode(&[wire(vec![
            record(b"1", b"k", "s", 1),
            record(b"1", b"k", "s", 1),
        ])])
        .unwrap();
        assert!(!repeated.shape(0, 1).ids_distinct);
        let missing = Delivered::decode(&[wire(vec![record(b"", b"k", "s", 1)])]).unwrap();
        assert!(!missing.shape(0, 1).ids_distinct);
        let mixed = Delivered::decode(&[wire(vec![
            record(b"1", b"k", "s", 1),
            record(b"2", b"k", "t", 1),
        ])])
        .unwrap();
        assert!(!mixed.shape(0, 1).one_stream);
    }

    #[test]
    fn keys_counted_by_their_interval() {
        let keys: Vec<Vec<u8>> = (0..64).map(|i| format!("k{i}").into_bytes()).collect();
        let records = keys
            .iter()
            .enumerate()
            .map(|(i, k)| record(format!("{i}").as_bytes(), k, "s", 0))
            .collect();
        let got = Delivered::decode(&[wire(records)]).unwrap();
        let total: usize = (0..4).map(|i| got.shape(i, 4).keys_in_interval).sum();
        assert_eq!(total, 64);
        let in_one = keys.iter().filter(|k| interval_of(k, 4) == 2).count();
        assert_eq!(got.shape(2, 4).keys_in_interval, in_one);
    }

    #[test]
    fn columns_give_the_shape_their_records_give() {
        let records = vec![
            record(b"1", b"k1", "s", 7),
            record(b"2", b"k2", "s", -3),
            record(b"3", b"k3", "s", 9),
        ];
        let got = Delivered::decode(&[wire(records.clone())]).unwrap();
        let ids: Vec<&[u8]> = records.iter().map(|r| &r.record_id[..]).collect();
        let streams: Vec<&str> = records.iter().map(|r| r.stream.as_str()).collect();
        let keys: Vec<&[u8]> = records.iter().map(|r| &r.key[..]).collect();
        let times: Vec<i64> = records.iter().map(|r| r.event_time_ms).collect();
        for (interval, count) in [(0, 1), (0, 2), (1, 2), (3, 4)] {
            let columns = Shape::of_columns(&ids, &streams, &keys, &times, interval, count);
            assert_eq!(columns, got.shape(interval, count));
        }
        let empty = Shape::of_columns(&[], &[], &[], &[], 0, 2);
        assert!(empty.ids_distinct && empty.one_stream);
        assert_eq!(empty.keys_in_interval, 0);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Delivered::decode(&[Bytes::from_static(b"\x2a\xff\xff")]).is_err());
    }
}
