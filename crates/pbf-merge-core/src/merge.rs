//! The k-way merge of sorted streams. A binary heap holds one head per
//! stream; the stream with the smallest head then gives away every item
//! below the second-smallest head (the smaller child of the root) in one
//! stretch, found by galloping (exponential then binary search), and its new
//! head replaces the top of the heap: one sift per stretch, not a heap
//! operation per item. Two interleaved sorted files with long runs on each
//! side thus cost a few comparisons per stretch, not per element.

use crate::error::Result;
use crate::sorted::{Block, Order};
use crate::stream::Stream;
use crate::writer::Parcels;

/// Merge the streams into `out` in (key, rank) order.
pub(crate) fn merge(streams: Vec<Stream>, out: &mut Parcels<'_>) -> Result<()> {
    let mut cursors = Vec::with_capacity(streams.len());
    let mut heads = Heads(Vec::with_capacity(streams.len()));
    for (i, mut stream) in streams.into_iter().enumerate() {
        let block = next_nonempty(&mut stream)?.unwrap_or_default();
        if let Some(head) = block.rest().first() {
            heads.push(Head {
                key: head.merge_key(),
                stream: i,
            });
        }
        cursors.push((block, stream));
    }
    while let Some(top) = heads.top() {
        let (block, stream) = &mut cursors[top.stream];
        match drain(block, stream, top.stream, heads.second(), out)? {
            Some(key) => heads.replace_top(Head { key, ..top }),
            None => heads.pop(),
        }
    }
    Ok(())
}

/// The head of one stream: its smallest (key, rank) and its index.
#[derive(Clone, Copy, Debug)]
struct Head {
    key: (u128, u64),
    stream: usize,
}

/// A binary min-heap of stream heads by key. Unlike `BinaryHeap`, a new top
/// is sifted down from a register: std's `PeekMut` writes it to the root and
/// reads it straight back, and that read waits until the store (and every
/// load before it) completes, once per stretch. Heads of different streams
/// never tie (a rank names the input blob, and a blob is in one stream), so
/// no tie needs breaking.
struct Heads(Vec<Head>);

impl Heads {
    fn top(&self) -> Option<Head> {
        self.0.first().copied()
    }

    /// The second-smallest key: the smaller child of the root.
    fn second(&self) -> Option<(u128, u64)> {
        self.0.iter().skip(1).take(2).map(|h| h.key).min()
    }

    fn push(&mut self, head: Head) {
        let mut pos = self.0.len();
        self.0.push(head);
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.0[parent].key <= head.key {
                break;
            }
            self.0[pos] = self.0[parent];
            pos = parent;
        }
        self.0[pos] = head;
    }

    /// Replace the top with `head` and restore the heap order.
    fn replace_top(&mut self, head: Head) {
        let items = &mut self.0;
        let n = items.len();
        let mut pos = 0;
        loop {
            let mut child = 2 * pos + 1;
            if child >= n {
                break;
            }
            // Arithmetic, not a branch: on shuffled input which child is
            // smaller is a coin toss, and a mispredicted branch per level
            // costs more than the comparison.
            if let Some(right) = items.get(child + 1) {
                child += usize::from(right.key < items[child].key);
            }
            if head.key <= items[child].key {
                break;
            }
            items[pos] = items[child];
            pos = child;
        }
        if let Some(slot) = items.get_mut(pos) {
            *slot = head;
        }
    }

    /// Remove the top.
    fn pop(&mut self) {
        if let Some(last) = self.0.pop() {
            if !self.0.is_empty() {
                self.replace_top(last);
            }
        }
    }
}

/// Give the writer every element of one stream (number `index`) below
/// `bound`; returns the stream's new head, or `None` when it is exhausted.
fn drain(
    block: &mut Block,
    stream: &mut Stream,
    index: usize,
    bound: Option<(u128, u64)>,
    out: &mut Parcels<'_>,
) -> Result<Option<(u128, u64)>> {
    loop {
        for _ in 0..gallop(block.rest(), bound) {
            if let Some((order, element)) = block.take() {
                out.push(order, element, index)?;
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
    use crate::writer::{BlockFormat, BlockWriter, Cut, Encoded, Target};
    use pbf_format::Keep;
    use std::sync::Arc;

    /// (id, input blob) pairs of nodes without timestamps, whose rank is
    /// therefore the blob.
    type Items = Vec<(i64, u32)>;

    fn item(id: i64, blob: u32) -> (i64, u32) {
        (id, blob)
    }

    fn block(items: Items) -> Block {
        let blobs: Vec<u32> = items.iter().map(|i| i.1).collect();
        Block::new(items.iter().map(|i| node(i.0)).collect(), blobs.into_iter())
    }

    proptest::proptest! {
        /// Pushes, replacements of the top and pops in any order: the top
        /// is always the smallest key held, and `second` the next one.
        #[test]
        fn heads_keep_the_smallest_on_top(
            start in proptest::collection::vec(0u64..1000, 0..40),
            steps in proptest::collection::vec(proptest::option::of(0u64..1000), 0..80),
        ) {
            let mut heads = Heads(Vec::with_capacity(start.len()));
            let mut model: Vec<(u128, u64)> = Vec::new();
            let mut rank = 0;
            let mut next = |k: u64| { rank += 1; (u128::from(k), rank) };
            for k in start {
                let key = next(k);
                heads.push(Head { key, stream: 0 });
                model.push(key);
            }
            for step in steps {
                model.sort_unstable();
                proptest::prop_assert_eq!(heads.top().map(|h| h.key), model.first().copied());
                proptest::prop_assert_eq!(heads.second(), model.get(1).copied());
                if model.is_empty() {
                    break;
                }
                match step {
                    Some(k) => {
                        let key = next(k);
                        heads.replace_top(Head { key, stream: 0 });
                        model[0] = key;
                    }
                    None => {
                        heads.pop();
                        model.remove(0);
                    }
                }
            }
        }
    }

    #[test]
    fn gallop_finds_the_stretch() {
        let items: Vec<Order> = block((1..=100).map(|id| item(id, 0)).collect())
            .rest()
            .to_vec();
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
            let mut block = crate::packet::read_packet(&block.bytes)?;
            while let Some((order, element)) = block.take() {
                self.0.push((element.into_element().id(), order.rank));
            }
            Ok(())
        }
    }

    fn run_merge(blocks: Vec<Vec<Items>>, keep: Keep) -> Vec<(i64, u64)> {
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
                Stream::new(loaders, Arc::clone(&pool), Arc::default())
            })
            .collect();
        let format = BlockFormat::SpillPacket(pbf_format::compress::Compression::None);
        let cut = Cut {
            elements: 3,
            encoded: 1 << 20,
            approx: 1 << 20,
        };
        let mut w = BlockWriter::new(Collect(Vec::new()), format, cut, keep, pool);
        let mut send = |p| w.push_parcel(p);
        let mut out = Parcels::new(keep, false, &mut send);
        merge(streams, &mut out).expect("merge");
        out.finish().expect("last parcel");
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
            let mut rank = 0u32;
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
                                    want.push((id, u64::from(rank)));
                                    item(id, rank)
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect();
            want.sort_unstable_by_key(|&(id, rank)| (key(id), rank));
            proptest::prop_assert_eq!(run_merge(blocks, Keep::All), want);
        }
    }

    #[test]
    fn merges_long_stretches_and_keeps_ties_in_input_order() {
        // Stream A: ids 1..=10 and 30 (rank 0..); stream B: ids 11..=29 and 30 (rank 100..).
        let a = vec![
            (1..=5).map(|i| item(i, i as u32)).collect(),
            (6..=10).chain([30]).map(|i| item(i, i as u32)).collect(),
        ];
        let b = vec![vec![], (11..=30).map(|i| item(i, 100 + i as u32)).collect()];
        let got = run_merge(vec![b, a], Keep::All);
        let ids: Vec<i64> = got.iter().map(|x| x.0).collect();
        let mut want: Vec<i64> = (1..=30).collect();
        want.push(30);
        assert_eq!(ids, want);
        // The tie on id 30: stream A's element (rank 30) comes first.
        assert_eq!(&got[29..], &[(30, 30), (30, 130)]);
        let deduped = run_merge(
            vec![
                vec![(1..=3).map(|i| item(i, 10 + i as u32)).collect()],
                vec![(2..=4).map(|i| item(i, i as u32)).collect()],
            ],
            Keep::Dedupe,
        );
        assert_eq!(deduped, vec![(1, 11), (2, 2), (3, 3), (4, 4)]);
    }
}
