//! Encoding objects ([`Obj`] views of [`Columns`]) into a PrimitiveBlock,
//! written straight to bytes. A first pass over the block chooses its
//! scales and builds its string table (objects find their strings through
//! a table per source block, not by hashing); the second writes the table, then each
//! group and message in place behind its length, so every byte is copied
//! into the output once. No protobuf structs and no per-element vectors are
//! needed. The output is what prost would encode for the same messages,
//! fields in number order (the tests check it against their oracle,
//! `tests/proto`).

use std::collections::HashMap;

use prost::encoding::encoded_len_varint as varint_len;

use super::columns::{Columns, NO_USER};
use super::{BLOCK_SLACK, EncodeOptions, Obj, prefetched};
use crate::Kind;
use crate::hash::FxBuild;
use crate::wire::{
    WireType, encode_zigzag, encode_zigzag32, put_bytes, put_key, put_varint, put_varint_field, tag,
};

/// Encode objects of one or many [`Columns`], in the given order, into one
/// PrimitiveBlock (not compressed). Consecutive objects of one kind share a
/// PrimitiveGroup; mixed kinds are allowed. Dense nodes also start a new
/// group where the presence of metadata or of `visible` changes, since
/// DenseInfo stores those for all nodes of a group or none. The size limits
/// of `opts` are not applied here: the caller cuts blocks by
/// [`super::Shape::encoded_bound`], which also sizes the output here.
///
/// A member of kind [`Kind::Changeset`] is written as type 3, which no
/// reader (including [`super::decode_columns`]) accepts.
pub fn encode_objects(elements: &[Obj<'_>], opts: &EncodeOptions) -> Vec<u8> {
    let first = FirstPass::read(elements);
    let mut out = Vec::with_capacity(first.bound);
    first.strings.write(&mut out);
    let scale = first.scale;
    let mut e = Encoder {
        scale,
        sids: Sids(first.sids.iter()),
        s: Scratch::default(),
    };
    let dense = opts.dense_nodes;
    for run in elements.chunk_by(|a, b| group_class(a, dense) == group_class(b, dense)) {
        e.group(run, dense, &mut out);
    }
    debug_assert_eq!(e.sids.0.len(), 0, "every string written");
    if scale.granularity != 100 {
        put_varint_field(&mut out, 17, 1);
    }
    if scale.date_granularity != 1000 {
        put_varint_field(&mut out, 18, 1);
    }
    debug_assert!(
        out.len() <= first.bound,
        "Shape::encoded_bound bounds the block"
    );
    out
}

/// Elements with equal classes may share a group: dense nodes by whether
/// they have metadata (1, 2) and whether it stores `visible` (2), or none (0).
fn group_class(element: &Obj<'_>, dense: bool) -> (Kind, u8) {
    let kind = element.kind();
    match kind {
        Kind::Node if dense => (kind, element.info_flags().map_or(0, |v| 1 + u8::from(v))),
        _ => (kind, 0),
    }
}

// ------------------------------------------------------------ wire output

/// `int32` and `int64` fields: negative values as ten-byte varints.
fn int(v: i64) -> u64 {
    v as u64
}

/// The key and length of a length-delimited field of `len` bytes.
fn bytes_head(out: &mut Vec<u8>, number: u32, len: usize) {
    put_key(out, number, WireType::Len);
    put_varint(out, len as u64);
}

/// Bytes of a length-delimited field holding `len` bytes.
fn bytes_field_len(number: u32, len: usize) -> usize {
    varint_len(tag(number, WireType::Len)) + varint_len(len as u64) + len
}

/// Delta-coded varints, wrapping on overflow (decoding wraps back).
fn delta_zigzag(out: &mut Vec<u8>, values: impl Iterator<Item = i64>) {
    let mut prev = 0i64;
    for v in values {
        put_varint(out, encode_zigzag(v.wrapping_sub(prev)));
        prev = v;
    }
}

/// One field of a message whose parts are ready before it is written.
#[derive(Clone, Copy)]
enum Field<'b> {
    /// A varint field.
    Varint(u32, u64),
    /// A packed array, left out when empty (as prost does).
    Packed(u32, &'b [u8]),
    /// An embedded message, written even when empty.
    Message(u32, &'b [u8]),
}

impl Field<'_> {
    fn len(self) -> usize {
        match self {
            Field::Varint(number, v) => varint_len(u64::from(number) << 3) + varint_len(v),
            Field::Packed(_, []) => 0,
            Field::Packed(number, b) | Field::Message(number, b) => {
                bytes_field_len(number, b.len())
            }
        }
    }

    fn write(self, out: &mut Vec<u8>) {
        match self {
            Field::Varint(number, v) => put_varint_field(out, number, v),
            Field::Packed(_, []) => {}
            Field::Packed(number, b) | Field::Message(number, b) => put_bytes(out, number, b),
        }
    }
}

/// Append field `number` holding a message of `fields`, its length counted
/// first so that every part is copied once.
fn message(out: &mut Vec<u8>, number: u32, fields: &[Field<'_>]) {
    bytes_head(out, number, fields.iter().map(|f| f.len()).sum());
    for &f in fields {
        f.write(out);
    }
}

/// Room left for a group's length: 3 bytes hold lengths from 16 KiB to
/// 2 MiB, where most groups of ways and relations fall.
const GROUP_LEN_GUESS: usize = 3;

/// Append field `number` holding what `write` appends, written in place
/// behind room for its length; when the length needs more or fewer bytes
/// than guessed, the body moves once.
fn nested(out: &mut Vec<u8>, number: u32, write: impl FnOnce(&mut Vec<u8>)) {
    put_varint(out, (u64::from(number) << 3) | 2);
    let at = out.len();
    out.resize(at + GROUP_LEN_GUESS, 0);
    write(out);
    let body = out.len() - at - GROUP_LEN_GUESS;
    let need = varint_len(body as u64);
    if need != GROUP_LEN_GUESS {
        let end = out.len();
        if need > GROUP_LEN_GUESS {
            out.resize(end + need - GROUP_LEN_GUESS, 0);
        }
        out.copy_within(at + GROUP_LEN_GUESS..end, at + need);
        out.truncate(at + need + body);
    }
    prost::encoding::encode_varint(body as u64, &mut &mut out[at..at + need]);
}

// ------------------------------------------------------------ first pass

/// What the first pass over a block finds: its scales, its string table,
/// and the table index of every string use in the order the second pass
/// writes them (per object: tag keys and values, user, member roles).
struct FirstPass<'a> {
    scale: Scale,
    strings: StringTable<'a>,
    sids: Vec<u32>,
    /// The block's [`super::Shape::encoded_bound`], for the output's
    /// capacity.
    bound: usize,
}

impl<'a> FirstPass<'a> {
    fn read(elements: &[Obj<'a>]) -> FirstPass<'a> {
        let mut strings = StringTable {
            strings: vec![b""],
            ..StringTable::default()
        };
        let (mut sids, mut bound) = (Vec::new(), BLOCK_SLACK);
        let (mut coarse, mut whole_seconds) = (true, true);
        // Objects of scattered source blocks: fetched a few ahead.
        for element in prefetched(elements) {
            if let Some(timestamp_ms) = element.timestamp_ms() {
                whole_seconds &= timestamp_ms % 1000 == 0;
            }
            coarse &= match element.kind() {
                Kind::Node => {
                    let (lat, lon) = element.position();
                    lat % 100 == 0 && lon % 100 == 0
                }
                Kind::Way => element
                    .locations()
                    .iter()
                    .all(|&(a, b)| a % 100 == 0 && b % 100 == 0),
                _ => true,
            };
            bound = bound.saturating_add(element.shape().encoded_bound());
            strings.object(element, &mut sids);
        }
        let scale = Scale {
            granularity: if coarse { 100 } else { 1 },
            date_granularity: if whole_seconds { 1000 } else { 1 },
        };
        FirstPass {
            scale,
            strings,
            sids,
            bound,
        }
    }
}

/// The block scales the encoder writes: the default granularity (100
/// nanodegrees) and date granularity (1000 ms) when they are exact for every
/// value in the block, else 1. Offsets are always 0.
#[derive(Clone, Copy, Debug)]
struct Scale {
    granularity: i64,
    date_granularity: i64,
}

impl Scale {
    fn coord(self, nanodegrees: i64) -> i64 {
        nanodegrees / self.granularity
    }

    fn timestamp(self, ms: i64) -> i64 {
        ms / self.date_granularity
    }
}

/// No output index yet, in a source block's map.
const UNSEEN: u32 = u32::MAX;

/// The string table being built. Index 0 is the reserved empty string (the
/// keys_vals delimiter), put in `strings` by the first pass that makes the
/// table; every real string, the empty one included, gets an index of its
/// own in order of first use.
///
/// An object names its strings by index into its block's table, so each
/// source block gets a map from its indexes to the output's (an array,
/// filled on first use); only the first use of a source string hashes its
/// bytes, to share one index among equal strings of different sources.
#[derive(Default)]
struct StringTable<'a> {
    index: HashMap<&'a [u8], u32, FxBuild>,
    strings: Vec<&'a [u8]>,
    /// Source blocks' index maps, and their slots by block address: a
    /// block of a merge may draw on hundreds of sources.
    sources: Vec<Vec<u32>>,
    slots: HashMap<usize, usize, FxBuild>,
    /// The source of the previous object: (address, slot).
    last: (usize, usize),
}

impl<'a> StringTable<'a> {
    /// Record the indexes of an object's strings, in writing order.
    fn object(&mut self, o: Obj<'a>, sids: &mut Vec<u32>) {
        let (c, object) = (o.columns, o.object);
        let source = self.source(c);
        for &(k, v) in &c.tags[object.tags.range()] {
            sids.push(self.column_string(source, c, k));
            sids.push(self.column_string(source, c, v));
        }
        if let Some(info) = object.info {
            sids.push(self.column_string(source, c, info.user));
        }
        if object.kind == Kind::Relation {
            for m in &c.members[object.items.range()] {
                sids.push(self.column_string(source, c, m.role));
            }
        }
    }

    /// The slot of a source block in `sources`, added on first use.
    fn source(&mut self, c: &Columns) -> usize {
        let address = std::ptr::from_ref(c) as usize;
        if self.last.0 == address {
            return self.last.1;
        }
        let next = self.sources.len();
        let slot = *self.slots.entry(address).or_insert(next);
        if slot == next {
            self.sources.push(vec![UNSEEN; c.strings.len()]);
        }
        self.last = (address, slot);
        slot
    }

    /// The output index of string `i` of source block `c` (in slot
    /// `source`). Indexes were checked against the table when decoded.
    fn column_string(&mut self, source: usize, c: &'a Columns, i: u32) -> u32 {
        if i == NO_USER {
            return self.intern(b"");
        }
        let mapped = self.sources[source][i as usize];
        if mapped != UNSEEN {
            return mapped;
        }
        let out = self.intern(c.string(i));
        self.sources[source][i as usize] = out;
        out
    }

    fn intern(&mut self, s: &'a [u8]) -> u32 {
        let next = u32::try_from(self.strings.len()).unwrap_or(u32::MAX);
        *self.index.entry(s).or_insert_with(|| {
            self.strings.push(s);
            next
        })
    }

    /// Write the StringTable message as the block's field 1.
    fn write(&self, out: &mut Vec<u8>) {
        let len = self.strings.iter().map(|s| bytes_field_len(1, s.len()));
        bytes_head(out, 1, len.sum());
        for s in &self.strings {
            put_bytes(out, 1, s);
        }
    }
}

// ------------------------------------------------------------ second pass

/// Buffers reused across the messages of a block.
#[derive(Default)]
struct Scratch {
    /// An Info message.
    info: Vec<u8>,
    /// Packed arrays.
    keys: Vec<u8>,
    vals: Vec<u8>,
    a: Vec<u8>,
    b: Vec<u8>,
    c: Vec<u8>,
    /// The DenseInfo columns.
    dense_info: [Vec<u8>; 6],
}

/// The first pass's string indexes, read in writing order.
struct Sids<'p>(std::slice::Iter<'p, u32>);

impl Sids<'_> {
    /// The index of the next string written (the first pass recorded it).
    fn next(&mut self) -> u32 {
        *self.0.next().expect("the first pass recorded every string")
    }

    /// The same as an `int32` of the wire.
    fn next_i32(&mut self) -> i32 {
        i32::try_from(self.next()).unwrap_or(i32::MAX)
    }
}

struct Encoder<'p> {
    scale: Scale,
    sids: Sids<'p>,
    s: Scratch,
}

impl Encoder<'_> {
    /// Append one PrimitiveGroup (block field 2) holding `run`.
    fn group(&mut self, run: &[Obj<'_>], dense: bool, out: &mut Vec<u8>) {
        if dense && run.first().is_some_and(|o| o.kind() == Kind::Node) {
            self.dense(run, out);
        } else {
            nested(out, 2, |group| {
                for &element in run {
                    self.element(element, group);
                }
            });
        }
    }

    /// Append one element message to a group.
    fn element(&mut self, element: Obj<'_>, group: &mut Vec<u8>) {
        match element.kind() {
            Kind::Node => self.node(element, group),
            Kind::Way => self.way(element, group),
            Kind::Relation => self.relation(element, group),
            Kind::Changeset => message(group, 5, &[Field::Varint(1, int(element.id()))]),
        }
    }

    /// Fields 2 and 3 (keys and vals) of a node, way or relation into
    /// `keys` and `vals`, and field 4 (Info) into `info` (left empty
    /// without metadata).
    fn common(&mut self, element: Obj<'_>) {
        let s = &mut self.s;
        for column in [&mut s.keys, &mut s.vals, &mut s.info] {
            column.clear();
        }
        for _ in 0..element.tag_count() {
            put_varint(&mut s.keys, u64::from(self.sids.next()));
            put_varint(&mut s.vals, u64::from(self.sids.next()));
        }
        if let Some(info) = element.info() {
            let user = self.sids.next();
            let out = &mut s.info;
            if info.version != -1 {
                put_varint_field(out, 1, int(i64::from(info.version)));
            }
            put_varint_field(out, 2, int(self.scale.timestamp(info.timestamp_ms)));
            put_varint_field(out, 3, int(info.changeset));
            put_varint_field(out, 4, int(i64::from(info.uid)));
            put_varint_field(out, 5, u64::from(user));
            if let Some(visible) = info.visible {
                put_varint_field(out, 6, u64::from(visible));
            }
        }
    }

    /// Field 4 when the element has metadata.
    fn info_field(&self, element: Obj<'_>) -> Field<'_> {
        match element.info_flags() {
            Some(_) => Field::Message(4, &self.s.info),
            None => Field::Packed(4, &[]),
        }
    }

    fn node(&mut self, node: Obj<'_>, group: &mut Vec<u8>) {
        self.common(node);
        let (lat, lon) = node.position();
        let s = &self.s;
        message(
            group,
            1,
            &[
                Field::Varint(1, encode_zigzag(node.id())),
                Field::Packed(2, &s.keys),
                Field::Packed(3, &s.vals),
                self.info_field(node),
                Field::Varint(8, encode_zigzag(self.scale.coord(lat))),
                Field::Varint(9, encode_zigzag(self.scale.coord(lon))),
            ],
        );
    }

    fn way(&mut self, way: Obj<'_>, group: &mut Vec<u8>) {
        self.common(way);
        let scale = self.scale;
        let s = &mut self.s;
        let locations = way.locations();
        for column in [&mut s.a, &mut s.b, &mut s.c] {
            column.clear();
        }
        delta_zigzag(&mut s.a, way.refs().iter().copied());
        delta_zigzag(&mut s.b, locations.iter().map(|l| scale.coord(l.0)));
        delta_zigzag(&mut s.c, locations.iter().map(|l| scale.coord(l.1)));
        let s = &self.s;
        message(
            group,
            3,
            &[
                Field::Varint(1, int(way.id())),
                Field::Packed(2, &s.keys),
                Field::Packed(3, &s.vals),
                self.info_field(way),
                Field::Packed(8, &s.a),
                Field::Packed(9, &s.b),
                Field::Packed(10, &s.c),
            ],
        );
    }

    fn relation(&mut self, relation: Obj<'_>, group: &mut Vec<u8>) {
        self.common(relation);
        let s = &mut self.s;
        let (roles, types, ids) = (&mut s.a, &mut s.b, &mut s.c);
        for column in [&mut *roles, &mut *types, &mut *ids] {
            column.clear();
        }
        let mut prev = 0i64;
        for (kind, id, _) in relation.members() {
            put_varint(types, kind as u64);
            put_varint(ids, encode_zigzag(id.wrapping_sub(prev)));
            prev = id;
            put_varint(roles, int(i64::from(self.sids.next_i32())));
        }
        let s = &self.s;
        message(
            group,
            4,
            &[
                Field::Varint(1, int(relation.id())),
                Field::Packed(2, &s.keys),
                Field::Packed(3, &s.vals),
                self.info_field(relation),
                Field::Packed(8, &s.a),
                Field::Packed(9, &s.c),
                Field::Packed(10, &s.b),
            ],
        );
    }

    /// A group of one DenseNodes message (group field 2) for a run of nodes
    /// that all have metadata or all lack it, and likewise for `visible`
    /// (see [`group_class`]).
    fn dense(&mut self, run: &[Obj<'_>], out: &mut Vec<u8>) {
        let has_tags = run.iter().any(|e| e.tag_count() != 0);
        let has_info = run.first().and_then(|e| e.info_flags()).is_some();
        let (scale, sids, s) = (self.scale, &mut self.sids, &mut self.s);
        let (ids, lats, lons, keys_vals) = (&mut s.a, &mut s.b, &mut s.c, &mut s.keys);
        for column in [&mut *ids, &mut *lats, &mut *lons, &mut *keys_vals] {
            column.clear();
        }
        s.dense_info.iter_mut().for_each(Vec::clear);
        // The previous values of the delta-coded columns: id, lat, lon, and
        // DenseInfo's timestamp, changeset, uid and user_sid.
        let (mut id, mut lat, mut lon) = (0i64, 0i64, 0i64);
        let mut prev = (0i64, 0i64, 0i32, 0i32);
        for &node in run.iter().filter(|o| o.kind() == Kind::Node) {
            let (now_lat, now_lon) = node.position();
            let now = (node.id(), scale.coord(now_lat), scale.coord(now_lon));
            put_varint(ids, encode_zigzag(now.0.wrapping_sub(id)));
            put_varint(lats, encode_zigzag(now.1.wrapping_sub(lat)));
            put_varint(lons, encode_zigzag(now.2.wrapping_sub(lon)));
            (id, lat, lon) = now;
            if has_tags {
                for _ in 0..2 * node.tag_count() {
                    put_varint(keys_vals, int(i64::from(sids.next_i32())));
                }
                put_varint(keys_vals, 0);
            }
            let Some(info) = node.info() else { continue };
            let [version, timestamp, changeset, uid, user, visible] = &mut s.dense_info;
            let now = (
                scale.timestamp(info.timestamp_ms),
                info.changeset,
                info.uid,
                sids.next_i32(),
            );
            put_varint(version, int(i64::from(info.version)));
            put_varint(timestamp, encode_zigzag(now.0.wrapping_sub(prev.0)));
            put_varint(changeset, encode_zigzag(now.1.wrapping_sub(prev.1)));
            put_varint(uid, encode_zigzag32(now.2.wrapping_sub(prev.2)));
            put_varint(user, encode_zigzag32(now.3.wrapping_sub(prev.3)));
            if let Some(v) = info.visible {
                put_varint(visible, u64::from(v));
            }
            prev = now;
        }
        dense_group(s, has_info, out);
    }
}

/// Append the group: field 2 holding the DenseNodes message of the
/// columns in `s`, every length counted before anything is written.
fn dense_group(s: &Scratch, has_info: bool, out: &mut Vec<u8>) {
    let info: [Field<'_>; 6] =
        std::array::from_fn(|i| Field::Packed(i as u32 + 1, &s.dense_info[i]));
    let info_len: usize = info.iter().map(|f| f.len()).sum();
    let fields = [
        Field::Packed(1, &s.a),
        Field::Packed(8, &s.b),
        Field::Packed(9, &s.c),
        Field::Packed(10, &s.keys),
    ];
    let info_field = if has_info {
        bytes_field_len(5, info_len)
    } else {
        0
    };
    let body = fields.iter().map(|f| f.len()).sum::<usize>() + info_field;
    bytes_head(out, 2, bytes_field_len(2, body));
    bytes_head(out, 2, body);
    fields[0].write(out);
    if has_info {
        bytes_head(out, 5, info_len);
        info.iter().for_each(|f| f.write(out));
    }
    fields[1..].iter().for_each(|f| f.write(out));
}
