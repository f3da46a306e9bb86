//! The log scanner on bytes read from disk, which may be anything: it never panics,
//! and what it returns from damaged bytes is either an error or records it checked.

use bytes::Bytes;
use millrace_core::batch::{Record, RecordBatch};
use millrace_core::log_format::{encode_request, Placement};
use millrace_core::log_scan::{scan_records, scan_requests, ScanRange};
use proptest::prelude::*;

fn range(complete: bool, max_records: usize) -> ScanRange {
    ScanRange {
        position: 16,
        expected: 0,
        from_offset: 0,
        stop_offset: u64::MAX,
        max_records,
        complete,
    }
}

fn segment(records: &[(Vec<u8>, Vec<u8>, i64)]) -> Vec<u8> {
    let batch: RecordBatch = records
        .iter()
        .map(|(k, v, t)| Record {
            key: Bytes::from(k.clone()),
            value: Bytes::from(v.clone()),
            event_time_ms: *t,
        })
        .collect();
    let at = Placement {
        offset: 0,
        ingest_ms: 1,
        position: 16,
        next_index: 0,
        index_every: 100,
    };
    encode_request(&batch, b"", b"", at).unwrap().bytes
}

fn records() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>, i64)>> {
    prop::collection::vec(
        (
            prop::collection::vec(any::<u8>(), 0..20),
            prop::collection::vec(any::<u8>(), 0..40),
            any::<i64>(),
        ),
        0..12,
    )
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..600), complete: bool) {
        let _ = scan_records(&Bytes::from(data), range(complete, usize::MAX));
    }

    #[test]
    fn encoded_records_read_back(recs in records(), max in 1usize..20) {
        let data = Bytes::from(segment(&recs));
        let scanned = scan_records(&data, range(true, max)).unwrap();
        let n = recs.len().min(max);
        prop_assert_eq!(scanned.records.len(), n);
        for (i, (k, v, t)) in recs.iter().take(n).enumerate() {
            prop_assert_eq!(&scanned.records.keys[i][..], &k[..]);
            prop_assert_eq!(&scanned.records.values[i][..], &v[..]);
            prop_assert_eq!(scanned.records.event_times[i], *t);
            prop_assert_eq!(scanned.records.offsets[i], i as u64);
        }
    }

    #[test]
    fn a_read_in_pieces_is_the_read_at_once(recs in records(), cut in 0usize..2000) {
        let data = Bytes::from(segment(&recs));
        let whole = scan_records(&data, range(true, usize::MAX)).unwrap();
        let cut = cut.min(data.len());
        let first = scan_records(&data.slice(..cut), range(cut == data.len(), usize::MAX)).unwrap();
        let mut rest_range = range(true, usize::MAX);
        rest_range.position += first.consumed as u64;
        rest_range.expected = first.expected;
        let rest = scan_records(&data.slice(first.consumed..), rest_range).unwrap();
        let mut joined = first.records;
        joined.extend(rest.records);
        prop_assert_eq!(joined, whole.records);
    }

    #[test]
    fn damaged_segments_fail_or_return_checked_records(
        recs in records(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let mut data = segment(&recs);
        if data.is_empty() {
            return Ok(());
        }
        for (at, byte) in flips {
            let at = at % data.len();
            data[at] ^= byte | 1;
        }
        data.truncate(cut % (data.len() + 1));
        if let Ok(scanned) = scan_records(&Bytes::from(data), range(true, usize::MAX)) {
            // Offsets stay dense from the expected one whatever the damage let through.
            let offsets: Vec<u64> = (0..scanned.records.len() as u64).collect();
            prop_assert_eq!(scanned.records.offsets, offsets);
        }
    }

    #[test]
    fn requests_read_in_pieces_are_the_requests_read_at_once(recs in records(), cut in 0usize..2000) {
        let data = Bytes::from(segment(&recs));
        let whole = scan_requests(&data, 16, 0, true, true);
        prop_assert_eq!(&whole.error, &None);
        let cut = cut.min(data.len());
        let first = scan_requests(&data.slice(..cut), 16, 0, cut == data.len(), true);
        prop_assert_eq!(&first.error, &None);
        let rest = scan_requests(&data.slice(first.consumed..), 16 + first.consumed as u64, first.expected, true, true);
        let mut joined = first.requests;
        joined.extend(rest.requests);
        prop_assert_eq!(joined, whole.requests);
    }

    #[test]
    fn damaged_requests_fail_or_stay_whole(
        recs in records(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let mut data = segment(&recs);
        for (at, byte) in flips {
            let at = at % data.len();
            data[at] ^= byte | 1;
        }
        data.truncate(cut % (data.len() + 1));
        let scan = scan_requests(&Bytes::from(data), 16, 0, true, true);
        let mut next = 0;
        for request in &scan.requests {
            prop_assert_eq!(request.commit.first_offset, next);
            prop_assert_eq!(request.records.len() as u64, u64::from(request.commit.count));
            next += u64::from(request.commit.count);
        }
        prop_assert_eq!(next, scan.expected);
    }
}
