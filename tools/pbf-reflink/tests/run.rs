//! `pbf-reflink`'s `run()` in-process, on plans built from a real file in a
//! temporary directory: the layout it writes wherever it runs (clones where
//! the filesystem has them, the copy of pbf-copy elsewhere), what
//! `--require-reflink` refuses, frames re-headed with indexdata, and the
//! plan records that change the output (`header`) or must not (`unsorted`).
//! Clones themselves need XFS or btrfs, mounted in tests/e2e/reflink.rs.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use pbf_format::header::Header;
use pbf_stream::{OutputHeader, PlanRecord, Unsorted};
use pbf_testkit::{
    Indexed, arg, copied, data_frames, entries, run_tool, sorted_plan, write_plan, written,
};

/// Run pbf-reflink with `args`.
fn run(args: &[&str]) -> anyhow::Result<ExitCode> {
    run_tool(pbf_reflink::command(), pbf_reflink::run, args)
}

/// The real sorted file this file's tests copy, copied into `dir`.
fn input(dir: &Path) -> Indexed {
    copied(dir, "sorted-liechtenstein.osm.pbf")
}

/// The sorted plan of `file` with `records` put after the plan record,
/// written beside it.
fn plan_with(dir: &Path, file: &Indexed, frames: bool, records: Vec<PlanRecord>) -> PathBuf {
    let (header, ops) = sorted_plan(file, frames);
    write_plan(dir, &header, &[records, ops].concat(), true)
}

/// Whether `dir`'s filesystem clones (`cp --reflink=always` succeeds).
fn clones_in(dir: &Path) -> bool {
    let (a, b) = (dir.join("probe.a"), dir.join("probe.b"));
    std::fs::write(&a, [0u8; 4096]).expect("probe");
    let cloned = Command::new("cp")
        .arg("--reflink=always")
        .args([&a, &b])
        .output()
        .is_ok_and(|o| o.status.success());
    let _ = (std::fs::remove_file(&a), std::fs::remove_file(&b));
    cloned
}

#[test]
fn a_sorted_plan_keeps_every_data_frame_as_it_is() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let plan = plan_with(dir.path(), &file, false, Vec::new());
    let out = dir.path().join("out.osm.pbf");
    run(&["-q", arg(&plan), "-o", arg(&out)]).expect("run");
    let w = written(&out);
    assert!(w.header.claims_sorted());
    // Cloned with padding frames between the ranges, or copied like
    // pbf-copy: either way the same data frames, byte for byte.
    assert_eq!(w.frames, data_frames(&file));
}

#[test]
fn require_reflink_refuses_standard_output_before_reading_the_plan() {
    let err = run(&["--require-reflink", "/nonexistent/plan.jsonl", "-o", "-"])
        .expect_err("stdout cannot clone");
    let line = pbf_cli::one_line(&err);
    assert!(
        line.contains("standard output cannot receive clones"),
        "{line}"
    );
}

#[test]
fn require_reflink_writes_nothing_where_the_output_cannot_clone() {
    let dir = tempfile::tempdir().expect("dir");
    if clones_in(dir.path()) {
        eprintln!("SKIPPED: the temporary directory's filesystem clones");
        return;
    }
    let file = input(dir.path());
    let plan = plan_with(dir.path(), &file, false, Vec::new());
    let out = dir.path().join("out.osm.pbf");
    let err =
        run(&["-q", "--require-reflink", arg(&plan), "-o", arg(&out)]).expect_err("no clones here");
    let line = pbf_cli::one_line(&err);
    assert!(line.ends_with("(--require-reflink)"), "{line}");
    assert!(line.contains(arg(&out)), "names the output: {line}");
    assert!(!out.exists());
    assert_eq!(entries(dir.path()), ["in.osm.pbf", "plan.jsonl"]);
}

#[test]
fn add_indexdata_binds_each_frame_and_needs_the_frame_keys() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let out = dir.path().join("out.osm.pbf");
    let plan = plan_with(dir.path(), &file, false, Vec::new());
    let err =
        run(&["-q", "--add-indexdata", arg(&plan), "-o", arg(&out)]).expect_err("no frame keys");
    let line = pbf_cli::one_line(&err);
    assert!(
        line.contains("--add-indexdata needs the per-frame keys"),
        "{line}"
    );
    assert!(!out.exists());
    let plan = plan_with(dir.path(), &file, true, Vec::new());
    run(&["-q", "--add-indexdata", arg(&plan), "-o", arg(&out)]).expect("run");
    let w = written(&out);
    assert_eq!(w.summaries.len(), file.blobs.len());
    for (i, (from_indexdata, scanned)) in w.summaries.iter().enumerate() {
        assert_eq!(from_indexdata.as_ref(), Some(scanned), "frame {i}");
    }
}

#[test]
fn a_header_record_replaces_the_output_header() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let header = Header {
        writingprogram: Some("a header record's generator, longer than the first".into()),
        ..file.header.clone()
    };
    let plan = plan_with(
        dir.path(),
        &file,
        false,
        vec![PlanRecord::Header(OutputHeader {
            header: header.clone(),
            copy_bytes: None,
        })],
    );
    let out = dir.path().join("out.osm.pbf");
    run(&["-q", arg(&plan), "-o", arg(&out)]).expect("run");
    let w = written(&out);
    assert_eq!(w.header.writingprogram, header.writingprogram);
    assert_eq!(w.frames, data_frames(&file));
}

#[test]
fn an_unsorted_record_changes_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let plan = plan_with(
        dir.path(),
        &file,
        false,
        vec![PlanRecord::Unsorted(Unsorted {})],
    );
    let out = dir.path().join("out.osm.pbf");
    run(&["-q", arg(&plan), "-o", arg(&out)]).expect("run");
    assert_eq!(written(&out).frames, data_frames(&file));
}

#[test]
fn the_temporary_file_goes_to_temp_dir_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let plan = plan_with(dir.path(), &file, false, Vec::new());
    let temp = dir.path().join("temp");
    std::fs::create_dir(&temp).expect("temp dir");
    let out = dir.path().join("out.osm.pbf");
    run(&["-q", "--tmpdir", arg(&temp), arg(&plan), "-o", arg(&out)]).expect("run");
    assert!(entries(&temp).is_empty(), "{:?}", entries(&temp));
    assert_eq!(written(&out).frames, data_frames(&file));
}
