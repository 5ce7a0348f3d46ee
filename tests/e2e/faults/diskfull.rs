//! Disk full and read-only output: `pbf-sort` writing its output and spool
//! to a small tmpfs that fills mid-run (merge path and copy path), and to a
//! read-only directory. Each ends with one root-cause line (exit 1; a
//! read-only directory, found before any work, exit 2), no OUT and no
//! temporaries. Needs `mount` (root); elsewhere each test prints
//! "SKIPPED: reason" and returns.

use std::path::Path;
use std::time::Duration;

use crate::util::*;

/// Sort without the free-space check (faults/space.rs), which would
/// refuse the copy path's output before it fills the disk.
fn sort_into(input: &Path, out: &Path, scratch: &Path) -> Outcome {
    let mut c = pbf_sort();
    c.args(["-q", "--no-space-check"])
        .arg(input)
        .arg("-o")
        .arg(out);
    run_bounded(&c, Duration::from_secs(300), scratch)
}

#[test]
fn disk_full_mid_run_leaves_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let merge_in = dir.path().join("overlapping.osm.pbf");
    overlapping_copies("sorted-kualalumpur.osm.pbf", 3, &merge_in);
    let copy_in = dir.path().join("permuted.osm.pbf");
    permute(&data("sorted-liechtenstein.osm.pbf"), &copy_in, 3);
    for (input, size, what) in [
        // The spool (3.96 MB) is freed as the copy reads it, and staged
        // output bytes take room only as they are written: 4 MiB would
        // hold the sort.
        (&merge_in, "3900k", "merge path"),
        (&copy_in, "1m", "copy path"),
    ] {
        let Some(fs) = Mount::tmpfs_or_skip(size, what) else {
            return;
        };
        let out = fs.path().join("sorted.osm.pbf");
        let before = std::fs::read(input).expect("read");
        let o = sort_into(input, &out, dir.path());
        let what = format!("{what} on a {size} tmpfs");
        let root = check_clean_failure(&what, &o, "", false);
        assert!(
            root.contains("No space left") || root.contains("disk full"),
            "{what}: {root}"
        );
        assert!(
            !root.contains("cannot write spool") || root.contains("--tmpdir"),
            "{what}: a full spool names no way out: {root}"
        );
        assert!(!out.exists(), "{what}: an output appeared");
        assert!(
            entries(fs.path()).is_empty(),
            "{what}: left {:?}",
            entries(fs.path())
        );
        assert_eq!(
            std::fs::read(input).expect("read"),
            before,
            "{what}: input changed"
        );
        eprintln!("{what}: {root}");
    }
}

/// A spool that fills its `--tmpdir` fails the run the same way, and its
/// line names the way out: a `--tmpdir` with room.
#[test]
fn full_tmpdir_names_the_option_that_moves_the_spool() {
    let dir = tempfile::tempdir().expect("dir");
    let input = dir.path().join("overlapping.osm.pbf");
    overlapping_copies("sorted-kualalumpur.osm.pbf", 3, &input);
    let Some(fs) = Mount::tmpfs_or_skip("128k", "full --tmpdir") else {
        return;
    };
    let out = dir.path().join("sorted.osm.pbf");
    let mut c = pbf_sort();
    c.args(["-q", "--no-space-check", "--tmpdir"])
        .arg(fs.path())
        .arg(&input)
        .arg("-o")
        .arg(&out);
    let o = run_bounded(&c, Duration::from_secs(300), dir.path());
    // Exit 1, and the spool's line names the way out (the one-cause rule
    // of a full disk is the test above's).
    assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
    assert!(
        o.stderr.lines().any(|l| l.starts_with("pbf-merge: error: ")
            && l.contains("cannot write spool")
            && l.contains("give --tmpdir DIR")),
        "{}",
        o.stderr
    );
    assert!(!out.exists(), "an output appeared");
    assert!(
        entries(fs.path()).is_empty(),
        "left {:?}",
        entries(fs.path())
    );
}

#[test]
fn read_only_output_directory_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let Some(fs) = Mount::tmpfs_or_skip("4m", "read-only output") else {
        return;
    };
    if let Err(why) = fs.read_only() {
        eprintln!("SKIPPED: remount read-only: {why}");
        return;
    }
    let out = fs.path().join("sorted.osm.pbf");
    let o = sort_into(&data("sorted-andorra.osm.pbf"), &out, dir.path());
    // The driver checks the directory before any stage starts: a path on the
    // command line that cannot be used is exit 2, one line.
    let root = o.stderr.trim().to_owned();
    assert_eq!(o.status.code(), Some(2), "{root}");
    assert_eq!(root.lines().count(), 1, "{root}");
    assert!(
        root.contains(&format!(
            "{}: directory is not writable",
            fs.path().display()
        )),
        "{root}"
    );
    assert!(!out.exists());
    // pbf-copy alone, given a plan, refuses the same way, in the same words.
    let mut idx = bin("pbf-index");
    idx.arg("-q").arg(data("sorted-andorra.osm.pbf"));
    let plan = run_with_input(bin("pbf-overlap"), &succeeds(idx));
    let mut c = bin("pbf-copy");
    c.arg("-q").arg("-o").arg(&out);
    let o = run_with_input(c, &plan.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "{}: directory is not writable (output)",
            fs.path().display()
        )),
        "{err}"
    );
    assert!(entries(fs.path()).is_empty());
    eprintln!("read-only: {root} / {}", err.trim());
}
