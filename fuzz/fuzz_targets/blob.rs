//! Fuzz blob decompression: any Blob message either fails cleanly or
//! inflates to at most MAX_RAW_SIZE bytes, matching its raw_size when given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pbf_format::compress::{MAX_RAW_SIZE, blob_data, decode_blob};

fuzz_target!(|data: &[u8]| {
    if let Ok(out) = decode_blob(data) {
        assert!(out.len() <= MAX_RAW_SIZE);
        if let Some(n) = blob_data(data).ok().and_then(|b| b.raw_size) {
            assert_eq!(out.len() as u64, n);
        }
    }
});
