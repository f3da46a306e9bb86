//! `json_lines::parse_line` on any bytes: never panics, and a record it returns has key
//! plus value within the limit and its event time within the range (under the real
//! limits and under tight ones), and `parse_lines` agrees with it line by line.

#![no_main]

use libfuzzer_sys::fuzz_target;
use millrace_core::json_lines::{self, LineLimits};

const LIMITS: [LineLimits; 2] = [
    LineLimits {
        min_event_time_ms: -62_135_596_800_000,
        max_event_time_ms: 253_402_300_799_999,
        max_record_bytes: 4 << 20,
    },
    LineLimits {
        min_event_time_ms: -5,
        max_event_time_ms: 1_000,
        max_record_bytes: 8,
    },
];

fuzz_target!(|data: &[u8]| {
    for limits in &LIMITS {
        if let Some(record) = json_lines::parse_line(data, limits) {
            assert!(record.key.len() + record.value.len() <= limits.max_record_bytes);
            assert!((limits.min_event_time_ms..=limits.max_event_time_ms)
                .contains(&record.event_time_ms));
        }
    }
    // The same bytes as lines split at '\n', through the batch call.
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let (batch, others) = json_lines::parse_lines(lines.iter().copied(), &LIMITS[0]);
    assert_eq!(batch.len() + others.len(), lines.len());
    let mut records = batch.records().iter();
    for (at, line) in lines.iter().enumerate() {
        match json_lines::parse_line(line, &LIMITS[0]) {
            Some(record) => assert_eq!(Some(&record), records.next()),
            None => assert!(others.contains(&at)),
        }
    }
});
