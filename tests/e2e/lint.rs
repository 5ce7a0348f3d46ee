//! Lints over the test sources, so the suite keeps running where users run
//! it: in a Nix build there is no `/usr/bin` (tools come through PATH), and in
//! a standalone clone there is no `../shared` beside the repository (real
//! files come from `tests/fixtures`).

use std::fs;
use std::path::{Path, PathBuf};

/// Directories of test sources, relative to the repository root: the root
/// package's tests, each crate's and tool's tests, and the bench tests.
fn test_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join("tests"), root.join("bench/tests")];
    for group in ["crates", "tools"] {
        for entry in fs::read_dir(root.join(group)).expect("read crates dir") {
            dirs.push(entry.expect("dir entry").path().join("tests"));
        }
    }
    dirs.retain(|d| d.is_dir());
    dirs
}

/// Every Rust source under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The test sources, plus every crate's and tool's `src` (unit tests live
/// beside the code) and the bench's, for the `../shared` lint.
fn all_sources(root: &Path, with_src: bool) -> Vec<PathBuf> {
    let mut dirs = test_dirs(root);
    if with_src {
        for group in ["crates", "tools"] {
            for entry in fs::read_dir(root.join(group)).expect("read dir") {
                dirs.push(entry.expect("dir entry").path().join("src"));
            }
        }
        dirs.push(root.join("bench/src"));
    }
    let mut files = Vec::new();
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        sources(dir, &mut files);
    }
    files.sort();
    files
}

/// `file:line: text` of every line of `files` for which `bad` says yes,
/// this file excepted (it spells the patterns it looks for).
fn offending(files: &[PathBuf], bad: impl Fn(&str) -> bool) -> Vec<String> {
    let me = Path::new(file!()).file_name().expect("file name");
    let mut hits = Vec::new();
    for file in files.iter().filter(|f| f.file_name() != Some(me)) {
        let text = fs::read_to_string(file).expect("read source");
        for (n, line) in text.lines().enumerate() {
            if bad(line) {
                hits.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    hits
}

/// Whether `line` names a tool by an absolute path in a system directory
/// (a tool under usr/bin, bin, usr/sbin, sbin or usr/local/bin of the root).
/// A `#!/bin/sh` line is allowed: `/bin/sh` is the one such path a Nix build
/// sandbox provides.
fn names_absolute_tool(line: &str) -> bool {
    let line = &line.replace("#!/bin/sh\\n", "");
    // Written without their slashes, so this file names no such path itself.
    let dirs = ["usr/local/bin", "usr/bin", "usr/sbin", "bin", "sbin"].map(|d| format!("/{d}/"));
    dirs.iter().any(|dir| {
        line.match_indices(dir).any(|(i, _)| {
            let before = line[..i].chars().next_back();
            // The usr/bin directory also contains `/bin/`; count a match only
            // where a path starts (not inside a longer one or a relative `x/bin/`).
            !before.is_some_and(|c| c.is_alphanumeric() || "_-./".contains(c))
        })
    })
}

#[test]
fn tests_name_no_absolute_tool_paths() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let hits = offending(&all_sources(root, false), names_absolute_tool);
    assert!(
        hits.is_empty(),
        "tests must find tools through PATH (a Nix build has no /usr/bin), \
         not by absolute path:\n{}",
        hits.join("\n")
    );
}

#[test]
fn no_source_names_the_sibling_shared_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sibling = format!("..{}shared", '/');
    let hits = offending(&all_sources(root, true), |l| l.contains(&sibling));
    assert!(
        hits.is_empty(),
        "tests read tests/fixtures (or $PBF_SORT_TEST_DATA), never the folder \
         beside a development checkout:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_lint_sees_what_it_must() {
    let usr = |dir: &str, tool: &str| format!("/usr/{dir}/{tool}");
    assert!(names_absolute_tool(&format!(
        r#"Command::new("{}")"#,
        usr("bin", "time")
    )));
    assert!(names_absolute_tool("'/bin/sh -c x'"));
    assert!(names_absolute_tool(&format!(
        "run {}",
        usr("sbin", "mkfs.xfs")
    )));
    assert!(!names_absolute_tool(r#"Command::new("time")"#));
    assert!(!names_absolute_tool(r##"format!("#!/bin/sh\ntouch x")"##));
    assert!(!names_absolute_tool(
        "target/debug/bin/x and $out/bin/pbf-sort"
    ));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = all_sources(root, true);
    for must in [
        "tests/e2e/util/mod.rs",
        "tools/pbf-index/tests/run.rs",
        "bench/tests/gen.rs",
        "crates/pbf-format/src/walk.rs",
    ] {
        assert!(files.contains(&root.join(must)), "the lint misses {must}");
    }
}
