//! Fuzz the frame layer: BlobHeader parsing, the Blob prefix peek, and the
//! indexdata decoders (trusted without reading the blob, so they must never
//! panic and never accept a summary whose checksum fails).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pbf_format::frame::{BlobStart, MAX_BLOB_LEN, parse_blob_header, peek_blob};
use pbf_format::indexdata;

fuzz_target!(|data: &[u8]| {
    // The blob the indexdata would be bound to: the input's tail.
    let start = BlobStart::of(&data[data.len() / 2..]);
    if let Ok((_, ix, size)) = parse_blob_header(data) {
        assert!(size <= MAX_BLOB_LEN);
        if let Some(ix) = ix {
            if let Some(s) = indexdata::decode(&ix, &start) {
                assert!(s.first <= s.last);
            }
        }
    }
    let _ = peek_blob(data);
    if let Some(s) = indexdata::decode(data, &start) {
        assert!(s.first <= s.last);
        assert_eq!(indexdata::decode(&indexdata::encode(&s, &start), &start), Some(s));
    }
    let _ = indexdata::decode_pbfhogg(data);
});
