//! `pbf-index`'s `run()` in-process, on the paths found before any work
//! (arguments that cannot be indexed, `--validate`) and on option
//! combinations the parser refuses; the index itself is tested end to end
//! (tests/e2e/index.rs), where its records on standard output are read.

use std::process::ExitCode;

use pbf_testkit::{arg, data, run_tool};

/// Run pbf-index with `args`.
fn run(args: &[&str]) -> anyhow::Result<ExitCode> {
    run_tool(pbf_index::command(), pbf_index::run, args)
}

/// The error of a run that must fail as a usage error (exit status 2: one
/// found before any work), as one line.
fn usage_error(args: &[&str]) -> String {
    let err = run(args).expect_err("a usage error");
    assert!(
        err.downcast_ref::<pbf_cli::Usage>().is_some() || pbf_cli::is_not_pbf(&err),
        "{args:?}: not a usage error: {err:#}"
    );
    pbf_cli::one_line(&err)
}

/// Standard input is indexed only when it is a regular file; the test's own
/// standard input (a terminal, a pipe or /dev/null under a test runner) is
/// refused with the way out. The e2e tests pipe into it and redirect a file.
#[test]
fn standard_input_not_a_file_is_refused_with_the_way_out() {
    let stdin = std::fs::metadata("/dev/stdin");
    if stdin.as_ref().is_ok_and(|m| m.is_file()) {
        eprintln!("skipped: this test's standard input is a regular file");
        return;
    }
    let line = usage_error(&["-"]);
    assert!(
        line.contains("standard input is not a regular file"),
        "{line}"
    );
    assert!(line.contains("pbf-sort - does that for you"), "{line}");
}

#[test]
fn arguments_that_are_no_regular_file_are_refused_before_any_work() {
    let dir = tempfile::tempdir().expect("dir");
    let missing = dir.path().join("missing.osm.pbf");
    let line = usage_error(&[arg(&missing)]);
    assert!(line.starts_with(arg(&missing)), "{line}");
    let line = usage_error(&[arg(dir.path())]);
    assert!(line.ends_with("is a directory"), "{line}");
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let line = usage_error(&[arg(&fifo)]);
    assert!(
        line.contains("not a regular file (a pipe or device)"),
        "{line}"
    );
}

#[test]
fn a_bad_argument_after_good_ones_stops_the_run_before_any_work() {
    let dir = tempfile::tempdir().expect("dir");
    let good = data("sorted-andorra.osm.pbf");
    let line = usage_error(&[arg(&good), arg(dir.path())]);
    assert!(line.contains("is a directory"), "{line}");
}

#[test]
fn validate_accepts_pbf_files_even_when_damaged_inside() {
    for name in [
        "sorted-andorra.osm.pbf",
        "history-niue.osh.pbf",
        "bad-truncated.osm.pbf",
        "bad-changeset-range.osm.pbf",
    ] {
        let file = data(name);
        let code = run(&["--validate", arg(&file)]).expect(name);
        assert_eq!(code, ExitCode::SUCCESS, "{name}");
    }
}

#[test]
fn validate_names_what_a_file_that_is_not_pbf_is() {
    let dir = tempfile::tempdir().expect("dir");
    let xml = dir.path().join("region.osm");
    std::fs::write(
        &xml,
        "<?xml version='1.0' encoding='UTF-8'?>\n<osm version=\"0.6\"></osm>\n",
    )
    .expect("write");
    let line = usage_error(&[
        "--validate",
        arg(&data("sorted-andorra.osm.pbf")),
        arg(&xml),
    ]);
    assert!(line.contains("OSM XML"), "{line}");
    assert!(line.contains("region.osm"), "{line}");
    let bz2 = dir.path().join("region.osm.bz2");
    std::fs::write(&bz2, b"BZh91AY&SY\x00\x00\x00\x00\x00\x00").expect("write");
    let line = usage_error(&["--validate", arg(&bz2)]);
    assert!(line.contains("bzip2-compressed"), "{line}");
}

#[test]
fn a_file_without_its_osmheader_fails_naming_it() {
    let file = data("bad-no-header.osm.pbf");
    let err = run(&["-q", arg(&file)]).expect_err("no OSMHeader");
    let line = pbf_cli::one_line(&err);
    assert!(line.contains("bad-no-header.osm.pbf"), "{line}");
    assert!(
        err.downcast_ref::<pbf_cli::Usage>().is_none(),
        "a damaged file is a failure of the work, not a usage error: {line}"
    );
}

#[test]
fn option_combinations_the_parser_refuses() {
    let file = data("sorted-andorra.osm.pbf");
    let f = arg(&file);
    for args in [
        vec!["--decode", "--trust-indexdata", "pbfhogg", f],
        vec!["--trust-indexdata", "osmium", f],
        vec!["--io", "mmap", f],
        vec!["-j", "0", f],
        vec!["-q", "-v", f],
        vec![],
    ] {
        let parsed = pbf_index::command()
            .try_get_matches_from(std::iter::once("pbf-index").chain(args.iter().copied()));
        assert!(parsed.is_err(), "{args:?} parsed");
    }
}

/// The usage line shows FILE as required, as a run without one finds it.
#[test]
fn the_usage_line_says_a_file_is_required() {
    let help = pbf_index::command().render_usage().to_string();
    assert_eq!(help, "Usage: pbf-index [OPTIONS] <FILE>...");
    let missing = pbf_index::command()
        .try_get_matches_from(["pbf-index"])
        .expect_err("no FILE");
    assert_eq!(
        missing.kind(),
        clap::error::ErrorKind::MissingRequiredArgument
    );
}
