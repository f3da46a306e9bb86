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
//! order of their destination's first production.

use std::collections::HashMap;

use bytes::Bytes;
use prost::Message;
use xxhash_rust::xxh3::xxh3_128;

use crate::frames::interval_of;
use crate::wire::{DeliveryFrame, KeyInterval, Record};

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
}

/// Where a computation's output streams go.
#[derive(Clone, Debug)]
pub struct Plan {
    pub producer: String,
    /// Every consumer (or `sink:<stream>`) of any output stream, once each.
    pub consumers: Vec<String>,
    /// Per output stream: its name and its routes.
    pub streams: Vec<(String, Vec<Route>)>,
}

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

/// One destination's frame of a commit.
#[derive(Debug)]
pub struct OutFrame {
    /// Index into [`Plan::consumers`].
    pub consumer: usize,
    pub interval: u32,
    /// The frame's `DeliveryBatch` bytes (target and records).
    pub payload: Vec<u8>,
    /// Each record's outbox key: `consumer | 0x00 | interval u32 | production id`.
    pub outbox_keys: Vec<Vec<u8>>,
    /// The smallest event time of its records.
    pub oldest_event_time_ms: i64,
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
    let mut named = Vec::with_capacity(cause.len() + 4);
    named.extend_from_slice(cause);
    named.extend_from_slice(&index.to_be_bytes());
    xxh3_128(&named).to_be_bytes()
}

/// The start of the outbox key of every production to `consumer`'s `interval`.
pub fn outbox_key_prefix(consumer: &str, interval: u32) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(consumer.len() + 5);
    prefix.extend_from_slice(consumer.as_bytes());
    prefix.push(0);
    prefix.extend_from_slice(&interval.to_be_bytes());
    prefix
}

struct Building {
    consumer: usize,
    interval: u32,
    prefix: Vec<u8>,
    records: Vec<Record>,
    outbox_keys: Vec<Vec<u8>>,
}

/// The frames of one commit's productions; `given` supplies, in production order, the
/// interval of each (record, [`Routing::Given`] route) pair.
pub fn build(plan: &Plan, caused: &[Caused], given: &[u32]) -> Result<Vec<OutFrame>, PlanError> {
    let mut frames: Vec<Building> = Vec::new();
    let mut slot_of: HashMap<(usize, u32), usize> = HashMap::new();
    let mut given = given.iter();
    for Caused { cause, emitted } in caused {
        for (index, record) in (0u32..).zip(emitted) {
            let id = Bytes::copy_from_slice(&production_id(cause, index));
            let (stream, routes) = &plan.streams[record.stream];
            for route in routes {
                let interval = match route.routing {
                    Routing::ByKey if route.intervals <= 1 => 0,
                    Routing::ByKey => interval_of(&record.key, route.intervals),
                    Routing::Given => {
                        let &interval = given.next().ok_or(PlanError::MissingInterval)?;
                        if interval >= route.intervals.max(1) {
                            return Err(PlanError::IntervalOutOfRange {
                                interval,
                                intervals: route.intervals,
                            });
                        }
                        interval
                    }
                };
                let slot = *slot_of
                    .entry((route.consumer, interval))
                    .or_insert_with(|| {
                        frames.push(Building {
                            consumer: route.consumer,
                            interval,
                            prefix: outbox_key_prefix(&plan.consumers[route.consumer], interval),
                            records: Vec::new(),
                            outbox_keys: Vec::new(),
                        });
                        frames.len() - 1
                    });
                let frame = &mut frames[slot];
                let mut outbox_key = Vec::with_capacity(frame.prefix.len() + id.len());
                outbox_key.extend_from_slice(&frame.prefix);
                outbox_key.extend_from_slice(&id);
                frame.outbox_keys.push(outbox_key);
                frame.records.push(Record {
                    record_id: id.clone(),
                    key: record.key.clone(),
                    value: record.value.clone(),
                    event_time_ms: record.event_time_ms,
                    producer: plan.producer.clone(),
                    stream: stream.clone(),
                });
            }
        }
    }
    let left = given.count();
    if left > 0 {
        return Err(PlanError::UnusedIntervals(left));
    }
    Ok(frames
        .into_iter()
        .map(|frame| {
            let oldest_event_time_ms = frame
                .records
                .iter()
                .map(|r| r.event_time_ms)
                .min()
                .unwrap_or(i64::MAX);
            let payload = DeliveryFrame {
                target: Some(KeyInterval {
                    computation: plan.consumers[frame.consumer].clone(),
                    index: frame.interval,
                    count: 0,
                }),
                records: frame.records,
            }
            .encode_to_vec();
            OutFrame {
                consumer: frame.consumer,
                interval: frame.interval,
                payload,
                outbox_keys: frame.outbox_keys,
                oldest_event_time_ms,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            producer: "p".into(),
            consumers: vec!["a".into(), "b".into(), "sink:s2".into()],
            streams: vec![
                (
                    "s1".into(),
                    vec![
                        Route {
                            consumer: 0,
                            intervals: 4,
                            routing: Routing::ByKey,
                        },
                        Route {
                            consumer: 1,
                            intervals: 3,
                            routing: Routing::Given,
                        },
                    ],
                ),
                (
                    "s2".into(),
                    vec![Route {
                        consumer: 2,
                        intervals: 1,
                        routing: Routing::ByKey,
                    }],
                ),
            ],
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
            let decoded = DeliveryFrame::decode(frame.payload.as_slice()).unwrap();
            let target = decoded.target.unwrap();
            assert_eq!(target.computation, plan().consumers[frame.consumer]);
            assert_eq!(target.index, frame.interval);
            let prefix = outbox_key_prefix(&target.computation, frame.interval);
            for (record, key) in decoded.records.iter().zip(&frame.outbox_keys) {
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
    fn production_ids_are_xxh3_128_of_cause_and_index() {
        let mut named = b"cause".to_vec();
        named.extend_from_slice(&9u32.to_be_bytes());
        assert_eq!(production_id(b"cause", 9), xxh3_128(&named).to_be_bytes());
        assert_ne!(production_id(b"cause", 9), production_id(b"cause", 10));
    }
}
