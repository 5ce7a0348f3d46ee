//! The decoded form of a block: the bytes of its string table, the table
//! as ranges of them, one fixed-size record per object and shared arrays
//! for tags, way refs, locations and relation members. Decoding into
//! columns allocates a handful of vectors per block instead of several per
//! object (none per block when the columns have room: several small blocks
//! are decoded into one), and strings stay in that one buffer, so the merge
//! can move 8-byte references to objects and the encoder can read every
//! field in place. [`Obj`] is the read-only view of one object that the encoder and
//! the merge's spill packets take; [`ColumnsBuilder`] builds columns from
//! another encoding.

use std::ops::Range;

use super::{Info, Shape};
use crate::Kind;
use crate::prefetch::prefetch;

/// A decoded PrimitiveBlock as columns (see [`super::decode_columns`]).
/// Every string index in it was checked against the table when decoded.
#[derive(Debug, Default)]
pub struct Columns {
    /// The bytes the strings lie in: the string tables of the blocks
    /// decoded into these columns, or a builder's buffer.
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

/// String index of the absent user name (an empty string of its own, not
/// the table's entry 0).
pub(super) const NO_USER: u32 = u32::MAX;

/// String index `i` of columns whose strings come `first` places later
/// in others ([`NO_USER`] stays what it is).
fn moved(i: u32, first: u32) -> u32 {
    if i == NO_USER { NO_USER } else { i + first }
}

/// The indexes `order` lists, each checked to come once: a permutation of
/// `n` objects. Panics otherwise.
fn each_once(order: &[u32], n: usize) -> impl Iterator<Item = usize> + '_ {
    assert_eq!(order.len(), n, "a permutation of the objects");
    let mut seen = vec![false; n];
    order.iter().map(move |&i| {
        assert!(
            !std::mem::replace(&mut seen[i as usize], true),
            "object {i} twice"
        );
        i as usize
    })
}

/// Whether columns holding arrays of the summed [`Columns::sizes`] fit the
/// columns' 32-bit indexes.
fn fit(sizes: impl IntoIterator<Item = [usize; 6]>) -> bool {
    let mut sum = [0usize; 6];
    for s in sizes {
        for (total, n) in sum.iter_mut().zip(s) {
            *total = total.saturating_add(n);
        }
    }
    sum.iter().all(|&n| u32::try_from(n).is_ok())
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

/// Append `items` to `to`, each as `f` makes it, and give their span there.
fn append_with<T>(to: &mut Vec<T>, items: &[T], f: impl Fn(&T) -> T) -> Span {
    let start = to.len() as u32;
    to.extend(items.iter().map(f));
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
    /// The user name is a string index ([`NO_USER`] when absent).
    pub(super) info: Option<Info<u32>>,
    pub(super) tags: Span,
    /// Way refs or relation members.
    pub(super) items: Span,
    /// Way locations (empty or as many as the refs).
    pub(super) locations: Span,
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
        let mut out = Columns {
            data: std::mem::take(&mut self.data),
            strings: std::mem::take(&mut self.strings),
            ..Columns::with_room(std::slice::from_ref(self))
        };
        for i in each_once(order, self.objects.len()) {
            out.push_moved(self, self.objects[i], 0);
        }
        *self = out;
    }

    /// Empty columns with room for the objects, tags, way refs, locations
    /// and members of `parts`.
    fn with_room(parts: &[Columns]) -> Columns {
        let sum = |f: fn(&Columns) -> usize| parts.iter().map(f).sum::<usize>();
        Columns {
            objects: Vec::with_capacity(sum(|p| p.objects.len())),
            tags: Vec::with_capacity(sum(|p| p.tags.len())),
            refs: Vec::with_capacity(sum(|p| p.refs.len())),
            locations: Vec::with_capacity(sum(|p| p.locations.len())),
            members: Vec::with_capacity(sum(|p| p.members.len())),
            ..Columns::default()
        }
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
        let mut here = self.sizes();
        here[0] = self.data.len();
        if !fit([here, from.sizes()]) {
            return false;
        }
        let first = self.take_strings(from);
        for &o in &from.objects {
            self.push_moved(from, o, first);
        }
        true
    }

    /// How many string bytes, strings, tags, way refs, locations and
    /// members the objects take, to check that a copy fits ([`fit`]).
    fn sizes(&self) -> [usize; 6] {
        [
            self.string_bytes().0.len(),
            self.strings.len(),
            self.tags.len(),
            self.refs.len(),
            self.locations.len(),
            self.members.len(),
        ]
    }

    /// The bytes the string table spans (not the rest of its block), and
    /// where they start in `data`.
    fn string_bytes(&self) -> (&[u8], u32) {
        let lo = self.strings.iter().map(|s| s.0).min().unwrap_or(0);
        let hi = self.strings.iter().map(|s| s.1).max().unwrap_or(0);
        (&self.data[lo as usize..hi as usize], lo)
    }

    /// Copy the bytes of `from`'s strings after this data and its string
    /// table after this one (the caller checked that they fit); returns
    /// the index its first string has here.
    fn take_strings(&mut self, from: &Columns) -> u32 {
        let (bytes, lo) = from.string_bytes();
        let moved = self.data.len() as u32;
        self.data.extend_from_slice(bytes);
        let first = self.strings.len() as u32;
        let to_here = |&(start, end): &(u32, u32)| (start - lo + moved, end - lo + moved);
        self.strings.extend(from.strings.iter().map(to_here));
        first
    }

    /// The objects of `parts`, numbered across them in order (the numbers
    /// [`Columns::append`]ing them all would give), in the order `order`
    /// gives, each once: what appending the parts and then
    /// [`Columns::reorder`]ing gives, with each object, tag, way ref,
    /// location and member copied once instead of twice (a merge loads a
    /// batch of small blobs as parts decoded on several threads). Returns
    /// `None` when the result would not fit the columns' 32-bit indexes.
    /// Panics when `order` is not a permutation of the objects.
    pub fn gather(parts: &[Columns], order: &[u32]) -> Option<Columns> {
        if !fit(parts.iter().map(Columns::sizes)) {
            return None;
        }
        let mut out = Columns::with_room(parts);
        // The parts' strings, placed as `append` places them, and the
        // number of each part's first object.
        let (mut firsts, mut starts, mut n) = (Vec::new(), Vec::new(), 0);
        for p in parts {
            firsts.push(out.take_strings(p));
            starts.push(n);
            n += p.len();
        }
        for i in each_once(order, n) {
            let p = starts.partition_point(|&s| s <= i) - 1;
            let (part, first) = (&parts[p], firsts[p]);
            out.push_moved(part, part.objects[i - starts[p]], first);
        }
        Some(out)
    }

    /// Push object `o` of `from`, whose string indexes move by `first`,
    /// with copies of what its spans cover (copied as they are when the
    /// strings do not move).
    fn push_moved(&mut self, from: &Columns, mut o: Object, first: u32) {
        let string = |i: u32| moved(i, first);
        let tags = &from.tags[o.tags.range()];
        o.tags = match first {
            0 => append(&mut self.tags, tags),
            _ => append_with(&mut self.tags, tags, |&(k, v)| (string(k), string(v))),
        };
        o.info = o.info.map(|i| i.map_user(string));
        o.locations = append(&mut self.locations, &from.locations[o.locations.range()]);
        o.items = match o.kind {
            Kind::Way => append(&mut self.refs, &from.refs[o.items.range()]),
            Kind::Relation => {
                let members = &from.members[o.items.range()];
                match first {
                    0 => append(&mut self.members, members),
                    _ => append_with(&mut self.members, members, |m| MemberColumn {
                        role: string(m.role),
                        ..*m
                    }),
                }
            }
            _ => o.items,
        };
        self.objects.push(o);
    }

    /// The view of object `i`. Panics when `i` is out of range.
    pub fn get(&self, i: usize) -> Obj<'_> {
        Obj {
            columns: self,
            object: &self.objects[i],
        }
    }

    /// The views of every object, in stored order.
    pub fn views(&self) -> impl ExactSizeIterator<Item = Obj<'_>> {
        self.objects.iter().map(|object| Obj {
            columns: self,
            object,
        })
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

/// A read-only view of one object of [`Columns`].
#[derive(Clone, Copy, Debug)]
pub struct Obj<'a> {
    pub(super) columns: &'a Columns,
    pub(super) object: &'a Object,
}

impl<'a> Obj<'a> {
    /// The kind of object.
    #[inline]
    pub fn kind(self) -> Kind {
        self.object.kind
    }

    /// The object id.
    #[inline]
    pub fn id(self) -> i64 {
        self.object.id
    }

    /// A node's (lat, lon) in nanodegrees; (0, 0) for other kinds.
    #[inline]
    pub fn position(self) -> (i64, i64) {
        (self.object.lat, self.object.lon)
    }

    /// The metadata, if any.
    #[inline]
    pub fn info(self) -> Option<Info<&'a [u8]>> {
        let c = self.columns;
        self.object.info.map(|i| i.map_user(|user| c.string(user)))
    }

    /// Whether the object is a deleted version (`visible` false, in a
    /// history file).
    pub fn deleted(self) -> bool {
        self.object.info.is_some_and(|i| i.visible == Some(false))
    }

    /// Whether the object has metadata, and whether that stores `visible`,
    /// without looking up the user name.
    #[inline]
    pub fn info_flags(self) -> Option<bool> {
        self.object.info.map(|i| i.visible.is_some())
    }

    /// The timestamp of the metadata, if any.
    #[inline]
    pub fn timestamp_ms(self) -> Option<i64> {
        self.object.info.map(|i| i.timestamp_ms)
    }

    /// Number of tags.
    #[inline]
    pub fn tag_count(self) -> usize {
        self.object.tags.len()
    }

    /// The tags in stored order, as (key, value) bytes.
    #[inline]
    pub fn tags(self) -> Tags<'a> {
        let c = self.columns;
        Tags {
            columns: c,
            tags: c.tags[self.object.tags.range()].iter(),
        }
    }

    /// A way's refs (empty for other kinds).
    #[inline]
    pub fn refs(self) -> &'a [i64] {
        match self.object.kind {
            Kind::Way => &self.columns.refs[self.object.items.range()],
            _ => &[],
        }
    }

    /// A way's locations (empty for other kinds or when none are stored).
    #[inline]
    pub fn locations(self) -> &'a [(i64, i64)] {
        &self.columns.locations[self.object.locations.range()]
    }

    /// A relation's members as stored (empty for other kinds).
    #[inline]
    fn member_columns(self) -> &'a [MemberColumn] {
        match self.object.kind {
            Kind::Relation => &self.columns.members[self.object.items.range()],
            _ => &[],
        }
    }

    /// Number of relation members (0 for other kinds).
    #[inline]
    pub fn member_count(self) -> usize {
        self.member_columns().len()
    }

    /// A relation's members as (kind, id, role).
    #[inline]
    pub fn members(self) -> impl ExactSizeIterator<Item = (Kind, i64, &'a [u8])> {
        let c = self.columns;
        self.member_columns()
            .iter()
            .map(move |m| (m.kind, m.id, c.string(m.role)))
    }

    /// The sort key: kind, id and version (0 when there is no metadata).
    #[inline]
    pub fn key(self) -> crate::Key {
        let version = self
            .object
            .info
            .map_or(0, |i| crate::key::key_version(i.version));
        crate::Key::new(self.kind(), self.id(), version)
    }

    /// What orders equal keys before input order
    /// ([`crate::key::tie_seconds`]): the timestamp in whole seconds, 0 when
    /// there is none.
    #[inline]
    pub fn tie_seconds(self) -> u32 {
        self.timestamp_ms().map_or(0, crate::key::tie_seconds)
    }

    /// What the size estimates count, in one pass over the object's tags
    /// and members.
    pub fn shape(self) -> Shape {
        let c = self.columns;
        let o = self.object;
        let len = |s: u32| c.string(s).len();
        let tags = &c.tags[o.tags.range()];
        let members = self.member_columns();
        Shape {
            kind: o.kind,
            tags: tags.len(),
            tag_bytes: tags.iter().map(|&(k, v)| len(k) + len(v)).sum(),
            user: o.info.map(|i| len(i.user)),
            refs: self.refs().len(),
            locations: o.locations.len(),
            members: members.len(),
            role_bytes: members.iter().map(|m| len(m.role)).sum(),
        }
    }

    /// The second stage of [`prefetched`]: reads the object's fields
    /// (fetched by then) and fetches what they point to, the table entry
    /// of its user name and its first tags.
    #[inline]
    fn prefetch_strings(self) {
        let (c, o) = (self.columns, self.object);
        if let Some(user) = o.info.and_then(|i| c.strings.get(i.user as usize)) {
            prefetch(user);
        }
        if let Some(tags) = c.tags.get(o.tags.start as usize) {
            prefetch(tags);
        }
    }

    /// The third stage: reads the table entries fetched by the second and
    /// fetches the user name's bytes and the table entries of the first
    /// tag. Writers that look strings up by content read those bytes first.
    #[inline]
    fn prefetch_bytes(self) {
        let (c, o) = (self.columns, self.object);
        if let Some(&(start, _)) = o.info.and_then(|i| c.strings.get(i.user as usize)) {
            if let Some(byte) = c.data.get(start as usize) {
                prefetch(byte);
            }
        }
        if let Some((k, v)) = c.first_tag(o) {
            for i in [k, v] {
                if let Some(entry) = c.strings.get(i as usize) {
                    prefetch(entry);
                }
            }
        }
    }

    /// The last stage: the bytes of the first tag, whose table entries the
    /// third fetched.
    #[inline]
    fn prefetch_tag_bytes(self) {
        let c = self.columns;
        if let Some((k, v)) = c.first_tag(self.object) {
            for i in [k, v] {
                let entry = c.strings.get(i as usize);
                if let Some(byte) = entry.and_then(|e| c.data.get(e.0 as usize)) {
                    prefetch(byte);
                }
            }
        }
    }
}

/// How many objects ahead [`prefetched`] works.
const PREFETCH_AHEAD: usize = 8;

/// The objects in order, each given after the caches were asked, in four
/// stages, for what the objects a few places ahead will need: their fields
/// 16 objects ahead, the string table entries those point to 8 ahead, the
/// user name's bytes and the first tag's entries 4 ahead, the first tag's
/// bytes 2 ahead. A loop over objects of scattered decoded blocks (the
/// encoder's first pass, a merge's spill packets) reads them through this:
/// the hardware prefetcher cannot follow such an order.
pub fn prefetched<'a, 'o>(objects: &'o [Obj<'a>]) -> impl Iterator<Item = Obj<'a>> + 'o {
    objects.iter().enumerate().map(|(i, &object)| {
        if let Some(ahead) = objects.get(i + 2 * PREFETCH_AHEAD) {
            // The object's fields.
            prefetch(ahead.object);
        }
        if let Some(ahead) = objects.get(i + PREFETCH_AHEAD) {
            ahead.prefetch_strings();
        }
        if let Some(ahead) = objects.get(i + PREFETCH_AHEAD / 2) {
            ahead.prefetch_bytes();
        }
        if let Some(ahead) = objects.get(i + PREFETCH_AHEAD / 4) {
            ahead.prefetch_tag_bytes();
        }
        object
    })
}

/// The tags of an [`Obj`], as (key, value) bytes.
#[derive(Clone, Debug)]
pub struct Tags<'a> {
    columns: &'a Columns,
    /// String indexes into the columns' table.
    tags: std::slice::Iter<'a, (u32, u32)>,
}

impl<'a> Iterator for Tags<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let c = self.columns;
        self.tags.next().map(|&(k, v)| (c.string(k), c.string(v)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.tags.size_hint()
    }
}

impl ExactSizeIterator for Tags<'_> {}

/// Builds [`Columns`] from another encoding whose strings lie in one
/// buffer (the merge's spill packets): strings are declared as ranges of
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
        ColumnsBuilder {
            columns: Columns::with_capacity(objects),
        }
    }

    /// Declare bytes `start..end` of the buffer a string; returns its index.
    pub fn string(&mut self, start: u32, end: u32) -> u32 {
        self.columns.strings.push((start, end));
        self.columns.strings.len() as u32 - 1
    }

    fn check(&self, string: u32) -> Result<u32, BadIndex> {
        let handed_out = (string as usize) < self.columns.strings.len();
        handed_out.then_some(string).ok_or(BadIndex)
    }

    /// Start the next object; (lat, lon) count for nodes only, and the
    /// user name of `info` is a string index returned by
    /// [`ColumnsBuilder::string`].
    pub fn object(
        &mut self,
        kind: Kind,
        id: i64,
        (lat, lon): (i64, i64),
        info: Option<Info<u32>>,
    ) -> Result<(), BadIndex> {
        let info = info.map(|i| self.check(i.user).map(|user| i.map_user(|_| user)));
        let info = info.transpose()?;
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
    use crate::block::Element;

    #[test]
    fn builder_makes_the_objects_it_is_given() {
        let data = b"highwayresidentialbob".to_vec();
        let mut b = ColumnsBuilder::with_capacity(2);
        let (k, v, user) = (b.string(0, 7), b.string(7, 18), b.string(18, 21));
        let info = Info {
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
