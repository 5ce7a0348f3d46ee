//! Fuzz the full PrimitiveBlock decoder, and check that whatever it accepts
//! survives an encode/decode round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pbf_format::block::{EncodeOptions, decode_block, encode_block};

fuzz_target!(|data: &[u8]| {
    if let Ok(elements) = decode_block(data) {
        let again = encode_block(&elements, &EncodeOptions::default());
        let back = decode_block(&again).expect("our own encoding decodes");
        assert_eq!(back, elements);
    }
});
