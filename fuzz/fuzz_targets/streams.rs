//! Fuzz the stream readers: an index or plan stream of arbitrary bytes is
//! read to its end or to its first error, and every error carries a line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pbf_stream::{IndexReader, PlanReader};

fuzz_target!(|data: &[u8]| {
    let mut index = IndexReader::new(data);
    loop {
        match index.next_record() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                assert!(e.to_string().starts_with("line "), "{e}");
                break;
            }
        }
    }
    match PlanReader::new(data) {
        Ok(mut plan) => loop {
            match plan.next_op() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    assert!(e.to_string().starts_with("line "), "{e}");
                    break;
                }
            }
        },
        Err(e) => assert!(e.to_string().starts_with("line "), "{e}"),
    }
});
