//! An input rewritten in place while `pbf-sort` reads it (a download tool
//! writing the same path again): the copier checks every input's size, mtime
//! and ctime once more before it puts the output in place, so the run ends
//! in exit 1 naming the input as given, and leaves nothing. The rewrite is
//! made deterministic by the planning stage, replaced (`--overlap-cmd`) by a
//! script that holds the plan's end record back until the copier has the
//! input open, rewrites 100 kB near its end (size kept, mtime put back, so
//! only the ctime tells), and then lets the end record through.

use std::fs::File;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::util::*;

/// The planning stage of these tests, as a script in `dir`: it plans with
/// pbf-overlap, passes every record but the end on, waits until a copier
/// (`pbf-copy` or `pbf-reflink`) holds `input` open, rewrites it when
/// `rewrite`, and passes the end record on.
fn overlap_that_rewrites(dir: &Path, input: &Path, rewrite: bool) -> String {
    let script = dir.join(if rewrite { "rewrite.sh" } else { "wait.sh" });
    let size = std::fs::metadata(input).expect("input").len();
    let body = "#!/bin/sh\n".to_owned()
        + &format!(
            r#"set -e
input='{input}' plan='{dir}/plan.jsonl' stamp='{dir}/stamp'
held() {{
    for p in /proc/[0-9]*; do
        case $(cat "$p/comm" 2>/dev/null) in pbf-copy | pbf-reflink) ;; *) continue ;; esac
        for fd in "$p"/fd/*; do [ "$(readlink "$fd" 2>/dev/null)" = "$input" ] && return 0; done
    done
    return 1
}}
pbf-overlap "$@" >"$plan"
sed '$d' "$plan"
n=0
until held; do
    n=$((n + 1)) && [ $n -lt 3000 ] || {{ echo "pbf-test: error: no copier opened $input" >&2; exit 1; }}
    sleep 0.01
done
if {rewrite}; then
    touch -r "$input" "$stamp"
    dd if=/dev/urandom of="$input" bs=1000 count=100 seek={seek} conv=notrunc status=none
    touch -r "$stamp" "$input"
fi
tail -n 1 "$plan"
"#,
            input = input.display(),
            dir = dir.display(),
            seek = (size - 150_000) / 1000,
        );
    std::fs::write(&script, body).expect("script");
    let made = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status();
    assert!(made.is_ok_and(|s| s.success()), "chmod");
    script.display().to_string()
}

/// Run `pbf-sort -q in.osm.pbf -o OUT` in `work` (the input named as a
/// relative path), with the planning stage replaced and the copier given.
fn sort(work: &Path, overlap: &str, copier: Option<&str>, out: &str, stdout: Stdio) -> Outcome {
    let mut c = pbf_sort();
    c.current_dir(work)
        .arg("-q")
        .args(["--overlap-cmd", overlap]);
    if let Some(copier) = copier {
        c.args(["--copy-cmd", copier]);
    }
    c.args(["--tmpdir", "tmp", "in.osm.pbf", "-o", out]);
    let scratch = work.join("scratch");
    std::fs::create_dir_all(&scratch).expect("scratch");
    run_bounded_to(&c, Duration::from_secs(120), &scratch, stdout)
}

/// A work directory holding `in.osm.pbf` (a copy of a sorted file of more
/// than 150 kB), `out/` and `tmp/`; returns it and the input's canonical path.
fn work() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let input = dir.path().join("in.osm.pbf");
    std::fs::copy(data("sorted-liechtenstein.osm.pbf"), &input).expect("input");
    std::fs::create_dir(dir.path().join("out")).expect("out");
    std::fs::create_dir(dir.path().join("tmp")).expect("tmp");
    let input = input.canonicalize().expect("canonical");
    (dir, input)
}

#[test]
fn an_input_rewritten_in_place_during_the_run_is_refused_at_the_end() {
    for copier in [None, Some("pbf-reflink")] {
        let (dir, input) = work();
        let what = format!("copier {}", copier.unwrap_or("pbf-copy"));
        let overlap = overlap_that_rewrites(dir.path(), &input, true);
        let before = std::fs::metadata(&input).expect("meta");
        let o = sort(
            dir.path(),
            &overlap,
            copier,
            "out/sorted.osm.pbf",
            Stdio::null(),
        );
        assert_eq!(o.status.code(), Some(1), "{what}: {}", o.stderr);
        let root = o
            .stderr
            .lines()
            .find(|l| l.contains(": error: in.osm.pbf: "))
            .unwrap_or_else(|| panic!("{what}: no line names in.osm.pbf:\n{}", o.stderr));
        assert!(
            root.contains("in.osm.pbf: changed during the run (ctime ")
                && root.ends_with("the output was not written"),
            "{what}: {root}"
        );
        // Size and mtime are what they were: only the ctime told.
        let after = std::fs::metadata(&input).expect("meta");
        assert_eq!(after.len(), before.len(), "{what}");
        assert_eq!(after.modified().ok(), before.modified().ok(), "{what}");
        assert!(
            !root.contains("size") && !root.contains("mtime"),
            "{what}: {root}"
        );
        for sub in ["out", "tmp"] {
            let left = entries(&dir.path().join(sub));
            assert!(left.is_empty(), "{what}: {sub}/ holds {left:?}");
        }
    }
}

#[test]
fn an_unchanged_input_still_commits() {
    let (dir, input) = work();
    let overlap = overlap_that_rewrites(dir.path(), &input, false);
    let o = sort(
        dir.path(),
        &overlap,
        None,
        "out/sorted.osm.pbf",
        Stdio::null(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", o.stderr);
    assert_eq!(entries(&dir.path().join("out")), ["sorted.osm.pbf"]);
    assert!(entries(&dir.path().join("tmp")).is_empty());
    let sorted = std::fs::read(dir.path().join("out/sorted.osm.pbf")).expect("output");
    let copied = std::fs::read(&input).expect("input");
    // A sorted file is copied whole: its data frames, behind a new header.
    assert!(copied.ends_with(&sorted[sorted.len() - 100_000..]));
}

#[test]
fn to_standard_output_a_rewrite_fails_the_run_and_poisons_the_stream() {
    let (dir, input) = work();
    let overlap = overlap_that_rewrites(dir.path(), &input, true);
    let sent = dir.path().join("out/stream.osm.pbf");
    let stdout = Stdio::from(File::create(&sent).expect("stdout file"));
    let o = sort(dir.path(), &overlap, None, "-", stdout);
    assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("pbf-copy: error: in.osm.pbf: changed during the run (ctime ")
            && o.stderr
                .contains("what went to standard output is not a complete output"),
        "{}",
        o.stderr
    );
    let bytes = std::fs::read(&sent).expect("stream");
    assert!(
        bytes.ends_with(&[0xFF; 4]),
        "the stream ends with bytes no reader accepts"
    );
    assert!(entries(&dir.path().join("tmp")).is_empty());
}
