//! What one consumer of a stream was sent and has not acknowledged: the forwarder's
//! book (`injector/forwarder.py`), kept by log offset.
//!
//! The forwarder sends a stream's records in offset order, a read batch at a time, in
//! frames (one per destination interval); acknowledgements come back per delivery, in
//! any order. It needs, per consumer, the first offset not acknowledged (what the log
//! may delete below) and the oldest event time of the frames still in flight (what holds
//! the watermark). Kept by offset, an ack is a lookup in an array, not a hash per record.

use std::collections::{HashMap, VecDeque};

/// An acknowledged offset.
const ACKED: u64 = u64::MAX;
/// An offset sent in no frame (it stays pending, as sent but never framed).
const NO_FRAME: u64 = u64::MAX - 1;

/// Offsets sent to one consumer and not yet acknowledged, with their frames.
#[derive(Debug, Default)]
pub struct AckBook {
    /// Sent stretches in offset order, none of them wholly acknowledged.
    spans: VecDeque<Span>,
    /// Live frames: the oldest event time of each and how many offsets it still waits for.
    frames: HashMap<u64, Frame>,
    next_frame: u64,
    pending: usize,
    /// Every offset below this was sent (and is pending or acknowledged).
    sent_end: u64,
}

#[derive(Debug)]
struct Span {
    first: u64,
    /// Per offset from `first`: its frame, `NO_FRAME` or `ACKED`.
    marks: Vec<u64>,
    live: usize,
    /// No offset before this one is pending.
    cursor: usize,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    oldest_ms: Option<i64>,
    live: usize,
}

/// A frame of a sent stretch: its records' positions in the stretch's read batch, and
/// their oldest event time (None: the frame holds nothing back).
pub type SentFrame = (Vec<u32>, Option<i64>);

impl AckBook {
    pub fn new() -> Self {
        Self::default()
    }

    /// Offsets `first + start .. first + count` were sent, in `frames` (positions from
    /// `first`). Offsets sent before (a stretch read again after a failed step) keep
    /// their first frame, or stay acknowledged; a position at or past `count` is refused.
    pub fn send(
        &mut self,
        first: u64,
        start: usize,
        count: usize,
        frames: &[SentFrame],
    ) -> Result<(), String> {
        if let Some(position) = frames
            .iter()
            .flat_map(|f| &f.0)
            .find(|&&p| p as usize >= count)
        {
            return Err(format!(
                "position {position} outside the stretch of {count}"
            ));
        }
        let start = start.max(self.sent_end.saturating_sub(first).min(count as u64) as usize);
        if start >= count {
            return Ok(());
        }
        let begin = first + start as u64;
        self.sent_end = first + count as u64;
        let mut marks = vec![NO_FRAME; count - start];
        for (positions, oldest_ms) in frames {
            let id = self.next_frame;
            self.next_frame += 1;
            let mut live = 0;
            for &position in positions {
                let position = position as usize;
                if position < start {
                    continue; // sent before
                }
                let mark = &mut marks[position - start];
                if *mark == NO_FRAME {
                    *mark = id;
                    live += 1;
                }
            }
            if live > 0 {
                self.frames.insert(
                    id,
                    Frame {
                        oldest_ms: *oldest_ms,
                        live,
                    },
                );
            }
        }
        let live = marks.len();
        self.pending += live;
        self.spans.push_back(Span {
            first: begin,
            marks,
            live,
            cursor: 0,
        });
        Ok(())
    }

    /// These offsets were acknowledged; offsets not pending (never sent, or acknowledged
    /// already) change nothing.
    pub fn ack(&mut self, offsets: impl IntoIterator<Item = u64>) {
        for offset in offsets {
            let at = self.spans.partition_point(|s| s.first <= offset);
            if at == 0 {
                continue;
            }
            let span = &mut self.spans[at - 1];
            let Some(mark) = offset
                .checked_sub(span.first)
                .and_then(|i| span.marks.get_mut(i as usize))
            else {
                continue;
            };
            if *mark == ACKED {
                continue;
            }
            if *mark != NO_FRAME {
                if let Some(frame) = self.frames.get_mut(mark) {
                    frame.live -= 1;
                    if frame.live == 0 {
                        self.frames.remove(mark);
                    }
                }
            }
            *mark = ACKED;
            span.live -= 1;
            self.pending -= 1;
        }
        while self.spans.front().is_some_and(|s| s.live == 0) {
            self.spans.pop_front();
        }
    }

    /// The first offset sent and not acknowledged (None: every one was).
    pub fn first_pending(&mut self) -> Option<u64> {
        let span = self.spans.front_mut()?;
        while span.marks[span.cursor] == ACKED {
            span.cursor += 1; // a front span has a pending offset: this stops
        }
        Some(span.first + span.cursor as u64)
    }

    /// The oldest event time of the frames still waiting for an acknowledgement.
    pub fn oldest_ms(&self) -> Option<i64> {
        self.frames.values().filter_map(|f| f.oldest_ms).min()
    }

    /// How many offsets wait for an acknowledgement.
    pub fn pending(&self) -> usize {
        self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn acks_in_any_order_move_the_first_pending_offset() {
        let mut book = AckBook::new();
        book.send(10, 0, 4, &[(vec![0, 2], Some(5)), (vec![1, 3], Some(3))])
            .unwrap();
        assert_eq!(book.first_pending(), Some(10));
        assert_eq!(book.oldest_ms(), Some(3));
        book.ack([11, 13, 13, 99, 2]);
        assert_eq!(book.first_pending(), Some(10));
        assert_eq!(book.oldest_ms(), Some(5), "the second frame is done");
        book.ack([10]);
        assert_eq!(book.first_pending(), Some(12));
        book.ack([12]);
        assert_eq!(
            (book.first_pending(), book.oldest_ms(), book.pending()),
            (None, None, 0)
        );
    }

    #[test]
    fn offsets_sent_again_keep_their_first_frame_and_a_position_outside_is_refused() {
        let mut book = AckBook::new();
        book.send(0, 0, 3, &[(vec![0, 1, 2], Some(1))]).unwrap();
        book.ack([0]);
        book.send(0, 0, 5, &[(vec![0, 1, 2, 3, 4], Some(9))])
            .unwrap();
        assert_eq!(
            book.pending(),
            4,
            "0 stays acknowledged, 1 and 2 are not sent twice"
        );
        assert_eq!(book.oldest_ms(), Some(1));
        book.ack([1, 2]);
        assert_eq!((book.first_pending(), book.oldest_ms()), (Some(3), Some(9)));
        assert!(book.send(5, 0, 2, &[(vec![2], None)]).is_err());
        assert_eq!(book.pending(), 2, "a refused stretch changes nothing");
    }

    #[test]
    fn offsets_below_the_start_are_not_sent_and_unframed_ones_stay_pending() {
        let mut book = AckBook::new();
        book.send(100, 2, 5, &[(vec![2, 4], Some(7))]).unwrap();
        assert_eq!(book.pending(), 3);
        book.ack([100, 101, 102, 104]);
        assert_eq!(book.first_pending(), Some(103), "sent in no frame: pending");
        assert_eq!(book.oldest_ms(), None);
    }

    proptest! {
        /// Against a model of sets and maps: any stretches, frames and acks.
        #[test]
        fn matches_a_model(
            stretches in proptest::collection::vec((0u64..5, 0u64..4, 0usize..6, 1usize..12, any::<u64>()), 1..8),
            acks in proptest::collection::vec(proptest::collection::vec(0u64..120, 0..20), 0..10),
        ) {
            let mut book = AckBook::new();
            let mut pending: BTreeSet<u64> = BTreeSet::new();
            let mut frame_of: BTreeMap<u64, usize> = BTreeMap::new();
            let mut oldest: Vec<Option<i64>> = Vec::new();
            let mut next = 0u64;
            let mut sent_end = 0u64;
            for (gap, back, start, count, seed) in stretches {
                // Sometimes read again from before the end of the last (a failed step).
                let first = (next + gap).saturating_sub(back);
                let start = start.min(count);
                let mut frames: Vec<SentFrame> = Vec::new();
                let mut rng = seed;
                for position in start..count {
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let which = (rng >> 60) as usize % 3;
                    if which == 2 { continue; } // in no frame
                    while frames.len() <= which { frames.push((Vec::new(), Some((rng >> 40) as i64 % 50))); }
                    frames[which].0.push(position as u32);
                }
                // Offsets sent before keep their first frame, or stay acknowledged.
                let new = |p: usize| first + p as u64 >= sent_end;
                for (positions, ms) in &frames {
                    let id = oldest.len();
                    oldest.push(*ms);
                    for &p in positions.iter().filter(|&&p| new(p as usize)) {
                        frame_of.insert(first + p as u64, id);
                    }
                }
                pending.extend((start..count).filter(|&p| new(p)).map(|p| first + p as u64));
                book.send(first, start, count, &frames).unwrap();
                if start < count {
                    sent_end = sent_end.max(first + count as u64);
                }
                next = first + count as u64;
            }
            for batch in acks {
                for &o in &batch { pending.remove(&o); }
                book.ack(batch);
                prop_assert_eq!(book.first_pending(), pending.iter().next().copied());
                prop_assert_eq!(book.pending(), pending.len());
                let live: BTreeSet<usize> = pending.iter().filter_map(|o| frame_of.get(o).copied()).collect();
                let want = live.iter().filter_map(|&f| oldest[f]).min();
                prop_assert_eq!(book.oldest_ms(), want);
            }
        }
    }
}
