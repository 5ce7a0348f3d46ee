//! Real importers read pbf-sort's outputs (issue 61, from downloaded
//! extracts to the database): osm2pgsql 1.8 into a throwaway PostgreSQL +
//! PostGIS cluster (util::postgres) refuses the unsorted files and imports
//! pbf-sort's output as it imports `osmium sort`'s (the same row counts);
//! two extracts of different dates merged with `--latest` import as the
//! oracle's merge does; `osmium extract`, which checks order and unique
//! ids, reads every sorted output; and osmconvert reads the default ones.

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

/// `osmconvert --out-statistics` of a file: nodes, ways, relations, or
/// `None` when osmconvert cannot read it. Its exit status is not used: it
/// warns (and exits 92) about negative ids in osmium's order, which is not
/// its own, and still reads every object.
fn osmconvert_counts(path: &Path) -> Option<[u64; 3]> {
    let o = std::process::Command::new("osmconvert")
        .arg(path)
        .arg("--out-statistics")
        .output()
        .expect("osmconvert runs (Debian: osmctools)");
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    if text.contains("osmconvert Error") || !text.contains("nodes:") {
        return None;
    }
    let count = |what: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(what))
            .map_or(0, |n| n.trim().parse().expect("a count"))
    };
    Some([count("nodes:"), count("ways:"), count("relations:")])
}

/// osmium's object counts of a file: nodes, ways, relations.
fn osmium_counts(path: &Path) -> [u64; 3] {
    let info = fileinfo(path);
    let n = |k: &str| info["data"]["count"][k].as_u64().expect("count");
    [n("nodes"), n("ways"), n("relations")]
}

/// Default outputs carry no indexdata, so osmconvert (0.8 and 0.9 read only
/// BlobHeaders of 11 to 17 bytes) reads them wherever it reads the input's
/// kind of data, merged blobs included.
#[test]
fn osmconvert_reads_default_outputs() {
    // osmconvert has no --version (it exits 1): it must merely run.
    let runs = std::process::Command::new("osmconvert")
        .arg("-h")
        .output()
        .is_ok();
    assert!(
        runs,
        "osmconvert (Debian package osmctools) is required; install it"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cases: Vec<Vec<std::path::PathBuf>> =
        good_files().into_iter().map(|f| vec![f]).collect();
    cases.push(vec![
        data("unsorted-vex.osm.pbf"),
        data("unsorted-josm-negative-ids.osm.pbf"),
    ]);
    let mut read = 0;
    for inputs in cases {
        let out = dir.path().join("out.osm.pbf");
        let mut c = pbf_sort();
        c.arg("-q").arg("-O").args(&inputs).arg("-o").arg(&out);
        succeeds(c);
        let what = inputs
            .iter()
            .map(|p| name(p))
            .collect::<Vec<_>>()
            .join(" + ");
        // osmconvert reads dense nodes only: a merged output has them, a
        // copied one keeps the input's blocks. Where it reads the inputs,
        // it must count the same in the output (it counts the objects of a
        // history file, not their versions); else osmium's counts.
        let of_inputs: Option<Vec<[u64; 3]>> =
            inputs.iter().map(|p| osmconvert_counts(p)).collect();
        let want = match of_inputs {
            Some(counts) => counts
                .iter()
                .fold([0; 3], |a, c| [a[0] + c[0], a[1] + c[1], a[2] + c[2]]),
            None if inputs.len() > 1 => osmium_counts(&out),
            None => continue,
        };
        let got = osmconvert_counts(&out);
        assert_eq!(got, Some(want), "{what}: osmconvert's counts");
        read += 1;
    }
    assert!(read >= 10, "only {read} outputs were tried");
}
