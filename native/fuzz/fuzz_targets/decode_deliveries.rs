//! `Delivered::decode` on any bytes: never panics, and what it decodes re-encodes to
//! bytes that decode to the same records, with the same shape.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use millrace_core::delivery::Delivered;
use millrace_core::wire::DeliveryFrame;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let wires = [Bytes::copy_from_slice(data)];
    let Ok(decoded) = Delivered::decode(&wires) else {
        return;
    };
    let frame = DeliveryFrame {
        target: None,
        records: decoded.records.clone(),
    };
    let again = Delivered::decode(&[Bytes::from(frame.encode_to_vec())])
        .expect("re-encoded records decode");
    assert_eq!(again.records, decoded.records);
    for count in [1, 3] {
        assert_eq!(again.shape(0, count), decoded.shape(0, count));
    }
});
