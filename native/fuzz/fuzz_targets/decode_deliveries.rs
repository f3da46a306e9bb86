//! `Delivered::decode` on any bytes: never panics, accepts exactly what prost's decoding
//! of `DeliveryFrame` accepts, and reads the same records, with the same shape.

#![no_main]

use libfuzzer_sys::fuzz_target;
use millrace_core::delivery::Delivered;
use millrace_core::wire::DeliveryFrame;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let read = Delivered::decode(&[data]);
    let Ok(frame) = DeliveryFrame::decode(data) else {
        assert!(read.is_err(), "read bytes prost refuses");
        return;
    };
    let read = read.expect("refused bytes prost reads");
    assert_eq!(read.records.len(), frame.records.len());
    for (view, record) in read.records.iter().zip(&frame.records) {
        assert_eq!(view.record_id, &record.record_id[..]);
        assert_eq!(view.key, &record.key[..]);
        assert_eq!(view.value, &record.value[..]);
        assert_eq!(view.event_time_ms, record.event_time_ms);
        assert_eq!(view.producer, record.producer);
        assert_eq!(view.stream, record.stream);
    }
    let encoded = frame.encode_to_vec();
    let again = Delivered::decode(&[&encoded[..]]).expect("re-encoded decodes");
    for count in [1, 3] {
        assert_eq!(again.shape(0, count), read.shape(0, count));
    }
});
