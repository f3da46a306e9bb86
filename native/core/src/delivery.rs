//! What a receiver reads of `DeliveryBatch` messages: their records, in order, and
//! whether the batch is the usual one that admission takes whole (see
//! `engine/_keying.py`, `RecordKeying`).
//!
//! The header fields (`batch_seq`, `sender`, `target_epoch`) are not read here: the
//! receiver has them from the message gRPC parsed; this reads the same bytes once more
//! for the records alone, in place: each record's fields are slices of the message
//! (no record struct, buffer or string allocated per record). It accepts exactly the
//! bytes prost's decoding of [`DeliveryFrame`] accepts, and gives the same records
//! (`tests` compare the two on arbitrary bytes); prost words the errors.

use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
use prost::Message;

use crate::frames::interval_of;
use crate::wire::DeliveryFrame;

/// One record of a delivered batch, its fields borrowed from the message bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub record_id: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub event_time_ms: i64,
    pub producer: &'a str,
    pub stream: &'a str,
}

/// Bytes that are not a `DeliveryBatch`, with prost's words for what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndecodableBatch(pub String);

impl std::fmt::Display for UndecodableBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The records of several `DeliveryBatch` messages, in order.
#[derive(Debug, Default)]
pub struct Delivered<'a> {
    pub records: Vec<RecordView<'a>>,
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

/// The read could not go on (prost is asked for the words).
struct Stop;

impl<'a> Delivered<'a> {
    /// The records of `wires` (each a serialized `DeliveryBatch`), in order.
    pub fn decode(wires: &[&'a [u8]]) -> Result<Self, UndecodableBatch> {
        let mut records = Vec::new();
        for wire in wires {
            let mut groups = false;
            if read_batch(wire, &mut records, &mut groups).is_err() {
                return Err(prost_error(wire));
            }
            if groups {
                // Unknown group fields nest: prost bounds their depth, counted from the
                // message; its own decoding says whether they are within the bound.
                DeliveryFrame::decode(*wire).map_err(|e| UndecodableBatch(e.to_string()))?;
            }
        }
        Ok(Self { records })
    }

    /// The batch's shape, the wire keys hashed into `count` intervals for `interval`.
    pub fn shape(&self, interval: u32, count: u32) -> Shape {
        let records = &self.records;
        let ids: Vec<&[u8]> = records.iter().map(|r| r.record_id).collect();
        let streams: Vec<&str> = records.iter().map(|r| r.stream).collect();
        let keys: Vec<&[u8]> = records.iter().map(|r| r.key).collect();
        let times: Vec<i64> = records.iter().map(|r| r.event_time_ms).collect();
        Shape::of_columns(&ids, &streams, &keys, &times, interval, count)
    }
}

fn prost_error(wire: &[u8]) -> UndecodableBatch {
    match DeliveryFrame::decode(wire) {
        Err(e) => UndecodableBatch(e.to_string()),
        // Not reached while the read here refuses only what prost refuses (tested).
        Ok(_) => UndecodableBatch("malformed DeliveryBatch".into()),
    }
}

/// A length-delimited field's bytes.
fn delimited<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], Stop> {
    let len = decode_varint(buf).map_err(|_| Stop)?;
    if len > buf.len() as u64 {
        return Err(Stop);
    }
    let (field, rest) = buf.split_at(len as usize);
    *buf = rest;
    Ok(field)
}

fn expect(wire_type: WireType, expected: WireType) -> Result<(), Stop> {
    if wire_type == expected {
        Ok(())
    } else {
        Err(Stop)
    }
}

fn skip(wire_type: WireType, tag: u32, buf: &mut &[u8], groups: &mut bool) -> Result<(), Stop> {
    *groups |= wire_type == WireType::StartGroup;
    skip_field(wire_type, tag, buf, DecodeContext::default()).map_err(|_| Stop)
}

/// `DeliveryFrame`'s fields: the target checked as prost checks it, the records read.
fn read_batch<'a>(
    wire: &'a [u8],
    records: &mut Vec<RecordView<'a>>,
    groups: &mut bool,
) -> Result<(), Stop> {
    let mut buf = wire;
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf).map_err(|_| Stop)?;
        match tag {
            3 => {
                expect(wire_type, WireType::LengthDelimited)?;
                check_target(delimited(&mut buf)?, groups)?;
            }
            5 => {
                expect(wire_type, WireType::LengthDelimited)?;
                records.push(read_record(delimited(&mut buf)?, groups)?);
            }
            _ => skip(wire_type, tag, &mut buf, groups)?,
        }
    }
    Ok(())
}

/// `KeyInterval`'s fields checked, as prost's merge checks them (not kept: the receiver
/// read the target from the message gRPC parsed).
fn check_target(mut buf: &[u8], groups: &mut bool) -> Result<(), Stop> {
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf).map_err(|_| Stop)?;
        match tag {
            1 => {
                expect(wire_type, WireType::LengthDelimited)?;
                std::str::from_utf8(delimited(&mut buf)?).map_err(|_| Stop)?;
            }
            2 | 3 => {
                expect(wire_type, WireType::Varint)?;
                decode_varint(&mut buf).map_err(|_| Stop)?;
            }
            _ => skip(wire_type, tag, &mut buf, groups)?,
        }
    }
    Ok(())
}

/// `Record`'s fields: a field given twice keeps its last value, as prost's merge does.
fn read_record<'a>(mut buf: &'a [u8], groups: &mut bool) -> Result<RecordView<'a>, Stop> {
    let mut record = RecordView::default();
    let text = |bytes: &'a [u8]| std::str::from_utf8(bytes).map_err(|_| Stop);
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf).map_err(|_| Stop)?;
        if (1..=6).contains(&tag) && tag != 4 {
            expect(wire_type, WireType::LengthDelimited)?;
        }
        match tag {
            1 => record.record_id = delimited(&mut buf)?,
            2 => record.key = delimited(&mut buf)?,
            3 => record.value = delimited(&mut buf)?,
            4 => {
                expect(wire_type, WireType::Varint)?;
                record.event_time_ms = decode_varint(&mut buf).map_err(|_| Stop)? as i64;
            }
            5 => record.producer = text(delimited(&mut buf)?)?,
            6 => record.stream = text(delimited(&mut buf)?)?,
            _ => skip(wire_type, tag, &mut buf, groups)?,
        }
    }
    Ok(record)
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
    use crate::wire::{KeyInterval, Record};
    use bytes::Bytes;
    use proptest::prelude::*;

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
        let got = Delivered::decode(&[&a[..], &b[..]]).unwrap();
        let ids: Vec<&[u8]> = got.records.iter().map(|r| r.record_id).collect();
        assert_eq!(ids, [b"1", b"2", b"3"]);
        let shape = got.shape(0, 1);
        assert!(shape.ids_distinct && shape.one_stream);
        assert_eq!((shape.min_event_ms, shape.max_event_ms), (3, 9));
        assert_eq!(shape.keys_in_interval, 3);
    }

    #[test]
    fn repeated_or_missing_ids_and_mixed_streams_are_seen() {
        let w = wire(vec![record(b"1", b"k", "s", 1), record(b"1", b"k", "s", 1)]);
        let repeated = Delivered::decode(&[&w[..]]).unwrap();
        assert!(!repeated.shape(0, 1).ids_distinct);
        let w = wire(vec![record(b"", b"k", "s", 1)]);
        let missing = Delivered::decode(&[&w[..]]).unwrap();
        assert!(!missing.shape(0, 1).ids_distinct);
        let w = wire(vec![record(b"1", b"k", "s", 1), record(b"2", b"k", "t", 1)]);
        let mixed = Delivered::decode(&[&w[..]]).unwrap();
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
        let w = wire(records);
        let got = Delivered::decode(&[&w[..]]).unwrap();
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
        let w = wire(records.clone());
        let got = Delivered::decode(&[&w[..]]).unwrap();
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
        assert!(Delivered::decode(&[b"\x2a\xff\xff"]).is_err());
    }

    /// A prost record seen as a view.
    fn view_of(r: &Record) -> RecordView<'_> {
        RecordView {
            record_id: &r.record_id,
            key: &r.key,
            value: &r.value,
            event_time_ms: r.event_time_ms,
            producer: &r.producer,
            stream: &r.stream,
        }
    }

    /// Whether the read here and prost's decoding agree on `wire`: both refuse it, or
    /// both read the same records.
    fn agree(wire: &[u8]) -> bool {
        match (Delivered::decode(&[wire]), DeliveryFrame::decode(wire)) {
            (Err(_), Err(_)) => true,
            (Ok(read), Ok(frame)) => {
                read.records == frame.records.iter().map(view_of).collect::<Vec<_>>()
            }
            _ => false,
        }
    }

    #[test]
    fn a_field_given_twice_keeps_its_last_value_and_unknown_fields_are_skipped() {
        // record: id "a", id "b", unknown varint field 9, unknown group 10, time 7.
        let record = b"\x0a\x01a\x0a\x01b\x48\x05\x53\x48\x01\x54\x20\x07";
        let mut wire = vec![0x08, 0x01, 0x2a, record.len() as u8];
        wire.extend_from_slice(record);
        assert!(agree(&wire));
        let read = Delivered::decode(&[&wire[..]]).unwrap();
        assert_eq!(
            (read.records[0].record_id, read.records[0].event_time_ms),
            (&b"b"[..], 7)
        );
        let bad_utf8 = [0x2a, 0x03, 0x2a, 0x01, 0xff];
        assert!(agree(&bad_utf8) && DeliveryFrame::decode(&bad_utf8[..]).is_err());
        let err = Delivered::decode(&[&bad_utf8[..]]).unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
    }

    /// Bytes near a valid batch: a valid encoding with some bytes changed, cut or added.
    fn near_valid() -> impl Strategy<Value = Vec<u8>> {
        let records = proptest::collection::vec(
            (
                any::<Vec<u8>>(),
                any::<Vec<u8>>(),
                any::<i64>(),
                "[a-z]{0,3}",
            ),
            0..4,
        );
        (
            records,
            any::<Vec<(u16, u8)>>(),
            0usize..64,
            any::<Vec<u8>>(),
        )
            .prop_map(|(records, edits, cut, tail)| {
                let records = records
                    .into_iter()
                    .map(|(id, key, ms, stream)| Record {
                        record_id: Bytes::from(id),
                        key: Bytes::from(key),
                        value: Bytes::from_static(b"1"),
                        event_time_ms: ms,
                        producer: "p".into(),
                        stream,
                    })
                    .collect();
                let mut wire = wire(records).to_vec();
                for (at, byte) in edits {
                    if !wire.is_empty() {
                        let at = at as usize % wire.len();
                        wire[at] = byte;
                    }
                }
                wire.truncate(wire.len().saturating_sub(cut % 3));
                wire.extend(tail.into_iter().take(cut % 5));
                wire
            })
    }

    proptest! {
        #[test]
        fn reads_what_prost_reads_of_any_bytes(wire in any::<Vec<u8>>()) {
            prop_assert!(agree(&wire));
        }

        #[test]
        fn reads_what_prost_reads_of_bytes_near_a_batch(wire in near_valid()) {
            prop_assert!(agree(&wire));
        }
    }
}
