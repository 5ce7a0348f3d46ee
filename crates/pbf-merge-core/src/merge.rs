//! The k-way merge of sorted streams. A binary heap holds one head per
//! stream; the stream with the smallest head then gives away every item
//! below the second-smallest head (the smaller child of the root) in one
//! stretch, found by galloping (exponential then binary search), and its new
//! head replaces the top of the heap: one sift per stretch, not a heap
//! operation per item. Two interleaved sorted files with long runs on each
//! side thus cost a few comparisons per stretch, not per element.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::Result;
use crate::sorted::{Block, Order};
use crate::stream::Stream;
use crate::writer::{BlockWriter, Target};

/// Merge the streams into the writer in (key, rank) order.
pub(crate) fn merge<T: Target>(streams: Vec<Stream>, out: &mut BlockWriter<T>) -> Result<()> {
    let mut cursors = Vec::with_capacity(streams.len());
    let mut heap = BinaryHeap::with_capacity(streams.len());
    for (i, mut stream) in streams.into_iter().enumerate() {
        let block = next_nonempty(&mut stream)?.unwrap_or_default();
        if let Some(head) = block.rest().first() {
            heap.push(Reverse((head.merge_key(), i)));
        }
        cursors.push((block, stream));
    }
    while let Some(&Reverse((_, i))) = heap.peek() {
        let (block, stream) = &mut cursors[i];
        match drain(block, stream, second(&heap), out)? {
            // Replacing the top sifts down once; pop and push would sift twice.
            Some(head) => {
                if let Some(mut top) = heap.peek_mut() {
                    *top = Reverse((head, i));
                }
            }
            None => {
                heap.pop();
            }
        }
    }
    Ok(())
}

/// The second-smallest head of the heap: the smaller child of the root.
fn second(heap: &BinaryHeap<Reverse<((u128, u64), usize)>>) -> Option<(u128, u64)> {
    let children = heap.as_slice().iter().skip(1).take(2);
    children.map(|Reverse((head, _))| *head).min()
}

/// Give the writer every element of one stream below `bound`; returns the
/// stream's new head, or `None` when it is exhausted.
fn drain<T: Target>(
    block: &mut Block,
    stream: &mut Stream,
    bound: Option<(u128, u64)>,
    out: &mut BlockWriter<T>,
) -> Result<Option<(u128, u64)>> {
    loop {
        for _ in 0..gallop(block.rest(), bound) {
            if let Some((order, element)) = block.take() {
                out.push(order, element)?;
            }
        }
        if let Some(head) = block.rest().first() {
            return Ok(Some(head.merge_key()));
        }
        match next_nonempty(stream)? {
            Some(next) => *block = next,
            None => return Ok(None),
        }
    }
}

fn next_nonempty(stream: &mut Stream) -> Result<Option<Block>> {
    while let Some(block) = stream.next_block()? {
        if !block.rest().is_empty() {
            return Ok(Some(block));
        }
    }
    Ok(None)
}

/// How many leading entries of a sorted slice are below `bound` (all of
/// them when there is no bound), in O(log n) comparisons for a stretch of n.
pub(crate) fn gallop(items: &[Order], bound: Option<(u128, u64)>) -> usize {
    let Some(bound) = bound else {
        return items.len();
    };
    let below = |item: &Order| item.merge_key() < bound;
    if !items.first().is_some_and(below) {
        return 0;
    }
    // Invariant: items[hi / 2] is below the bound.
    let mut hi = 1;
    while hi < items.len() && below(&items[hi]) {
        hi *= 2;
    }
    let lo = hi / 2;
    let hi = hi.min(items.len());
    lo + items[lo..hi].partition_point(below)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sorted::tests::node;
    use crate::writer::{Codec, Cut, Encoded};
    use std::sync::Arc;

    /// (id, rank) pairs.
    type Items = Vec<(i64, u64)>;

    fn item(id: i64, rank: u64) -> (i64, u64) {
        (id, rank)
    }

    fn block(items: Items) -> Block {
        let ranks: Vec<u64> = items.iter().map(|i| i.1).collect();
        Block::new(items.iter().map(|i| node(i.0)).collect(), ranks.into_iter())
    }

    #[test]
    fn gallop_finds_the_stretch() {
        let items: Vec<Order> = (1..=100).map(|id| Order::of(&node(id), 0)).collect();
        let key = |id: i64| node(id).key().packed();
        assert_eq!(gallop(&items, None), 100);
        assert_eq!(gallop(&items, Some((key(1), 0))), 0);
        assert_eq!(gallop(&items, Some((key(1), 1))), 1);
        for n in [2, 3, 4, 5, 17, 64, 65, 99, 100] {
            assert_eq!(
                gallop(&items, Some((key(n), 0))),
                n as usize - 1,
                "bound {n}"
            );
        }
        assert_eq!(gallop(&items, Some((key(1000), 0))), 100);
        assert_eq!(gallop(&[], Some((key(1), 0))), 0);
    }

    /// Collects what the writer would write, block by block.
    struct Collect(Vec<(i64, u64)>);

    impl Target for Collect {
        fn write(&mut self, block: Encoded) -> Result<()> {
            let mut block = crate::spill::read_record(&block.bytes)?;
            while let Some((order, element)) = block.take() {
                self.0.push((element.id(), order.rank));
            }
            Ok(())
        }
    }

    fn run_merge(blocks: Vec<Vec<Items>>, dedupe: bool) -> Vec<(i64, u64)> {
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .expect("pool"),
        );
        let streams = blocks
            .into_iter()
            .map(|stream| {
                let loaders: Vec<crate::stream::Loader> = stream
                    .into_iter()
                    .map(|b| Box::new(move || Ok(block(b))) as crate::stream::Loader)
                    .collect();
                Stream::new(loaders, Arc::clone(&pool))
            })
            .collect();
        let codec = Codec::Spill(pbf_format::compress::Compression::None);
        let cut = Cut {
            elements: 3,
            encoded: 1 << 20,
            approx: 1 << 20,
        };
        let mut w = BlockWriter::new(Collect(Vec::new()), codec, cut, dedupe, pool);
        merge(streams, &mut w).expect("merge");
        w.finish().expect("finish").0
    }

    fn key(id: i64) -> u128 {
        node(id).key().packed()
    }

    proptest::proptest! {
        /// Any number of streams, each of sorted blocks (some empty), with
        /// random ids (ties included) and distinct ranks: the merge writes
        /// everything in (id, rank) order, like a plain sort.
        #[test]
        fn merge_equals_a_sort(streams in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(-50i64..50, 0..12), 0..4),
            0..20,
        )) {
            let mut rank = 0u64;
            let mut want = Vec::new();
            let blocks: Vec<Vec<Items>> = streams
                .into_iter()
                .map(|stream| {
                    // A stream is sorted across its blocks: sort its ids, then cut.
                    let mut ids: Vec<i64> = stream.iter().flatten().copied().collect();
                    ids.sort_unstable_by_key(|&id| key(id));
                    let mut ids = ids.into_iter();
                    stream
                        .iter()
                        .map(|b| {
                            ids.by_ref()
                                .take(b.len())
                                .map(|id| {
                                    rank += 1;
                                    want.push((id, rank));
                                    item(id, rank)
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect();
            want.sort_unstable_by_key(|&(id, rank)| (key(id), rank));
            proptest::prop_assert_eq!(run_merge(blocks, false), want);
        }
    }

    #[test]
    fn merges_long_stretches_and_keeps_ties_in_input_order() {
        // Stream A: ids 1..=10 and 30 (rank 0..); stream B: ids 11..=29 and 30 (rank 100..).
        let a = vec![
            (1..=5).map(|i| item(i, i as u64)).collect(),
            (6..=10).chain([30]).map(|i| item(i, i as u64)).collect(),
        ];
        let b = vec![vec![], (11..=30).map(|i| item(i, 100 + i as u64)).collect()];
        let got = run_merge(vec![b, a], false);
        let ids: Vec<i64> = got.iter().map(|x| x.0).collect();
        let mut want: Vec<i64> = (1..=30).collect();
        want.push(30);
        assert_eq!(ids, want);
        // The tie on id 30: stream A's element (rank 30) comes first.
        assert_eq!(&got[29..], &[(30, 30), (30, 130)]);
        let deduped = run_merge(
            vec![
                vec![(1..=3).map(|i| item(i, 10 + i as u64)).collect()],
                vec![(2..=4).map(|i| item(i, i as u64)).collect()],
            ],
            true,
        );
        assert_eq!(deduped, vec![(1, 11), (2, 2), (3, 3), (4, 4)]);
    }
}
