//! What the toolkit trusts, tried with inputs that lie: indexdata that other
//! writers (or a bad edit) put on blobs it does not describe, headers that
//! claim an order the data lacks, files of several OSMHeaders, headers that
//! require what the toolkit does not understand. Each run either gives a
//! file osmium finds ordered, with osmium's objects, or fails in one line
//! with no output; `--check` never passes an unsorted output.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pbf_format::block::{Element, EncodeOptions, Info, Node, encode_block};
use pbf_format::compress::{Compression, encode_blob};
use pbf_format::frame::{BlobStart, BlobType, PbfFile, encode_frame};
use pbf_format::header::Header;
use pbf_format::indexdata;
use pbf_stream::{IndexRecord, KeysFrom};

use crate::util::*;

/// A node version with metadata.
fn node(id: i64) -> Element {
    Element::Node(Node {
        id,
        info: Some(Info {
            version: 1,
            timestamp_ms: 1_600_000_000_000 + id * 1000,
            changeset: 7,
            uid: 3,
            user: Arc::from(&b"tester"[..]),
            visible: None,
        }),
        lat: 10 * id,
        lon: 20 * id,
        tags: Vec::new(),
    })
}

/// pbfhogg's 42-byte v2 indexdata for nodes `min..=max`, `count` of them.
fn pbfhogg_indexdata(min: i64, max: i64, count: u64) -> Vec<u8> {
    let mut b = vec![0x02, 0x00];
    b.extend(min.to_le_bytes());
    b.extend(max.to_le_bytes());
    b.extend(count.to_le_bytes());
    b.extend([0u8; 16]);
    b
}

/// A header as the writers of these files make it.
fn header(required: &[&str], optional: &[&str]) -> Header {
    Header {
        required_features: required.iter().map(|s| s.to_string()).collect(),
        optional_features: optional.iter().map(|s| s.to_string()).collect(),
        writingprogram: Some("forged".into()),
        ..Header::default()
    }
}

/// A data frame of plain (non-dense) nodes, with `indexdata` given the
/// frame's Blob (`None`: no indexdata).
fn data_frame(ids: &[i64], indexdata: impl Fn(&[u8]) -> Option<Vec<u8>>) -> Vec<u8> {
    let elements: Vec<Element> = ids.iter().map(|&id| node(id)).collect();
    let opts = EncodeOptions {
        dense_nodes: false,
        ..EncodeOptions::default()
    };
    let blob = encode_blob(&encode_block(&elements, &opts), Compression::Zlib(6)).expect("blob");
    let ix = indexdata(&blob);
    encode_frame(&BlobType::OsmData, ix.as_deref(), &blob).expect("frame")
}

/// A file of a header frame and data frames.
fn write_pbf(path: &Path, header: &Header, frames: &[Vec<u8>]) {
    let mut bytes =
        pbf_format::header::encode_header_frame(header, Default::default()).expect("header frame");
    for f in frames {
        bytes.extend_from_slice(f);
    }
    std::fs::write(path, bytes).expect("write PBF");
}

/// The shape of a real pbfhogg 0.5.0 output: the header claims the order,
/// every blob carries pbfhogg's indexdata, and one blob holds nodes 1, 3, 2.
fn pbfhogg_like(dir: &Path) -> PathBuf {
    let path = dir.join("pbfhogg-like.osm.pbf");
    let frames = [
        data_frame(&[1, 3, 2], |_| Some(pbfhogg_indexdata(1, 3, 3))),
        data_frame(&[4, 5], |_| Some(pbfhogg_indexdata(4, 5, 2))),
    ];
    let h = header(&["OsmSchema-V0.6"], &["Sort.Type_then_ID"]);
    write_pbf(&path, &h, &frames);
    path
}

/// Where each blob record of `pbf-index ARGS FILE` took its keys from.
fn keys_from(file: &Path, args: &[&str]) -> Vec<KeysFrom> {
    let mut c = bin("pbf-index");
    c.arg("-q").args(args).arg(file);
    records::<IndexRecord>(&succeeds(c))
        .into_iter()
        .filter_map(|r| match r {
            IndexRecord::Blob(b) => Some(b.from),
            _ => None,
        })
        .collect()
}

#[test]
fn pbfhogg_indexdata_is_not_trusted_by_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = pbfhogg_like(dir.path());
    assert!(!osmium_ordered(&input), "the forged input must be unsorted");
    assert_eq!(keys_from(&input, &[]), [KeysFrom::Decoded; 2]);
    let trusted = keys_from(&input, &["--trust-indexdata", "pbfhogg"]);
    assert_eq!(trusted, [KeysFrom::Indexdata; 2]);
    for check in [false, true] {
        let out = dir.path().join(format!("out-{check}.osm.pbf"));
        let mut c = pbf_sort();
        c.arg("-q").arg(&input).arg("-o").arg(&out);
        if check {
            c.arg("--check");
        }
        succeeds(c);
        assert_sorted_like_osmium(&out, &[&input], dir.path(), "pbfhogg-like");
    }
}

#[test]
fn check_decodes_and_refuses_an_output_that_trusted_a_lie() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = pbfhogg_like(dir.path());
    let out = dir.path().join("out.osm.pbf");
    // The user vouches for the file, wrongly: the copied blob stays 1, 3, 2.
    let index = "pbf-index --trust-indexdata pbfhogg";
    let mut c = pbf_sort();
    c.args(["-q", "--index-cmd", index, "--check"])
        .arg(&input)
        .arg("-o")
        .arg(&out);
    fails_in_a_stage("--check", &run(c), &out, &["pbf-overlap: not in order: "]);
    // Without --check the same run writes the unsorted file it was told to.
    let mut c = pbf_sort();
    c.args(["-q", "--index-cmd", index])
        .arg(&input)
        .arg("-o")
        .arg(&out);
    succeeds(c);
    assert!(!osmium_ordered(&out));
    // And the check by hand, as the README gives it, says so too.
    let mut idx = bin("pbf-index");
    idx.arg("-q").arg("--decode").arg(&out);
    let mut check = bin("pbf-overlap");
    check.arg("--check");
    let o = run_with_input(check, &succeeds(idx));
    assert_eq!(
        o.status.code(),
        Some(1),
        "pbf-overlap --check of the output"
    );
}

/// Our indexdata is trusted only on the blob it was written for.
#[test]
fn our_indexdata_moved_to_another_blob_is_scanned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ours = |ids: &[i64]| {
        let ids = ids.to_vec();
        data_frame(&ids.clone(), move |blob| {
            let s = pbf_format::scan::Summary {
                first: pbf_format::Key::new(pbf_format::Kind::Node, ids[0], 1),
                last: pbf_format::Key::new(pbf_format::Kind::Node, ids[ids.len() - 1], 1),
                counts: [ids.len() as u64, 0, 0, 0],
                sorted: true,
                repeats: false,
                versions_unsorted: false,
                duplicate_ids: 0,
                negative_ids: false,
            };
            Some(indexdata::encode(&s, &BlobStart::of(blob)))
        })
    };
    let good = dir.path().join("good.osm.pbf");
    let h = header(&["OsmSchema-V0.6"], &[]);
    write_pbf(&good, &h, &[ours(&[1, 2]), ours(&[3, 4])]);
    assert_eq!(keys_from(&good, &[]), [KeysFrom::Indexdata; 2]);
    // The first frame's BlobHeader (its indexdata) on the second's Blob, and
    // the other way round: neither checks, both are scanned.
    let f = PbfFile::open(&good).expect("open");
    let frames: Vec<_> = f.headers().map(|h| h.expect("frame")).collect();
    let swapped: Vec<Vec<u8>> = [(1, 2), (2, 1)]
        .iter()
        .map(|&(head, body)| {
            let (h, b) = (&frames[head], &frames[body]);
            let blob = f.read_body(b).expect("body");
            encode_frame(&BlobType::OsmData, h.indexdata.as_deref(), &blob).expect("frame")
        })
        .collect();
    let moved = dir.path().join("moved.osm.pbf");
    write_pbf(&moved, &h, &swapped);
    assert_eq!(keys_from(&moved, &[]), [KeysFrom::Decoded; 2]);
    let out = dir.path().join("out.osm.pbf");
    let mut c = pbf_sort();
    c.arg("-q").arg("--check").arg(&moved).arg("-o").arg(&out);
    succeeds(c);
    assert_sorted_like_osmium(&out, &[&moved], dir.path(), "moved indexdata");
}

#[test]
fn an_unknown_required_feature_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("future.osm.pbf");
    let h = header(&["OsmSchema-V0.6", "Teleportation"], &[]);
    write_pbf(&input, &h, &[data_frame(&[2, 1], |_| None)]);
    let out = dir.path().join("out.osm.pbf");
    let mut c = pbf_sort();
    c.arg("-q").arg(&input).arg("-o").arg(&out);
    fails_in_a_stage(
        "future",
        &run(c),
        &out,
        &["Teleportation", "future.osm.pbf"],
    );
    // In a second OSMHeader too.
    let joined = dir.path().join("joined.osm.pbf");
    let mut bytes = std::fs::read(data("sorted-andorra.osm.pbf")).expect("read");
    bytes.extend(std::fs::read(&input).expect("read"));
    std::fs::write(&joined, bytes).expect("write");
    let mut c = pbf_sort();
    c.arg("-q").arg(&joined).arg("-o").arg(&out);
    fails_in_a_stage(
        "joined",
        &run(c),
        &out,
        &["Teleportation", "joined.osm.pbf"],
    );
}

/// Files joined with `cat`: each OSMHeader counts like another input's, so
/// history in the second part makes the output a history file.
#[test]
fn every_header_of_a_joined_file_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    // kualalumpur has more sorted blobs than the planner needs to write its
    // plan record early, so the second header comes after it went out.
    for first in ["sorted-kualalumpur.osm.pbf", "sorted-andorra.osm.pbf"] {
        let (a, h) = (data(first), data("history-niue.osh.pbf"));
        let joined = dir.path().join("joined.osm.pbf");
        let mut bytes = std::fs::read(&a).expect("read");
        bytes.extend(std::fs::read(&h).expect("read"));
        std::fs::write(&joined, bytes).expect("write");
        let out = dir.path().join("out.osh.pbf");
        let mut c = pbf_sort();
        c.arg("-q")
            .arg("-O")
            .arg("--check")
            .arg(&joined)
            .arg("-o")
            .arg(&out);
        succeeds(c);
        let info = assert_sorted_like_osmium(&out, &[&a, &h], dir.path(), first);
        let header = &info["header"];
        assert_eq!(
            header["with_history"].as_bool(),
            Some(true),
            "{first}: the output header does not declare history: {header}"
        );
        let f = PbfFile::open(&out).expect("open");
        let headers = f
            .headers()
            .filter(|h| h.as_ref().expect("frame").blob_type == BlobType::OsmHeader)
            .count();
        assert_eq!(headers, 1, "{first}: one OSMHeader in the output");
    }
}

/// The index stream says where each later OSMHeader was.
#[test]
fn a_later_header_is_an_index_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, h) = (data("sorted-andorra.osm.pbf"), data("history-niue.osh.pbf"));
    let joined = dir.path().join("joined.osm.pbf");
    let mut bytes = std::fs::read(&a).expect("read");
    let at = bytes.len() as u64;
    bytes.extend(std::fs::read(&h).expect("read"));
    std::fs::write(&joined, bytes).expect("write");
    let mut c = bin("pbf-index");
    c.arg("-q").arg(&joined);
    let headers: Vec<_> = records::<IndexRecord>(&succeeds(c))
        .into_iter()
        .filter_map(|r| match r {
            IndexRecord::Header(h) => Some(h),
            _ => None,
        })
        .collect();
    assert_eq!(headers.len(), 1);
    assert_eq!(headers[0].offset, at);
    assert!(headers[0].header.has_history());
}

/// The pbfhogg 0.5.0 command on PATH (`pbfhogg-0.5`, as bench/ names it, or
/// `pbfhogg` when that is 0.5.0), if any.
fn pbfhogg_05() -> Option<String> {
    ["pbfhogg-0.5", "pbfhogg"].into_iter().find_map(|cmd| {
        let o = std::process::Command::new(cmd)
            .arg("--version")
            .output()
            .ok()?;
        let v = String::from_utf8_lossy(&o.stdout).into_owned();
        (o.status.success() && v.contains("0.5.0")).then(|| cmd.to_owned())
    })
}

/// A real pbfhogg 0.5.0 output of plain nodes in two overlapping blobs
/// claims the order and carries pbfhogg's indexdata, with a blob unsorted
/// inside: the default sort scans it and gives osmium's objects in order.
#[test]
fn a_real_pbfhogg_output_sorts() {
    let Some(pbfhogg) = pbfhogg_05() else {
        eprintln!(
            "skipped: pbfhogg 0.5.0 is not on PATH (pbfhogg-0.5 or pbfhogg; bench/README.md)"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("overlapping.osm.pbf");
    let h = header(&["OsmSchema-V0.6"], &[]);
    let frames = [
        data_frame(&[1, 3, 5], |_| None),
        data_frame(&[2, 4], |_| None),
    ];
    write_pbf(&input, &h, &frames);
    let hogged = dir.path().join("hogged.osm.pbf");
    let mut c = std::process::Command::new(&pbfhogg);
    c.args(["sort", "--force"])
        .arg(&input)
        .arg("-o")
        .arg(&hogged);
    succeeds(c);
    assert!(
        keys_from(&hogged, &[])
            .iter()
            .all(|k| *k == KeysFrom::Decoded),
        "pbfhogg's indexdata was trusted by default"
    );
    let out = dir.path().join("out.osm.pbf");
    let mut c = pbf_sort();
    c.arg("-q").arg("--check").arg(&hogged).arg("-o").arg(&out);
    succeeds(c);
    assert_sorted_like_osmium(&out, &[&input], dir.path(), "pbfhogg 0.5.0 output");
}

/// `--recompress` writes indexdata bound to the new Blob, so the output is
/// indexed from headers again; a re-compression that keeps the old
/// BlobHeader (as a tool unaware of our indexdata would) is scanned.
#[test]
fn recompressed_blobs_carry_fresh_indexdata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-andorra.osm.pbf");
    let with_ix = dir.path().join("ix.osm.pbf");
    let mut c = pbf_sort();
    c.arg("-q")
        .arg("--add-indexdata")
        .arg(&input)
        .arg("-o")
        .arg(&with_ix);
    succeeds(c);
    let n = keys_from(&with_ix, &[]).len();
    assert_eq!(keys_from(&with_ix, &[]), vec![KeysFrom::Indexdata; n]);
    let recompressed = dir.path().join("recompressed.osm.pbf");
    let mut index = bin("pbf-index");
    index.arg("-q").arg(&with_ix);
    let plan = run_with_input(bin("pbf-overlap"), &succeeds(index));
    assert!(plan.status.success(), "pbf-overlap");
    let mut c = bin("pbf-copy");
    c.args(["-q", "--recompress", "zlib:1"])
        .arg("-o")
        .arg(&recompressed);
    let o = run_with_input(c, &plan.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(keys_from(&recompressed, &[]), vec![KeysFrom::Indexdata; n]);
    assert_eq!(opl(&recompressed), opl(&input));
    // Another tool re-compresses the same blobs and keeps each BlobHeader's
    // indexdata bytes: none of them checks any more.
    let f = PbfFile::open(&with_ix).expect("open");
    let mut bytes = Vec::new();
    for fh in f.headers() {
        let fh = fh.expect("frame");
        let body = f.read_body(&fh).expect("body");
        if fh.blob_type != BlobType::OsmData {
            bytes.extend(encode_frame(&fh.blob_type, None, &body).expect("frame"));
            continue;
        }
        let raw = pbf_format::compress::decode_blob(&body).expect("inflate");
        let blob = encode_blob(&raw, Compression::Zlib(1)).expect("deflate");
        bytes.extend(
            encode_frame(&BlobType::OsmData, fh.indexdata.as_deref(), &blob).expect("frame"),
        );
    }
    let foreign = dir.path().join("foreign.osm.pbf");
    std::fs::write(&foreign, bytes).expect("write");
    assert_eq!(keys_from(&foreign, &[]), vec![KeysFrom::Decoded; n]);
}

/// Files whose header claims the order and whose pbfhogg indexdata lies in
/// the ways a buggy, edited or concatenated file lies.
fn lying_files(dir: &Path) -> Vec<PathBuf> {
    let claims = header(&["OsmSchema-V0.6"], &["Sort.Type_then_ID"]);
    let cases: [(&str, Vec<Vec<u8>>); 3] = [
        (
            "unsorted-inside",
            vec![
                data_frame(&[4, 6, 5], |_| Some(pbfhogg_indexdata(4, 6, 3))),
                data_frame(&[7, 9, 8], |_| Some(pbfhogg_indexdata(7, 9, 3))),
            ],
        ),
        (
            "lying-ranges",
            vec![
                data_frame(&[20, 21], |_| Some(pbfhogg_indexdata(1, 2, 2))),
                data_frame(&[1, 2], |_| Some(pbfhogg_indexdata(20, 21, 2))),
            ],
        ),
        (
            "wrong-kind",
            vec![data_frame(&[3, 4], |_| {
                let mut ix = pbfhogg_indexdata(3, 4, 2);
                ix[1] = 1;
                Some(ix)
            })],
        ),
    ];
    cases
        .into_iter()
        .map(|(name, frames)| {
            let path = dir.join(format!("{name}.osm.pbf"));
            write_pbf(&path, &claims, &frames);
            path
        })
        .collect()
}

/// However the indexdata lies: the default sort is right, and `--check`
/// passes only outputs osmium finds ordered (trusting the lie must fail it).
#[test]
fn check_never_passes_an_unsorted_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    for input in lying_files(dir.path()) {
        for trust in [false, true] {
            for check in [false, true] {
                let what = format!("{} trust={trust} check={check}", name(&input));
                let out = dir.path().join("out.osm.pbf");
                let mut c = pbf_sort();
                c.arg("-q").arg("-O").arg(&input).arg("-o").arg(&out);
                if trust {
                    c.args(["--index-cmd", "pbf-index --trust-indexdata pbfhogg"]);
                }
                if check {
                    c.arg("--check");
                }
                let o = c.output().expect("run");
                let err = String::from_utf8_lossy(&o.stderr);
                if !trust {
                    assert!(o.status.success(), "{what}: {err}");
                    assert_sorted_like_osmium(&out, &[&input], dir.path(), &what);
                } else if check && o.status.success() {
                    assert!(osmium_ordered(&out), "{what}: --check passed it");
                } else if check {
                    assert_eq!(o.status.code(), Some(1), "{what}: {err}");
                    assert!(err.contains("--check"), "{what}: {err}");
                }
                std::fs::remove_file(&out).ok();
            }
        }
    }
}
