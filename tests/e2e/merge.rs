//! `pbf-merge` end to end: `pbf-index | pbf-overlap | pbf-merge | pbf-copy`
//! over every good file in `tests/fixtures`, alone, several at once, with a
//! tiny memory budget and with `--dedupe`, compared object by object with
//! `osmium sort`; the failures that must leave no `end` record; and what
//! becomes of its spool, in [`spools`].

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pbf_stream::{PlanRecord, SourceRef};

use crate::util::*;

mod spools;

/// The stages up to the merged plan; returns pbf-merge's output.
fn merged_plan(inputs: &[&Path], spool: &Path, merge_args: &[&str]) -> Output {
    let mut index = bin("pbf-index");
    index.arg("-q").args(inputs);
    let idx = succeeds(index);
    let plan = plan_of(&idx);
    let mut merge = bin("pbf-merge");
    merge.arg("--spool").arg(spool).args(merge_args);
    run_with_input(merge, &plan)
}

fn plan_of(index: &[u8]) -> Vec<u8> {
    let o = run_with_input(Command::new(env!("CARGO_BIN_EXE_pbf-overlap")), index);
    assert!(
        o.status.success(),
        "pbf-overlap: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// The whole pipeline into `dir/out.osm.pbf`; checks the merged plan on the way.
fn sort_into(inputs: &[&Path], dir: &Path, merge_args: &[&str]) -> PathBuf {
    let spool = dir.join("spool");
    let merged = merged_plan(inputs, &spool, merge_args);
    assert!(
        merged.status.success(),
        "pbf-merge {merge_args:?} on {inputs:?}: {}",
        String::from_utf8_lossy(&merged.stderr)
    );
    check_merged_plan(&merged.stdout, &spool);
    let out = dir.join("out.osm.pbf");
    let mut copy = bin("pbf-copy");
    copy.arg("-o").arg(&out);
    let o = run_with_input(copy, &merged.stdout);
    assert!(
        o.status.success(),
        "pbf-copy: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Only copy ops are left, the spool is a spool source, the end record is there.
fn check_merged_plan(plan: &[u8], spool: &Path) {
    let recs: Vec<PlanRecord> = records(plan);
    let PlanRecord::Plan(h) = &recs[0] else {
        panic!("no plan record");
    };
    let s: &SourceRef = h.sources.last().expect("sources");
    // pbf-merge removes a spool nothing was merged into.
    let dir = spool.parent().expect("dir").canonicalize().expect("dir");
    let name = spool.file_name().expect("name");
    assert!(s.spool && s.file.path == dir.join(name), "{s:?}");
    assert!(
        recs[1..recs.len() - 1]
            .iter()
            .all(|r| matches!(r, PlanRecord::Copy(_)))
    );
    let PlanRecord::End(end) = recs.last().expect("records") else {
        panic!("no end record");
    };
    assert_eq!(end.merge_inputs, 0);
}

/// OPL lines with the objects of one (type, id, version) sorted among
/// themselves: their order is free.
fn normalized(opl: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut group: Vec<&str> = Vec::new();
    let key = |l: &str| l.split(' ').take(2).collect::<Vec<_>>().join(" ");
    for line in opl.lines() {
        if group.first().is_some_and(|g| key(g) != key(line)) {
            group.sort();
            out.extend(group.drain(..).map(str::to_owned));
        }
        group.push(line);
    }
    group.sort();
    out.extend(group.into_iter().map(str::to_owned));
    out
}

fn assert_ordered(out: &Path) {
    assert_eq!(
        fileinfo(out)["data"]["objects_ordered"],
        serde_json::Value::Bool(true),
        "{} is not ordered",
        out.display()
    );
}

fn assert_like_osmium(inputs: &[&Path], merge_args: &[&str]) {
    let dir = tempfile::tempdir().expect("dir");
    let out = sort_into(inputs, dir.path(), merge_args);
    let want = osmium_sorted_opl(inputs, dir.path());
    let (got, want) = (normalized(&opl(&out)), normalized(&want));
    assert_eq!(
        got.len(),
        want.len(),
        "{inputs:?} {merge_args:?}: object count"
    );
    assert!(
        got == want,
        "{inputs:?} {merge_args:?}: objects differ from osmium sort"
    );
    assert_ordered(&out);
}

#[test]
fn every_good_file_sorts_like_osmium() {
    for f in good_files() {
        assert_like_osmium(&[&f], &[]);
    }
}

#[test]
fn unsorted_files_with_a_tiny_budget_spill_and_sort_like_osmium() {
    for name in [
        "unsorted-vex.osm.pbf",
        "unsorted-josm-negative-ids.osm.pbf",
        "unsorted-type-regression.osm.pbf",
        "mixed-osmosis.osm.pbf",
    ] {
        assert_like_osmium(&[&data(name)], &["--memory", "64k", "-j", "2"]);
    }
    let dir = tempfile::tempdir().expect("dir");
    let o = merged_plan(
        &[&data("unsorted-vex.osm.pbf")],
        &dir.path().join("spool"),
        &["--memory", "64k", "-vv"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        !err.contains(" 0 spill levels"),
        "the spill path ran: {err}"
    );
    // Spill files are gone; only the spool is left.
    let left: Vec<_> = fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, ["spool"]);
}

#[test]
fn several_inputs_at_once_sort_like_osmium() {
    let (a, b, c) = (
        data("sorted-andorra.osm.pbf"),
        data("unsorted-vex.osm.pbf"),
        data("sorted-liechtenstein.osm.pbf"),
    );
    assert_like_osmium(&[&a, &b, &c], &[]);
    assert_like_osmium(&[&a, &c], &["--compression", "lz4", "-j", "1"]);
}

/// Keys (first two OPL fields) mapped to the lines osmium has for them.
fn lines_by_key(opl: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for l in opl.lines() {
        let key = l.split(' ').take(2).collect::<Vec<_>>().join(" ");
        m.entry(key).or_default().insert(l.to_owned());
    }
    m
}

#[test]
fn dedupe_matches_osmium_sort_without_repeats() {
    // The same file twice (under two names) plus an overlapping file: every
    // object of the first appears twice.
    let dir = tempfile::tempdir().expect("dir");
    let lz4 = data("sorted-monaco-lz4.osm.pbf");
    let vex = data("unsorted-vex.osm.pbf");
    let again = dir.path().join("again.osm.pbf");
    fs::copy(&lz4, &again).expect("copy");
    let inputs: [&Path; 3] = [&lz4, &vex, &again];
    let out = sort_into(&inputs, dir.path(), &["--dedupe", "--memory", "256k"]);
    let ours = opl(&out);
    let want = lines_by_key(&osmium_sorted_opl(&inputs, dir.path()));
    let got: Vec<&str> = ours.lines().collect();
    assert_eq!(got.len(), want.len(), "one object per (type, id, version)");
    for l in got {
        let key = l.split(' ').take(2).collect::<Vec<_>>().join(" ");
        assert!(want.get(&key).is_some_and(|s| s.contains(l)), "{l}");
    }
    assert_ordered(&out);
    // Without --dedupe nothing is dropped.
    let dir2 = tempfile::tempdir().expect("dir");
    let out2 = sort_into(&inputs, dir2.path(), &[]);
    let all: usize = want.values().map(BTreeSet::len).sum();
    assert!(opl(&out2).lines().count() > all, "repeats kept");
}

/// A copy of an unsorted file, its plan, and the first merge input's offset.
pub(crate) fn unsorted_copy(dir: &Path) -> (PathBuf, Vec<u8>, u64) {
    let input = dir.join("in.osm.pbf");
    fs::copy(data("unsorted-vex.osm.pbf"), &input).expect("copy");
    let mut index = bin("pbf-index");
    index.arg("-q").arg(&input);
    let plan = plan_of(&succeeds(index));
    let recs: Vec<PlanRecord> = records(&plan);
    let offset = recs
        .iter()
        .find_map(|r| match r {
            PlanRecord::Merge(m) => Some(m.inputs[0].offset),
            _ => None,
        })
        .expect("a merge op");
    (input, plan, offset)
}

/// `plan` with the ctime of its sources what `input`'s is now.
fn with_ctime_now(plan: &[u8], input: &Path) -> Vec<u8> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(input).expect("meta");
    let mut w = pbf_stream::Writer::new(Vec::new());
    for mut rec in records::<PlanRecord>(plan) {
        if let PlanRecord::Plan(h) = &mut rec {
            for s in &mut h.sources {
                s.file.ctime = Some(meta.ctime());
                s.file.ctime_nsec = u32::try_from(meta.ctime_nsec()).ok();
            }
        }
        w.write(&rec).expect("record");
    }
    w.finish().expect("plan")
}

fn merge_with(plan: &[u8], spool: &Path, shell_prefix: &str) -> Output {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("{shell_prefix} exec \"$0\" --spool \"$1\""))
        .arg(env!("CARGO_BIN_EXE_pbf-merge"))
        .arg(spool);
    run_with_input(c, plan)
}

#[test]
fn a_corrupt_blob_in_a_run_fails_naming_file_and_offset() {
    let dir = tempfile::tempdir().expect("dir");
    let (input, plan, offset) = unsorted_copy(dir.path());
    // Damage the blob's compressed data, keeping size and mtime as indexed.
    let mtime = fs::metadata(&input)
        .and_then(|m| m.modified())
        .expect("mtime");
    let mut bytes = fs::read(&input).expect("read");
    for b in &mut bytes[offset as usize + 200..offset as usize + 240] {
        *b ^= 0x5a;
    }
    fs::write(&input, &bytes).expect("write");
    fs::File::options()
        .write(true)
        .open(&input)
        .and_then(|f| f.set_modified(mtime))
        .expect("restore mtime");
    // A file damaged before it was indexed, whose index kept the keys of
    // before: the ctime moved by the damage is the one in the plan.
    let plan = with_ctime_now(&plan, &input);
    let spool = dir.path().join("spool");
    let o = merge_with(&plan, &spool, "");
    let says = format!("in.osm.pbf: blob at offset {offset}");
    refused("a corrupt blob", &o, 1, &["pbf-merge: error: ", &says]);
    assert!(!spool.exists(), "the failed spool is removed");
}

#[test]
fn a_changed_source_fails_before_merging() {
    let dir = tempfile::tempdir().expect("dir");
    let (input, plan, _) = unsorted_copy(dir.path());
    fs::OpenOptions::new()
        .append(true)
        .open(&input)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"x"))
        .expect("append");
    let o = merge_with(&plan, &dir.path().join("spool"), "");
    refused(
        "a changed source",
        &o,
        1,
        &["pbf-merge: error: ", "changed since it was indexed"],
    );
}

#[test]
fn a_spool_that_cannot_be_written_fails_naming_it() {
    let dir = tempfile::tempdir().expect("dir");
    let (_, plan, _) = unsorted_copy(dir.path());
    let spool = dir.path().join("spool");
    // A file size limit of 64 blocks (32 or 64 KiB), with SIGXFSZ ignored, makes the spool's
    // writes fail with EFBIG the way a full disk fails with ENOSPC.
    let o = merge_with(&plan, &spool, "trap '' XFSZ; ulimit -f 64;");
    let says = format!("{}: cannot write spool at offset", spool.display());
    refused("ulimit -f", &o, 1, &["pbf-merge: error: ", &says]);
    // An existing spool is refused before any work: a usage error.
    fs::write(&spool, b"").expect("spool");
    let o = merge_with(&plan, &spool, "");
    let says = "exists (--spool names a file to create)";
    refused("an existing spool", &o, 2, &[says]);
    // Nor in a directory of device names, given or as $TMPDIR.
    let in_dev = Path::new("/dev/pbf-merge-test.spool");
    let mut by_env = Command::new(env!("CARGO_BIN_EXE_pbf-merge"));
    by_env.env("TMPDIR", "/dev");
    for o in [merge_with(&plan, in_dev, ""), run_with_input(by_env, &plan)] {
        refused(
            "a spool in /dev",
            &o,
            2,
            &["/dev: holds the system's names"],
        );
        assert!(!in_dev.exists());
    }
}

/// A node without tags, metadata or position.
const NO_NODE: pbf_format::block::Node = pbf_format::block::Node {
    id: 0,
    info: None,
    lat: 0,
    lon: 0,
    tags: Vec::new(),
};

/// A file of `blobs` tiny blobs of two untagged nodes each, every blob
/// spanning nearly the whole id range (so each is a chain of its own), and
/// the plan of the one merge op over all of them; generated here, not by
/// the stages, to keep a debug build's test short. Returns the plan.
fn tiny_blobs(out: &Path, blobs: i64) -> Vec<u8> {
    use pbf_format::block::{Element, EncodeOptions, Node, encode_block};
    use pbf_format::compress::{Compression, encode_blob};
    use pbf_format::frame::encode_frame;
    use pbf_format::{Key, Kind};
    use pbf_stream::{MergeInput, MergeOp, PlanHeader};
    use std::io::Write as _;

    let template = data("sorted-kualalumpur.osm.pbf");
    let header_frame = {
        let f = pbf_format::frame::PbfFile::open(&template).expect("open");
        let h = f.headers().next().expect("a frame").expect("header frame");
        f.read_exact_at(0, h.frame_len() as usize, "header")
            .expect("read")
    };
    let mut w = std::io::BufWriter::new(fs::File::create(out).expect("create"));
    w.write_all(&header_frame).expect("write");
    let mut offset = header_frame.len() as u64;
    let blank = Node::clone(&NO_NODE);
    let node = |id| {
        Element::Node(Node {
            id,
            ..blank.clone()
        })
    };
    let key = |id| Key::new(Kind::Node, id, 0).into();
    let mut inputs = Vec::with_capacity(blobs as usize);
    for b in 0..blobs {
        let (low, high) = (1 + b, 2 * blobs - b);
        let raw = encode_block(&[node(high), node(low)], &EncodeOptions::default());
        let blob = encode_blob(&raw, Compression::None).expect("blob");
        let frame =
            encode_frame(&pbf_format::frame::BlobType::OsmData, None, &blob).expect("frame");
        w.write_all(&frame).expect("write");
        let length = frame.len() as u64;
        inputs.push(MergeInput {
            source: 0,
            offset,
            length,
            first: key(low),
            last: key(high),
            sorted: false,
            elements: 2,
        });
        offset += length;
    }
    w.into_inner().expect("flush").sync_all().expect("sync");
    let (src, _) = index_header_only(out, &template);
    let op = MergeOp {
        first: key(1),
        last: key(2 * blobs),
        elements: 2 * blobs as u64,
        inputs,
    };
    let header: PlanHeader = plan_header(&src);
    plan_bytes(&header, &[PlanRecord::Merge(op)], true)
}

/// The source record of `path`, whose header block is `template`'s.
fn index_header_only(path: &Path, template: &Path) -> (pbf_stream::SourceRecord, ()) {
    let (mut src, _) = index(template);
    let meta = fs::metadata(path).expect("metadata");
    // Its own identity and name, not the template's.
    src.file = pbf_stream::FileIdentity::of(path, &meta, None);
    (src, ())
}

/// Run `cmd` to its end with `input` on standard input, and return its
/// output and its peak resident set (VmHWM, read from /proc while it runs:
/// the high-water mark only grows, so the last reading holds the peak
/// unless the peak came in the last few milliseconds, which for a merge,
/// whose end only writes out what is left, it does not).
fn peak_rss(mut cmd: Command, input: &[u8]) -> (Output, u64) {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    while child.try_wait().expect("wait").is_none() {
        let status = fs::read_to_string(&status_file).unwrap_or_default();
        let hwm = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok());
        peak = peak.max(hwm.unwrap_or(0) * 1024);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    feeder.join().expect("feeder").expect("plan written");
    (child.wait_with_output().expect("output"), peak)
}

/// The budget is a promise at any blob count: a million blobs of two
/// objects (about as many chains) merged with `--memory 256M` stay within
/// the budget and a constant, their records and batches counted against
/// it. Before batches, such a merge held a chain, a stream and a decoded
/// block per blob, several times its budget. What the budget does not
/// cover is the plan's line of the op while it is parsed (and the list
/// parsed from it), which is what peaks here: the limit allows the line.
#[test]
fn a_million_tiny_blobs_stay_within_the_memory_budget() {
    let dir = tempfile::tempdir().expect("dir");
    let input = dir.path().join("tiny.osm.pbf");
    let plan = tiny_blobs(&input, 1_000_000);
    let mut merge = bin("pbf-merge");
    merge.args(["-v", "-j", "2", "--memory", "256M", "--spool"]);
    merge.arg(dir.path().join("spool"));
    let (o, peak) = peak_rss(merge, &plan);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("2000000 objects in, 2000000 out"), "{err}");
    let limit = ((256 + 64) << 20) + plan.len() as u64;
    assert!(
        peak > 0 && peak <= limit,
        "peak RSS {peak} bytes, budget 256M plus 64M and the plan's {} bytes: {err}",
        plan.len()
    );
}
