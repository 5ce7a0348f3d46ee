//! Every `pbf-gen` subcommand on small real files, checked with osmium as the
//! oracle: `fileinfo -e` counts and order, OPL equality where the objects
//! must be the same, `check-refs` for reference consistency of tiled copies,
//! and indexdata that agrees with a key scan.

use std::path::Path;
use std::process::Command;

use pbf_format::compress::decode_blob;
use pbf_format::frame::PbfFile;
use pbf_format::indexdata;
use pbf_format::scan::scan_block;
use pbf_testkit::data;
use serde_json::Value;

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn gen_cmd(args: &[&str], out: &Path) {
    run(Command::new(env!("CARGO_BIN_EXE_pbf-gen"))
        .args(args)
        .arg("-o")
        .arg(out));
}

fn fileinfo(p: &Path) -> Value {
    let s = run(Command::new("osmium").args(["fileinfo", "-e", "-j"]).arg(p));
    serde_json::from_str(&s).expect("fileinfo json")
}

fn counts(info: &Value) -> [u64; 3] {
    let c = &info["data"]["count"];
    ["nodes", "ways", "relations"].map(|k| c[k].as_u64().expect("count"))
}

fn ordered(info: &Value) -> bool {
    info["data"]["objects_ordered"]
        .as_bool()
        .expect("objects_ordered")
}

fn opl(p: &Path) -> String {
    run(Command::new("osmium")
        .args(["cat", "-f", "opl", "-o", "-"])
        .arg(p))
}

fn sorted_opl(p: &Path, dir: &Path) -> String {
    let out = dir.join("osmium-sorted.osm.pbf");
    run(Command::new("osmium")
        .args(["sort", "--overwrite", "-o"])
        .arg(&out)
        .arg(p));
    opl(&out)
}

/// `osmium check-refs -r` report: present objects and missing references.
fn check_refs(p: &Path) -> String {
    let out = Command::new("osmium")
        .args(["check-refs", "-r"])
        .arg(p)
        .output()
        .expect("run osmium check-refs");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn missing(report: &str) -> Vec<u64> {
    report
        .lines()
        .filter(|l| l.contains("missing:"))
        .map(|l| {
            l.rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .expect("missing count")
        })
        .collect()
}

#[test]
fn tile_one_copy_is_lossless() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-andorra.osm.pbf");
    let out = dir.path().join("t1.osm.pbf");
    gen_cmd(&["tile", "-n", "1", input.to_str().expect("path")], &out);
    assert_eq!(opl(&out), opl(&input));
}

#[test]
fn tile_copies_are_sorted_and_consistent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-andorra.osm.pbf");
    let out = dir.path().join("t3.osm.pbf");
    gen_cmd(&["tile", "-n", "3", input.to_str().expect("path")], &out);
    let (a, b) = (fileinfo(&input), fileinfo(&out));
    assert_eq!(counts(&b), counts(&a).map(|c| 3 * c));
    assert!(ordered(&b));
    // References are shifted with their targets: each copy misses exactly
    // what the original misses.
    let want: Vec<u64> = missing(&check_refs(&input)).iter().map(|m| 3 * m).collect();
    assert_eq!(missing(&check_refs(&out)), want);
}

#[test]
fn tile_options_plain_nodes_small_blobs_indexdata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-kualalumpur.osm.pbf");
    let out = dir.path().join("opts.osm.pbf");
    let args = [
        "tile",
        "-n",
        "2",
        "--plain-nodes",
        "--blob-elements",
        "1000",
        "--compression",
        "none",
        "--indexdata",
        input.to_str().expect("path"),
    ];
    gen_cmd(&args, &out);
    let info = fileinfo(&out);
    assert_eq!(counts(&info), counts(&fileinfo(&input)).map(|c| 2 * c));
    assert!(ordered(&info));
    let file = PbfFile::open(&out).expect("open");
    let mut blobs = 0;
    for fh in file.headers().skip(1) {
        let fh = fh.expect("frame");
        let start = fh.blob_start.expect("blob start read with the header");
        let stored = indexdata::decode(fh.indexdata.as_deref().expect("indexdata present"), &start)
            .expect("our indexdata");
        let body = file.read_body(&fh).expect("body");
        assert_eq!(
            pbf_format::compress::blob_data(&body)
                .expect("blob")
                .compression,
            pbf_format::compress::Codec::Raw
        );
        let scanned = scan_block(&decode_blob(&body).expect("inflate"))
            .expect("scan")
            .expect("not empty");
        assert_eq!(stored, scanned);
        assert!(scanned.elements() <= 1000);
        blobs += 1;
    }
    assert!(blobs >= 2 * 290, "{blobs} blobs");
    assert!(
        opl(&out).lines().next().is_some_and(|l| l.starts_with('n')),
        "plain nodes are readable"
    );
}

#[test]
fn interleaved_tiles_concatenate_unsorted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (
        data("sorted-andorra.osm.pbf"),
        data("sorted-liechtenstein.osm.pbf"),
    );
    let (ta, tb) = (dir.path().join("a.osm.pbf"), dir.path().join("b.osm.pbf"));
    let path = |p: &Path| p.to_str().expect("path").to_owned();
    gen_cmd(
        &["tile", "-n", "2", "--stride-of", &path(&b), &path(&a)],
        &ta,
    );
    let args = [
        "tile",
        "-n",
        "2",
        "--stride-of",
        &path(&a),
        "--offset",
        "1",
        &path(&b),
    ];
    gen_cmd(&args, &tb);
    let (ia, ib) = (fileinfo(&ta), fileinfo(&tb));
    assert!(ordered(&ia) && ordered(&ib));
    // Same strides: copy 1 of each starts in the same id band.
    let min_node = |i: &Value| i["data"]["minid"]["nodes"].as_u64().expect("minid");
    let max_node = |i: &Value| i["data"]["maxid"]["nodes"].as_u64().expect("maxid");
    assert!(max_node(&ia) > min_node(&ib) && max_node(&ib) > min_node(&ia));
    let cat = dir.path().join("cat.osm.pbf");
    gen_cmd(&["concat", &path(&ta), &path(&tb)], &cat);
    let ic = fileinfo(&cat);
    let sum: Vec<u64> = counts(&ia)
        .iter()
        .zip(counts(&ib))
        .map(|(x, y)| x + y)
        .collect();
    assert_eq!(counts(&ic).to_vec(), sum);
    assert!(!ordered(&ic));
    assert_eq!(
        std::fs::metadata(&cat).expect("stat").len(),
        std::fs::metadata(&ta).expect("stat").len() + data_bytes(&tb)
    );
}

/// Bytes of a file after its OSMHeader frame.
fn data_bytes(p: &Path) -> u64 {
    let file = PbfFile::open(p).expect("open");
    let header = file.headers().next().expect("header").expect("frame");
    file.size() - header.end()
}

#[test]
fn permute_moves_whole_blobs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-kualalumpur.osm.pbf");
    let out = dir.path().join("perm.osm.pbf");
    gen_cmd(
        &["permute", "--seed", "3", input.to_str().expect("path")],
        &out,
    );
    let info = fileinfo(&out);
    assert_eq!(counts(&info), counts(&fileinfo(&input)));
    assert!(!ordered(&info));
    let frames = |p: &Path| {
        let f = PbfFile::open(p).expect("open");
        let mut v: Vec<Vec<u8>> = f
            .headers()
            .map(|fh| {
                let fh = fh.expect("frame");
                f.read_exact_at(fh.offset, fh.frame_len() as usize, "frame")
                    .expect("read")
            })
            .collect();
        let header = v.remove(0);
        (header, v)
    };
    let ((h1, mut d1), (h2, d2)) = (frames(&input), frames(&out));
    assert_eq!(h1, h2);
    assert_ne!(d1, d2, "order changed");
    let mut d2 = d2;
    d1.sort();
    d2.sort();
    assert_eq!(d1, d2, "same blobs");
}

#[test]
fn shuffle_keeps_every_object() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-andorra.osm.pbf");
    let out = dir.path().join("shuf.osm.pbf");
    let args = [
        "shuffle",
        "--seed",
        "9",
        "--bucket-size",
        "100k",
        input.to_str().expect("path"),
    ];
    gen_cmd(&args, &out);
    let info = fileinfo(&out);
    assert_eq!(counts(&info), counts(&fileinfo(&input)));
    assert!(!ordered(&info));
    // Kinds are mixed in blobs: the first 100 objects are not all nodes.
    let head: Vec<char> = opl(&out)
        .lines()
        .take(100)
        .filter_map(|l| l.chars().next())
        .collect();
    assert!(head.iter().any(|&c| c != 'n'), "{head:?}");
    assert_eq!(sorted_opl(&out, dir.path()), opl(&input));
    let leftovers = std::fs::read_dir(dir.path()).expect("dir").count();
    assert_eq!(leftovers, 2, "bucket files are removed");
}

#[test]
fn history_versions_are_sorted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-andorra.osm.pbf");
    let out = dir.path().join("hist.osh.pbf");
    gen_cmd(&["history", "-k", "3", input.to_str().expect("path")], &out);
    let info = fileinfo(&out);
    assert_eq!(counts(&info), counts(&fileinfo(&input)).map(|c| 3 * c));
    assert!(ordered(&info));
    assert_eq!(info["data"]["multiple_versions"].as_bool(), Some(true));
    assert_eq!(info["header"]["with_history"].as_bool(), Some(true));
}

#[test]
fn copy_is_byte_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-andorra.osm.pbf");
    let out = dir.path().join("copy.osm.pbf");
    gen_cmd(&["copy", input.to_str().expect("path")], &out);
    assert_eq!(
        std::fs::read(&out).expect("read"),
        std::fs::read(&input).expect("read")
    );
}

#[test]
fn output_equal_to_input_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("x.osm.pbf");
    std::fs::copy(data("sorted-andorra.osm.pbf"), &p).expect("copy");
    let out = Command::new(env!("CARGO_BIN_EXE_pbf-gen"))
        .args(["permute"])
        .arg(&p)
        .arg("-o")
        .arg(&p)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is the same file as the input"));
}
