//! Free space: a run whose output cannot fit its filesystem fails before it
//! writes a byte, at once, naming the directory, the bytes it needs and the
//! bytes free, and leaves nothing; `--no-space-check` writes anyway (and
//! runs into ENOSPC, leaving nothing either); a run that fits still
//! succeeds; and clones (pbf-reflink on XFS) are not counted, since they
//! take no room. Small filesystems are tmpfs mounts (root only: elsewhere
//! each test prints "SKIPPED: reason", as faults/diskfull.rs does).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::*;

/// The sorted input: every byte of it is copied, so the plan's copy_bytes
/// are about its size.
const SORTED: &str = "sorted-liechtenstein.osm.pbf";

/// Bytes free to an unprivileged writer in `dir`, as `stat -f` says.
fn free_bytes(dir: &Path) -> u64 {
    let out = Command::new("stat")
        .args(["-f", "-c", "%a %S"])
        .arg(dir)
        .output()
        .expect("stat -f");
    let text = String::from_utf8_lossy(&out.stdout);
    let n: Vec<u64> = text
        .split_whitespace()
        .map(|w| w.parse().expect("number"))
        .collect();
    n[0] * n[1]
}

/// The numbers a refusal names: bytes needed and bytes free.
fn refusal_numbers(line: &str) -> (u64, u64) {
    let number_before = |tail: &str| -> u64 {
        let head = &line[..line
            .find(tail)
            .unwrap_or_else(|| panic!("no '{tail}': {line}"))];
        let digits = head.trim_end().rsplit(' ').next().expect("word");
        digits
            .parse()
            .unwrap_or_else(|_| panic!("not a number before '{tail}': {line}"))
    };
    (number_before(" bytes more"), number_before(" bytes free"))
}

fn sort(args: &[&str], input: &Path, out: &Path, scratch: &Path) -> Outcome {
    let mut c = pbf_sort();
    c.arg("-q").args(args).arg(input).arg("-o").arg(out);
    run_bounded(&c, Duration::from_secs(120), scratch)
}

/// The refusal of an output in `fs` that needs about `input_size` bytes,
/// of a run started when `fs` had `free_before` bytes free; `fs` holds only
/// `kept` after it. The free space it names is what the file system said
/// during the run: XFS may still be freeing the blocks of a removed file.
fn check_refusal(
    what: &str,
    o: &Outcome,
    fs: &Path,
    input_size: u64,
    free_before: u64,
    kept: &[&str],
) {
    assert_eq!(o.status.code(), Some(1), "{what}: {}", o.stderr);
    let root = check_clean_failure(what, o, &fs.display().to_string(), false);
    assert!(
        root.contains(&format!("{}: not enough free space", fs.display())),
        "{what}: {root}"
    );
    let (needed, free) = refusal_numbers(&root);
    assert!(
        (free_before..=free_bytes(fs)).contains(&free),
        "{what}: {root}"
    );
    assert!(needed > free, "{what}: {root}");
    // The header and the data frames, copied as they are.
    assert!(needed.abs_diff(input_size) < 1000, "{what}: {root}");
    assert_eq!(entries(fs), kept, "{what}: left behind");
}

#[test]
fn a_run_that_cannot_fit_fails_at_once_and_leaves_nothing() {
    let scratch = tempfile::tempdir().expect("dir");
    let input = data(SORTED);
    let size = std::fs::metadata(&input).expect("input").len();
    let Some(fs) = Mount::tmpfs_or_skip("1m", "space check") else {
        return;
    };
    let out = fs.path().join("sorted.osm.pbf");
    // The driver: an early plan record, its copy_bytes in a header record.
    let free = free_bytes(fs.path());
    let started = Instant::now();
    let o = sort(&[], &input, &out, scratch.path());
    let took = started.elapsed();
    check_refusal("pbf-sort", &o, fs.path(), size, free, &[]);
    assert!(took < Duration::from_secs(1), "pbf-sort took {took:?}");
    // A replaced copier gets the check too where it copies (tmpfs cannot clone).
    let o = sort(&["--copy-cmd", "pbf-reflink"], &input, &out, scratch.path());
    check_refusal(
        "pbf-sort --copy-cmd pbf-reflink",
        &o,
        fs.path(),
        size,
        free,
        &[],
    );
    // A pipeline built by hand: the plan record made after planning has them.
    for copier in ["pbf-copy", "pbf-reflink"] {
        let script = format!(
            "{} -q {} | {} | {} -q -o {}",
            bin_quoted("pbf-index"),
            input.display(),
            bin_quoted("pbf-overlap"),
            bin_quoted(copier),
            out.display()
        );
        let mut c = Command::new("bash");
        c.args(["-o", "pipefail", "-c", &script]);
        let o = run_bounded(&c, Duration::from_secs(120), scratch.path());
        check_refusal(copier, &o, fs.path(), size, free, &[]);
    }
}

#[test]
fn the_copy_of_standard_input_is_checked_before_it_is_saved() {
    let scratch = tempfile::tempdir().expect("dir");
    let Some(fs) = Mount::tmpfs_or_skip("1m", "space check of standard input") else {
        return;
    };
    let input = data(SORTED);
    let size = std::fs::metadata(&input).expect("input").len();
    let out = fs.path().join("sorted.osm.pbf");
    let script = format!("exec pbf-sort - -o {} < {}", out.display(), input.display());
    let mut c = Command::new("bash");
    c.args(["-c", &script]).env("PATH", tools_path());
    let o = run_bounded(&c, Duration::from_secs(120), scratch.path());
    // Found by the driver before any work: exit 2, as for a path that
    // cannot be used.
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    let line = o.stderr.trim();
    assert_eq!(
        line,
        format!(
            "pbf-sort: error: {}: not enough free space: the copy of standard input needs {size} \
             bytes there, the filesystem has {} bytes free (--no-space-check writes anyway)",
            fs.path().display(),
            free_bytes(fs.path())
        )
    );
    assert!(
        entries(fs.path()).is_empty(),
        "left {:?}",
        entries(fs.path())
    );
}

#[test]
fn without_the_check_a_run_that_cannot_fit_runs_into_enospc() {
    let scratch = tempfile::tempdir().expect("dir");
    let Some(fs) = Mount::tmpfs_or_skip("1m", "--no-space-check") else {
        return;
    };
    let out = fs.path().join("sorted.osm.pbf");
    let o = sort(&["--no-space-check"], &data(SORTED), &out, scratch.path());
    let root = check_clean_failure("--no-space-check", &o, "", false);
    assert!(root.contains("No space left on device"), "{root}");
    assert!(
        entries(fs.path()).is_empty(),
        "left {:?}",
        entries(fs.path())
    );
}

#[test]
fn a_run_that_just_fits_succeeds() {
    let scratch = tempfile::tempdir().expect("dir");
    let input = data(SORTED);
    let size = std::fs::metadata(&input).expect("input").len();
    // The output (header and frames, about the input's size) and 16 KiB.
    let kib = size.div_ceil(1024) + 16;
    let Some(fs) = Mount::tmpfs_or_skip(&format!("{kib}k"), "a run that fits") else {
        return;
    };
    let out = fs.path().join("sorted.osm.pbf");
    let o = sort(&[], &input, &out, scratch.path());
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert_eq!(entries(fs.path()), ["sorted.osm.pbf"]);
    assert!(free_bytes(fs.path()) < 64 << 10, "the run did not just fit");
}

#[test]
fn clones_take_no_room_and_are_not_refused() {
    let xfs = match LoopMount::xfs() {
        Ok(m) => m,
        Err(why) => {
            eprintln!("SKIPPED: space check on XFS: {why}");
            return;
        }
    };
    let scratch = tempfile::tempdir().expect("dir");
    let input = xfs.put(SORTED);
    let size = std::fs::metadata(&input).expect("input").len();
    // Leave 1 MiB free: less than a copy of the input needs.
    let filler = xfs.path().join("filler");
    let fill = free_bytes(xfs.path()) - (1 << 20);
    let made = Command::new("fallocate")
        .args(["-l", &fill.to_string()])
        .arg(&filler)
        .status();
    assert!(made.is_ok_and(|s| s.success()), "fallocate");
    assert!(free_bytes(xfs.path()) < size, "not filled");
    let out = xfs.path().join("sorted.osm.pbf");
    let o = sort(&["--copier", "reflink"], &input, &out, scratch.path());
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    // pbf-copy would need the room: refused.
    std::fs::remove_file(&out).expect("rm");
    let free = free_bytes(xfs.path());
    let o = sort(&["--copier", "copy"], &input, &out, scratch.path());
    check_refusal(
        "pbf-copy on XFS",
        &o,
        xfs.path(),
        size,
        free,
        &["filler", SORTED],
    );
}
