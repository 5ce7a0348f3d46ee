//! Failures: the checks that a failed run said one clean line naming its
//! root cause (no panic, no abort, every other line an echo of it).

use crate::util::Outcome;

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
