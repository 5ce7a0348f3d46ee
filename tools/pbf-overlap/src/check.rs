//! `--check`: is the input already in `Sort.Type_then_ID` order? It is
//! judged as `osmium fileinfo -e` judges it, by type and id alone: the
//! input is one file whose objects, in file order, never go back in (type,
//! id). So each blob's (type, id) never decrease inside it, and each blob
//! starts at or after the (type, id) the blob before it ends with. Repeated
//! objects, and versions of one object in any order, are in order (osmium
//! says the same of a merged file that kept an object twice), though the
//! planner still merges such blobs. Otherwise the answer says why, in a few
//! lines a user can act on.

use std::fmt::Write;

use pbf_format::key::packed_object;

use crate::plan::{Segment, unpack};

/// The reasons the files named `names` (by source id) are not in order;
/// empty when each is. Each file is judged on its own (an index stream of
/// several files is several questions); with more than one, each reason
/// names its file. `segs` may be in any order.
pub fn reasons(segs: &[Segment], names: &[String]) -> Vec<String> {
    let mut in_file: Vec<&Segment> = segs.iter().collect();
    in_file.sort_unstable_by_key(|s| (s.source, s.offset));
    let mut why = Vec::new();
    for (source, name) in names.iter().enumerate() {
        let part: Vec<&Segment> = in_file
            .iter()
            .copied()
            .filter(|s| s.source as usize == source)
            .collect();
        let found = inside_reason(&part)
            .into_iter()
            .chain(between_reason(&part));
        if names.len() == 1 {
            why.extend(found);
        } else {
            why.extend(found.map(|r| format!("{name}: {r}")));
        }
    }
    why
}

/// The first blob whose keys decrease somewhere inside it.
fn inside_reason(in_file: &[&Segment]) -> Option<String> {
    let mut bad = in_file
        .iter()
        .filter(|s| !s.sorted && !s.repeats && !s.versions_unsorted);
    let first = bad.next()?;
    let mut msg = format!("{} is not sorted inside", describe(first));
    let more = bad.count();
    if more > 0 {
        let _ = write!(msg, " (and {more} more blob(s))");
    }
    Some(msg)
}

/// The first pair of neighbouring blobs of one file where the second starts
/// before the first ends, in (type, id) terms.
fn between_reason(in_file: &[&Segment]) -> Option<String> {
    let mut bad = in_file
        .windows(2)
        .map(|w| (w[0], w[1]))
        .filter(|(a, b)| a.source == b.source && packed_object(b.first) < packed_object(a.last));
    let (a, b) = bad.next()?;
    let mut msg = if b.last < a.first {
        format!(
            "blobs out of order: {} should come before {}",
            describe(b),
            describe(a)
        )
    } else {
        format!("{} overlaps {}", describe(b), describe(a))
    };
    let more = bad.count();
    if more > 0 {
        let _ = write!(msg, " (and {more} more such pair(s))");
    }
    Some(msg)
}

/// "blob 7 at offset 123456 (way 5..900)", with the source id when not 0.
fn describe(s: &Segment) -> String {
    let (first, last) = (unpack(s.first), unpack(s.last));
    let source = if s.source == 0 {
        String::new()
    } else {
        format!(" of source {}", s.source)
    };
    let kind = |k: pbf_format::Kind| k.name();
    let range = if first.kind == last.kind {
        format!("{} {}..{}", kind(first.kind), first.id, last.id)
    } else {
        format!(
            "{} {}..{} {}",
            kind(first.kind),
            first.id,
            kind(last.kind),
            last.id
        )
    };
    format!("blob {}{source} at offset {} ({range})", s.seq, s.offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::sort;
    use crate::plan::tests::way;
    use pbf_format::{Key, Kind};

    fn check(mut segs: Vec<Segment>) -> Vec<String> {
        for (i, s) in segs.iter_mut().enumerate() {
            s.seq = i as u32;
        }
        sort(&mut segs);
        reasons(&segs, &["f.osm.pbf".to_owned()])
    }

    #[test]
    fn ordered_blobs_pass_even_with_gaps() {
        assert!(check(vec![way(1, 10, 100, 10), way(11, 20, 130, 10)]).is_empty());
        assert!(check(Vec::new()).is_empty());
    }

    #[test]
    fn overlap_is_explained() {
        let why = check(vec![way(1, 1000, 100, 10), way(5, 900, 110, 10)]);
        assert_eq!(
            why,
            ["blob 1 at offset 110 (way 5..900) overlaps blob 0 at offset 100 (way 1..1000)"]
        );
    }

    #[test]
    fn unsorted_blob_is_explained() {
        let mut s = way(1, 10, 100, 10);
        s.sorted = false;
        assert_eq!(
            check(vec![s]),
            ["blob 0 at offset 100 (way 1..10) is not sorted inside"]
        );
    }

    #[test]
    fn permuted_blobs_are_explained() {
        let why = check(vec![way(11, 20, 100, 10), way(1, 10, 110, 10)]);
        assert_eq!(
            why,
            [
                "blobs out of order: blob 1 at offset 110 (way 1..10) should come before blob 0 at offset 100 (way 11..20)"
            ]
        );
    }

    #[test]
    fn repeated_keys_are_in_order() {
        let mut inside = way(11, 20, 130, 10);
        (inside.sorted, inside.repeats) = (false, true);
        let segs = vec![way(1, 10, 100, 10), way(10, 10, 110, 10), inside];
        assert!(check(segs).is_empty());
    }

    #[test]
    fn versions_of_one_object_are_in_order_in_any_order() {
        let mut inside = way(11, 20, 130, 10);
        (inside.sorted, inside.versions_unsorted) = (false, true);
        let mut ends_late = way(1, 10, 100, 10);
        ends_late.last = Key::new(Kind::Way, 10, 3).packed();
        let segs = vec![ends_late, way(10, 10, 110, 10), inside];
        assert!(check(segs).is_empty());
        let mut back = way(9, 10, 120, 10);
        back.first = Key::new(Kind::Way, 9, 7).packed();
        assert_eq!(
            check(vec![ends_late, back]),
            ["blob 1 at offset 120 (way 9..10) overlaps blob 0 at offset 100 (way 1..10)"]
        );
    }

    #[test]
    fn every_bad_place_is_counted() {
        let mut a = way(1, 10, 100, 10);
        a.sorted = false;
        let mut b = way(11, 20, 110, 10);
        b.sorted = false;
        let why = check(vec![a, b, way(5, 30, 120, 10), way(21, 40, 130, 10)]);
        assert_eq!(
            why,
            [
                "blob 0 at offset 100 (way 1..10) is not sorted inside (and 1 more blob(s))",
                "blob 2 at offset 120 (way 5..30) overlaps blob 1 at offset 110 (way 11..20) \
                 (and 1 more such pair(s))"
            ]
        );
    }

    #[test]
    fn several_files_are_judged_each_on_its_own() {
        let mut second = way(1, 10, 100, 10);
        second.source = 1;
        let mut unsorted = way(20, 30, 200, 10);
        unsorted.sorted = false;
        unsorted.source = 1;
        let mut segs = vec![way(1, 10, 100, 10), second, unsorted];
        sort(&mut segs);
        let names = ["a.osm.pbf".to_owned(), "b.osm.pbf".to_owned()];
        let why = reasons(&segs, &names);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].starts_with("b.osm.pbf: blob 0"), "{why:?}");
        assert!(reasons(&segs[..2], &names).is_empty());
    }
}
