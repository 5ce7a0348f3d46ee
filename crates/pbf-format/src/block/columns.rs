//! A decoded block kept as columns: the decompressed block bytes, its string
//! table as ranges of them, one fixed-size record per object and shared
//! arrays for tags, way refs, locations and relation members. Decoding into
//! columns allocates a handful of vectors per block instead of several per
//! element, and strings stay in the block's own bytes, so the merge can move
//! 8-byte references to objects and the encoder can read every field in
//! place. [`Obj`] is the read-only view the encoder and the merge's spill
//! records take, over either kind of decoded element.

use std::ops::Range;

use super::{Element, Info, Member, Node, Relation, Str, Tag, Way};
use crate::Kind;

/// A decoded PrimitiveBlock as columns (see [`super::decode_columns`]).
/// Every string index in it was checked against the table when decoded.
#[derive(Debug, Default)]
pub struct Columns {
    /// The decompressed block; strings are ranges of it.
    pub(super) data: Vec<u8>,
    /// The string table: (start, end) in `data`.
    pub(super) strings: Vec<(u32, u32)>,
    pub(super) objects: Vec<Object>,
    /// Tags as (key, value) string indexes.
    pub(super) tags: Vec<(u32, u32)>,
    /// Way refs, absolute.
    pub(super) refs: Vec<i64>,
    /// Way locations in nanodegrees.
    pub(super) locations: Vec<(i64, i64)>,
    pub(super) members: Vec<MemberColumn>,
}

/// String index of the absent user name (an empty string of its own, as in
/// [`Element`]s, where it is not the table's entry 0).
pub(super) const NO_USER: u32 = u32::MAX;

/// A range of one of the shared arrays.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }
}

/// One object: the fields every kind has, and spans of the shared arrays.
#[derive(Clone, Copy, Debug)]
pub struct Object {
    pub(super) kind: Kind,
    pub(super) id: i64,
    /// Nanodegrees (nodes only).
    pub(super) lat: i64,
    pub(super) lon: i64,
    pub(super) info: Option<InfoColumn>,
    pub(super) tags: Span,
    /// Way refs or relation members.
    pub(super) items: Span,
    /// Way locations (empty or as many as the refs).
    pub(super) locations: Span,
}

/// [`Info`] with the user as a string index ([`NO_USER`] when absent).
#[derive(Clone, Copy, Debug)]
pub(super) struct InfoColumn {
    pub version: i32,
    pub timestamp_ms: i64,
    pub changeset: i64,
    pub uid: i32,
    pub user: u32,
    pub visible: Option<bool>,
}

/// A relation member with its role as a string index.
#[derive(Clone, Copy, Debug)]
pub(super) struct MemberColumn {
    pub kind: Kind,
    pub id: i64,
    pub role: u32,
}

impl Columns {
    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// True when the block holds no objects.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The view of object `i`. Panics when `i` is out of range.
    pub fn get(&self, i: usize) -> Obj<'_> {
        Obj::Column(self, &self.objects[i])
    }

    /// Every object as an owned [`Element`], in stored order; each distinct
    /// string of the table is allocated once and shared.
    pub fn to_elements(&self) -> Vec<Element> {
        let mut table: Vec<Option<Str>> = vec![None; self.strings.len()];
        let empty = Str::from(&b""[..]);
        let mut string = |i: u32| -> Str {
            if i == NO_USER {
                return empty.clone();
            }
            table[i as usize]
                .get_or_insert_with(|| Str::from(self.string(i)))
                .clone()
        };
        self.objects
            .iter()
            .map(|o| self.element(o, &mut string))
            .collect()
    }

    fn element(&self, o: &Object, string: &mut impl FnMut(u32) -> Str) -> Element {
        let info = o.info.map(|i| Info {
            version: i.version,
            timestamp_ms: i.timestamp_ms,
            changeset: i.changeset,
            uid: i.uid,
            user: string(i.user),
            visible: i.visible,
        });
        let tags: Vec<Tag> = self.tags[o.tags.range()]
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
                refs: self.refs[o.items.range()].to_vec(),
                locations: self.locations[o.locations.range()].to_vec(),
            }),
            Kind::Relation => Element::Relation(Relation {
                id,
                info,
                tags,
                members: self.members[o.items.range()]
                    .iter()
                    .map(|m| Member {
                        kind: m.kind,
                        id: m.id,
                        role: string(m.role),
                    })
                    .collect(),
            }),
            Kind::Changeset => Element::Changeset(super::Changeset { id }),
        }
    }

    /// String `i` of the table (checked when decoded), or the absent user.
    fn string(&self, i: u32) -> &[u8] {
        if i == NO_USER {
            return b"";
        }
        let (start, end) = self.strings[i as usize];
        &self.data[start as usize..end as usize]
    }
}

/// Metadata as the encoders read it, from either kind of element.
#[derive(Clone, Copy, Debug)]
pub struct InfoView<'a> {
    /// See [`Info::version`].
    pub version: i32,
    /// See [`Info::timestamp_ms`].
    pub timestamp_ms: i64,
    /// See [`Info::changeset`].
    pub changeset: i64,
    /// See [`Info::uid`].
    pub uid: i32,
    /// See [`Info::user`].
    pub user: &'a [u8],
    /// See [`Info::visible`].
    pub visible: Option<bool>,
}

impl<'a> From<&'a Info> for InfoView<'a> {
    fn from(i: &'a Info) -> InfoView<'a> {
        InfoView {
            version: i.version,
            timestamp_ms: i.timestamp_ms,
            changeset: i.changeset,
            uid: i.uid,
            user: &i.user,
            visible: i.visible,
        }
    }
}

/// A read-only view of one object: an owned [`Element`] or an object of a
/// [`Columns`] block. Both give the same answers for the same object, so an
/// encoder that reads only views writes the same bytes for either.
#[derive(Clone, Copy, Debug)]
pub enum Obj<'a> {
    /// An owned element.
    Element(&'a Element),
    /// An object of a columns block.
    Column(&'a Columns, &'a Object),
}

impl<'a> Obj<'a> {
    /// The kind of object.
    pub fn kind(self) -> Kind {
        match self {
            Obj::Element(e) => e.kind(),
            Obj::Column(_, o) => o.kind,
        }
    }

    /// The object id.
    pub fn id(self) -> i64 {
        match self {
            Obj::Element(e) => e.id(),
            Obj::Column(_, o) => o.id,
        }
    }

    /// A node's (lat, lon) in nanodegrees; (0, 0) for other kinds.
    pub fn position(self) -> (i64, i64) {
        match self {
            Obj::Element(Element::Node(n)) => (n.lat, n.lon),
            Obj::Element(_) => (0, 0),
            Obj::Column(_, o) => (o.lat, o.lon),
        }
    }

    /// The metadata, if any.
    pub fn info(self) -> Option<InfoView<'a>> {
        match self {
            Obj::Element(e) => e.info().map(InfoView::from),
            Obj::Column(c, o) => o.info.map(|i| InfoView {
                version: i.version,
                timestamp_ms: i.timestamp_ms,
                changeset: i.changeset,
                uid: i.uid,
                user: c.string(i.user),
                visible: i.visible,
            }),
        }
    }

    /// Number of tags.
    pub fn tag_count(self) -> usize {
        match self {
            Obj::Element(e) => e.tags().len(),
            Obj::Column(_, o) => o.tags.len(),
        }
    }

    /// The tags in stored order, as (key, value) bytes.
    pub fn tags(self) -> impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])> {
        let (owned, columns): (&[Tag], &[(u32, u32)]) = match self {
            Obj::Element(e) => (e.tags(), &[]),
            Obj::Column(c, o) => (&[], &c.tags[o.tags.range()]),
        };
        let column = match self {
            Obj::Column(c, _) => Some(c),
            Obj::Element(_) => None,
        };
        let owned = owned.iter().map(|(k, v)| (&k[..], &v[..]));
        let columns = columns.iter().map(move |&(k, v)| match column {
            Some(c) => (c.string(k), c.string(v)),
            None => (&b""[..], &b""[..]),
        });
        Either(owned, columns)
    }

    /// A way's refs (empty for other kinds).
    pub fn refs(self) -> &'a [i64] {
        match self {
            Obj::Element(Element::Way(w)) => &w.refs,
            Obj::Element(_) => &[],
            Obj::Column(c, o) if o.kind == Kind::Way => &c.refs[o.items.range()],
            Obj::Column(..) => &[],
        }
    }

    /// A way's locations (empty for other kinds or when none are stored).
    pub fn locations(self) -> &'a [(i64, i64)] {
        match self {
            Obj::Element(Element::Way(w)) => &w.locations,
            Obj::Element(_) => &[],
            Obj::Column(c, o) => &c.locations[o.locations.range()],
        }
    }

    /// Number of relation members (0 for other kinds).
    pub fn member_count(self) -> usize {
        match self {
            Obj::Element(Element::Relation(r)) => r.members.len(),
            Obj::Element(_) => 0,
            Obj::Column(_, o) if o.kind == Kind::Relation => o.items.len(),
            Obj::Column(..) => 0,
        }
    }

    /// A relation's members as (kind, id, role).
    pub fn members(self) -> impl ExactSizeIterator<Item = (Kind, i64, &'a [u8])> {
        let (owned, columns): (&[Member], &[MemberColumn]) = match self {
            Obj::Element(Element::Relation(r)) => (&r.members, &[]),
            Obj::Column(c, o) if o.kind == Kind::Relation => (&[], &c.members[o.items.range()]),
            _ => (&[], &[]),
        };
        let column = match self {
            Obj::Column(c, _) => Some(c),
            Obj::Element(_) => None,
        };
        let owned = owned.iter().map(|m| (m.kind, m.id, &m.role[..]));
        let columns = columns.iter().map(move |m| match column {
            Some(c) => (m.kind, m.id, c.string(m.role)),
            None => (m.kind, m.id, &b""[..]),
        });
        Either(owned, columns)
    }

    /// See [`Element::key`].
    pub fn key(self) -> crate::Key {
        let version = self
            .info()
            .map_or(0, |i| crate::key::key_version(i.version));
        crate::Key::new(self.kind(), self.id(), version)
    }

    /// See [`Element::tie_seconds`].
    pub fn tie_seconds(self) -> u32 {
        self.info()
            .map_or(0, |i| crate::key::tie_seconds(i.timestamp_ms))
    }
}

/// One of two iterators of the same item (the two kinds of views).
struct Either<A, B>(A, B);

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Either<A, B> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.0.next().or_else(|| self.1.next())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.len_hint() + self.1.len_hint();
        (n, Some(n))
    }
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> ExactSizeIterator for Either<A, B> {}

/// The exact length of the slice iterators `Either` is built from.
trait LenHint {
    fn len_hint(&self) -> usize;
}

impl<I: Iterator> LenHint for I {
    fn len_hint(&self) -> usize {
        self.size_hint().0
    }
}
