//! `pbf-index` over every real file: counts agree with osmium, keys and sorted
//! flags agree with a full decode, broken files fail cleanly; both ways of
//! reading the headers (`--io`) in [`io`].

use std::collections::HashMap;
use std::path::Path;

use pbf_format::Kind;
use pbf_format::block::{Element, EncodeOptions, Node, decode_block, encode_block};
use pbf_format::compress::{Compression, decode_blob, encode_blob};
use pbf_format::frame::{BlobType, PbfFile, encode_frame};
use pbf_format::scan::Accumulator;
use pbf_stream::{IndexRecord, KeyRecord, KeysFrom};

use crate::util::*;

mod io;

#[test]
fn counts_agree_with_osmium() {
    for path in good_files() {
        let recs: Vec<IndexRecord> = records(&index_stream(&path));
        let Some(IndexRecord::End(end)) = recs.last() else {
            panic!("{}: no end record", name(&path))
        };
        let info = fileinfo(&path);
        let count = &info["data"]["count"];
        let want = [&count["nodes"], &count["ways"], &count["relations"]]
            .map(|v| v.as_u64().expect("count"));
        assert_eq!(
            [
                end.counts[Kind::Node],
                end.counts[Kind::Way],
                end.counts[Kind::Relation]
            ],
            want,
            "{}",
            name(&path)
        );
        let blobs = recs
            .iter()
            .filter(|r| matches!(r, IndexRecord::Blob(_)))
            .count();
        assert_eq!(blobs as u64, end.blobs, "{}", name(&path));
    }
}

#[test]
fn keys_and_sorted_flags_agree_with_a_full_decode() {
    for path in good_files() {
        let file = PbfFile::open(&path).expect("open");
        for rec in records::<IndexRecord>(&index_stream(&path)) {
            let IndexRecord::Blob(b) = rec else { continue };
            assert_eq!(b.from, KeysFrom::Decoded);
            let fh = file.frame_header_at(b.offset).expect("frame");
            assert_eq!(fh.frame_len(), b.length);
            let raw = decode_blob(&file.read_body(&fh).expect("body")).expect("decompress");
            let mut acc = Accumulator::default();
            for e in decode_block(&raw).expect("decode") {
                acc.push(e.key());
            }
            let s = acc.finish().expect("non-empty");
            assert_eq!(b.summary(), s, "{} blob {}", name(&path), b.seq);
        }
    }
}

/// A file of 1.6 MB of raw blobs (behind kualalumpur's header frame)
/// whose nodes' tag values hold whole frames between padding: bytes that
/// the search for a frame start finds before the next real frame.
fn decoys(out: &Path) {
    let fake = encode_frame(&BlobType::OsmData, None, b"fake body").expect("frame");
    let head = PbfFile::open(&data("sorted-kualalumpur.osm.pbf")).expect("open");
    let fh = head
        .headers()
        .next()
        .expect("a frame")
        .expect("header frame");
    let mut bytes = head
        .read_exact_at(0, fh.frame_len() as usize, "header")
        .expect("read");
    for b in 0..8 {
        let nodes: Vec<Element> = (0..100)
            .map(|i| {
                let id = b * 100 + i + 1;
                let mut value = format!("{id:0>1000}").into_bytes();
                value.extend_from_slice(&fake);
                value.resize(2000, b'y');
                let tags = vec![(b"note"[..].into(), value.into())];
                let node = Node {
                    id,
                    info: None,
                    lat: id,
                    lon: id,
                    tags,
                };
                Element::Node(node)
            })
            .collect();
        let block = encode_block(&nodes, &EncodeOptions::default());
        let blob = encode_blob(&block, Compression::None).expect("raw blob");
        bytes.extend(encode_frame(&BlobType::OsmData, None, &blob).expect("frame"));
    }
    std::fs::write(out, bytes).expect("write");
}

/// Every sample of a source record is the first key of the blob record at
/// its offset, in offset order: on the real files (those of 1 MiB or more
/// are sampled), and on raw blobs holding frames in their strings, where
/// the search finds those first and their Blobs do not check.
#[test]
fn samples_are_first_keys_of_indexed_blobs() {
    let dir = tempfile::tempdir().expect("dir");
    let decoyed = dir.path().join("decoys.osm.pbf");
    decoys(&decoyed);
    let mut sampled = 0;
    for path in good_files().into_iter().chain([decoyed]) {
        let recs: Vec<IndexRecord> = records(&index_stream(&path));
        let IndexRecord::Source(src) = &recs[0] else {
            panic!("{}: no source record first", name(&path))
        };
        let firsts: HashMap<u64, KeyRecord> = recs
            .iter()
            .filter_map(|r| match r {
                IndexRecord::Blob(b) => Some((b.offset, b.first)),
                _ => None,
            })
            .collect();
        for s in &src.samples {
            assert_eq!(firsts.get(&s.offset), Some(&s.first), "{}", name(&path));
        }
        let ordered = src.samples.windows(2).all(|w| w[0].offset < w[1].offset);
        assert!(ordered, "{}: {:?}", name(&path), src.samples);
        assert_eq!(
            src.samples.is_empty(),
            src.file.size < 1 << 20,
            "{}",
            name(&path)
        );
        sampled += src.samples.len();
    }
    assert!(sampled > 100, "{sampled} samples");
}

#[test]
fn several_files_give_several_sections() {
    let (a, b) = (
        data("sorted-andorra.osm.pbf"),
        data("unsorted-mixed-tiny.osm.pbf"),
    );
    let mut c = bin("pbf-index");
    c.arg("-q").arg(&a).arg(&b);
    let recs: Vec<IndexRecord> = records(&succeeds(c));
    let sources = recs
        .iter()
        .filter(|r| matches!(r, IndexRecord::Source(_)))
        .count();
    let ends = recs
        .iter()
        .filter(|r| matches!(r, IndexRecord::End(_)))
        .count();
    assert_eq!((sources, ends), (2, 2));
}

#[test]
fn broken_files_fail_with_one_line_and_no_end() {
    for (file, needle) in [
        ("bad-truncated.osm.pbf", "offset 6120: truncated Blob"),
        (
            "bad-no-header.osm.pbf",
            "offset 0: first blob is \"OSMData\", expected OSMHeader",
        ),
    ] {
        let path = data(file);
        let mut c = bin("pbf-index");
        c.arg(&path);
        refused(file, &run(c), 1, &[&path.to_string_lossy(), needle]);
    }
}

#[test]
fn changeset_range_file_is_indexed() {
    let recs: Vec<IndexRecord> = records(&index_stream(&data("bad-changeset-range.osm.pbf")));
    assert!(matches!(recs.last(), Some(IndexRecord::End(e)) if e.counts[Kind::Node] == 6));
}

#[test]
fn missing_file_and_bad_usage() {
    let mut c = bin("pbf-index");
    c.arg("/nonexistent/x.pbf");
    // A missing file is found before any work.
    refused("a missing file", &run(c), 2, &["/nonexistent/x.pbf"]);
    let out = run(bin("pbf-index"));
    assert_eq!(out.status.code(), Some(2), "no FILE is a usage error");
}
