//! Real importers read pbf-sort's outputs (issue 61, from downloaded
//! extracts to the database): osm2pgsql 1.8 into a throwaway PostgreSQL +
//! PostGIS cluster (util::postgres) refuses the unsorted files and imports
//! pbf-sort's output as it imports `osmium sort`'s (the same row counts);
//! two extracts of different dates merged with `--latest` import as the
//! oracle's merge does; and `osmium extract`, which checks order and unique
//! ids, reads every sorted output.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::util::*;

/// Whether osmium finds an id below zero in `path` (osm2pgsql refuses
/// those whatever the order).
fn has_negative_ids(path: &Path) -> bool {
    let info = fileinfo(path);
    let minid = info["data"]["minid"].as_object().expect("minid");
    minid.values().any(|v| v.as_i64().expect("an id") < 0)
}

/// `pbf-sort -q -O INPUTS -o DIR/NAME` with `options` first; must succeed.
fn sort_into(inputs: &[&Path], options: &[&str], dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let mut c = pbf_sort();
    c.arg("-q")
        .arg("-O")
        .args(options)
        .args(inputs)
        .arg("-o")
        .arg(&out);
    succeeds(c);
    out
}

/// `osmium sort INPUT -o DIR/NAME`.
fn osmium_sort_into(input: &Path, dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let mut c = osmium();
    c.arg("sort").arg(input).arg("-o").arg(&out).arg("-O");
    succeeds(c);
    out
}

/// Import `file`, which osm2pgsql must refuse with `reason` on stderr.
fn assert_refused(cluster: &Cluster, file: &Path, reason: &str) {
    let (_, out) = cluster.import(file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "osm2pgsql imported {}",
        file.display()
    );
    assert!(
        stderr.contains(reason),
        "{}: osm2pgsql's refusal does not say '{reason}':\n{stderr}",
        file.display()
    );
}

#[test]
fn osm2pgsql_refuses_unsorted_files_and_imports_them_sorted_as_osmium_sorts_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::start();
    let unsorted: Vec<_> = good_files()
        .into_iter()
        .filter(|p| !osmium_ordered(p) && !has_negative_ids(p))
        .collect();
    assert!(unsorted.len() >= 5, "unsorted files: {unsorted:?}");
    for input in &unsorted {
        assert_refused(&cluster, input, "Input data is not ordered");
        let ours = sort_into(&[input.as_path()], &[], dir.path(), "ours.osm.pbf");
        let theirs = osmium_sort_into(input, dir.path(), "theirs.osm.pbf");
        let (a, b) = (cluster.import_ok(&ours), cluster.import_ok(&theirs));
        assert_eq!(
            cluster.counts(&a, None),
            cluster.counts(&b, None),
            "{}: rows differ from osmium sort's",
            name(input)
        );
    }
}

/// osm2pgsql refuses negative ids whatever the order: pbf-sort's output of
/// such a file is refused for them, and for nothing else.
#[test]
fn osm2pgsql_refuses_sorted_negative_ids_for_being_negative() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::start();
    let negative: Vec<_> = good_files()
        .into_iter()
        .filter(|p| has_negative_ids(p))
        .collect();
    assert!(!negative.is_empty(), "no file with negative ids");
    for input in &negative {
        let ours = sort_into(&[input.as_path()], &[], dir.path(), "ours.osm.pbf");
        assert_refused(&cluster, &ours, "Negative OSM object ids are not allowed");
    }
}

#[test]
fn osmium_extract_reads_every_sorted_output_with_unique_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut checked = 0;
    for input in good_files() {
        let out = sort_into(&[input.as_path()], &[], dir.path(), "ours.osm.pbf");
        let info = fileinfo(&out);
        if info["data"]["multiple_versions"] != false || has_negative_ids(&out) {
            continue; // history files repeat ids; negative ids have their test
        }
        if !osmium_ordered(&input) {
            assert!(
                !extract(&input, dir.path()).0,
                "{}: osmium extract read it",
                name(&input)
            );
        }
        let (ok, stderr, x) = extract(&out, dir.path());
        assert!(
            ok,
            "{}: osmium extract refused pbf-sort's output: {stderr}",
            name(&input)
        );
        assert_eq!(
            fileinfo(&x)["data"]["count"]["nodes"],
            info["data"]["count"]["nodes"],
            "{}: osmium extract of the whole world lost nodes",
            name(&input)
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} files checked");
}

/// `osmium extract -b -180,-90,180,90 FILE`: whether it succeeded, its
/// stderr, and the extract.
fn extract(file: &Path, dir: &Path) -> (bool, String, PathBuf) {
    let x = dir.join("extract.osm.pbf");
    let mut c = osmium();
    c.args(["extract", "-b", "-180,-90,180,90"])
        .arg(file)
        .arg("-o")
        .arg(&x)
        .arg("-O");
    let out = run(c);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), stderr, x)
}

/// Needs `pbf-sort --latest`. Two extracts of different dates: merged
/// without `--latest`, osm2pgsql refuses the repeated ids; merged with it,
/// they import as the oracle's merge does, the newer edits in the tables.
#[test]
fn osm2pgsql_imports_two_dates_merged_with_latest_as_the_oracle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dates = two_dates(&data("sorted-andorra.osm.pbf"), dir.path());
    let inputs = [dates.older.as_path(), dates.newer.as_path()];
    let cluster = Cluster::start();
    let both = sort_into(&inputs, &[], dir.path(), "both.osm.pbf");
    assert_refused(&cluster, &both, "appears more than once");
    let merged = sort_into(&inputs, &["--latest"], dir.path(), "latest.osm.pbf");
    let oracle = osmium_latest(&inputs, dir.path());
    let (a, b) = (cluster.import_ok(&merged), cluster.import_ok(&oracle));
    let newer = format!("name = '{NEWER_NAME}'");
    assert_eq!(
        cluster.counts(&a, None),
        cluster.counts(&b, None),
        "rows differ"
    );
    let edited = cluster.counts(&a, Some(&newer));
    assert_eq!(
        edited,
        cluster.counts(&b, Some(&newer)),
        "edited rows differ"
    );
    assert!(
        edited.iter().all(|(_, n)| *n > 0),
        "an edit is missing: {edited:?}"
    );
    let old = cluster.import_ok(&dates.older);
    assert!(
        cluster
            .counts(&old, Some(&newer))
            .iter()
            .all(|(_, n)| *n == 0)
    );
    let kept = opl(&merged);
    let kept: HashSet<&str> = kept.lines().collect();
    for line in edited_lines(&dates.newer_opl) {
        assert!(kept.contains(line), "not the newer version: {line}");
    }
}
