//! The committed man pages are what the code generates (no drift), every
//! binary and the driver have a page, and `mandoc -Tlint` finds nothing to
//! complain about.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn man_dir() -> PathBuf {
    repo().join("man")
}

#[test]
fn generated_pages_match_the_committed_ones() {
    let mut stale = Vec::new();
    for (name, page) in pbf_man::render_all().expect("render") {
        let committed = std::fs::read_to_string(man_dir().join(&name)).unwrap_or_default();
        if committed != page {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "man pages out of date: {stale:?}; run `cargo run -p pbf-man -- man/` and commit the result"
    );
}

/// Binary names listed as `[[bin]]` in the root Cargo.toml.
fn binaries() -> Vec<String> {
    let toml = std::fs::read_to_string(repo().join("Cargo.toml")).expect("root Cargo.toml");
    let mut bins = Vec::new();
    let mut in_bin = false;
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin {
            if let Some(name) = line.strip_prefix("name = ") {
                bins.push(name.trim_matches('"').to_owned());
            }
        }
    }
    bins
}

#[test]
fn every_binary_and_the_driver_have_a_page() {
    let bins = binaries();
    assert!(
        bins.iter().any(|b| b == "pbf-index"),
        "no [[bin]] found: {bins:?}"
    );
    for bin in bins.iter().map(String::as_str).chain(["pbf-sort"]) {
        assert!(
            man_dir().join(format!("{bin}.1")).is_file(),
            "man/{bin}.1 is missing: add the tool to TOOLS in crates/pbf-man/src/lib.rs \
             (with a template) and run `cargo run -p pbf-man -- man/`"
        );
    }
    for name in pbf_man::HAND_WRITTEN {
        assert!(man_dir().join(name).is_file(), "man/{name} is missing");
    }
}

#[test]
fn every_page_in_man_is_generated_or_hand_written() {
    let generated: Vec<String> = pbf_man::TOOLS.iter().map(|t| t.file_name()).collect();
    for page in pages() {
        let name = page
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(
            generated.contains(&name) || pbf_man::HAND_WRITTEN.contains(&name.as_str()),
            "man/{name} is neither generated nor listed in HAND_WRITTEN"
        );
    }
}

fn pages() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(man_dir())
        .expect("man/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn mandoc_lint_is_clean() {
    let pages = pages();
    assert!(pages.len() >= 3, "too few pages: {pages:?}");
    let out = Command::new("mandoc")
        .args(["-Tlint", "-Wstyle"])
        .args(&pages)
        .output()
        .expect("mandoc is needed for this test (Debian: apt-get install mandoc)");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "mandoc -Tlint:\n{report}"
    );
}
