//! Decoding a PrimitiveBlock into [`Columns`], by hand on the [`wire`] reader: no intermediate protobuf
//! structs, packed arrays go into scratch buffers of a [`Decoder`] reused
//! from one block to the next, and tags, refs and members into the
//! columns' shared arrays, so decoding a block into columns that already
//! have room allocates nothing, however few elements it holds.
//!
//! It reads exactly what prost's messages (the tests' oracle,
//! `tests/proto`) would:
//! unknown fields are skipped, a repeated field may be packed or not and may
//! come in several pieces, a message field that occurs twice is merged (its
//! arrays appended, its last scalars winning), a missing scalar is its
//! default, and a known field of the wrong wire type is an error. One
//! exception, as in libosmium and the key scan: several DenseNodes fields in
//! a group are decoded each on its own, not merged into one delta sequence.
//! Within a group, elements come out in field order: nodes, dense nodes,
//! ways, relations, changesets.

use std::ops::Range;

use super::Info;
use super::columns::{Columns, MemberColumn, NO_USER, Object, Span};
use crate::scan::element_kind;
use crate::wire::{self, Reader, Value, each_varint};
use crate::{Error, Kind, Result};

/// Decode a decompressed PrimitiveBlock into columns of their own, objects
/// in stored order: groups in order; within a group nodes, dense nodes,
/// ways, relations and changesets, in that field order.
pub fn decode_columns(data: &[u8]) -> Result<Columns> {
    let mut out = Columns::default();
    Decoder::default().decode_into(data, &mut out)?;
    Ok(out)
}

/// Decodes blocks into [`Columns`], keeping its scratch buffers from one
/// block to the next.
#[derive(Default)]
pub struct Decoder {
    scratch: Scratch,
    /// The group messages of the block, as ranges of its bytes.
    groups: Vec<Range<usize>>,
    /// The element messages of all its groups as (field number, range of
    /// the block's bytes), and where among them each group ends.
    elements: Vec<(u32, Range<usize>)>,
    group_ends: Vec<usize>,
}

impl Decoder {
    /// Append the objects of a decompressed PrimitiveBlock to `out`, in the
    /// order of [`decode_block`], with a copy of the bytes of its string
    /// table (not the rest of the block): a merge gathers many small blobs
    /// into one block this way. Returns the indexes of the objects added.
    /// On an error `out` holds part of the block and is to be dropped.
    pub fn decode_into(&mut self, data: &[u8], out: &mut Columns) -> Result<Range<usize>> {
        let start = out.objects.len();
        self.groups.clear();
        let ctx = block_fields(data, out, &mut self.groups)?;
        self.parse_groups(data)?;
        out.objects.reserve(self.count(data));
        let mut from = 0;
        for &end in &self.group_ends {
            // Within a group, elements in field order (nearly always the
            // stored order: a group holds one kind).
            let group = &mut self.elements[from..end];
            if !group.is_sorted_by_key(|e| e.0) {
                group.sort_by_key(|e| e.0);
            }
            for (n, range) in group.iter() {
                decode_element(*n, &data[range.clone()], &ctx, &mut self.scratch, out)?;
            }
            from = end;
        }
        Ok(start..out.objects.len())
    }

    /// Find the element messages of every group.
    fn parse_groups(&mut self, data: &[u8]) -> Result<()> {
        self.elements.clear();
        self.group_ends.clear();
        let base = data.as_ptr() as usize;
        for group in &self.groups {
            let mut r = Reader::new(&data[group.clone()]);
            while let Some((n, v)) = r.field()? {
                let what = match (n, element_kind(n)) {
                    (2, _) => "DenseNodes",
                    (_, Some((_, what))) => what,
                    _ => continue,
                };
                let b = wire::expect_bytes(v, what)?;
                let at = b.as_ptr() as usize - base;
                self.elements.push((n, at..at + b.len()));
            }
            self.group_ends.push(self.elements.len());
        }
        Ok(())
    }

    /// Elements in the block, for the output's capacity (a hint: malformed
    /// dense ids may count wrong, and are caught while decoding).
    fn count(&self, data: &[u8]) -> usize {
        let count = |(n, range): &(u32, Range<usize>)| match n {
            2 => dense_ids(&data[range.clone()]),
            _ => 1,
        };
        self.elements.iter().map(count).sum()
    }
}

/// Append to a shared array and return the span of what `f` appended.
fn span<T>(v: &mut Vec<T>, f: impl FnOnce(&mut Vec<T>) -> Result<()>) -> Result<Span> {
    let start = v.len();
    f(v)?;
    Ok(Span {
        start: to_u32(start)?,
        end: to_u32(v.len())?,
    })
}

/// An array length or offset of one block, which is at most 32 MiB.
fn to_u32(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::malformed(format!("{n} entries in one block")))
}

/// Number of varints in a packed array (its bytes without a continuation bit).
fn packed_len(v: &Value<'_>) -> usize {
    match v {
        Value::Bytes(b) => b.iter().filter(|&&x| x < 0x80).count(),
        _ => 1,
    }
}

/// Read the block's fields, copy its string table into `out`, and give
/// the group messages' places in `data` to `groups`.
fn block_fields(data: &[u8], out: &mut Columns, groups: &mut Vec<Range<usize>>) -> Result<Context> {
    let first_string = to_u32(out.strings.len())?;
    let (mut granularity, mut date_granularity) = (100i32, 1000i32);
    let (mut lat_offset, mut lon_offset) = (0i64, 0i64);
    let base = data.as_ptr() as usize;
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        match n {
            1 => string_table(wire::expect_bytes(v, "StringTable")?, out)?,
            2 => {
                let group = wire::expect_bytes(v, "PrimitiveGroup")?;
                let at = group.as_ptr() as usize - base;
                groups.push(at..at + group.len());
            }
            17 => granularity = wire::expect_varint(v, "granularity")? as i32,
            18 => date_granularity = wire::expect_varint(v, "date_granularity")? as i32,
            19 => lat_offset = wire::expect_varint(v, "lat_offset")? as i64,
            20 => lon_offset = wire::expect_varint(v, "lon_offset")? as i64,
            _ => {}
        }
    }
    if granularity <= 0 || date_granularity <= 0 {
        return Err(Error::malformed(format!(
            "block granularity {granularity} / date_granularity {date_granularity} not positive"
        )));
    }
    if out.strings.len() == first_string as usize {
        // Index 0 is the conventional empty string; accept it without a table.
        let at = to_u32(out.data.len())?;
        out.strings.push((at, at));
    }
    // Leave u32::MAX to NO_USER.
    let end = to_u32(out.strings.len() + 1)?;
    Ok(Context {
        first_string,
        strings: end - 1 - first_string,
        granularity: i64::from(granularity),
        lat_offset,
        lon_offset,
        date_granularity: i64::from(date_granularity),
    })
}

/// Copy a StringTable message to the end of `out.data` and add its strings
/// to `out.strings`.
fn string_table(table: &[u8], out: &mut Columns) -> Result<()> {
    let moved = out.data.len();
    to_u32(moved + table.len())?;
    out.data.extend_from_slice(table);
    let base = table.as_ptr() as usize;
    let mut r = Reader::new(table);
    while let Some((n, v)) = r.field()? {
        if n == 1 {
            let s = wire::expect_bytes(v, "StringTable.s")?;
            // Inside the table, which now lies inside `out.data`.
            let start = (s.as_ptr() as usize - base + moved) as u32;
            out.strings.push((start, start + s.len() as u32));
        }
    }
    Ok(())
}

/// What a block's elements need from the block: strings and scales.
struct Context {
    /// The block's string table is entries `first_string..first_string +
    /// strings` of the columns'.
    first_string: u32,
    strings: u32,
    granularity: i64,
    lat_offset: i64,
    lon_offset: i64,
    date_granularity: i64,
}

impl Context {
    /// A checked string index of the block, as an index of the columns.
    fn string(&self, index: u32) -> Result<u32> {
        if index < self.strings {
            return Ok(self.first_string + index);
        }
        Err(Error::malformed(format!(
            "string index {index} out of range (table has {} entries)",
            self.strings
        )))
    }

    fn string_i32(&self, index: i32) -> Result<u32> {
        let index = u32::try_from(index)
            .map_err(|_| Error::malformed(format!("negative string index {index}")))?;
        self.string(index)
    }

    /// A stored (lat, lon) in nanodegrees.
    fn coords(&self, lat: i64, lon: i64) -> (i64, i64) {
        let scale = |offset: i64, raw: i64| offset.wrapping_add(self.granularity.wrapping_mul(raw));
        (scale(self.lat_offset, lat), scale(self.lon_offset, lon))
    }

    fn timestamp(&self, raw: i64) -> i64 {
        raw.wrapping_mul(self.date_granularity)
    }

    fn tags(&self, keys: &[u32], vals: &[u32], out: &mut Vec<(u32, u32)>) -> Result<Span> {
        if keys.len() != vals.len() {
            return Err(Error::malformed(format!(
                "{} tag keys but {} values",
                keys.len(),
                vals.len()
            )));
        }
        span(out, |out| {
            for (&k, &v) in keys.iter().zip(vals) {
                out.push((self.string(k)?, self.string(v)?));
            }
            Ok(())
        })
    }
}

/// Buffers reused across the elements of a block.
#[derive(Default)]
struct Scratch {
    keys: Vec<u32>,
    vals: Vec<u32>,
    lat: Vec<i64>,
    lon: Vec<i64>,
    roles: Vec<i32>,
    memids: Vec<i64>,
    refs: Vec<i64>,
    types: Vec<i32>,
    dense: DenseColumns,
}

/// Decode one element message of a group (`n`: its field number) and add
/// its objects to `out`.
fn decode_element(
    n: u32,
    data: &[u8],
    ctx: &Context,
    s: &mut Scratch,
    out: &mut Columns,
) -> Result<()> {
    let o = match n {
        1 => decode_node(data, ctx, s, out)?,
        2 => {
            s.dense.read(data)?;
            return s.dense.decode(ctx, out);
        }
        3 => decode_way(data, ctx, s, out)?,
        4 => decode_relation(data, ctx, s, out)?,
        _ => decode_changeset(data)?,
    };
    out.objects.push(o);
    Ok(())
}

/// Number of ids in a DenseNodes message, without decoding it.
fn dense_ids(data: &[u8]) -> usize {
    let mut r = Reader::new(data);
    let mut n = 0;
    while let Ok(Some((field, v))) = r.field() {
        if field == 1 {
            n += packed_len(&v);
        }
    }
    n
}

/// An object with no tags, refs or members yet.
fn object(kind: Kind, id: i64, info: Option<Info<u32>>) -> Object {
    Object {
        kind,
        id,
        lat: 0,
        lon: 0,
        info,
        tags: Span::default(),
        items: Span::default(),
        locations: Span::default(),
    }
}

/// Decode a Node, Way or Relation message: the fields all three have (id,
/// zigzag coded for a node; tags; Info, merged over occurrences) here, the
/// fields of its kind by `field`.
fn decode_object(
    kind: Kind,
    data: &[u8],
    ctx: &Context,
    s: &mut Scratch,
    out: &mut Columns,
    mut field: impl FnMut(u32, Value<'_>, &mut Scratch) -> Result<()>,
) -> Result<Object> {
    s.keys.clear();
    s.vals.clear();
    let (mut id, mut info) = (0, None);
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        match n {
            1 => id = wire::expect_varint(v, ["Node.id", "Way.id", "Relation.id"][kind.index()])?,
            2 => each_varint(v, "keys", |x| s.keys.push(x as u32))?,
            3 => each_varint(v, "vals", |x| s.vals.push(x as u32))?,
            4 => merge_info(&mut info, wire::expect_bytes(v, "Info")?)?,
            _ => field(n, v, s)?,
        }
    }
    let id = match kind {
        Kind::Node => wire::decode_zigzag(id),
        _ => id as i64,
    };
    let info = info.map(|i| {
        let user = i.user.map_or(Ok(NO_USER), |sid| ctx.string(sid))?;
        let timestamp_ms = ctx.timestamp(i.timestamp_ms);
        Result::Ok(Info {
            timestamp_ms,
            ..i.map_user(|_| user)
        })
    });
    let mut o = object(kind, id, info.transpose()?);
    o.tags = ctx.tags(&s.keys, &s.vals, &mut out.tags)?;
    Ok(o)
}

/// Merge an Info occurrence into `info`: the fields it has replace those
/// read before, a field never read is its default. The user is a string
/// index of the block and the timestamp as stored, until decoded.
fn merge_info(info: &mut Option<Info<Option<u32>>>, data: &[u8]) -> Result<()> {
    let info = info.get_or_insert(Info {
        version: -1,
        timestamp_ms: 0,
        changeset: 0,
        uid: 0,
        user: None,
        visible: None,
    });
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        let x = || wire::expect_varint(v, "Info field");
        match n {
            1 => info.version = x()? as i32,
            2 => info.timestamp_ms = x()? as i64,
            3 => info.changeset = x()? as i64,
            4 => info.uid = x()? as i32,
            5 => info.user = Some(x()? as u32),
            6 => info.visible = Some(x()? != 0),
            _ => {}
        }
    }
    Ok(())
}

fn decode_node(data: &[u8], ctx: &Context, s: &mut Scratch, out: &mut Columns) -> Result<Object> {
    let (mut lat, mut lon) = (0, 0);
    let mut o = decode_object(Kind::Node, data, ctx, s, out, |n, v, _| {
        match n {
            8 => lat = wire::decode_zigzag(wire::expect_varint(v, "Node.lat")?),
            9 => lon = wire::decode_zigzag(wire::expect_varint(v, "Node.lon")?),
            _ => {}
        }
        Ok(())
    })?;
    (o.lat, o.lon) = ctx.coords(lat, lon);
    Ok(o)
}

fn decode_way(data: &[u8], ctx: &Context, s: &mut Scratch, out: &mut Columns) -> Result<Object> {
    s.lat.clear();
    s.lon.clear();
    s.refs.clear();
    let mut o = decode_object(Kind::Way, data, ctx, s, out, |n, v, s| match n {
        8 => deltas(v, "Way.refs", &mut s.refs),
        9 => each_varint(v, "Way.lat", |x| s.lat.push(wire::decode_zigzag(x))),
        10 => each_varint(v, "Way.lon", |x| s.lon.push(wire::decode_zigzag(x))),
        _ => Ok(()),
    })?;
    let (id, refs, lats, lons) = (o.id, s.refs.len(), &s.lat, &s.lon);
    if lats.len() != lons.len() || (!lats.is_empty() && lats.len() != refs) {
        return Err(Error::malformed(format!(
            "way {id}: {refs} refs but {} lats and {} lons",
            lats.len(),
            lons.len()
        )));
    }
    let (mut lat, mut lon) = (0i64, 0i64);
    o.locations = span(&mut out.locations, |locations| {
        locations.extend(lats.iter().zip(lons).map(|(&d_lat, &d_lon)| {
            lat = lat.wrapping_add(d_lat);
            lon = lon.wrapping_add(d_lon);
            ctx.coords(lat, lon)
        }));
        Ok(())
    })?;
    o.items = span(&mut out.refs, |refs| {
        refs.extend_from_slice(&s.refs);
        Ok(())
    })?;
    Ok(o)
}

fn decode_relation(
    data: &[u8],
    ctx: &Context,
    s: &mut Scratch,
    out: &mut Columns,
) -> Result<Object> {
    s.roles.clear();
    s.types.clear();
    s.memids.clear();
    let mut o = decode_object(Kind::Relation, data, ctx, s, out, |n, v, s| match n {
        8 => each_varint(v, "Relation.roles_sid", |x| s.roles.push(x as i32)),
        9 => deltas(v, "Relation.memids", &mut s.memids),
        10 => each_varint(v, "Relation.types", |x| s.types.push(x as i32)),
        _ => Ok(()),
    })?;
    o.items = span(&mut out.members, |out| members(o.id, s, ctx, out))?;
    Ok(o)
}

/// Append the absolute values of a packed array of delta-coded ids
/// (zigzag `sint64`) to `out`, going on from its last value: a field in
/// several pieces is one delta sequence.
fn deltas(v: Value<'_>, what: &str, out: &mut Vec<i64>) -> Result<()> {
    out.reserve(packed_len(&v));
    let mut acc = out.last().copied().unwrap_or(0i64);
    each_varint(v, what, |x| {
        acc = acc.wrapping_add(wire::decode_zigzag(x));
        out.push(acc);
    })
}

fn members(id: i64, s: &Scratch, ctx: &Context, out: &mut Vec<MemberColumn>) -> Result<()> {
    let n = s.memids.len();
    if s.roles.len() != n || s.types.len() != n {
        return Err(Error::malformed(format!(
            "relation {id}: {n} member ids but {} roles and {} types",
            s.roles.len(),
            s.types.len()
        )));
    }
    for ((&id, &role), &kind) in s.memids.iter().zip(&s.roles).zip(&s.types) {
        out.push(MemberColumn {
            kind: member_kind(kind)?,
            id,
            role: ctx.string_i32(role)?,
        });
    }
    Ok(())
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

fn decode_changeset(data: &[u8]) -> Result<Object> {
    let mut id = 0;
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        if n == 1 {
            id = wire::expect_varint(v, "ChangeSet.id")? as i64;
        }
    }
    Ok(object(Kind::Changeset, id, None))
}

/// How a stored DenseInfo value reads, widened to `i64`.
type ReadValue = fn(u64) -> i64;

/// The DenseInfo arrays in field order, and how a stored value reads.
const DENSE_INFO: [(&str, ReadValue); 6] = [
    ("version", |x| i64::from(x as i32)),
    ("timestamp", wire::decode_zigzag),
    ("changeset", wire::decode_zigzag),
    ("uid", |x| i64::from(wire::decode_zigzag32(x))),
    ("user_sid", |x| i64::from(wire::decode_zigzag32(x))),
    ("visible", |x| i64::from(x != 0)),
];

/// The arrays of one DenseNodes message, delta coded as stored.
#[derive(Default)]
struct DenseColumns {
    id: Vec<i64>,
    lat: Vec<i64>,
    lon: Vec<i64>,
    keys_vals: Vec<i32>,
    has_info: bool,
    /// The DenseInfo arrays, as [`DENSE_INFO`] lists them.
    info: [Vec<i64>; 6],
}

impl DenseColumns {
    fn read(&mut self, data: &[u8]) -> Result<()> {
        self.has_info = false;
        for column in [&mut self.id, &mut self.lat, &mut self.lon] {
            column.clear();
        }
        self.keys_vals.clear();
        self.info.iter_mut().for_each(Vec::clear);
        let mut r = Reader::new(data);
        while let Some((n, v)) = r.field()? {
            let (what, column) = match n {
                1 => ("DenseNodes.id", &mut self.id),
                5 => {
                    self.has_info = true;
                    self.read_info(wire::expect_bytes(v, "DenseInfo")?)?;
                    continue;
                }
                8 => ("DenseNodes.lat", &mut self.lat),
                9 => ("DenseNodes.lon", &mut self.lon),
                10 => {
                    let keys_vals = &mut self.keys_vals;
                    each_varint(v, "DenseNodes.keys_vals", |x| keys_vals.push(x as i32))?;
                    continue;
                }
                _ => continue,
            };
            each_varint(v, what, |x| column.push(wire::decode_zigzag(x)))?;
        }
        Ok(())
    }

    fn read_info(&mut self, data: &[u8]) -> Result<()> {
        let mut r = Reader::new(data);
        while let Some((n, v)) = r.field()? {
            let i = (n as usize).wrapping_sub(1);
            if let (Some(&(_, read)), Some(column)) = (DENSE_INFO.get(i), self.info.get_mut(i)) {
                each_varint(v, "DenseInfo", |x| column.push(read(x)))?;
            }
        }
        Ok(())
    }

    fn check(&self) -> Result<()> {
        let n = self.id.len();
        if self.lat.len() != n || self.lon.len() != n {
            return Err(Error::malformed(format!(
                "dense nodes: {n} ids but {} lats and {} lons",
                self.lat.len(),
                self.lon.len()
            )));
        }
        for ((name, _), column) in DENSE_INFO.iter().zip(&self.info) {
            let len = column.len();
            if self.has_info && len != 0 && len != n {
                return Err(Error::malformed(format!(
                    "dense info: {len} {name} entries for {n} nodes"
                )));
            }
        }
        Ok(())
    }

    fn decode(&self, ctx: &Context, out: &mut Columns) -> Result<()> {
        self.check()?;
        let mut keys_vals = KeysVals {
            rest: self.keys_vals.iter(),
        };
        // The running sums of the delta-coded columns (DenseInfo's
        // timestamp, changeset, uid and user_sid among them).
        let (mut id, mut lat, mut lon, mut info) = (0i64, 0i64, 0i64, [0i64; 6]);
        for (i, ((&d_id, &d_lat), &d_lon)) in
            self.id.iter().zip(&self.lat).zip(&self.lon).enumerate()
        {
            id = id.wrapping_add(d_id);
            lat = lat.wrapping_add(d_lat);
            lon = lon.wrapping_add(d_lon);
            for (sum, column) in info.iter_mut().zip(&self.info).take(5).skip(1) {
                *sum = sum.wrapping_add(column.get(i).copied().unwrap_or_default());
            }
            let info = self.has_info.then(|| self.info(i, &info, ctx));
            let mut o = object(Kind::Node, id, info.transpose()?);
            (o.lat, o.lon) = ctx.coords(lat, lon);
            o.tags = span(&mut out.tags, |tags| keys_vals.next_tags(ctx, tags))?;
            out.objects.push(o);
        }
        keys_vals.finish()
    }

    /// The metadata of node `i`, whose delta-coded fields sum to `sums`.
    /// Each array is either absent (empty: every node gets the default) or
    /// one entry per node.
    fn info(&self, i: usize, sums: &[i64; 6], ctx: &Context) -> Result<Info<u32>> {
        let [version, _, _, _, user_sid, visible] = &self.info;
        let user = match user_sid.is_empty() {
            true => NO_USER,
            false => ctx.string_i32(sums[4] as i32)?,
        };
        Ok(Info {
            version: version.get(i).map_or(-1, |&v| v as i32),
            timestamp_ms: ctx.timestamp(sums[1]),
            changeset: sums[2],
            uid: sums[3] as i32,
            user,
            visible: visible.get(i).map(|&v| v != 0),
        })
    }
}

/// Reads `DenseNodes.keys_vals`: per node, key/value index pairs ended by 0.
/// An empty or early-ending array means no tags for the remaining nodes (as
/// libosmium reads it); a key without value or data left over is an error.
struct KeysVals<'a> {
    rest: std::slice::Iter<'a, i32>,
}

impl KeysVals<'_> {
    fn next_tags(&mut self, ctx: &Context, tags: &mut Vec<(u32, u32)>) -> Result<()> {
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
        Ok(())
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
