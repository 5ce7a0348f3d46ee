//! Sorted blocks: the unit the merge moves around. A block keeps the merge
//! order of its elements ([`Order`]: packed key, rank and the two sizes the
//! block writer cuts by) apart from the elements themselves, which stay in
//! the [`Columns`] of their decoded input blob or spill packet: sorting,
//! galloping and the merge's comparisons touch 32-byte entries, and what
//! the merge hands the writer is a reference to an object, never the object.
//!
//! Ranks order equal keys (see [`Order::rank`]); the merge orders by
//! (key, rank), and elements of one blob with equal (key, rank) keep their
//! stored order.

use std::sync::Arc;

use pbf_format::block::{Columns, Obj, Shape};
use pbf_format::prefetch::prefetch;

/// The merge order of one element and its sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Order {
    /// [`pbf_format::Key::packed`] of the element.
    pub key: u128,
    /// What orders equal keys, as `osmium sort` does: the timestamp
    /// ([`Obj::tie_seconds`]) in the high 32 bits, then the input
    /// blob's position in (source id, offset) order ([`Order::blob`]).
    /// Unique across blobs, so across the merge's streams.
    pub rank: u64,
    /// Decoded memory: [`decoded_size`] plus this entry.
    pub approx: u32,
    /// [`Shape::encoded_bound`].
    pub encoded: u32,
}

impl Order {
    /// The order of an object that came from the blob at position `blob`.
    pub fn of(object: Obj<'_>, blob: u32) -> Order {
        let shape = object.shape();
        let approx = decoded_size(&shape) + size_of::<Order>();
        Order {
            key: object.key().packed(),
            rank: u64::from(object.tie_seconds()) << 32 | u64::from(blob),
            approx: u32::try_from(approx).unwrap_or(u32::MAX),
            encoded: u32::try_from(shape.encoded_bound()).unwrap_or(u32::MAX),
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

/// Elements in (key, rank) order, consumed from the front: objects of a
/// decoded input blob or spill packet, and the order in which to take them.
#[derive(Debug, Default)]
pub(crate) struct Block {
    order: Vec<Order>,
    pos: usize,
    /// The object of `order[0]` in `columns` (not 0 for a part of a block:
    /// [`Block::part`]).
    base: u32,
    columns: Arc<Columns>,
}

/// An element taken from a block: object `.1` of the block's columns, which
/// the writer keeps alive until the element is encoded.
pub(crate) struct Item<'b>(pub &'b Arc<Columns>, pub u32);

impl Item<'_> {
    /// The element, as an owned copy.
    #[cfg(test)]
    pub fn into_element(self) -> pbf_format::block::Element {
        self.0.get(self.1 as usize).to_element()
    }
}

impl Block {
    /// A block of objects each with its input blob's position, sorted
    /// unless already in order (as a spill packet is). Sorting moves the
    /// objects with their tags, way refs, locations and members (not the
    /// string table), so the merge reads each block front to back: with
    /// hundreds of blocks taking turns, an object next to the last one
    /// taken from its block is often still in the cache.
    pub fn from_packet(mut columns: Columns, blobs: Vec<u32>) -> Block {
        let order: Vec<Order> = columns
            .views()
            .zip(blobs)
            .map(|(object, blob)| Order::of(object, blob))
            .collect();
        let order = match order.is_sorted_by_key(Order::merge_key) {
            true => order,
            false => {
                let (order, index) = sorted_indexes(order);
                columns.reorder(&index);
                order
            }
        };
        Block {
            order,
            pos: 0,
            base: 0,
            columns: Arc::new(columns),
        }
    }

    /// A block of the objects of `parts` (decoded on several threads, in
    /// stored order), each with its input blob's position, sorted unless
    /// already in order: the objects are copied into one set of columns
    /// once, in sorted order ([`Columns::gather`]), where appending the
    /// parts and sorting the result copied them twice. `None` when they
    /// do not fit one set of columns.
    pub fn from_parts(parts: Vec<Columns>, blobs: Vec<u32>) -> Option<Block> {
        let order: Vec<Order> = parts
            .iter()
            .flat_map(Columns::views)
            .zip(blobs)
            .map(|(object, blob)| Order::of(object, blob))
            .collect();
        let (order, columns) = match order.is_sorted_by_key(Order::merge_key) {
            true => {
                let mut columns = Columns::with_capacity(order.len());
                parts
                    .iter()
                    .all(|part| columns.append(part))
                    .then_some((order, columns))?
            }
            false => {
                let (order, index) = sorted_indexes(order);
                (order, Columns::gather(&parts, &index)?)
            }
        };
        Some(Block {
            order,
            pos: 0,
            base: 0,
            columns: Arc::new(columns),
        })
    }

    /// A block of owned elements (by way of a spill packet), for tests.
    #[cfg(test)]
    pub fn new(
        elements: Vec<pbf_format::block::Element>,
        blobs: impl Iterator<Item = u32>,
    ) -> Block {
        let blobs: Vec<u32> = blobs.take(elements.len()).collect();
        let columns = Columns::from_elements(&elements);
        let views: Vec<Obj<'_>> = columns.views().collect();
        let c = pbf_format::compress::Compression::None;
        let packet = crate::packet::write_packet(&views, &blobs, c).expect("write packet");
        crate::packet::read_packet(&packet).expect("read packet")
    }

    /// The orders of the elements not yet taken.
    pub fn rest(&self) -> &[Order] {
        self.order.get(self.pos..).unwrap_or_default()
    }

    /// Take the next element, and start fetching the order entry the merge
    /// reads at this block's turn after next: when many streams are merged,
    /// the merge comes back to a block only after taking elements from the
    /// others, and by then the entry has left even the hardware
    /// prefetcher's view.
    pub fn take(&mut self) -> Option<(Order, Item<'_>)> {
        let order = *self.order.get(self.pos)?;
        let object = self.base + self.pos as u32;
        self.pos += 1;
        if let Some(after) = self.order.get(self.pos + 1) {
            prefetch(after);
        }
        Some((order, Item(&self.columns, object)))
    }

    /// Elements in the block (taken or not).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// The elements of a whole block (none taken) with keys in `lo..hi`,
    /// sharing its objects.
    pub fn part(&self, lo: u128, hi: u128) -> Block {
        let start = self.order.partition_point(|o| o.key < lo);
        let end = start + self.order[start..].partition_point(|o| o.key < hi);
        Block {
            order: self.order[start..end].to_vec(),
            pos: 0,
            base: self.base + start as u32,
            columns: Arc::clone(&self.columns),
        }
    }
}

/// The decoded memory the merge's budget counts for an object: what an
/// owned copy of it would take, which is more than its share of the
/// columns that hold it, so the budget errs on the safe side. An object
/// counts 128 bytes, a tag or a member 32 and a string 16 besides its
/// bytes, a way ref 8 and a location 16.
fn decoded_size(s: &Shape) -> usize {
    const OBJECT: usize = 128;
    const TAG: usize = 32;
    const MEMBER: usize = 32;
    const STRING: usize = 16;
    OBJECT
        + s.tags * (TAG + 2 * STRING)
        + s.tag_bytes
        + s.user.map_or(0, |user| user + STRING)
        + s.refs * size_of::<i64>()
        + s.locations * size_of::<(i64, i64)>()
        + s.members * (MEMBER + STRING)
        + s.role_bytes
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pbf_format::Kind;
    use pbf_format::block::{Changeset, Element, Node};

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
