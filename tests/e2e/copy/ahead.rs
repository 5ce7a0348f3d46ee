//! Copying ahead: `pbf-overlap --sources` writes the plan record before it
//! has read the blobs, `pbf-merge` passes it on at once, and `pbf-copy`
//! starts copying a single input's data frames on the guess that the ops
//! will ask for them whole and in order, as far as `sorted` records say the
//! input was read in order. These tests hold the ops back so the copy
//! really runs ahead, then send plans that confirm the guess, break it late,
//! break it at once or stop early: the output must be byte for byte the one
//! `--no-copy-ahead` writes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use pbf_stream::{BlobRecord, IndexRecord, PlanHeader, PlanRecord, SortedThrough, SourceRecord};

use crate::util::*;

/// How long the ops are held back: long enough for the copy ahead of a
/// test file to finish.
const PAUSE: Duration = Duration::from_millis(400);

/// A plan copying `blobs` of `src`, one op per blob, in the given order,
/// whose record says it was written early (before the blobs were planned),
/// followed by a `sorted` record through the whole file.
fn plan(src: &SourceRecord, blobs: &[&BlobRecord]) -> Vec<u8> {
    plan_sorted_through(src, src.file.size, blobs)
}

/// [`plan`] whose `sorted` record says the file is in order up to `through`.
fn plan_sorted_through(src: &SourceRecord, through: u64, blobs: &[&BlobRecord]) -> Vec<u8> {
    let header = PlanHeader {
        early: true,
        ..plan_header(src)
    };
    let sorted = PlanRecord::Sorted(SortedThrough { source: 0, through });
    let records: Vec<PlanRecord> = std::iter::once(sorted).chain(copy_ops(blobs)).collect();
    plan_bytes(&header, &records, true)
}

/// One copy op per blob, in the given order.
fn copy_ops(blobs: &[&BlobRecord]) -> Vec<PlanRecord> {
    blobs
        .iter()
        .map(|b| PlanRecord::Copy(copy_op(b, false)))
        .collect()
}

/// `tool args` with every stream piped.
fn spawn(tool: &str, args: &[&str]) -> Child {
    let mut c = bin(tool);
    c.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().expect("spawn")
}

/// Write the lines of `input` up to the first op (the plan record and any
/// `sorted` record), wait `PAUSE`, write the rest, and wait for the output.
fn feed_slowly(mut child: Child, input: &[u8]) -> Output {
    let mut split = 0;
    for line in input.split_inclusive(|&b| b == b'\n') {
        if !(line.starts_with(br#"{"type":"plan""#) || line.starts_with(br#"{"type":"sorted""#)) {
            break;
        }
        split += line.len();
    }
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&input[..split]).expect("first line");
    stdin.flush().expect("flush");
    std::thread::sleep(PAUSE);
    stdin.write_all(&input[split..]).expect("the rest");
    drop(stdin);
    child.wait_with_output().expect("wait")
}

/// `pbf-copy -v` with the ops held back; returns the output file's bytes
/// and the "copied ahead" line.
fn copy_slowly(plan: &[u8], dir: &Path, name: &str, args: &[&str]) -> (Vec<u8>, String) {
    let out = dir.join(name);
    let mut all = vec!["-vv", "-o", out.to_str().expect("utf-8")];
    all.extend_from_slice(args);
    let o = feed_slowly(spawn("pbf-copy", &all), plan);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "pbf-copy {all:?}: {err}");
    let line = err
        .lines()
        .find(|l| l.contains("copied ahead"))
        .unwrap_or("")
        .to_owned();
    (std::fs::read(&out).expect("output"), line)
}

/// The plan run with and without copying ahead: the same bytes. Returns the
/// "copied ahead" line.
fn same_as_without(plan: &[u8], dir: &Path) -> String {
    let (ahead, line) = copy_slowly(plan, dir, "ahead.osm.pbf", &["--keep-spools"]);
    let (waited, none) = copy_slowly(
        plan,
        dir,
        "waited.osm.pbf",
        &["--no-copy-ahead", "--keep-spools"],
    );
    assert!(
        none.is_empty(),
        "--no-copy-ahead still copied ahead: {none}"
    );
    assert!(ahead == waited, "copying ahead changed the output ({line})");
    line
}

fn kept_and_dropped(line: &str) -> (u64, u64) {
    let num = |after: &str| -> u64 {
        let at = line
            .find(after)
            .unwrap_or_else(|| panic!("{after:?} in {line:?}"));
        let tail = line[..at].trim_end();
        let digits = tail.rsplit(' ').next().expect("a number");
        digits
            .parse()
            .unwrap_or_else(|_| panic!("number before {after:?} in {line:?}"))
    };
    (num("bytes kept"), num("bytes dropped"))
}

fn data_bytes(blobs: &[&BlobRecord]) -> u64 {
    blobs.iter().map(|b| b.length).sum()
}

#[test]
fn a_confirmed_guess_keeps_every_byte() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, blobs) = index(&data("sorted-kualalumpur.osm.pbf"));
    let all: Vec<&BlobRecord> = blobs.iter().collect();
    let line = same_as_without(&plan(&src, &all), dir.path());
    assert_eq!(kept_and_dropped(&line), (data_bytes(&all), 0), "{line}");
}

/// A plan in output order of a copy of `name` whose data frames are
/// stored in `order`: the ops follow the file as long as `order` does.
fn sorted_plan_of_reordered(
    name: &str,
    dir: &Path,
    order: impl Fn(usize) -> Vec<usize>,
) -> Vec<u8> {
    let input = data(name);
    let frames = pbf_format::frame::PbfFile::open(&input)
        .expect("open")
        .headers()
        .count()
        - 1;
    let file = dir.join(format!("reordered-{name}"));
    reorder(&input, &file, &order(frames));
    let (src, blobs) = index(&file);
    let mut by_key: Vec<&BlobRecord> = blobs.iter().collect();
    by_key.sort_by_key(|b| pbf_format::Key::from(b.first));
    plan(&src, &by_key)
}

#[test]
fn a_disorder_found_after_the_copy_started_keeps_only_the_confirmed_prefix() {
    let dir = tempfile::tempdir().expect("dir");
    // The first half of the blobs in place, the second half reversed: the
    // ops follow the file for half of it, then jump to its end.
    let plan = sorted_plan_of_reordered("sorted-kualalumpur.osm.pbf", dir.path(), |n| {
        (0..n / 2).chain((n / 2..n).rev()).collect()
    });
    let line = same_as_without(&plan, dir.path());
    let (kept, dropped) = kept_and_dropped(&line);
    let blobs = index(&data("sorted-kualalumpur.osm.pbf")).1;
    let half: Vec<&BlobRecord> = blobs[..blobs.len() / 2].iter().collect();
    assert_eq!(kept, data_bytes(&half), "{line}");
    assert!(dropped > 0, "the copy had not run ahead: {line}");
}

/// A copy of sorted-kualalumpur in `dir` with the first half of its data
/// frames in place and the second half reversed; and its number of frames.
fn half_reversed(dir: &Path) -> (PathBuf, usize) {
    let input = data("sorted-kualalumpur.osm.pbf");
    let n = data_frames(&input).len();
    let file = dir.join("reordered.osm.pbf");
    let order: Vec<usize> = (0..n / 2).chain((n / 2..n).rev()).collect();
    reorder(&input, &file, &order);
    (file, n)
}

/// The copy ahead goes no further than the `sorted` records say: with the
/// file said to be in order through its first third, and ops that follow it
/// for half of it, the copy ahead keeps at most that third and drops
/// nothing (the copier copies the rest of the half itself).
#[test]
fn the_copy_ahead_stops_where_the_sorted_records_end() {
    let dir = tempfile::tempdir().expect("dir");
    let (file, n) = half_reversed(dir.path());
    let (src, blobs) = index(&file);
    let third = blobs[n / 3].offset;
    let mut by_key: Vec<&BlobRecord> = blobs.iter().collect();
    by_key.sort_by_key(|b| pbf_format::Key::from(b.first));
    let plan = plan_sorted_through(&src, third, &by_key);
    let line = same_as_without(&plan, dir.path());
    let (kept, dropped) = kept_and_dropped(&line);
    assert!(kept > 0 && kept <= third - blobs[0].offset, "{line}");
    assert_eq!(dropped, 0, "copied past the sorted record: {line}");
}

#[test]
fn a_guess_wrong_from_the_first_op_keeps_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let plan = sorted_plan_of_reordered("sorted-liechtenstein.osm.pbf", dir.path(), |n| {
        (0..n).rev().collect()
    });
    let line = same_as_without(&plan, dir.path());
    let (kept, dropped) = kept_and_dropped(&line);
    assert_eq!(kept, 0, "{line}");
    assert!(dropped > 0, "{line}");
}

#[test]
fn a_plan_out_of_output_order_is_refused_with_the_copy_ahead_running() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, blobs) = index(&data("sorted-liechtenstein.osm.pbf"));
    let reversed: Vec<&BlobRecord> = blobs.iter().rev().collect();
    let out = dir.path().join("out.osm.pbf");
    let o = feed_slowly(
        spawn("pbf-copy", &["-o", out.to_str().expect("utf-8")]),
        &plan(&src, &reversed),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("standard input: line 4: copy op") && err.contains("not in output order"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

#[test]
fn a_header_record_drops_the_copy_ahead_and_heads_the_output() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("sorted-kualalumpur.osm.pbf");
    let (src, blobs) = index(&input);
    let all: Vec<&BlobRecord> = blobs.iter().collect();
    let plan = with_header_record(&plan(&src, &all));
    // The ops come after the pause, the header record with them: the copy
    // ahead behind the old header is under way (or done) by then.
    let line = same_as_without(&plan, dir.path());
    let (kept, dropped) = kept_and_dropped(&line);
    assert_eq!(kept, 0, "{line}");
    assert!(dropped > 0, "the copy had not run ahead: {line}");
    let out = dir.path().join("ahead.osm.pbf");
    assert_header_record_taken(&out, &input);
    let written = std::fs::read(&out).expect("output");
    // Standard output (no copy ahead) and pbf-reflink where it cannot
    // clone (it writes what pbf-copy writes) give the same bytes.
    let o = feed_slowly(spawn("pbf-copy", &["-o", "-"]), &plan);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout == written, "-o - wrote other bytes");
    let reflinked = dir.path().join("reflinked.osm.pbf");
    let o = feed_slowly(
        spawn(
            "pbf-reflink",
            &["-q", "-o", reflinked.to_str().expect("utf-8")],
        ),
        &plan,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::read(&reflinked).expect("reflinked") == written,
        "pbf-reflink wrote other bytes"
    );
}

#[test]
fn a_plan_record_written_after_planning_starts_no_copy() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, blobs) = index(&data("sorted-liechtenstein.osm.pbf"));
    let all: Vec<&BlobRecord> = blobs.iter().collect();
    let made_first = plan_bytes(&plan_header(&src), &copy_ops(&all), true);
    let (bytes, line) = copy_slowly(&made_first, dir.path(), "out.osm.pbf", &[]);
    assert_eq!(line, "", "copied ahead on a plan made first");
    let (waited, _) = copy_slowly(&made_first, dir.path(), "w.osm.pbf", &["--no-copy-ahead"]);
    assert!(bytes == waited, "the same output");
}

#[test]
fn a_plan_that_stops_early_cuts_the_copy_back() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, blobs) = index(&data("sorted-liechtenstein.osm.pbf"));
    let third: Vec<&BlobRecord> = blobs[..blobs.len() / 3].iter().collect();
    let line = same_as_without(&plan(&src, &third), dir.path());
    assert_eq!(kept_and_dropped(&line).0, data_bytes(&third), "{line}");
}

/// Run `tool args` on `input`, giving it the first `lines` lines, then
/// (after the check) the rest; returns what those lines brought out within
/// a second, the exit status and stderr, and the whole stdout.
fn lines_then_rest(
    tool: &str,
    args: &[&str],
    input: &[u8],
    lines: usize,
) -> (Option<String>, Output) {
    let mut child = spawn(tool, args);
    let mut stdin = child.stdin.take().expect("stdin");
    let split = input
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(lines - 1)
        .map(|(i, _)| i + 1)
        .expect("enough lines");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut all = Vec::new();
        let _ = r.read_until(b'\n', &mut all);
        let _ = tx.send(String::from_utf8_lossy(&all).into_owned());
        let _ = r.read_to_end(&mut all);
        all
    });
    stdin.write_all(&input[..split]).expect("first lines");
    stdin.flush().expect("flush");
    let early = rx
        .recv_timeout(Duration::from_secs(1))
        .ok()
        .filter(|l| !l.is_empty());
    stdin.write_all(&input[split..]).expect("the rest");
    drop(stdin);
    let mut o = child.wait_with_output().expect("wait");
    o.stdout = reader.join().expect("reader");
    (early, o)
}

fn plan_of(index: &[u8], args: &[&str]) -> Vec<u8> {
    let mut c = bin("pbf-overlap");
    c.args(args);
    let o = run_with_input(c, index);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o.stdout
}

/// The records of a plan stream, the plan record's `early` flag apart (and
/// the `unsorted` and `sorted` records, which only an early plan record can
/// be followed by, and the `header` record that follows it once planned,
/// taken into the plan record: it brings the header and `copy_bytes`).
fn records_but_early(plan: &[u8]) -> (bool, Vec<PlanRecord>) {
    let mut early = false;
    let mut records: Vec<PlanRecord> = plan
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .filter(|l| !l.starts_with(br#"{"type":"unsorted""#))
        .filter(|l| !l.starts_with(br#"{"type":"sorted""#))
        .map(
            |l| match serde_json::from_slice(l).expect("a plan record") {
                PlanRecord::Plan(h) => {
                    early = h.early;
                    PlanRecord::Plan(PlanHeader { early: false, ..h })
                }
                op => op,
            },
        )
        .collect();
    if let [PlanRecord::Plan(p), PlanRecord::Header(h), ..] = records.as_mut_slice() {
        p.header = h.header.clone();
        p.copy_bytes = h.copy_bytes;
        records.remove(1);
    }
    (early, records)
}

/// What `pbf-overlap --sources 1` writes once it has read the source
/// record and `blobs` blob records of `index` (the rest is held back); its
/// whole plan must be the one written without `--sources`, but for the
/// plan record's `early` flag, returned too: whether the record went out
/// before every blob was read (with all of them, at the latest).
fn early_record(index: &[u8], blobs: usize) -> (Option<String>, bool) {
    let (early, o) = lines_then_rest("pbf-overlap", &["--sources", "1"], index, 1 + blobs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (flagged, with) = records_but_early(&o.stdout);
    let (plain, without) = records_but_early(&plan_of(index, &[]));
    assert_eq!(with, without, "the same plan as without --sources");
    assert!(!plain, "a plan record flagged early without --sources");
    assert!(
        flagged || early.is_none(),
        "early but not flagged: {early:?}"
    );
    (early, flagged)
}

#[test]
fn sources_writes_the_plan_record_once_the_first_blobs_are_in_order() {
    let index = index_stream(&data("sorted-kualalumpur.osm.pbf"));
    assert_eq!(
        early_record(&index, 15),
        (None, true),
        "a plan record before 16 blobs, or one not flagged early after them"
    );
    let early = early_record(&index, 16)
        .0
        .expect("the plan record after 16 blobs in order");
    let (flagged, plan) = records_but_early(early.as_bytes());
    assert!(flagged, "the early plan record says so: {early}");
    let (_, whole) = records_but_early(&plan_of(&index, &[]));
    let PlanRecord::Plan(planned) = &whole[0] else {
        panic!("no plan record: {whole:?}");
    };
    assert!(
        planned.copy_bytes.is_some(),
        "a plan record made after planning has copy_bytes"
    );
    // The early record cannot know what the plan copies yet.
    let unplanned = PlanHeader {
        copy_bytes: None,
        ..planned.clone()
    };
    assert_eq!(
        plan[..],
        [PlanRecord::Plan(unplanned)],
        "the same plan record"
    );
}

/// After the early plan record, `pbf-overlap --sources` says how far the
/// input is read in order: at once (through the blobs the early record
/// waited for), then every 16 MiB; pbf-merge passes the records on.
#[test]
fn sources_says_how_far_the_input_is_in_order() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("sorted-kualalumpur.osm.pbf");
    let (_, blobs) = index(&input);
    let plan = plan_of(&index_stream(&input), &["--sources", "1"]);
    let mut c = bin("pbf-merge");
    c.arg("--spool").arg(dir.path().join("spool"));
    let o = run_with_input(c, &plan);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let at_16 = blobs[15].offset + blobs[15].length;
    for (stage, plan) in [("pbf-overlap", plan), ("pbf-merge", o.stdout)] {
        let recs: Vec<PlanRecord> = records(&plan);
        let PlanRecord::Sorted(first) = recs[1] else {
            panic!("{stage}: no sorted record after the plan record: {recs:?}")
        };
        assert_eq!((first.source, first.through), (0, at_16), "{stage}");
        let sorted: Vec<u64> = recs
            .iter()
            .filter_map(|r| match r {
                PlanRecord::Sorted(s) => Some(s.through),
                _ => None,
            })
            .collect();
        assert_eq!(sorted.len(), 1, "{stage}: a file under 16 MiB");
    }
}

/// The `sorted` records come a 16 MiB step apart: the index of a file whose
/// blobs lie 4 MiB apart (the kualalumpur index with its offsets spread;
/// the planner reads only the index) gets one after the first 16 blobs and
/// one at each 16 MiB further, up to where the blobs stay in order.
#[test]
fn the_sorted_records_are_a_step_apart() {
    const GAP: u64 = 4 << 20;
    let mut recs: Vec<IndexRecord> = records(&index_stream(&data("sorted-kualalumpur.osm.pbf")));
    let mut n = 0;
    for r in &mut recs {
        if let IndexRecord::Blob(b) = r {
            b.offset = 100 + n * GAP;
            n += 1;
        }
    }
    if let IndexRecord::Source(s) = &mut recs[0] {
        s.file.size = 100 + n * GAP;
    }
    let mut w = pbf_stream::Writer::new(Vec::new());
    recs.iter().for_each(|r| w.write(r).expect("record"));
    let plan = plan_of(&w.finish().expect("index"), &["--sources", "1"]);
    let through: Vec<u64> = records(&plan)
        .into_iter()
        .filter_map(|r| match r {
            PlanRecord::Sorted(s) => Some(s.through),
            _ => None,
        })
        .collect();
    let end_of = |i: u64| {
        let length = recs.iter().find_map(|r| match r {
            IndexRecord::Blob(b) if b.offset == 100 + i * GAP => Some(b.length),
            _ => None,
        });
        100 + i * GAP + length.expect("blob")
    };
    // The first after 16 blobs, then each blob ending 16 MiB or more past
    // the last record's offset.
    let mut want: Vec<u64> = vec![end_of(15)];
    for i in 16..n {
        if end_of(i) >= want[want.len() - 1] + (16 << 20) {
            want.push(end_of(i));
        }
    }
    assert!(want.len() >= 3, "{want:?}");
    assert_eq!(through, want);
}

#[test]
fn sources_waits_when_the_first_blobs_are_out_of_order() {
    let dir = tempfile::tempdir().expect("dir");
    let permuted = dir.path().join("permuted.osm.pbf");
    permute(&data("sorted-kualalumpur.osm.pbf"), &permuted, 7);
    let index = index_stream(&permuted);
    let lines = index.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(
        early_record(&index, lines - 2),
        (None, false),
        "a plan record for a permuted file"
    );
    let unsorted = index_stream(&data("unsorted-vex.osm.pbf"));
    assert_eq!(
        early_record(&unsorted, 16),
        (None, false),
        "a plan record for unsorted blobs"
    );
}

#[test]
fn sources_waits_when_a_merge_could_change_the_header() {
    // Without DenseNodes among the input's required features, a merge would
    // add it, so the header is known only once the ops are.
    let index =
        String::from_utf8(index_stream(&data("sorted-kualalumpur.osm.pbf"))).expect("utf-8");
    let dense = r#""required_features":["OsmSchema-V0.6","DenseNodes"]"#;
    assert!(index.contains(dense));
    let plain = index.replacen(dense, r#""required_features":["OsmSchema-V0.6"]"#, 1);
    assert_eq!(
        early_record(plain.as_bytes(), 30),
        (None, false),
        "a plan record before the ops"
    );
}

#[test]
fn sources_must_match_the_index() {
    let a = index_stream(&data("sorted-andorra.osm.pbf"));
    let both = [
        a.clone(),
        index_stream(&data("sorted-liechtenstein.osm.pbf")),
    ]
    .concat();
    for (input, n, message) in [
        (&a, "2", "--sources 2, but the index streams hold 1 source"),
        (
            &both,
            "1",
            "--sources 1, but the index streams hold more sources",
        ),
    ] {
        let mut c = bin("pbf-overlap");
        c.args(["--sources", n]);
        let o = run_with_input(c, input);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(message), "{message:?} in {err}");
    }
    for args in [
        &["--sources", "0"][..],
        &["--sources", "x"],
        &["--check", "--sources", "1"],
    ] {
        let mut c = bin("pbf-overlap");
        c.args(args);
        let o = run_with_input(c, &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn merge_passes_the_plan_record_on_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let spool = dir.path().join("spool.pbf");
    let index = index_stream(&data("sorted-kualalumpur.osm.pbf"));
    let args = ["--spool", spool.to_str().expect("utf-8")];
    for (args_of_overlap, flagged) in [(&[][..], false), (&["--sources", "1"], true)] {
        let plan = plan_of(&index, args_of_overlap);
        let (early, o) = lines_then_rest("pbf-merge", &args, &plan, 1);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let early = early.expect("the plan record before the ops were sent");
        let rec: PlanRecord = serde_json::from_str(&early).expect("a record");
        let PlanRecord::Plan(h) = rec else {
            panic!("not a plan record: {early}")
        };
        assert!(h.sources.last().is_some_and(|s| s.spool), "{early}");
        assert_eq!(h.early, flagged, "the early flag passed on: {early}");
    }
}

/// `pbf-sort -v --copier copy -o OUT INPUT`, which must succeed; returns
/// its standard error.
fn sort_verbosely(input: &Path, out: &Path) -> String {
    let mut c = pbf_sort();
    c.args(["-vv", "--copier", "copy", "-o"])
        .arg(out)
        .arg(input);
    let o = run(c);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    err
}

#[test]
fn the_driver_copies_a_sorted_input_ahead() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("sorted-kualalumpur.osm.pbf");
    let out = dir.path().join("out.osm.pbf");
    let err = sort_verbosely(&input, &out);
    let (_, blobs) = index(&input);
    let all: Vec<&BlobRecord> = blobs.iter().collect();
    let line = err
        .lines()
        .find(|l| l.contains("copied ahead"))
        .expect(&err);
    assert_eq!(kept_and_dropped(line), (data_bytes(&all), 0), "{line}");
    assert_eq!(opl(&out), opl(&input));
}

/// An input whose first blobs are unsorted gets its plan record after
/// planning, so nothing is copied ahead while pbf-merge works.
#[test]
fn the_driver_copies_nothing_ahead_of_a_merge() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out.osm.pbf");
    let err = sort_verbosely(&data("unsorted-vex.osm.pbf"), &out);
    assert!(err.contains("pbf-copy: "), "{err}");
    assert!(!err.contains("copied ahead"), "{err}");
}

/// Header frame, then the data frames of `name` twice: the first copy is in
/// order (the plan record goes out early), the second breaks the order.
fn twice(name: &str, out: &Path) {
    let input = data(name);
    let f = pbf_format::frame::PbfFile::open(&input).expect("open");
    let head = f.headers().next().expect("header").expect("frame");
    let mut bytes = f
        .read_exact_at(0, head.frame_len() as usize, "header")
        .expect("read");
    let frames = data_frames(&input);
    for _ in 0..2 {
        frames.iter().for_each(|fr| bytes.extend_from_slice(fr));
    }
    std::fs::write(out, bytes).expect("write");
}

/// `index` without the source records' samples, as an indexer that takes
/// none writes it: the planner then sees a disorder only when it reads it.
fn without_samples(index: &[u8]) -> Vec<u8> {
    let recs: Vec<IndexRecord> = records(index);
    let mut w = pbf_stream::Writer::new(Vec::new());
    for mut r in recs {
        if let IndexRecord::Source(s) = &mut r {
            s.samples.clear();
        }
        w.write(&r).expect("record");
    }
    w.finish().expect("index")
}

/// The types of a plan stream's records, with ` early` after an early
/// plan record's.
fn record_types(plan: &[u8]) -> Vec<String> {
    plan.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_slice(l).expect("json");
            let kind = v["type"].as_str().expect("type");
            match v["early"].as_bool() {
                Some(true) => format!("{kind} early"),
                _ => kind.to_owned(),
            }
        })
        .collect()
}

/// The planner says a source is out of order as soon as a blob shows it,
/// after its early plan record and before any op; pbf-merge passes it on.
/// (Of an index without samples: with them, this file's plan record does
/// not go out early at all.)
#[test]
fn an_unsorted_record_follows_an_early_plan_record_at_the_first_disorder() {
    let dir = tempfile::tempdir().expect("dir");
    let input = dir.path().join("twice.osm.pbf");
    twice("sorted-kualalumpur.osm.pbf", &input);
    let index = without_samples(&index_stream(&input));
    let spool = dir.path().join("spool");
    for merge in [false, true] {
        let mut plan = plan_of(&index, &["--sources", "1"]);
        if merge {
            let mut c = bin("pbf-merge");
            c.arg("--spool").arg(&spool);
            let o = run_with_input(c, &plan);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            plan = o.stdout;
        }
        let types = record_types(&plan);
        assert_eq!(
            types[..3],
            ["plan early", "sorted", "unsorted"],
            "merge={merge}: {types:?}"
        );
        assert_eq!(types.iter().filter(|t| *t == "unsorted").count(), 1);
        let (early, _) = records_but_early(&plan);
        assert!(early, "the plan record went out early");
    }
    // A sorted input gets none.
    let sorted = plan_of(
        &index_stream(&data("sorted-kualalumpur.osm.pbf")),
        &["--sources", "1"],
    );
    assert!(!String::from_utf8_lossy(&sorted).contains("\"unsorted\""));
}

/// pbf-copy halts its copy ahead on the `unsorted` record and keeps what
/// it copied for the ops to confirm: the output is the one written without
/// a copy ahead.
#[test]
fn the_unsorted_record_halts_the_copy_ahead() {
    let dir = tempfile::tempdir().expect("dir");
    let input = dir.path().join("twice.osm.pbf");
    twice("sorted-kualalumpur.osm.pbf", &input);
    let plan = plan_of(&without_samples(&index_stream(&input)), &["--sources", "1"]);
    let mut c = bin("pbf-merge");
    c.arg("--spool").arg(dir.path().join("spool"));
    let o = run_with_input(c, &plan);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = same_as_without(&o.stdout, dir.path());
    assert!(line.contains("copied ahead"), "{line}");
}

/// Two sorted extracts joined in `dir` (liechtenstein's header and data
/// frames, then kualalumpur's data frames, as `pbf-gen concat` makes the
/// bench's interleaved file), whose ids fall among each other's: in order
/// up to the seam, past half the file. Returns the file and the seam's
/// offset.
fn joined(dir: &Path) -> (PathBuf, u64) {
    let file = dir.join("joined.osm.pbf");
    let first = data("sorted-liechtenstein.osm.pbf");
    concat(&[first.clone(), data("sorted-kualalumpur.osm.pbf")], &file);
    let seam = std::fs::metadata(&first).expect("size").len();
    (file, seam)
}

/// The file of [`joined`]: the samples
/// pbf-index takes show the disorder before the index reaches the seam, so
/// the plan record does not go out early and nothing is copied ahead; the
/// same index without samples gets an early plan record and an `unsorted`
/// one when the planner reaches the seam. A sorted file's samples change
/// nothing. The samples pass through `jq -c .` and `cat a.idx b.idx`.
#[test]
fn samples_keep_the_plan_record_of_two_joined_files_back() {
    let dir = tempfile::tempdir().expect("dir");
    let (joined, seam) = joined(dir.path());
    let index = index_stream(&joined);
    let recs: Vec<IndexRecord> = records(&index);
    let IndexRecord::Source(src) = &recs[0] else {
        panic!("no source record first")
    };
    assert!(src.samples.len() > 16, "{:?}", src.samples);
    assert!(
        src.samples.iter().any(|s| s.offset > seam),
        "{:?}",
        src.samples
    );
    let types = record_types(&plan_of(&index, &["--sources", "1"]));
    assert_eq!(types[0], "plan", "{types:?}");
    assert!(!types.contains(&"unsorted".to_owned()), "{types:?}");
    let types = record_types(&plan_of(&without_samples(&index), &["--sources", "1"]));
    assert_eq!(
        types[..3],
        ["plan early", "sorted", "unsorted"],
        "{types:?}"
    );
    // Through jq the index is the same bytes, so the same plan.
    require_tool("jq", "jq", "this test");
    let mut jq = std::process::Command::new("jq");
    jq.arg("-c").arg(".");
    assert!(
        succeeds_with(jq, &index) == index,
        "jq -c . changed the index"
    );
    // A sorted file keeps its early record: alone, and as the last of two
    // sections of one stream.
    let sorted = index_stream(&data("sorted-kualalumpur.osm.pbf"));
    let recs: Vec<IndexRecord> = records(&sorted);
    assert!(
        matches!(&recs[0], IndexRecord::Source(s) if s.samples.len() > 16),
        "a sorted file is sampled too"
    );
    for (stream, n) in [(sorted.clone(), "1"), ([index, sorted].concat(), "2")] {
        let types = record_types(&plan_of(&stream, &["--sources", n]));
        assert_eq!(types[..2], ["plan early", "sorted"], "{types:?}");
        assert!(!types.contains(&"unsorted".to_owned()), "{types:?}");
    }
}

/// The driver on the joined file: no copy ahead is started, and the output
/// is osmium's sort.
#[test]
fn the_driver_copies_nothing_ahead_of_two_joined_files() {
    let dir = tempfile::tempdir().expect("dir");
    let (joined, _) = joined(dir.path());
    let out = dir.path().join("out.osm.pbf");
    let err = sort_verbosely(&joined, &out);
    assert!(err.contains("pbf-copy: "), "{err}");
    assert!(!err.contains("copied ahead"), "{err}");
    assert_sorted_like_osmium(&out, &[&joined], dir.path(), "joined");
}
