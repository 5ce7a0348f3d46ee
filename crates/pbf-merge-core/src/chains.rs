//! Chains: the blobs of a run partitioned into the fewest sequences of
//! mutually non-overlapping blobs. Within a chain the blobs follow each other
//! in key order, so a chain is one sorted stream that needs only one decoded
//! blob in memory at a time. Two overlapping sorted extracts become two chains
//! however many blobs they have.
//!
//! Greedy by first key, placing each blob on the chain whose last key is the
//! largest one below the blob's first key (best fit). This is interval graph
//! colouring, for which greedy by start is optimal: the number of chains is
//! the largest number of blobs that share one key.

use std::collections::BTreeMap;

use pbf_format::Key;

/// Partition key ranges `[first, last]` into chains of strictly
/// non-overlapping ranges. Returns indexes into `ranges`, each chain in key
/// order; chains are ordered by their first range.
pub fn partition(ranges: &[(Key, Key)]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].0, i));
    let mut chains: Vec<Vec<usize>> = Vec::new();
    // Open chains by (last key, chain index).
    let mut ends: BTreeMap<(u128, usize), ()> = BTreeMap::new();
    for i in order {
        let (first, last) = ranges[i];
        let fit = ends
            .range(..(first.packed(), 0))
            .next_back()
            .map(|(k, _)| *k);
        let chain = match fit {
            Some(k) => {
                ends.remove(&k);
                k.1
            }
            None => {
                chains.push(Vec::new());
                chains.len() - 1
            }
        };
        chains[chain].push(i);
        ends.insert((last.packed(), chain), ());
    }
    chains
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::Kind;

    fn r(a: i64, b: i64) -> (Key, Key) {
        (Key::new(Kind::Node, a, 1), Key::new(Kind::Node, b, 1))
    }

    fn check_valid(ranges: &[(Key, Key)], chains: &[Vec<usize>]) {
        let mut seen: Vec<usize> = chains.iter().flatten().copied().collect();
        seen.sort();
        assert_eq!(seen, (0..ranges.len()).collect::<Vec<_>>());
        for c in chains {
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
        assert_eq!(chains, vec![vec![0, 1, 2], vec![3, 4, 5]]);
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
    fn best_fit_keeps_the_chain_count_minimal() {
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
        assert!(partition(&[]).is_empty());
    }
}
