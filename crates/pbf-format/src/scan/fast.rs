//! The fast path of the key scan. It reads a block with the `Option`-returning
//! wire reads, compares field keys undecoded, walks the packed DenseNodes ids
//! and versions in lockstep without allocating, and skips the fields it does
//! not need without decoding them. It answers only for the common shape of a
//! block: on malformed input, and on shapes it leaves to the checked scan in
//! the parent module (a DenseNodes `id`, DenseInfo or DenseInfo `version`
//! field that is repeated or not packed), it returns `None` and
//! [`super::scan_block`] runs the checked scan, which gives the result or the
//! error. So where it answers, it must give the checked scan's answer.

use super::{Accumulator, Summary};
use crate::key::{Key, Kind, key_version};
use crate::wire::{self, Reader, WireType::Len, WireType::Varint, tag};

/// PrimitiveBlock.primitivegroup.
const GROUP: u64 = tag(2, Len);
/// PrimitiveGroup.nodes, .dense, .ways, .relations, .changesets.
const NODE: u64 = tag(1, Len);
const DENSE: u64 = tag(2, Len);
const WAY: u64 = tag(3, Len);
const RELATION: u64 = tag(4, Len);
const CHANGESET: u64 = tag(5, Len);
/// Node, Way, Relation and ChangeSet: id and info.
const ID: u64 = tag(1, Varint);
const INFO: u64 = tag(4, Len);
/// Info.version.
const VERSION: u64 = tag(1, Varint);
/// DenseNodes.id (packed), DenseNodes.denseinfo, DenseInfo.version (packed).
const DENSE_IDS: u64 = tag(1, Len);
const DENSE_INFO: u64 = tag(5, Len);
const DENSE_VERSIONS: u64 = tag(1, Len);

/// The field number of a key.
fn number(t: u64) -> u64 {
    t >> 3
}

/// The scan of a PrimitiveBlock, or `None` to leave it to the checked scan.
pub(super) fn block(data: &[u8]) -> Option<Option<Summary>> {
    let mut acc = Accumulator::default();
    let mut r = Reader::new(data);
    while !r.is_empty() {
        match r.try_varint()? {
            GROUP => group(r.try_bytes()?, &mut acc)?,
            t if number(t) == 2 => return None,
            t => r.try_skip(t)?,
        }
    }
    Some(acc.finish())
}

fn group(data: &[u8], acc: &mut Accumulator) -> Option<()> {
    let mut r = Reader::new(data);
    while !r.is_empty() {
        let kind = match r.try_varint()? {
            DENSE => {
                dense(r.try_bytes()?, acc)?;
                continue;
            }
            NODE => Kind::Node,
            WAY => Kind::Way,
            RELATION => Kind::Relation,
            CHANGESET => Kind::Changeset,
            t if (1..=5).contains(&number(t)) => return None,
            t => {
                r.try_skip(t)?;
                continue;
            }
        };
        acc.push(object(r.try_bytes()?, kind)?);
    }
    Some(())
}

/// One Node, Way, Relation or ChangeSet: every field is read, since the last
/// id and the last Info win.
fn object(data: &[u8], kind: Kind) -> Option<Key> {
    let mut r = Reader::new(data);
    let (mut id, mut version) = (None, 0u32);
    while !r.is_empty() {
        match r.try_varint()? {
            ID => id = Some(r.try_varint()?),
            t if number(t) == 1 => return None,
            INFO if kind != Kind::Changeset => version = info_version(r.try_bytes()?)?,
            t => r.try_skip(t)?,
        }
    }
    let id = match kind {
        Kind::Node => wire::decode_zigzag(id?),
        _ => id? as i64,
    };
    Some(Key::new(kind, id, version))
}

fn info_version(data: &[u8]) -> Option<u32> {
    let mut r = Reader::new(data);
    let mut version = -1i32;
    while !r.is_empty() {
        match r.try_varint()? {
            VERSION => version = r.try_varint()? as i32,
            t if number(t) == 1 => return None,
            t => r.try_skip(t)?,
        }
    }
    Some(key_version(version))
}

/// DenseNodes: find the packed ids and versions, then walk them.
fn dense(data: &[u8], acc: &mut Accumulator) -> Option<()> {
    let mut r = Reader::new(data);
    let (mut ids, mut info) = (None, None);
    while !r.is_empty() {
        match r.try_varint()? {
            DENSE_IDS if ids.is_none() => ids = Some(r.try_bytes()?),
            DENSE_INFO if info.is_none() => info = Some(r.try_bytes()?),
            t if matches!(number(t), 1 | 5) => return None,
            t => r.try_skip(t)?,
        }
    }
    let versions = match info {
        Some(info) => Some(dense_versions(info)?),
        None => None,
    };
    walk_dense(ids.unwrap_or_default(), versions, acc)
}

/// The packed `version` field of a DenseInfo (empty when absent).
fn dense_versions(data: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(data);
    let mut versions = None;
    while !r.is_empty() {
        match r.try_varint()? {
            DENSE_VERSIONS if versions.is_none() => versions = Some(r.try_bytes()?),
            t if number(t) == 1 => return None,
            t => r.try_skip(t)?,
        }
    }
    Some(versions.unwrap_or_default())
}

/// Push the keys of packed delta-coded ids and, when the block has a
/// DenseInfo, their packed versions; `None` when the counts differ.
fn walk_dense(ids: &[u8], versions: Option<&[u8]>, acc: &mut Accumulator) -> Option<()> {
    let mut ids = Reader::new(ids);
    let mut id = 0i64;
    let Some(versions) = versions else {
        while !ids.is_empty() {
            id = id.wrapping_add(wire::decode_zigzag(ids.try_varint()?));
            acc.push(Key::new(Kind::Node, id, 0));
        }
        return Some(());
    };
    let mut versions = Reader::new(versions);
    while !ids.is_empty() {
        id = id.wrapping_add(wire::decode_zigzag(ids.try_varint()?));
        let version = key_version(versions.try_varint()? as i32);
        acc.push(Key::new(Kind::Node, id, version));
    }
    versions.is_empty().then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;
    use crate::scan::{scan_block, scan_block_checked};
    use crate::wire::{encode_zigzag, put_bytes, put_key, put_varint};
    use prost::Message;

    /// Where the fast path answers it gives the checked scan's result, and
    /// `scan_block` gives the checked scan's result or error in every case.
    /// Returns whether the fast path answered.
    fn assert_agrees(block: &[u8]) -> bool {
        let checked = scan_block_checked(block).map_err(|e| e.to_string());
        let fast = super::block(block);
        if let Some(summary) = fast {
            assert_eq!(Ok(summary), checked, "fast path on {block:02x?}");
        }
        let scanned = scan_block(block).map_err(|e| e.to_string());
        assert_eq!(scanned, checked, "scan of {block:02x?}");
        fast.is_some()
    }

    fn packed(values: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        for &v in values {
            put_varint(&mut out, v);
        }
        out
    }

    fn ids(deltas: &[i64]) -> Vec<u8> {
        packed(&deltas.iter().map(|&d| encode_zigzag(d)).collect::<Vec<_>>())
    }

    /// A block of one group holding one DenseNodes message.
    fn dense_block(dense: &[u8]) -> Vec<u8> {
        let mut group = Vec::new();
        put_bytes(&mut group, 2, dense);
        let mut block = Vec::new();
        put_bytes(&mut block, 2, &group);
        block
    }

    /// The usual DenseNodes: one packed id field, one DenseInfo with one
    /// packed version field. Ids 5, 7, -3 with versions 1, 2, 3.
    fn usual_dense() -> Vec<u8> {
        let mut info = Vec::new();
        put_bytes(&mut info, 1, &packed(&[1, 2, 3]));
        let mut dense = Vec::new();
        put_bytes(&mut dense, 1, &ids(&[5, 2, -10]));
        put_bytes(&mut dense, 5, &info);
        dense
    }

    fn summary(block: &[u8]) -> Summary {
        scan_block(block).expect("scan").expect("keys")
    }

    #[test]
    fn usual_dense_nodes_take_the_fast_path() {
        let block = dense_block(&usual_dense());
        assert!(assert_agrees(&block));
        let s = summary(&block);
        assert_eq!(s.counts, [3, 0, 0, 0]);
        assert_eq!(s.first, Key::new(Kind::Node, -3, 3));
        assert_eq!(s.last, Key::new(Kind::Node, 7, 2));
    }

    /// A packed field may come in pieces, which are concatenated: the ids
    /// [5, 2] + [-10] and versions [1] + [2, 3] give the keys of the usual
    /// message. The fast path leaves such messages to the checked scan.
    #[test]
    fn repeated_packed_fields_give_the_same_keys() {
        let mut info = Vec::new();
        put_bytes(&mut info, 1, &packed(&[1]));
        put_bytes(&mut info, 3, &packed(&[7]));
        put_bytes(&mut info, 1, &packed(&[2, 3]));
        let mut dense = Vec::new();
        put_bytes(&mut dense, 1, &ids(&[5, 2]));
        put_bytes(&mut dense, 5, &info);
        put_bytes(&mut dense, 1, &ids(&[-10]));
        let block = dense_block(&dense);
        assert!(!assert_agrees(&block));
        assert_eq!(summary(&block), summary(&dense_block(&usual_dense())));
    }

    #[test]
    fn unpacked_ids_and_versions_give_the_same_keys() {
        let mut info = Vec::new();
        for v in [1, 2, 3] {
            put_key(&mut info, 1, wire::WireType::Varint);
            put_varint(&mut info, v);
        }
        let mut dense = Vec::new();
        for d in [5, 2, -10] {
            put_key(&mut dense, 1, wire::WireType::Varint);
            put_varint(&mut dense, encode_zigzag(d));
        }
        put_bytes(&mut dense, 5, &info);
        let block = dense_block(&dense);
        assert!(!assert_agrees(&block));
        assert_eq!(summary(&block), summary(&dense_block(&usual_dense())));
    }

    /// A second DenseInfo replaces the first (as the scan always did).
    #[test]
    fn a_second_dense_info_is_left_to_the_checked_scan() {
        let mut info = Vec::new();
        put_bytes(&mut info, 1, &packed(&[9, 9, 9]));
        let mut dense = usual_dense();
        put_bytes(&mut dense, 5, &info);
        assert!(!assert_agrees(&dense_block(&dense)));
    }

    #[test]
    fn count_mismatches_keep_their_error() {
        for versions in [&[1u64][..], &[1, 2, 3, 4], &[]] {
            let mut info = Vec::new();
            put_bytes(&mut info, 1, &packed(versions));
            let mut dense = Vec::new();
            put_bytes(&mut dense, 1, &ids(&[5, 2, -10]));
            put_bytes(&mut dense, 5, &info);
            let block = dense_block(&dense);
            assert!(!assert_agrees(&block));
            let err = scan_block(&block).expect_err("mismatch").to_string();
            let want = format!("DenseNodes has 3 ids but {} versions", versions.len());
            assert!(err.contains(&want), "{err}");
        }
        // A DenseInfo without versions, ids without a DenseInfo.
        let mut dense = Vec::new();
        put_bytes(&mut dense, 1, &ids(&[5]));
        put_bytes(&mut dense, 5, &[]);
        assert!(!assert_agrees(&dense_block(&dense)));
        dense.truncate(dense.len() - 2);
        assert!(assert_agrees(&dense_block(&dense)));
    }

    #[test]
    fn wrong_wire_types_keep_their_errors() {
        let cases: [&[u8]; 6] = [
            &[0x09, 0, 0, 0, 0, 0, 0, 0, 0], // DenseNodes.id fixed64
            &[0x2d, 0, 0, 0, 0],             // DenseNodes.denseinfo fixed32
            &[0x28, 0x01],                   // DenseNodes.denseinfo varint
            &[0x2a, 0x02, 0x0d, 0x00],       // DenseInfo.version, wire type 5, short
            &[0x0b],                         // wire type 3
            &[0x0a, 0x01, 0x80],             // id varint truncated
        ];
        for dense in cases {
            let block = dense_block(dense);
            assert!(!assert_agrees(&block));
            assert!(scan_block(&block).is_err(), "{dense:02x?}");
        }
    }

    fn node_block(ids: Vec<i64>, versions: Vec<i32>, ways: Vec<(i64, Option<i32>)>) -> Vec<u8> {
        let info = |v: Option<i32>| {
            v.map(|v| proto::Info {
                version: Some(v),
                timestamp: Some(1_600_000_000),
                changeset: Some(123_456_789),
                uid: Some(1_234_567),
                user_sid: Some(300),
                visible: None,
            })
        };
        let n = ids.len();
        proto::PrimitiveBlock {
            primitivegroup: vec![
                proto::PrimitiveGroup {
                    dense: Some(proto::DenseNodes {
                        id: ids,
                        denseinfo: (!versions.is_empty()).then(|| proto::DenseInfo {
                            version: versions,
                            ..Default::default()
                        }),
                        lat: vec![0; n],
                        lon: vec![0; n],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                proto::PrimitiveGroup {
                    ways: ways
                        .into_iter()
                        .map(|(id, v)| proto::Way {
                            id,
                            info: info(v),
                            keys: vec![1, 2],
                            vals: vec![3, 4],
                            refs: vec![-5, 6, 1 << 40],
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
        .encode_to_vec()
    }

    proptest::proptest! {
        /// Blocks with random keys, then some of them with a byte changed or
        /// cut short: the fast path agrees with the checked scan.
        #[test]
        fn fast_path_agrees_with_the_checked_scan(
            ids in proptest::collection::vec(proptest::num::i64::ANY, 0..20),
            versions in proptest::collection::vec(-2i32..5, 0..20),
            ways in proptest::collection::vec(
                (proptest::num::i64::ANY, proptest::option::of(-2i32..1000)),
                0..10,
            ),
            edit in proptest::option::of((proptest::num::usize::ANY, proptest::num::u8::ANY)),
            cut in proptest::option::of(proptest::num::usize::ANY),
        ) {
            let mut block = node_block(ids, versions, ways);
            if let Some((at, byte)) = edit {
                if !block.is_empty() {
                    let at = at % block.len();
                    block[at] = byte;
                }
            }
            if let Some(cut) = cut {
                block.truncate(cut % (block.len() + 1));
            }
            assert_agrees(&block);
        }
    }
}
