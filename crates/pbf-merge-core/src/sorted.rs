//! Sorted blocks: the unit the merge moves around. A block keeps the merge
//! order of its elements ([`Order`]: packed key, rank and the two sizes the
//! block writer cuts by) apart from the elements themselves, so sorting,
//! galloping and the merge's comparisons touch 32-byte entries, and an
//! element moves only to be put in order (once, in a blob unsorted inside)
//! and when it is handed to the writer. A block decoded from an input blob
//! keeps its [`Columns`] instead and hands out references to its objects,
//! so nothing moves but the order entries.
//!
//! Ranks order equal keys (see [`Order::rank`]); the merge orders by
//! (key, rank), and elements of one blob with equal (key, rank) keep their
//! stored order.

use std::sync::Arc;

use pbf_format::block::{Columns, Element, MergeParts, Obj};

/// The merge order of one element and its sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Order {
    /// [`pbf_format::Key::packed`] of the element.
    pub key: u128,
    /// What orders equal keys, as `osmium sort` does: the timestamp
    /// ([`Element::tie_seconds`]) in the high 32 bits, then the input
    /// blob's position in (source id, offset) order ([`Order::blob`]).
    /// Unique across blobs, so across the merge's streams.
    pub rank: u64,
    /// Decoded memory: [`Element::approx_size`] plus this entry.
    pub approx: u32,
    /// [`Element::encoded_size_bound`].
    pub encoded: u32,
}

impl Order {
    /// The order of `element` of the input blob at position `blob`.
    pub fn of(element: Obj<'_>, blob: u32) -> Order {
        let approx = element.approx_size() + size_of::<Order>();
        Order {
            key: element.key().packed(),
            rank: u64::from(element.tie_seconds()) << 32 | u64::from(blob),
            approx: u32::try_from(approx).unwrap_or(u32::MAX),
            encoded: u32::try_from(element.encoded_size_bound()).unwrap_or(u32::MAX),
        }
    }

    /// The order of an object of columns, from its [`MergeParts`].
    pub fn of_parts(p: MergeParts, blob: u32) -> Order {
        let approx = p.approx + size_of::<Order>();
        Order {
            key: p.key.packed(),
            rank: u64::from(p.tie_seconds) << 32 | u64::from(blob),
            approx: u32::try_from(approx).unwrap_or(u32::MAX),
            encoded: u32::try_from(p.encoded).unwrap_or(u32::MAX),
        }
    }

    /// What the merge compares: key, then timestamp and input blob.
    pub fn merge_key(&self) -> (u128, u64) {
        (self.key, self.rank)
    }

    /// The input blob's position in (source id, offset) order.
    pub fn blob(&self) -> u32 {
        self.rank as u32
    }
}

/// Elements in (key, rank) order, consumed from the front.
#[derive(Debug, Default)]
pub(crate) struct Block {
    order: Vec<Order>,
    pos: usize,
    payload: Payload,
}

/// What a block's order entries refer to.
#[derive(Debug)]
enum Payload {
    /// Owned elements, in order.
    Elements(std::vec::IntoIter<Element>),
    /// A decoded input blob and, in order, the indexes of its objects.
    Columns(Arc<Columns>, Vec<u32>),
}

impl Default for Payload {
    fn default() -> Payload {
        Payload::Elements(Vec::new().into_iter())
    }
}

/// An element taken from a block: owned, or an object of the block's
/// columns (which the writer keeps alive until it is encoded).
pub(crate) enum Item<'b> {
    Element(Element),
    Column(&'b Arc<Columns>, u32),
}

impl Item<'_> {
    /// The element, owned (a copy for an object of columns).
    #[cfg(test)]
    pub fn into_element(self) -> Element {
        match self {
            Item::Element(e) => e,
            Item::Column(columns, i) => columns.get(i as usize).to_element(),
        }
    }
}

impl Block {
    /// A block of `elements` in stored order, each of the input blob at the
    /// given position, sorted unless already in order.
    pub fn new(elements: Vec<Element>, blobs: impl Iterator<Item = u32>) -> Block {
        let order: Vec<Order> = elements
            .iter()
            .zip(blobs)
            .map(|(e, blob)| Order::of(Obj::Element(e), blob))
            .collect();
        let (order, elements) = match order.is_sorted_by_key(Order::merge_key) {
            true => (order, elements),
            false => sort(order, elements),
        };
        Block {
            order,
            pos: 0,
            payload: Payload::Elements(elements.into_iter()),
        }
    }

    /// A block of the objects of one input blob, at position `blob`. Only
    /// the order entries and object indexes are sorted; the objects stay.
    pub fn from_columns(columns: Columns, blob: u32) -> Block {
        let order: Vec<Order> = (0..columns.len())
            .map(|i| Order::of_parts(columns.merge_parts(i), blob))
            .collect();
        let (order, index) = match order.is_sorted_by_key(Order::merge_key) {
            true => (order, (0..columns.len() as u32).collect()),
            false => sorted_indexes(order),
        };
        Block {
            order,
            pos: 0,
            payload: Payload::Columns(Arc::new(columns), index),
        }
    }

    /// The orders of the elements not yet taken.
    pub fn rest(&self) -> &[Order] {
        self.order.get(self.pos..).unwrap_or_default()
    }

    /// Take the next element, and start fetching what the merge reads at
    /// this block's next turn: the element after it and the order entry
    /// after that (see [`prefetch`]).
    pub fn take(&mut self) -> Option<(Order, Item<'_>)> {
        let order = *self.order.get(self.pos)?;
        let at = self.pos;
        self.pos += 1;
        if let Some(after) = self.order.get(self.pos + 1) {
            prefetch(after);
        }
        let item = match &mut self.payload {
            Payload::Elements(elements) => {
                let element = elements.next()?;
                if let Some(next) = elements.as_slice().first() {
                    prefetch(next);
                }
                Item::Element(element)
            }
            Payload::Columns(columns, index) => Item::Column(columns, *index.get(at)?),
        };
        Some((order, item))
    }

    /// Elements in the block (taken or not).
    pub fn len(&self) -> usize {
        self.order.len()
    }
}

/// Hint the CPU to load `value` into its caches. When many streams are
/// merged, the merge comes back to a block only after taking elements from
/// the others, and by then the block's next element (decoded on another
/// thread, so in no cache of this core) has left even the hardware
/// prefetcher's view: without the hint, each element taken waits for main
/// memory. A prefetch never faults and changes no data.
#[inline]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = std::ptr::from_ref(value).cast::<i8>();
        let last = size_of::<T>().saturating_sub(1);
        for offset in (0..last).step_by(64).chain([last]) {
            // SAFETY: SSE, which `prefetch` needs, is part of every x86_64
            // CPU; a prefetch reads no memory architecturally and never
            // faults, and the addresses lie inside `value` anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Sort by (key, rank), keeping stored order among equals. The sort runs on 32-byte entries that carry their
/// keys, so its comparisons stay in cache; the elements then move into
/// place along the cycles of the permutation, inside their own vector.
fn sort(order: Vec<Order>, mut elements: Vec<Element>) -> (Vec<Order>, Vec<Element>) {
    let (sorted, index) = sorted_indexes(order);
    let mut from: Vec<usize> = index.into_iter().map(|i| i as usize).collect();
    permute(&mut elements, &mut from);
    (sorted, elements)
}

/// Sort by (key, rank), keeping stored order among equals, and return the
/// sorted entries with the stored index of each.
fn sorted_indexes(order: Vec<Order>) -> (Vec<Order>, Vec<u32>) {
    let mut keyed: Vec<(u128, u64, u32)> = (0u32..)
        .zip(&order)
        .map(|(i, o)| (o.key, o.rank, i))
        .collect();
    keyed.sort_unstable();
    let sorted = keyed.iter().map(|k| order[k.2 as usize]).collect();
    (sorted, keyed.into_iter().map(|k| k.2).collect())
}

/// Reorder `items` so that item `j` is the one that was at `from[j]`.
/// `from` is used up as the record of which places are done.
fn permute<T>(items: &mut [T], from: &mut [usize]) {
    const DONE: usize = usize::MAX;
    for start in 0..from.len() {
        let mut j = start;
        while from[j] != DONE {
            let k = std::mem::replace(&mut from[j], DONE);
            if from[k] != DONE {
                items.swap(j, k);
            }
            j = k;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pbf_format::Kind;
    use pbf_format::block::{Changeset, Node};
    use proptest::strategy::Strategy;

    /// A bare node: all the engine's unit tests need is an id.
    pub(crate) fn node(id: i64) -> Element {
        Element::Node(Node {
            id,
            info: None,
            lat: 0,
            lon: 0,
            tags: Vec::new(),
        })
    }

    /// Version 1 of node 5 with a timestamp and a tag telling copies apart.
    fn stamped(timestamp_ms: i64, mark: &str) -> Element {
        let info = pbf_format::block::Info {
            version: 1,
            timestamp_ms,
            changeset: 0,
            uid: 0,
            user: Default::default(),
            visible: None,
        };
        let tag: pbf_format::block::Tag = (mark.as_bytes().into(), b"".as_slice().into());
        Element::Node(Node {
            id: 5,
            info: Some(info),
            lat: 0,
            lon: 0,
            tags: vec![tag],
        })
    }

    #[test]
    fn equal_keys_sort_by_timestamp_then_blob_then_stored_order() {
        let elements = vec![
            stamped(3_000, "a"),
            stamped(1_500, "b"),
            stamped(0, "c"),
            stamped(1_000, "d"),
            stamped(3_999, "e"),
            stamped(2_000, "f"),
        ];
        let mut block = Block::new(elements, [0, 0, 0, 0, 0, 1].into_iter());
        let mut got = Vec::new();
        while let Some((order, element)) = block.take() {
            let element = element.into_element();
            assert_eq!(
                order.blob(),
                if element.tags()[0].0[0] == b'f' { 1 } else { 0 }
            );
            got.push(element.tags()[0].0[0]);
        }
        assert_eq!(got, b"cbdfae");
    }

    proptest::proptest! {
        /// `permute` puts every item where the permutation says.
        #[test]
        fn permute_applies_the_permutation(
            from in (0usize..60).prop_flat_map(|n| {
                proptest::strategy::Just((0..n).collect::<Vec<_>>()).prop_shuffle()
            })
        ) {
            let items: Vec<usize> = (100..100 + from.len()).collect();
            let want: Vec<usize> = from.iter().map(|&i| items[i]).collect();
            let (mut got, mut scratch) = (items, from);
            permute(&mut got, &mut scratch);
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn blocks_sort_by_key_then_rank() {
        let elements = vec![
            node(3),
            Element::Changeset(Changeset { id: 1 }),
            node(-1),
            node(3),
        ];
        let mut block = Block::new(elements, [10, 11, 12, 9].into_iter());
        assert_eq!(block.len(), 4);
        let mut got = Vec::new();
        while let Some((order, element)) = block.take() {
            let element = element.into_element();
            assert_eq!(order.key, element.key().packed());
            got.push((element.kind(), element.id(), order.rank));
        }
        assert_eq!(
            got,
            vec![
                (Kind::Node, -1, 12),
                (Kind::Node, 3, 9),
                (Kind::Node, 3, 10),
                (Kind::Changeset, 1, 11),
            ]
        );
        assert!(block.rest().is_empty());
    }
}
