//! `--check`: is the input already in `Sort.Type_then_ID` order? It is
//! judged as `osmium fileinfo -e` judges it, by type and id alone: the
//! input is one file whose objects, in file order, never go back in (type,
//! id). So each blob's (type, id) never decrease inside it, and each blob
//! starts at or after the (type, id) the blob before it ends with. Repeated
//! objects, and versions of one object in any order, are in order (osmium
//! says the same of a merged file that kept an object twice), though the
//! planner still merges such blobs. Otherwise the answer says why, in a few
//! lines a user can act on.
//!
//! The index stream gives each file's blobs in file order, so the judge
//! takes them as they are read and keeps, per file, only the blob before
//! and the first faults: a check costs the same memory for any number of
//! blobs.

use std::fmt::Write;

use pbf_format::Key;
use pbf_format::key::packed_object;
use pbf_stream::BlobRecord;

use crate::plan::unpack;

/// What a reason needs of a blob.
#[derive(Clone, Copy, Debug)]
struct Blob {
    seq: u64,
    source: u32,
    offset: u64,
    first: u128,
    last: u128,
}

/// The faults of one file so far.
#[derive(Debug, Default)]
struct File {
    /// The blob read last.
    prev: Option<Blob>,
    /// The first blob whose keys decrease inside it, and how many more do.
    inside: Option<(Blob, u64)>,
    /// The first pair of neighbours where the second starts before the
    /// first ends, and how many more pairs do.
    between: Option<(Blob, Blob, u64)>,
}

/// The judge of the files of the index streams, fed their blobs in file
/// order.
#[derive(Debug, Default)]
pub struct Judge {
    /// By source id.
    files: Vec<File>,
}

impl Judge {
    /// Take the next blob of source `source` in file order.
    pub fn blob(&mut self, source: u32, b: &BlobRecord) {
        let i = source as usize;
        if self.files.len() <= i {
            self.files.resize_with(i + 1, File::default);
        }
        let file = &mut self.files[i];
        let blob = Blob {
            seq: b.seq,
            source,
            offset: b.offset,
            first: Key::from(b.first).packed(),
            last: Key::from(b.last).packed(),
        };
        if !b.sorted && !b.repeats && !b.versions_unsorted {
            match &mut file.inside {
                Some((_, more)) => *more += 1,
                None => file.inside = Some((blob, 0)),
            }
        }
        if let Some(prev) = file.prev {
            if packed_object(blob.first) < packed_object(prev.last) {
                match &mut file.between {
                    Some((_, _, more)) => *more += 1,
                    None => file.between = Some((prev, blob, 0)),
                }
            }
        }
        file.prev = Some(blob);
    }

    /// The reasons the files named `names` (by source id) are not in
    /// order; empty when each is. Each file is judged on its own (an index
    /// stream of several files is several questions); with more than one,
    /// each reason names its file.
    pub fn reasons(&self, names: &[String]) -> Vec<String> {
        let mut why = Vec::new();
        for (file, name) in self.files.iter().zip(names) {
            let found = file.inside.map(inside_reason).into_iter();
            let found = found.chain(file.between.map(between_reason));
            if names.len() == 1 {
                why.extend(found);
            } else {
                why.extend(found.map(|r| format!("{name}: {r}")));
            }
        }
        why
    }
}

/// The first blob whose keys decrease somewhere inside it.
fn inside_reason((first, more): (Blob, u64)) -> String {
    let msg = format!("{} is not sorted inside", describe(&first));
    and_more(msg, more, "more blob")
}

/// `msg`, and how many more places are like it, when any are.
fn and_more(mut msg: String, more: u64, noun: &str) -> String {
    if more > 0 {
        let _ = write!(msg, " (and {})", pbf_cli::plural(more, noun));
    }
    msg
}

/// The first pair of neighbouring blobs of one file where the second starts
/// before the first ends, in (type, id) terms.
fn between_reason((a, b, more): (Blob, Blob, u64)) -> String {
    let before = b.last < a.first;
    let (a, b) = (describe(&a), describe(&b));
    let msg = match before {
        true => format!("blobs out of order: {b} should come before {a}"),
        false => format!("{b} overlaps {a}"),
    };
    and_more(msg, more, "more such pair")
}

/// "blob 7 at offset 123456 (way 5..900)", with the source id when not 0.
fn describe(s: &Blob) -> String {
    let (first, last) = (unpack(s.first), unpack(s.last));
    let source = match s.source {
        0 => String::new(),
        n => format!(" of source {n}"),
    };
    let last_kind = match last.kind == first.kind {
        true => String::new(),
        false => format!("{} ", last.kind.name()),
    };
    let range = format!("{} {}..{last_kind}{}", first.kind.name(), first.id, last.id);
    format!("blob {}{source} at offset {} ({range})", s.seq, s.offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::way;
    use pbf_format::{Key, Kind};

    /// The reasons for one file's blobs, numbered in the order given.
    fn check(records: Vec<BlobRecord>) -> Vec<String> {
        let mut judge = Judge::default();
        for (i, mut b) in records.into_iter().enumerate() {
            b.seq = i as u64;
            judge.blob(0, &b);
        }
        judge.reasons(&["f.osm.pbf".to_owned()])
    }

    fn inside(mut b: BlobRecord, repeats: bool, versions_unsorted: bool) -> BlobRecord {
        (b.sorted, b.repeats, b.versions_unsorted) = (false, repeats, versions_unsorted);
        b
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
        assert_eq!(
            check(vec![inside(way(1, 10, 100, 10), false, false)]),
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
        let repeats = inside(way(11, 20, 130, 10), true, false);
        let records = vec![way(1, 10, 100, 10), way(10, 10, 110, 10), repeats];
        assert!(check(records).is_empty());
    }

    #[test]
    fn versions_of_one_object_are_in_order_in_any_order() {
        let versions = inside(way(11, 20, 130, 10), false, true);
        let mut ends_late = way(1, 10, 100, 10);
        ends_late.last = Key::new(Kind::Way, 10, 3).into();
        let records = vec![ends_late.clone(), way(10, 10, 110, 10), versions];
        assert!(check(records).is_empty());
        let mut back = way(9, 10, 120, 10);
        back.first = Key::new(Kind::Way, 9, 7).into();
        assert_eq!(
            check(vec![ends_late, back]),
            ["blob 1 at offset 120 (way 9..10) overlaps blob 0 at offset 100 (way 1..10)"]
        );
    }

    #[test]
    fn every_bad_place_is_counted() {
        let a = inside(way(1, 10, 100, 10), false, false);
        let b = inside(way(11, 20, 110, 10), false, false);
        let why = check(vec![a, b, way(5, 30, 120, 10), way(21, 40, 130, 10)]);
        assert_eq!(
            why,
            [
                "blob 0 at offset 100 (way 1..10) is not sorted inside (and 1 more blob)",
                "blob 2 at offset 120 (way 5..30) overlaps blob 1 at offset 110 (way 11..20) \
                 (and 1 more such pair)"
            ]
        );
    }

    #[test]
    fn several_files_are_judged_each_on_its_own() {
        let mut judge = Judge::default();
        judge.blob(0, &way(1, 10, 100, 10));
        let names = ["a.osm.pbf".to_owned(), "b.osm.pbf".to_owned()];
        judge.blob(1, &way(1, 10, 100, 10));
        assert!(judge.reasons(&names).is_empty());
        judge.blob(1, &inside(way(20, 30, 200, 10), false, false));
        let why = judge.reasons(&names);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].starts_with("b.osm.pbf: blob 0"), "{why:?}");
    }
}
