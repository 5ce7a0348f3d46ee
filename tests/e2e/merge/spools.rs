//! The README's headline pipeline, typed by hand, leaves nothing behind:
//! `pbf-merge` creates its spool in `$TMPDIR` (or where `--spool` says), the
//! copier removes it once read, `pbf-merge` removes it on an error or signal
//! and when nothing was merged, and `--keep-spools` keeps it for debugging.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// `pbf-index IN | pbf-overlap | pbf-merge MERGE_ARGS | pbf-copy COPY_ARGS -o OUT`
/// under bash with pipefail and `$TMPDIR` set to `tmp`.
fn pipeline(input: &Path, out: &Path, merge_args: &str, copy_args: &str, tmp: &Path) -> Command {
    let script = format!(
        "{} -q '{}' | {} | {} -q {merge_args} | {} -q {copy_args} -o '{}'",
        bin_quoted("pbf-index"),
        input.display(),
        bin_quoted("pbf-overlap"),
        bin_quoted("pbf-merge"),
        bin_quoted("pbf-copy"),
        out.display(),
    );
    let mut c = Command::new("bash");
    c.args(["-o", "pipefail", "-c", &script]).env("TMPDIR", tmp);
    c
}

fn succeeds_quietly(c: Command, what: &str) {
    let o = run(c);
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_headline_pipeline_leaves_tmpdir_as_it_was() {
    let dir = tempfile::tempdir().expect("dir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    // One input that merges, one that does not (an empty spool is never left).
    for name in ["unsorted-vex.osm.pbf", "sorted-andorra.osm.pbf"] {
        let out = dir.path().join(format!("out-{name}"));
        succeeds_quietly(pipeline(&data(name), &out, "", "", &tmp), name);
        assert!(entries(&tmp).is_empty(), "{name}: left {:?}", entries(&tmp));
        assert_sorted_like_osmium(&out, &[&data(name)], dir.path(), name);
    }
}

#[test]
fn keep_spools_keeps_the_spool_and_an_explicit_spool_follows_the_same_rule() {
    let dir = tempfile::tempdir().expect("dir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let input = data("unsorted-vex.osm.pbf");
    let out = dir.path().join("kept.osm.pbf");
    succeeds_quietly(pipeline(&input, &out, "", "--keep-spools", &tmp), "keep");
    let left = entries(&tmp);
    assert!(
        left.len() == 1 && left[0].starts_with("pbf-merge-") && left[0].ends_with(".spool"),
        "--keep-spools keeps the spool: {left:?}"
    );
    // A spool named with --spool is removed once read too, or kept on request.
    let spool = dir.path().join("named.spool");
    let arg = format!("--spool '{}'", spool.display());
    let out = dir.path().join("named.osm.pbf");
    succeeds_quietly(pipeline(&input, &out, &arg, "", &tmp), "named spool");
    assert!(!spool.exists(), "a named spool is removed once read");
    let out = dir.path().join("named-kept.osm.pbf");
    succeeds_quietly(
        pipeline(&input, &out, &arg, "--keep-spools", &tmp),
        "named, kept",
    );
    assert!(spool.exists(), "a named spool is kept with --keep-spools");
    std::fs::remove_file(&spool).expect("rm");
    // Nothing to merge: a named spool is not left either, even when kept.
    let sorted = data("sorted-andorra.osm.pbf");
    let out = dir.path().join("sorted.osm.pbf");
    succeeds_quietly(
        pipeline(&sorted, &out, &arg, "--keep-spools", &tmp),
        "sorted",
    );
    assert!(!spool.exists(), "an empty spool is never left");
    assert_eq!(entries(&tmp).len(), 1, "{:?}", entries(&tmp));
}

/// Start the pipeline in its own process group, wait until pbf-merge has
/// created its spool and merged for a moment, send `signal` to the group,
/// and require that the pipeline dies and `$TMPDIR` is left empty.
fn interrupt_mid_merge(signal: &str) {
    let dir = tempfile::tempdir().expect("dir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let input = dir.path().join("copies.osm.pbf");
    overlapping_copies("sorted-kualalumpur.osm.pbf", 3, &input);
    let out = dir.path().join("out.osm.pbf");
    let mut c = pipeline(&input, &out, "-j 1 --memory 4M", "", &tmp);
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = c.spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while entries(&tmp).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the pipeline finished before the signal: make the input larger"
    );
    assert!(
        !entries(&tmp).is_empty(),
        "pbf-merge created no spool in $TMPDIR"
    );
    kill_group(child.id(), signal);
    let status = wait_at_most(&mut child, Duration::from_secs(30));
    assert!(!status.success(), "{signal}: the pipeline still succeeded");
    wait_for_group_gone(child.id(), Duration::from_secs(30));
    assert!(
        entries(&tmp).is_empty(),
        "{signal} mid-merge left {:?} in $TMPDIR",
        entries(&tmp)
    );
    assert!(!out.exists(), "{signal}: an output appeared");
    assert!(
        entries(dir.path())
            .iter()
            .all(|e| e == "tmp" || e == "copies.osm.pbf"),
        "{signal}: left {:?}",
        entries(dir.path())
    );
}

#[test]
fn sigint_mid_merge_leaves_tmpdir_as_it_was() {
    interrupt_mid_merge("INT");
}

#[test]
fn sigterm_mid_merge_leaves_tmpdir_as_it_was() {
    interrupt_mid_merge("TERM");
}
