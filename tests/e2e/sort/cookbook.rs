//! The README's cookbook, run as written: every `sh` block in a fresh
//! directory holding real files under the names the block uses (the two
//! dated extracts made from a real file, util::dates), the `make` block as a
//! Makefile, and the `#!` block as the `my-merge` script the text describes.
//! A block that runs osm2pgsql reaches a throwaway PostgreSQL cluster
//! (util::postgres) through libpq's variables, and must fill its tables. A
//! command that fails, or a name the test cannot supply, fails the test, so
//! the README cannot drift from what the tools do.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

/// A fenced block of the cookbook: its language and its text.
struct Block {
    lang: String,
    text: String,
}

/// The fenced blocks between "## Cookbook" and the next "## " heading.
fn cookbook_blocks() -> Vec<Block> {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = fs::read_to_string(&readme).expect("read README.md");
    let start = text
        .find("\n## Cookbook")
        .expect("README has a Cookbook section");
    let rest = &text[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    let mut blocks = Vec::new();
    let mut lines = rest[..end].lines();
    while let Some(line) = lines.next() {
        let Some(lang) = line.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        blocks.push(Block {
            lang: lang.to_owned(),
            text: body.join("\n") + "\n",
        });
    }
    blocks
}

/// The real file behind each input name the cookbook uses.
const INPUTS: &[(&str, &str)] = &[
    ("in.osm.pbf", "unsorted-vex.osm.pbf"),
    ("f.osm.pbf", "sorted-andorra.osm.pbf"),
    ("a.osm.pbf", "sorted-andorra.osm.pbf"),
    ("b.osm.pbf", "sorted-liechtenstein.osm.pbf"),
    ("andorra.osm.pbf", "sorted-andorra.osm.pbf"),
    ("monaco.osm.pbf", "sorted-monaco-lz4.osm.pbf"),
    ("north.osm.pbf", "sorted-andorra.osm.pbf"),
    ("south.osm.pbf", "unsorted-vex.osm.pbf"),
    ("region.osh.pbf", "history-niue.osh.pbf"),
];

/// The database the osm2pgsql recipe names (`-d gis`).
const DATABASE: &str = "gis";

/// A fresh directory under `root` with the inputs, the extracts of two
/// dates and the `my-merge` script.
fn workdir(root: &Path, n: usize, script: &str, dates: &TwoDates) -> PathBuf {
    let dir = root.join(format!("block-{n}"));
    fs::create_dir_all(dir.join("data/tmp")).expect("mkdir");
    for (name, file) in INPUTS {
        fs::copy(data(file), dir.join(name)).expect("copy input");
    }
    fs::copy(&dates.older, dir.join("west-2025.osm.pbf")).expect("copy input");
    fs::copy(&dates.newer, dir.join("west-2026.osm.pbf")).expect("copy input");
    let my_merge = dir.join("my-merge");
    fs::write(&my_merge, script).expect("write my-merge");
    Command::new("chmod")
        .arg("755")
        .arg(&my_merge)
        .status()
        .expect("chmod");
    dir
}

/// Run one block in `dir`: a shell block under `bash -e -o pipefail`, a make
/// block as the Makefile of `make region.osm.pbf`; with `cluster`, libpq's
/// variables lead to it.
fn run_block(block: &Block, dir: &Path, cluster: Option<&Cluster>) -> std::process::Output {
    // Absolute paths in the text point into the work directory.
    let text = block.text.replace("/data/tmp/", "data/tmp/");
    let mut c = if block.lang == "make" {
        fs::write(dir.join("Makefile"), text).expect("write Makefile");
        let mut c = Command::new("make");
        c.arg("region.osm.pbf");
        c
    } else {
        let mut c = Command::new("bash");
        c.args(["-e", "-o", "pipefail", "-c", &text]);
        c
    };
    c.current_dir(dir).env("PATH", tools_path());
    if let Some(cluster) = cluster {
        c.envs(cluster.libpq_env());
    }
    c.output().expect("run block")
}

#[test]
fn every_cookbook_command_runs() {
    let blocks = cookbook_blocks();
    let scripts: Vec<&Block> = blocks.iter().filter(|b| b.text.starts_with("#!")).collect();
    assert_eq!(scripts.len(), 1, "one #! block (my-merge) in the cookbook");
    let script = &scripts[0].text;
    // On XFS the reflink commands clone; elsewhere --require-reflink fails.
    let xfs = LoopMount::xfs();
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = match &xfs {
        Ok(m) => m.path().to_path_buf(),
        Err(why) => {
            eprintln!("SKIPPED (reflink blocks): {why}");
            tmp.path().to_path_buf()
        }
    };
    let dates = two_dates(&data("sorted-andorra.osm.pbf"), tmp.path());
    let cluster = blocks
        .iter()
        .any(|b| b.text.contains("osm2pgsql"))
        .then(Cluster::start);
    if let Some(cluster) = &cluster {
        cluster.create_database(DATABASE);
    }
    let mut ran = 0;
    for (n, block) in blocks.iter().enumerate() {
        if block.text.starts_with("#!") {
            continue;
        }
        if xfs.is_err() && block.text.contains("reflink") {
            continue;
        }
        assert!(
            block.lang == "sh" || block.lang == "make",
            "cookbook block {n} has language {:?}",
            block.lang
        );
        let dir = workdir(&root, n, script, &dates);
        let imports = block.text.contains("osm2pgsql");
        let o = run_block(block, &dir, cluster.as_ref().filter(|_| imports));
        assert!(
            o.status.success(),
            "cookbook block {n} failed:\n{}\nstdout:\n{}\nstderr:\n{}",
            block.text,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if let (true, Some(cluster)) = (imports, &cluster) {
            let rows = cluster.counts(DATABASE, None);
            assert!(
                rows.iter().any(|(_, n)| *n > 0),
                "cookbook block {n} imported nothing: {rows:?}"
            );
        }
        fs::remove_dir_all(&dir).expect("clean block dir");
        ran += 1;
    }
    assert!(ran >= 8, "only {ran} cookbook blocks ran");
}
