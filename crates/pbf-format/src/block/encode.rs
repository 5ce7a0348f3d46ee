//! Encoding elements ([`Obj`] views of owned [`Element`]s or of
//! [`super::Columns`]) into a PrimitiveBlock, written straight to bytes:
//! each message is built in a reused scratch buffer and appended to its
//! parent behind its length, so no protobuf structs, no per-element vectors
//! and no separate length pass are needed. The output is what the prost
//! messages of [`crate::proto`] would encode (fields in number order).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::{Element, EncodeOptions, InfoView, Obj};
use crate::Kind;

/// Encode elements, in the given order, into one PrimitiveBlock (not
/// compressed). Consecutive elements of one kind share a PrimitiveGroup;
/// mixed kinds are allowed. Dense nodes also start a new group where the
/// presence of metadata or of `visible` changes, since DenseInfo stores
/// those for all nodes of a group or none. The size limits of `opts` are not
/// applied here: cut the input with [`super::split_points`] first.
///
/// A member of kind [`Kind::Changeset`] is written as type 3, which no
/// reader (including [`super::decode_block`]) accepts.
pub fn encode_block(elements: &[Element], opts: &EncodeOptions) -> Vec<u8> {
    let objects: Vec<Obj<'_>> = elements.iter().map(Obj::Element).collect();
    encode_objects(&objects, opts)
}

/// [`encode_block`] of views: the same bytes for the same objects, whether
/// they are owned elements or objects of decoded columns.
pub fn encode_objects(elements: &[Obj<'_>], opts: &EncodeOptions) -> Vec<u8> {
    let scale = Scale::choose(elements);
    let mut e = Encoder {
        strings: StringTable::default(),
        scale,
        s: Scratch::default(),
    };
    let mut groups = Vec::new();
    let dense = opts.dense_nodes;
    for run in elements.chunk_by(|a, b| group_class(a, dense) == group_class(b, dense)) {
        e.group(run, dense, &mut groups);
    }
    let mut out = Vec::with_capacity(groups.len() + e.strings.bytes + 64);
    e.strings.write(&mut out, &mut e.s.msg);
    out.extend_from_slice(&groups);
    if scale.granularity != 100 {
        varint_field(&mut out, 17, 1);
    }
    if scale.date_granularity != 1000 {
        varint_field(&mut out, 18, 1);
    }
    out
}

/// Elements with equal classes may share a group.
fn group_class(element: &Obj<'_>, dense: bool) -> (Kind, u8) {
    match element.kind() {
        Kind::Node if dense => match element.info_flags() {
            None => (Kind::Node, 0),
            Some(false) => (Kind::Node, 1),
            Some(true) => (Kind::Node, 2),
        },
        kind => (kind, 0),
    }
}

// ------------------------------------------------------------ wire output

/// Append a varint (byte by byte: a slice copy of a few bytes would be a
/// `memcpy` call).
fn varint(out: &mut Vec<u8>, mut v: u64) {
    out.reserve(10);
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn zigzag32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

/// `int32` and `int64` fields: negative values as ten-byte varints.
fn int(v: i64) -> u64 {
    v as u64
}

fn varint_field(out: &mut Vec<u8>, number: u32, v: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, v);
}

fn bytes_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, (u64::from(number) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A packed field, left out when empty (as prost does).
fn packed_field(out: &mut Vec<u8>, number: u32, packed: &[u8]) {
    if !packed.is_empty() {
        bytes_field(out, number, packed);
    }
}

/// Varints of delta-coded values, wrapping on overflow (decoding wraps back).
fn delta_zigzag(out: &mut Vec<u8>, values: impl Iterator<Item = i64>) {
    let mut prev = 0i64;
    for v in values {
        varint(out, zigzag(v.wrapping_sub(prev)));
        prev = v;
    }
}

// ------------------------------------------------------------ block parts

/// How many objects ahead a first pass over a block prefetches.
const PREFETCH_AHEAD: usize = 8;

/// The block scales the encoder writes: the default granularity (100
/// nanodegrees) and date granularity (1000 ms) when they are exact for every
/// value in the block, else 1. Offsets are always 0.
#[derive(Clone, Copy, Debug)]
struct Scale {
    granularity: i64,
    date_granularity: i64,
}

impl Scale {
    fn choose(elements: &[Obj<'_>]) -> Scale {
        let (mut coarse, mut whole_seconds) = (true, true);
        for (i, element) in elements.iter().enumerate() {
            // The first pass over the block: fetch objects of scattered
            // source blocks a few ahead.
            if let Some(ahead) = elements.get(i + 2 * PREFETCH_AHEAD) {
                ahead.prefetch();
            }
            if let Some(ahead) = elements.get(i + PREFETCH_AHEAD) {
                ahead.prefetch_strings();
            }
            if let Some(timestamp_ms) = element.timestamp_ms() {
                whole_seconds &= timestamp_ms % 1000 == 0;
            }
            match element.kind() {
                Kind::Node => {
                    let (lat, lon) = element.position();
                    coarse &= lat % 100 == 0 && lon % 100 == 0
                }
                Kind::Way => {
                    coarse &= element
                        .locations()
                        .iter()
                        .all(|&(a, b)| a % 100 == 0 && b % 100 == 0)
                }
                _ => {}
            }
        }
        Scale {
            granularity: if coarse { 100 } else { 1 },
            date_granularity: if whole_seconds { 1000 } else { 1 },
        }
    }

    fn coord(self, nanodegrees: i64) -> i64 {
        nanodegrees / self.granularity
    }

    fn timestamp(self, ms: i64) -> i64 {
        ms / self.date_granularity
    }
}

/// The string table being built. Index 0 is the reserved empty string (the
/// keys_vals delimiter); every real string, the empty one included, gets an
/// index of its own in order of first use.
///
/// Decoded elements share their block's strings, so most lookups find a
/// string by its address (`by_address`), which is cheaper than hashing and
/// comparing its bytes. Addresses stay valid: every string is borrowed for
/// the whole encoding.
struct StringTable<'a> {
    by_address: HashMap<(usize, usize), u32, BuildHasherDefault<FxHasher>>,
    index: HashMap<&'a [u8], u32, BuildHasherDefault<FxHasher>>,
    strings: Vec<&'a [u8]>,
    /// Bytes of the strings, for the output's capacity.
    bytes: usize,
}

impl Default for StringTable<'_> {
    fn default() -> Self {
        StringTable {
            by_address: HashMap::default(),
            index: HashMap::default(),
            strings: vec![b""],
            bytes: 0,
        }
    }
}

impl<'a> StringTable<'a> {
    fn index(&mut self, s: &'a [u8]) -> u32 {
        let address = (s.as_ptr() as usize, s.len());
        if let Some(&i) = self.by_address.get(&address) {
            return i;
        }
        let next = u32::try_from(self.strings.len()).unwrap_or(u32::MAX);
        let i = *self.index.entry(s).or_insert_with(|| {
            self.strings.push(s);
            self.bytes += s.len() + 2;
            next
        });
        self.by_address.insert(address, i);
        i
    }

    /// The index as the int32 some fields use (a table never nears 2^31
    /// entries, since a block is at most 32 MiB).
    fn index_i32(&mut self, s: &'a [u8]) -> i32 {
        i32::try_from(self.index(s)).unwrap_or(i32::MAX)
    }

    /// Write the StringTable message as the block's field 1.
    fn write(&self, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
        scratch.clear();
        for s in &self.strings {
            bytes_field(scratch, 1, s);
        }
        bytes_field(out, 1, scratch);
    }
}

/// FxHash (as in rustc): a fast hash for the string table, whose keys come
/// from data being rewritten, not from an adversary choosing collisions.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let mut word = [0u8; 8];
        for (slot, &b) in word.iter_mut().zip(chunks.remainder()) {
            *slot = b;
        }
        self.add(u64::from_le_bytes(word));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Buffers reused across the messages of a block.
#[derive(Default)]
struct Scratch {
    /// The group being written.
    group: Vec<u8>,
    /// The element (or DenseNodes) message being written.
    msg: Vec<u8>,
    /// An Info or DenseInfo message.
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

struct Encoder<'a> {
    strings: StringTable<'a>,
    scale: Scale,
    s: Scratch,
}

impl<'a> Encoder<'a> {
    /// Append one PrimitiveGroup (block field 2) holding `run`.
    fn group(&mut self, run: &[Obj<'a>], dense: bool, out: &mut Vec<u8>) {
        let mut group = std::mem::take(&mut self.s.group);
        group.clear();
        if dense && run.first().is_some_and(|o| o.kind() == Kind::Node) {
            self.dense(run, &mut group);
        } else {
            for &element in run {
                self.element(element, &mut group);
            }
        }
        bytes_field(out, 2, &group);
        self.s.group = group;
    }

    /// Append one element message to a group.
    fn element(&mut self, element: Obj<'a>, group: &mut Vec<u8>) {
        let mut msg = std::mem::take(&mut self.s.msg);
        msg.clear();
        let number = match element.kind() {
            Kind::Node => {
                self.node(element, &mut msg);
                1
            }
            Kind::Way => {
                self.way(element, &mut msg);
                3
            }
            Kind::Relation => {
                self.relation(element, &mut msg);
                4
            }
            Kind::Changeset => {
                varint_field(&mut msg, 1, int(element.id()));
                5
            }
        };
        bytes_field(group, number, &msg);
        self.s.msg = msg;
    }

    /// Fields 2 and 3 (keys and vals) of a node, way or relation.
    fn tags(&mut self, element: Obj<'a>, msg: &mut Vec<u8>) {
        let (keys, vals) = (&mut self.s.keys, &mut self.s.vals);
        keys.clear();
        vals.clear();
        for (k, v) in element.tags() {
            varint(keys, u64::from(self.strings.index(k)));
            varint(vals, u64::from(self.strings.index(v)));
        }
        packed_field(msg, 2, keys);
        packed_field(msg, 3, vals);
    }

    /// Field 4, the Info message.
    fn info(&mut self, info: InfoView<'a>, msg: &mut Vec<u8>) {
        let out = &mut self.s.info;
        out.clear();
        if info.version != -1 {
            varint_field(out, 1, int(i64::from(info.version)));
        }
        varint_field(out, 2, int(self.scale.timestamp(info.timestamp_ms)));
        varint_field(out, 3, int(info.changeset));
        varint_field(out, 4, int(i64::from(info.uid)));
        varint_field(out, 5, u64::from(self.strings.index(info.user)));
        if let Some(visible) = info.visible {
            varint_field(out, 6, u64::from(visible));
        }
        bytes_field(msg, 4, out);
    }

    /// Fields 2 to 4 (tags and metadata) of a node, way or relation.
    fn common(&mut self, element: Obj<'a>, msg: &mut Vec<u8>) {
        self.tags(element, msg);
        if let Some(info) = element.info() {
            self.info(info, msg);
        }
    }

    fn node(&mut self, node: Obj<'a>, msg: &mut Vec<u8>) {
        varint_field(msg, 1, zigzag(node.id()));
        self.common(node, msg);
        let (lat, lon) = node.position();
        varint_field(msg, 8, zigzag(self.scale.coord(lat)));
        varint_field(msg, 9, zigzag(self.scale.coord(lon)));
    }

    fn way(&mut self, way: Obj<'a>, msg: &mut Vec<u8>) {
        varint_field(msg, 1, int(way.id()));
        self.common(way, msg);
        let scale = self.scale;
        let s = &mut self.s;
        let locations = way.locations();
        s.a.clear();
        delta_zigzag(&mut s.a, way.refs().iter().copied());
        packed_field(msg, 8, &s.a);
        s.a.clear();
        delta_zigzag(&mut s.a, locations.iter().map(|l| scale.coord(l.0)));
        packed_field(msg, 9, &s.a);
        s.a.clear();
        delta_zigzag(&mut s.a, locations.iter().map(|l| scale.coord(l.1)));
        packed_field(msg, 10, &s.a);
    }

    fn relation(&mut self, relation: Obj<'a>, msg: &mut Vec<u8>) {
        varint_field(msg, 1, int(relation.id()));
        self.common(relation, msg);
        let (roles, types, ids) = (&mut self.s.a, &mut self.s.b, &mut self.s.c);
        roles.clear();
        types.clear();
        ids.clear();
        let mut prev = 0i64;
        for (kind, id, role) in relation.members() {
            varint(roles, int(i64::from(self.strings.index_i32(role))));
            varint(types, kind as u64);
            varint(ids, zigzag(id.wrapping_sub(prev)));
            prev = id;
        }
        packed_field(msg, 8, roles);
        packed_field(msg, 9, ids);
        packed_field(msg, 10, types);
    }

    /// A DenseNodes message (group field 2) for a run of nodes that all have
    /// metadata or all lack it, and likewise for `visible` (see
    /// [`group_class`]).
    fn dense(&mut self, run: &[Obj<'a>], group: &mut Vec<u8>) {
        let mut msg = std::mem::take(&mut self.s.msg);
        let mut cols = DenseWriter::new(&mut self.s);
        let has_tags = run.iter().any(|e| e.tag_count() != 0);
        let has_info = run.first().and_then(|e| e.info_flags()).is_some();
        for &element in run {
            if element.kind() == Kind::Node {
                cols.node(element, self.scale, has_tags, &mut self.strings);
            }
        }
        msg.clear();
        cols.finish(has_info, &mut msg);
        bytes_field(group, 2, &msg);
        self.s.msg = msg;
    }
}

/// The columns of a DenseNodes message being written.
struct DenseWriter<'s> {
    id: &'s mut Vec<u8>,
    lat: &'s mut Vec<u8>,
    lon: &'s mut Vec<u8>,
    keys_vals: &'s mut Vec<u8>,
    info: &'s mut [Vec<u8>; 6],
    info_msg: &'s mut Vec<u8>,
    prev: Prev,
}

/// Previous values of the delta-coded columns.
#[derive(Default)]
struct Prev {
    id: i64,
    lat: i64,
    lon: i64,
    timestamp: i64,
    changeset: i64,
    uid: i32,
    user_sid: i32,
}

impl<'s> DenseWriter<'s> {
    fn new(s: &'s mut Scratch) -> DenseWriter<'s> {
        let w = DenseWriter {
            id: &mut s.a,
            lat: &mut s.b,
            lon: &mut s.c,
            keys_vals: &mut s.keys,
            info: &mut s.dense_info,
            info_msg: &mut s.info,
            prev: Prev::default(),
        };
        for column in [&mut *w.id, &mut *w.lat, &mut *w.lon, &mut *w.keys_vals] {
            column.clear();
        }
        w.info.iter_mut().for_each(Vec::clear);
        w
    }

    fn node<'a>(&mut self, node: Obj<'a>, scale: Scale, tags: bool, st: &mut StringTable<'a>) {
        let p = &mut self.prev;
        let id = node.id();
        let (lat, lon) = node.position();
        let (lat, lon) = (scale.coord(lat), scale.coord(lon));
        varint(self.id, zigzag(id.wrapping_sub(p.id)));
        varint(self.lat, zigzag(lat.wrapping_sub(p.lat)));
        varint(self.lon, zigzag(lon.wrapping_sub(p.lon)));
        (p.id, p.lat, p.lon) = (id, lat, lon);
        if tags {
            for (k, v) in node.tags() {
                varint(self.keys_vals, int(i64::from(st.index_i32(k))));
                varint(self.keys_vals, int(i64::from(st.index_i32(v))));
            }
            varint(self.keys_vals, 0);
        }
        if let Some(info) = node.info() {
            let user_sid = st.index_i32(info.user);
            self.info(info, scale, user_sid);
        }
    }

    fn info(&mut self, info: InfoView<'_>, scale: Scale, user_sid: i32) {
        let p = &mut self.prev;
        let [version, timestamp, changeset, uid, user, visible] = &mut *self.info;
        let ts = scale.timestamp(info.timestamp_ms);
        varint(version, int(i64::from(info.version)));
        varint(timestamp, zigzag(ts.wrapping_sub(p.timestamp)));
        varint(changeset, zigzag(info.changeset.wrapping_sub(p.changeset)));
        varint(uid, zigzag32(info.uid.wrapping_sub(p.uid)));
        varint(user, zigzag32(user_sid.wrapping_sub(p.user_sid)));
        if let Some(v) = info.visible {
            varint(visible, u64::from(v));
        }
        (p.timestamp, p.changeset, p.uid, p.user_sid) = (ts, info.changeset, info.uid, user_sid);
    }

    /// Write the DenseNodes message body into `msg`.
    fn finish(self, has_info: bool, msg: &mut Vec<u8>) {
        packed_field(msg, 1, self.id);
        if has_info {
            self.info_msg.clear();
            for (number, column) in (1..).zip(self.info.iter()) {
                packed_field(self.info_msg, number, column);
            }
            bytes_field(msg, 5, self.info_msg);
        }
        packed_field(msg, 8, self.lat);
        packed_field(msg, 9, self.lon);
        packed_field(msg, 10, self.keys_vals);
    }
}
