//! The log scanners on any bytes a segment file may hold (`log_scan::scan_records` and
//! `scan_requests`): they never panic, and what they return keeps dense offsets, stays
//! inside the input, and is made of whole requests.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use millrace_core::log_scan::{scan_records, scan_requests, ScanRange};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let bytes = Bytes::copy_from_slice(rest);
    let range = ScanRange {
        position: 16,
        expected: u64::from(flags >> 2),
        from_offset: u64::from(flags & 3),
        stop_offset: u64::MAX,
        max_records: usize::from(flags % 7) + 1,
        complete: flags & 0x80 != 0,
    };
    if let Ok(scanned) = scan_records(&bytes, range) {
        assert!(scanned.consumed <= rest.len());
        let records = &scanned.records;
        assert!(records.len() <= range.max_records);
        for pair in records.offsets.windows(2) {
            assert_eq!(pair[1], pair[0] + 1);
        }
        for (key, value) in records.keys.iter().zip(&records.values) {
            assert!(key.len() + value.len() <= rest.len());
        }
    }
    let scan = scan_requests(
        &bytes,
        16,
        range.expected,
        range.complete,
        flags & 0x40 != 0,
    );
    assert!(scan.consumed <= rest.len());
    let mut next = range.expected;
    for request in &scan.requests {
        assert_eq!(request.commit.first_offset, next);
        next += u64::from(request.commit.count);
        for (i, record) in request.records.iter().enumerate() {
            assert_eq!(record.offset, request.commit.first_offset + i as u64);
        }
    }
    assert_eq!(next, scan.expected);
});
