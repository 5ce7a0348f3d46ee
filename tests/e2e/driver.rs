//! The driver at the edges a new user meets first (its refusals are in
//! refusals.rs): messages name the real cause, a full standard output
//! stops the run, standard input and pipes sort like the file, `--tmpdir`
//! may be on another filesystem, `--check` judges the output with the
//! toolkit's own stages before it replaces OUTPUT, and `--dry-run` prints
//! a command that runs, fails and names a failure as the run does.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::refusals::refused_up_front;
use crate::util::*;

#[test]
fn version_is_the_workspace_version() {
    let o = sort_ok(&["--version"], "--version");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("pbf-sort {}\n", env!("CARGO_PKG_VERSION"))
    );
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sort_ok(args: &[&str], what: &str) -> Output {
    let mut c = pbf_sort();
    c.args(args);
    let o = run(c);
    assert!(o.status.success(), "{what}: {}", stderr(&o));
    o
}

/// Run the driver with `args` on `input` into `out`; it must exit `code`.
/// Returns what it said on stderr.
fn sort_exits(args: &[&str], input: &Path, out: &Path, code: i32) -> String {
    let mut c = pbf_sort();
    c.args(args).arg(input).arg("-o").arg(out);
    let o = run(c);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    err
}

/// No `.pbf-sort.*` directory (the driver's temporaries) is left in `dir`.
fn assert_no_temporaries(dir: &Path, what: &str) {
    let mut left = entries(dir);
    left.retain(|e| e.starts_with(".pbf-sort"));
    assert!(left.is_empty(), "{what}: temporaries left: {left:?}");
}

/// An executable script at `path`.
fn write_script(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A full standard output (`> /dev/full`) is a write error, exit 1, one
/// line naming standard output, from the driver as from each tool; the
/// driver's line is its own, though a toolkit program prints for it.
#[test]
fn a_full_standard_output_is_an_error() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("unsorted-vex.osm.pbf");
    let out = dir.path().join("o.osm.pbf");
    let driver = |args: &[&OsStr]| {
        let mut c = pbf_sort();
        c.args(args);
        c
    };
    let tool = |name: &str, arg: &str| {
        let mut c = bin(name);
        c.arg(arg);
        c
    };
    let cases = [
        (
            driver(&["--help".as_ref()]),
            "pbf-sort",
            "No space left on device",
        ),
        (
            driver(&["--version".as_ref()]),
            "pbf-sort",
            "No space left on device",
        ),
        (
            driver(&[
                "--dry-run".as_ref(),
                input.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
            ]),
            "pbf-sort",
            "No space left on device",
        ),
        (
            tool("pbf-index", "--help"),
            "pbf-index",
            "No space left on device",
        ),
        (
            tool("pbf-copy", "--version"),
            "pbf-copy",
            "No space left on device",
        ),
    ];
    for (mut c, who, why) in cases {
        let o = c
            .stdout(dev_full())
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{c:?}: {err}");
        assert_eq!(
            err,
            format!("{who}: error: standard output: {why}\n"),
            "{c:?}"
        );
    }
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

/// A reader gone before the version is written (`pbf-sort --version |
/// head -c0`) is no error, whether SIGPIPE is left as it is or ignored (a
/// write then fails with EPIPE): exit 0 and nothing said, as from the tools.
#[test]
fn a_version_nobody_reads_is_no_error() {
    for (how, trap) in [("SIGPIPE", ""), ("EPIPE", "trap '' PIPE; ")] {
        let (reader, writer) = nix::unistd::pipe().expect("pipe");
        drop(reader);
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!("{trap}exec \"$0\" --version"))
            .arg(pbf_sort().get_program())
            .env("PATH", crate::util::commands::tools_path())
            .stdout(Stdio::from(std::fs::File::from(writer)))
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(0), "{how}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{how}");
    }
}

/// `/dev/full` as a standard stream: every write fails with ENOSPC.
fn dev_full() -> Stdio {
    let f = std::fs::OpenOptions::new().write(true).open("/dev/full");
    Stdio::from(f.expect("/dev/full"))
}

#[test]
fn a_full_standard_output_stops_every_stage_with_its_name() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("unsorted-vex.osm.pbf");
    let stage = |name: &str, args: &[&OsStr], stdin: Option<&Path>, stdout: Stdio| {
        let mut c = bin(name);
        c.args(args);
        if let Some(path) = stdin {
            c.stdin(std::fs::File::open(path).expect("stdin"));
        }
        c.stdout(stdout)
            .stderr(Stdio::piped())
            .output()
            .expect("run")
    };
    let index = dir.path().join("index");
    let plan = dir.path().join("plan");
    let merged = dir.path().join("merged");
    let index_bytes = crate::util::pipeline::index_stream(&input);
    let plan_bytes = succeeds_with(bin("pbf-overlap"), &index_bytes);
    let merged_bytes = succeeds_with(bin("pbf-merge"), &plan_bytes);
    for (path, bytes) in [
        (&index, index_bytes),
        (&plan, plan_bytes),
        (&merged, merged_bytes),
    ] {
        std::fs::write(path, bytes).expect("write a stage's stream");
    }
    let cases: [(&str, &[&OsStr], Option<&Path>, &str); 4] = [
        ("pbf-index", &[input.as_os_str()], None, ""),
        ("pbf-overlap", &[], Some(&index), ""),
        ("pbf-merge", &[], Some(&plan), ""),
        (
            "pbf-copy",
            &["-o".as_ref(), "-".as_ref()],
            Some(&merged),
            "write at offset 0: ",
        ),
    ];
    for (name, args, stdin, at) in cases {
        let o = stage(name, args, stdin, dev_full());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert_eq!(
            err,
            format!("{name}: error: standard output: {at}No space left on device\n"),
        );
    }
}

#[test]
fn standard_input_pipes_and_dev_stdin_sort_like_the_file() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let input = data("unsorted-vex.osm.pbf");
    let bytes = std::fs::read(&input).expect("read");
    let want = d.join("file.osm.pbf");
    sort_ok(
        &[
            "-q",
            input.to_str().expect("utf-8"),
            "-o",
            want.to_str().expect("utf-8"),
        ],
        "file",
    );
    let want = std::fs::read(&want).expect("read");
    for (i, arg) in ["-", "/dev/stdin"].iter().enumerate() {
        let out = d.join(format!("stdin-{i}.osm.pbf"));
        let mut c = pbf_sort();
        c.args(["-q", arg, "-o"]).arg(&out);
        let o = run_with_input(c, &bytes);
        assert!(o.status.success(), "{arg}: {}", stderr(&o));
        assert_eq!(
            std::fs::read(&out).expect("read"),
            want,
            "{arg}: other bytes"
        );
        // `< file`: standard input is the file itself, which the driver's
        // checks must see as the run will.
        let out = d.join(format!("redirect-{i}.osm.pbf"));
        let mut c = pbf_sort();
        c.args(["-q", arg, "-o"]).arg(&out);
        c.stdin(std::fs::File::open(&input).expect("open"));
        let o = c.output().expect("pbf-sort");
        assert!(o.status.success(), "< file, {arg}: {}", stderr(&o));
        assert_eq!(std::fs::read(&out).expect("read"), want, "< file, {arg}");
    }
    // Standard input named twice, or with the file it is: read twice
    // without --dedupe, so refused; once with it.
    let out = d.join("twice.osm.pbf");
    let file = input.to_str().expect("utf-8");
    for (args, dedupe) in [
        (["-", "/dev/stdin"], false),
        ([file, "-"], false),
        (["/dev/stdin", "-"], true),
    ] {
        let mut c = pbf_sort();
        c.arg("-q")
            .args(dedupe.then_some("--dedupe"))
            .args(args)
            .arg("-o")
            .arg(&out);
        c.stdin(std::fs::File::open(&input).expect("open"));
        let o = c.output().expect("pbf-sort");
        match dedupe {
            true => {
                assert!(o.status.success(), "{args:?}: {}", stderr(&o));
                assert_eq!(std::fs::read(&out).expect("read"), want, "{args:?}");
            }
            false => {
                assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
                assert!(
                    stderr(&o).contains("given twice"),
                    "{args:?}: {}",
                    stderr(&o)
                );
                assert!(!out.exists(), "{args:?}");
            }
        }
    }
    // A FIFO given as a path, with a regular file beside it.
    let fifo = d.join("fifo.osm.pbf");
    mkfifo(&fifo);
    let writer = {
        let (fifo, bytes) = (fifo.clone(), bytes.clone());
        std::thread::spawn(move || std::fs::write(fifo, bytes).expect("write fifo"))
    };
    let out = d.join("fifo-out.osm.pbf");
    let other = data("sorted-andorra.osm.pbf");
    sort_ok(
        &[
            "-q",
            fifo.to_str().expect("utf-8"),
            other.to_str().expect("utf-8"),
            "-o",
            out.to_str().expect("utf-8"),
        ],
        "fifo",
    );
    writer.join().expect("writer");
    assert_sorted_like_osmium(&out, &[&input, &other], d, "fifo and file");
    assert_no_temporaries(d, "fifo and file");
}

/// A swapped stage that fails is named by its role and its command as
/// given, after its own line; never by a line number of the driver.
#[test]
fn a_failing_swapped_stage_is_named_by_role_and_command() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("unsorted-vex.osm.pbf");
    let out = dir.path().join("o.osm.pbf");
    // A stage's usage error is the run's (exit 2).
    let err = sort_exits(&["--merge-cmd", "pbf-merge --memry 64M"], &input, &out, 2);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("pbf-merge: error: ") && lines[0].contains("'--memry'"),
        "{err}"
    );
    assert_eq!(
        lines[1],
        "pbf-sort: error: merge stage 'pbf-merge --memry 64M' failed (exit 2); no output was written"
    );
    assert!(
        entries(dir.path()).is_empty(),
        "left {:?}",
        entries(dir.path())
    );
    // A program that is not there is found before any stage starts.
    assert_eq!(
        sort_exits(&["--merge-cmd", "pbf-mrge"], &input, &out, 2),
        "pbf-sort: error: merge stage 'pbf-mrge': pbf-mrge: command not found (see 'pbf-sort --help')\n"
    );
}

/// When `--check` finds other objects per kind than the inputs hold, the
/// line names the output and the inputs as the user gave them (standard
/// input as such): no index of the driver's, no saved copy.
#[test]
fn check_names_the_output_and_the_inputs_when_counts_differ() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    // A planner that plans the first input only: its index stream is cut
    // after the first end record.
    let planner = d.join("first-only");
    let text = format!(
        "#!/bin/sh\nsed '/\"type\":\"end\"/q' | {} --no-frame-keys\n",
        bin_quoted("pbf-overlap")
    );
    write_script(&planner, &text);
    let a = data("sorted-andorra.osm.pbf");
    let b = data("sorted-liechtenstein.osm.pbf");
    let out = d.join("o.osm.pbf");
    let mut c = pbf_sort();
    c.arg("--check")
        .arg("--overlap-cmd")
        .arg(&planner)
        .arg(&a)
        .arg("-")
        .arg("-o")
        .arg(&out);
    let o = run_with_input(c, &std::fs::read(&b).expect("the second input"));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let differ = err
        .lines()
        .find_map(|l| l.strip_prefix("pbf-overlap: objects differ: "))
        .unwrap_or_else(|| panic!("no objects line: {err}"));
    // The checked side is the output as the user named it, not the
    // temporary name it is checked under.
    let (checked, inputs) = differ.split_once(" holds ").expect("the checked side");
    assert_eq!(checked, out.display().to_string(), "{err}");
    assert!(
        inputs.contains(&format!("; {}, standard input hold ", a.display())),
        "{err}"
    );
    assert!(
        err.contains("the output, checked as ") && err.contains(", was not written"),
        "{err}"
    );
    assert!(!out.exists());
    let mut left = entries(d);
    left.retain(|e| e != "first-only");
    assert!(left.is_empty(), "left {left:?}");
}

#[test]
fn tmpdir_on_another_filesystem_holds_the_spool() {
    let Some(mnt) = Mount::tmpfs_or_skip("64m", "--tmpdir on another filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let input = data("unsorted-vex.osm.pbf");
    let out = dir.path().join("o.osm.pbf");
    let o = sort_ok(
        &[
            "-v",
            "--check",
            "--tmpdir",
            mnt.path().to_str().expect("utf-8"),
            input.to_str().expect("utf-8"),
            "-o",
            out.to_str().expect("utf-8"),
        ],
        "--tmpdir on tmpfs",
    );
    let err = stderr(&o);
    // pbf-merge's -v summary names the spool it wrote.
    let spool_in = format!(" dropped), in {}/", mnt.path().display());
    assert!(
        err.contains(&spool_in),
        "the spool is not under --tmpdir: {err}"
    );
    assert!(
        entries(mnt.path()).is_empty(),
        "left in --tmpdir: {:?}",
        entries(mnt.path())
    );
    assert_eq!(entries(dir.path()), ["o.osm.pbf"]);
    assert_sorted_like_osmium(&out, &[&input], dir.path(), "--tmpdir on tmpfs");
}

/// A planner that lies: its copy ops keep their keys in output order but
/// copy each other's bytes, in reverse. The copier sees only the keys and
/// cannot tell; the output holds every object, not in order.
fn lying_planner(dir: &Path) -> PathBuf {
    let script = dir.join("lying-overlap");
    let swap = r#"(map(select(.type == "copy")) | reverse) as $bytes
        | reduce .[] as $r ({k: 0, out: []};
            if $r.type == "copy"
            then .out += [$r + ($bytes[.k] | {source, offset, length, blobs})] | .k += 1
            else .out += [$r] end)
        | .out[]"#;
    let text = format!(
        "#!/bin/sh\nset -e\n{} \"$@\" | jq -c --slurp '{swap}'\n",
        bin_quoted("pbf-overlap")
    );
    write_script(&script, &text);
    script
}

#[test]
fn check_judges_the_output_before_it_replaces_out() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let tools = d.join("tools");
    std::fs::create_dir(&tools).expect("mkdir");
    let planner = lying_planner(&tools);
    let input = d.join("permuted.osm.pbf");
    permute(&data("sorted-kualalumpur.osm.pbf"), &input, 7);
    let work = d.join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let out = work.join("o.osm.pbf");
    let planner_s = planner.to_str().expect("utf-8");
    let input_s = input.to_str().expect("utf-8");
    let out_s = out.to_str().expect("utf-8");
    // Without --check the lying planner writes an output osmium rejects.
    sort_ok(
        &["-q", "--overlap-cmd", planner_s, input_s, "-o", out_s],
        "unchecked",
    );
    assert_eq!(
        fileinfo(&out)["data"]["objects_ordered"],
        false,
        "the planner must unsort"
    );
    std::fs::remove_file(&out).expect("rm");
    // With --check: exit 1, no OUT.
    let mut c = pbf_sort();
    c.args([
        "-q",
        "--check",
        "--overlap-cmd",
        planner_s,
        input_s,
        "-o",
        out_s,
    ]);
    let o = run(c);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // pbf-overlap says why, the copier that it did not write OUT.
    assert!(
        err.contains("pbf-overlap: not in order: ") && err.contains("was not written"),
        "{err}"
    );
    assert!(entries(&work).is_empty(), "left {:?}", entries(&work));
    // An existing OUT is left exactly as it was, mtime included.
    std::fs::write(&out, b"the previous output").expect("write");
    let mtime = std::fs::metadata(&out)
        .expect("meta")
        .modified()
        .expect("mtime");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut c = pbf_sort();
    c.args([
        "-q",
        "-O",
        "--check",
        "--overlap-cmd",
        planner_s,
        input_s,
        "-o",
        out_s,
    ]);
    assert_eq!(run(c).status.code(), Some(1));
    assert_eq!(std::fs::read(&out).expect("read"), b"the previous output");
    assert_eq!(
        std::fs::metadata(&out)
            .expect("meta")
            .modified()
            .expect("mtime"),
        mtime
    );
    assert_eq!(entries(&work), ["o.osm.pbf"]);
    // With the real planner --check passes and replaces OUT.
    sort_ok(&["-q", "-O", "--check", input_s, "-o", out_s], "checked");
    assert_eq!(fileinfo(&out)["data"]["objects_ordered"], true);
    assert_eq!(entries(&work), ["o.osm.pbf"]);
}

#[test]
fn dry_run_prints_a_command_that_runs_as_printed() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let input = data("unsorted-vex.osm.pbf");
    let bytes = std::fs::read(&input).expect("read");
    let input_s = input.to_str().expect("utf-8");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    let runs: &[(&[&str], bool)] = &[
        (&[input_s, "-o", "plain.osm.pbf"], false),
        (
            &[
                "--check",
                "--tmpdir",
                "tmp",
                "--keep-plan",
                "plans",
                input_s,
                "-o",
                "checked.osm.pbf",
            ],
            false,
        ),
        (&["-q", "-", "-o", "stdin.osm.pbf"], true),
    ];
    for (args, stdin) in runs {
        let mut c = pbf_sort();
        c.current_dir(d).arg("--dry-run").args(*args);
        let printed = String::from_utf8(succeeds(c)).expect("utf-8");
        let out = d.join(args[args.len() - 1]);
        assert!(!out.exists(), "--dry-run wrote the output");
        assert_no_temporaries(d, "--dry-run");
        // Run from elsewhere: the script goes where it was printed, whose
        // paths it names.
        let mut sh = Command::new("bash");
        sh.current_dir(&tmp)
            .env("PATH", tools_path())
            .args(["-c", &printed]);
        let o = run_with_input(sh, if *stdin { &bytes } else { b"" });
        assert!(o.status.success(), "{printed}\nfailed: {}", stderr(&o));
        assert_sorted_like_osmium(&out, &[&input], d, &printed);
        assert_no_temporaries(d, &printed);
        assert!(entries(&tmp).is_empty(), "{printed}: left in tmp");
    }
    assert!(
        d.join("plans/merged.jsonl").exists(),
        "--keep-plan in the printed command"
    );
}

#[test]
fn dashes_short_option_bundles_and_dedupe_of_one_file() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let input = data("unsorted-vex.osm.pbf");
    std::fs::copy(&input, d.join("-dash.osm.pbf")).expect("copy");
    let mut c = pbf_sort();
    c.current_dir(d)
        .args(["-q", "-o", "o.osm.pbf", "--", "-dash.osm.pbf"]);
    assert!(run(c).status.success(), "-- then an input starting with -");
    let want = std::fs::read(d.join("o.osm.pbf")).expect("read");
    for (args, out) in [
        (
            &["-q", "-oa.osm.pbf", "--", "-dash.osm.pbf"][..],
            "a.osm.pbf",
        ),
        (
            &["-Oqo", "a.osm.pbf", "--", "-dash.osm.pbf"][..],
            "a.osm.pbf",
        ),
        (
            &["-qj1", "--output=b.osm.pbf", "--", "-dash.osm.pbf"][..],
            "b.osm.pbf",
        ),
    ] {
        let mut c = pbf_sort();
        c.current_dir(d).args(args);
        let o = run(c);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert_eq!(std::fs::read(d.join(out)).expect("read"), want, "{args:?}");
    }
    // --dedupe of one file given twice is --dedupe of the file.
    let input_s = input.to_str().expect("utf-8");
    sort_ok(
        &[
            "-q",
            "--dedupe",
            input_s,
            "-o",
            d.join("once.pbf").to_str().expect("utf-8"),
        ],
        "once",
    );
    sort_ok(
        &[
            "-q",
            "--dedupe",
            input_s,
            input_s,
            "-o",
            d.join("twice.pbf").to_str().expect("utf-8"),
        ],
        "twice",
    );
    assert_eq!(
        std::fs::read(d.join("once.pbf")).expect("read"),
        std::fs::read(d.join("twice.pbf")).expect("read")
    );
}

#[test]
fn copier_reflink_clones_or_fails_naming_the_output_directory() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let probe = d.join("probe");
    std::fs::write(&probe, b"x").expect("write");
    let clones = Command::new("cp")
        .args(["--reflink=always"])
        .arg(&probe)
        .arg(d.join("probe.clone"))
        .stderr(Stdio::null())
        .status()
        .expect("cp")
        .success();
    std::fs::remove_file(&probe).expect("rm");
    let _ = std::fs::remove_file(d.join("probe.clone"));
    if clones {
        eprintln!(
            "SKIPPED: {} supports clones (reflink.rs covers it)",
            d.display()
        );
        return;
    }
    let input = data("sorted-andorra.osm.pbf");
    let out = d.join("o.osm.pbf");
    let err = sort_exits(&["--copier", "reflink"], &input, &out, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "the filesystem of {} cannot clone files (reflink",
            d.display()
        )) && err.trim_end().ends_with("; use --copier copy or auto"),
        "{err}"
    );
    assert!(
        !err.contains(".pbf-sort."),
        "names the temporary directory: {err}"
    );
    assert!(entries(d).is_empty(), "left {:?}", entries(d));
    // auto copies, and with -v says so in the user's words, naming the
    // output (no errno); -vv gives the probe's reason, naming the output's
    // directory.
    let probe = format!(
        "the filesystem of {} cannot clone files (reflink",
        d.display()
    );
    for (verbose, why) in [("-v", "this filesystem has no reflinks)"), ("-vv", &probe)] {
        let mut c = pbf_sort();
        c.args([verbose, "-O", "--copier", "auto"])
            .arg(&input)
            .arg("-o")
            .arg(&out);
        let o = run(c);
        let err = stderr(&o);
        assert!(o.status.success(), "{verbose}: {err}");
        let says = format!(
            "pbf-sort: {}: copying the blobs, not cloning them ({why}",
            out.display()
        );
        assert!(err.contains(&says), "{verbose}: {err}");
        assert!(verbose == "-vv" || !err.contains("EOPNOTSUPP"), "{err}");
    }
    let _ = std::io::stderr().flush();
}

#[test]
fn recompress_changes_the_compression_of_copied_blobs_only_in_the_blob() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let files = [
        "sorted-monaco-lz4.osm.pbf",
        "unsorted-vanilla-extract-raw-zlib.osm.pbf",
        "sorted-andorra.osm.pbf",
    ];
    for name in files {
        let input = data(name);
        for (compression, label) in [
            ("none", "raw"),
            ("lz4", "lz4"),
            ("zlib:1", "zlib"),
            ("zstd:3", "zstd"),
        ] {
            let out = d.join(format!("{compression}-{name}"));
            let mut args = vec![
                "-q",
                "--recompress",
                "--add-indexdata",
                "--compression",
                compression,
            ];
            let (i, o) = (input.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
            args.extend([i, "-o", o]);
            sort_ok(&args, name);
            let mut c = bin("pbf-index");
            c.arg("-q").arg(&out);
            let index: Vec<pbf_stream::IndexRecord> = records(&succeeds(c));
            let blobs: Vec<&pbf_stream::BlobRecord> = index
                .iter()
                .filter_map(|r| match r {
                    pbf_stream::IndexRecord::Blob(b) => Some(b),
                    _ => None,
                })
                .collect();
            assert!(!blobs.is_empty());
            for b in &blobs {
                let name_of = pbf_stream::codec_name(b.compression);
                assert_eq!(name_of, label, "{name} --recompress {compression}");
                assert_eq!(
                    b.from,
                    pbf_stream::KeysFrom::Indexdata,
                    "{name}: indexdata kept"
                );
            }
            if label != "zstd" {
                // osmium 1.15 reads raw, zlib and lz4: the objects are osmium's sort.
                assert_sorted_like_osmium(&out, &[&input], d, &format!("{name} {compression}"));
            } else {
                // Decoded by our own scan (every blob inflated), in order.
                let mut c = bin("pbf-index");
                c.args(["-q", "--decode"]).arg(&out);
                let idx = succeeds(c);
                let mut check = bin("pbf-overlap");
                check.arg("--check");
                let o = run_with_input(check, &idx);
                assert!(o.status.success(), "{name} zstd: {}", stderr(&o));
            }
        }
    }
    // -j of pbf-copy only goes with --recompress.
    let mut c = bin("pbf-copy");
    c.args(["-j", "2", "-o"]).arg(d.join("x.pbf"));
    assert_eq!(run(c).status.code(), Some(2));
}

#[test]
fn recompress_leaves_the_merged_blobs_to_our_own_merge_stage() {
    let input = data("unsorted-vex.osm.pbf");
    let input = input.to_str().expect("utf-8");
    let dry_run = |extra: &[&str]| {
        let mut c = pbf_sort();
        c.args(["--dry-run", "--recompress", "--compression", "lz4"])
            .args(extra)
            .args([input, "-o", "out.osm.pbf"]);
        String::from_utf8(succeeds(c)).expect("utf-8")
    };
    let ours = dry_run(&[]);
    assert!(ours.contains("--spools-compressed"), "{ours}");
    // A replaced merge stage may compress otherwise: everything is
    // compressed again.
    let replaced = dry_run(&["--merge-cmd", "pbf-merge --memory 64M"]);
    assert!(!replaced.contains("--spools-compressed"), "{replaced}");
    let other_copier = dry_run(&["--copy-cmd", "cat"]);
    assert!(
        !other_copier.contains("--spools-compressed"),
        "{other_copier}"
    );
}

/// `pbf-sort -o - | head -c 1000`: the output is cut, so no success line
/// and status 141 (SIGPIPE), as `osmium sort -o - | head -c 1000` gives.
#[test]
fn a_reader_that_stops_early_gets_no_success_line() {
    let input = data("unsorted-vanilla-extract-raw-zlib.osm.pbf");
    let script = "set -o pipefail; \"$0\" -v \"$1\" -o - | head -c 1000 > /dev/null";
    let sort = pbf_sort();
    let mut c = Command::new("bash");
    c.env("PATH", tools_path())
        .args(["-c", script])
        .arg(sort.get_program())
        .arg(&input);
    let o = run(c);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(141), "{err}");
    assert!(!err.contains("sorted 1 input"), "{err}");
    assert!(!err.contains("error"), "{err}");
    let mut c = Command::new("bash");
    c.args([
        "-c",
        "set -o pipefail; osmium sort -f pbf -o - \"$0\" | head -c 1000 > /dev/null",
    ])
    .arg(&input);
    assert_eq!(run(c).status.code(), Some(141), "osmium as the reference");
}

/// A copier deaf to SIGTERM that puts the output in place and then lingers:
/// a signal that reaches the driver before the copier ends finds the run
/// done once the copier exits 0, and the run is a success (a failure would
/// leave no output behind, and this output stands).
#[test]
fn a_signal_after_the_output_is_in_place_is_a_success() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let copier = d.join("lingering-copy");
    let text = format!(
        "#!/bin/sh\ntrap '' TERM\n{} \"$@\" || exit $?\nsleep 1\n",
        bin_quoted("pbf-copy")
    );
    write_script(&copier, &text);
    let input = data("sorted-kualalumpur.osm.pbf");
    let out = d.join("o.osm.pbf");
    let mut c = pbf_sort();
    c.args(["-q", "--copier", "copy", "--copy-cmd"])
        .arg(&copier)
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().expect("spawn");
    let started = std::time::Instant::now();
    while !out.exists() {
        assert!(started.elapsed().as_secs() < 60, "no output after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let killed = Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .expect("kill");
    assert!(killed.success());
    let st = child.wait().expect("wait");
    assert!(st.success(), "SIGINT after the output was in place: {st}");
    assert_sorted_like_osmium(&out, &[&input], d, "SIGINT after the commit");
    assert_no_temporaries(d, "SIGINT after the commit");
}

/// A signal while `--check` decodes the finished output stops the check
/// with the run: the check's processes (here a pbf-index that lingers in
/// the decode) are gone when the driver is, none speaks after it, and no
/// output or temporary is left.
#[test]
fn a_signal_during_the_check_stops_the_check() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let tools = d.join("tools");
    std::fs::create_dir(&tools).expect("mkdir");
    let group = d.join("group");
    let text = format!(
        "#!/bin/sh\ncase \" $* \" in *\" --decode \"*)\n\
         awk '{{print $5}}' /proc/$$/stat > {0}.tmp && mv {0}.tmp {0}\n\
         sleep 30; echo late >&2 ;;\nesac\nexec {1} \"$@\"\n",
        group.display(),
        bin_quoted("pbf-index")
    );
    write_script(&tools.join("pbf-index"), &text);
    let input = data("unsorted-vex.osm.pbf");
    let out = d.join("o.osm.pbf");
    let path =
        std::env::join_paths(std::iter::once(tools).chain(std::env::split_paths(&tools_path())));
    let mut c = pbf_sort();
    c.env("PATH", path.expect("PATH"))
        .arg("--check")
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = c.spawn().expect("spawn");
    let pgid = wait_for_pid_file(&group, std::time::Duration::from_secs(60));
    kill_pid(child.id(), "INT");
    let o = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.signal(), Some(2), "{err}");
    wait_for_group_gone(pgid, std::time::Duration::from_millis(500));
    assert!(!err.contains("late"), "{err}");
    assert_eq!(entries(d), ["group", "tools"], "SIGINT during --check");
}

/// The scripts of pbf-sort(1)'s "Replacing a stage", as the page prints
/// them: every `.EX` block that starts with an sh `#!` line, in order.
fn documented_scripts() -> Vec<String> {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("man/pbf-sort.1"))
            .expect("man/pbf-sort.1");
    let unroff = |l: &str| {
        l.replace("\\-", "-")
            .replace("\\(aq", "'")
            .replace("\\(dq", "\"")
            .replace("\\e", "\\")
    };
    page.split(".EX\n")
        .skip(1)
        .filter_map(|block| {
            let block = block.split(".EE\n").next().expect("an .EE");
            block
                .starts_with("#!/bin/sh\n")
                .then(|| block.lines().map(unroff).collect::<Vec<_>>().join("\n") + "\n")
        })
        .collect()
}

/// The replacement contract as pbf-sort(1) shows it: a command that is not
/// a stage fails on the stage's arguments, and the page's two scripts (a
/// wrapper that passes them on, a filter before the planner) run through
/// the driver into the output the default stages make.
#[test]
fn the_documented_replacement_scripts_run_and_sort_like_the_default() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let input = data("unsorted-vex.osm.pbf");
    let default = d.join("default.osm.pbf");
    let mut c = pbf_sort();
    c.arg("-q").arg(&input).arg("-o").arg(&default);
    succeeds(c);
    // A command that does not take the stage's arguments.
    let err = sort_exits(
        &["--merge-cmd", "jq -c ."],
        &input,
        &d.join("jq.osm.pbf"),
        2,
    );
    assert!(err.starts_with("jq: Unknown option --spool"), "{err}");
    assert!(
        err.ends_with(
            "pbf-sort: error: merge stage 'jq -c .' failed (exit 2); no output was written\n"
        ),
        "{err}"
    );
    let scripts = documented_scripts();
    assert_eq!(scripts.len(), 2, "{scripts:?}");
    assert!(
        scripts[0].contains("exec pbf-merge \"$@\""),
        "{}",
        scripts[0]
    );
    assert!(
        scripts[1].contains("| exec pbf-overlap \"$@\""),
        "{}",
        scripts[1]
    );
    write_script(&d.join("my-merge"), &scripts[0]);
    write_script(&d.join("no-lookahead"), &scripts[1]);
    // The page's command line, in the directory of the scripts.
    let mut c = pbf_sort();
    c.current_dir(d)
        .args([
            "-q",
            "--merge-cmd",
            "./my-merge",
            "--overlap-cmd",
            "./no-lookahead",
        ])
        .arg(&input)
        .args(["-o", "out.osm.pbf"]);
    let o = run(c);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.starts_with("my-merge: pbf-merge -q --spool "), "{err}");
    assert_eq!(
        std::fs::read(d.join("out.osm.pbf")).expect("read"),
        std::fs::read(&default).expect("read"),
        "not the default run's output"
    );
    assert_no_temporaries(d, "replaced stages");
}

/// The times of `-vv`'s `pbf-sort: stages ended at: ROLE T s, ...` line, in
/// its order, and the total of its `sorted ... in T s with COPIER` line.
fn stage_times(err: &str) -> (Vec<(String, f64)>, f64) {
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("pbf-sort: stages ended at: "))
        .unwrap_or_else(|| panic!("no stage times in: {err}"));
    let list = line
        .strip_suffix(" (each from the start of the run)")
        .unwrap_or_else(|| panic!("{line}"));
    let seconds = |t: &str| -> f64 {
        let t = t
            .strip_suffix(" s")
            .unwrap_or_else(|| panic!("{t:?} in {line}"));
        t.parse().unwrap_or_else(|e| panic!("{t:?}: {e}"))
    };
    let times = list
        .split(", ")
        .map(|item| {
            let (role, t) = item.split_once(' ').expect("ROLE T s");
            (role.to_owned(), seconds(t))
        })
        .collect();
    let total = err
        .lines()
        .find_map(|l| l.strip_prefix("pbf-sort: sorted 1 input into "))
        .and_then(|l| l.split_once(" in "))
        .and_then(|(_, l)| l.split_once(" with "))
        .map(|(t, _)| seconds(t))
        .unwrap_or_else(|| panic!("no total in: {err}"));
    (times, total)
}

#[test]
fn verbose_says_when_each_stage_ended_in_pipeline_order() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let input = data("unsorted-vex.osm.pbf");
    // --keep-plan's tee between the stages is no stage of the line.
    for extra in [&[][..], &["--keep-plan", "kept"][..]] {
        let mut c = pbf_sort();
        c.current_dir(d)
            .args(["-vv", "-O"])
            .args(extra)
            .arg(&input)
            .args(["-o", "out.osm.pbf"]);
        let o = run(c);
        let err = stderr(&o);
        assert!(o.status.success(), "{err}");
        let (times, total) = stage_times(&err);
        let roles: Vec<&str> = times.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(roles, ["index", "planning", "merge", "copy"], "{err}");
        for pair in times.windows(2) {
            assert!(pair[0].1 <= pair[1].1, "not in pipeline order: {err}");
        }
        assert!(times[0].1 > 0.0, "{err}");
        assert!(times[3].1 <= total, "the last after the total: {err}");
    }
}

#[test]
fn summary_json_is_refused_where_it_cannot_work() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let input = data("unsorted-vex.osm.pbf");
    let input = input.to_str().expect("utf-8");
    let out = d.join("o.osm.pbf");
    let out = out.to_str().expect("utf-8");
    let file = d.join("run.json");
    let file = file.to_str().expect("utf-8");
    let missing = d.join("no-such-dir/run.json");
    let missing = missing.to_str().expect("utf-8");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--summary-json", out, input, "-o", out],
            "the output or an input",
        ),
        (
            &["--summary-json", input, input, "-o", out],
            "the output or an input",
        ),
        (
            &["--summary-json", "-", input, "-o", out],
            "standard output",
        ),
        (
            &[
                "--summary-json",
                d.to_str().expect("utf-8"),
                input,
                "-o",
                out,
            ],
            "is a directory",
        ),
        (
            &["--summary-json", missing, input, "-o", out],
            "no such directory (--summary-json)",
        ),
        (
            &["--dry-run", "--summary-json", file, input, "-o", out],
            "'--dry-run' cannot be used with '--summary-json <FILE>'",
        ),
    ];
    for (args, needle) in cases {
        refused_up_front(d, args, needle);
    }
}

/// A forgotten argument (`--summary-json in.osm.pbf other.osm.pbf`) must
/// not replace the user's PBF file with JSON: an existing `--summary-json`
/// file is replaced only when it is a previous summary.
#[test]
fn summary_json_replaces_only_a_previous_summary() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let pbf = std::fs::read(data("unsorted-vex.osm.pbf")).expect("read");
    std::fs::write(d.join("in.osm.pbf"), &pbf).expect("write");
    std::fs::copy(data("sorted-andorra.osm.pbf"), d.join("other.osm.pbf")).expect("copy");
    let mut c = pbf_sort();
    c.current_dir(d).args([
        "--summary-json",
        "in.osm.pbf",
        "other.osm.pbf",
        "-o",
        "out.osm.pbf",
    ]);
    let o = run(c);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "pbf-sort: error: in.osm.pbf: exists and is not a summary (--summary-json replaces \
         only a previous one)\n"
    );
    assert_eq!(std::fs::read(d.join("in.osm.pbf")).expect("read"), pbf);
    assert!(!d.join("out.osm.pbf").exists());
    // A previous summary is replaced by this run's.
    std::fs::write(d.join("run.json"), "{\"old\": true}\n").expect("write");
    let mut c = pbf_sort();
    c.current_dir(d).args([
        "-q",
        "--summary-json",
        "run.json",
        "in.osm.pbf",
        "-o",
        "out.osm.pbf",
    ]);
    succeeds(c);
    let summary = std::fs::read_to_string(d.join("run.json")).expect("read");
    let summary: serde_json::Value = serde_json::from_str(&summary).expect("json");
    assert!(summary.get("old").is_none(), "{summary}");
}

/// A pipe or FIFO given as an input is saved to a file first; what the
/// index stage says of it names it as typed (a FIFO by its name, a shell's
/// `<(...)` by its /dev/fd path, with the command for a stream), never the
/// copy, and the index stream carries that name to the later stages.
#[test]
fn a_saved_pipe_is_named_as_typed() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let bytes = std::fs::read(data("unsorted-vex.osm.pbf")).expect("read");
    let xml = b"<?xml version='1.0' encoding='UTF-8'?>\n<osm version=\"0.6\">\n</osm>\n";
    let fifo = d.join("in.fifo");
    mkfifo(&fifo);
    let cases: [(&[u8], i32, &str); 3] = [
        (
            xml,
            2,
            "in.fifo: this is OSM XML, not PBF: convert it: osmium cat -F xml in.fifo",
        ),
        (&bytes[..1000], 1, "in.fifo: blob at offset "),
        (&bytes, 0, ""),
    ];
    for (input, code, says) in cases {
        let writer = {
            let (fifo, input) = (fifo.clone(), input.to_vec());
            std::thread::spawn(move || std::fs::write(fifo, input).expect("write fifo"))
        };
        let mut c = pbf_sort();
        c.current_dir(d)
            .args(["-q", "--keep-plan", "plan", "in.fifo", "-o", "out.osm.pbf"]);
        let o = run(c);
        writer.join().expect("writer");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{err}");
        assert!(
            code == 0 || err.starts_with(&format!("pbf-index: error: {says}")),
            "{err}"
        );
        assert!(!err.contains(".pbf-sort."), "names the saved copy: {err}");
        if code == 0 {
            let index = std::fs::read_to_string(d.join("plan/index.jsonl")).expect("index");
            assert!(index.contains(r#""given":"in.fifo""#), "{index}");
        }
        assert_no_temporaries(d, "a saved FIFO");
    }
    // bash's <(...): a /dev/fd path, a stream to read again from its start.
    std::fs::write(d.join("in.osm"), xml).expect("write");
    let o = Command::new("bash")
        .current_dir(d)
        .env("PATH", tools_path())
        .args(["-c", "pbf-sort -q <(cat in.osm) -o out2.osm.pbf"])
        .output()
        .expect("bash");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("pbf-index: error: /dev/fd/")
            && err.contains(": this is OSM XML, not PBF: convert it: ... | osmium cat -F xml -"),
        "{err}"
    );
    assert!(!err.contains(".pbf-sort."), "{err}");
}

/// Temporary directories of ours left in `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".pbf-sort"))
        .collect()
}

/// A failing stage ends the printed `--dry-run` script as it ends the run:
/// the same lines on standard error (the cause, then the driver's line
/// naming its stage; stages downstream of it quiet) and the same status: 2
/// for standard input that is not PBF, 1 for a swapped-in stage that fails.
#[test]
fn the_dry_run_script_names_a_failure_as_the_run_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let junk = d.join("junk");
    std::fs::write(&junk, b"hello, not a PBF file\n").expect("junk");
    let input = data("unsorted-vex.osm.pbf");
    let out = d.join("o.osm.pbf");
    let stdin_file = |path: &Path| std::fs::File::open(path).expect("open");
    let cases: [(&[&OsStr], &Path, i32); 2] = [
        (&[OsStr::new("-")], &junk, 2),
        (
            &[
                OsStr::new("--merge-cmd"),
                OsStr::new("false"),
                input.as_os_str(),
            ],
            &junk,
            1,
        ),
    ];
    for (args, stdin, code) in cases {
        let run = |dry: bool| {
            let mut c = pbf_sort();
            c.current_dir(d).args(dry.then_some("--dry-run")).args(args);
            c.arg("-o").arg(&out).stdin(stdin_file(stdin));
            c.output().expect("pbf-sort")
        };
        let real = run(false);
        let printed = run(true);
        assert!(printed.status.success(), "{args:?}");
        let sh = d.join("d.sh");
        std::fs::write(&sh, &printed.stdout).expect("write script");
        let mut c = std::process::Command::new("bash");
        c.current_dir(d).env("PATH", tools_path()).arg(&sh);
        let scripted = c.stdin(stdin_file(stdin)).output().expect("bash");
        let err = String::from_utf8_lossy(&real.stderr);
        assert_eq!(real.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(scripted.status.code(), Some(code), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&scripted.stderr), err, "{args:?}");
        assert_eq!(err.lines().count(), 1 + usize::from(code == 2), "{err}");
        assert!(
            !out.exists() && leftovers(d).is_empty(),
            "{:?}",
            leftovers(d)
        );
        std::fs::remove_file(&sh).expect("rm");
    }
}

/// The printed `--dry-run` script behaves like the run: the same exit
/// status where the run would refuse or fail, nothing left behind, also
/// when interrupted.
#[test]
fn the_dry_run_script_fails_when_the_run_would() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let input = data("unsorted-vex.osm.pbf");
    let out = d.join("dr.osm.pbf");
    let script = |extra: &[&str]| {
        let mut c = pbf_sort();
        c.current_dir(d)
            .arg("--dry-run")
            .args(extra)
            .arg(&input)
            .arg("-o")
            .arg(&out);
        let text = String::from_utf8(succeeds(c)).expect("utf-8");
        let path = d.join("d.sh");
        std::fs::write(&path, text).expect("write script");
        path
    };
    let bash = |path: &Path| {
        let mut c = std::process::Command::new("bash");
        c.current_dir(d).env("PATH", tools_path()).arg(path);
        c.output().expect("bash")
    };
    for extra in [&[][..], &["--check"][..]] {
        let sh = script(extra);
        let first = bash(&sh);
        assert!(
            first.status.success(),
            "{}",
            String::from_utf8_lossy(&first.stderr)
        );
        assert_sorted_like_osmium(&out, &[&input], d, "the printed script");
        // Again: the output exists now, as for the real run.
        let again = bash(&sh);
        let mut real = pbf_sort();
        real.current_dir(d)
            .args(extra)
            .arg(&input)
            .arg("-o")
            .arg(&out);
        let real = real.output().expect("run");
        assert_eq!(
            again.status.code(),
            real.status.code(),
            "{extra:?} run twice"
        );
        assert_eq!(again.status.code(), Some(2));
        assert!(leftovers(d).is_empty(), "{:?}", leftovers(d));
        // Junk where the output goes: refused, and the junk is kept.
        std::fs::write(&out, b"JUNK").expect("write junk");
        assert_eq!(bash(&sh).status.code(), Some(2));
        assert_eq!(std::fs::read(&out).expect("read"), b"JUNK");
        std::fs::remove_file(&out).expect("rm");
    }
    // Interrupted as Ctrl-C interrupts it (SIGINT to the process group):
    // the directories go with it.
    let big = d.join("big.osm.pbf");
    overlapping_copies("sorted-kualalumpur.osm.pbf", 16, &big);
    let mut c = pbf_sort();
    c.current_dir(d)
        .arg("--dry-run")
        .arg(&big)
        .arg("-o")
        .arg(&out);
    std::fs::write(d.join("big.sh"), succeeds(c)).expect("write script");
    let mut child = std::process::Command::new("bash")
        .current_dir(d)
        .env("PATH", tools_path())
        .arg(d.join("big.sh"))
        .process_group(0)
        .spawn()
        .expect("bash");
    std::thread::sleep(std::time::Duration::from_millis(700));
    let group = format!("-{}", child.id());
    let killed = std::process::Command::new("kill")
        .args(["-INT", "--", &group])
        .status();
    assert!(killed.is_ok_and(|s| s.success()), "kill -INT {group}");
    let status = wait_at_most(&mut child, std::time::Duration::from_secs(60));
    assert!(!status.success(), "the interrupted script succeeded");
    assert!(leftovers(d).is_empty(), "left: {:?}", leftovers(d));
    // As for the run: no output, or (the signal came after the copier
    // published it) the complete one, never a part.
    if out.exists() {
        let info = fileinfo(&out);
        assert_eq!(
            info["data"]["objects_ordered"], true,
            "a part of the output"
        );
        let all = fileinfo(&big)["data"]["count"].clone();
        assert_eq!(info["data"]["count"], all, "a part of the output");
    }
}
