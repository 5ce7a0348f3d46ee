//! Failures: the checks that a refused or failed run said one clean line
//! naming its cause, in words (no panic, no abort, no Rust Debug output,
//! every other line an echo of it), and left no end record behind.

use std::path::Path;
use std::process::Output;

use crate::util::Outcome;

/// Check a refused run: exit `code`, one line on stderr, a clean
/// `pbf-TOOL: error: ...` line holding each of `says` (one that ends in
/// `error: ` opens it), in words, and no end record on stdout (nothing at
/// all from a refusal before any work, exit 2). Returns the line.
pub fn refused(what: &str, o: &Output, code: i32, says: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{what}: exit; stderr: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: want one line: {err}");
    let line = err.trim_end_matches('\n').to_owned();
    assert!(
        line.starts_with("pbf-") && line.contains(": error: "),
        "{what}: not a clean error line: {line}"
    );
    for w in says {
        let holds = match w.ends_with("error: ") {
            true => line.starts_with(w),
            false => line.contains(w),
        };
        assert!(holds, "{what}: lacks {w:?}: {line}");
    }
    assert_eq!(debug_output(&line), None, "{what}: Debug output in {line}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains("\"type\":\"end\""),
        "{what}: an end record: {out}"
    );
    assert!(
        code != 2 || out.is_empty(),
        "{what}: wrote to stdout: {out}"
    );
    line
}

/// A driver run that fails in a stage: exit 1, the cause on the first line
/// holding each of `want`, in words, then only the driver's line naming the
/// stage (after the copier's line that its `--check-cmd` failed, when it
/// did), and no `out`. Returns the cause.
pub fn fails_in_a_stage(what: &str, o: &Output, out: &Path, want: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{what}: exit; stderr: {err}");
    let mut lines = err.lines();
    let cause = lines.next().unwrap_or_default();
    for w in want {
        assert!(
            cause.contains(w),
            "{what}: the first line lacks {w:?}: {err}"
        );
    }
    let rest: Vec<&str> = lines.collect();
    let checked = |l: &str| l.starts_with("pbf-copy: error: ") && l.contains("--check-cmd failed");
    let cascade = match rest.as_slice() {
        [] => true,
        [driver] => is_stage_failure(driver),
        [copier, driver] => checked(copier) && is_stage_failure(driver),
        _ => false,
    };
    assert!(cascade, "{what}: more than the cause: {err}");
    assert_eq!(debug_output(cause), None, "{what}: Debug output in {cause}");
    assert!(!out.exists(), "{what}: {} was written", out.display());
    cause.to_owned()
}

/// The first piece of `line` that looks like Rust `Debug` output: a struct
/// (`Name { field: `), a variant or tuple struct (`Name(`), or `Some(`.
fn debug_output(line: &str) -> Option<&str> {
    let bytes = line.as_bytes();
    let word_start = |end: usize| {
        let mut i = end;
        while i > 0 && bytes[i - 1].is_ascii_alphanumeric() {
            i -= 1;
        }
        i
    };
    for (at, _) in line.match_indices(" { ") {
        let start = word_start(at);
        let named = at > start && bytes[start].is_ascii_uppercase();
        let field: String = line[at + 3..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if named && !field.is_empty() && line[at + 3 + field.len()..].starts_with(':') {
            return Some(&line[start..]);
        }
    }
    for (at, _) in line.match_indices('(') {
        let start = word_start(at);
        if at > start && bytes[start].is_ascii_uppercase() {
            return Some(&line[start..]);
        }
    }
    None
}

#[test]
fn debug_output_is_recognised() {
    for debug in [
        "keys Key { kind: Way, id: 5, version: 0 }..",
        "end record says PlanEnd { ops: 3 }",
        "cause: Some(7)",
        "Io(Custom { kind: Other })",
    ] {
        assert!(debug_output(debug).is_some(), "{debug}");
    }
    for words in [
        "copy op w5 v1..w9 v2 starts before the op on line 2 ends (w7 v1)",
        "Broken pipe (os error 32)",
        "the end record does not match the ops before it (ops: 3 in the end record)",
    ] {
        assert_eq!(debug_output(words), None, "{words}");
    }
}

/// Lines that only echo an upstream failure (the root cause is on another line).
pub fn is_cascade(line: &str) -> bool {
    line.contains("upstream stage died")
        || line.contains("empty index stream")
        || line.contains("empty plan stream")
        || is_stage_failure(line)
}

/// The driver's line naming the stage that failed (its cause is the line of
/// that stage).
pub fn is_stage_failure(line: &str) -> bool {
    line.starts_with("pbf-sort: error: ")
        && line.contains(" stage '")
        && line.ends_with("; no output was written")
}

/// Check a failed run's stderr: no panic or abort, every line a clean
/// `tool: error: ...` line, and exactly one root cause, which names `file`
/// (and an offset when `offset` is set). A file that is not PBF at all is a
/// usage error (exit 2) whose line says what the file is instead of an
/// offset; anything else fails with exit 1. Returns the root-cause line.
pub fn check_clean_failure(what: &str, o: &Outcome, file: &str, offset: bool) -> String {
    let err = &o.stderr;
    let not_pbf = err.contains(", not PBF: ") || err.contains(", not a PBF file");
    assert_eq!(
        o.status.code(),
        Some(if not_pbf { 2 } else { 1 }),
        "{what}: exit {:?}; stderr:\n{err}",
        o.status
    );
    let offset = offset && !not_pbf;
    for bad in [
        "panicked",
        "RUST_BACKTRACE",
        "memory allocation",
        "Aborted",
        "stack overflow",
    ] {
        assert!(!err.contains(bad), "{what}: '{bad}' on stderr:\n{err}");
    }
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    for l in &lines {
        assert!(
            l.starts_with("pbf-") && l.contains(": error: "),
            "{what}: not a clean error line: {l}\nstderr:\n{err}"
        );
    }
    let mut roots: Vec<&&str> = lines.iter().filter(|l| !is_cascade(l)).collect();
    if roots.is_empty() && lines.len() == 1 {
        // A stage run alone: "stream ended without an end record" is the cause.
        roots = lines.iter().collect();
    }
    // A full filesystem is one cause, met by every stage that writes to it
    // (the merge's spool and the copier's output share it): each says so.
    if roots.len() > 1 && roots.iter().all(|l| l.contains("(os error 28)")) {
        roots.truncate(1);
    }
    assert_eq!(
        roots.len(),
        1,
        "{what}: want one root-cause line, got:\n{err}"
    );
    let root = roots[0].to_string();
    assert!(
        root.contains(file),
        "{what}: error does not name {file}: {root}"
    );
    if offset {
        assert!(
            root.contains("offset"),
            "{what}: error names no offset: {root}"
        );
    }
    root
}
