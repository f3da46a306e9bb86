//! Delivery frames of records read from the log: the forwarder's step from a stretch
//! of a stream's log to one `DeliveryBatch` frame per destination interval.

use bytes::Bytes;
use prost::Message;
use xxhash_rust::xxh3::xxh3_64;

use crate::log_scan::LogRecords;
use crate::wire::{DeliveryFrame, KeyInterval, Record};

/// The interval (of `count` equal ranges of the 64-bit xxh3 of the key) that owns
/// `key`: `computations.interval_of`.
pub fn interval_of(key: &[u8], count: u32) -> u32 {
    ((u128::from(xxh3_64(key)) * u128::from(count)) >> 64) as u32
}

/// One destination interval's frame.
#[derive(Debug)]
pub struct IntervalFrame {
    pub interval: u32,
    /// The frame's `DeliveryBatch` bytes (target and records).
    pub payload: Vec<u8>,
    /// Indices (into the records) of the frame's records, in order.
    pub slots: Vec<usize>,
    /// Each record's outbox key: `consumer | 0x00 | interval u32 | record id`.
    pub outbox_keys: Vec<Vec<u8>>,
    /// The smallest event time among its records.
    pub oldest_event_time_ms: i64,
}

/// Who the frames are for and how their records are labelled.
#[derive(Clone, Copy, Debug)]
pub struct FrameSpec<'a> {
    pub consumer: &'a str,
    /// The consumer's interval count.
    pub intervals: u32,
    /// The first 8 bytes of every record id of the stream (its tag).
    pub stream_tag: &'a [u8; 8],
    pub producer: &'a str,
    pub stream: &'a str,
}

/// The frames of `records[start..]`, one per destination interval in order of first
/// appearance; `routed` gives each record's interval (None: by its key's hash).
pub fn frames(
    records: &LogRecords,
    start: usize,
    routed: Option<&[u32]>,
    spec: FrameSpec<'_>,
) -> Vec<IntervalFrame> {
    let mut order: Vec<u32> = Vec::new();
    let mut slots_of: Vec<Vec<usize>> = Vec::new();
    let mut position: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for slot in start..records.len() {
        let interval = match routed {
            Some(intervals) => intervals[slot],
            None if spec.intervals <= 1 => 0,
            None => interval_of(&records.keys[slot], spec.intervals),
        };
        let at = *position.entry(interval).or_insert_with(|| {
            order.push(interval);
            slots_of.push(Vec::new());
            order.len() - 1
        });
        slots_of[at].push(slot);
    }
    order
        .into_iter()
        .zip(slots_of)
        .map(|(interval, slots)| {
            let frame = DeliveryFrame {
                target: Some(KeyInterval {
                    computation: spec.consumer.to_owned(),
                    index: interval,
                    count: 0,
                }),
                records: slots
                    .iter()
                    .map(|&slot| Record {
                        record_id: record_id(spec.stream_tag, records.offsets[slot]),
                        key: records.keys[slot].clone(),
                        value: records.values[slot].clone(),
                        event_time_ms: records.event_times[slot],
                        producer: spec.producer.to_owned(),
                        stream: spec.stream.to_owned(),
                    })
                    .collect(),
            };
            let mut prefix = Vec::with_capacity(spec.consumer.len() + 5);
            prefix.extend_from_slice(spec.consumer.as_bytes());
            prefix.push(0);
            prefix.extend_from_slice(&interval.to_be_bytes());
            let outbox_keys = frame
                .records
                .iter()
                .map(|record| [prefix.as_slice(), &record.record_id].concat())
                .collect();
            let oldest_event_time_ms = frame
                .records
                .iter()
                .map(|record| record.event_time_ms)
                .min()
                .unwrap_or(0);
            IntervalFrame {
                interval,
                payload: frame.encode_to_vec(),
                slots,
                outbox_keys,
                oldest_event_time_ms,
            }
        })
        .collect()
}

/// The 16-byte id of record `offset` of the stream tagged `tag`.
pub fn record_id(tag: &[u8; 8], offset: u64) -> Bytes {
    let mut id = Vec::with_capacity(16);
    id.extend_from_slice(tag);
    id.extend_from_slice(&offset.to_be_bytes());
    Bytes::from(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(n: u64) -> LogRecords {
        let mut r = LogRecords::default();
        for i in 0..n {
            r.offsets.push(50 + i);
            r.event_times.push(i as i64);
            r.ingest_times.push(0);
            r.keys.push(Bytes::from(format!("key-{i}")));
            r.values.push(Bytes::from_static(b"v"));
        }
        r
    }

    const SPEC: FrameSpec<'static> = FrameSpec {
        consumer: "c",
        intervals: 4,
        stream_tag: b"TAGTAGTA",
        producer: "injector",
        stream: "s",
    };

    #[test]
    fn every_record_goes_to_its_keys_interval_once() {
        let recs = records(50);
        let frames = frames(&recs, 3, None, SPEC);
        let mut seen: Vec<usize> = frames.iter().flat_map(|f| f.slots.clone()).collect();
        seen.sort_unstable();
        assert_eq!(seen, (3..50).collect::<Vec<_>>());
        for frame in &frames {
            let decoded = DeliveryFrame::decode(frame.payload.as_slice()).unwrap();
            assert_eq!(decoded.target.as_ref().unwrap().index, frame.interval);
            for (record, &slot) in decoded.records.iter().zip(&frame.slots) {
                assert_eq!(interval_of(&record.key, 4), frame.interval);
                assert_eq!(record.key, recs.keys[slot]);
                assert_eq!(&record.record_id[8..], &(50 + slot as u64).to_be_bytes());
            }
            let mut prefix = b"c\x00".to_vec();
            prefix.extend_from_slice(&frame.interval.to_be_bytes());
            let keys: Vec<Vec<u8>> = decoded
                .records
                .iter()
                .map(|r| [prefix.as_slice(), &r.record_id].concat())
                .collect();
            assert_eq!(frame.outbox_keys, keys);
            let oldest = decoded.records.iter().map(|r| r.event_time_ms).min();
            assert_eq!(Some(frame.oldest_event_time_ms), oldest);
        }
    }

    #[test]
    fn given_intervals_are_followed() {
        let recs = records(4);
        let frames = frames(&recs, 0, Some(&[2, 0, 2, 0]), SPEC);
        let got: Vec<(u32, Vec<usize>)> =
            frames.into_iter().map(|f| (f.interval, f.slots)).collect();
        assert_eq!(got, [(2, vec![0, 2]), (0, vec![1, 3])]);
    }

    #[test]
    fn interval_of_is_the_high_bits_of_the_product() {
        assert_eq!(interval_of(b"anything", 1), 0);
        let h = xxh3_64(b"abc");
        assert_eq!(interval_of(b"abc", 7), ((h as u128 * 7) >> 64) as u32);
    }
}
