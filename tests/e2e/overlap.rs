//! `pbf-overlap` over the indexes of every real file: the plan is valid,
//! accounts for every object, is in key order, and `--check` agrees with
//! osmium's "Objects ordered" (SOURCES.tsv) on which files are in order.

use std::path::Path;

use pbf_format::Key;
use pbf_stream::{IndexRecord, KeyRecord, PlanReader, PlanRecord};

use crate::util::*;

/// The plan of an index, read and validated by `PlanReader`.
fn plan(idx: &[u8]) -> (pbf_stream::PlanHeader, Vec<PlanRecord>) {
    let out = overlap(&[], idx);
    assert!(
        out.status.success(),
        "pbf-overlap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rd = PlanReader::new(out.stdout.as_slice()).expect("plan header");
    let mut ops = Vec::new();
    while let Some(op) = rd.next_op().expect("valid plan") {
        ops.push(op);
    }
    (rd.header().clone(), ops)
}

/// `osmium_objects_ordered` of SOURCES.tsv for a file.
fn ordered_in_sources_tsv(path: &Path) -> bool {
    let tsv = std::fs::read_to_string(data_dir().join("SOURCES.tsv")).expect("SOURCES.tsv");
    let mut lines = tsv.lines();
    let cols: Vec<&str> = lines.next().expect("header line").split('\t').collect();
    let col = cols
        .iter()
        .position(|c| *c == "osmium_objects_ordered")
        .expect("osmium_objects_ordered column");
    let file = name(path);
    let row = lines
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|r| r[0] == file)
        .unwrap_or_else(|| panic!("{file} is not in SOURCES.tsv"));
    row[col] == "yes"
}

fn key(k: KeyRecord) -> Key {
    Key::from(k)
}

/// Key ranges of the ops, in plan order.
fn op_ranges(ops: &[PlanRecord]) -> Vec<(Key, Key)> {
    let mut v = Vec::new();
    for op in ops {
        match op {
            PlanRecord::Copy(c) => {
                assert_eq!(c.frames.len() as u64, c.blobs, "copy op without frames");
                v.extend(c.frames.iter().map(|f| (key(f.first), key(f.last))));
            }
            PlanRecord::Merge(m) => v.push((key(m.first), key(m.last))),
            other => panic!("unexpected record {other:?}"),
        }
    }
    v
}

#[test]
fn plans_account_for_every_object_in_key_order() {
    for path in good_files() {
        let file = name(&path);
        let idx = index_stream(&path);
        let recs: Vec<IndexRecord> = records(&idx);
        let Some(IndexRecord::End(end)) = recs.last() else {
            panic!("{file}: index has no end record")
        };
        let (header, ops) = plan(&idx);
        assert_eq!(header.sources.len(), 1, "{file}");
        assert_eq!(header.sources[0].file.path, path, "{file}");
        assert!(
            header
                .header
                .optional_features
                .iter()
                .any(|f| f == "Sort.Type_then_ID"),
            "{file}"
        );
        let elements: u64 = ops
            .iter()
            .map(|op| match op {
                PlanRecord::Copy(c) => c.elements,
                PlanRecord::Merge(m) => m.elements,
                _ => 0,
            })
            .sum();
        assert_eq!(elements, end.counts.total(), "{file}");
        let ranges = op_ranges(&ops);
        for w in ranges.windows(2) {
            assert!(w[0].1 < w[1].0, "{file}: ops overlap: {w:?}");
        }
    }
}

#[test]
fn check_agrees_with_osmium_on_which_files_are_in_order() {
    for path in good_files() {
        let file = name(&path);
        let idx = index_stream(&path);
        let out = overlap(&["--check"], &idx);
        assert!(out.stdout.is_empty(), "{file}: --check wrote to stdout");
        let ordered = ordered_in_sources_tsv(&path);
        let want = if ordered { 0 } else { 1 };
        assert_eq!(
            out.status.code(),
            Some(want),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.contains("not in order"),
            !ordered,
            "{file}: {stderr}"
        );
        let quiet = overlap(&["--check", "-q"], &idx);
        assert_eq!(quiet.status.code(), Some(want), "{file}");
        assert!(
            quiet.stderr.is_empty(),
            "{file}: -q printed {:?}",
            quiet.stderr
        );
        if ordered {
            // An ordered file is one coalesced copy of all its blobs.
            let (_, ops) = plan(&idx);
            assert!(
                matches!(ops.as_slice(), [PlanRecord::Copy(_)]),
                "{file}: {ops:?}"
            );
        }
    }
}

#[test]
fn blob_permuted_file_is_all_copies_but_not_in_order() {
    // osmconvert wrote the relations blob before the ways blob: every blob is
    // sorted and none overlaps, so the plan only reorders copies.
    let idx = index_stream(&data("unsorted-osmconvert-claims-sorted.osm.pbf"));
    let (header, ops) = plan(&idx);
    assert!(ops.iter().all(|op| matches!(op, PlanRecord::Copy(_))));
    assert_eq!(ops.len(), 3);
    assert_eq!(
        header.header.required_features,
        ["OsmSchema-V0.6", "DenseNodes"]
    );
    let out = overlap(&["--check"], &idx);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("blobs out of order"));
}

#[test]
fn check_objects_of_compares_counts_per_kind() {
    let dir = tempfile::tempdir().expect("dir");
    let write = |name: &str, file: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, index_stream(&data(file))).expect("write");
        p.to_str().expect("utf-8").to_owned()
    };
    let same = write("same.jsonl", "sorted-andorra.osm.pbf");
    let other = write("other.jsonl", "sorted-kualalumpur.osm.pbf");
    let idx = index_stream(&data("sorted-andorra.osm.pbf"));
    let unasked = overlap(&["--check", "--objects-of", &same], &idx);
    assert!(
        unasked.status.success() && unasked.stderr.is_empty(),
        "a yes said unasked: {unasked:?}"
    );
    let out = overlap(&["--check", "-v", "--objects-of", &same], &idx);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    // Each side is named by its files.
    let canonical = |f: &str| {
        std::fs::canonicalize(data(f))
            .expect("path")
            .display()
            .to_string()
    };
    let andorra = canonical("sorted-andorra.osm.pbf");
    let kl = canonical("sorted-kualalumpur.osm.pbf");
    assert!(
        said.contains(&format!("{andorra} holds the objects of {andorra}: ")),
        "{said}"
    );
    // --check-as names the checked file as it will be called.
    let renamed = overlap(
        &[
            "--check",
            "-v",
            "--check-as",
            "final.osm.pbf",
            "--objects-of",
            &same,
        ],
        &idx,
    );
    let said = String::from_utf8_lossy(&renamed.stderr);
    assert!(
        renamed.status.success()
            && said.contains(&format!("final.osm.pbf holds the objects of {andorra}: ")),
        "{said}"
    );
    let quiet = overlap(&["--check", "-q", "--objects-of", &same], &idx);
    assert!(
        quiet.status.success() && quiet.stderr.is_empty(),
        "{quiet:?}"
    );
    let out = overlap(&["--check", "--objects-of", &other], &idx);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("objects differ: {andorra} holds "))
            && err.contains(&format!("; {kl} holds "))
            && err.contains(" nodes, "),
        "{err}"
    );
    assert!(!err.contains("not in order"), "{err}");
    // Only with --check.
    assert_eq!(
        overlap(&["--objects-of", &same], &idx).status.code(),
        Some(2)
    );
}

#[test]
fn unsorted_files_need_merges_and_say_why() {
    for f in ["unsorted-vex.osm.pbf", "unsorted-josm-negative-ids.osm.pbf"] {
        let idx = index_stream(&data(f));
        let (_, ops) = plan(&idx);
        assert!(
            ops.iter().any(|op| matches!(op, PlanRecord::Merge(_))),
            "{f}: no merge op"
        );
        let out = overlap(&["--check"], &idx);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{f}");
        assert!(
            stderr.contains("overlaps") || stderr.contains("not sorted inside"),
            "{f}: {stderr}"
        );
    }
}

#[test]
fn concatenated_indexes_are_numbered_sources() {
    let a = index_stream(&data("sorted-andorra.osm.pbf"));
    let b = index_stream(&data("history-niue.osh.pbf"));
    let both = [a.as_slice(), b.as_slice()].concat();
    let (header, ops) = plan(&both);
    let ids: Vec<u32> = header.sources.iter().map(|s| s.id).collect();
    assert_eq!(ids, [0, 1]);
    assert!(
        header
            .header
            .required_features
            .iter()
            .any(|f| f == "HistoricalInformation")
    );
    let ranges = op_ranges(&ops);
    assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0));
    // Each file is judged on its own: both are in order.
    let out = overlap(&["--check", "-"], &both);
    assert_eq!(out.status.code(), Some(0));
    let vex = index_stream(&data("unsorted-vex.osm.pbf"));
    let out = overlap(&["--check", "-"], &[a.as_slice(), vex.as_slice()].concat());
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines().all(|l| l.contains("unsorted-vex.osm.pbf: ")),
        "{err}"
    );
}

#[test]
fn the_same_file_twice_is_refused() {
    let a = index_stream(&data("sorted-andorra.osm.pbf"));
    let out = overlap(&[], &[a.as_slice(), a.as_slice()].concat());
    refused("the same file twice", &out, 1, &["indexed twice"]);
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_end_record_fails_without_output() {
    let idx = index_stream(&data("sorted-andorra.osm.pbf"));
    let text = String::from_utf8(idx).expect("UTF-8");
    let cut: Vec<&str> = text.lines().collect();
    let short = cut[..cut.len() - 1].join("\n") + "\n";
    // A failed plan exits 1; a failed --check exits 2 (1 means "not in order").
    for (args, code) in [(&[][..], 1), (&["--check"][..], 2)] {
        let out = overlap(args, short.as_bytes());
        let says = ["standard input", "without an end record"];
        refused(&format!("{args:?}"), &out, code, &says);
        assert!(out.stdout.is_empty(), "{args:?}: wrote {:?}", out.stdout);
    }
}

#[test]
fn index_files_are_named_in_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("v2.idx");
    let idx = String::from_utf8(index_stream(&data("sorted-64bit-ids.osm.pbf"))).expect("UTF-8");
    std::fs::write(&p, idx.replace("\"version\":3", "\"version\":9")).expect("write");
    let out = overlap(&[p.to_str().expect("path")], b"");
    refused("version 9", &out, 1, &["v2.idx: line 1:", "version 9"]);
}

/// A synthetic index of `blobs` blobs of five objects each, the shape of a
/// file of small blobs: `overlapping` blobs each span nodes to ways in
/// random order (the whole file is one merge op), the others are sorted
/// and in file order (copy ops with their frames' keys).
fn small_blob_index(blobs: u64, overlapping: bool, to: &mut impl std::io::Write) {
    use pbf_format::Kind;
    use pbf_stream::{BlobRecord, Counts, IndexEnd, KeysFrom, SourceRecord};
    let (length, start) = (300u64, 100u64);
    let line = |to: &mut dyn std::io::Write, rec: &IndexRecord| {
        serde_json::to_writer(&mut *to, rec).expect("serialise");
        to.write_all(b"\n").expect("write the index");
    };
    let header = pbf_format::header::Header {
        required_features: vec!["OsmSchema-V0.6".into(), "DenseNodes".into()],
        ..Default::default()
    };
    line(
        to,
        &IndexRecord::Source(SourceRecord {
            schema: pbf_stream::INDEX_SCHEMA.into(),
            version: pbf_stream::SCHEMA_VERSION,
            file: pbf_stream::FileIdentity {
                size: start + blobs * length,
                mtime: 1_700_000_000,
                ..pbf_stream::FileIdentity::unrecorded(
                    format!("/small-blobs-{blobs}-{overlapping}.osm.pbf").as_ref(),
                )
            },
            header,
            samples: Vec::new(),
        }),
    );
    let mut end = IndexEnd::default();
    for i in 0..blobs {
        let scattered = (i * 2_654_435_761 % 10_000_000_000) as i64;
        let (first, last, counts) = if overlapping {
            let first = Key::new(Kind::Node, scattered + 1, 1);
            (
                first,
                Key::new(Kind::Way, scattered / 4 + 1, 1),
                [4, 1, 0, 0],
            )
        } else {
            let id = 5 * i as i64 + 1;
            (
                Key::new(Kind::Node, id, 1),
                Key::new(Kind::Node, id + 4, 1),
                [5, 0, 0, 0],
            )
        };
        let counts = Counts::from_array(counts);
        end.blobs += 1;
        end.counts.add(counts);
        let blob = BlobRecord {
            seq: i,
            offset: start + i * length,
            length,
            compression: Some(pbf_format::compress::Codec::Zlib),
            raw_size: Some(280),
            first: first.into(),
            last: last.into(),
            counts,
            sorted: !overlapping,
            repeats: false,
            versions_unsorted: false,
            duplicate_ids: 0,
            negative_ids: false,
            ties: None,
            from: KeysFrom::Decoded,
        };
        line(to, &IndexRecord::Blob(blob));
    }
    line(to, &IndexRecord::End(end));
}

/// Peak RSS in KiB of `pbf-overlap ARGS` planning the index of
/// [`small_blob_index`] fed to it as it is made.
fn overlap_peak_rss(args: &[&str], blobs: u64, overlapping: bool, dir: &Path) -> u64 {
    use std::process::Stdio;
    let rss = dir.join("rss.txt");
    let mut c = tool("time", "time", "the planner's memory test (peak RSS)");
    c.arg("-f").arg("%M").arg("-o").arg(&rss);
    c.arg(bin("pbf-overlap").get_program()).args(args);
    c.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("run pbf-overlap under time");
    {
        let stdin = child.stdin.take().expect("stdin");
        let mut to = std::io::BufWriter::new(stdin);
        small_blob_index(blobs, overlapping, &mut to);
        std::io::Write::flush(&mut to).expect("flush the index");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "pbf-overlap {args:?} on {blobs} blobs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&rss).expect("time's output");
    let last = text.lines().last().unwrap_or_default().trim();
    last.parse()
        .unwrap_or_else(|_| panic!("no peak RSS in {text:?}"))
}

/// The planner's memory grows by a few dozen bytes per blob, whatever the
/// plan: a 48-byte segment each (and 16 bytes per input of a merge op while
/// it is written, to put its inputs in file order), and neither a merge op
/// of every blob nor copy ops with their frames' keys are held whole (a file of 2.3 million
/// small blobs once took 731 MB, 317 bytes a blob, of which its one merge
/// op's inputs and 400 MB line took the most). Measured as the growth of
/// the peak RSS between two index sizes, so the fixed part cancels out.
#[test]
fn the_planner_costs_a_few_dozen_bytes_per_blob() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (small, large) = (50_000u64, 450_000u64);
    for (args, overlapping) in [(&["--no-frame-keys"][..], true), (&[][..], false)] {
        let a = overlap_peak_rss(args, small, overlapping, dir.path());
        let b = overlap_peak_rss(args, large, overlapping, dir.path());
        let per_blob = b.saturating_sub(a) as f64 * 1024.0 / (large - small) as f64;
        assert!(
            per_blob <= 72.0,
            "pbf-overlap {args:?} (overlapping: {overlapping}) grew from {a} to {b} KiB \
             between {small} and {large} blobs: {per_blob:.0} bytes per blob"
        );
        eprintln!("overlapping {overlapping}: {a} -> {b} KiB, {per_blob:.1} bytes per blob");
    }
}

/// Inputs whose replication fields differ get an output without them, and
/// the run says so once (not under -q); inputs that agree hear nothing.
#[test]
fn dropped_replication_fields_are_named_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.osm.pbf");
    let said = |inputs: &[&str], quiet: bool| {
        let mut c = pbf_sort();
        c.arg("-O").arg("--dedupe");
        if quiet {
            c.arg("-q");
        }
        c.args(inputs.iter().map(|i| data(i))).arg("-o").arg(&out);
        let o = run(c);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let two = ["sorted-liechtenstein.osm.pbf", "sorted-andorra.osm.pbf"];
    let notice = "replication fields (timestamp, sequence number, base URL) differ";
    assert_eq!(said(&two, false).matches(notice).count(), 1);
    assert_eq!(
        fileinfo(&out)["header"]["option"]["osmosis_replication_sequence_number"],
        serde_json::Value::Null
    );
    assert!(!said(&two, true).contains(notice), "-q");
    assert!(!said(&two[..1], false).contains(notice), "one input");
    let kept = &fileinfo(&out)["header"]["option"]["osmosis_replication_sequence_number"];
    assert_eq!(kept, "3546", "one input keeps its fields");
}
