//! `pbf-copy`'s `run()` in-process, on plans built from a real file in a
//! temporary directory: data frames copied as they are, copying ahead on an
//! early plan record (a confirmed guess, a wrong one, an `unsorted` record,
//! a `header` record) writing what waiting for the ops writes,
//! `--recompress` with and without `--add-indexdata`, the options that need
//! `--recompress`, an existing output or an input as the output, and a
//! `--tmpdir` that is no directory. What
//! pbf-copy shares with pbf-reflink (the plan loop, sources, spools) is
//! tested in crates/pbf-copier.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use pbf_format::compress::Codec;
use pbf_format::header::Header;
use pbf_stream::{OutputHeader, PlanHeader, PlanRecord, Unsorted};
use pbf_testkit::{Indexed, arg, copied, data_frames, run_tool, sorted_plan, written};

/// Run pbf-copy with `args`.
fn run(args: &[&str]) -> anyhow::Result<ExitCode> {
    run_tool(pbf_copy::command(), pbf_copy::run, args)
}

/// The real sorted file this file's tests copy, copied into `dir`.
fn input(dir: &Path) -> Indexed {
    copied(dir, "sorted-liechtenstein.osm.pbf")
}

/// The sorted plan of `file`, its plan record marked `early`, and its
/// records: `before` the ops, then the ops but those at `skip`.
fn plan(file: &Indexed, early: bool, before: Vec<PlanRecord>, skip: &[usize]) -> Vec<u8> {
    let (header, ops) = sorted_plan(file, true);
    let header = PlanHeader { early, ..header };
    let ops = ops
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !skip.contains(i))
        .map(|(_, op)| op);
    let records: Vec<PlanRecord> = before.into_iter().chain(ops).collect();
    pbf_testkit::plan_bytes(&header, &records, true)
}

/// Run `plan` (written to `dir`) with `args`; returns the output's bytes.
fn copy(dir: &Path, plan: &[u8], args: &[&str]) -> Vec<u8> {
    let path = dir.join("plan.jsonl");
    std::fs::write(&path, plan).expect("write plan");
    let out = dir.join("out.osm.pbf");
    let mut all = vec!["-q", "-O", arg(&path), "-o", arg(&out)];
    all.extend_from_slice(args);
    run(&all).unwrap_or_else(|e| panic!("{all:?}: {e:#}"));
    std::fs::read(&out).expect("output")
}

#[test]
fn a_sorted_plan_copies_every_data_frame_as_it_is() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    copy(dir.path(), &plan(&file, false, Vec::new(), &[]), &[]);
    let w = written(&dir.path().join("out.osm.pbf"));
    assert!(w.header.claims_sorted());
    assert_eq!(w.frames, data_frames(&file));
}

#[test]
fn copying_ahead_writes_what_waiting_for_the_ops_writes() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let new_header = Header {
        writingprogram: Some("a header record's generator, longer than the first".into()),
        ..file.header.clone()
    };
    let cases: Vec<(&str, Vec<PlanRecord>, Vec<usize>)> = vec![
        ("a confirmed guess", Vec::new(), Vec::new()),
        ("a guess broken by the third op", Vec::new(), vec![2]),
        (
            "an unsorted record",
            vec![PlanRecord::Unsorted(Unsorted {})],
            Vec::new(),
        ),
        (
            "a header record",
            vec![PlanRecord::Header(OutputHeader {
                header: new_header.clone(),
                copy_bytes: None,
            })],
            Vec::new(),
        ),
    ];
    for (what, before, skip) in cases {
        let plan = plan(&file, true, before, &skip);
        let ahead = copy(dir.path(), &plan, &[]);
        let waited = copy(dir.path(), &plan, &["--no-copy-ahead"]);
        assert!(ahead == waited, "{what}: copying ahead changed the output");
    }
    let w = written(&dir.path().join("out.osm.pbf"));
    assert_eq!(w.header.writingprogram, new_header.writingprogram);
    assert_eq!(w.frames, data_frames(&file));
}

#[test]
fn recompress_changes_the_blobs_and_keeps_their_objects() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let plan = plan(&file, false, Vec::new(), &[]);
    let want: Vec<_> = file.blobs.iter().map(|b| b.2).collect();
    for (args, codec, bound) in [
        (&["--recompress", "none"][..], Codec::Raw, false),
        (
            &["--recompress", "lz4", "-j", "2", "--add-indexdata"][..],
            Codec::Lz4,
            true,
        ),
    ] {
        copy(dir.path(), &plan, args);
        let w = written(&dir.path().join("out.osm.pbf"));
        assert!(
            w.codecs.iter().all(|&c| c == codec),
            "{args:?}: {:?}",
            w.codecs
        );
        let scanned: Vec<_> = w.summaries.iter().map(|s| s.1).collect();
        assert_eq!(scanned, want, "{args:?}");
        for (from_indexdata, scanned) in &w.summaries {
            let expect = bound.then_some(*scanned);
            assert_eq!(*from_indexdata, expect, "{args:?}: indexdata");
        }
    }
}

#[test]
fn options_that_need_recompress_are_refused_without_it() {
    for args in [
        vec!["--spools-compressed", "-o", "out.osm.pbf"],
        vec!["-j", "2", "-o", "out.osm.pbf"],
        vec!["--recompress", "bzip2", "-o", "out.osm.pbf"],
        vec!["--recompress", "zlib:10", "-o", "out.osm.pbf"],
    ] {
        let parsed = pbf_copy::command()
            .try_get_matches_from(std::iter::once("pbf-copy").chain(args.iter().copied()));
        assert!(parsed.is_err(), "{args:?} parsed");
    }
}

#[test]
fn an_existing_output_needs_overwrite_and_an_input_is_never_the_output() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let plan_file = dir.path().join("plan.jsonl");
    std::fs::write(&plan_file, plan(&file, false, Vec::new(), &[])).expect("write plan");
    let out = dir.path().join("out.osm.pbf");
    std::fs::write(&out, b"an older output").expect("write");
    let err = run(&["-q", arg(&plan_file), "-o", arg(&out)]).expect_err("exists");
    assert!(err.downcast_ref::<pbf_cli::Usage>().is_some(), "{err:#}");
    assert!(
        pbf_cli::one_line(&err).contains("use -O/--overwrite"),
        "{err:#}"
    );
    assert_eq!(std::fs::read(&out).expect("out"), b"an older output");
    run(&["-q", "-O", arg(&plan_file), "-o", arg(&out)]).expect("-O replaces it");
    assert_eq!(written(&out).frames, data_frames(&file));
    let before = std::fs::read(&file.source.file.path).expect("input");
    let err = run(&[
        "-q",
        "-O",
        arg(&plan_file),
        "-o",
        arg(&file.source.file.path),
    ])
    .expect_err("the input");
    assert!(pbf_cli::one_line(&err).contains("in.osm.pbf"), "{err:#}");
    assert_eq!(
        std::fs::read(&file.source.file.path).expect("input"),
        before
    );
}

#[test]
fn a_temp_dir_that_is_no_directory_is_a_usage_error_naming_the_option() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let plan_file = dir.path().join("plan.jsonl");
    std::fs::write(&plan_file, plan(&file, false, Vec::new(), &[])).expect("write plan");
    let out = dir.path().join("out.osm.pbf");
    let refused = |temp: &Path| {
        let args = [
            "-q",
            "--tmpdir",
            arg(temp),
            arg(&plan_file),
            "-o",
            arg(&out),
        ];
        let err = run(&args).expect_err("refused");
        assert!(err.downcast_ref::<pbf_cli::Usage>().is_some(), "{err:#}");
        assert!(!out.exists());
        pbf_cli::one_line(&err)
    };
    let missing = dir.path().join("missing");
    for (temp, why) in [
        (&missing, "no such directory (--tmpdir)"),
        (&plan_file, "not a directory (--tmpdir)"),
    ] {
        let line = refused(temp);
        assert!(line.contains(arg(temp)) && line.contains(why), "{line}");
    }
    // The temporary output is renamed into place: never from another filesystem.
    let Some(elsewhere) = another_filesystem(dir.path()) else {
        eprintln!("no writable directory on another filesystem: not tried");
        return;
    };
    let line = refused(&elsewhere);
    let want = format!(
        "{}: not on the filesystem of {}",
        arg(&elsewhere),
        arg(dir.path())
    );
    assert!(
        line.starts_with(&want) && line.contains("(--tmpdir"),
        "{line}"
    );
}

/// A writable directory on another filesystem than `dir`'s, if this machine has one.
fn another_filesystem(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let device = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    [
        Path::new("/dev/shm"),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    ]
    .into_iter()
    .find(|&p| {
        device(p).is_some_and(|d| Some(d) != device(dir))
            && pbf_cli::paths::check_dir("x", p).is_ok()
    })
    .map(Path::to_path_buf)
}
