//! A decoded block kept as columns: the decompressed block bytes, its string
//! table as ranges of them, one fixed-size record per object and shared
//! arrays for tags, way refs, locations and relation members. Decoding into
//! columns allocates a handful of vectors per block instead of several per
//! element, and strings stay in the block's own bytes, so the merge can move
//! 8-byte references to objects and the encoder can read every field in
//! place. [`Obj`] is the read-only view the encoder and the merge's spill
//! records take, over either kind of decoded element.

use std::ops::Range;

use super::{ELEMENT_SLACK, Element, Info, Member, Node, Relation, Str, Tag, VARINT_MAX, Way};
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

/// The arrays of [`Columns::reorder`] being filled.
struct Reordered {
    objects: Vec<Object>,
    tags: Vec<(u32, u32)>,
    refs: Vec<i64>,
    locations: Vec<(i64, i64)>,
    members: Vec<MemberColumn>,
}

impl Reordered {
    /// Object `o` of `from`, with copies of what its spans cover.
    fn push(&mut self, from: &Columns, mut o: Object) {
        o.tags = append(&mut self.tags, &from.tags[o.tags.range()]);
        o.locations = append(&mut self.locations, &from.locations[o.locations.range()]);
        o.items = match o.kind {
            Kind::Way => append(&mut self.refs, &from.refs[o.items.range()]),
            Kind::Relation => append(&mut self.members, &from.members[o.items.range()]),
            _ => o.items,
        };
        self.objects.push(o);
    }
}

/// Append `items` to `to` and give their span there.
fn append<T: Copy>(to: &mut Vec<T>, items: &[T]) -> Span {
    let start = to.len() as u32;
    to.extend_from_slice(items);
    Span {
        start,
        end: to.len() as u32,
    }
}

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

    /// Put the objects in the order `order` gives (stored indexes, each
    /// once), and their tags, way refs, locations and members with them: a
    /// merge that takes the objects in sorted order then reads all of them
    /// front to back instead of all over the block. The string table stays
    /// as it is. Panics when `order` is not a permutation of the objects.
    pub fn reorder(&mut self, order: &[u32]) {
        assert_eq!(
            order.len(),
            self.objects.len(),
            "a permutation of the objects"
        );
        let mut seen = vec![false; order.len()];
        let mut out = Reordered {
            objects: Vec::with_capacity(self.objects.len()),
            tags: Vec::with_capacity(self.tags.len()),
            refs: Vec::with_capacity(self.refs.len()),
            locations: Vec::with_capacity(self.locations.len()),
            members: Vec::with_capacity(self.members.len()),
        };
        for &i in order {
            assert!(
                !std::mem::replace(&mut seen[i as usize], true),
                "object {i} twice"
            );
            out.push(self, self.objects[i as usize]);
        }
        (self.objects, self.tags, self.refs) = (out.objects, out.tags, out.refs);
        (self.locations, self.members) = (out.locations, out.members);
    }

    /// Empty columns with room for `objects` objects (to [`Columns::append`]
    /// blocks to).
    pub fn with_capacity(objects: usize) -> Columns {
        Columns {
            objects: Vec::with_capacity(objects),
            ..Columns::default()
        }
    }

    /// Append the objects of `from` after those of `self`, in stored order:
    /// the bytes its string table spans (not the rest of its block) are
    /// copied, and its string indexes and spans moved past what `self`
    /// holds. A merge gathers many small decoded blobs into one block this
    /// way, with a handful of vectors for all of them. Returns `false`, and
    /// leaves `self` as it was, when the result would not fit the columns'
    /// 32-bit indexes.
    pub fn append(&mut self, from: &Columns) -> bool {
        let lo = from.strings.iter().map(|s| s.0).min().unwrap_or(0);
        let hi = from.strings.iter().map(|s| s.1).max().unwrap_or(0);
        let fits = |now: usize, more: usize| u32::try_from(now + more).is_ok();
        if !(fits(self.data.len(), (hi - lo) as usize)
            && fits(self.strings.len(), from.strings.len())
            && fits(self.tags.len(), from.tags.len())
            && fits(self.refs.len(), from.refs.len())
            && fits(self.locations.len(), from.locations.len())
            && fits(self.members.len(), from.members.len()))
        {
            return false;
        }
        let moved = self.data.len() as u32;
        self.data
            .extend_from_slice(&from.data[lo as usize..hi as usize]);
        let first = self.strings.len() as u32;
        let string = |i: u32| if i == NO_USER { NO_USER } else { i + first };
        let to_here = |&(start, end): &(u32, u32)| (start - lo + moved, end - lo + moved);
        self.strings.extend(from.strings.iter().map(to_here));
        let shift = |s: Span, by: usize| Span {
            start: s.start + by as u32,
            end: s.end + by as u32,
        };
        let (tags, refs) = (self.tags.len(), self.refs.len());
        let (locations, members) = (self.locations.len(), self.members.len());
        self.objects.extend(from.objects.iter().map(|o| Object {
            info: o.info.map(|i| InfoColumn {
                user: string(i.user),
                ..i
            }),
            tags: shift(o.tags, tags),
            items: match o.kind {
                Kind::Way => shift(o.items, refs),
                Kind::Relation => shift(o.items, members),
                _ => o.items,
            },
            locations: shift(o.locations, locations),
            ..*o
        }));
        let tag = |&(k, v): &(u32, u32)| (string(k), string(v));
        self.tags.extend(from.tags.iter().map(tag));
        self.refs.extend_from_slice(&from.refs);
        self.locations.extend_from_slice(&from.locations);
        self.members
            .extend(from.members.iter().map(|m| MemberColumn {
                role: string(m.role),
                ..*m
            }));
        true
    }

    /// Bytes the columns hold on the heap (their vectors' capacities).
    pub fn heap_size(&self) -> usize {
        self.data.capacity()
            + self.strings.capacity() * size_of::<(u32, u32)>()
            + self.objects.capacity() * size_of::<Object>()
            + self.tags.capacity() * size_of::<(u32, u32)>()
            + self.refs.capacity() * size_of::<i64>()
            + self.locations.capacity() * size_of::<(i64, i64)>()
            + self.members.capacity() * size_of::<MemberColumn>()
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

    /// What the merge orders and cuts object `i` by, in one pass over its
    /// fields: the same values as [`Obj::key`], [`Obj::tie_seconds`],
    /// [`Obj::approx_size`] and [`Obj::encoded_size_bound`] of its view.
    pub fn merge_parts(&self, i: usize) -> MergeParts {
        let o = &self.objects[i];
        let len = |s: u32| self.string(s).len();
        let string_heap = 2 * size_of::<usize>();
        let tags = &self.tags[o.tags.range()];
        let tag_bytes: usize = tags.iter().map(|&(k, v)| len(k) + len(v)).sum();
        let user = o.info.map(|i| len(i.user));
        let mut encoded = ELEMENT_SLACK
            + tag_bytes
            + tags.len() * 2 * (1 + 2 * VARINT_MAX)
            + 1
            + user.map_or(0, |u| 6 * (VARINT_MAX + 1) + u + 1 + 2 * VARINT_MAX);
        let mut approx = size_of::<Element>()
            + tags.len() * (size_of::<Tag>() + 2 * string_heap)
            + tag_bytes
            + user.map_or(0, |u| u + string_heap);
        match o.kind {
            Kind::Node => encoded += 3 * VARINT_MAX,
            Kind::Way => {
                let (refs, locations) = (o.items.len(), o.locations.len());
                encoded += VARINT_MAX * (1 + refs + 2 * locations);
                approx += refs * size_of::<i64>() + locations * size_of::<(i64, i64)>();
            }
            Kind::Relation => {
                let members = &self.members[o.items.range()];
                let roles: usize = members.iter().map(|m| len(m.role)).sum();
                encoded +=
                    VARINT_MAX + members.len() * (3 * VARINT_MAX + 1 + 2 * VARINT_MAX) + roles;
                approx += members.len() * (size_of::<Member>() + string_heap) + roles;
            }
            Kind::Changeset => encoded += VARINT_MAX,
        }
        let version = o.info.map_or(0, |i| crate::key::key_version(i.version));
        MergeParts {
            key: crate::Key::new(o.kind, o.id, version),
            tie_seconds: o
                .info
                .map_or(0, |i| crate::key::tie_seconds(i.timestamp_ms)),
            approx,
            encoded,
        }
    }

    /// The (key, value) string indexes of an object's first tag.
    #[inline]
    fn first_tag(&self, o: &Object) -> Option<(u32, u32)> {
        self.tags.get(o.tags.range())?.first().copied()
    }

    /// String `i` of the table (checked when decoded), or the absent user.
    #[inline]
    pub(super) fn string(&self, i: u32) -> &[u8] {
        if i == NO_USER {
            return b"";
        }
        let (start, end) = self.strings[i as usize];
        &self.data[start as usize..end as usize]
    }
}

/// What the merge orders and cuts an object by (see [`Columns::merge_parts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeParts {
    /// [`Obj::key`].
    pub key: crate::Key,
    /// [`Obj::tie_seconds`].
    pub tie_seconds: u32,
    /// [`Obj::approx_size`].
    pub approx: usize,
    /// [`Obj::encoded_size_bound`].
    pub encoded: usize,
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

    /// Whether the object has metadata, and whether that stores `visible`,
    /// without looking up the user name.
    pub fn info_flags(self) -> Option<bool> {
        match self {
            Obj::Element(e) => e.info().map(|i| i.visible.is_some()),
            Obj::Column(_, o) => o.info.map(|i| i.visible.is_some()),
        }
    }

    /// The timestamp of the metadata, if any.
    pub fn timestamp_ms(self) -> Option<i64> {
        match self {
            Obj::Element(e) => e.info().map(|i| i.timestamp_ms),
            Obj::Column(_, o) => o.info.map(|i| i.timestamp_ms),
        }
    }

    /// Start loading the object's fields into the caches (for an owned
    /// element, nothing): a loop over objects of many blocks calls this a
    /// few objects ahead.
    #[inline]
    pub fn prefetch(self) {
        if let Obj::Column(_, o) = self {
            crate::prefetch::prefetch(o);
        }
    }

    /// The second stage of [`Obj::prefetch`], called closer to the object:
    /// reads its fields (fetched by then) and fetches what they point to,
    /// the table entry of its user name and its first tags.
    #[inline]
    pub fn prefetch_strings(self) {
        if let Obj::Column(c, o) = self {
            if let Some(user) = o.info.and_then(|i| c.strings.get(i.user as usize)) {
                crate::prefetch::prefetch(user);
            }
            if let Some(tags) = c.tags.get(o.tags.start as usize) {
                crate::prefetch::prefetch(tags);
            }
        }
    }

    /// The third stage, closer still: reads the table entries fetched by
    /// [`Obj::prefetch_strings`] and fetches the user name's bytes and the
    /// table entries of the first tag. Writers that look strings up by
    /// content read those bytes first.
    #[inline]
    pub fn prefetch_bytes(self) {
        if let Obj::Column(c, o) = self {
            if let Some(&(start, _)) = o.info.and_then(|i| c.strings.get(i.user as usize)) {
                if let Some(byte) = c.data.get(start as usize) {
                    crate::prefetch::prefetch(byte);
                }
            }
            if let Some((k, v)) = c.first_tag(o) {
                for i in [k, v] {
                    if let Some(entry) = c.strings.get(i as usize) {
                        crate::prefetch::prefetch(entry);
                    }
                }
            }
        }
    }

    /// The last stage: the bytes of the first tag, whose table entries
    /// [`Obj::prefetch_bytes`] fetched.
    #[inline]
    pub fn prefetch_tag_bytes(self) {
        if let Obj::Column(c, o) = self {
            if let Some((k, v)) = c.first_tag(o) {
                for i in [k, v] {
                    if let Some(byte) = c
                        .strings
                        .get(i as usize)
                        .and_then(|e| c.data.get(e.0 as usize))
                    {
                        crate::prefetch::prefetch(byte);
                    }
                }
            }
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
    pub fn tags(self) -> Tags<'a> {
        match self {
            Obj::Element(e) => Tags::Owned(e.tags().iter()),
            Obj::Column(c, o) => Tags::Column(c, c.tags[o.tags.range()].iter()),
        }
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

    /// The object as an owned [`Element`], each string allocated anew.
    pub fn to_element(self) -> Element {
        if let Obj::Element(e) = self {
            return e.clone();
        }
        let info = self.info().map(|i| Info {
            version: i.version,
            timestamp_ms: i.timestamp_ms,
            changeset: i.changeset,
            uid: i.uid,
            user: Str::from(i.user),
            visible: i.visible,
        });
        let tags = self
            .tags()
            .map(|(k, v)| (Str::from(k), Str::from(v)))
            .collect();
        let (id, (lat, lon)) = (self.id(), self.position());
        match self.kind() {
            Kind::Node => Element::Node(Node {
                id,
                info,
                lat,
                lon,
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
                members: self
                    .members()
                    .map(|(kind, id, role)| Member {
                        kind,
                        id,
                        role: Str::from(role),
                    })
                    .collect(),
            }),
            Kind::Changeset => Element::Changeset(super::Changeset { id }),
        }
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

/// The tags of an [`Obj`], as (key, value) bytes.
#[derive(Clone, Debug)]
pub enum Tags<'a> {
    /// Of an owned element.
    Owned(std::slice::Iter<'a, Tag>),
    /// Of an object of columns: string indexes into its table.
    Column(&'a Columns, std::slice::Iter<'a, (u32, u32)>),
}

impl<'a> Iterator for Tags<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Tags::Owned(tags) => tags.next().map(|(k, v)| (&k[..], &v[..])),
            Tags::Column(c, tags) => tags.next().map(|&(k, v)| (c.string(k), c.string(v))),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            Tags::Owned(tags) => tags.len(),
            Tags::Column(_, tags) => tags.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Tags<'_> {}

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

/// Metadata of an object added to a [`ColumnsBuilder`]; the user name is a
/// string index of the builder.
#[derive(Clone, Copy, Debug)]
pub struct InfoIndex {
    /// See [`Info::version`].
    pub version: i32,
    /// See [`Info::timestamp_ms`].
    pub timestamp_ms: i64,
    /// See [`Info::changeset`].
    pub changeset: i64,
    /// See [`Info::uid`].
    pub uid: i32,
    /// The user name: a string index returned by [`ColumnsBuilder::string`].
    pub user: u32,
    /// See [`Info::visible`].
    pub visible: Option<bool>,
}

/// Builds [`Columns`] from another encoding whose strings lie in one
/// buffer (the merge's spill records): strings are declared as ranges of
/// the buffer, objects are added in order and their tags, refs, locations
/// or members after each. Every string index is checked when added, and the
/// ranges against the buffer in [`ColumnsBuilder::finish`], so the columns
/// it builds are as safe to read as decoded ones.
#[derive(Debug, Default)]
pub struct ColumnsBuilder {
    columns: Columns,
}

/// A string index the builder has not handed out.
#[derive(Debug)]
pub struct BadIndex;

impl ColumnsBuilder {
    /// An empty builder with room for `objects` objects.
    pub fn with_capacity(objects: usize) -> ColumnsBuilder {
        let mut b = ColumnsBuilder::default();
        b.columns.objects.reserve(objects);
        b
    }

    /// Declare bytes `start..end` of the buffer a string; returns its index.
    pub fn string(&mut self, start: u32, end: u32) -> u32 {
        self.columns.strings.push((start, end));
        self.columns.strings.len() as u32 - 1
    }

    fn check(&self, string: u32) -> Result<u32, BadIndex> {
        match (string as usize) < self.columns.strings.len() {
            true => Ok(string),
            false => Err(BadIndex),
        }
    }

    /// Start the next object; (lat, lon) count for nodes only.
    pub fn object(
        &mut self,
        kind: Kind,
        id: i64,
        (lat, lon): (i64, i64),
        info: Option<InfoIndex>,
    ) -> Result<(), BadIndex> {
        let info = match info {
            Some(i) => Some(InfoColumn {
                version: i.version,
                timestamp_ms: i.timestamp_ms,
                changeset: i.changeset,
                uid: i.uid,
                user: self.check(i.user)?,
                visible: i.visible,
            }),
            None => None,
        };
        let c = &self.columns;
        let at = |n: usize| Span {
            start: n as u32,
            end: n as u32,
        };
        let items = match kind {
            Kind::Relation => at(c.members.len()),
            _ => at(c.refs.len()),
        };
        self.columns.objects.push(Object {
            kind,
            id,
            lat,
            lon,
            info,
            tags: at(c.tags.len()),
            items,
            locations: at(c.locations.len()),
        });
        Ok(())
    }

    fn last(&mut self) -> &mut Object {
        self.columns
            .objects
            .last_mut()
            .expect("ColumnsBuilder: an object must be started first")
    }

    /// Add a tag to the current object.
    pub fn tag(&mut self, key: u32, value: u32) -> Result<(), BadIndex> {
        let pair = (self.check(key)?, self.check(value)?);
        self.columns.tags.push(pair);
        self.last().tags.end += 1;
        Ok(())
    }

    /// Add a ref to the current object, a way.
    pub fn way_ref(&mut self, id: i64) {
        self.columns.refs.push(id);
        self.last().items.end += 1;
    }

    /// Add a location to the current object, a way.
    pub fn location(&mut self, lat: i64, lon: i64) {
        self.columns.locations.push((lat, lon));
        self.last().locations.end += 1;
    }

    /// Add a member to the current object, a relation.
    pub fn member(&mut self, kind: Kind, id: i64, role: u32) -> Result<(), BadIndex> {
        let role = self.check(role)?;
        self.columns.members.push(MemberColumn { kind, id, role });
        self.last().items.end += 1;
        Ok(())
    }

    /// The columns, with `data` as the buffer the strings lie in; `None`
    /// when a string range does not lie inside it.
    pub fn finish(mut self, data: Vec<u8>) -> Option<Columns> {
        let inside = |&(start, end): &(u32, u32)| start <= end && end as usize <= data.len();
        if !self.columns.strings.iter().all(inside) {
            return None;
        }
        self.columns.data = data;
        Some(self.columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_makes_the_objects_it_is_given() {
        let data = b"highwayresidentialbob".to_vec();
        let mut b = ColumnsBuilder::with_capacity(2);
        let (k, v, user) = (b.string(0, 7), b.string(7, 18), b.string(18, 21));
        let info = InfoIndex {
            version: 3,
            timestamp_ms: 5000,
            changeset: 9,
            uid: 4,
            user,
            visible: Some(true),
        };
        b.object(Kind::Way, 7, (0, 0), Some(info)).expect("object");
        b.tag(k, v).expect("tag");
        b.way_ref(1);
        b.way_ref(-2);
        b.object(Kind::Relation, 8, (0, 0), None).expect("object");
        b.member(Kind::Way, 7, v).expect("member");
        let columns = b.finish(data).expect("ranges inside");
        let elements = columns.to_elements();
        let Element::Way(way) = &elements[0] else {
            panic!("not a way: {:?}", elements[0])
        };
        assert_eq!((way.id, &way.refs[..]), (7, &[1, -2][..]));
        assert_eq!(
            (&way.tags[0].0[..], &way.tags[0].1[..]),
            (&b"highway"[..], &b"residential"[..])
        );
        assert_eq!(&way.info.as_ref().expect("info").user[..], b"bob");
        let Element::Relation(relation) = &elements[1] else {
            panic!("not a relation: {:?}", elements[1])
        };
        assert_eq!(&relation.members[0].role[..], b"residential");
        assert_eq!(columns.get(1).to_element(), elements[1]);
    }

    #[test]
    fn builder_refuses_unknown_strings_and_ranges_outside() {
        let mut b = ColumnsBuilder::default();
        let s = b.string(0, 4);
        b.object(Kind::Node, 1, (0, 0), None).expect("object");
        assert!(b.tag(s, s + 1).is_err());
        assert!(b.member(Kind::Node, 1, 9).is_err());
        assert!(b.finish(b"abc".to_vec()).is_none());
    }
}
