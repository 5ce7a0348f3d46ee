//! The tools' own bars under `script(1)`, a pseudo-terminal whose bytes
//! are read as they were drawn: pbf-merge's bars show, move, fit 80 and 50
//! columns and label what happens, and leave a quiet or redirected stderr
//! alone; in the driver, one bar at a time holds the line.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use pbf_stream::PlanRecord;

use crate::merge::unsorted_copy;
use crate::util::*;

/// Run pbf-merge on `dir/plan` with standard error (and standard input) on a
/// pseudo terminal, `script -qec CMD /dev/null` from util-linux, with
/// `TERM=xterm` (indicatif draws nothing on a dumb terminal); standard
/// output goes to `dir/out` and `stderr_to`, when given, redirects standard
/// error away from the terminal. Returns what reached the terminal.
/// The plan of [`unsorted_copy`] as `dir/plan`, where [`merge_on_terminal`]
/// reads it.
fn write_unsorted_plan(dir: &Path) {
    let (_, plan, _) = unsorted_copy(dir);
    fs::write(dir.join("plan"), plan).expect("plan");
}

fn merge_on_terminal(dir: &Path, args: &str, stderr_to: Option<&str>) -> Vec<u8> {
    let redirect = stderr_to.map_or(String::new(), |f| format!(" 2> '{f}'"));
    let cmd = format!(
        "'{}' --spool spool -j1 {args} plan > out{redirect}",
        env!("CARGO_BIN_EXE_pbf-merge")
    );
    let _ = fs::remove_file(dir.join("spool"));
    let mut script = Command::new("script");
    script
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(dir)
        .env("TERM", "xterm");
    let o = run(script);
    assert!(
        o.status.success(),
        "script (util-linux) running {cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let plan: Vec<PlanRecord> = records(&fs::read(dir.join("out")).expect("merged plan"));
    assert!(matches!(plan.last(), Some(PlanRecord::End(_))), "{cmd}");
    o.stdout
}

#[test]
fn a_terminal_shows_merge_progress() {
    let dir = tempfile::tempdir().expect("dir");
    write_unsorted_plan(dir.path());
    let tty = String::from_utf8_lossy(&merge_on_terminal(dir.path(), "", None)).into_owned();
    assert!(tty.contains("merging"), "a progress bar: {tty:?}");
    assert!(tty.contains("merged "), "blobs merged: {tty:?}");
    // An ETA shows after 5 seconds and 5 % of the work (pbf-cli's unit
    // tests): this merge is shorter.
}

#[test]
fn quiet_or_redirected_stderr_shows_no_progress() {
    let dir = tempfile::tempdir().expect("dir");
    write_unsorted_plan(dir.path());
    let tty = merge_on_terminal(dir.path(), "-q", None);
    assert!(tty.is_empty(), "-q: {:?}", String::from_utf8_lossy(&tty));
    let tty = merge_on_terminal(dir.path(), "", Some("err"));
    assert!(tty.is_empty(), "{:?}", String::from_utf8_lossy(&tty));
    let err = fs::read(dir.path().join("err")).expect("stderr file");
    assert!(
        err.is_empty(),
        "stderr in a file: {:?}",
        String::from_utf8_lossy(&err)
    );
}

#[test]
fn bars_fit_80_columns_and_label_what_happens() {
    let dir = tempfile::tempdir().expect("dir");
    // A long path: the bar must elide it, not wrap.
    let deep = dir
        .path()
        .join("a-directory-with-a-rather-long-name-for-the-extracts-of-this-run");
    fs::create_dir(&deep).expect("mkdir");
    let input = deep.join("an-unsorted-extract-with-a-long-file-name.osm.pbf");
    overlapping_copies("sorted-kualalumpur.osm.pbf", 2, &input);
    let out = dir.path().join("out.osm.pbf");
    // --dedupe: the copies' objects once, so no warning line but the bars.
    let cmd = format!(
        "stty cols 80 rows 24; PATH='{}' '{}' -j1 --dedupe '{}' -o '{}'",
        tools_path().to_string_lossy(),
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("pbf-sort")
            .display(),
        input.display(),
        out.display()
    );
    let mut script = Command::new("script");
    script
        .args(["-qec", &cmd, "/dev/null"])
        .env("TERM", "xterm");
    let o = run(script);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tty = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        !tty.contains("\x1b[1A"),
        "a bar redrew over two lines: {tty:?}"
    );
    let lines = screen_lines(&tty);
    assert!(lines.iter().any(|l| l.contains("indexing")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("merging")), "{lines:?}");
    for l in &lines {
        assert!(l.chars().count() <= 80, "wider than 80 columns: {l:?}");
        let words: Vec<&str> = l
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let one_plural = words
            .windows(2)
            .any(|w| w[0] == "1" && ["blobs", "ops"].contains(&w[1]));
        assert!(!one_plural, "plural of one: {l:?}");
    }
    // A plan with nothing to merge is not labelled "merging".
    let sorted_plan = dir.path().join("plan");
    let mut idx = bin("pbf-index");
    idx.arg("-q").arg(data("sorted-kualalumpur.osm.pbf"));
    let plan = run_with_input(bin("pbf-overlap"), &succeeds(idx));
    fs::write(&sorted_plan, plan.stdout).expect("plan");
    let tty =
        String::from_utf8_lossy(&merge_on_terminal(dir.path(), "--progress", None)).into_owned();
    assert!(
        !tty.contains("merg"),
        "a copy-only plan labelled as merging: {tty:?}"
    );
}

#[test]
fn progress_and_no_progress_override_the_terminal_test() {
    let dir = tempfile::tempdir().expect("dir");
    write_unsorted_plan(dir.path());
    let tty = merge_on_terminal(dir.path(), "--no-progress", None);
    assert!(
        tty.is_empty(),
        "--no-progress on a terminal: {:?}",
        String::from_utf8_lossy(&tty)
    );
    let tty = merge_on_terminal(dir.path(), "--progress", Some("err"));
    assert!(tty.is_empty());
    let err = String::from_utf8_lossy(&fs::read(dir.path().join("err")).expect("err")).into_owned();
    assert!(
        err.contains("merging ") && err.contains(" (op "),
        "--progress into a file: {err:?}"
    );
}

/// One long merge op: a real file, the data frames of two more, and the
/// first blob of a fourth, which holds nodes to relations and so overlaps
/// every other blob. Long enough (half a second or more at -j1 on a fast
/// host) for a bar drawn five times a second to be seen moving.
fn one_long_merge_op(dir: &Path) -> PathBuf {
    let mut bytes = fs::read(data("sorted-kualalumpur.osm.pbf")).expect("read");
    for name in ["sorted-liechtenstein.osm.pbf", "mixed-osmosis.osm.pbf"] {
        bytes.extend(data_frames(&data(name)).concat());
    }
    let spanning = data_frames(&data("sorted-raw-nodense-mixed.osm.pbf"));
    bytes.extend(spanning.first().expect("a data frame"));
    let out = dir.join("one-op.osm.pbf");
    fs::write(&out, bytes).expect("write");
    out
}

#[test]
fn the_merge_bar_moves_during_a_merge_op() {
    let dir = tempfile::tempdir().expect("dir");
    let input = one_long_merge_op(dir.path());
    let mut index = bin("pbf-index");
    index.arg("-q").arg(&input);
    let plan = run_with_input(bin("pbf-overlap"), &succeeds(index));
    let ops = String::from_utf8_lossy(&plan.stdout)
        .matches("\"type\":\"merge\"")
        .count();
    assert_eq!(ops, 1, "the input must make one merge op");
    fs::write(dir.path().join("plan"), &plan.stdout).expect("plan");
    let _ = merge_on_terminal(dir.path(), "--progress --memory 2M", Some("err"));
    let err = String::from_utf8_lossy(&fs::read(dir.path().join("err")).expect("err")).into_owned();
    // Positions drawn while the one op was running: more than one, so the
    // bar moved before the op finished.
    let mut during: Vec<String> = screen_lines(&err)
        .into_iter()
        .filter(|l| l.starts_with("merging "))
        .filter_map(|l| {
            l.split("] ")
                .nth(1)
                .map(|r| r.split('/').next().unwrap_or("").to_owned())
        })
        .collect();
    during.dedup();
    assert!(
        during.len() >= 2,
        "the bar stood still during the merge op: {err:?}"
    );
}

/// The visible text of terminal output, one entry per drawn line: split at
/// carriage returns and newlines, ANSI escape sequences left out.
fn drawn_lines(tty: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(tty);
    let mut plain = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters final-byte.
            if chars.next() == Some('[') {
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain.split(['\r', '\n']).map(str::to_owned).collect()
}

/// On a 50-column terminal every bar fits its line (no eta then; the
/// message is elided).
#[test]
fn bars_fit_a_narrow_terminal() {
    let dir = tempfile::tempdir().expect("dir");
    write_unsorted_plan(dir.path());
    let cmd = format!(
        "stty cols 50 rows 20; '{}' --spool spool -j1 --memory 2M plan > out",
        env!("CARGO_BIN_EXE_pbf-merge")
    );
    let mut script = Command::new("script");
    script
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(dir.path())
        .env("TERM", "xterm");
    let o = run(script);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = drawn_lines(&o.stdout);
    assert!(
        lines.iter().any(|l| l.contains("merg")),
        "no bar drawn: {lines:?}"
    );
    for l in &lines {
        assert!(
            l.chars().count() <= 50,
            "{} columns: {l:?}",
            l.chars().count()
        );
    }
}

#[test]
fn one_progress_bar_at_a_time_on_a_terminal() {
    // pbf-merge and pbf-copy run at the same time; the line is the merge's
    // until it exits (its bar counts the ops it passes on), so the two never
    // take turns on one line. The copy's bar may follow the merge's last
    // frame, where copying goes on after the merge has ended (on a busy
    // machine), but no merge frame ever follows a copy frame.
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("unsorted-vex.osm.pbf");
    let cmd = format!(
        "pbf-sort -j1 --copier copy '{}' -o out.osm.pbf",
        input.display()
    );
    let mut script = Command::new("script");
    script
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(dir.path())
        .env("PATH", tools_path())
        .env("TERM", "xterm");
    let tty = String::from_utf8_lossy(&succeeds(script)).into_owned();
    assert!(tty.contains("merging"), "the merge bar: {tty:?}");
    let stages = bar_owners(&screen_lines(&tty));
    assert!(
        stages.windows(2).all(|w| w[0] < w[1]),
        "bars took turns on the line ({stages:?}): {tty:?}"
    );
    if let Some(copy) = tty.find("copying") {
        assert!(
            tty[..copy].contains("merged 3 ops"),
            "the copy drew before the merge's last frame: {tty:?}"
        );
    }
    assert!(dir.path().join("out.osm.pbf").exists());
}

/// The stages whose bars a terminal's frames ([`screen_lines`]) show, in
/// the order the line passed between them: 0 the index, 1 the merge, 2 the
/// copy; a stage that drew again after another is listed again.
fn bar_owners(frames: &[String]) -> Vec<u8> {
    let mut owners: Vec<u8> = Vec::new();
    for frame in frames {
        let owner = match frame.split(' ').next() {
            Some("indexing") => 0,
            Some("merging" | "merged") => 1,
            Some("copying") => 2,
            _ => continue,
        };
        if owners.last() != Some(&owner) {
            owners.push(owner);
        }
    }
    owners
}

#[test]
fn bar_owners_read_the_order_the_line_passed_in() {
    // Frames as a pseudo-terminal showed them on a busy machine: the copy
    // drew once the merge had ended.
    let handed_on = "indexing in.osm.pbf [ ] 0 B/1 MiB\r\u{1b}[2Kmerging op 1 (14 blobs) [ ] 0 B/1 MiB\
        \r\u{1b}[2Kmerged 3 ops (17 blobs) [=>] 1 MiB/1 MiB\r\u{1b}[2Kcopying [=> ] 5 KiB/1 MiB\r\u{1b}[2K";
    assert_eq!(bar_owners(&screen_lines(handed_on)), [0, 1, 2]);
    let fought = "merging op 1 [ ] 0 B/1 MiB\r\u{1b}[2Kcopying [ ] 0 B/1 MiB\
        \r\u{1b}[2Kmerging op 2 [ ] 0 B/1 MiB\r\u{1b}[2K";
    assert_eq!(bar_owners(&screen_lines(fought)), [1, 2, 1]);
}
