//! `json_keys::field_key` on any bytes: never panics, a key it gives is that of a value
//! that is UTF-8, and `field_keys` agrees with it value by value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use millrace_core::json_keys;

fuzz_target!(|data: &[u8]| {
    for field in ["k", "id", ""] {
        if json_keys::field_key(data, field).is_some() {
            assert!(std::str::from_utf8(data).is_ok());
        }
    }
    let values: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let keys = json_keys::field_keys(values.iter().copied(), "k");
    assert_eq!(keys.len(), values.len());
    for (value, key) in values.iter().zip(&keys) {
        assert_eq!(&json_keys::field_key(value, "k"), key);
    }
});
