//! [`Element`]: one object owned, with its strings, for programs that build
//! blocks or read them whole: the bench's generators and the tests, behind
//! the `testkit` feature, which no product crate enables. The product works
//! on [`Columns`] and their view [`Obj`], where the object's accessors are
//! documented; [`Columns::from_elements`] builds columns from elements and
//! [`Obj::to_element`] copies an object out, so [`encode_block`] and
//! [`decode_block`] are the columns' encoder and decoder with a conversion,
//! and [`split_points`] cuts elements into blocks by the same
//! [`Shape::encoded_bound`] as the merge.

use std::ops::Range;

use super::{
    BLOCK_SLACK, Columns, ColumnsBuilder, EncodeOptions, Info, Obj, Shape, Str, Tag,
    decode_columns, encode_objects,
};
use crate::key::{key_version, tie_seconds};
use crate::{Key, Kind, Result};

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
    /// As [`Obj::key`].
    pub fn key(&self) -> Key {
        let version = self.info().map_or(0, |i| key_version(i.version));
        Key::new(self.kind(), self.id(), version)
    }

    /// As [`Obj::tie_seconds`].
    pub fn tie_seconds(&self) -> u32 {
        self.info().map_or(0, |i| tie_seconds(i.timestamp_ms))
    }

    /// The fields every kind has: kind, id, metadata and tags (a
    /// changeset has neither of the last two).
    fn common(&self) -> (Kind, i64, Option<&Info>, &[Tag]) {
        match self {
            Element::Node(n) => (Kind::Node, n.id, n.info.as_ref(), &n.tags),
            Element::Way(w) => (Kind::Way, w.id, w.info.as_ref(), &w.tags),
            Element::Relation(r) => (Kind::Relation, r.id, r.info.as_ref(), &r.tags),
            Element::Changeset(c) => (Kind::Changeset, c.id, None, &[]),
        }
    }

    /// The kind of object.
    pub fn kind(&self) -> Kind {
        self.common().0
    }

    /// The object id.
    pub fn id(&self) -> i64 {
        self.common().1
    }

    /// The metadata, if any (changesets have none).
    pub fn info(&self) -> Option<&Info> {
        self.common().2
    }

    /// The tags (empty for changesets).
    pub fn tags(&self) -> &[Tag] {
        self.common().3
    }

    /// As [`Obj::shape`].
    pub fn shape(&self) -> Shape {
        let tags = self.tags();
        let (refs, locations) = match self {
            Element::Way(w) => (w.refs.len(), w.locations.len()),
            _ => (0, 0),
        };
        let members: &[Member] = match self {
            Element::Relation(r) => &r.members,
            _ => &[],
        };
        Shape {
            kind: self.kind(),
            tags: tags.len(),
            tag_bytes: tags.iter().map(|(k, v)| k.len() + v.len()).sum(),
            user: self.info().map(|i| i.user.len()),
            refs,
            locations,
            members: members.len(),
            role_bytes: members.iter().map(|m| m.role.len()).sum(),
        }
    }
}

/// Encode elements, in the given order, into one PrimitiveBlock (not
/// compressed), as [`encode_objects`] encodes their views. The size limits
/// of `opts` are not applied here: cut the input with [`split_points`]
/// first.
pub fn encode_block(elements: &[Element], opts: &EncodeOptions) -> Vec<u8> {
    let columns = Columns::from_elements(elements);
    let objects: Vec<Obj<'_>> = columns.views().collect();
    encode_objects(&objects, opts)
}

/// Decode a decompressed PrimitiveBlock into owned elements, in the order of
/// [`decode_columns`].
pub fn decode_block(data: &[u8]) -> Result<Vec<Element>> {
    Ok(decode_columns(data)?.to_elements())
}

/// Split a slice into consecutive chunks that each hold at most
/// `opts.max_elements` elements and whose [`Shape::encoded_bound`] sum
/// stays within `opts.max_bytes`. A single element over the byte limit
/// gets a chunk of its own. No chunk is empty.
pub fn split_points(elements: &[Element], opts: &EncodeOptions) -> Vec<Range<usize>> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, BLOCK_SLACK);
    for (i, element) in elements.iter().enumerate() {
        let size = element.shape().encoded_bound();
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

impl Columns {
    /// Columns holding `elements` in order, every string use copied into
    /// the columns' bytes. Panics past 4 GiB of strings, which no block
    /// holds.
    pub fn from_elements(elements: &[Element]) -> Columns {
        let mut b = Building {
            columns: ColumnsBuilder::with_capacity(elements.len()),
            data: Vec::new(),
        };
        for e in elements {
            b.element(e);
        }
        b.columns
            .finish(b.data)
            .expect("every string lies in the columns' bytes")
    }

    /// Every object as an owned [`Element`], in stored order; each distinct
    /// string of the table is allocated once and shared.
    pub fn to_elements(&self) -> Vec<Element> {
        let mut table: Vec<Option<Str>> = vec![None; self.strings.len()];
        let mut string = |s: &[u8], i: u32| -> Str {
            match table.get_mut(i as usize) {
                Some(entry) => entry.get_or_insert_with(|| Str::from(s)).clone(),
                None => Str::from(s),
            }
        };
        self.views().map(|o| o.element(&mut string)).collect()
    }
}

impl Obj<'_> {
    /// The object as an owned [`Element`], each string allocated anew.
    pub fn to_element(self) -> Element {
        self.element(&mut |s, _| Str::from(s))
    }

    /// The element, its strings (bytes and table index) made by `string`.
    fn element(self, string: &mut impl FnMut(&[u8], u32) -> Str) -> Element {
        let c = self.columns;
        let o = self.object;
        let mut string = |i: u32| string(c.string(i), i);
        let info = o.info.map(|i| i.map_user(&mut string));
        let tags: Vec<Tag> = c.tags[o.tags.range()]
            .iter()
            .map(|&(k, v)| (string(k), string(v)))
            .collect();
        let id = o.id;
        match o.kind {
            Kind::Node => Element::Node(Node {
                id,
                info,
                lat: o.lat,
                lon: o.lon,
                tags,
            }),
            Kind::Way => Element::Way(Way {
                id,
                info,
                tags,
                refs: self.refs().to_vec(),
                locations: self.locations().to_vec(),
            }),
            Kind::Relation => Element::Relation(Relation {
                id,
                info,
                tags,
                members: c.members[o.items.range()]
                    .iter()
                    .map(|m| Member {
                        kind: m.kind,
                        id: m.id,
                        role: string(m.role),
                    })
                    .collect(),
            }),
            Kind::Changeset => Element::Changeset(Changeset { id }),
        }
    }
}

/// Columns being built from elements, and the bytes their strings lie in.
struct Building {
    columns: ColumnsBuilder,
    data: Vec<u8>,
}

impl Building {
    /// A string use: its bytes appended, its index declared.
    fn string(&mut self, s: &[u8]) -> u32 {
        let start = self.data.len();
        self.data.extend_from_slice(s);
        let at = |n: usize| u32::try_from(n).expect("strings of one block under 4 GiB");
        self.columns.string(at(start), at(self.data.len()))
    }

    fn element(&mut self, e: &Element) {
        const HANDED_OUT: &str = "an index the builder handed out";
        let info = e.info().map(|i| i.clone().map_user(|u| self.string(&u)));
        let position = match e {
            Element::Node(n) => (n.lat, n.lon),
            _ => (0, 0),
        };
        self.columns
            .object(e.kind(), e.id(), position, info)
            .expect(HANDED_OUT);
        for (k, v) in e.tags() {
            let (k, v) = (self.string(k), self.string(v));
            self.columns.tag(k, v).expect(HANDED_OUT);
        }
        match e {
            Element::Way(w) => {
                w.refs.iter().for_each(|&r| self.columns.way_ref(r));
                for &(lat, lon) in &w.locations {
                    self.columns.location(lat, lon);
                }
            }
            Element::Relation(r) => {
                for m in &r.members {
                    let role = self.string(&m.role);
                    self.columns.member(m.kind, m.id, role).expect(HANDED_OUT);
                }
            }
            _ => {}
        }
    }
}
