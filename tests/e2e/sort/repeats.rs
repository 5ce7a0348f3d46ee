//! A sorted file in which every key occurs twice (two copies of one extract
//! concatenated, then sorted): equal keys are judged by the merge's whole
//! order (timestamp, then input order), so sorting the sorted file again
//! copies every blob and writes the same bytes, while `--dedupe` still
//! merges the repeats away.

use std::path::{Path, PathBuf};

use pbf_stream::PlanRecord;

use crate::util::*;

/// Two copies of the fixture `name` in one file (`pbf-gen concat`), and
/// the file `pbf-sort` makes of them.
fn sorted_twice_over(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (one, two, sorted) = (
        data(name),
        dir.join("two.osm.pbf"),
        dir.join("sorted.osm.pbf"),
    );
    concat(&[one.clone(), one], &two);
    let mut c = pbf_sort();
    c.args(["-q", "-O"]).arg(&two).arg("-o").arg(&sorted);
    succeeds(c);
    (two, sorted)
}

#[test]
fn a_sorted_file_with_every_key_twice_is_copied_as_it_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for name in [
        "sorted-kualalumpur.osm.pbf",
        "sorted-raw-nodense-mixed.osm.pbf",
    ] {
        let (two, sorted) = sorted_twice_over(d, name);
        let (_, blobs) = index(&sorted);
        assert!(blobs.iter().any(|b| b.repeats), "{name}: keys repeat");
        let o = overlap(&[], &index_stream(&sorted));
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let plan: Vec<PlanRecord> = records(&o.stdout);
        let merges = plan
            .iter()
            .filter(|r| matches!(r, PlanRecord::Merge(_)))
            .count();
        assert_eq!(merges, 0, "{name}: the plan merges nothing");
        // Its keys repeat inside blobs and across their boundaries, in
        // order: a copier may copy it ahead as it does a sorted file (once
        // the first 16 blobs are read in order; a smaller file is planned
        // at once).
        let ahead = overlap(&["--sources", "1"], &index_stream(&sorted));
        let first = records(&ahead.stdout).into_iter().next();
        let early = matches!(first, Some(PlanRecord::Plan(ref p)) if p.early);
        assert_eq!(early, blobs.len() >= 16, "{name}: {first:?}");
        let again = d.join("again.osm.pbf");
        let mut c = pbf_sort();
        c.args(["-q", "-O"]).arg(&sorted).arg("-o").arg(&again);
        succeeds(c);
        let same = std::fs::read(&sorted).expect("read") == std::fs::read(&again).expect("read");
        assert!(same, "{name}: the re-sort writes the same bytes");
        assert_eq!(opl(&again), osmium_sorted_opl(&[&two], d), "{name}");
    }
}

#[test]
fn dedupe_still_drops_the_repeats_of_a_sorted_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let name = "sorted-kualalumpur.osm.pbf";
    let (_, sorted) = sorted_twice_over(d, name);
    let deduped = d.join("deduped.osm.pbf");
    let mut c = pbf_sort();
    c.arg("-q")
        .arg("--dedupe")
        .arg(&sorted)
        .arg("-o")
        .arg(&deduped);
    succeeds(c);
    assert_eq!(opl(&deduped), osmium_sorted_opl(&[&data(name)], d));
}
