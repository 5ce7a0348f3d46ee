//! Fuzz the key scan, and check it against the full decoder: when both
//! accept a block they must agree on its smallest and largest key and its
//! counts (pbf-index trusts the scan to place blobs the merge then decodes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pbf_format::block::decode_block;
use pbf_format::scan::{Accumulator, scan_block};

fuzz_target!(|data: &[u8]| {
    let scanned = scan_block(data);
    if let (Ok(summary), Ok(elements)) = (scanned, decode_block(data)) {
        let mut acc = Accumulator::default();
        for e in &elements {
            acc.push(e.key());
        }
        let decoded = acc.finish();
        match (summary, decoded) {
            (None, None) => {}
            (Some(s), Some(d)) => {
                assert_eq!((s.first, s.last, s.counts), (d.first, d.last, d.counts));
            }
            (s, d) => panic!("scan {s:?} but decode {d:?}"),
        }
    }
});
