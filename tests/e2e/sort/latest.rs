//! `pbf-sort --latest`: only the newest version of each object (highest
//! version, then later timestamp, then later input), an object whose newest
//! version is deleted left out, written as a current-state file. The oracle
//! is `osmium sort` into a history file, then `osmium time-filter`
//! (util::dates), compared as OPL: over every real file alone, over two
//! extracts of one area taken on different dates, given either way round,
//! and over exact ties.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::util::*;

/// `pbf-sort -q -O --latest INPUTS -o DIR/NAME`, which must succeed.
fn latest_into(inputs: &[&Path], dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let mut c = pbf_sort();
    c.arg("-q")
        .arg("-O")
        .arg("--latest")
        .args(inputs)
        .arg("-o")
        .arg(&out);
    succeeds(c);
    out
}

/// Check that `out` holds the oracle's objects of `inputs`, ordered, one
/// version each, in a file without history.
fn assert_latest_like_osmium(out: &Path, inputs: &[&Path], dir: &Path, what: &str) {
    let oracle = osmium_latest(inputs, dir);
    assert_eq!(
        opl(out),
        opl(&oracle),
        "{what}: objects differ from the oracle"
    );
    let info = fileinfo(out);
    assert_eq!(info["data"]["objects_ordered"], true, "{what}: not ordered");
    assert_eq!(
        info["data"]["multiple_versions"], false,
        "{what}: osmium finds multiple versions"
    );
    assert_eq!(
        info["header"]["with_history"], false,
        "{what}: the header requires HistoricalInformation"
    );
}

#[test]
fn latest_of_every_real_file_alone_matches_osmium_time_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    for input in good_files() {
        let what = name(&input);
        let out = latest_into(&[input.as_path()], dir.path(), "latest.osm.pbf");
        assert_latest_like_osmium(&out, &[input.as_path()], dir.path(), &what);
    }
}

#[test]
fn latest_of_a_history_file_drops_old_versions_and_deleted_objects() {
    let dir = tempfile::tempdir().expect("tempdir");
    for input in good_files()
        .into_iter()
        .filter(|p| name(p).starts_with("history-"))
    {
        let what = name(&input);
        let out = latest_into(&[input.as_path()], dir.path(), "latest.osm.pbf");
        let kept = ids(&opl(&out));
        let deleted = deleted_ids(&osmium_sorted_opl(&[input.as_path()], dir.path()));
        assert!(
            !deleted.is_empty(),
            "{what}: no object's newest version is deleted"
        );
        assert!(
            kept.is_disjoint(&deleted),
            "{what}: an object whose newest version is deleted is kept"
        );
        assert_latest_like_osmium(&out, &[input.as_path()], dir.path(), &what);
    }
}

/// An exact tie (same version, same timestamp): the later input wins, and
/// within one file the later copy; a higher version wins wherever it is.
#[test]
fn latest_breaks_an_exact_tie_by_the_later_input_then_the_later_copy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = |id: u32, version: u32, mark: &str| {
        format!("n{id} v{version} dV c1 t2020-01-01T00:00:00Z i1 ua Tmark={mark} x1 y1\n")
    };
    let a = [node(1, 2, "a1"), node(1, 2, "a2"), node(2, 1, "a")].concat();
    let b = [node(1, 1, "b"), node(2, 1, "b")].concat();
    let a = pbf_from_opl(&a, dir.path(), "a");
    let b = pbf_from_opl(&b, dir.path(), "b");
    let forward = [a.as_path(), b.as_path()];
    let reverse = [b.as_path(), a.as_path()];
    let f = latest_into(&forward, dir.path(), "forward.osm.pbf");
    assert_latest_like_osmium(&f, &forward, dir.path(), "a b");
    let r = latest_into(&reverse, dir.path(), "reverse.osm.pbf");
    assert_latest_like_osmium(&r, &reverse, dir.path(), "b a");
    assert_ne!(
        opl(&f),
        opl(&r),
        "the order of the inputs did not break the tie"
    );
}

/// The objects (`n123`, ...) of an OPL text.
fn ids(opl: &str) -> HashSet<String> {
    opl.lines().map(|l| field(l, 0).to_owned()).collect()
}

/// The `i`-th field of an OPL line.
fn field(line: &str, i: usize) -> &str {
    line.split(' ').nth(i).unwrap_or_default()
}

/// The objects of a sorted history OPL text whose last version is deleted.
fn deleted_ids(sorted: &str) -> HashSet<String> {
    let mut last = std::collections::HashMap::new();
    for line in sorted.lines() {
        last.insert(field(line, 0), field(line, 2) == "dD");
    }
    last.into_iter()
        .filter(|&(_, deleted)| deleted)
        .map(|(id, _)| id.to_owned())
        .collect()
}

#[test]
fn latest_of_two_dates_matches_osmium_either_way_round() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dates = two_dates(&data("sorted-andorra.osm.pbf"), dir.path());
    let forward = [dates.older.as_path(), dates.newer.as_path()];
    let reverse = [dates.newer.as_path(), dates.older.as_path()];
    let a = latest_into(&forward, dir.path(), "forward.osm.pbf");
    assert_latest_like_osmium(&a, &forward, dir.path(), "older newer");
    let b = latest_into(&reverse, dir.path(), "reverse.osm.pbf");
    assert_latest_like_osmium(&b, &reverse, dir.path(), "newer older");
    assert_eq!(
        opl(&a),
        opl(&b),
        "the order of the inputs changed the objects"
    );
    let kept = opl(&a);
    let kept: HashSet<&str> = kept.lines().collect();
    for line in edited_lines(&dates.newer_opl) {
        assert!(kept.contains(line), "the newer edit is missing: {line}");
    }
}

/// The generator and the oracle without `--latest`: every edit of the newer
/// extract is in the oracle as the newer extract has it (some of them newer
/// by timestamp alone), and so are objects only one of the two has.
#[test]
fn the_oracle_keeps_every_newer_edit_of_two_dates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dates = two_dates(&data("sorted-andorra.osm.pbf"), dir.path());
    let older = opl(&dates.older);
    let edits = edited_lines(&dates.newer_opl);
    assert!(edits.len() > 1000, "few edits: {}", edits.len());
    let id_version = |l: &str| format!("{} {}", field(l, 0), field(l, 1));
    let old_versions: HashSet<String> = older.lines().map(id_version).collect();
    let retimed = edits
        .iter()
        .filter(|l| old_versions.contains(&id_version(l)));
    assert!(retimed.count() > 0, "no edit keeps its version");
    let (old_ids, new_ids) = (ids(&older), ids(&dates.newer_opl));
    assert!(
        !old_ids.is_subset(&new_ids),
        "the newer extract has every object"
    );
    assert!(
        !new_ids.is_subset(&old_ids),
        "the older extract has every object"
    );
    for inputs in [
        [dates.older.as_path(), dates.newer.as_path()],
        [dates.newer.as_path(), dates.older.as_path()],
    ] {
        let oracle = opl(&osmium_latest(&inputs, dir.path()));
        let lines: HashSet<&str> = oracle.lines().collect();
        for line in &edits {
            assert!(lines.contains(line), "the oracle lacks the edit {line}");
        }
        assert_eq!(ids(&oracle), &old_ids | &new_ids, "the oracle's objects");
    }
}

/// A plain merge of two dates keeps both versions of the objects they share:
/// the run says so once, with the count osmium finds and the options that
/// fix it; `--latest` has nothing to say, and `-q` silences the warning.
#[test]
fn a_merge_that_keeps_an_object_twice_says_how_many_and_what_fixes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dates = two_dates(&data("sorted-andorra.osm.pbf"), dir.path());
    let out = dir.path().join("both.osm.pbf");
    let run_with = |extra: &[&str]| {
        let mut c = pbf_sort();
        c.args(extra)
            .arg(&dates.older)
            .arg(&dates.newer)
            .arg("-o")
            .arg(&out);
        let o = run(c);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let said = run_with(&["-O"]);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {said}");
    let text = opl(&out);
    let objects: Vec<&str> = text
        .lines()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    let repeats = objects.windows(2).filter(|w| w[0] == w[1]).count();
    assert!(repeats > 0, "the two dates share no object");
    let count = format!(" {repeats} objects repeat the type and id");
    assert!(lines[0].contains(&count), "{said}");
    assert!(
        lines[0].contains("--dedupe") && lines[0].contains("--latest"),
        "{said}"
    );
    assert_eq!(run_with(&["-O", "-q"]), "", "-q");
    assert_eq!(run_with(&["-O", "--latest"]), "", "--latest");
}

/// A history file sorted under a current-state name (`.osm.pbf`) is still
/// a history file, which importers misread: the run says so once and names
/// `--latest`; under an `.osh.pbf` name, with `--latest` or `-q` it says
/// nothing.
#[test]
fn history_sorted_to_an_osm_pbf_name_points_to_latest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("history-niue.osh.pbf");
    let said = |name: &str, extra: &[&str]| {
        let mut c = pbf_sort();
        c.args(extra)
            .arg(&input)
            .arg("-o")
            .arg(dir.path().join(name));
        let o = run(c);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let notice = said("sorted.osm.pbf", &[]);
    assert_eq!(notice.lines().count(), 1, "one line: {notice}");
    assert!(
        notice.contains("sorted.osm.pbf") && notice.contains("history"),
        "{notice}"
    );
    assert!(
        notice.contains("--latest") && !notice.contains("error"),
        "{notice}"
    );
    assert_eq!(said("sorted.osh.pbf", &[]), "", "an .osh.pbf name");
    assert_eq!(said("latest.osm.pbf", &["--latest"]), "", "--latest");
    assert_eq!(said("quiet.osm.pbf", &["-q"]), "", "-q");
}
