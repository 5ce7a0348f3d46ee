//! What a new user meets in the first hour: files that are not PBF are named
//! for what they are, with the command that makes a PBF of them, and an
//! output name that promises another format is refused, both before any
//! work (exit 2, one line, no output).

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::Path;

use crate::util::*;

/// Write `src` as `format` (an osmium output format) to `out`.
fn osmium_cat(src: &Path, format: &str, out: &Path) {
    let mut c = osmium();
    c.arg("cat")
        .arg(src)
        .args(["-f", format, "-O", "-o"])
        .arg(out);
    succeeds(c);
}

/// Run `c`; it must exit 2 with one line on stderr holding every `want`.
fn refused(mut c: std::process::Command, want: &[&str]) {
    let o = c.output().expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for w in want {
        assert!(err.contains(w), "stderr lacks {w:?}: {err}");
    }
}

#[test]
fn files_that_are_not_pbf_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = data("unsorted-vex.osm.pbf");
    let xml = dir.path().join("in.osm");
    osmium_cat(&src, "osm", &xml);
    let opl = dir.path().join("in.opl");
    osmium_cat(&src, "opl", &opl);
    let bz2 = dir.path().join("in.osm.bz2");
    osmium_cat(&src, "osm.bz2", &bz2);
    let gz = dir.path().join("in.osm.gz");
    osmium_cat(&src, "osm.gz", &gz);
    let o5m = dir.path().join("in.o5m");
    std::fs::write(&o5m, b"\xff\xe0\x04o5m2\xff\xdc").expect("write o5m start");
    let cases = [
        (&xml, "OSM XML", "osmium cat"),
        (&opl, "OPL text", "osmium cat"),
        (&bz2, "bzip2-compressed", "bzip2 -dc"),
        (&gz, "gzip-compressed", "gzip -dc"),
        (&o5m, "o5m", "osmium cat"),
    ];
    for (input, kind, fix) in cases {
        let out = dir.path().join("out.osm.pbf");
        let mut c = pbf_sort();
        c.arg(input).arg("-o").arg(&out);
        refused(c, &[&name(input), kind, fix, "not PBF"]);
        assert!(!out.exists(), "{}: output written", name(input));
        let mut c = bin("pbf-index");
        c.arg(input);
        refused(c, &[&name(input), kind]);
    }
}

#[test]
fn output_names_of_other_formats_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("unsorted-vex.osm.pbf");
    for out in ["x.osm", "x.osm.bz2", "x.opl", "x.o5m", "x.osh", "x.pbf.gz"] {
        let out = dir.path().join(out);
        let mut c = pbf_sort();
        c.arg(&input).arg("-o").arg(&out);
        refused(c, &[&name(&out), ".osm.pbf"]);
        assert!(!out.exists());
    }
    // A name without a known suffix is allowed.
    let plain = dir.path().join("sorted");
    let mut c = pbf_sort();
    c.arg("-q").arg(&input).arg("-o").arg(&plain);
    succeeds(c);
    assert!(plain.is_file());
}

/// `osmconvert --out-statistics` of a file: nodes, ways, relations, or
/// `None` when osmconvert cannot read it. Its exit status is not used: it
/// warns (and exits 92) about negative ids in osmium's order, which is not
/// its own, and still reads every object.
fn osmconvert_counts(path: &Path) -> Option<[u64; 3]> {
    let o = std::process::Command::new("osmconvert")
        .arg(path)
        .arg("--out-statistics")
        .output()
        .expect("osmconvert runs (Debian: osmctools)");
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    if text.contains("osmconvert Error") || !text.contains("nodes:") {
        return None;
    }
    let count = |what: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(what))
            .map_or(0, |n| n.trim().parse().expect("a count"))
    };
    Some([count("nodes:"), count("ways:"), count("relations:")])
}

/// osmium's object counts of a file: nodes, ways, relations.
fn osmium_counts(path: &Path) -> [u64; 3] {
    let info = fileinfo(path);
    let n = |k: &str| info["data"]["count"][k].as_u64().expect("count");
    [n("nodes"), n("ways"), n("relations")]
}

/// Default outputs carry no indexdata, so osmconvert (0.8 and 0.9 read only
/// BlobHeaders of 11 to 17 bytes) reads them wherever it reads the input's
/// kind of data, merged blobs included.
#[test]
fn osmconvert_reads_default_outputs() {
    // osmconvert has no --version (it exits 1): it must merely run.
    let runs = std::process::Command::new("osmconvert")
        .arg("-h")
        .output()
        .is_ok();
    assert!(
        runs,
        "osmconvert (Debian package osmctools) is required; install it"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cases: Vec<Vec<std::path::PathBuf>> =
        good_files().into_iter().map(|f| vec![f]).collect();
    cases.push(vec![
        data("unsorted-vex.osm.pbf"),
        data("unsorted-josm-negative-ids.osm.pbf"),
    ]);
    let mut read = 0;
    for inputs in cases {
        let out = dir.path().join("out.osm.pbf");
        let mut c = pbf_sort();
        c.arg("-q").arg("-O").args(&inputs).arg("-o").arg(&out);
        succeeds(c);
        let what = inputs
            .iter()
            .map(|p| name(p))
            .collect::<Vec<_>>()
            .join(" + ");
        // osmconvert reads dense nodes only: a merged output has them, a
        // copied one keeps the input's blocks. Where it reads the inputs,
        // it must count the same in the output (it counts the objects of a
        // history file, not their versions); else osmium's counts.
        let of_inputs: Option<Vec<[u64; 3]>> =
            inputs.iter().map(|p| osmconvert_counts(p)).collect();
        let want = match of_inputs {
            Some(counts) => counts
                .iter()
                .fold([0; 3], |a, c| [a[0] + c[0], a[1] + c[1], a[2] + c[2]]),
            None if inputs.len() > 1 => osmium_counts(&out),
            None => continue,
        };
        let got = osmconvert_counts(&out);
        assert_eq!(got, Some(want), "{what}: osmconvert's counts");
        read += 1;
    }
    assert!(read >= 10, "only {read} outputs were tried");
}

/// Run `c`; it must exit 2 with one line starting `TOOL: error:`.
fn usage_error(mut c: std::process::Command, tool: &str, want: &str) {
    let o = c.output().expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    let what = format!("{tool} {:?}", c.get_args().collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    assert!(
        err.starts_with(&format!("{tool}: error: ")),
        "{what}: {err}"
    );
    assert!(err.contains(want), "{what}: lacks {want:?}: {err}");
}

/// One rule in every tool: a problem found before any work exits 2 with one
/// line starting with the tool's name and `error:`.
#[test]
fn problems_before_any_work_exit_2_in_every_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exists = dir.path().join("exists.osm.pbf");
    std::fs::write(&exists, b"keep").expect("write");
    let missing = dir.path().join("missing.jsonl");
    let tools = [
        "pbf-index",
        "pbf-overlap",
        "pbf-merge",
        "pbf-copy",
        "pbf-reflink",
    ];
    for tool in tools {
        let mut c = bin(tool);
        c.arg("--bogus");
        usage_error(c, tool, "'--bogus'");
        let mut c = bin(tool);
        c.arg(&missing);
        if tool == "pbf-copy" || tool == "pbf-reflink" {
            c.arg("-o").arg(dir.path().join("out.osm.pbf"));
        }
        usage_error(c, tool, "missing.jsonl");
    }
    for tool in ["pbf-index", "pbf-merge", "pbf-copy"] {
        let mut c = bin(tool);
        c.args(["-j", "0"]).arg(data("sorted-andorra.osm.pbf"));
        usage_error(c, tool, "'0'");
    }
    let mut c = bin("pbf-merge");
    c.args(["--validate", "--memory", "0"]);
    usage_error(c, "pbf-merge", "64k");
    for tool in ["pbf-copy", "pbf-reflink"] {
        let mut c = bin(tool);
        c.arg("-o").arg(&exists);
        usage_error(c, tool, "exists (use -O");
    }
    assert_eq!(std::fs::read(&exists).expect("read"), b"keep");
}

#[test]
fn the_driver_refuses_before_any_work_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("unsorted-vex.osm.pbf");
    let exists = dir.path().join("exists.osm.pbf");
    std::fs::write(&exists, b"keep").expect("write");
    let out = dir.path().join("out.osm.pbf");
    let notdir = dir.path().join("file");
    std::fs::write(&notdir, b"").expect("write");
    let keep_in_file = notdir.join("plans");
    let nodir = format!("{}/", dir.path().join("nodir").display());
    let out_s = out.to_str().expect("utf-8");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["/nonexistent.osm.pbf", "-o", out_s], "no such file"),
        (vec!["--memory", "0", "IN", "-o", out_s], "64k"),
        (vec!["--memory", "1X", "IN", "-o", out_s], "1X"),
        (vec!["-j", "0", "IN", "-o", out_s], "'0'"),
        (vec!["IN", "-o", &nodir], "there is none"),
        (
            vec!["--merge-cmd", "pbf-mrge", "IN", "-o", out_s],
            "merge stage 'pbf-mrge'",
        ),
        (
            vec![
                "--keep-plan",
                keep_in_file.to_str().expect("utf-8"),
                "IN",
                "-o",
                out_s,
            ],
            "--keep-plan",
        ),
    ];
    for (args, want) in cases {
        let mut c = pbf_sort();
        for a in args {
            if a == "IN" {
                c.arg(&input);
            } else {
                c.arg(a);
            }
        }
        usage_error(c, "pbf-sort", want);
        assert!(!out.exists());
    }
    let mut c = pbf_sort();
    c.arg(&input).arg("-o").arg(&exists);
    usage_error(c, "pbf-sort", "exists (use -O");
    assert_eq!(std::fs::read(&exists).expect("read"), b"keep");
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

/// Run `command` with bash in `dir`, our tools first on PATH; it must
/// succeed.
fn bash_succeeds(command: &str, dir: &Path) {
    let o = std::process::Command::new("bash")
        .args(["-o", "pipefail", "-c", command])
        .current_dir(dir)
        .env("PATH", tools_path())
        .output()
        .expect("bash");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{command}: {err}");
}

/// The command a not-PBF line gives after `after`, up to `;` or the end.
fn hinted<'a>(line: &'a str, after: &str) -> &'a str {
    let from = line.find(after).map(|i| i + after.len());
    let from = from.unwrap_or_else(|| panic!("no {after:?} in {line}"));
    let rest = line[from..].trim_end();
    rest.split(';').next().expect("a command")
}

/// An empty file, and XML or compressed data on standard input, are no
/// PBF either: exit 2, and the hint for standard input is a command for a
/// stream, which works when the stream is put where it says `...`.
#[test]
fn empty_files_and_streams_that_are_not_pbf_exit_2_with_a_working_hint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let src = data("unsorted-type-regression.osm.pbf");
    let out = d.join("out.osm.pbf");
    // An empty file, named as given, through pbf-index and the driver
    // (which refuses it before any stage starts).
    std::fs::write(d.join("empty.osm.pbf"), b"").expect("write");
    let mut c = bin("pbf-index");
    c.current_dir(d).arg("empty.osm.pbf");
    refused(
        c,
        &["pbf-index: error: empty.osm.pbf: empty (0 bytes), not a PBF file"],
    );
    let mut c = pbf_sort();
    c.current_dir(d)
        .args(["empty.osm.pbf", "-o", "out.osm.pbf"]);
    refused(
        c,
        &["pbf-sort: error: empty.osm.pbf: empty (0 bytes), not a PBF file"],
    );
    // XML, and bzip2-compressed PBF, on standard input.
    let xml = d.join("in.osm");
    osmium_cat(&src, "osm", &xml);
    let bz2 = d.join("in.osm.pbf.bz2");
    bash_succeeds(&format!("bzip2 -c {} > in.osm.pbf.bz2", src.display()), d);
    let cases = [
        (
            &xml,
            "OSM XML",
            "convert it: ",
            "... | osmium cat -F xml - -f pbf -o - | ",
        ),
        (
            &bz2,
            "bzip2-compressed",
            "decompress it: ",
            "... | bzip2 -dc | pbf-sort -",
        ),
    ];
    for (input, kind, after, fix) in cases {
        let bytes = std::fs::read(input).expect("read");
        // pbf-index - reads standard input when it is a regular file.
        let mut c = bin("pbf-index");
        c.arg("-").stdin(std::fs::File::open(input).expect("open"));
        let index = c.output().expect("pbf-index");
        let line = String::from_utf8_lossy(&index.stderr).into_owned();
        assert_eq!(index.status.code(), Some(2), "pbf-index -: {line}");
        assert_eq!(line.lines().count(), 1, "{line}");
        let want = format!("pbf-index: error: /dev/stdin: this is {kind}");
        assert!(line.starts_with(&want) && line.contains(fix), "{line}");
        assert!(!line.contains("osmium cat /dev/stdin"), "{line}");
        let mut c = pbf_sort();
        c.args(["-q", "-", "-o"]).arg(&out);
        let sort = run_with_input(c, &bytes);
        let err = String::from_utf8_lossy(&sort.stderr).into_owned();
        assert_eq!(sort.status.code(), Some(2), "pbf-sort -: {err}");
        let driver =
            "pbf-sort: error: index stage 'pbf-index' failed (exit 2); no output was written";
        assert_eq!(err, format!("{line}{driver}\n"));
        assert!(!out.exists() && leftovers(d).is_empty());
        // The hint, with the stream where it says "...".
        let command = hinted(&line, after)
            .replacen("...", &format!("cat {}", input.display()), 1)
            .replace("OUT.osm.pbf", "hinted.osm.pbf");
        bash_succeeds(&command, d);
        assert_sorted_like_osmium(&d.join("hinted.osm.pbf"), &[&src], d, &command);
        std::fs::remove_file(d.join("hinted.osm.pbf")).expect("rm");
    }
    // Standard input that is empty.
    let mut c = pbf_sort();
    c.args(["-q", "-", "-o"]).arg(&out);
    let o = run_with_input(c, b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("pbf-index: error: /dev/stdin: empty (0 bytes), not a PBF"),
        "{err}"
    );
}

/// Files of no known kind whose first bytes cannot start a PBF frame
/// (text, JSON, CSV, a script, random bytes) are not PBF either: exit 2,
/// named as typed, in `--validate`, the index stage and the driver, also on
/// standard input. A PBF file cut short after its first frame stays a
/// damaged PBF file (exit 1 from the index stage).
#[test]
fn text_json_and_random_bytes_are_not_pbf() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // Bytes of a fixed xorshift sequence: the first two are not zero.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    assert!(random[0] != 0 && random[1] != 0);
    let files: [(&str, &[u8]); 6] = [
        ("t.txt", b"hello world\n"),
        ("data.csv", b"id,lat,lon\n1,1.5,2.5\n"),
        ("data.json", b"{\"type\": \"FeatureCollection\"}\n"),
        ("README.md", b"# Title\n\nSome words.\n"),
        ("run.sh", b"#!/bin/sh\necho hi\n"),
        ("random.bin", &random),
    ];
    let out = d.join("w.osm.pbf");
    for (file, bytes) in files {
        std::fs::write(d.join(file), bytes).expect("write");
        let want = format!("{file}: unknown data, not a PBF file");
        let mut c = bin("pbf-index");
        c.current_dir(d).args(["--validate", file]);
        refused(c, &[&format!("pbf-index: error: {want}")]);
        let mut c = bin("pbf-index");
        c.current_dir(d).args(["-q", file]);
        refused(c, &[&format!("pbf-index: error: {want}")]);
        let mut c = pbf_sort();
        c.current_dir(d).args([file, "-o", "w.osm.pbf"]);
        refused(c, &[&format!("pbf-sort: error: {want}")]);
        assert!(!out.exists() && leftovers(d).is_empty(), "{file}");
        // Standard input, a pipe the driver saves for the index stage.
        let mut c = pbf_sort();
        c.current_dir(d).args(["-q", "-", "-o", "w.osm.pbf"]);
        let o = run_with_input(c, bytes);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file} on stdin: {err}");
        assert!(
            err.starts_with("pbf-index: error: /dev/stdin: unknown data, not a PBF file"),
            "{file} on stdin: {err}"
        );
        assert!(!out.exists() && leftovers(d).is_empty(), "{file}");
    }
    // A real PBF file cut short after its OSMHeader frame is PBF, damaged.
    let pbf = std::fs::read(data("unsorted-vex.osm.pbf")).expect("read");
    std::fs::write(d.join("cut.osm.pbf"), &pbf[..pbf.len() / 2]).expect("write");
    let mut c = bin("pbf-index");
    c.current_dir(d).args(["--validate", "cut.osm.pbf"]);
    succeeds(c);
    let mut c = bin("pbf-index");
    c.current_dir(d).args(["-q", "cut.osm.pbf"]);
    let o = c.output().expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cut.osm.pbf: blob at offset"), "{err}");
}

/// PBF compressed by bzip2, gzip, xz or zstd: the hint decompresses it
/// into `pbf-sort -` (and, were it XML, into osmium), and works as given.
#[test]
fn compressed_pbf_is_named_with_the_command_that_decompresses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let src = data("unsorted-type-regression.osm.pbf");
    for tool in ["bzip2", "gzip", "xz", "zstd"] {
        let suffix = match tool {
            "bzip2" => "bz2",
            "gzip" => "gz",
            other => other,
        };
        let file = format!("x.osm.pbf.{suffix}");
        bash_succeeds(&format!("{tool} -c < {} > {file}", src.display()), d);
        let mut c = pbf_sort();
        c.current_dir(d).args([&file, "-o", "out.osm.pbf"]);
        let o = c.output().expect("run");
        let line = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{line}");
        assert_eq!(line.lines().count(), 1, "{line}");
        let pbf = format!("if it holds PBF, decompress it: {tool} -dc {file} | pbf-sort - -o OUT");
        let xml = format!("if OSM XML: {tool} -dc {file} | osmium cat -F xml - -f pbf -o - |");
        for want in [
            &format!("{file}: this is {tool}-compressed data, not PBF"),
            &pbf,
            &xml,
        ] {
            assert!(line.contains(want.as_str()), "lacks {want:?}: {line}");
        }
        let command = hinted(&line, "decompress it: ").replace("OUT.osm.pbf", "hinted.osm.pbf");
        bash_succeeds(&command, d);
        assert_sorted_like_osmium(&d.join("hinted.osm.pbf"), &[&src], d, &command);
        std::fs::remove_file(d.join("hinted.osm.pbf")).expect("rm");
        assert!(!d.join("out.osm.pbf").exists());
    }
}

/// A scratch directory holding `plan.jsonl` (of a sorted fixture), a
/// directory `d` and an empty file `taken`, and the fixture's path.
fn paths_scratch() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-kualalumpur.osm.pbf");
    let o = overlap(&[], &index_stream(&input));
    assert!(o.status.success());
    std::fs::write(dir.path().join("plan.jsonl"), &o.stdout).expect("write plan");
    std::fs::create_dir(dir.path().join("d")).expect("mkdir");
    std::fs::write(dir.path().join("taken"), b"").expect("write");
    (dir, input)
}

/// `tool ARGS` run in `dir`, where relative paths are as the user typed them.
fn in_dir(dir: &Path, tool: &str, args: &[&str]) -> std::process::Command {
    let mut c = if tool == "pbf-sort" {
        pbf_sort()
    } else {
        bin(tool)
    };
    c.current_dir(dir).args(args);
    c
}

/// An output that names a directory, or a file in a directory that does
/// not exist, is refused before any work (exit 2) in the driver's words,
/// naming it as typed.
#[test]
fn outputs_that_name_directories_are_refused_in_the_drivers_words() {
    let (dir, input) = paths_scratch();
    let dir = dir.path();
    for copier in ["pbf-copy", "pbf-reflink"] {
        for (out, says) in [
            ("d", "d: is a directory; name the output file"),
            ("d/", "d/: is a directory; name the output file"),
            ("gone/", "gone/: names a directory, and there is none"),
            ("gone/x.osm.pbf", "gone: no such directory (output)"),
        ] {
            refused(
                in_dir(dir, copier, &["-O", "plan.jsonl", "-o", out]),
                &[says],
            );
        }
    }
    let input = input.to_str().expect("utf-8");
    refused(
        in_dir(dir, "pbf-sort", &[input, "-O", "-o", "d"]),
        &["d: is a directory; name the output file"],
    );
}

/// A `--spool` in a directory that does not exist, or one that exists, is
/// refused before the plan is read (exit 2), naming it.
#[test]
fn spools_that_cannot_be_created_are_refused_naming_them() {
    let (dir, _) = paths_scratch();
    let dir = dir.path();
    refused(
        in_dir(dir, "pbf-merge", &["--spool", "gone/x.spool", "plan.jsonl"]),
        &["gone: no such directory (--spool)"],
    );
    refused(
        in_dir(dir, "pbf-merge", &["--spool", "taken", "plan.jsonl"]),
        &["taken: exists (--spool names a file to create)"],
    );
    assert!(
        dir.join("taken").is_file(),
        "an existing file named by --spool is kept"
    );
}

/// A missing input is `FILE: no such file` (exit 2) in every tool, as in
/// the driver.
#[test]
fn missing_inputs_are_named_as_the_driver_names_them() {
    let (dir, _) = paths_scratch();
    let dir = dir.path();
    let says = ["missing.osm.pbf: no such file"];
    for tool in ["pbf-index", "pbf-overlap", "pbf-merge"] {
        refused(in_dir(dir, tool, &["missing.osm.pbf"]), &says);
    }
    for copier in ["pbf-copy", "pbf-reflink"] {
        refused(
            in_dir(dir, copier, &["missing.osm.pbf", "-o", "x.pbf"]),
            &says,
        );
    }
    refused(
        in_dir(dir, "pbf-index", &["--validate", "missing.osm.pbf"]),
        &says,
    );
    refused(
        in_dir(dir, "pbf-sort", &["missing.osm.pbf", "-o", "x.osm.pbf"]),
        &says,
    );
}
