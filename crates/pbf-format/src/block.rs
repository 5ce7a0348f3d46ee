//! A full, lossless PrimitiveBlock codec: decode an OSMData block into
//! [`Columns`], and encode views of their objects ([`Obj`]) back into a
//! block. Only the tools that must rewrite blocks (merging overlapping
//! blobs) need it; everything else copies blobs without decoding.
//!
//! Lossless means that tags (as raw bytes), every metadata field including
//! `visible`, way node locations, relation roles and member types, and the
//! exact coordinates and timestamps survive a decode of an encode.
//! Coordinates are held in absolute nanodegrees and timestamps in
//! milliseconds, so a block with any granularity or offset decodes without
//! loss; the encoder picks the coarsest standard scale that is exact.
//!
//! Hostile input gives an [`crate::Error`], never a panic: array lengths and
//! string indexes are checked, and delta decoding wraps instead of
//! overflowing.
//!
//! The submodules: `columns` (the decoded form and its view, [`Obj`]: the
//! one object shape of the product), `decode` ([`decode_columns`]) and
//! `encode` ([`encode_objects`]), hand-written on the protobuf wire format
//! for speed (merging re-encodes every object it touches), and, with the
//! `testkit` feature only, `element`: one object owned, for the bench's
//! generators and the tests, which build blocks or read them whole.

use std::sync::Arc;

use crate::Kind;

mod columns;
mod decode;
#[cfg(any(test, feature = "testkit"))]
mod element;
mod encode;

pub use columns::{BadIndex, Columns, ColumnsBuilder, Obj, Object, Tags, prefetched};
pub use decode::{Decoder, decode_columns};
#[cfg(any(test, feature = "testkit"))]
pub use element::{
    Changeset, Element, Member, Node, Relation, Way, decode_block, encode_block, split_points,
};
pub use encode::encode_objects;

/// A string of a block's string table: raw bytes, since PBF does not promise
/// UTF-8. Shared, so cloning is a reference-count increment.
pub type Str = Arc<[u8]>;

/// A tag: key and value.
pub type Tag = (Str, Str);

/// Metadata of one object version. All fields hold absolute values; a field
/// the file leaves out decodes to its protobuf default, shown below. The
/// user name is held as the storage needs: owned ([`Str`], in the
/// testkit's `Element`), as a string index (`u32`, in [`Columns`] and for
/// [`ColumnsBuilder`]) or borrowed (`&[u8]`, from an [`Obj`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Info<U = Str> {
    /// Version; -1 when the file stores none (the protobuf default).
    pub version: i32,
    /// Timestamp in milliseconds since the Unix epoch (0 when absent).
    pub timestamp_ms: i64,
    /// Changeset id (0 when absent).
    pub changeset: i64,
    /// User id (0 when absent).
    pub uid: i32,
    /// User name (empty when absent).
    pub user: U,
    /// The `visible` flag of history files; `None` when the file stores none.
    pub visible: Option<bool>,
}

impl<U> Info<U> {
    /// The same metadata with the user name held as `f` gives it.
    #[inline]
    pub fn map_user<V>(self, f: impl FnOnce(U) -> V) -> Info<V> {
        Info {
            version: self.version,
            timestamp_ms: self.timestamp_ms,
            changeset: self.changeset,
            uid: self.uid,
            user: f(self.user),
            visible: self.visible,
        }
    }
}

/// What the size estimates of an object count: its kind, and how many
/// tags, refs, locations and members it has and how many bytes its strings
/// take. [`Shape::encoded_bound`] is the encoder's bound; the merge's
/// memory budget is computed from the same shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The kind of object.
    pub kind: Kind,
    /// Number of tags.
    pub tags: usize,
    /// Bytes of the tags' keys and values.
    pub tag_bytes: usize,
    /// Bytes of the user name, when the object has metadata.
    pub user: Option<usize>,
    /// Way refs.
    pub refs: usize,
    /// Way locations.
    pub locations: usize,
    /// Relation members.
    pub members: usize,
    /// Bytes of the members' roles.
    pub role_bytes: usize,
}

impl Shape {
    /// An upper bound of the object's share of an encoded block, counting
    /// every string at every use and every varint at its widest.
    pub fn encoded_bound(&self) -> usize {
        // A string's table entry and one reference to it, besides its bytes.
        let string = 1 + 2 * VARINT_MAX;
        let tags = self.tag_bytes + self.tags * 2 * string + 1;
        let info = self
            .user
            .map_or(0, |user| 6 * (VARINT_MAX + 1) + user + string);
        let body = match self.kind {
            Kind::Node => 3 * VARINT_MAX,
            Kind::Way => VARINT_MAX * (1 + self.refs + 2 * self.locations),
            Kind::Relation => {
                VARINT_MAX + self.members * (3 * VARINT_MAX + string) + self.role_bytes
            }
            Kind::Changeset => VARINT_MAX,
        };
        ELEMENT_SLACK + tags + info + body
    }
}

/// The widest varint.
const VARINT_MAX: usize = 10;

/// Per-element allowance for message, group and field headers.
const ELEMENT_SLACK: usize = 64;

/// Allowance for the block's own fields (granularities, offsets, headers),
/// besides the [`Shape::encoded_bound`] of its objects.
pub const BLOCK_SLACK: usize = 256;

/// How to cut and write blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Most elements per block (default 8000).
    pub max_elements: usize,
    /// Most bytes of uncompressed block, as estimated by
    /// [`Shape::encoded_bound`] (default 16 MiB; PBF readers refuse
    /// blocks over 32 MiB).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Key, Result, proto};
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

    /// A node with tags and a way with locations: objects whose spans a
    /// reordering must move with them.
    fn tagged_and_located() -> (Element, Way) {
        let mut tagged = node(3, Some(info(2, None)));
        if let Element::Node(n) = &mut tagged {
            n.tags = tags(&[("amenity", "bench"), ("name", "Bänkli")]);
        }
        let located = Way {
            locations: vec![(100, -200), (515_000_007, 3)],
            ..unwrap_way(way(12, vec![5, 6]))
        };
        (tagged, located)
    }

    /// Reordered columns hold the same objects, each with its own tags,
    /// refs, locations and members, in the new order.
    #[test]
    fn reordered_columns_keep_every_field() {
        let (tagged, located) = tagged_and_located();
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
        let mut columns = decode_columns(&bytes).expect("decode");
        let stored = columns.to_elements();
        let order = [5, 3, 0, 6, 2, 1, 4];
        columns.reorder(&order);
        let want: Vec<Element> = order.iter().map(|&i| stored[i as usize].clone()).collect();
        assert_eq!(columns.to_elements(), want);
    }

    /// Gathered parts hold what the parts appended and then reordered
    /// hold: every field, string and span moved to the new columns.
    #[test]
    fn gathered_parts_are_the_parts_appended_and_reordered() {
        let (tagged, located) = tagged_and_located();
        let blocks = [
            vec![node(1, Some(info(1, None))), tagged, way(10, vec![1, 2])],
            vec![],
            vec![relation(20), Element::Changeset(Changeset { id: 99 })],
            vec![Element::Way(located), way(11, vec![]), relation(21)],
        ];
        let parts: Vec<Columns> = blocks
            .iter()
            .map(|b| decode_columns(&encode_block(b, &EncodeOptions::default())).expect("decode"))
            .collect();
        let mut appended = Columns::default();
        assert!(parts.iter().all(|p| appended.append(p)));
        let order = [5, 3, 0, 6, 2, 1, 7, 4];
        let gathered = Columns::gather(&parts, &order).expect("fits");
        appended.reorder(&order);
        assert_eq!(gathered.to_elements(), appended.to_elements());
        assert_eq!(gathered.len(), 8);
    }

    #[test]
    #[should_panic(expected = "twice")]
    fn gather_refuses_a_repeated_object() {
        let bytes = encode_block(&[node(1, None), node(2, None)], &EncodeOptions::default());
        let parts = [decode_columns(&bytes).expect("decode")];
        Columns::gather(&parts, &[1, 1]);
    }

    #[test]
    #[should_panic(expected = "twice")]
    fn reorder_refuses_a_repeated_object() {
        let bytes = encode_block(&[node(1, None), node(2, None)], &EncodeOptions::default());
        decode_columns(&bytes).expect("decode").reorder(&[1, 1]);
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
        assert_eq!(
            relation(1).shape().role_bytes,
            "outersubarea".len() + "inner".len()
        );
    }

    #[test]
    fn split_points_respect_limits() {
        let elements: Vec<Element> = (0..25).map(|i| node(i, None)).collect();
        let opts = EncodeOptions {
            max_elements: 10,
            ..EncodeOptions::default()
        };
        assert_eq!(split_points(&elements, &opts), vec![0..10, 10..20, 20..25]);
        let one = elements[0].shape().encoded_bound();
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
