//! Equal keys: the same version of one object more than once. `pbf-sort`
//! must order them as `osmium sort` does (by timestamp when set, then in
//! input order), keep the first of them under `--dedupe`, judge order as
//! `osmium fileinfo -e` does under `--check`, and keep history whatever the
//! output is named (the one deliberate difference from `osmium sort`). A
//! property test runs the whole driver on random blobs full of such ties.

use std::path::{Path, PathBuf};

use pbf_format::block::{self, Element, EncodeOptions, Info, Node, Str, Way};
use pbf_format::compress::{self, Compression};
use pbf_format::frame::{self, BlobType, PbfFile};
use pbf_format::header::{self, Header};
use pbf_format::{Key, Kind};
use proptest::prelude::*;

use crate::util::*;

/// A PBF file made by osmium from OPL lines, in the given order.
fn from_opl(dir: &Path, name: &str, lines: &[&str]) -> PathBuf {
    let text = dir.join(format!("{name}.opl"));
    std::fs::write(&text, lines.join("\n") + "\n").expect("write OPL");
    let pbf = dir.join(format!("{name}.osm.pbf"));
    let mut c = osmium();
    c.arg("cat").arg(&text).arg("-o").arg(&pbf).arg("-O");
    succeeds(c);
    pbf
}

/// `pbf-sort` of the inputs into `out`, with extra options first.
fn sort_into(out: &Path, options: &[&str], inputs: &[&Path]) {
    let mut c = pbf_sort();
    c.args(options).arg("-o").arg(out).args(inputs);
    succeeds(c);
}

/// The value of the tag `mark` on each line of an OPL text, in order.
fn marks(opl: &str) -> Vec<String> {
    opl.lines()
        .filter_map(|l| l.split_once(" Tmark=").map(|(_, rest)| rest))
        .map(|rest| rest.split(' ').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn every_real_file_sorted_together_matches_osmium_either_way_round() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files: Vec<PathBuf> = good_files()
        .into_iter()
        .filter(|p| !name(p).starts_with("history-"))
        .collect();
    let forward: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let reverse: Vec<&Path> = forward.iter().rev().copied().collect();
    let mut oracle = Vec::new();
    for (what, inputs) in [("forward", &forward), ("reverse", &reverse)] {
        let out = dir.path().join(format!("{what}.osm.pbf"));
        sort_into(&out, &[], inputs);
        assert_sorted_like_osmium(&out, inputs, dir.path(), what);
        oracle.push(osmium_sorted_opl(inputs, dir.path()));
    }
    // Otherwise the two runs would not test the order of ties.
    assert_ne!(
        oracle[0], oracle[1],
        "the files hold no ties that input order decides"
    );
}

#[test]
fn ties_follow_timestamps_then_input_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = from_opl(
        dir.path(),
        "a",
        &[
            "n1 v1 dV t2020-01-02T00:00:00Z x1 y1 Tmark=a1",
            "n2 v1 dV t2020-01-01T00:00:00Z x1 y1 Tmark=a2",
            "w7 v3 dV t2021-05-05T00:00:00Z Tmark=a3 Nn1,n2",
        ],
    );
    let b = from_opl(
        dir.path(),
        "b",
        &[
            "n1 v1 dV t2020-01-01T00:00:00Z x2 y2 Tmark=b1",
            "n2 v1 dV t2020-01-01T00:00:00Z x2 y2 Tmark=b2",
            "w7 v3 dV t2021-05-04T23:59:59Z Tmark=b3 Nn2,n1",
        ],
    );
    let out = dir.path().join("out.osm.pbf");
    sort_into(&out, &[], &[&a, &b]);
    assert_sorted_like_osmium(&out, &[&a, &b], dir.path(), "a b");
    // Earlier timestamps first; equal ones in input order.
    assert_eq!(marks(&opl(&out)), ["b1", "a1", "a2", "b2", "b3", "a3"]);
    sort_into(&out, &["-O", "--dedupe"], &[&a, &b]);
    assert_eq!(
        marks(&opl(&out)),
        ["b1", "a2", "b3"],
        "--dedupe keeps what sorts first"
    );
}

#[test]
fn an_unset_timestamp_sorts_before_a_set_one() {
    // osmium compares timestamps only when both are set, so it may put
    // these either way; the documented rule is unset first.
    let dir = tempfile::tempdir().expect("tempdir");
    let a = from_opl(
        dir.path(),
        "a",
        &["n1 v1 dV t2020-01-01T00:00:00Z x1 y1 Tmark=set"],
    );
    let b = from_opl(dir.path(), "b", &["n1 v1 dV t x1 y1 Tmark=unset"]);
    let out = dir.path().join("out.osm.pbf");
    sort_into(&out, &[], &[&a, &b]);
    assert_eq!(marks(&opl(&out)), ["unset", "set"]);
}

#[test]
fn check_judges_order_by_type_and_id_like_osmium() {
    let dir = tempfile::tempdir().expect("tempdir");
    let versions_down = from_opl(
        dir.path(),
        "down",
        &[
            "n1 v2 dV x1 y1 Tmark=v2",
            "n1 v1 dV x1 y1 Tmark=v1",
            "n2 v1 dV x1 y1",
        ],
    );
    let ids_down = from_opl(dir.path(), "ids", &["n2 v1 dV x1 y1", "n1 v1 dV x1 y1"]);
    for (file, ordered) in [(&versions_down, true), (&ids_down, false)] {
        let info = fileinfo(file);
        assert_eq!(
            info["data"]["objects_ordered"],
            serde_json::Value::Bool(ordered)
        );
        let out = overlap(&["--check"], &index_stream(file));
        let want = if ordered { 0 } else { 1 };
        assert_eq!(
            out.status.code(),
            Some(want),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Ordered for --check, but the sort still puts versions in order.
    let out = dir.path().join("out.osm.pbf");
    sort_into(&out, &["--check"], &[&versions_down]);
    assert_eq!(marks(&opl(&out)), ["v1", "v2"]);
}

#[test]
fn history_is_kept_whatever_the_output_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("history-niue.osh.pbf");
    let out = dir.path().join("out.osm.pbf");
    sort_into(&out, &[], &[&input]);
    let ours = opl(&out);
    assert!(ours.contains(" dD "), "the deleted flag is kept");
    assert_eq!(ours, osmium_sorted_opl(&[&input], dir.path()));
    // osmium sort writes a .osm.pbf without history: deleted objects
    // come back as visible.
    let theirs = dir.path().join("osmium.osm.pbf");
    let mut c = osmium();
    c.arg("sort").arg(&input).arg("-o").arg(&theirs).arg("-O");
    succeeds(c);
    let theirs = opl(&theirs);
    assert!(!theirs.contains(" dD "), "osmium sort kept deleted objects");
    assert_eq!(theirs, ours.replace(" dD ", " dV "));
}

/// One generated object: key position, timestamp in milliseconds.
type Spec = (usize, i64);

/// Keys of a small space, so that repeats are common: nodes and ways, ids
/// -3 ..= 8, versions 1 and 2.
fn key_at(i: usize) -> Key {
    let kind = [Kind::Node, Kind::Way][i / 24];
    let id = (i % 24 / 2) as i64 - 3;
    Key::new(kind, id, (i % 2) as u32 + 1)
}

/// An element with a key, a timestamp (below a second is unset, as osmium
/// reads it) and a serial number that tells copies apart.
fn element((at, timestamp_ms): Spec, serial: usize) -> Element {
    let key = key_at(at);
    let info = Some(Info {
        version: key.version as i32,
        timestamp_ms,
        changeset: serial as i64,
        uid: 1,
        user: Str::from(&b"u"[..]),
        visible: None,
    });
    let tags = vec![(
        Str::from(&b"serial"[..]),
        Str::from(serial.to_string().as_bytes()),
    )];
    match key.kind {
        Kind::Node => Element::Node(Node {
            id: key.id,
            info,
            lat: 10,
            lon: 20,
            tags,
        }),
        _ => Element::Way(Way {
            id: key.id,
            info,
            tags,
            refs: vec![1, 2],
            locations: Vec::new(),
        }),
    }
}

/// Write a PBF file of blobs; each blob zlib-compressed, DenseNodes or not.
fn write_file(path: &Path, blobs: &[(Vec<Element>, bool)]) {
    let head = header::encode_header(&Header::default());
    let head = compress::encode_blob(&head, Compression::None).expect("header blob");
    let mut bytes = frame::encode_frame(&BlobType::OsmHeader, None, &head).expect("frame");
    for (elements, dense) in blobs {
        let opts = EncodeOptions {
            dense_nodes: *dense,
            ..EncodeOptions::default()
        };
        let raw = block::encode_block(elements, &opts);
        let blob = compress::encode_blob(&raw, Compression::Zlib(1)).expect("blob");
        bytes.extend(frame::encode_frame(&BlobType::OsmData, None, &blob).expect("frame"));
    }
    std::fs::write(path, bytes).expect("write input");
}

/// Every element of a PBF file, in file order.
fn read_file(path: &Path) -> Vec<Element> {
    let f = PbfFile::open(path).expect("open output");
    let mut out = Vec::new();
    for h in f.headers() {
        let h = h.expect("frame");
        if h.blob_type == BlobType::OsmData {
            let raw = compress::decode_blob(&f.read_body(&h).expect("body")).expect("blob");
            out.extend(block::decode_block(&raw).expect("block"));
        }
    }
    out
}

/// A blob: its objects, whether they are put in key order (so that sorted
/// blobs meet at tied boundaries), DenseNodes, and the file it goes to.
fn blob() -> impl Strategy<Value = (Vec<Spec>, bool, bool, usize)> {
    let timestamp = prop_oneof![
        Just(0i64),
        Just(400),
        Just(1_000),
        Just(1_700),
        Just(2_000),
        Just(3_000)
    ];
    let spec = (0usize..48, timestamp);
    (
        prop::collection::vec(spec, 1..12),
        any::<bool>(),
        any::<bool>(),
        0usize..3,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random blobs over up to three files, through the whole driver: the
    /// output holds the input's objects stably sorted by (key, timestamp in
    /// whole seconds), in input order (files as given, then file order).
    #[test]
    fn pipeline_equals_a_stable_sort_by_key_and_timestamp(
        blobs in prop::collection::vec(blob(), 1..10),
        dedupe in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut serial = 0;
        let mut files: Vec<Vec<(Vec<Element>, bool)>> = vec![Vec::new(); 3];
        for (specs, sorted, dense, file) in blobs {
            let mut specs = specs;
            if sorted {
                specs.sort_by_key(|s| (key_at(s.0), s.1 / 1000));
            }
            let elements = specs.into_iter().map(|s| { serial += 1; element(s, serial) }).collect();
            files[file].push((elements, dense));
        }
        let mut paths = Vec::new();
        let mut input_order = Vec::new();
        for (i, blobs) in files.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
            let path = dir.path().join(format!("in{i}.osm.pbf"));
            write_file(&path, blobs);
            paths.push(path);
            input_order.extend(blobs.iter().flat_map(|b| b.0.iter().cloned()));
        }
        let out = dir.path().join("out.osm.pbf");
        let inputs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        sort_into(&out, if dedupe { &["--dedupe"] } else { &[] }, &inputs);
        let mut want = input_order;
        want.sort_by_key(|e| (e.key(), e.tie_seconds()));
        if dedupe {
            want.dedup_by_key(|e| e.key());
        }
        prop_assert_eq!(read_file(&out), want);
    }
}
