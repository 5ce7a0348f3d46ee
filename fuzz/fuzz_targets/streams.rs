//! Fuzz the stream readers: an index or plan stream of arbitrary bytes is
//! read to its end or to its first error, and every error carries a line,
//! save one that says the stream was cut short (held no record at all).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pbf_stream::{Error, IndexReader, PlanReader};

/// Panic unless `e` names its line or says the stream was cut short.
fn check_place(e: &Error) {
    let text = e.to_string();
    assert!(
        text.starts_with("line ") || e.is_upstream_failure(),
        "{text}"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut index = IndexReader::new(data);
    loop {
        match index.next_record() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                check_place(&e);
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
                    check_place(&e);
                    break;
                }
            }
        },
        Err(e) => check_place(&e),
    }
});
