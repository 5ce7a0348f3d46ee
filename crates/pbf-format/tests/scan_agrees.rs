//! The key scan (pbf-index) and the full decoder (pbf-merge) must see the
//! same keys in every block both accept: regression inputs found by hand and
//! by the fuzzers (fuzz/fuzz_targets/scan.rs asserts the same).

use pbf_format::block::decode_block;
use pbf_format::scan::{Accumulator, scan_block};
use pbf_format::wire::{encode_zigzag, put_bytes, put_varint};

fn packed(v: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &x in v {
        put_varint(&mut out, encode_zigzag(x));
    }
    out
}

fn dense(ids: &[i64]) -> Vec<u8> {
    let mut d = Vec::new();
    put_bytes(&mut d, 1, &packed(ids));
    put_bytes(&mut d, 8, &packed(&vec![0; ids.len()]));
    put_bytes(&mut d, 9, &packed(&vec![0; ids.len()]));
    d
}

fn assert_agree(block: &[u8]) {
    let scanned = scan_block(block).expect("scan").expect("keys");
    let mut acc = Accumulator::default();
    for e in decode_block(block).expect("decode") {
        acc.push(e.key());
    }
    let decoded = acc.finish().expect("keys");
    assert_eq!(
        (scanned.first, scanned.last, scanned.counts),
        (decoded.first, decoded.last, decoded.counts)
    );
}

/// Two DenseNodes fields in one group: prost merges them into one delta
/// sequence (ids 5, 6, 7), while the decoder, the scan and libosmium decode
/// each DenseNodes on its own (ids 5, 6, 1).
#[test]
fn two_dense_fields_in_one_group() {
    // Group with DenseNodes [5, 6] then DenseNodes [1] (delta-coded ids).
    let mut group = Vec::new();
    put_bytes(&mut group, 2, &dense(&[5, 1]));
    put_bytes(&mut group, 2, &dense(&[1]));
    let mut block = Vec::new();
    put_bytes(&mut block, 1, &[]);
    put_bytes(&mut block, 2, &group);
    assert_agree(&block);
}
