//! Hostile PBF input: files built from the real data with truncations, seeded
//! bit flips, lengths that lie, zlib bombs, broken blocks and files that are
//! not PBF at all, run through `pbf-index` and the whole `pbf-sort` pipeline.
//! Every case must end in exit 1 with one clean line naming the file (and
//! the offset) and no output, or in exit 0 with a sorted output; never a
//! panic, a signal, a hang or memory beyond a bound.
//!
//! Budget: `PBF_SORT_FAULT_CASES` random bit-flip files (default 600; every
//! 6th also goes through `pbf-sort`), `PBF_SORT_FAULT_SEED` (default 1),
//! `PBF_SORT_FAULT_RSS_MB` peak RSS bound (default 512).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pbf_format::compress::{Codec, Compression, blob_data, encode_blob};
use pbf_format::frame::{FrameHeader, PbfFile};
use pbf_format::wire::{WireType, encode_zigzag, put_bytes, put_key, put_varint, put_varint_field};

use crate::util::*;

/// One hostile file.
struct Case {
    name: String,
    bytes: Vec<u8>,
    /// The error must name an offset when the run fails.
    offset: bool,
    /// Also run the whole pipeline (not only pbf-index).
    sort: bool,
}

fn case(name: impl Into<String>, bytes: Vec<u8>, offset: bool) -> Case {
    Case {
        name: name.into(),
        bytes,
        offset,
        sort: true,
    }
}

/// The frames of a real file and its bytes.
fn frames(name: &str) -> (Vec<u8>, Vec<FrameHeader>) {
    let path = data(name);
    let f = PbfFile::open(&path).expect("open");
    let frames = f.headers().map(|h| h.expect("frame")).collect();
    (std::fs::read(&path).expect("read"), frames)
}

fn frame_bytes(bytes: &[u8], fh: &FrameHeader) -> Vec<u8> {
    bytes[fh.offset as usize..fh.end() as usize].to_vec()
}

/// A frame from raw parts: a length prefix, a BlobHeader and a Blob.
fn frame_of(prefix: u32, header: &[u8], blob: &[u8]) -> Vec<u8> {
    let mut v = prefix.to_be_bytes().to_vec();
    v.extend_from_slice(header);
    v.extend_from_slice(blob);
    v
}

/// A BlobHeader with a given `datasize` varint.
fn blob_header(kind: &str, datasize: u64) -> Vec<u8> {
    let mut h = Vec::new();
    put_bytes(&mut h, 1, kind.as_bytes());
    put_key(&mut h, 3, WireType::Varint);
    put_varint(&mut h, datasize);
    h
}

fn frame(kind: &str, blob: &[u8]) -> Vec<u8> {
    let h = blob_header(kind, blob.len() as u64);
    frame_of(h.len() as u32, &h, blob)
}

/// A Blob message from parts: optional raw_size and one data field.
fn blob(raw_size: Option<u64>, field: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    if let Some(n) = raw_size {
        put_key(&mut b, 2, WireType::Varint);
        put_varint(&mut b, n);
    }
    put_bytes(&mut b, field, data);
    b
}

/// The compressed bytes of `data` (the Blob's data field).
fn compressed(data: &[u8], c: Compression) -> Vec<u8> {
    let b = encode_blob(data, c).expect("compress");
    blob_data(&b).expect("blob").data.to_vec()
}

fn zlib(data: &[u8]) -> Vec<u8> {
    compressed(data, Compression::Zlib(6))
}

/// Truncations at every frame boundary of a file and at several points inside each frame.
fn truncations(name: &str, out: &mut Vec<Case>) {
    let (bytes, fr) = frames(name);
    for fh in &fr {
        let o = fh.offset;
        let body = fh.body_offset();
        let mut cuts = vec![
            o,
            o + 1,
            o + 3,
            o + 4,
            o + 4 + u64::from(fh.header_len) / 2,
            body,
            body + 1,
        ];
        cuts.extend([body + u64::from(fh.datasize) / 2, fh.end() - 1]);
        for cut in cuts {
            if cut < bytes.len() as u64 {
                out.push(case(
                    format!("{name} cut at {cut}"),
                    bytes[..cut as usize].to_vec(),
                    cut > 0,
                ));
            }
        }
    }
}

/// Frames whose lengths lie, spliced after the real file's header frame.
fn lying_lengths(name: &str, out: &mut Vec<Case>) {
    let (bytes, fr) = frames(name);
    let head = frame_bytes(&bytes, &fr[0]);
    let data = &fr[1];
    let real = frame_bytes(&bytes, data);
    let hl = data.header_len as usize;
    let header = &real[4..4 + hl];
    let body = &real[4 + hl..];
    let rest: Vec<u8> = fr[2..]
        .iter()
        .flat_map(|f| frame_bytes(&bytes, f))
        .collect();
    let with = |frame: Vec<u8>| {
        let mut v = head.clone();
        v.extend(frame);
        v.extend_from_slice(&rest);
        v
    };
    for prefix in [
        hl as u32 + 1,
        hl as u32 - 1,
        0,
        1,
        65_536,
        65_537,
        0x8000_0000,
        u32::MAX,
    ] {
        out.push(case(
            format!("{name}: BlobHeader length {prefix} (real {hl})"),
            with(frame_of(prefix, header, body)),
            true,
        ));
    }
    let ds = body.len() as u64;
    for size in [
        ds - 1,
        ds + 1,
        ds + 100_000,
        0,
        1,
        32 << 20,
        (32 << 20) + 1,
        u64::from(u32::MAX),
        (-1i64) as u64,
        1 << 62,
    ] {
        let h = blob_header("OSMData", size);
        out.push(case(
            format!("{name}: datasize {size} (real {ds})"),
            with(frame_of(h.len() as u32, &h, body)),
            true,
        ));
    }
    let b = blob_data(body).expect("blob");
    let raw = pbf_format::compress::decode_blob(body).expect("decode");
    let n = raw.len() as u64;
    let field = if b.compression == Codec::Zlib { 3 } else { 6 };
    for lie in [
        Some(n - 1),
        Some(n + 1),
        Some(0),
        None,
        Some(33 << 20),
        Some((-1i64) as u64),
        Some(1 << 40),
    ] {
        let blob = blob(lie, field, b.data);
        out.push(case(
            format!("{name}: raw_size {lie:?} (real {n})"),
            with(frame("OSMData", &blob)),
            true,
        ));
    }
    // A zlib stream that inflates past its raw_size.
    let mut longer = raw.clone();
    longer.extend([0u8; 100]);
    out.push(case(
        format!("{name}: zlib inflates past raw_size"),
        with(frame("OSMData", &blob(Some(n), 3, &zlib(&longer)))),
        true,
    ));
    // Bombs: 64 MiB of zeros in a few dozen KiB.
    let zeros = vec![0u8; 64 << 20];
    let zbomb = zlib(&zeros);
    for lie in [None, Some(64 << 20), Some(1000), Some(32 << 20)] {
        out.push(case(
            format!("zlib bomb, raw_size {lie:?}"),
            with(frame("OSMData", &blob(lie, 3, &zbomb))),
            true,
        ));
    }
    let zst = compressed(&zeros, Compression::Zstd(3));
    for lie in [None, Some(64 << 20), Some(1000)] {
        out.push(case(
            format!("zstd bomb, raw_size {lie:?}"),
            with(frame("OSMData", &blob(lie, 7, &zst))),
            true,
        ));
    }
    let lz = compressed(&zeros, Compression::Lz4);
    for lie in [None, Some(64 << 20), Some(1000), Some(32 << 20)] {
        out.push(case(
            format!("lz4 bomb, raw_size {lie:?}"),
            with(frame("OSMData", &blob(lie, 6, &lz))),
            true,
        ));
    }
    // Blob shapes: no data, two data fields, data as a varint, lzma, bzip2, unknown type.
    let mut two = blob(Some(n), 3, b.data);
    put_bytes(&mut two, 1, &raw);
    let mut varint_data = Vec::new();
    put_key(&mut varint_data, 3, WireType::Varint);
    put_varint(&mut varint_data, 5);
    let shapes: [(&str, Vec<u8>); 6] = [
        ("blob without data", blob(Some(n), 15, b"")),
        ("blob with two data fields", two),
        ("blob data as a varint", varint_data),
        ("lzma blob", blob(Some(n), 4, b"\x5d\0\0\x80\0")),
        ("bzip2 blob", blob(Some(n), 5, b"BZh91AY&SY")),
        ("empty blob", Vec::new()),
    ];
    for (what, blob) in shapes {
        out.push(case(
            format!("{name}: {what}"),
            with(frame("OSMData", &blob)),
            true,
        ));
    }
    for kind in ["OSMFoo", "", "OSMHeader"] {
        out.push(case(
            format!("{name}: blob type {kind:?} in the middle"),
            with(frame(kind, body)),
            true,
        ));
    }
    let mut no_type = Vec::new();
    put_key(&mut no_type, 3, WireType::Varint);
    put_varint(&mut no_type, ds);
    out.push(case(
        format!("{name}: BlobHeader without type"),
        with(frame_of(no_type.len() as u32, &no_type, body)),
        true,
    ));
    let bad_utf8 = blob_header("OSM\u{ff}Data", ds)
        .iter()
        .map(|&c| if c == 0xc3 { 0xff } else { c })
        .collect::<Vec<_>>();
    out.push(case(
        format!("{name}: BlobHeader type not UTF-8"),
        with(frame_of(bad_utf8.len() as u32, &bad_utf8, body)),
        true,
    ));
    // Lying indexdata: our magic with keys that do not match the blob, and the
    // blob's true summary with one bit flipped (the checksum must catch it).
    let truth = pbf_format::scan::scan_block(&raw)
        .expect("scan")
        .expect("keys");
    let mut lies = lying_indexdata();
    let start = pbf_format::frame::BlobStart::of(body);
    let good_ix = pbf_format::indexdata::encode(&truth, &start);
    for bit in [50, 60, 70, 85, 100] {
        let mut ix = good_ix.clone();
        let at = (bit / 8) % ix.len();
        ix[at] ^= 1 << (bit % 8);
        lies.push(ix);
    }
    for ix in lies {
        let mut h = Vec::new();
        put_bytes(&mut h, 1, b"OSMData");
        put_bytes(&mut h, 2, &ix);
        put_key(&mut h, 3, WireType::Varint);
        put_varint(&mut h, ds);
        out.push(case(
            format!("{name}: indexdata {ix:?}"),
            with(frame_of(h.len() as u32, &h, body)),
            true,
        ));
    }
}

/// Indexdata with our magic whose contents are garbage or lies.
fn lying_indexdata() -> Vec<Vec<u8>> {
    let mut v = vec![
        b"PBSX".to_vec(),
        b"PBSX\x01\x01".to_vec(),
        b"PBSX\x01\x07\0\x02\0\0\x02\0\x01\0\0\0".to_vec(),
    ];
    // Claims nodes 1..1, one node, sorted: a lie about a blob of thousands.
    let mut lie = b"PBSX\x01\x01".to_vec();
    for _ in 0..2 {
        lie.push(0);
        put_varint(&mut lie, encode_zigzag(1));
        put_varint(&mut lie, 1);
    }
    lie.extend([1, 0, 0, 0]);
    v.push(lie);
    v.push([&b"PBSX\x01\x01"[..], &[0xff; 20]].concat());
    v
}

// ------------------------------------------------------------ broken blocks

fn packed(vals: &[u64]) -> Vec<u8> {
    let mut v = Vec::new();
    for &x in vals {
        put_varint(&mut v, x);
    }
    v
}

fn zz(vals: &[i64]) -> Vec<u64> {
    vals.iter().map(|&x| encode_zigzag(x)).collect()
}

fn info(version: u64, user_sid: u64) -> Vec<u8> {
    let mut i = Vec::new();
    put_varint_field(&mut i, 1, version);
    put_varint_field(&mut i, 5, user_sid);
    i
}

fn node(id: i64, keys: &[u64], vals: &[u64], info_bytes: &[u8]) -> Vec<u8> {
    let mut n = Vec::new();
    put_varint_field(&mut n, 1, encode_zigzag(id));
    put_bytes(&mut n, 2, &packed(keys));
    put_bytes(&mut n, 3, &packed(vals));
    put_bytes(&mut n, 4, info_bytes);
    put_varint_field(&mut n, 8, encode_zigzag(1));
    put_varint_field(&mut n, 9, encode_zigzag(1));
    n
}

fn dense(ids: &[i64], lats: usize, keys_vals: &[u64], versions: &[u64], users: &[i64]) -> Vec<u8> {
    let mut d = Vec::new();
    put_bytes(&mut d, 1, &packed(&zz(ids)));
    let mut di = Vec::new();
    put_bytes(&mut di, 1, &packed(versions));
    put_bytes(&mut di, 5, &packed(&zz(users)));
    put_bytes(&mut d, 5, &di);
    put_bytes(&mut d, 8, &packed(&vec![2; lats]));
    put_bytes(&mut d, 9, &packed(&vec![2; ids.len()]));
    put_bytes(&mut d, 10, &packed(keys_vals));
    d
}

fn way(id: u64, keys: &[u64], vals: &[u64], refs: &[i64]) -> Vec<u8> {
    let mut w = Vec::new();
    put_varint_field(&mut w, 1, id);
    put_bytes(&mut w, 2, &packed(keys));
    put_bytes(&mut w, 3, &packed(vals));
    put_bytes(&mut w, 4, &info(1, 0));
    put_bytes(&mut w, 8, &packed(&zz(refs)));
    w
}

fn relation(id: u64, roles: &[u64], memids: &[i64], types: &[u64]) -> Vec<u8> {
    let mut r = Vec::new();
    put_varint_field(&mut r, 1, id);
    put_bytes(&mut r, 4, &info(1, 0));
    put_bytes(&mut r, 8, &packed(roles));
    put_bytes(&mut r, 9, &packed(&zz(memids)));
    put_bytes(&mut r, 10, &packed(types));
    r
}

/// A PrimitiveBlock with a string table ["", "k", "v"] and one group.
fn block(group: &[u8], extra: &[u8]) -> Vec<u8> {
    let mut st = Vec::new();
    for s in [&b""[..], b"k", b"v"] {
        put_bytes(&mut st, 1, s);
    }
    let mut b = Vec::new();
    put_bytes(&mut b, 1, &st);
    put_bytes(&mut b, 2, group);
    b.extend_from_slice(extra);
    b
}

fn group(field: u32, msg: &[u8]) -> Vec<u8> {
    let mut g = Vec::new();
    put_bytes(&mut g, field, msg);
    g
}

/// Broken PrimitiveBlocks, each in a file after a good block whose key range
/// overlaps it (so the merge decodes both) and, separately, alone.
fn broken_blocks(out: &mut Vec<Case>) {
    let (bytes, fr) = frames("sorted-andorra.osm.pbf");
    let head = frame_bytes(&bytes, &fr[0]);
    let good = block(
        &group(
            2,
            &dense(&[1, 2, 2], 3, &[1, 2, 0, 0, 0], &[1, 1, 1], &[0, 0, 0]),
        ),
        &[],
    );
    let huge = [0xffu8; 11];
    let mut long_len = Vec::new();
    put_key(&mut long_len, 2, WireType::Len);
    put_varint(&mut long_len, 1 << 62);
    let blocks: Vec<(&str, Vec<u8>)> = vec![
        (
            "node key index out of range",
            block(&group(1, &node(2, &[99], &[2], &info(1, 0))), &[]),
        ),
        (
            "node value index out of range",
            block(&group(1, &node(2, &[1], &[1 << 31], &info(1, 0))), &[]),
        ),
        (
            "node user_sid out of range",
            block(&group(1, &node(2, &[], &[], &info(1, 77))), &[]),
        ),
        (
            "node tag keys and values of different counts",
            block(&group(1, &node(2, &[1, 1], &[2], &info(1, 0))), &[]),
        ),
        (
            "node version negative",
            block(&group(1, &node(2, &[], &[], &info((-5i64) as u64, 0))), &[]),
        ),
        (
            "node id i64::MIN",
            block(&group(1, &node(i64::MIN, &[], &[], &info(1, 0))), &[]),
        ),
        (
            "dense keys_vals out of range",
            block(&group(2, &dense(&[2], 1, &[1, 9, 0], &[1], &[0])), &[]),
        ),
        (
            "dense keys_vals without terminator",
            block(
                &group(2, &dense(&[2, 1], 2, &[1, 2], &[1, 1], &[0, 0])),
                &[],
            ),
        ),
        (
            "dense keys_vals odd",
            block(&group(2, &dense(&[2], 1, &[1], &[1], &[0])), &[]),
        ),
        (
            "dense lat count differs",
            block(
                &group(2, &dense(&[2, 1, 1], 2, &[], &[1, 1, 1], &[0, 0, 0])),
                &[],
            ),
        ),
        (
            "dense info count differs",
            block(&group(2, &dense(&[2, 1], 2, &[], &[1], &[0, 0])), &[]),
        ),
        (
            "dense user_sid out of range",
            block(&group(2, &dense(&[2], 1, &[], &[1], &[40])), &[]),
        ),
        (
            "dense user_sid negative",
            block(&group(2, &dense(&[2], 1, &[], &[1], &[-3])), &[]),
        ),
        (
            "dense id delta overflows",
            block(
                &group(
                    2,
                    &dense(&[2, i64::MAX, i64::MAX], 3, &[], &[1, 1, 1], &[0, 0, 0]),
                ),
                &[],
            ),
        ),
        (
            "dense id delta underflows",
            block(
                &group(
                    2,
                    &dense(&[-2, i64::MIN, i64::MIN], 3, &[], &[1, 1, 1], &[0, 0, 0]),
                ),
                &[],
            ),
        ),
        (
            "way tag out of range",
            block(&group(3, &way(2, &[5], &[1], &[1, 1])), &[]),
        ),
        (
            "way ref delta overflows",
            block(&group(3, &way(2, &[], &[], &[i64::MAX, i64::MAX])), &[]),
        ),
        (
            "way id negative huge",
            block(&group(3, &way((-1i64) as u64, &[], &[], &[1])), &[]),
        ),
        (
            "relation role out of range",
            block(&group(4, &relation(2, &[9], &[1], &[0])), &[]),
        ),
        (
            "relation member arrays differ",
            block(&group(4, &relation(2, &[0, 0], &[1], &[0])), &[]),
        ),
        (
            "relation member type 7",
            block(&group(4, &relation(2, &[0], &[1], &[7])), &[]),
        ),
        (
            "relation memid delta overflows",
            block(
                &group(4, &relation(2, &[0, 0], &[i64::MAX, 5], &[0, 0])),
                &[],
            ),
        ),
        (
            "granularity 0",
            block(
                &group(2, &dense(&[2], 1, &[], &[1], &[0])),
                &[0x88, 0x01, 0x00],
            ),
        ),
        (
            "granularity negative",
            block(
                &group(2, &dense(&[2], 1, &[], &[1], &[0])),
                &[0x88, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f],
            ),
        ),
        (
            "11-byte varint",
            [
                &block(&group(2, &dense(&[2], 1, &[], &[1], &[0])), &[])[..],
                &[0x88, 0x01],
                &huge,
            ]
            .concat(),
        ),
        (
            "varint cut at the end",
            [
                &block(&group(1, &node(2, &[], &[], &info(1, 0))), &[])[..],
                &[0x88, 0x01, 0x80],
            ]
            .concat(),
        ),
        (
            "field length 2^62",
            [
                &block(&group(1, &node(2, &[], &[], &info(1, 0))), &[])[..],
                &long_len,
            ]
            .concat(),
        ),
        (
            "group wire type 3",
            [
                &block(&group(1, &node(2, &[], &[], &info(1, 0))), &[])[..],
                &[0x13, 0x14],
            ]
            .concat(),
        ),
        ("wire type 7", vec![0x0f, 0x00]),
        ("field number 0", vec![0x02, 0x00]),
        ("primitive group as a varint", vec![0x10, 0x05]),
        ("dense as fixed32", block(&[0x15, 1, 2, 3, 4], &[])),
        (
            "two dense fields in one group",
            block(
                &[
                    group(2, &dense(&[5], 1, &[], &[1], &[0])),
                    group(2, &dense(&[1], 1, &[], &[1], &[0])),
                ]
                .concat(),
                &[],
            ),
        ),
        (
            "nodes after ways in one group",
            block(
                &[
                    group(3, &way(2, &[], &[], &[1])),
                    group(1, &node(9, &[], &[], &info(1, 0))),
                ]
                .concat(),
                &[],
            ),
        ),
    ];
    for (what, b) in blocks {
        let encoded = encode_blob(&b, Compression::Zlib(6)).expect("encode");
        let bad = frame("OSMData", &encoded);
        let good_frame = frame(
            "OSMData",
            &encode_blob(&good, Compression::Zlib(6)).expect("encode"),
        );
        let merged = [&head[..], &good_frame, &bad].concat();
        out.push(case(format!("block: {what} (merged)"), merged, true));
        let alone = [&head[..], &bad].concat();
        out.push(case(format!("block: {what} (alone)"), alone, true));
        let raw = [&head[..], &frame("OSMData", &blob(None, 1, &b))].concat();
        out.push(case(format!("block: {what} (raw blob)"), raw, true));
    }
}

/// Files that are not PBF at all.
fn not_pbf(out: &mut Vec<Case>) {
    let mut rng = Rng::new(7, 0);
    let random =
        |n: usize, rng: &mut Rng| (0..n).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>();
    let xml =
        b"<?xml version='1.0' encoding='UTF-8'?>\n<osm version=\"0.6\" generator=\"test\">\n  \
                <node id=\"1\" version=\"1\" lat=\"1.0\" lon=\"1.0\"/>\n</osm>\n"
            .to_vec();
    let (bytes, fr) = frames("sorted-andorra.osm.pbf");
    let head = frame_bytes(&bytes, &fr[0]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty file", Vec::new()),
        ("one byte", vec![0x0a]),
        ("three bytes", vec![0, 0, 0]),
        ("four zero bytes", vec![0; 4]),
        ("64 KiB of zeros", vec![0; 65_536]),
        ("random 1 KiB", random(1024, &mut rng)),
        ("random 100 KiB", random(100_000, &mut rng)),
        (
            "a text file",
            b"hello, world\nthis is not a PBF file\n".repeat(50),
        ),
        ("an OSM XML file", xml),
        (
            "an ELF binary",
            std::fs::read(env!("CARGO_BIN_EXE_pbf-index")).expect("binary")[..200_000].to_vec(),
        ),
        ("header frame only", head.clone()),
        ("header frame twice", [&head[..], &head].concat()),
        (
            "header then garbage",
            [&head[..], &random(5000, &mut rng)].concat(),
        ),
        (
            "garbage then a PBF",
            [&random(100, &mut rng)[..], &bytes].concat(),
        ),
    ];
    for (what, b) in cases {
        let offset = b.len() > 4 && !what.contains("header frame");
        out.push(case(what, b, offset));
    }
}

/// Seeded bit flips, aimed at length prefixes, BlobHeaders, the start of
/// Blobs (raw_size, data tag and length) and anywhere in the data.
fn bit_flips(count: u64, seed: u64, out: &mut Vec<Case>) {
    let files = [
        "unsorted-type-regression.osm.pbf",
        "sorted-raw-nodense-mixed.osm.pbf",
        "unsorted-mixed-tiny.osm.pbf",
        "sorted-monaco-lz4.osm.pbf",
        "negative-ids-graphhopper.osm.pbf",
    ];
    let parsed: Vec<_> = files.iter().map(|n| frames(n)).collect();
    let mut rng = Rng::new(seed, 0);
    for i in 0..count {
        let k = rng.below(parsed.len());
        let (bytes, fr) = &parsed[k];
        let mut b = bytes.clone();
        let fh = &fr[rng.below(fr.len())];
        let flips = 1 + rng.below(3);
        let mut where_ = Vec::new();
        for _ in 0..flips {
            let (lo, len) = match rng.below(4) {
                0 => (fh.offset, 4),
                1 => (fh.offset + 4, u64::from(fh.header_len)),
                2 => (fh.body_offset(), u64::from(fh.datasize).min(16)),
                _ => (fh.offset, fh.frame_len()),
            };
            let pos = (lo as usize) + rng.below(len as usize);
            b[pos] ^= 1 << rng.below(8);
            where_.push(pos);
        }
        let mut c = case(format!("flip {i}: {} at {where_:?}", files[k]), b, true);
        c.sort = i % 6 == 0;
        out.push(c);
    }
}

/// Run pbf-index and (when asked) pbf-sort on one case; returns (index exit, sort exit).
fn try_case(c: &Case, dir: &Path, out_dir: &Path, rss_mb: u64) -> (i32, Option<i32>) {
    let input = dir.join("hostile.osm.pbf");
    std::fs::write(&input, &c.bytes).expect("write case");
    let name = input.to_string_lossy().into_owned();
    let limit = Duration::from_secs(120);
    let mut idx = Command::new(env!("CARGO_BIN_EXE_pbf-index"));
    idx.arg("-q").arg(&input);
    let o = run_bounded(&idx, limit, dir);
    let what = format!("pbf-index on {}", c.name);
    assert!(
        o.max_rss_kb < rss_mb * 1024,
        "{what}: peak RSS {} KiB",
        o.max_rss_kb
    );
    let index_code = o.status.code().unwrap_or(-1);
    if !o.status.success() {
        check_clean_failure(&what, &o, &name, c.offset);
        let lines = o.stderr.lines().count();
        assert_eq!(
            lines, 1,
            "{what}: pbf-index printed {lines} lines:\n{}",
            o.stderr
        );
    }
    if !c.sort {
        return (index_code, None);
    }
    let out = out_dir.join("sorted.osm.pbf");
    let mut s = pbf_sort();
    s.arg("-q")
        .arg("--memory")
        .arg("64M")
        .arg(&input)
        .arg("-o")
        .arg(&out);
    let o = run_bounded(&s, limit, dir);
    let what = format!("pbf-sort on {}", c.name);
    assert!(
        o.max_rss_kb < rss_mb * 1024,
        "{what}: peak RSS {} KiB",
        o.max_rss_kb
    );
    if o.status.success() {
        if let Err(e) = output_is_sorted(&out, &input) {
            panic!("{what}: exit 0 but {e}");
        }
        std::fs::remove_file(&out).expect("rm output");
    } else {
        check_clean_failure(&what, &o, &name, c.offset);
        assert!(!out.exists(), "{what}: failed but left an output");
    }
    assert!(
        entries(out_dir).is_empty(),
        "{what}: left {:?}",
        entries(out_dir)
    );
    assert_eq!(
        std::fs::read(&input).expect("read"),
        c.bytes,
        "{what}: the input changed"
    );
    (index_code, Some(o.status.code().unwrap_or(-1)))
}

/// Run every case, printing a tally (DESIGN.md, Faults, names what each class must give).
fn run_cases(label: &str, cases: &[Case]) {
    let rss_mb = env_budget("PBF_SORT_FAULT_RSS_MB", 512);
    let (dir, out_dir) = scratch();
    let (mut sorts, mut index_fail, mut sort_fail) = (0, 0, 0);
    for c in cases {
        let (i, s) = try_case(c, dir.path(), &out_dir, rss_mb);
        index_fail += u64::from(i != 0);
        if let Some(s) = s {
            sorts += 1;
            sort_fail += u64::from(s != 0);
        }
    }
    eprintln!(
        "hostile {label}: {} files through pbf-index ({index_fail} clean errors, {} accepted), \
         {sorts} through pbf-sort ({sort_fail} clean errors, {} sorted outputs); no panic, hang, \
         signal or output left behind",
        cases.len(),
        cases.len() as u64 - index_fail,
        sorts - sort_fail
    );
}

#[test]
fn truncated_files() {
    let mut cases = Vec::new();
    for name in [
        "sorted-andorra.osm.pbf",
        "unsorted-type-regression.osm.pbf",
        "sorted-raw-nodense-mixed.osm.pbf",
        "sorted-monaco-lz4.osm.pbf",
    ] {
        truncations(name, &mut cases);
    }
    run_cases("truncations", &cases);
}

#[test]
fn lying_lengths_and_bombs() {
    let mut cases = Vec::new();
    lying_lengths("unsorted-type-regression.osm.pbf", &mut cases);
    lying_lengths("sorted-monaco-lz4.osm.pbf", &mut cases);
    run_cases("lengths", &cases);
}

#[test]
fn broken_blocks_and_varints() {
    let mut cases = Vec::new();
    broken_blocks(&mut cases);
    run_cases("blocks", &cases);
}

#[test]
fn files_that_are_not_pbf() {
    let mut cases = Vec::new();
    not_pbf(&mut cases);
    run_cases("not-pbf", &cases);
}

#[test]
fn seeded_bit_flips() {
    let mut cases = Vec::new();
    let count = env_budget("PBF_SORT_FAULT_CASES", 600);
    bit_flips(count, env_budget("PBF_SORT_FAULT_SEED", 1), &mut cases);
    run_cases("bit flips", &cases);
}
