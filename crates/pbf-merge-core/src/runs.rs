//! Which blobs are merged as one sorted run. A chain of blobs that together
//! hold more than [`SMALL`] bytes decoded is a run of its own, loaded in
//! turn, consecutive small blobs of it gathered into loads of up to
//! [`SMALL`] (a sorted file of tiny blobs costs a load per megabyte, not a
//! decode, a channel and a stream block per blob). The blobs of every
//! smaller chain are gathered, in file order, into batches of up to
//! [`Budget::batch`] bytes: each batch is read in large stretches, decoded on
//! the pool into one block and sorted there, and merged as one run. A
//! shuffled file of five objects per blob is thus a handful of sorted runs
//! instead of half a million chains of one blob, each with its own stream,
//! heap entry and decoded block.

use std::sync::Arc;

use crate::chains::Chains;
use crate::input::{Inputs, Load};
use crate::run::Run;
use crate::spill::Budget;

/// Decoded bytes up to which a chain's blobs are batched with other small
/// chains', and up to which consecutive blobs of a chain are loaded
/// together. A blob of 8000 objects is larger, so chains of such blobs are
/// merged one blob at a time, as they always were.
pub(crate) const SMALL: u64 = 1 << 20;

/// The runs of a merge op's chains: one per large chain, then the batches
/// of the small ones.
pub(crate) fn plan(inputs: &Arc<Inputs>, chains: &Chains, budget: Budget) -> Vec<Run> {
    let estimate = |i: u32| inputs.blobs[i as usize].estimate();
    let mut runs = Vec::new();
    // Marked rather than listed: blob indexes follow (source id, offset),
    // so the marks give the small chains' blobs in file order unsorted.
    let mut small = vec![false; inputs.blobs.len()];
    for chain in chains.iter() {
        if chain.iter().map(|&i| estimate(i)).sum::<u64>() <= SMALL {
            chain.iter().for_each(|&i| small[i as usize] = true);
            continue;
        }
        let (loads, largest) = cut(chain, SMALL, estimate);
        runs.push(Run::chain(inputs, loads, 2 * largest));
    }
    let small: Vec<u32> = (0..inputs.blobs.len() as u32)
        .filter(|&i| small[i as usize])
        .collect();
    // Batches of the small chains' blobs.
    let (batches, _) = cut(&small, budget.batch, estimate);
    runs.extend(batches.into_iter().map(|batch| {
        let memory = batch.iter().map(|&i| estimate(i)).sum();
        Run::batch(inputs, batch, memory)
    }));
    runs
}

/// Cut `blobs` into consecutive groups of at most `limit` estimated bytes
/// (a larger blob is a group of its own); returns them and the largest
/// group's bytes.
fn cut(blobs: &[u32], limit: u64, estimate: impl Fn(u32) -> u64) -> (Vec<Load>, u64) {
    let (mut groups, mut largest) = (Vec::new(), 0);
    let (mut group, mut bytes) = (Vec::new(), 0u64);
    for &i in blobs {
        let more = estimate(i);
        if !group.is_empty() && bytes + more > limit {
            largest = largest.max(bytes);
            groups.push(std::mem::take(&mut group));
            bytes = 0;
        }
        group.push(i);
        bytes += more;
    }
    if !group.is_empty() {
        largest = largest.max(bytes);
        groups.push(group);
    }
    (groups, largest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_stay_within_the_limit_unless_one_blob_is_larger() {
        let sizes = [3u64, 4, 2, 9, 1, 1, 5];
        let (groups, largest) = cut(&[0, 1, 2, 3, 4, 5, 6], 6, |i| sizes[i as usize]);
        assert_eq!(
            groups,
            vec![vec![0], vec![1, 2], vec![3], vec![4, 5], vec![6]]
        );
        assert_eq!(largest, 9);
        assert_eq!(cut(&[], 6, |_| 1), (Vec::<Load>::new(), 0));
    }
}
