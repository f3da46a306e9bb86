//! A computation's productions of one commit: their ids, their routes and their outbox
//! frames (`engine/_routing.py` and `engine/_frames.py` hand the whole commit over in
//! one call).
//!
//! What user code emitted comes grouped by *cause* (an input record's id, or a timer
//! fire): the `n`-th record a cause emitted is named `xxh3_128(cause | n u32)`, the same
//! on every replay. Each record goes to every consumer of its stream, to the interval
//! its key hashes to (or one the caller chose, for consumers with a key extractor of
//! their own), and lands in that destination's frame: a `DeliveryBatch` with the
//! destination as target and the records in the order they were made. Frames come in
//! order of their first production; a destination whose records pass the plan's byte
//! budget gets several, in order (each frame is one delivery message).

use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};
use xxhash_rust::xxh3::xxh3_128;

use crate::frames::interval_of;
use crate::wire::KeyInterval;
#[cfg(doc)]
use crate::wire::{DeliveryFrame, Record};

/// The cause of the productions of a timer's fire (`engine/_production_ids.py`):
/// `f | computation | 0x00 | domain u8 | len(key) u32 | key | len(tag) u32 | tag |
/// time i64 | setter`, all big-endian. Keys and tags of 4 GiB or more cannot occur.
pub fn fire_cause(
    computation: &[u8],
    domain: u8,
    key: &[u8],
    tag: &[u8],
    time_ms: i64,
    setter: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(22 + computation.len() + key.len() + tag.len() + setter.len());
    out.push(b'f');
    out.extend_from_slice(computation);
    out.push(0);
    out.push(domain);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(tag.len() as u32).to_be_bytes());
    out.extend_from_slice(tag);
    out.extend_from_slice(&time_ms.to_be_bytes());
    out.extend_from_slice(setter);
    out
}

/// How a route picks the interval of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// By the xxh3 of the record's own key (`computations.interval_of`).
    ByKey,
    /// The caller says, one interval per record and route, in production order.
    Given,
}

/// One consumer of a stream.
#[derive(Clone, Debug)]
pub struct Route {
    /// Index into [`Plan::consumers`].
    pub consumer: usize,
    pub intervals: u32,
    pub routing: Routing,
    /// Empty while the consumer's intervals are its `intervals` equal ranges; once some
    /// were split, the id of the interval of each of `table.len()` equal ranges of the
    /// key-hash space (`computations.Layout.routing_table`).
    table: Vec<u32>,
    /// One above the highest interval id of the consumer.
    id_bound: u32,
}

impl Route {
    /// The route to `consumer` (index into [`Plan::consumers`]), of `intervals` equal
    /// ranges, or of the intervals `table` gives (non-empty).
    pub fn new(consumer: usize, intervals: u32, routing: Routing, table: Vec<u32>) -> Self {
        let id_bound = match table.iter().max() {
            Some(highest) => highest + 1,
            None => intervals.max(1),
        };
        Self {
            consumer,
            intervals,
            routing,
            table,
            id_bound,
        }
    }

    /// The interval (by id) of a record keyed `key`, [`Routing::ByKey`].
    fn interval_by_key(&self, key: &[u8]) -> u32 {
        if !self.table.is_empty() {
            self.table[interval_of(key, self.table.len() as u32) as usize]
        } else if self.intervals <= 1 {
            0
        } else {
            interval_of(key, self.intervals)
        }
    }
}

/// Where a computation's output streams go.
#[derive(Clone, Debug)]
pub struct Plan {
    pub producer: String,
    /// Every consumer (or `sink:<stream>`) of any output stream, once each.
    pub consumers: Vec<String>,
    /// Per output stream: its name and its routes.
    pub streams: Vec<(String, Vec<Route>)>,
    /// A destination's frame takes no record that would carry its payload past this
    /// many bytes (the next ones start another frame): a frame is one delivery
    /// message, and gRPC refuses messages over its limit. A bigger record goes alone.
    pub frame_bytes: usize,
}

/// One destination's frame of a commit.
#[derive(Debug)]
pub struct OutFrame {
    /// Index into [`Plan::consumers`].
    pub consumer: usize,
    pub interval: u32,
    /// The frame's `DeliveryBatch` bytes (target and records).
    pub payload: Vec<u8>,
    /// The start of its records' outbox keys: `consumer | 0x00 | interval u32`.
    pub prefix: Vec<u8>,
    /// Its records' production ids, in order (outbox key: `prefix | id`).
    pub ids: Vec<[u8; 16]>,
    /// The smallest event time of its records.
    pub oldest_event_time_ms: i64,
}

impl OutFrame {
    /// Each record's outbox key, in order.
    pub fn outbox_keys(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.ids.iter().map(|id| [&self.prefix[..], id].concat())
    }
}

/// Why a commit's productions could not be framed.
#[derive(Debug, PartialEq, Eq)]
pub enum PlanError {
    /// Fewer given intervals than routes that need one.
    MissingInterval,
    /// A given interval is not below its consumer's interval count.
    IntervalOutOfRange { interval: u32, intervals: u32 },
    /// More given intervals than routes that need one.
    UnusedIntervals(usize),
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MissingInterval => write!(f, "fewer given intervals than routes needing one"),
            Self::IntervalOutOfRange {
                interval,
                intervals,
            } => write!(f, "interval {interval} of a consumer with {intervals}"),
            Self::UnusedIntervals(n) => write!(f, "{n} given interval(s) left over"),
        }
    }
}

impl std::error::Error for PlanError {}

/// The id of the `index`-th record `cause` emitted: the canonical (big-endian) bytes of
/// `xxh3_128(cause | index u32 big-endian)`, as Python's `xxhash.xxh3_128_digest`.
pub fn production_id(cause: &[u8], index: u32) -> [u8; 16] {
    named_id(&mut Vec::new(), cause, index)
}

/// [`production_id`], naming the cause in `scratch` (reused from record to record).
fn named_id(scratch: &mut Vec<u8>, cause: &[u8], index: u32) -> [u8; 16] {
    scratch.clear();
    scratch.extend_from_slice(cause);
    scratch.extend_from_slice(&index.to_be_bytes());
    xxh3_128(scratch).to_be_bytes()
}

/// The start of the outbox key of every production to `consumer`'s `interval`.
pub fn outbox_key_prefix(consumer: &str, interval: u32) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(consumer.len() + 5);
    prefix.extend_from_slice(consumer.as_bytes());
    prefix.push(0);
    prefix.extend_from_slice(&interval.to_be_bytes());
    prefix
}

/// A commit's frames as they are built: records are encoded into their destination's
/// frame as they come, from borrowed bytes (no record is held or copied on the way).
pub struct FrameSet<'p> {
    plan: &'p Plan,
    frames: Vec<Building>,
    /// The frame the previous record went to (a commit has a handful of
    /// destinations, mostly in runs: a scan beats hashing).
    last: usize,
    scratch: Vec<u8>,
}

struct Building {
    consumer: usize,
    interval: u32,
    prefix: Vec<u8>,
    /// The `DeliveryBatch` bytes so far: the target, then each record.
    payload: Vec<u8>,
    ids: Vec<[u8; 16]>,
    oldest_event_time_ms: i64,
    /// At its byte budget: the destination's next records start a new frame.
    full: bool,
}

impl<'p> FrameSet<'p> {
    pub fn new(plan: &'p Plan) -> Self {
        Self {
            plan,
            frames: Vec::new(),
            last: usize::MAX,
            scratch: Vec::new(),
        }
    }

    /// The `index`-th record `cause` emitted, to every route of its `stream`; `given`
    /// yields the intervals of the [`Routing::Given`] routes.
    #[allow(clippy::too_many_arguments)] // one record's fields: a struct would be built per record
    pub fn add(
        &mut self,
        cause: &[u8],
        index: u32,
        stream: usize,
        key: &[u8],
        value: &[u8],
        event_time_ms: i64,
        given: &mut impl Iterator<Item = u32>,
    ) -> Result<(), PlanError> {
        let plan = self.plan;
        let id = named_id(&mut self.scratch, cause, index);
        let (stream_name, routes) = &plan.streams[stream];
        for route in routes {
            let interval = match route.routing {
                Routing::ByKey => route.interval_by_key(key),
                Routing::Given => {
                    let interval = given.next().ok_or(PlanError::MissingInterval)?;
                    if interval >= route.id_bound {
                        return Err(PlanError::IntervalOutOfRange {
                            interval,
                            intervals: route.id_bound,
                        });
                    }
                    interval
                }
            };
            let fields = RecordFields {
                record_id: &id,
                key,
                value,
                event_time_ms,
                producer: plan.producer.as_bytes(),
                stream: stream_name.as_bytes(),
            };
            let frame = self.frame_for(route.consumer, interval, fields.field_len());
            frame.ids.push(id);
            frame.oldest_event_time_ms = frame.oldest_event_time_ms.min(event_time_ms);
            fields.encode_as_field(RECORDS_TAG, &mut frame.payload);
        }
        Ok(())
    }

    /// The open frame of a destination, with room for a record of `record_len` bytes
    /// (or empty).
    fn frame_for(&mut self, consumer: usize, interval: u32, record_len: usize) -> &mut Building {
        let is_it = |f: &Building| !f.full && f.consumer == consumer && f.interval == interval;
        if !self.frames.get(self.last).is_some_and(is_it) {
            self.last = match self.frames.iter().position(is_it) {
                Some(slot) => slot,
                None => self.open(consumer, interval),
            };
        }
        let frame = &mut self.frames[self.last];
        if !frame.ids.is_empty() && frame.payload.len() + record_len > self.plan.frame_bytes {
            frame.full = true;
            self.last = self.open(consumer, interval);
        }
        &mut self.frames[self.last]
    }

    /// A new, empty frame to a destination; its slot.
    fn open(&mut self, consumer: usize, interval: u32) -> usize {
        let name = &self.plan.consumers[consumer];
        let target = KeyInterval {
            computation: name.clone(),
            index: interval,
            count: 0,
        };
        let mut payload = Vec::new();
        prost::encoding::message::encode(TARGET_TAG, &target, &mut payload);
        self.frames.push(Building {
            consumer,
            interval,
            prefix: outbox_key_prefix(name, interval),
            payload,
            ids: Vec::new(),
            oldest_event_time_ms: i64::MAX,
            full: false,
        });
        self.frames.len() - 1
    }

    /// The frames, in order of their first record (a destination's records over more
    /// than its byte budget are in several frames, in order).
    pub fn finish(self) -> Vec<OutFrame> {
        self.frames
            .into_iter()
            .map(|frame| OutFrame {
                consumer: frame.consumer,
                interval: frame.interval,
                payload: frame.payload,
                prefix: frame.prefix,
                ids: frame.ids,
                oldest_event_time_ms: frame.oldest_event_time_ms,
            })
            .collect()
    }
}

/// `DeliveryBatch.target` and `DeliveryBatch.records` (see [`DeliveryFrame`]).
const TARGET_TAG: u32 = 3;
const RECORDS_TAG: u32 = 5;

/// A `Record` over borrowed bytes, encoded with prost's primitives field by field as
/// the derived [`Record`] is (proto3: fields at their default are left out), so that
/// no owned record is built per production; tests compare it with [`Record`]'s
/// encoding and with Python protobuf's.
struct RecordFields<'a> {
    record_id: &'a [u8],
    key: &'a [u8],
    value: &'a [u8],
    event_time_ms: i64,
    producer: &'a [u8],
    stream: &'a [u8],
}

impl RecordFields<'_> {
    fn byte_fields(&self) -> [(u32, &[u8]); 5] {
        [
            (1, self.record_id),
            (2, self.key),
            (3, self.value),
            (5, self.producer),
            (6, self.stream),
        ]
    }

    fn encoded_len(&self) -> usize {
        let bytes: usize = self
            .byte_fields()
            .iter()
            .filter(|(_, b)| !b.is_empty())
            .map(|&(tag, b)| {
                prost::encoding::key_len(tag) + encoded_len_varint(b.len() as u64) + b.len()
            })
            .sum();
        let time = match self.event_time_ms {
            0 => 0,
            t => prost::encoding::int64::encoded_len(4, &t),
        };
        bytes + time
    }

    /// The bytes [`Self::encode_as_field`] appends.
    fn field_len(&self) -> usize {
        let len = self.encoded_len();
        prost::encoding::key_len(RECORDS_TAG) + encoded_len_varint(len as u64) + len
    }

    /// This record as field `tag` of the message `buf` holds.
    fn encode_as_field(&self, tag: u32, buf: &mut Vec<u8>) {
        encode_key(tag, WireType::LengthDelimited, buf);
        encode_varint(self.encoded_len() as u64, buf);
        let [id, key, value, producer, stream] = self.byte_fields();
        for (tag, bytes) in [id, key, value] {
            put_bytes(tag, bytes, buf);
        }
        if self.event_time_ms != 0 {
            prost::encoding::int64::encode(4, &self.event_time_ms, buf);
        }
        for (tag, bytes) in [producer, stream] {
            put_bytes(tag, bytes, buf);
        }
    }
}

fn put_bytes(tag: u32, bytes: &[u8], buf: &mut Vec<u8>) {
    if !bytes.is_empty() {
        encode_key(tag, WireType::LengthDelimited, buf);
        encode_varint(bytes.len() as u64, buf);
        buf.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use prost::Message;

    /// One emitted record.
    #[derive(Clone, Debug)]
    pub struct Emitted {
        /// Index into [`Plan::streams`].
        pub stream: usize,
        pub key: Bytes,
        pub value: Bytes,
        pub event_time_ms: i64,
    }

    /// The records one cause emitted, in order.
    #[derive(Clone, Debug)]
    pub struct Caused {
        pub cause: Bytes,
        pub emitted: Vec<Emitted>,
    }

    /// The frames of one commit's productions; `given` supplies, in production order, the
    /// interval of each (record, [`Routing::Given`] route) pair.
    pub fn build(
        plan: &Plan,
        caused: &[Caused],
        given: &[u32],
    ) -> Result<Vec<OutFrame>, PlanError> {
        let mut set = FrameSet::new(plan);
        let mut given = given.iter().copied();
        for Caused { cause, emitted } in caused {
            for (index, record) in (0u32..).zip(emitted) {
                set.add(
                    cause,
                    index,
                    record.stream,
                    &record.key,
                    &record.value,
                    record.event_time_ms,
                    &mut given,
                )?;
            }
        }
        let left = given.count();
        if left > 0 {
            return Err(PlanError::UnusedIntervals(left));
        }
        Ok(set.finish())
    }

    fn plan() -> Plan {
        Plan {
            producer: "p".into(),
            consumers: vec!["a".into(), "b".into(), "sink:s2".into()],
            streams: vec![
                (
                    "s1".into(),
                    vec![
                        Route::new(0, 4, Routing::ByKey, Vec::new()),
                        Route::new(1, 3, Routing::Given, Vec::new()),
                    ],
                ),
                (
                    "s2".into(),
                    vec![Route::new(2, 1, Routing::ByKey, Vec::new())],
                ),
            ],
            frame_bytes: 1 << 20,
        }
    }

    fn emitted(stream: usize, key: &'static [u8]) -> Emitted {
        Emitted {
            stream,
            key: Bytes::from_static(key),
            value: Bytes::from_static(b"v"),
            event_time_ms: 7,
        }
    }

    #[test]
    fn a_split_consumer_is_routed_by_its_table() {
        // Interval 1 of 2 split into ids 4 and 5 (its halves 2 and 3 of 4).
        let table = vec![0, 0, 4, 5];
        let plan = Plan {
            producer: "p".into(),
            consumers: vec!["a".into()],
            streams: vec![(
                "s".into(),
                vec![Route::new(0, 2, Routing::ByKey, table.clone())],
            )],
            frame_bytes: 1 << 20,
        };
        let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("k{i}").into_bytes()).collect();
        let caused: Vec<Caused> = keys
            .iter()
            .map(|key| Caused {
                cause: Bytes::copy_from_slice(key),
                emitted: vec![Emitted {
                    stream: 0,
                    key: Bytes::copy_from_slice(key),
                    value: Bytes::from_static(b"v"),
                    event_time_ms: 1,
                }],
            })
            .collect();
        let mut intervals = std::collections::BTreeSet::new();
        for frame in build(&plan, &caused, &[]).unwrap() {
            let decoded = crate::wire::DeliveryFrame::decode(frame.payload.as_slice()).unwrap();
            for record in &decoded.records {
                assert_eq!(table[interval_of(&record.key, 4) as usize], frame.interval);
            }
            intervals.insert(frame.interval);
        }
        assert_eq!(intervals.into_iter().collect::<Vec<_>>(), vec![0, 4, 5]);
    }

    #[test]
    fn every_record_reaches_every_route_once_named_by_its_cause() {
        let caused = [
            Caused {
                cause: Bytes::from_static(b"c1"),
                emitted: vec![emitted(0, b"k1"), emitted(1, b"k2")],
            },
            Caused {
                cause: Bytes::from_static(b"c2"),
                emitted: vec![emitted(0, b"k3")],
            },
        ];
        let frames = build(&plan(), &caused, &[2, 0]).unwrap();
        let mut seen = Vec::new();
        for frame in &frames {
            let decoded = crate::wire::DeliveryFrame::decode(frame.payload.as_slice()).unwrap();
            let target = decoded.target.unwrap();
            assert_eq!(target.computation, plan().consumers[frame.consumer]);
            assert_eq!(target.index, frame.interval);
            let prefix = outbox_key_prefix(&target.computation, frame.interval);
            for (record, key) in decoded.records.iter().zip(frame.outbox_keys()) {
                assert_eq!(key[..prefix.len()], prefix[..]);
                assert_eq!(key[prefix.len()..], record.record_id[..]);
                if frame.consumer == 0 {
                    assert_eq!(interval_of(&record.key, 4), frame.interval);
                }
                seen.push((frame.consumer, record.key.clone(), record.record_id.clone()));
            }
        }
        seen.sort();
        let id = |c: &[u8], i| Bytes::copy_from_slice(&production_id(c, i));
        let mut expected = vec![
            (0, Bytes::from_static(b"k1"), id(b"c1", 0)),
            (1, Bytes::from_static(b"k1"), id(b"c1", 0)),
            (2, Bytes::from_static(b"k2"), id(b"c1", 1)),
            (0, Bytes::from_static(b"k3"), id(b"c2", 0)),
            (1, Bytes::from_static(b"k3"), id(b"c2", 0)),
        ];
        expected.sort();
        assert_eq!(seen, expected);
        for frame in &frames {
            assert_eq!(frame.oldest_event_time_ms, 7);
        }
        let given: Vec<u32> = frames
            .iter()
            .filter(|f| f.consumer == 1)
            .map(|f| f.interval)
            .collect();
        assert_eq!(given, [2, 0]);
    }

    #[test]
    fn a_destination_over_its_byte_budget_gets_several_frames_in_order() {
        let plan = Plan {
            producer: "p".into(),
            consumers: vec!["a".into(), "b".into()],
            streams: vec![(
                "s".into(),
                vec![
                    Route::new(0, 1, Routing::ByKey, Vec::new()),
                    Route::new(1, 1, Routing::ByKey, Vec::new()),
                ],
            )],
            frame_bytes: 1000,
        };
        // Values of 0..600 bytes: some frames take several, a 1,200-byte one goes alone.
        let sizes: Vec<usize> = (0..60).map(|i| (i * 97) % 600).chain([1200, 3]).collect();
        let caused: Vec<Caused> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| Caused {
                cause: Bytes::from(format!("c{i}").into_bytes()),
                emitted: vec![Emitted {
                    stream: 0,
                    key: Bytes::from_static(b"k"),
                    value: Bytes::from(vec![b'v'; size]),
                    event_time_ms: i as i64,
                }],
            })
            .collect();
        let frames = build(&plan, &caused, &[]).unwrap();
        for consumer in 0..2 {
            let mine: Vec<&OutFrame> = frames.iter().filter(|f| f.consumer == consumer).collect();
            assert!(mine.len() > 2, "{} frames", mine.len());
            let mut values = Vec::new();
            for frame in mine {
                let decoded = crate::wire::DeliveryFrame::decode(frame.payload.as_slice()).unwrap();
                assert!(!decoded.records.is_empty());
                assert!(frame.payload.len() <= 1000 || decoded.records.len() == 1);
                assert_eq!(decoded.records.len(), frame.ids.len());
                let oldest = decoded.records.iter().map(|r| r.event_time_ms).min();
                assert_eq!(oldest, Some(frame.oldest_event_time_ms));
                values.extend(decoded.records.iter().map(|r| r.value.len()));
            }
            assert_eq!(values, sizes, "every record once, in order");
        }
    }

    #[test]
    fn given_intervals_must_match_the_routes_that_need_them() {
        let caused = [Caused {
            cause: Bytes::from_static(b"c"),
            emitted: vec![emitted(0, b"k")],
        }];
        assert_eq!(
            build(&plan(), &caused, &[]).unwrap_err(),
            PlanError::MissingInterval
        );
        assert_eq!(
            build(&plan(), &caused, &[1, 1]).unwrap_err(),
            PlanError::UnusedIntervals(1)
        );
        assert_eq!(
            build(&plan(), &caused, &[3]).unwrap_err(),
            PlanError::IntervalOutOfRange {
                interval: 3,
                intervals: 3
            }
        );
    }

    #[test]
    fn records_encode_as_the_derived_message_does() {
        type Case<'a> = (&'a [u8], &'a [u8], i64, &'a [u8]);
        let cases: [Case<'_>; 4] = [
            (b"k", b"v", 7, b"s"),
            (b"", b"", 0, b""),
            (b"key", &[0xff; 300], -1, b"stream"),
            (b"", b"x", i64::MIN, b""),
        ];
        for (key, value, event_time_ms, stream) in cases {
            let fields = RecordFields {
                record_id: b"0123456789abcdef",
                key,
                value,
                event_time_ms,
                producer: b"p",
                stream,
            };
            let mut ours = Vec::new();
            fields.encode_as_field(RECORDS_TAG, &mut ours);
            let derived = crate::wire::DeliveryFrame {
                target: None,
                records: vec![crate::wire::Record {
                    record_id: Bytes::from_static(b"0123456789abcdef"),
                    key: Bytes::copy_from_slice(key),
                    value: Bytes::copy_from_slice(value),
                    event_time_ms,
                    producer: "p".into(),
                    stream: String::from_utf8(stream.to_vec()).unwrap(),
                }],
            };
            assert_eq!(ours, derived.encode_to_vec());
        }
    }

    #[test]
    fn production_ids_are_xxh3_128_of_cause_and_index() {
        let mut named = b"cause".to_vec();
        named.extend_from_slice(&9u32.to_be_bytes());
        assert_eq!(production_id(b"cause", 9), xxh3_128(&named).to_be_bytes());
        assert_ne!(production_id(b"cause", 9), production_id(b"cause", 10));
    }
}
