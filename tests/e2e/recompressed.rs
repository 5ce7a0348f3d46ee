//! `pbf-sort --recompress` with the frames `pbf-index --recompressed` already
//! re-compressed: the output has the bytes of the copy that re-compresses
//! every blob itself, on sorted, unsorted, overlapping and permuted inputs;
//! the file is the run's own and goes with it; and `pbf-copy` refuses a file
//! it cannot trust.

use std::path::Path;
use std::process::Output;

use crate::util::*;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `pbf-sort ARGS IN -o OUT`, which must succeed; its stderr.
fn sort(args: &[&str], input: &Path, out: &Path) -> String {
    let mut c = pbf_sort();
    c.args(args).arg(input).arg("-o").arg(out);
    let o = run(c);
    assert!(o.status.success(), "{}: {}", input.display(), stderr(&o));
    stderr(&o)
}

/// How many blobs the index said it re-compressed (its `-v` line).
fn recompressed_by_index(said: &str) -> u64 {
    let line = said
        .lines()
        .find(|l| l.starts_with("pbf-index:"))
        .expect("index line");
    let (before, _) = line.split_once(" re-compressed").expect("a count");
    before
        .rsplit(' ')
        .next()
        .expect("n")
        .parse()
        .expect("number")
}

#[test]
fn frames_the_index_recompressed_give_the_bytes_of_the_copy_alone() {
    let (dir, out) = scratch();
    let d = dir.path();
    let overlapping = d.join("overlapping.osm.pbf");
    overlapping_copies("sorted-andorra.osm.pbf", 2, &overlapping);
    let permuted = d.join("permuted.osm.pbf");
    permute(&data("sorted-liechtenstein.osm.pbf"), &permuted, 7);
    let mut inputs = vec![overlapping, permuted];
    for name in [
        "sorted-andorra.osm.pbf",
        "sorted-monaco-lz4.osm.pbf",
        "sorted-monaco-bigblobs.osm.pbf",
        "history-niue.osh.pbf",
        "unsorted-vex.osm.pbf",
        "unsorted-vanilla-extract-raw-zlib.osm.pbf",
    ] {
        inputs.push(data(name));
    }
    for input in &inputs {
        for c in ["zlib:1", "lz4", "none"] {
            let (ours, alone) = (out.join("ours.osm.pbf"), out.join("alone.osm.pbf"));
            let said = sort(
                &["-v", "-O", "--recompress", "--compression", c],
                input,
                &ours,
            );
            // A replaced index stage writes no re-compressed frames.
            let replaced = [
                "-q",
                "-O",
                "--recompress",
                "--compression",
                c,
                "--index-cmd",
                "pbf-index",
            ];
            sort(&replaced, input, &alone);
            let what = format!("{} to {c}", input.display());
            assert!(
                std::fs::read(&ours).expect("ours") == std::fs::read(&alone).expect("alone"),
                "{what}"
            );
            let n = recompressed_by_index(&said);
            let sorted = input
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("sorted"));
            assert!(!sorted || n > 0, "{what}: {said}");
        }
        assert_sorted_like_osmium(
            &out.join("ours.osm.pbf"),
            &[input],
            d,
            &input.display().to_string(),
        );
    }
    let left: Vec<_> = std::fs::read_dir(&out)
        .expect("ls")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left.len(), 2, "the run's files are gone: {left:?}");
}

#[test]
fn the_driver_passes_the_file_only_between_its_own_index_and_copier() {
    let input = data("unsorted-vex.osm.pbf");
    let other = data("sorted-andorra.osm.pbf");
    let dry_run = |extra: &[&str], inputs: &[&Path]| {
        let mut c = pbf_sort();
        c.args(["--dry-run", "--recompress"])
            .args(extra)
            .args(inputs)
            .args(["-o", "out.osm.pbf"]);
        String::from_utf8(succeeds(c)).expect("utf-8")
    };
    let ours = dry_run(&[], &[&input]);
    assert_eq!(ours.matches("--recompressed").count(), 2, "{ours}");
    assert!(
        ours.contains(".recompressed"),
        "removed by the script: {ours}"
    );
    for (extra, why) in [
        (&["--index-cmd", "pbf-index"][..], "another index"),
        (&["--copy-cmd", "pbf-copy"][..], "another copier"),
        (&["--add-indexdata"][..], "indexdata of the plan's keys"),
    ] {
        let s = dry_run(extra, &[&input]);
        assert!(!s.contains("--recompressed"), "{why}: {s}");
    }
    let two = dry_run(&[], &[&input, &other]);
    assert!(!two.contains("--recompressed"), "two inputs: {two}");
    let mut c = bin("pbf-index");
    c.args(["--recompress", "lz4", "--recompressed", "r"])
        .arg(&input)
        .arg(&other);
    let o = run(c);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("one input file"), "{}", stderr(&o));
}

#[test]
fn pbf_copy_refuses_a_file_it_cannot_trust() {
    let (dir, out) = scratch();
    let d = dir.path();
    let (input, other) = (
        data("sorted-andorra.osm.pbf"),
        data("sorted-liechtenstein.osm.pbf"),
    );
    let rz = d.join("frames");
    let index = |file: &Path| {
        let mut c = bin("pbf-index");
        c.args(["-q", "--recompress", "lz4", "--recompressed"])
            .arg(&rz)
            .arg(file);
        let plan = overlap(&["--no-frame-keys"], &succeeds(c));
        assert!(plan.status.success(), "{}", stderr(&plan));
        plan.stdout
    };
    let copy = |plan: &[u8]| {
        let mut c = bin("pbf-copy");
        c.args(["-q", "--recompress", "lz4", "--recompressed"])
            .arg(&rz)
            .arg("-o")
            .arg(out.join("o.pbf"));
        run_with_input(c, plan)
    };
    let plan = index(&input);
    assert!(copy(&plan).status.success());
    std::fs::remove_file(out.join("o.pbf")).expect("rm");
    // Frames of another input.
    std::fs::remove_file(&rz).expect("rm");
    let _ = index(&other);
    let o = copy(&plan);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not of an input of the plan"),
        "{}",
        stderr(&o)
    );
    // Cut short: not finished.
    std::fs::remove_file(&rz).expect("rm");
    let plan = index(&input);
    let len = std::fs::metadata(&rz).expect("stat").len();
    std::fs::File::options()
        .write(true)
        .open(&rz)
        .expect("open")
        .set_len(len - 1)
        .expect("cut");
    let o = copy(&plan);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not a finished re-compressed frames file"),
        "{}",
        stderr(&o)
    );
    assert!(!out.join("o.pbf").exists());
    // Frames in another compression than the copy writes.
    std::fs::remove_file(&rz).expect("rm");
    let plan = index(&input);
    let mut c = bin("pbf-copy");
    c.args(["-q", "--recompress", "zlib:1", "--recompressed"])
        .arg(&rz)
        .arg("-o")
        .arg(out.join("o.pbf"));
    let o = run_with_input(c, &plan);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("holds frames in lz4, not in zlib:1"),
        "{}",
        stderr(&o)
    );
    assert!(!out.join("o.pbf").exists());
}

#[test]
fn pbf_index_writes_a_new_file_and_leaves_none_when_it_fails() {
    let dir = tempfile::tempdir().expect("dir");
    let input = dir.path().join("in.osm.pbf");
    std::fs::copy(data("sorted-andorra.osm.pbf"), &input).expect("copy");
    let before = std::fs::read(&input).expect("read");
    // Its own input, or any file that exists: refused, untouched.
    let mut c = bin("pbf-index");
    c.args(["--recompress", "lz4", "--recompressed"])
        .arg(&input)
        .arg(&input);
    let o = run(c);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("exists (--recompressed writes a new file)"),
        "{}",
        stderr(&o)
    );
    assert!(std::fs::read(&input).expect("read") == before);
    // Nor in a directory of device names.
    let mut c = bin("pbf-index");
    c.args([
        "--recompress",
        "lz4",
        "--recompressed",
        "/dev/pbf-index-test",
    ])
    .arg(&input);
    let o = run(c);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("/dev: holds the system's names"),
        "{}",
        stderr(&o)
    );
    assert!(!Path::new("/dev/pbf-index-test").exists());
    // An input that fails half way leaves no file behind.
    let rz = dir.path().join("frames");
    let mut c = bin("pbf-index");
    c.args(["-q", "--recompress", "lz4", "--recompressed"])
        .arg(&rz)
        .arg(data("bad-truncated.osm.pbf"));
    assert_eq!(run(c).status.code(), Some(1));
    assert!(!rz.exists());
}

/// Where the frames would take the room the output wants, they are given
/// up with a warning and the run succeeds as without them: a 6 MiB tmpfs
/// holds the 4.2 MB lz4 output of a 3.4 MB input, not both.
#[test]
fn frames_give_way_to_the_output() {
    let Some(fs) = Mount::tmpfs_or_skip("6m", "re-compressed frames on a small disk") else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let input = data("sorted-kualalumpur.osm.pbf");
    let (ours, alone) = (
        fs.path().join("k.osm.pbf"),
        dir.path().join("alone.osm.pbf"),
    );
    let said = sort(&["--recompress", "--compression", "lz4"], &input, &ours);
    assert!(said.contains("re-compressed frames given up"), "{said}");
    sort(
        &[
            "-q",
            "--recompress",
            "--compression",
            "lz4",
            "--index-cmd",
            "pbf-index",
        ],
        &input,
        &alone,
    );
    assert!(std::fs::read(&ours).expect("ours") == std::fs::read(&alone).expect("alone"));
    let left: Vec<_> = std::fs::read_dir(fs.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, ["k.osm.pbf"]);
}
