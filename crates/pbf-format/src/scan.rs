//! The key scan: reads a decompressed PrimitiveBlock and extracts only the
//! keys (kind, id, version) of its objects, skipping tags, strings, coordinates
//! and everything else. This is what `pbf-index` runs on blobs without
//! trusted indexdata, so it must be fast and must agree exactly with the full
//! decoder in [`crate::block`].
//!
//! The scan runs the fast path in [`fast`] and, where that declines (malformed
//! input, unusual shapes), the checked scan here, which is the reference: it
//! gives every result and every error.
//!
//! Note the id encodings: `Node.id` and DenseNodes ids are zigzag `sint64`
//! (dense ids delta-coded), while Way, Relation and ChangeSet ids are plain
//! `int64`.

use crate::error::{Error, Result};
use crate::key::{Key, Kind, key_version, packed_object, packed_same_object};
use crate::wire::{self, Reader, Value};

mod fast;
mod ties;

pub use ties::{Ties, follows_in_tie_order, scan_ties};

/// What a block holds, in key terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Smallest key in the block.
    pub first: Key,
    /// Largest key in the block.
    pub last: Key,
    /// Objects per kind (node, way, relation, changeset).
    pub counts: [u64; 4],
    /// True when keys strictly increase in stored order.
    pub sorted: bool,
    /// True when keys never decrease in stored order but some key equals
    /// the one before it (a merged file that kept repeated objects). Never
    /// true together with `sorted`.
    pub repeats: bool,
    /// True when keys decrease somewhere, but only between versions of one
    /// object: (kind, id) never decreases. `osmium fileinfo -e` calls such a
    /// blob ordered. Never true together with `sorted` or `repeats`.
    pub versions_unsorted: bool,
    /// Objects stored right after an object of the same kind and id
    /// (another version of it, or the same one again): where (kind, id)
    /// never decreases, the objects a file of one version per object would
    /// not hold. Counted in any blob, meaningful only in those.
    pub duplicate_ids: u64,
    /// Some object has a negative id (JOSM's new objects, test data).
    pub negative_ids: bool,
}

impl Summary {
    /// Total number of objects.
    pub fn elements(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Accumulates keys in stored order into a [`Summary`]. Keys are kept
/// packed ([`Key::packed`]): this runs once per object of every scanned
/// blob, and a packed comparison is a single 128-bit compare.
///
/// A key above the one before it, the common case, only becomes `prev`: the
/// smallest key is the first one or one below its predecessor, and the
/// largest is the last one or one above its successor, so `first` and `last`
/// change only where keys do not increase.
#[derive(Clone, Debug)]
pub struct Accumulator {
    /// Smallest key so far, but for `prev`.
    first: u128,
    /// Largest key so far, but for `prev`.
    last: u128,
    /// The last key pushed; u128::MAX before the first, which no packed key
    /// reaches (the kind takes bits 97 and 98 only).
    prev: u128,
    counts: [u64; 4],
    decreasing: bool,
    ids_decreasing: bool,
    repeated: bool,
    duplicate_ids: u64,
    negative_ids: bool,
}

impl Default for Accumulator {
    fn default() -> Accumulator {
        Accumulator {
            first: u128::MAX,
            last: 0,
            prev: u128::MAX,
            counts: [0; 4],
            decreasing: false,
            ids_decreasing: false,
            repeated: false,
            duplicate_ids: 0,
            negative_ids: false,
        }
    }
}

impl Accumulator {
    /// Add the next key in stored order.
    pub fn push(&mut self, k: Key) {
        let p = k.packed();
        if p <= self.prev {
            self.not_above(p);
        }
        // u128::MAX, before the first key, is no object's.
        self.duplicate_ids += u64::from(packed_same_object(p, self.prev));
        self.prev = p;
        self.negative_ids |= k.id < 0;
        self.counts[k.kind.index()] += 1;
    }

    /// A key that is not above the one before it, or the first key.
    fn not_above(&mut self, p: u128) {
        let prev = self.prev;
        if prev == u128::MAX {
            self.first = p;
        } else if p == prev {
            self.repeated = true;
        } else {
            self.decreasing = true;
            self.ids_decreasing |= packed_object(p) < packed_object(prev);
            self.first = self.first.min(p);
            self.last = self.last.max(prev);
        }
    }

    /// The summary, or `None` when no key was pushed.
    pub fn finish(&self) -> Option<Summary> {
        if self.counts == [0; 4] {
            return None;
        }
        Some(Summary {
            first: Key::from_packed(self.first),
            last: Key::from_packed(self.last.max(self.prev)),
            counts: self.counts,
            sorted: !self.decreasing && !self.repeated,
            repeats: !self.decreasing && self.repeated,
            versions_unsorted: self.decreasing && !self.ids_decreasing,
            duplicate_ids: self.duplicate_ids,
            negative_ids: self.negative_ids,
        })
    }
}

/// Scan a decompressed PrimitiveBlock. `None` when it holds no objects.
pub fn scan_block(data: &[u8]) -> Result<Option<Summary>> {
    fast::block(data).map_or_else(|| scan_block_checked(data), Ok)
}

/// The reference scan: slower, but gives every error.
pub(crate) fn scan_block_checked(data: &[u8]) -> Result<Option<Summary>> {
    let mut acc = Accumulator::default();
    each_element(data, &mut acc, scan_dense, |data, kind, acc| {
        acc.push(scan_object(data, kind)?);
        Ok(())
    })?;
    Ok(acc.finish())
}

/// The checked walk of a decompressed PrimitiveBlock, for the key scan
/// and the tie scan: `dense` gets every DenseNodes message and `object`
/// every Node, Way, Relation and ChangeSet message with its kind, in
/// stored order, each with `sink`.
pub(crate) fn each_element<S>(
    data: &[u8],
    sink: &mut S,
    dense: impl Fn(&[u8], &mut S) -> Result<()>,
    object: impl Fn(&[u8], Kind, &mut S) -> Result<()>,
) -> Result<()> {
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        if n != 2 {
            continue;
        }
        let mut group = Reader::new(wire::expect_bytes(v, "PrimitiveGroup")?);
        while let Some((n, v)) = group.field()? {
            if n == 2 {
                dense(wire::expect_bytes(v, "DenseNodes")?, sink)?;
            } else if let Some((kind, what)) = element_kind(n) {
                object(wire::expect_bytes(v, what)?, kind, sink)?;
            }
        }
    }
    Ok(())
}

/// The kind and message name of PrimitiveGroup field `n`, but for
/// DenseNodes (field 2).
pub(crate) fn element_kind(n: u32) -> Option<(Kind, &'static str)> {
    match n {
        1 => Some((Kind::Node, "Node")),
        3 => Some((Kind::Way, "Way")),
        4 => Some((Kind::Relation, "Relation")),
        5 => Some((Kind::Changeset, "ChangeSet")),
        _ => None,
    }
}

/// One Node, Way, Relation or ChangeSet message: id (field 1) and Info.version.
fn scan_object(data: &[u8], kind: Kind) -> Result<Key> {
    let mut r = Reader::new(data);
    let (mut id, mut version) = (None, 0u32);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, v) => id = Some(object_id(kind, v)?),
            (4, Value::Bytes(info)) if kind != Kind::Changeset => version = info_version(info)?,
            _ => {}
        }
    }
    let id = id.ok_or_else(|| Error::malformed(format!("{kind} without id")))?;
    Ok(Key::new(kind, id, version))
}

/// Field 1 of a Node, Way, Relation or ChangeSet message: its id, zigzag
/// coded for a node only.
fn object_id(kind: Kind, v: Value<'_>) -> Result<i64> {
    match v {
        Value::Varint(x) if kind == Kind::Node => Ok(wire::decode_zigzag(x)),
        Value::Varint(x) => Ok(x as i64),
        _ => Err(Error::malformed(format!(
            "{kind} id has the wrong wire type"
        ))),
    }
}

fn info_version(data: &[u8]) -> Result<u32> {
    let mut r = Reader::new(data);
    let mut version = -1i32;
    while let Some((n, v)) = r.field()? {
        if n == 1 {
            version = wire::expect_varint(v, "Info.version")? as i32;
        }
    }
    Ok(key_version(version))
}

fn scan_dense(data: &[u8], acc: &mut Accumulator) -> Result<()> {
    let mut ids = Vec::new();
    let mut versions: Option<Vec<u32>> = None;
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        match n {
            1 => wire::each_varint(v, "DenseNodes.id", |x| ids.push(wire::decode_zigzag(x)))?,
            5 => versions = Some(dense_versions(wire::expect_bytes(v, "DenseInfo")?)?),
            _ => {}
        }
    }
    if let Some(vs) = versions.as_ref().filter(|vs| vs.len() != ids.len()) {
        return Err(Error::malformed(format!(
            "DenseNodes has {} ids but {} versions",
            ids.len(),
            vs.len()
        )));
    }
    let mut id = 0i64;
    for (i, delta) in ids.iter().enumerate() {
        id = id.wrapping_add(*delta);
        let version = versions.as_ref().map_or(0, |vs| vs[i]);
        acc.push(Key::new(Kind::Node, id, version));
    }
    Ok(())
}

fn dense_versions(data: &[u8]) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        if n == 1 {
            wire::each_varint(v, "DenseInfo.version", |x| out.push(key_version(x as i32)))?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;
    use prost::Message;

    fn info(v: i32) -> Option<proto::Info> {
        Some(proto::Info {
            version: Some(v),
            ..Default::default()
        })
    }

    #[test]
    fn scans_every_kind_with_the_right_id_encoding() {
        let block = proto::PrimitiveBlock {
            primitivegroup: vec![
                proto::PrimitiveGroup {
                    dense: Some(proto::DenseNodes {
                        id: vec![5, 2, -10], // 5, 7, -3
                        denseinfo: Some(proto::DenseInfo {
                            version: vec![1, 2, 3],
                            ..Default::default()
                        }),
                        lat: vec![0; 3],
                        lon: vec![0; 3],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                proto::PrimitiveGroup {
                    nodes: vec![proto::Node {
                        id: -9,
                        info: info(4),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                proto::PrimitiveGroup {
                    ways: vec![proto::Way {
                        id: 300,
                        info: info(2),
                        ..Default::default()
                    }],
                    relations: vec![proto::Relation {
                        id: -1,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
        .encode_to_vec();
        let s = scan_block(&block).expect("scan").expect("non-empty");
        assert_eq!(s.counts, [4, 1, 1, 0]);
        assert_eq!(s.first, Key::new(Kind::Node, -3, 3));
        assert_eq!(s.last, Key::new(Kind::Relation, -1, 0));
        assert!(!s.sorted); // node -3 after node 7, node -9 after it
        assert!(!s.repeats);
    }

    #[test]
    fn repeated_keys_are_told_apart_from_disorder() {
        let summary = |ids: &[i64]| {
            let mut acc = Accumulator::default();
            for &id in ids {
                acc.push(Key::new(Kind::Way, id, 1));
            }
            let s = acc.finish().expect("keys");
            (s.sorted, s.repeats)
        };
        assert_eq!(summary(&[1, 2, 3]), (true, false));
        assert_eq!(summary(&[1, 2, 2, 3]), (false, true));
        assert_eq!(summary(&[1, 3, 3, 2]), (false, false));
        assert_eq!(summary(&[5]), (true, false));
    }

    #[test]
    fn versions_out_of_order_are_told_apart_from_disorder() {
        let summary = |keys: &[(Kind, i64, u32)]| {
            let mut acc = Accumulator::default();
            for &(kind, id, version) in keys {
                acc.push(Key::new(kind, id, version));
            }
            let s = acc.finish().expect("keys");
            (s.sorted, s.repeats, s.versions_unsorted)
        };
        let (n, w) = (Kind::Node, Kind::Way);
        assert_eq!(
            summary(&[(n, 1, 2), (n, 1, 1), (n, 2, 1)]),
            (false, false, true)
        );
        assert_eq!(
            summary(&[(n, 1, 2), (n, 1, 2), (n, 1, 1)]),
            (false, false, true)
        );
        assert_eq!(summary(&[(n, 2, 1), (n, 1, 2)]), (false, false, false));
        assert_eq!(summary(&[(w, 1, 1), (n, 9, 1)]), (false, false, false));
        assert_eq!(
            summary(&[(n, 0, 5), (n, -1, 1), (n, 1, 1)]),
            (true, false, false)
        );
        assert_eq!(summary(&[(n, 1, 1), (n, -1, 1)]), (false, false, false));
    }

    /// The plain reference the accumulator must equal: min, max and the
    /// three flags from every key (the accumulator touches `first` and
    /// `last` only where keys do not increase).
    fn reference_summary(keys: &[Key]) -> Option<Summary> {
        let packed: Vec<u128> = keys.iter().map(Key::packed).collect();
        let pairs = || packed.windows(2).map(|w| (w[0], w[1]));
        let decreasing = pairs().any(|(a, b)| b < a);
        let repeated = pairs().any(|(a, b)| b == a);
        let ids_decreasing = pairs().any(|(a, b)| packed_object(b) < packed_object(a));
        let same = pairs().filter(|&(a, b)| packed_object(b) == packed_object(a));
        let mut counts = [0u64; 4];
        for k in keys {
            counts[k.kind.index()] += 1;
        }
        Some(Summary {
            first: Key::from_packed(*packed.iter().min()?),
            last: Key::from_packed(*packed.iter().max()?),
            counts,
            sorted: !decreasing && !repeated,
            repeats: !decreasing && repeated,
            versions_unsorted: decreasing && !ids_decreasing,
            duplicate_ids: same.count() as u64,
            negative_ids: keys.iter().any(|k| k.id < 0),
        })
    }

    proptest::proptest! {
        #[test]
        fn accumulator_agrees_with_the_reference(
            keys in proptest::collection::vec((0u8..4, -3i64..4, 0u32..3), 0..12),
        ) {
            let keys: Vec<Key> = keys
                .into_iter()
                .map(|(k, id, v)| Key::new(Kind::from_index(k).expect("kind"), id, v))
                .collect();
            let mut acc = Accumulator::default();
            for &k in &keys {
                acc.push(k);
            }
            proptest::prop_assert_eq!(acc.finish(), reference_summary(&keys));
        }
    }

    #[test]
    fn sorted_and_empty() {
        let block = proto::PrimitiveBlock {
            primitivegroup: vec![proto::PrimitiveGroup {
                ways: vec![
                    proto::Way {
                        id: 1,
                        ..Default::default()
                    },
                    proto::Way {
                        id: 2,
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = scan_block(&block.encode_to_vec())
            .expect("scan")
            .expect("non-empty");
        assert!(s.sorted);
        assert_eq!(s.elements(), 2);
        assert_eq!(
            scan_block(&proto::PrimitiveBlock::default().encode_to_vec()).expect("scan"),
            None
        );
    }

    #[test]
    fn dense_length_mismatch_is_an_error() {
        let block = proto::PrimitiveBlock {
            primitivegroup: vec![proto::PrimitiveGroup {
                dense: Some(proto::DenseNodes {
                    id: vec![1, 1],
                    denseinfo: Some(proto::DenseInfo {
                        version: vec![1],
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(scan_block(&block.encode_to_vec()).is_err());
    }
}
