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

    /// The chains in order, each as indexes into the ranges.
    pub fn iter(&self) -> impl Iterator<Item = &[u32]> {
        self.starts
            .windows(2)
            .map(|w| &self.blobs[w[0] as usize..w[1] as usize])
    }
}

/// Partition `n` key ranges `[first, last]`, packed keys given by `range`
/// and read once each (a merge op's are taken from its plan), into chains
/// of strictly non-overlapping ranges. Chains hold indexes into the
/// ranges, each chain in key order; chains are ordered by their first
/// range. At most `u32::MAX` ranges.
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

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::{Key, Kind};

    fn partition(ranges: &[(Key, Key)]) -> Chains {
        partition_by(ranges.len(), |i| {
            (ranges[i].0.packed(), ranges[i].1.packed())
        })
    }

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

    #[test]
    fn identical_ranges_each_get_a_chain() {
        let ranges = vec![r(1, 1); 4];
        assert_eq!(partition(&ranges).len(), 4);
        assert_eq!(partition(&[]).len(), 0);
    }
}
