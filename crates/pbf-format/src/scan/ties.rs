//! The tie scan: whether a block whose keys repeat is in the merge's order
//! of equal keys. The merge orders equal keys by their timestamp in whole
//! seconds ([`crate::key::tie_seconds`], 0 when unset), then by input
//! order; so a block is in that order when its keys never decrease and,
//! between two equal keys, the timestamp never decreases. The key scan
//! reads no timestamp: this scan runs only on blocks that the key scan
//! found with repeated keys (or whose first or last key a neighbouring
//! blob repeats), and reads each object's key and timestamp as the
//! decoder in [`crate::block`] does: Info fields merged over occurrences,
//! DenseInfo timestamps delta-coded, times the block's `date_granularity`.

use super::{each_element, object_id};
use crate::error::{Error, Result};
use crate::key::{Key, Kind, key_version, tie_seconds};
use crate::wire::{self, Reader, Value};

/// The timestamps at the ends of a block in the merge's order: what a
/// neighbouring blob's equal key is judged against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Ties {
    /// Tie seconds of the first object (the smallest of the first key's).
    pub first: u32,
    /// Tie seconds of the last object (the largest of the last key's).
    pub last: u32,
}

/// Whether the objects of blob `a` all come before those of blob `b` in the
/// merge's order, where `a`'s last key equals `b`'s first key and the
/// blobs' tie ends are as given: `a`'s last timestamp below `b`'s first,
/// or equal with `a` first in input order (source, then offset:
/// `a_first`).
pub fn follows_in_tie_order(a: Ties, b: Ties, a_first: bool) -> bool {
    a.last < b.first || (a.last == b.first && a_first)
}

/// The tie ends of a decompressed PrimitiveBlock when its objects are in
/// the merge's order ((key, tie seconds) never decreases in stored order);
/// `None` when they are not, or when it holds no objects.
pub fn scan_ties(data: &[u8]) -> Result<Option<Ties>> {
    let granularity = date_granularity(data)?;
    let mut order = TieOrder::default();
    let dense_nodes = |data: &[u8], order: &mut TieOrder| dense(data, granularity, order);
    each_element(data, &mut order, dense_nodes, |data, kind, order| {
        let (key, tie) = object(data, kind, granularity)?;
        order.push(key, tie);
        Ok(())
    })?;
    Ok(order.finish())
}

/// The block's `date_granularity` in milliseconds (field 18, 1000 when
/// absent), as the decoder reads it.
fn date_granularity(data: &[u8]) -> Result<i64> {
    let mut granularity = 1000i32;
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        if n == 18 {
            granularity = wire::expect_varint(v, "date_granularity")? as i32;
        }
    }
    if granularity <= 0 {
        return Err(Error::malformed(format!(
            "block date_granularity {granularity} not positive"
        )));
    }
    Ok(i64::from(granularity))
}

/// Tie seconds of a stored timestamp in `granularity` milliseconds.
fn seconds(raw: i64, granularity: i64) -> u32 {
    tie_seconds(raw.wrapping_mul(granularity))
}

/// Objects pushed in stored order: in the merge's order so far, and the
/// ends.
#[derive(Debug, Default)]
struct TieOrder {
    /// The first object's tie seconds, once one was pushed.
    first: Option<u32>,
    /// The last object's packed key and tie seconds.
    prev: Option<(u128, u32)>,
    out_of_order: bool,
}

impl TieOrder {
    fn push(&mut self, key: Key, tie: u32) {
        let now = (key.packed(), tie);
        if self.prev.is_some_and(|prev| now < prev) {
            self.out_of_order = true;
        }
        self.first.get_or_insert(tie);
        self.prev = Some(now);
    }

    fn finish(&self) -> Option<Ties> {
        match (self.first, self.prev) {
            (Some(first), Some((_, last))) if !self.out_of_order => Some(Ties { first, last }),
            _ => None,
        }
    }
}

/// The key and tie seconds of a Node, Way, Relation or ChangeSet (whose
/// Info the decoder does not read: its tie is 0).
fn object(data: &[u8], kind: Kind, granularity: i64) -> Result<(Key, u32)> {
    let mut r = Reader::new(data);
    let (mut id, mut version, mut timestamp) = (None, None, None);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, v) => id = Some(object_id(kind, v)?),
            (4, Value::Bytes(info)) if kind != Kind::Changeset => {
                info_fields(info, &mut version, &mut timestamp)?;
            }
            _ => {}
        }
    }
    let id = id.ok_or_else(|| Error::malformed(format!("{kind} without id")))?;
    // No Info, or one without a timestamp: 0, as the decoder reads it.
    let tie = seconds(timestamp.unwrap_or(0), granularity);
    Ok((Key::new(kind, id, key_version(version.unwrap_or(-1))), tie))
}

/// Info.version and Info.timestamp, the last occurrence of each winning.
fn info_fields(data: &[u8], version: &mut Option<i32>, timestamp: &mut Option<i64>) -> Result<()> {
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        match n {
            1 => *version = Some(wire::expect_varint(v, "Info field")? as i32),
            2 => *timestamp = Some(wire::expect_varint(v, "Info field")? as i64),
            _ => {}
        }
    }
    Ok(())
}

fn dense(data: &[u8], granularity: i64, order: &mut TieOrder) -> Result<()> {
    let (mut ids, mut versions, mut timestamps) = (Vec::new(), Vec::new(), Vec::new());
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        match n {
            1 => wire::each_varint(v, "DenseNodes.id", |x| ids.push(wire::decode_zigzag(x)))?,
            5 => {
                let info = wire::expect_bytes(v, "DenseInfo")?;
                dense_info(info, &mut versions, &mut timestamps)?;
            }
            _ => {}
        }
    }
    // Without a DenseInfo both are empty: no check, and every tie is 0.
    for (name, len) in [("version", versions.len()), ("timestamp", timestamps.len())] {
        if len != 0 && len != ids.len() {
            return Err(Error::malformed(format!(
                "dense info: {len} {name} entries for {} nodes",
                ids.len()
            )));
        }
    }
    let (mut id, mut timestamp) = (0i64, 0i64);
    for (i, delta) in ids.iter().enumerate() {
        id = id.wrapping_add(*delta);
        timestamp = timestamp.wrapping_add(timestamps.get(i).copied().unwrap_or(0));
        let version = versions.get(i).copied().unwrap_or(-1);
        let key = Key::new(Kind::Node, id, key_version(version));
        order.push(key, seconds(timestamp, granularity));
    }
    Ok(())
}

/// DenseInfo.version (plain int32) and DenseInfo.timestamp (delta-coded
/// sint64), appended over occurrences.
fn dense_info(data: &[u8], versions: &mut Vec<i32>, timestamps: &mut Vec<i64>) -> Result<()> {
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        match n {
            1 => wire::each_varint(v, "DenseInfo.version", |x| versions.push(x as i32))?,
            2 => wire::each_varint(v, "DenseInfo.timestamp", |x| {
                timestamps.push(wire::decode_zigzag(x))
            })?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Element;
    use crate::block::{EncodeOptions, Info, Node, Way, decode_columns, encode_block};

    fn info(version: i32, seconds: Option<i64>) -> Option<Info> {
        seconds.map(|s| Info {
            version,
            timestamp_ms: s * 1000,
            changeset: 0,
            uid: 0,
            user: Vec::new().into(),
            visible: None,
        })
    }

    fn node(id: i64, seconds: Option<i64>) -> Element {
        Element::Node(Node {
            id,
            info: info(1, seconds),
            lat: 0,
            lon: 0,
            tags: Vec::new(),
        })
    }

    fn way(id: i64, seconds: Option<i64>) -> Element {
        Element::Way(Way {
            id,
            info: info(1, seconds),
            tags: Vec::new(),
            refs: Vec::new(),
            locations: Vec::new(),
        })
    }

    fn block(elements: &[Element], dense: bool) -> Vec<u8> {
        let opts = EncodeOptions {
            dense_nodes: dense,
            ..EncodeOptions::default()
        };
        encode_block(elements, &opts)
    }

    /// The merge's verdict, from the full decoder: (key, tie seconds)
    /// never decreases; and the ends.
    fn reference(data: &[u8]) -> Option<Ties> {
        let columns = decode_columns(data).expect("decode");
        let order: Vec<(u128, u32)> = columns
            .views()
            .map(|o| (o.key().packed(), o.tie_seconds()))
            .collect();
        let in_order = order.windows(2).all(|w| w[0] <= w[1]);
        let (first, last) = (order.first()?, order.last()?);
        in_order.then_some(Ties {
            first: first.1,
            last: last.1,
        })
    }

    #[test]
    fn repeats_in_timestamp_order_are_in_order() {
        let elements = [
            node(1, Some(5)),
            node(1, Some(7)),
            node(2, Some(1)),
            way(3, Some(2)),
            way(3, Some(2)),
        ];
        for dense in [true, false] {
            let ties = scan_ties(&block(&elements, dense)).expect("scan");
            assert_eq!(ties, Some(Ties { first: 5, last: 2 }), "dense {dense}");
        }
    }

    #[test]
    fn a_later_timestamp_first_is_out_of_order() {
        for dense in [true, false] {
            let back = [node(1, Some(7)), node(1, Some(5))];
            assert_eq!(scan_ties(&block(&back, dense)).expect("scan"), None);
            // Unset sorts before set, as the merge orders it.
            let unset_first = [node(1, None), node(1, Some(5))];
            let ends = Some(Ties { first: 0, last: 5 });
            assert_eq!(scan_ties(&block(&unset_first, dense)).expect("scan"), ends);
            let unset_last = [way(1, Some(5)), way(1, None)];
            assert_eq!(scan_ties(&block(&unset_last, dense)).expect("scan"), None);
        }
        // Keys that decrease are out of order whatever the timestamps.
        let keys_back = [way(2, Some(1)), way(1, Some(2))];
        assert_eq!(scan_ties(&block(&keys_back, true)).expect("scan"), None);
        assert_eq!(scan_ties(&block(&[], true)).expect("scan"), None);
    }

    #[test]
    fn a_boundary_is_judged_by_timestamp_then_input_order() {
        let (a, b) = (Ties { first: 1, last: 5 }, Ties { first: 5, last: 9 });
        assert!(follows_in_tie_order(a, b, true));
        assert!(!follows_in_tie_order(a, b, false));
        assert!(follows_in_tie_order(a, Ties { first: 6, last: 6 }, false));
        assert!(!follows_in_tie_order(b, a, true));
    }

    proptest::proptest! {
        #[test]
        fn the_tie_scan_agrees_with_the_decoder(
            objects in proptest::collection::vec(
                (proptest::bool::ANY, 0i64..4, proptest::option::of(0i64..4)),
                0..24,
            ),
            dense in proptest::bool::ANY,
            sort_keys in proptest::bool::ANY,
        ) {
            let mut objects = objects;
            if sort_keys {
                objects.sort_by_key(|&(is_way, id, _)| (is_way, id));
            }
            let elements: Vec<Element> = objects
                .iter()
                .map(|&(is_way, id, seconds)| match is_way {
                    true => way(id, seconds),
                    false => node(id, seconds),
                })
                .collect();
            let data = block(&elements, dense);
            proptest::prop_assert_eq!(scan_ties(&data).expect("scan"), reference(&data));
        }
    }
}
