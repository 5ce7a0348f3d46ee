//! `--check`: is the input already in `Sort.Type_then_ID` order? It is when
//! it is one file, the plan has no merge ops, and the copied blobs in key
//! order are the file's blobs in file order. Otherwise the answer says why,
//! in a few lines a user can act on.

use std::fmt::Write;

use crate::plan::{Segment, is_copy, runs, unpack};

/// The reasons the sorted segments of `sources` files are not in order;
/// empty when they are.
pub fn reasons(segs: &[Segment], sources: usize) -> Vec<String> {
    let mut why = Vec::new();
    if sources != 1 {
        why.push(format!(
            "the input holds {sources} files; only a single file can already be in order"
        ));
    }
    why.extend(merge_reason(segs));
    why.extend(order_reason(segs));
    why
}

fn merge_reason(segs: &[Segment]) -> Option<String> {
    let merges: Vec<&[Segment]> = runs(segs).filter(|r| !is_copy(r)).collect();
    let first = merges.first()?;
    let mut msg = match first {
        [a, b, ..] => format!("{} overlaps {}", describe(b), describe(a)),
        [a] => format!("{} is not sorted inside", describe(a)),
        [] => return None,
    };
    let blobs: usize = merges.iter().map(|r| r.len()).sum();
    if merges.len() > 1 || blobs > first.len() {
        let _ = write!(
            msg,
            " ({} run(s) of {blobs} blob(s) need merging in all)",
            merges.len()
        );
    }
    Some(msg)
}

/// The first pair of copied blobs whose key order is not their file order.
fn order_reason(segs: &[Segment]) -> Option<String> {
    let copied: Vec<&Segment> = runs(segs).filter(|r| is_copy(r)).flatten().collect();
    let (a, b) = copied
        .windows(2)
        .map(|w| (w[0], w[1]))
        .find(|(a, b)| a.source == b.source && a.offset > b.offset)?;
    Some(format!(
        "blobs out of order: {} should come before {}",
        describe(a),
        describe(b)
    ))
}

/// "blob 7 at offset 123456 (way 5..900)", with the source id when not 0.
fn describe(s: &Segment) -> String {
    let (first, last) = (unpack(s.first), unpack(s.last));
    let source = if s.source == 0 {
        String::new()
    } else {
        format!(" of source {}", s.source)
    };
    let kind = |k: pbf_stream::KindName| pbf_format::Kind::from(k).name();
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

    fn check(mut segs: Vec<Segment>) -> Vec<String> {
        for (i, s) in segs.iter_mut().enumerate() {
            s.seq = i as u32;
        }
        sort(&mut segs);
        reasons(&segs, 1)
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
    fn several_files_are_never_in_order() {
        let mut segs = vec![way(1, 10, 100, 10)];
        sort(&mut segs);
        assert_eq!(reasons(&segs, 2).len(), 1);
    }
}
