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
//! Hostile input gives an [`Error`], never a panic: array lengths and string
//! indexes are checked, and delta decoding wraps instead of overflowing.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::mem::size_of;
use std::ops::Range;
use std::sync::Arc;

use prost::Message;

use crate::key::key_version;
use crate::{Error, Key, Kind, Result, proto};

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

    /// Replace the object id.
    pub fn set_id(&mut self, id: i64) {
        match self {
            Element::Node(n) => n.id = id,
            Element::Way(w) => w.id = id,
            Element::Relation(r) => r.id = id,
            Element::Changeset(c) => c.id = id,
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
        let common = ELEMENT_SLACK + tags_bound(self.tags()) + self.info().map_or(0, info_bound);
        match self {
            Element::Node(_) => common + 3 * VARINT_MAX,
            Element::Way(w) => common + VARINT_MAX * (1 + w.refs.len() + 2 * w.locations.len()),
            Element::Relation(r) => {
                let members: usize = r
                    .members
                    .iter()
                    .map(|m| 3 * VARINT_MAX + str_bound(&m.role))
                    .sum();
                common + VARINT_MAX + members
            }
            Element::Changeset(_) => common + VARINT_MAX,
        }
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

fn tags_bound(tags: &[Tag]) -> usize {
    tags.iter()
        .map(|(k, v)| str_bound(k) + str_bound(v))
        .sum::<usize>()
        + 1
}

fn info_bound(info: &Info) -> usize {
    6 * (VARINT_MAX + 1) + str_bound(&info.user)
}

// ---------------------------------------------------------------- decoding

/// Decode a decompressed PrimitiveBlock into owned elements, in stored order:
/// groups in order; within a group nodes, dense nodes, ways, relations and
/// changesets, in that field order.
pub fn decode_block(data: &[u8]) -> Result<Vec<Element>> {
    let mut block = proto::PrimitiveBlock::decode(data)?;
    let ctx = Context::new(&mut block)?;
    let mut out = Vec::with_capacity(count_elements(&block));
    for group in &block.primitivegroup {
        decode_group(group, &ctx, &mut out)?;
    }
    Ok(out)
}

fn count_elements(block: &proto::PrimitiveBlock) -> usize {
    block
        .primitivegroup
        .iter()
        .map(|g| {
            g.nodes.len()
                + g.dense.as_ref().map_or(0, |d| d.id.len())
                + g.ways.len()
                + g.relations.len()
                + g.changesets.len()
        })
        .sum()
}

/// What a block's elements need from the block: strings and scales.
struct Context {
    strings: Vec<Str>,
    empty: Str,
    granularity: i64,
    lat_offset: i64,
    lon_offset: i64,
    date_granularity: i64,
}

impl Context {
    /// Take the string table out of `block` and read its scales.
    fn new(block: &mut proto::PrimitiveBlock) -> Result<Context> {
        let granularity = block.granularity.unwrap_or(100);
        let date_granularity = block.date_granularity.unwrap_or(1000);
        if granularity <= 0 || date_granularity <= 0 {
            return Err(Error::malformed(format!(
                "block granularity {granularity} / date_granularity {date_granularity} not positive"
            )));
        }
        let empty = Str::from(&b""[..]);
        let mut strings: Vec<Str> = std::mem::take(&mut block.stringtable.s)
            .into_iter()
            .map(Str::from)
            .collect();
        if strings.is_empty() {
            // Index 0 is the conventional empty string; accept it without a table.
            strings.push(empty.clone());
        }
        Ok(Context {
            strings,
            empty,
            granularity: i64::from(granularity),
            lat_offset: block.lat_offset.unwrap_or(0),
            lon_offset: block.lon_offset.unwrap_or(0),
            date_granularity: i64::from(date_granularity),
        })
    }

    fn string(&self, index: u32) -> Result<Str> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.strings.get(i))
            .cloned()
            .ok_or_else(|| {
                Error::malformed(format!(
                    "string index {index} out of range (table has {} entries)",
                    self.strings.len()
                ))
            })
    }

    fn string_i32(&self, index: i32) -> Result<Str> {
        let index = u32::try_from(index)
            .map_err(|_| Error::malformed(format!("negative string index {index}")))?;
        self.string(index)
    }

    fn lat(&self, raw: i64) -> i64 {
        self.lat_offset
            .wrapping_add(self.granularity.wrapping_mul(raw))
    }

    fn lon(&self, raw: i64) -> i64 {
        self.lon_offset
            .wrapping_add(self.granularity.wrapping_mul(raw))
    }

    fn timestamp(&self, raw: i64) -> i64 {
        raw.wrapping_mul(self.date_granularity)
    }
}

fn decode_group(
    group: &proto::PrimitiveGroup,
    ctx: &Context,
    out: &mut Vec<Element>,
) -> Result<()> {
    for node in &group.nodes {
        out.push(Element::Node(decode_node(node, ctx)?));
    }
    if let Some(dense) = &group.dense {
        decode_dense(dense, ctx, out)?;
    }
    for way in &group.ways {
        out.push(Element::Way(decode_way(way, ctx)?));
    }
    for relation in &group.relations {
        out.push(Element::Relation(decode_relation(relation, ctx)?));
    }
    for changeset in &group.changesets {
        out.push(Element::Changeset(Changeset { id: changeset.id }));
    }
    Ok(())
}

fn decode_info(info: &Option<proto::Info>, ctx: &Context) -> Result<Option<Info>> {
    let Some(info) = info else { return Ok(None) };
    let user = match info.user_sid {
        Some(sid) => ctx.string(sid)?,
        None => ctx.empty.clone(),
    };
    Ok(Some(Info {
        version: info.version.unwrap_or(-1),
        timestamp_ms: ctx.timestamp(info.timestamp.unwrap_or(0)),
        changeset: info.changeset.unwrap_or(0),
        uid: info.uid.unwrap_or(0),
        user,
        visible: info.visible,
    }))
}

fn decode_tags(keys: &[u32], vals: &[u32], ctx: &Context) -> Result<Vec<Tag>> {
    if keys.len() != vals.len() {
        return Err(Error::malformed(format!(
            "{} tag keys but {} values",
            keys.len(),
            vals.len()
        )));
    }
    keys.iter()
        .zip(vals)
        .map(|(&k, &v)| Ok((ctx.string(k)?, ctx.string(v)?)))
        .collect()
}

fn decode_node(node: &proto::Node, ctx: &Context) -> Result<Node> {
    Ok(Node {
        id: node.id,
        info: decode_info(&node.info, ctx)?,
        lat: ctx.lat(node.lat),
        lon: ctx.lon(node.lon),
        tags: decode_tags(&node.keys, &node.vals, ctx)?,
    })
}

fn decode_dense(dense: &proto::DenseNodes, ctx: &Context, out: &mut Vec<Element>) -> Result<()> {
    let n = dense.id.len();
    if dense.lat.len() != n || dense.lon.len() != n {
        return Err(Error::malformed(format!(
            "dense nodes: {n} ids but {} lats and {} lons",
            dense.lat.len(),
            dense.lon.len()
        )));
    }
    let mut infos = match &dense.denseinfo {
        Some(info) => Some(DenseInfoDecoder::new(info, n)?),
        None => None,
    };
    let mut keys_vals = KeysVals {
        rest: dense.keys_vals.iter(),
    };
    let (mut id, mut lat, mut lon) = (0i64, 0i64, 0i64);
    for ((&d_id, &d_lat), &d_lon) in dense.id.iter().zip(&dense.lat).zip(&dense.lon) {
        id = id.wrapping_add(d_id);
        lat = lat.wrapping_add(d_lat);
        lon = lon.wrapping_add(d_lon);
        let info = match &mut infos {
            Some(decoder) => Some(decoder.next(ctx)?),
            None => None,
        };
        let tags = keys_vals.next_tags(ctx)?;
        out.push(Element::Node(Node {
            id,
            info,
            lat: ctx.lat(lat),
            lon: ctx.lon(lon),
            tags,
        }));
    }
    keys_vals.finish()
}

/// Reads `DenseNodes.keys_vals`: per node, key/value index pairs ended by 0.
/// An empty or early-ending array means no tags for the remaining nodes (as
/// libosmium reads it); a key without value or data left over is an error.
struct KeysVals<'a> {
    rest: std::slice::Iter<'a, i32>,
}

impl KeysVals<'_> {
    fn next_tags(&mut self, ctx: &Context) -> Result<Vec<Tag>> {
        let mut tags = Vec::new();
        while let Some(&key) = self.rest.next() {
            if key == 0 {
                break;
            }
            let value = self
                .rest
                .next()
                .ok_or_else(|| Error::malformed("dense keys_vals: key without value"))?;
            tags.push((ctx.string_i32(key)?, ctx.string_i32(*value)?));
        }
        Ok(tags)
    }

    fn finish(self) -> Result<()> {
        match self.rest.len() {
            0 => Ok(()),
            left => Err(Error::malformed(format!(
                "dense keys_vals: {left} entries left after the last node"
            ))),
        }
    }
}

/// Undoes the delta coding of `DenseInfo`, one node at a time. Each array is
/// either absent (empty: every node gets the default) or one entry per node.
struct DenseInfoDecoder<'a> {
    info: &'a proto::DenseInfo,
    index: usize,
    timestamp: i64,
    changeset: i64,
    uid: i32,
    user_sid: i32,
}

impl<'a> DenseInfoDecoder<'a> {
    fn new(info: &'a proto::DenseInfo, n: usize) -> Result<Self> {
        let lengths = [
            ("version", info.version.len()),
            ("timestamp", info.timestamp.len()),
            ("changeset", info.changeset.len()),
            ("uid", info.uid.len()),
            ("user_sid", info.user_sid.len()),
            ("visible", info.visible.len()),
        ];
        for (name, len) in lengths {
            if len != 0 && len != n {
                return Err(Error::malformed(format!(
                    "dense info: {len} {name} entries for {n} nodes"
                )));
            }
        }
        Ok(DenseInfoDecoder {
            info,
            index: 0,
            timestamp: 0,
            changeset: 0,
            uid: 0,
            user_sid: 0,
        })
    }

    fn next(&mut self, ctx: &Context) -> Result<Info> {
        let (i, info) = (self.index, self.info);
        self.index += 1;
        self.timestamp = self.timestamp.wrapping_add(delta_at(&info.timestamp, i));
        self.changeset = self.changeset.wrapping_add(delta_at(&info.changeset, i));
        self.uid = self.uid.wrapping_add(delta_at(&info.uid, i));
        self.user_sid = self.user_sid.wrapping_add(delta_at(&info.user_sid, i));
        let user = match info.user_sid.is_empty() {
            true => ctx.empty.clone(),
            false => ctx.string_i32(self.user_sid)?,
        };
        Ok(Info {
            version: info.version.get(i).copied().unwrap_or(-1),
            timestamp_ms: ctx.timestamp(self.timestamp),
            changeset: self.changeset,
            uid: self.uid,
            user,
            visible: info.visible.get(i).copied(),
        })
    }
}

fn delta_at<T: Copy + Default>(values: &[T], i: usize) -> T {
    values.get(i).copied().unwrap_or_default()
}

/// Undo delta coding, wrapping on overflow.
fn undelta(deltas: &[i64]) -> Vec<i64> {
    let mut acc = 0i64;
    deltas
        .iter()
        .map(|&d| {
            acc = acc.wrapping_add(d);
            acc
        })
        .collect()
}

fn decode_way(way: &proto::Way, ctx: &Context) -> Result<Way> {
    Ok(Way {
        id: way.id,
        info: decode_info(&way.info, ctx)?,
        tags: decode_tags(&way.keys, &way.vals, ctx)?,
        refs: undelta(&way.refs),
        locations: decode_locations(way, ctx)?,
    })
}

fn decode_locations(way: &proto::Way, ctx: &Context) -> Result<Vec<(i64, i64)>> {
    let (lats, lons) = (&way.lat, &way.lon);
    if lats.len() != lons.len() || (!lats.is_empty() && lats.len() != way.refs.len()) {
        return Err(Error::malformed(format!(
            "way {}: {} refs but {} lats and {} lons",
            way.id,
            way.refs.len(),
            lats.len(),
            lons.len()
        )));
    }
    let (mut lat, mut lon) = (0i64, 0i64);
    let locations = lats.iter().zip(lons).map(|(&d_lat, &d_lon)| {
        lat = lat.wrapping_add(d_lat);
        lon = lon.wrapping_add(d_lon);
        (ctx.lat(lat), ctx.lon(lon))
    });
    Ok(locations.collect())
}

fn decode_relation(relation: &proto::Relation, ctx: &Context) -> Result<Relation> {
    let n = relation.memids.len();
    if relation.roles_sid.len() != n || relation.types.len() != n {
        return Err(Error::malformed(format!(
            "relation {}: {n} member ids but {} roles and {} types",
            relation.id,
            relation.roles_sid.len(),
            relation.types.len()
        )));
    }
    let mut id = 0i64;
    let members = relation
        .memids
        .iter()
        .zip(&relation.roles_sid)
        .zip(&relation.types);
    let members = members.map(|((&d_id, &role), &kind)| {
        id = id.wrapping_add(d_id);
        Ok(Member {
            kind: member_kind(kind)?,
            id,
            role: ctx.string_i32(role)?,
        })
    });
    Ok(Relation {
        id: relation.id,
        info: decode_info(&relation.info, ctx)?,
        tags: decode_tags(&relation.keys, &relation.vals, ctx)?,
        members: members.collect::<Result<_>>()?,
    })
}

fn member_kind(stored: i32) -> Result<Kind> {
    match stored {
        0 => Ok(Kind::Node),
        1 => Ok(Kind::Way),
        2 => Ok(Kind::Relation),
        _ => Err(Error::malformed(format!(
            "relation member type {stored} is not 0, 1 or 2"
        ))),
    }
}

// ---------------------------------------------------------------- encoding

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

/// Encode elements, in the given order, into one PrimitiveBlock (not
/// compressed). Consecutive elements of one kind share a PrimitiveGroup;
/// mixed kinds are allowed. Dense nodes also start a new group where the
/// presence of metadata or of `visible` changes, since DenseInfo stores
/// those for all nodes of a group or none. The size limits of `opts` are not
/// applied here: cut the input with [`split_points`] first.
///
/// A member of kind [`Kind::Changeset`] is written as type 3, which no
/// reader (including [`decode_block`]) accepts.
pub fn encode_block(elements: &[Element], opts: &EncodeOptions) -> Vec<u8> {
    let scale = Scale::choose(elements);
    let mut encoder = Encoder {
        strings: StringTable::new(),
        scale,
    };
    let groups = elements
        .chunk_by(|a, b| group_class(a, opts.dense_nodes) == group_class(b, opts.dense_nodes))
        .map(|run| encoder.group(run, opts.dense_nodes))
        .collect();
    let block = proto::PrimitiveBlock {
        stringtable: encoder.strings.finish(),
        primitivegroup: groups,
        granularity: (scale.granularity != 100).then_some(1),
        date_granularity: (scale.date_granularity != 1000).then_some(1),
        lat_offset: None,
        lon_offset: None,
    };
    block.encode_to_vec()
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

/// Elements with equal classes may share a group.
fn group_class(element: &Element, dense: bool) -> (Kind, u8) {
    match element {
        Element::Node(node) if dense => match &node.info {
            None => (Kind::Node, 0),
            Some(info) if info.visible.is_none() => (Kind::Node, 1),
            Some(_) => (Kind::Node, 2),
        },
        other => (other.kind(), 0),
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
    fn choose(elements: &[Element]) -> Scale {
        let (mut coarse, mut whole_seconds) = (true, true);
        for element in elements {
            if let Some(info) = element.info() {
                whole_seconds &= info.timestamp_ms % 1000 == 0;
            }
            match element {
                Element::Node(n) => coarse &= n.lat % 100 == 0 && n.lon % 100 == 0,
                Element::Way(w) => {
                    coarse &= w
                        .locations
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
struct StringTable<'a> {
    index: HashMap<&'a [u8], u32, BuildHasherDefault<FxHasher>>,
    strings: Vec<&'a [u8]>,
}

impl<'a> StringTable<'a> {
    fn new() -> Self {
        StringTable {
            index: HashMap::default(),
            strings: vec![b""],
        }
    }

    fn index(&mut self, s: &'a [u8]) -> u32 {
        let next = u32::try_from(self.strings.len()).unwrap_or(u32::MAX);
        *self.index.entry(s).or_insert_with(|| {
            self.strings.push(s);
            next
        })
    }

    /// The index as the int32 some fields use (a table never nears 2^31
    /// entries, since a block is at most 32 MiB).
    fn index_i32(&mut self, s: &'a [u8]) -> i32 {
        i32::try_from(self.index(s)).unwrap_or(i32::MAX)
    }

    fn finish(self) -> proto::StringTable {
        proto::StringTable {
            s: self.strings.into_iter().map(<[u8]>::to_vec).collect(),
        }
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

/// Running values of the delta-coded DenseInfo fields.
#[derive(Default)]
struct DenseInfoPrev {
    timestamp: i64,
    changeset: i64,
    uid: i32,
    user_sid: i32,
}

struct Encoder<'a> {
    strings: StringTable<'a>,
    scale: Scale,
}

impl<'a> Encoder<'a> {
    fn group(&mut self, run: &'a [Element], dense: bool) -> proto::PrimitiveGroup {
        let mut group = proto::PrimitiveGroup::default();
        if dense && matches!(run.first(), Some(Element::Node(_))) {
            group.dense = Some(self.dense(run));
            return group;
        }
        for element in run {
            match element {
                Element::Node(n) => group.nodes.push(self.node(n)),
                Element::Way(w) => group.ways.push(self.way(w)),
                Element::Relation(r) => group.relations.push(self.relation(r)),
                Element::Changeset(c) => group.changesets.push(proto::ChangeSet { id: c.id }),
            }
        }
        group
    }

    fn tags(&mut self, tags: &'a [Tag]) -> (Vec<u32>, Vec<u32>) {
        tags.iter()
            .map(|(k, v)| (self.strings.index(k), self.strings.index(v)))
            .unzip()
    }

    fn info(&mut self, info: &'a Info) -> proto::Info {
        proto::Info {
            version: (info.version != -1).then_some(info.version),
            timestamp: Some(self.scale.timestamp(info.timestamp_ms)),
            changeset: Some(info.changeset),
            uid: Some(info.uid),
            user_sid: Some(self.strings.index(&info.user)),
            visible: info.visible,
        }
    }

    fn node(&mut self, node: &'a Node) -> proto::Node {
        let (keys, vals) = self.tags(&node.tags);
        proto::Node {
            id: node.id,
            keys,
            vals,
            info: node.info.as_ref().map(|i| self.info(i)),
            lat: self.scale.coord(node.lat),
            lon: self.scale.coord(node.lon),
        }
    }

    /// A run of nodes that all have metadata or all lack it, and likewise
    /// for `visible` (see [`group_class`]).
    fn dense(&mut self, run: &'a [Element]) -> proto::DenseNodes {
        let nodes = run.iter().filter_map(|e| match e {
            Element::Node(n) => Some(n),
            _ => None,
        });
        let mut dense = proto::DenseNodes {
            id: Vec::with_capacity(run.len()),
            lat: Vec::with_capacity(run.len()),
            lon: Vec::with_capacity(run.len()),
            ..Default::default()
        };
        let mut info = proto::DenseInfo::default();
        let mut prev_info = DenseInfoPrev::default();
        let has_tags = run.iter().any(|e| !e.tags().is_empty());
        let (mut id, mut lat, mut lon) = (0i64, 0i64, 0i64);
        for node in nodes {
            let (raw_lat, raw_lon) = (self.scale.coord(node.lat), self.scale.coord(node.lon));
            dense.id.push(node.id.wrapping_sub(id));
            dense.lat.push(raw_lat.wrapping_sub(lat));
            dense.lon.push(raw_lon.wrapping_sub(lon));
            (id, lat, lon) = (node.id, raw_lat, raw_lon);
            if has_tags {
                self.keys_vals(&node.tags, &mut dense.keys_vals);
            }
            if let Some(node_info) = &node.info {
                self.dense_info(node_info, &mut info, &mut prev_info);
            }
        }
        if run.first().and_then(Element::info).is_some() {
            dense.denseinfo = Some(info);
        }
        dense
    }

    fn keys_vals(&mut self, tags: &'a [Tag], out: &mut Vec<i32>) {
        for (k, v) in tags {
            out.push(self.strings.index_i32(k));
            out.push(self.strings.index_i32(v));
        }
        out.push(0);
    }

    fn dense_info(&mut self, info: &'a Info, out: &mut proto::DenseInfo, prev: &mut DenseInfoPrev) {
        let timestamp = self.scale.timestamp(info.timestamp_ms);
        let user_sid = self.strings.index_i32(&info.user);
        out.version.push(info.version);
        out.timestamp.push(timestamp.wrapping_sub(prev.timestamp));
        out.changeset
            .push(info.changeset.wrapping_sub(prev.changeset));
        out.uid.push(info.uid.wrapping_sub(prev.uid));
        out.user_sid.push(user_sid.wrapping_sub(prev.user_sid));
        if let Some(visible) = info.visible {
            out.visible.push(visible);
        }
        *prev = DenseInfoPrev {
            timestamp,
            changeset: info.changeset,
            uid: info.uid,
            user_sid,
        };
    }

    fn way(&mut self, way: &'a Way) -> proto::Way {
        let (keys, vals) = self.tags(&way.tags);
        let scale = self.scale;
        proto::Way {
            id: way.id,
            keys,
            vals,
            info: way.info.as_ref().map(|i| self.info(i)),
            refs: delta(way.refs.iter().copied()),
            lat: delta(way.locations.iter().map(|&(lat, _)| scale.coord(lat))),
            lon: delta(way.locations.iter().map(|&(_, lon)| scale.coord(lon))),
        }
    }

    fn relation(&mut self, relation: &'a Relation) -> proto::Relation {
        let (keys, vals) = self.tags(&relation.tags);
        let members = &relation.members;
        proto::Relation {
            id: relation.id,
            keys,
            vals,
            info: relation.info.as_ref().map(|i| self.info(i)),
            roles_sid: members
                .iter()
                .map(|m| self.strings.index_i32(&m.role))
                .collect(),
            memids: delta(members.iter().map(|m| m.id)),
            types: members.iter().map(|m| m.kind as i32).collect(),
        }
    }
}

/// Delta-code values, wrapping on overflow (decoding wraps back).
fn delta(values: impl Iterator<Item = i64>) -> Vec<i64> {
    let mut prev = 0i64;
    values
        .map(|v| {
            let d = v.wrapping_sub(prev);
            prev = v;
            d
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut e = node(5, Some(info(3, None)));
        assert_eq!(e.key(), Key::new(Kind::Node, 5, 3));
        e.set_id(-9);
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
