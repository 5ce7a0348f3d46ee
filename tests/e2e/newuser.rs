//! What a new user meets in the first hour beyond a refusal: osmconvert
//! reads the default outputs, and the `--dry-run` script fails, and names
//! a failure, as the run does.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::Path;

use crate::util::*;

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
