//! Chains: the blobs of a run partitioned into the fewest sequences of
//! mutually non-overlapping blobs. Within a chain the blobs follow each other
//! in key order, so a chain is one sorted stream that needs only one decoded
//! blob in memory at a time. Two overlapping sorted extracts become two chains
//! however many blobs they have.
//!
//! Greedy by first key, placing each blob on the chain whose last key is the
//! smallest, when that is below the blob's first key, else on a new chain.
//! This is interval graph colouring, for which greedy by start is optimal:
//! the number of chains is the largest number of blobs that share one key.
//! The open chains are a binary heap by last key: a shuffled file of
//! millions of small blobs keeps millions of chains open, and a heap's one
//! array costs a fraction of an ordered tree's nodes and searches.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use pbf_format::Key;

/// Chains in one list, each chain's blobs in key order: a merge op of
/// millions of small blobs has about as many chains, and a vector each
/// would cost more than the blobs' own entries ([`crate::input::InputBlob`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chains {
    /// Indexes into the ranges, chain after chain.
    blobs: Vec<u32>,
    /// Where each chain starts in `blobs`, and its end as the last entry.
    starts: Vec<u32>,
}

impl Chains {
    /// Number of chains.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// True when there are no chains.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The chains in order, each as indexes into the ranges.
    pub fn iter(&self) -> impl Iterator<Item = &[u32]> {
        self.starts
            .windows(2)
            .map(|w| &self.blobs[w[0] as usize..w[1] as usize])
    }

    /// Bytes the chains hold.
    pub fn heap_size(&self) -> usize {
        (self.blobs.capacity() + self.starts.capacity()) * size_of::<u32>()
    }
}

/// Partition key ranges `[first, last]` into chains of strictly
/// non-overlapping ranges. Chains hold indexes into `ranges`, each chain in
/// key order; chains are ordered by their first range. At most `u32::MAX`
/// ranges.
pub fn partition(ranges: &[(Key, Key)]) -> Chains {
    partition_by(ranges.len(), |i| {
        (ranges[i].0.packed(), ranges[i].1.packed())
    })
}

/// [`partition`] of `n` ranges of packed keys given by `range`, read once
/// each: a merge op's ranges are taken from its plan.
pub fn partition_by(n: usize, range: impl Fn(usize) -> (u128, u128)) -> Chains {
    assert!(u32::try_from(n).is_ok(), "too many ranges");
    let halves = |k: u128| ((k >> 64) as u64, k as u64);
    // Sorted as one array of (first key in halves, index): sorting indexes
    // by keys in another array was a cache miss per comparison.
    // Each range is read once, in index order; the last keys wait in an
    // array of their own, read in first-key order below.
    let mut lasts: Vec<(u64, u64)> = Vec::with_capacity(n);
    let mut firsts: Vec<(u64, u64, u32)> = (0..n as u32)
        .map(|i| {
            let (first, last) = range(i as usize);
            lasts.push(halves(last));
            let (hi, lo) = halves(first);
            (hi, lo, i)
        })
        .collect();
    firsts.sort_unstable();
    let mut chain_of = vec![0u32; n];
    let mut chains = 0u32;
    // Open chains by (last key in halves, chain index), smallest on top:
    // 24 bytes an entry, where a `u128` would align it to 32.
    let mut ends: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::new();
    for &(first_hi, first_lo, i) in &firsts {
        let (first, (hi, lo)) = ((first_hi, first_lo), lasts[i as usize]);
        if let Some(mut top) = ends.peek_mut() {
            if (top.0.0, top.0.1) < first {
                chain_of[i as usize] = top.0.2;
                *top = Reverse((hi, lo, top.0.2));
                continue;
            }
        }
        ends.push(Reverse((hi, lo, chains)));
        chain_of[i as usize] = chains;
        chains += 1;
    }
    drop((ends, lasts));
    // A counting sort by chain, keeping key order within each.
    let mut starts = vec![0u32; chains as usize + 1];
    for &c in &chain_of {
        starts[c as usize + 1] += 1;
    }
    for c in 0..chains as usize {
        starts[c + 1] += starts[c];
    }
    let mut next = starts.clone();
    let mut blobs = vec![0u32; n];
    for (.., i) in firsts {
        let slot = &mut next[chain_of[i as usize] as usize];
        blobs[*slot as usize] = i;
        *slot += 1;
    }
    Chains { blobs, starts }
}

/// A bound on the blobs of any one chain of `n` ranges of packed keys
/// given by `range`, found without forming the chains: `Some(m)` when no
/// chain can hold more than `m <= limit` ranges, `None` when a chain might
/// hold more than `limit`.
///
/// The ranges of a chain do not overlap, so their widths (last key minus
/// first) add up to at most the span of all the ranges: a chain of `m`
/// ranges needs `m` widths that fit the span together, and the `m`
/// smallest widths fit it if any `m` do. In a shuffled file of small blobs
/// nearly every blob spans most of the keys of its kinds, and no chain
/// holds more than a few dozen of them: a partition of half a million
/// blobs into as many chains is then not needed to know that every chain
/// is small. Widths are measured with the gaps between kinds (and id
/// signs) left out, which no range of one kind covers: in packed keys
/// they dwarf every blob's width.
pub fn longest_bound(
    n: usize,
    range: impl Fn(usize) -> (u128, u128),
    limit: usize,
) -> Option<usize> {
    let ranges: Vec<(u128, u128)> = (0..n).map(&range).collect();
    let place = Places::new(&ranges);
    let mut widths: Vec<u128> = ranges
        .iter()
        .map(|&(first, last)| place.place(last).saturating_sub(place.place(first)))
        .collect();
    let span = place.span;
    let smallest = match widths.len() > limit {
        true => widths.select_nth_unstable(limit).0,
        false => widths.as_mut_slice(),
    };
    smallest.sort_unstable();
    let mut sum = 0u128;
    let fit = smallest
        .iter()
        .take_while(|&&w| {
            sum = sum.saturating_add(w);
            sum <= span
        })
        .count();
    // All `limit` smallest fit: `limit + 1` widths might, so no bound.
    (fit < limit || n <= limit).then_some(fit)
}

/// A packed key's class: its kind and the sign of its id (the bits from
/// 96 up, see [`Key::packed`]).
fn class(key: u128) -> usize {
    (key >> 96) as usize & 7
}

/// Keys placed with the gaps between their classes left out: a key's
/// place is its offset in its class's range of the keys given, after the
/// ranges of the classes before it. Strictly increasing with the key, so
/// ranges that do not overlap as keys do not overlap as places.
struct Places {
    /// Per class: the smallest key given, and the place it has.
    starts: [(u128, u128); 8],
    /// The place of the largest key given.
    span: u128,
}

impl Places {
    fn new(ranges: &[(u128, u128)]) -> Places {
        let mut bounds = [(u128::MAX, 0u128); 8];
        for &(first, last) in ranges {
            for key in [first, last] {
                let b = &mut bounds[class(key)];
                *b = (b.0.min(key), b.1.max(key));
            }
        }
        let mut starts = [(0u128, 0u128); 8];
        let mut next = 0u128;
        for (start, &(low, high)) in starts.iter_mut().zip(&bounds) {
            if low <= high {
                *start = (low, next);
                next = next.saturating_add(high - low).saturating_add(1);
            }
        }
        Places {
            starts,
            span: next.saturating_sub(1),
        }
    }

    fn place(&self, key: u128) -> u128 {
        let (low, place) = self.starts[class(key)];
        place.saturating_add(key.saturating_sub(low))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::Kind;

    fn r(a: i64, b: i64) -> (Key, Key) {
        (Key::new(Kind::Node, a, 1), Key::new(Kind::Node, b, 1))
    }

    /// The chains as vectors, for comparing.
    fn vecs(chains: &Chains) -> Vec<Vec<usize>> {
        chains
            .iter()
            .map(|c| c.iter().map(|&i| i as usize).collect())
            .collect()
    }

    fn check_valid(ranges: &[(Key, Key)], chains: &Chains) {
        let chains = vecs(chains);
        let mut seen: Vec<usize> = chains.iter().flatten().copied().collect();
        seen.sort();
        assert_eq!(seen, (0..ranges.len()).collect::<Vec<_>>());
        for c in &chains {
            for w in c.windows(2) {
                assert!(ranges[w[0]].1 < ranges[w[1]].0, "{c:?} overlaps");
            }
        }
    }

    #[test]
    fn two_interleaved_sorted_files_are_two_chains() {
        // File A: [1,10] [11,20] [21,30]; file B: [5,15] [16,25] [26,35].
        let ranges = vec![
            r(1, 10),
            r(11, 20),
            r(21, 30),
            r(5, 15),
            r(16, 25),
            r(26, 35),
        ];
        let chains = partition(&ranges);
        check_valid(&ranges, &chains);
        assert_eq!(vecs(&chains), vec![vec![0, 1, 2], vec![3, 4, 5]]);
    }

    #[test]
    fn transitive_overlap_and_equal_endpoints() {
        // A=[1,1000000] covers everything; B and C touch at 16000: they may
        // not share a chain (a shared key must be merged, not concatenated).
        let ranges = vec![
            r(1, 1_000_000),
            r(8000, 16000),
            r(16000, 24000),
            r(24001, 30000),
        ];
        let chains = partition(&ranges);
        check_valid(&ranges, &chains);
        assert_eq!(chains.len(), 3);
    }

    #[test]
    fn greedy_keeps_the_chain_count_minimal() {
        let ranges = vec![r(1, 5), r(2, 3), r(4, 8), r(6, 7), r(9, 10), r(8, 12)];
        let chains = partition(&ranges);
        check_valid(&ranges, &chains);
        // No key lies in more than two ranges, so two chains suffice.
        assert_eq!(chains.len(), 2);
    }

    /// The longest chain of `ranges` as partitioned.
    fn longest(ranges: &[(Key, Key)]) -> usize {
        partition(ranges)
            .iter()
            .map(<[u32]>::len)
            .max()
            .unwrap_or(0)
    }

    fn bound(ranges: &[(Key, Key)], limit: usize) -> Option<usize> {
        let packed = |i: usize| (ranges[i].0.packed(), ranges[i].1.packed());
        longest_bound(ranges.len(), packed, limit)
    }

    #[test]
    fn wide_ranges_bound_their_chains_and_a_sorted_file_does_not() {
        // Three ranges across nearly everything, one narrow: no chain can
        // hold more than two of them.
        let wide = vec![r(1, 90), r(5, 100), r(2, 95), r(40, 41)];
        assert_eq!(bound(&wide, 16), Some(2));
        assert!(longest(&wide) <= 2);
        // Blobs of one kind each span most of that kind's keys; the gap
        // between the kinds does not make them narrow.
        let mixed = vec![
            (key((0, 1, 1)), key((0, 1000, 1))),
            (key((0, 2, 1)), key((0, 999, 1))),
            (key((1, 1, 1)), key((1, 1000, 1))),
            (key((1, 3, 1)), key((1, 998, 1))),
            (key((0, 5, 1)), key((1, 900, 1))),
        ];
        assert_eq!(bound(&mixed, 16), Some(2));
        // A sorted file is one long chain.
        let sorted: Vec<_> = (0..40).map(|i| r(10 * i, 10 * i + 9)).collect();
        assert_eq!(bound(&sorted, 16), None);
        assert_eq!(bound(&sorted, 100), Some(40));
        assert_eq!(bound(&[], 16), Some(0));
    }

    /// A key of kind `k` (index), id `id` and version `v`.
    fn key((k, id, v): (u8, i64, u32)) -> Key {
        Key::new(Kind::from_index(k).unwrap_or(Kind::Node), id, v)
    }

    proptest::proptest! {
        /// The bound holds: no chain is longer, whatever kinds and signs
        /// the ranges span.
        #[test]
        fn no_chain_is_longer_than_the_bound(
            ends in proptest::collection::vec(
                ((0u8..4, -50i64..50, 0u32..3), (0u8..4, -50i64..50, 0u32..3)),
                0..60,
            ),
            limit in 1usize..70,
        ) {
            let ranges: Vec<_> = ends
                .iter()
                .map(|&(a, b)| (key(a).min(key(b)), key(a).max(key(b))))
                .collect();
            if let Some(m) = bound(&ranges, limit) {
                proptest::prop_assert!(longest(&ranges) <= m);
                proptest::prop_assert!(m <= limit);
            }
        }
    }

    #[test]
    fn identical_ranges_each_get_a_chain() {
        let ranges = vec![r(1, 1); 4];
        assert_eq!(partition(&ranges).len(), 4);
        assert!(partition(&[]).is_empty());
    }
}
