//! The `pbf-sort` driver end to end: sorted and blob-permuted inputs sort by
//! passing every data blob through byte for byte, the result matches
//! `osmium sort`, the driver's options work, and a killed run leaves no output.
//! What the sorted output holds where keys repeat ([`repeats`], [`ties`],
//! [`latest`]), and what reads it or runs it: the README's cookbook
//! ([`cookbook`]), the JSON tools between stages ([`jsontools`]) and the
//! importers and other readers downstream ([`importers`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use pbf_format::frame::PbfFile;

use crate::util::*;

mod cookbook;
mod importers;
mod jsontools;
mod latest;
mod repeats;
mod ties;

/// Files whose blobs are each sorted and mutually non-overlapping.
const PASSTHROUGH: &[&str] = &[
    "sorted-andorra.osm.pbf",
    "sorted-kualalumpur.osm.pbf",
    "sorted-liechtenstein.osm.pbf",
    "sorted-monaco-bigblobs.osm.pbf",
    "sorted-monaco-lz4.osm.pbf",
    "sorted-64bit-ids.osm.pbf",
    "sorted-raw-nodense-mixed.osm.pbf",
    "history-niue.osh.pbf",
    "history-cyberjaya.osh.pbf",
    "negative-ids-graphhopper.osm.pbf",
];

#[test]
fn sorted_and_permuted_files_pass_through_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in PASSTHROUGH {
        let input = data(name);
        let permuted = dir.path().join(format!("permuted-{name}"));
        permute(&input, &permuted, 42);
        for (what, src) in [("sorted", &input), ("permuted", &permuted)] {
            let out = dir.path().join("out.osm.pbf");
            let mut c = pbf_sort();
            c.arg("-q").arg("-O").arg(src).arg("-o").arg(&out);
            succeeds(c);
            let what = format!("{what} {name}");
            assert_sorted_like_osmium(&out, &[src.as_path()], dir.path(), &what);
            let want: HashSet<Vec<u8>> = data_frames(&input).into_iter().collect();
            let got = data_frames(&out);
            assert_eq!(got.len(), want.len(), "{what}: blob count");
            assert!(
                got.iter().all(|f| want.contains(f)),
                "{what}: a data blob was re-encoded"
            );
        }
    }
}

#[test]
fn several_inputs_sort_into_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (
        data("sorted-andorra.osm.pbf"),
        data("sorted-liechtenstein.osm.pbf"),
    );
    sort_and_compare(&[&a, &b], dir.path(), "both.osm.pbf");
}

/// `pbf-sort -q --check INPUTS -o DIR/NAME`, which must succeed and hold
/// osmium sort's objects.
fn sort_and_compare(inputs: &[&Path], dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let mut c = pbf_sort();
    c.arg("-q").args(inputs).arg("-o").arg(&out).arg("--check");
    succeeds(c);
    assert_sorted_like_osmium(&out, inputs, dir, name);
    out
}

#[test]
fn repeats_kept_without_dedupe_pass_the_check() {
    // The same file under two names: every object comes out twice, in order
    // (osmium says so too), and --check must agree.
    let dir = tempfile::tempdir().expect("tempdir");
    let a = data("sorted-monaco-lz4.osm.pbf");
    let b = dir.path().join("again.osm.pbf");
    std::fs::copy(&a, &b).expect("copy");
    let out = sort_and_compare(&[&a, &b], dir.path(), "twice.osm.pbf");
    let index = succeeds({
        let mut c = bin("pbf-index");
        c.arg("-q").arg(&out);
        c
    });
    let text = String::from_utf8(index).expect("utf8");
    assert!(
        text.contains("\"repeats\":true"),
        "no blob marked as holding repeats"
    );
}

#[test]
fn keep_plan_dry_run_and_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-andorra.osm.pbf");
    let out = dir.path().join("o.osm.pbf");
    let plans = dir.path().join("plans");
    let mut c = pbf_sort();
    c.arg(&input)
        .arg("-o")
        .arg(&out)
        .arg("--keep-plan")
        .arg(&plans)
        .arg("--check");
    let o = run(c);
    // A check that passes says nothing unasked; -v asks for its verdict.
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut c = pbf_sort();
    c.arg("-v")
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .arg("-O")
        .arg("--keep-plan")
        .arg(&plans)
        .arg("--check");
    let o = run(c);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stderr);
    let input_s = std::fs::canonicalize(&input).expect("path");
    assert!(
        said.contains(&format!(
            "holds the objects of {}: 69644 nodes, 2725 ways, 74 relations, 0 changesets",
            input_s.display()
        )),
        "{said}"
    );
    for f in ["index.jsonl", "plan.jsonl", "merged.jsonl"] {
        let text = std::fs::read_to_string(plans.join(f)).expect(f);
        assert!(
            text.trim_end().ends_with('}') && text.contains("\"type\":\"end\""),
            "{f} incomplete"
        );
    }
    let mut c = pbf_sort();
    c.arg(&input)
        .arg("-o")
        .arg(dir.path().join("never.osm.pbf"))
        .arg("--dry-run");
    let text = String::from_utf8(succeeds(c)).expect("utf8");
    assert!(
        text.contains("pbf-index") && text.contains("| ") && text.contains("pbf-copy"),
        "{text}"
    );
    assert!(!dir.path().join("never.osm.pbf").exists());
}

#[test]
fn a_swapped_stage_is_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-andorra.osm.pbf");
    let out = dir.path().join("o.osm.pbf");
    // A replacement overlap stage that fails: the driver must use it and fail cleanly.
    let mut c = pbf_sort();
    c.arg("-q")
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .env("PBF_SORT_OVERLAP", "false");
    let o = run(c);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("pbf-sort: error: planning stage 'false' failed (exit 1)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
    assert!(leftovers.is_empty(), "temporaries left: {leftovers:?}");
}

/// A sorted input large enough that the copy takes a noticeable time.
fn big_sorted_input(dir: &Path) -> PathBuf {
    let src = data("sorted-kualalumpur.osm.pbf");
    let f = PbfFile::open(&src).expect("open");
    let frames: Vec<_> = f.headers().map(|h| h.expect("frame")).collect();
    // One header, then the file's frames repeated: not sorted across copies,
    // which is fine for a kill test of the copy and merge stages.
    let mut bytes = Vec::new();
    for (i, h) in frames.iter().enumerate() {
        let reps = if i == 0 { 1 } else { 12 };
        let frame = f
            .read_exact_at(h.offset, h.frame_len() as usize, "frame")
            .expect("read");
        for _ in 0..reps {
            bytes.extend_from_slice(&frame);
        }
    }
    let p = dir.join("big.osm.pbf");
    std::fs::write(&p, bytes).expect("write");
    p
}

#[test]
fn killed_runs_leave_no_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = big_sorted_input(dir.path());
    let before = std::fs::read(&input).expect("read input");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.join("o.osm.pbf");
    for (signal, delay_ms) in [("KILL", 300), ("INT", 300), ("TERM", 600), ("INT", 1200)] {
        let mut c = pbf_sort();
        c.arg("-q")
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = c.spawn().expect("spawn");
        std::thread::sleep(Duration::from_millis(delay_ms));
        // The signal may come after the run finished; that case is checked below.
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status();
        let mut child = child;
        let st = child.wait().expect("wait");
        if st.success() {
            // Finished before the signal: the output must then be complete.
            assert!(
                fileinfo(&out)["data"]["objects_ordered"]
                    .as_bool()
                    .unwrap_or(false)
            );
            std::fs::remove_file(&out).expect("rm");
            continue;
        }
        assert!(
            !out.exists(),
            "SIG{signal} after {delay_ms} ms left an output"
        );
        if signal != "KILL" {
            let left: Vec<_> = std::fs::read_dir(&out_dir)
                .expect("ls")
                .map(|e| e.expect("entry").path())
                .collect();
            assert!(left.is_empty(), "SIG{signal} left temporaries: {left:?}");
        }
    }
    assert_eq!(
        std::fs::read(&input).expect("read input"),
        before,
        "the input changed"
    );
    // A rerun after the kills succeeds.
    let mut c = pbf_sort();
    c.arg("-q").arg(&input).arg("-o").arg(&out).arg("-O");
    succeeds(c);
    assert!(
        fileinfo(&out)["data"]["objects_ordered"]
            .as_bool()
            .unwrap_or(false)
    );
}

#[test]
fn one_verbose_speaks_of_the_files_and_two_of_the_internals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("unsorted-vex.osm.pbf");
    let out = dir.path().join("o.pbf");
    let mut c = pbf_sort();
    c.arg("-v").arg(&input).arg("-o").arg(&out);
    let o = run(c);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("pbf-merge: 3 merges of 17 blobs: 126174 objects in, 126174 out")
            && err.contains(&format!("pbf-copy: {}: ", out.display()))
            && err.contains("pbf-sort: sorted 1 input into"),
        "{err}"
    );
    for internal in [
        "available parallelism",
        "chains",
        "stages ended at",
        "EOPNOTSUPP",
        "streams:",
        "padding",
    ] {
        assert!(!err.contains(internal), "{internal:?} under one -v: {err}");
    }
}

#[test]
fn verbose_prints_a_summary_of_every_stage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("unsorted-josm-negative-ids.osm.pbf");
    let mut c = pbf_sort();
    c.arg("-vv")
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("o.pbf"));
    let o = run(c);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let line = |prefix: &str| {
        err.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} line: {err}"))
    };
    // A time in seconds: "0.008s", "(0.0s)", "0.033 s".
    let timed = |l: &str| {
        l.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == 's' || c == ' '))
            .filter_map(|w| w.trim().strip_suffix('s'))
            .any(|n| n.contains('.') && n.trim().parse::<f64>().is_ok())
    };
    let index = line("pbf-index: ");
    assert!(index.contains("13 blobs") && timed(index), "{index}");
    let overlap = line("pbf-overlap: 13 blobs");
    assert!(
        overlap.contains("11 passed through") && overlap.contains("2 to merge") && timed(overlap),
        "{overlap}"
    );
    let merge = line("pbf-merge: 2 merges of 2 blobs");
    assert!(timed(merge), "{merge}");
    let copy = line("pbf-copy: ");
    assert!(
        copy.contains("copied in the kernel") && timed(copy),
        "{copy}"
    );
    assert!(timed(line("pbf-sort: sorted 1 input")), "{err}");
    // Every stage tells the time it spent on the streams themselves.
    for l in [index, overlap, merge, copy] {
        let streams = l
            .split("; streams: ")
            .nth(1)
            .unwrap_or_else(|| panic!("{l}"));
        let parts: Vec<&str> = streams.split(", ").collect();
        assert!(
            parts.len() == 2
                && parts[0].ends_with(" s parsing")
                && parts[1].ends_with(" s serialising")
                && parts.iter().all(|p| p
                    .split(' ')
                    .next()
                    .is_some_and(|n| n.parse::<f64>().is_ok())),
            "{l}"
        );
    }
}
