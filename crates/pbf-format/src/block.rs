//! A full, lossless PrimitiveBlock codec: decode an OSMData block into owned
//! elements and encode elements back into a block. Only the tools that must
//! rewrite blocks (merging overlapping blobs) need it; everything else copies
//! blobs without decoding.
//!
//! Lossless means that tags (as raw bytes), every metadata field including
//! `visible`, way node locations, relation roles and member types, and the
//! exact coordinates and timestamps survive `decode_block(encode_block(x))`.
//! Coordinates are held in absolute nanodegrees and timestamps in
//! milliseconds, so a block with any granularity or offset decodes without
//! loss; the encoder picks the coarsest standard scale that is exact.
//!
//! Hostile input gives an [`crate::Error`], never a panic: array lengths and
//! string indexes are checked, and delta decoding wraps instead of
//! overflowing.
//!
//! The element types live here; the decoder ([`decode_block`]) and the
//! encoder ([`encode_block`]) are hand-written on the protobuf wire format in
//! the submodules `decode` and `encode`, for speed: merging re-encodes every
//! element it touches.

use std::mem::size_of;
use std::ops::Range;
use std::sync::Arc;

use crate::key::{key_version, tie_seconds};
use crate::{Key, Kind};

mod columns;
mod decode;
mod encode;

pub use columns::{
    BadIndex, Columns, ColumnsBuilder, InfoIndex, InfoView, MergeParts, Obj, Object, Tags,
};
pub use decode::{decode_block, decode_columns};
pub use encode::{encode_block, encode_objects};

/// A string of a block's string table: raw bytes, since PBF does not promise
/// UTF-8. Shared, so cloning is a reference-count increment.
pub type Str = Arc<[u8]>;

/// A tag: key and value.
pub type Tag = (Str, Str);

/// Metadata of one object version. All fields hold absolute values; a field
/// the file leaves out decodes to its protobuf default, shown below.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Info {
    /// Version; -1 when the file stores none (the protobuf default).
    pub version: i32,
    /// Timestamp in milliseconds since the Unix epoch (0 when absent).
    pub timestamp_ms: i64,
    /// Changeset id (0 when absent).
    pub changeset: i64,
    /// User id (0 when absent).
    pub uid: i32,
    /// User name (empty when absent).
    pub user: Str,
    /// The `visible` flag of history files; `None` when the file stores none.
    pub visible: Option<bool>,
}

/// A node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// Node id (may be zero or negative).
    pub id: i64,
    /// Metadata, when the file stores any.
    pub info: Option<Info>,
    /// Latitude in nanodegrees.
    pub lat: i64,
    /// Longitude in nanodegrees.
    pub lon: i64,
    /// Tags in stored order.
    pub tags: Vec<Tag>,
}

/// A way.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Way {
    /// Way id (may be zero or negative).
    pub id: i64,
    /// Metadata, when the file stores any.
    pub info: Option<Info>,
    /// Tags in stored order.
    pub tags: Vec<Tag>,
    /// Node ids, absolute.
    pub refs: Vec<i64>,
    /// `LocationsOnWays`: one `(lat, lon)` in nanodegrees per ref, or empty
    /// when the file stores none.
    pub locations: Vec<(i64, i64)>,
}

/// A relation member.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// Member type: node, way or relation.
    pub kind: Kind,
    /// Member id, absolute.
    pub id: i64,
    /// Role (may be empty).
    pub role: Str,
}

/// A relation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Relation {
    /// Relation id (may be zero or negative).
    pub id: i64,
    /// Metadata, when the file stores any.
    pub info: Option<Info>,
    /// Tags in stored order.
    pub tags: Vec<Tag>,
    /// Members in stored order.
    pub members: Vec<Member>,
}

/// A changeset: PBF stores only its id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Changeset {
    /// Changeset id.
    pub id: i64,
}

/// One OSM object version of any kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Element {
    /// A node.
    Node(Node),
    /// A way.
    Way(Way),
    /// A relation.
    Relation(Relation),
    /// A changeset.
    Changeset(Changeset),
}

impl Element {
    /// The sort key: kind, id and version (0 when there is no metadata).
    pub fn key(&self) -> Key {
        let version = self.info().map_or(0, |i| key_version(i.version));
        Key::new(self.kind(), self.id(), version)
    }

    /// What orders equal keys before input order ([`crate::key::tie_seconds`]):
    /// the timestamp in whole seconds, 0 when there is none.
    pub fn tie_seconds(&self) -> u32 {
        self.info().map_or(0, |i| tie_seconds(i.timestamp_ms))
    }

    /// The kind of object.
    pub fn kind(&self) -> Kind {
        match self {
            Element::Node(_) => Kind::Node,
            Element::Way(_) => Kind::Way,
            Element::Relation(_) => Kind::Relation,
            Element::Changeset(_) => Kind::Changeset,
        }
    }

    /// The object id.
    pub fn id(&self) -> i64 {
        match self {
            Element::Node(n) => n.id,
            Element::Way(w) => w.id,
            Element::Relation(r) => r.id,
            Element::Changeset(c) => c.id,
        }
    }

    /// The metadata, if any (changesets have none).
    pub fn info(&self) -> Option<&Info> {
        match self {
            Element::Node(n) => n.info.as_ref(),
            Element::Way(w) => w.info.as_ref(),
            Element::Relation(r) => r.info.as_ref(),
            Element::Changeset(_) => None,
        }
    }

    /// The tags (empty for changesets).
    pub fn tags(&self) -> &[Tag] {
        match self {
            Element::Node(n) => &n.tags,
            Element::Way(w) => &w.tags,
            Element::Relation(r) => &r.tags,
            Element::Changeset(_) => &[],
        }
    }

    /// Approximate memory use in bytes (inline size plus heap), for memory
    /// budgets. Strings are counted at every use although decoded elements of
    /// one block share them, so this errs on the high side.
    pub fn approx_size(&self) -> usize {
        let heap = match self {
            Element::Node(n) => tags_heap(&n.tags) + info_heap(&n.info),
            Element::Way(w) => {
                tags_heap(&w.tags)
                    + info_heap(&w.info)
                    + w.refs.capacity() * size_of::<i64>()
                    + w.locations.capacity() * size_of::<(i64, i64)>()
            }
            Element::Relation(r) => {
                let roles: usize = r.members.iter().map(|m| str_heap(&m.role)).sum();
                tags_heap(&r.tags)
                    + info_heap(&r.info)
                    + r.members.capacity() * size_of::<Member>()
                    + roles
            }
            Element::Changeset(_) => 0,
        };
        size_of::<Element>() + heap
    }

    /// An upper bound of this element's share of an encoded block, counting
    /// every string at every use and every varint at its widest.
    pub fn encoded_size_bound(&self) -> usize {
        Obj::Element(self).encoded_size_bound()
    }
}

impl Obj<'_> {
    /// [`Element::encoded_size_bound`], the same for both kinds of view.
    pub fn encoded_size_bound(self) -> usize {
        let tags = self
            .tags()
            .map(|(k, v)| str_bound(k) + str_bound(v))
            .sum::<usize>()
            + 1;
        let info = self
            .info()
            .map_or(0, |i| 6 * (VARINT_MAX + 1) + str_bound(i.user));
        let common = ELEMENT_SLACK + tags + info;
        match self.kind() {
            Kind::Node => common + 3 * VARINT_MAX,
            Kind::Way => common + VARINT_MAX * (1 + self.refs().len() + 2 * self.locations().len()),
            Kind::Relation => {
                let members: usize = self
                    .members()
                    .map(|(_, _, role)| 3 * VARINT_MAX + str_bound(role))
                    .sum();
                common + VARINT_MAX + members
            }
            Kind::Changeset => common + VARINT_MAX,
        }
    }

    /// Memory for budgets: [`Element::approx_size`] of an owned element; for
    /// an object of [`Columns`], what it would take as an owned element
    /// (its own share of the columns is smaller), so budgets do not depend
    /// on which kind the merge holds.
    pub fn approx_size(self) -> usize {
        if let Obj::Element(e) = self {
            return e.approx_size();
        }
        let string = |s: &[u8]| s.len() + 2 * size_of::<usize>();
        let tags: usize = self.tags().map(|(k, v)| string(k) + string(v)).sum();
        let members: usize = self
            .members()
            .map(|(_, _, role)| size_of::<Member>() + string(role))
            .sum();
        size_of::<Element>()
            + self.tag_count() * size_of::<Tag>()
            + tags
            + self.info().map_or(0, |i| string(i.user))
            + size_of_val(self.refs())
            + size_of_val(self.locations())
            + members
    }
}

/// The widest varint.
const VARINT_MAX: usize = 10;

/// Per-element allowance for message, group and field headers.
const ELEMENT_SLACK: usize = 64;

/// Allowance for the block's own fields (granularities, offsets, headers).
const BLOCK_SLACK: usize = 256;

fn str_heap(s: &Str) -> usize {
    // Arc header (two counters) plus the bytes.
    s.len() + 2 * size_of::<usize>()
}

fn tags_heap(tags: &Vec<Tag>) -> usize {
    let strings: usize = tags.iter().map(|(k, v)| str_heap(k) + str_heap(v)).sum();
    tags.capacity() * size_of::<Tag>() + strings
}

fn info_heap(info: &Option<Info>) -> usize {
    info.as_ref().map_or(0, |i| str_heap(&i.user))
}

/// A string's table entry plus one reference to it.
fn str_bound(s: &[u8]) -> usize {
    s.len() + 1 + 2 * VARINT_MAX
}

/// How to cut and write blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Most elements per block (default 8000), used by [`split_points`].
    pub max_elements: usize,
    /// Most bytes of uncompressed block, as estimated by
    /// [`Element::encoded_size_bound`] (default 16 MiB; PBF readers refuse
    /// blocks over 32 MiB). Used by [`split_points`].
    pub max_bytes: usize,
    /// Write nodes as DenseNodes (default true); plain nodes otherwise.
    pub dense_nodes: bool,
}

impl Default for EncodeOptions {
    fn default() -> EncodeOptions {
        EncodeOptions {
            max_elements: 8000,
            max_bytes: 16 << 20,
            dense_nodes: true,
        }
    }
}

/// Split a slice into consecutive chunks that each hold at most
/// `opts.max_elements` elements and whose [`Element::encoded_size_bound`]
/// sum stays within `opts.max_bytes`. A single element over the byte limit
/// gets a chunk of its own. No chunk is empty.
pub fn split_points(elements: &[Element], opts: &EncodeOptions) -> Vec<Range<usize>> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, BLOCK_SLACK);
    for (i, element) in elements.iter().enumerate() {
        let size = element.encoded_size_bound();
        let full = i - start >= opts.max_elements || bytes.saturating_add(size) > opts.max_bytes;
        if i > start && full {
            chunks.push(start..i);
            (start, bytes) = (i, BLOCK_SLACK);
        }
        bytes = bytes.saturating_add(size);
    }
    if start < elements.len() {
        chunks.push(start..elements.len());
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Result, proto};
    use prost::Message;

    fn s(text: &str) -> Str {
        Str::from(text.as_bytes())
    }

    fn tags(pairs: &[(&str, &str)]) -> Vec<Tag> {
        pairs.iter().map(|&(k, v)| (s(k), s(v))).collect()
    }

    fn info(version: i32, visible: Option<bool>) -> Info {
        Info {
            version,
            timestamp_ms: 1_600_000_000_000 + i64::from(version) * 1000,
            changeset: 1000 + i64::from(version),
            uid: 42,
            user: s("mapper"),
            visible,
        }
    }

    fn node(id: i64, info: Option<Info>) -> Element {
        Element::Node(Node {
            id,
            info,
            lat: 515_000_000 + (id % 1000) * 100,
            lon: -1_000_000,
            tags: vec![],
        })
    }

    fn way(id: i64, refs: Vec<i64>) -> Element {
        Element::Way(Way {
            id,
            info: Some(info(1, None)),
            tags: tags(&[("highway", "path")]),
            refs,
            locations: vec![],
        })
    }

    fn relation(id: i64) -> Element {
        let member = |kind, id, role: &str| Member {
            kind,
            id,
            role: s(role),
        };
        Element::Relation(Relation {
            id,
            info: None,
            tags: tags(&[("type", "multipolygon"), ("", "empty key")]),
            members: vec![
                member(Kind::Way, 7, "outer"),
                member(Kind::Way, -8, "inner"),
                member(Kind::Node, i64::MIN, ""),
                member(Kind::Relation, i64::MAX, "subarea"),
            ],
        })
    }

    fn round_trip_with(elements: &[Element], opts: &EncodeOptions) {
        let bytes = encode_block(elements, opts);
        let decoded = decode_block(&bytes).expect("decode");
        assert_eq!(decoded, elements);
    }

    fn round_trip(elements: &[Element]) {
        round_trip_with(elements, &EncodeOptions::default());
        round_trip_with(
            elements,
            &EncodeOptions {
                dense_nodes: false,
                ..EncodeOptions::default()
            },
        );
    }

    fn decode_proto(block: &proto::PrimitiveBlock) -> Result<Vec<Element>> {
        decode_block(&block.encode_to_vec())
    }

    fn block_with(group: proto::PrimitiveGroup) -> proto::PrimitiveBlock {
        proto::PrimitiveBlock {
            stringtable: proto::StringTable {
                s: vec![vec![], b"k".to_vec(), b"v".to_vec()],
            },
            primitivegroup: vec![group],
            granularity: None,
            date_granularity: None,
            lat_offset: None,
            lon_offset: None,
        }
    }

    fn assert_malformed(block: &proto::PrimitiveBlock, needle: &str) {
        match decode_proto(block) {
            Err(e) => assert!(
                e.to_string().contains(needle),
                "{e} does not mention {needle}"
            ),
            Ok(elements) => panic!("decoded {elements:?}, expected an error about {needle}"),
        }
    }

    #[test]
    fn mixed_kinds_round_trip() {
        let mut tagged = node(3, Some(info(2, None)));
        if let Element::Node(n) = &mut tagged {
            n.tags = tags(&[("amenity", "bench"), ("name", "Bänkli")]);
        }
        round_trip(&[
            node(1, Some(info(1, None))),
            tagged,
            node(2, Some(info(1, None))),
            way(10, vec![1, 2, 3, 1]),
            node(4, Some(info(1, None))),
            relation(20),
            Element::Changeset(Changeset { id: 99 }),
            way(11, vec![]),
        ]);
    }

    /// Reordered columns hold the same objects, each with its own tags,
    /// refs, locations and members, in the new order.
    #[test]
    fn reordered_columns_keep_every_field() {
        let mut tagged = node(3, Some(info(2, None)));
        if let Element::Node(n) = &mut tagged {
            n.tags = tags(&[("amenity", "bench"), ("name", "Bänkli")]);
        }
        let located = Way {
            locations: vec![(100, -200), (515_000_007, 3)],
            ..unwrap_way(way(12, vec![5, 6]))
        };
        let elements = [
            node(1, Some(info(1, None))),
            tagged,
            way(10, vec![1, 2, 3, 1]),
            relation(20),
            Element::Changeset(Changeset { id: 99 }),
            Element::Way(located),
            way(11, vec![]),
        ];
        let bytes = encode_block(&elements, &EncodeOptions::default());
        let mut columns = decode_columns(bytes).expect("decode");
        let stored = columns.to_elements();
        let order = [5, 3, 0, 6, 2, 1, 4];
        columns.reorder(&order);
        let want: Vec<Element> = order.iter().map(|&i| stored[i as usize].clone()).collect();
        assert_eq!(columns.to_elements(), want);
    }

    #[test]
    #[should_panic(expected = "twice")]
    fn reorder_refuses_a_repeated_object() {
        let bytes = encode_block(&[node(1, None), node(2, None)], &EncodeOptions::default());
        decode_columns(bytes).expect("decode").reorder(&[1, 1]);
    }

    #[test]
    fn empty_block_round_trips() {
        round_trip(&[]);
    }

    #[test]
    fn negative_and_extreme_ids() {
        round_trip(&[
            node(-1, None),
            node(0, None),
            node(i64::MIN, None),
            node(i64::MAX, None),
            way(-5, vec![-1, i64::MAX, i64::MIN, 0]),
            relation(-7),
            relation(i64::MIN),
        ]);
    }

    #[test]
    fn history_versions_and_visible() {
        round_trip(&[
            node(1, Some(info(1, Some(true)))),
            node(1, Some(info(2, Some(false)))),
            node(1, Some(info(3, None))),
            node(2, None),
            node(3, Some(info(-1, None))),
            node(3, Some(info(-1, Some(true)))),
            Element::Way(Way {
                info: Some(info(4, Some(false))),
                ..unwrap_way(way(5, vec![1]))
            }),
        ]);
    }

    fn unwrap_way(element: Element) -> Way {
        match element {
            Element::Way(w) => w,
            other => panic!("not a way: {other:?}"),
        }
    }

    #[test]
    fn dense_groups_split_where_info_presence_changes() {
        let elements = [
            node(1, None),
            node(2, Some(info(1, None))),
            node(3, Some(info(1, Some(true)))),
        ];
        let bytes = encode_block(&elements, &EncodeOptions::default());
        let block = proto::PrimitiveBlock::decode(bytes.as_slice()).expect("proto");
        assert_eq!(block.primitivegroup.len(), 3);
        assert!(
            block
                .primitivegroup
                .iter()
                .all(|g| g.dense.is_some() && g.nodes.is_empty())
        );
        round_trip(&elements);
    }

    #[test]
    fn odd_coordinates_and_timestamps_are_exact() {
        let odd = Element::Node(Node {
            id: 1,
            info: Some(Info {
                timestamp_ms: 1_600_000_000_123,
                ..info(1, None)
            }),
            lat: 515_000_001,
            lon: -1_999_999_999,
            tags: vec![],
        });
        let bytes = encode_block(std::slice::from_ref(&odd), &EncodeOptions::default());
        let block = proto::PrimitiveBlock::decode(bytes.as_slice()).expect("proto");
        assert_eq!(
            (block.granularity, block.date_granularity),
            (Some(1), Some(1))
        );
        round_trip(&[odd, node(2, Some(info(1, None)))]);
    }

    #[test]
    fn default_scale_is_used_when_exact() {
        let bytes = encode_block(&[node(1, Some(info(1, None)))], &EncodeOptions::default());
        let block = proto::PrimitiveBlock::decode(bytes.as_slice()).expect("proto");
        assert_eq!((block.granularity, block.date_granularity), (None, None));
    }

    #[test]
    fn locations_on_ways() {
        let w = Way {
            locations: vec![(100, -200), (515_000_007, 3)],
            ..unwrap_way(way(1, vec![5, 6]))
        };
        round_trip(&[Element::Way(w)]);
    }

    #[test]
    fn non_default_scale_input_keeps_precision() {
        let dense = proto::DenseNodes {
            id: vec![5, 1],
            lat: vec![11, -2],
            lon: vec![-3, 0],
            keys_vals: vec![1, 2, 0, 0],
            denseinfo: Some(proto::DenseInfo {
                version: vec![1, 2],
                timestamp: vec![1000, 7],
                changeset: vec![3, 1],
                uid: vec![4, -1],
                user_sid: vec![2, -1],
                visible: vec![],
            }),
        };
        let group = proto::PrimitiveGroup {
            dense: Some(dense),
            ..Default::default()
        };
        let block = proto::PrimitiveBlock {
            granularity: Some(7),
            lat_offset: Some(3),
            lon_offset: Some(-5),
            date_granularity: Some(3),
            ..block_with(group)
        };
        let decoded = decode_proto(&block).expect("decode");
        let first = Element::Node(Node {
            id: 5,
            info: Some(Info {
                version: 1,
                timestamp_ms: 3000,
                changeset: 3,
                uid: 4,
                user: s("v"),
                visible: None,
            }),
            lat: 3 + 7 * 11,
            lon: -5 - 7 * 3,
            tags: tags(&[("k", "v")]),
        });
        let second = Element::Node(Node {
            id: 6,
            info: Some(Info {
                version: 2,
                timestamp_ms: 3021,
                changeset: 4,
                uid: 3,
                user: s("k"),
                visible: None,
            }),
            lat: 3 + 7 * 9,
            lon: -5 - 7 * 3,
            tags: vec![],
        });
        assert_eq!(decoded, vec![first, second]);
        round_trip(&decoded);
    }

    #[test]
    fn plain_nodes_decode() {
        let plain = proto::Node {
            id: -3,
            keys: vec![1],
            vals: vec![2],
            info: Some(proto::Info {
                version: None,
                timestamp: None,
                changeset: None,
                uid: None,
                user_sid: None,
                visible: Some(false),
            }),
            lat: 2,
            lon: -1,
        };
        let block = block_with(proto::PrimitiveGroup {
            nodes: vec![plain],
            ..Default::default()
        });
        let decoded = decode_proto(&block).expect("decode");
        let expected = Element::Node(Node {
            id: -3,
            info: Some(Info {
                version: -1,
                timestamp_ms: 0,
                changeset: 0,
                uid: 0,
                user: s(""),
                visible: Some(false),
            }),
            lat: 200,
            lon: -100,
            tags: tags(&[("k", "v")]),
        });
        assert_eq!(decoded, vec![expected]);
        round_trip(&decoded);
    }

    #[test]
    fn plain_output_when_asked() {
        let opts = EncodeOptions {
            dense_nodes: false,
            ..EncodeOptions::default()
        };
        let bytes = encode_block(&[node(1, None), node(2, Some(info(1, None)))], &opts);
        let block = proto::PrimitiveBlock::decode(bytes.as_slice()).expect("proto");
        assert_eq!(block.primitivegroup.len(), 1);
        assert_eq!(block.primitivegroup[0].nodes.len(), 2);
        assert!(block.primitivegroup[0].dense.is_none());
    }

    #[test]
    fn dense_without_info_and_short_keys_vals() {
        let dense = proto::DenseNodes {
            id: vec![1, 1, 1],
            lat: vec![0; 3],
            lon: vec![0; 3],
            keys_vals: vec![1, 2],
            denseinfo: None,
        };
        let block = block_with(proto::PrimitiveGroup {
            dense: Some(dense),
            ..Default::default()
        });
        let decoded = decode_proto(&block).expect("decode");
        assert_eq!(decoded.len(), 3);
        assert!(decoded.iter().all(|e| e.info().is_none()));
        assert_eq!(decoded[0].tags(), tags(&[("k", "v")]).as_slice());
        assert!(decoded[1].tags().is_empty() && decoded[2].tags().is_empty());
    }

    #[test]
    fn element_accessors() {
        let e = node(-9, Some(info(3, None)));
        assert_eq!(e.key(), Key::new(Kind::Node, -9, 3));
        assert_eq!((e.kind(), e.id()), (Kind::Node, -9));
        assert_eq!(node(1, None).key().version, 0);
        assert_eq!(node(1, Some(info(-1, None))).key().version, 0);
        assert!(relation(1).approx_size() > size_of::<Element>());
    }

    #[test]
    fn split_points_respect_limits() {
        let elements: Vec<Element> = (0..25).map(|i| node(i, None)).collect();
        let opts = EncodeOptions {
            max_elements: 10,
            ..EncodeOptions::default()
        };
        assert_eq!(split_points(&elements, &opts), vec![0..10, 10..20, 20..25]);
        let one = elements[0].encoded_size_bound();
        let opts = EncodeOptions {
            max_bytes: BLOCK_SLACK + 3 * one,
            ..EncodeOptions::default()
        };
        let chunks = split_points(&elements, &opts);
        assert!(chunks.iter().all(|c| c.len() == 3 || c.end == 25));
        for chunk in chunks {
            assert!(encode_block(&elements[chunk], &opts).len() <= opts.max_bytes);
        }
        let opts = EncodeOptions {
            max_bytes: 0,
            max_elements: 0,
            ..EncodeOptions::default()
        };
        assert_eq!(split_points(&elements[..2], &opts), vec![0..1, 1..2]);
        assert!(split_points(&[], &opts).is_empty());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode_block(&[0xff, 0xff, 0xff]).is_err());
        assert!(decode_block(b"\x0a\x05abc").is_err());
    }

    #[test]
    fn dense_length_mismatch() {
        let dense = proto::DenseNodes {
            id: vec![1, 2],
            lat: vec![0],
            lon: vec![0, 0],
            ..Default::default()
        };
        assert_malformed(
            &block_with(proto::PrimitiveGroup {
                dense: Some(dense),
                ..Default::default()
            }),
            "2 ids",
        );
    }

    #[test]
    fn dense_info_length_mismatch() {
        let denseinfo = proto::DenseInfo {
            version: vec![1],
            ..Default::default()
        };
        let dense = proto::DenseNodes {
            id: vec![1, 2],
            lat: vec![0; 2],
            lon: vec![0; 2],
            denseinfo: Some(denseinfo),
            ..Default::default()
        };
        assert_malformed(
            &block_with(proto::PrimitiveGroup {
                dense: Some(dense),
                ..Default::default()
            }),
            "version",
        );
    }

    #[test]
    fn bad_keys_vals() {
        let dense = |keys_vals| proto::DenseNodes {
            id: vec![1],
            lat: vec![0],
            lon: vec![0],
            keys_vals,
            denseinfo: None,
        };
        let block = |kv| {
            block_with(proto::PrimitiveGroup {
                dense: Some(dense(kv)),
                ..Default::default()
            })
        };
        assert_malformed(&block(vec![1]), "key without value");
        assert_malformed(&block(vec![1, 2, 0, 1, 2, 0]), "left after");
        assert_malformed(&block(vec![1, 9, 0]), "string index 9");
        assert_malformed(&block(vec![-1, 2, 0]), "negative string index");
    }

    #[test]
    fn bad_plain_tags_and_info() {
        let plain = proto::Node {
            id: 1,
            keys: vec![1, 2],
            vals: vec![1],
            info: None,
            lat: 0,
            lon: 0,
        };
        assert_malformed(
            &block_with(proto::PrimitiveGroup {
                nodes: vec![plain.clone()],
                ..Default::default()
            }),
            "2 tag keys",
        );
        let info = proto::Info {
            user_sid: Some(3),
            ..Default::default()
        };
        let plain = proto::Node {
            keys: vec![],
            vals: vec![],
            info: Some(info),
            ..plain
        };
        assert_malformed(
            &block_with(proto::PrimitiveGroup {
                nodes: vec![plain],
                ..Default::default()
            }),
            "string index 3",
        );
    }

    #[test]
    fn bad_relations() {
        let relation = proto::Relation {
            id: 1,
            roles_sid: vec![0, 0],
            memids: vec![1, 2],
            types: vec![0],
            ..Default::default()
        };
        let block = |r: &proto::Relation| {
            block_with(proto::PrimitiveGroup {
                relations: vec![r.clone()],
                ..Default::default()
            })
        };
        assert_malformed(&block(&relation), "2 member ids");
        let relation = proto::Relation {
            types: vec![0, 5],
            ..relation
        };
        assert_malformed(&block(&relation), "member type 5");
        let relation = proto::Relation {
            types: vec![0, 1],
            roles_sid: vec![0, -4],
            ..relation
        };
        assert_malformed(&block(&relation), "negative string index");
    }

    #[test]
    fn bad_way_locations() {
        let way = proto::Way {
            id: 1,
            refs: vec![1, 2],
            lat: vec![1, 2],
            lon: vec![1],
            ..Default::default()
        };
        let block = |w: &proto::Way| {
            block_with(proto::PrimitiveGroup {
                ways: vec![w.clone()],
                ..Default::default()
            })
        };
        assert_malformed(&block(&way), "2 refs");
        let way = proto::Way {
            lat: vec![1],
            lon: vec![1],
            ..way
        };
        assert_malformed(&block(&way), "2 refs");
    }

    #[test]
    fn bad_granularity() {
        let block = proto::PrimitiveBlock {
            granularity: Some(0),
            ..block_with(Default::default())
        };
        assert_malformed(&block, "granularity");
        let block = proto::PrimitiveBlock {
            date_granularity: Some(-1),
            ..block_with(Default::default())
        };
        assert_malformed(&block, "granularity");
    }

    #[test]
    fn overflow_wraps_instead_of_panicking() {
        let dense = proto::DenseNodes {
            id: vec![i64::MAX, i64::MAX],
            lat: vec![i64::MAX, i64::MAX],
            lon: vec![i64::MIN, i64::MIN],
            keys_vals: vec![],
            denseinfo: Some(proto::DenseInfo {
                version: vec![i32::MIN, -1],
                timestamp: vec![i64::MAX, i64::MAX],
                changeset: vec![i64::MIN, i64::MIN],
                uid: vec![i32::MAX, i32::MAX],
                user_sid: vec![0, 0],
                visible: vec![true, false],
            }),
        };
        let group = proto::PrimitiveGroup {
            dense: Some(dense),
            ..Default::default()
        };
        let block = proto::PrimitiveBlock {
            granularity: Some(i32::MAX),
            lat_offset: Some(i64::MAX),
            ..block_with(group)
        };
        let decoded = decode_proto(&block).expect("wrapping decode");
        assert_eq!(decoded.len(), 2);
        round_trip(&decoded);
    }

    #[test]
    fn empty_string_table_allows_index_zero() {
        let relation = proto::Relation {
            id: 1,
            roles_sid: vec![0],
            memids: vec![1],
            types: vec![2],
            ..Default::default()
        };
        let block = proto::PrimitiveBlock {
            stringtable: proto::StringTable { s: vec![] },
            ..block_with(proto::PrimitiveGroup {
                relations: vec![relation],
                ..Default::default()
            })
        };
        let decoded = decode_proto(&block).expect("decode");
        assert_eq!(
            decoded,
            vec![Element::Relation(Relation {
                id: 1,
                info: None,
                tags: vec![],
                members: vec![Member {
                    kind: Kind::Relation,
                    id: 1,
                    role: s("")
                }],
            })]
        );
    }
}
