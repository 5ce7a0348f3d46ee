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

impl Scratch {
    fn clear_tags(&mut self) {
        self.keys.clear();
        self.vals.clear();
    }
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

/// The Info fields of a node, way or relation, merged over occurrences.
#[derive(Default)]
struct InfoFields {
    version: Option<i32>,
    timestamp: Option<i64>,
    changeset: Option<i64>,
    uid: Option<i32>,
    user_sid: Option<u32>,
    visible: Option<bool>,
}

impl InfoFields {
    fn merge(&mut self, data: &[u8]) -> Result<()> {
        let mut r = Reader::new(data);
        while let Some((n, v)) = r.field()? {
            let x = || wire::expect_varint(v, "Info field");
            match n {
                1 => self.version = Some(x()? as i32),
                2 => self.timestamp = Some(x()? as i64),
                3 => self.changeset = Some(x()? as i64),
                4 => self.uid = Some(x()? as i32),
                5 => self.user_sid = Some(x()? as u32),
                6 => self.visible = Some(x()? != 0),
                _ => {}
            }
        }
        Ok(())
    }

    fn decode(&self, ctx: &Context) -> Result<Info<u32>> {
        let user = match self.user_sid {
            Some(sid) => ctx.string(sid)?,
            None => NO_USER,
        };
        Ok(Info {
            version: self.version.unwrap_or(-1),
            timestamp_ms: ctx.timestamp(self.timestamp.unwrap_or(0)),
            changeset: self.changeset.unwrap_or(0),
            uid: self.uid.unwrap_or(0),
            user,
            visible: self.visible,
        })
    }
}

/// Merge an Info occurrence into `info`.
fn merge_info(info: &mut Option<InfoFields>, v: Value<'_>) -> Result<()> {
    info.get_or_insert_with(InfoFields::default)
        .merge(wire::expect_bytes(v, "Info")?)
}

fn decode_info(info: &Option<InfoFields>, ctx: &Context) -> Result<Option<Info<u32>>> {
    info.as_ref().map(|i| i.decode(ctx)).transpose()
}

/// Tag keys (field 2) and values (field 3) of a node, way or relation.
fn tag_field(n: u32, v: Value<'_>, s: &mut Scratch) -> Result<()> {
    match n {
        2 => each_varint(v, "keys", |x| s.keys.push(x as u32)),
        _ => each_varint(v, "vals", |x| s.vals.push(x as u32)),
    }
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

fn decode_node(data: &[u8], ctx: &Context, s: &mut Scratch, out: &mut Columns) -> Result<Object> {
    s.clear_tags();
    let (mut id, mut lat, mut lon, mut info) = (0, 0, 0, None);
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        match n {
            1 => id = wire::decode_zigzag(wire::expect_varint(v, "Node.id")?),
            2 | 3 => tag_field(n, v, s)?,
            4 => merge_info(&mut info, v)?,
            8 => lat = wire::decode_zigzag(wire::expect_varint(v, "Node.lat")?),
            9 => lon = wire::decode_zigzag(wire::expect_varint(v, "Node.lon")?),
            _ => {}
        }
    }
    let mut o = object(Kind::Node, id, decode_info(&info, ctx)?);
    (o.lat, o.lon) = (ctx.lat(lat), ctx.lon(lon));
    o.tags = ctx.tags(&s.keys, &s.vals, &mut out.tags)?;
    Ok(o)
}

fn decode_way(data: &[u8], ctx: &Context, s: &mut Scratch, out: &mut Columns) -> Result<Object> {
    s.clear_tags();
    s.lat.clear();
    s.lon.clear();
    s.refs.clear();
    let (mut id, mut info) = (0, None);
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        match n {
            1 => id = wire::expect_varint(v, "Way.id")? as i64,
            2 | 3 => tag_field(n, v, s)?,
            4 => merge_info(&mut info, v)?,
            8 => {
                let refs = &mut s.refs;
                refs.reserve(packed_len(&v));
                let mut acc = refs.last().copied().unwrap_or(0i64);
                each_varint(v, "Way.refs", |x| {
                    acc = acc.wrapping_add(wire::decode_zigzag(x));
                    refs.push(acc);
                })?
            }
            9 => each_varint(v, "Way.lat", |x| s.lat.push(wire::decode_zigzag(x)))?,
            10 => each_varint(v, "Way.lon", |x| s.lon.push(wire::decode_zigzag(x)))?,
            _ => {}
        }
    }
    let locations = span(&mut out.locations, |locations| {
        way_locations(id, s.refs.len(), &s.lat, &s.lon, ctx, locations)
    })?;
    let mut o = object(Kind::Way, id, decode_info(&info, ctx)?);
    o.tags = ctx.tags(&s.keys, &s.vals, &mut out.tags)?;
    o.items = span(&mut out.refs, |refs| {
        refs.extend_from_slice(&s.refs);
        Ok(())
    })?;
    o.locations = locations;
    Ok(o)
}

fn way_locations(
    id: i64,
    refs: usize,
    lats: &[i64],
    lons: &[i64],
    ctx: &Context,
    out: &mut Vec<(i64, i64)>,
) -> Result<()> {
    if lats.len() != lons.len() || (!lats.is_empty() && lats.len() != refs) {
        return Err(Error::malformed(format!(
            "way {id}: {refs} refs but {} lats and {} lons",
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
    out.extend(locations);
    Ok(())
}

fn decode_relation(
    data: &[u8],
    ctx: &Context,
    s: &mut Scratch,
    out: &mut Columns,
) -> Result<Object> {
    s.clear_tags();
    s.roles.clear();
    s.types.clear();
    s.memids.clear();
    let (mut id, mut info) = (0, None);
    let mut r = Reader::new(data);
    while let Some((n, v)) = r.field()? {
        match n {
            1 => id = wire::expect_varint(v, "Relation.id")? as i64,
            2 | 3 => tag_field(n, v, s)?,
            4 => merge_info(&mut info, v)?,
            8 => each_varint(v, "Relation.roles_sid", |x| s.roles.push(x as i32))?,
            9 => {
                let mut acc = s.memids.last().copied().unwrap_or(0i64);
                each_varint(v, "Relation.memids", |x| {
                    acc = acc.wrapping_add(wire::decode_zigzag(x));
                    s.memids.push(acc);
                })?
            }
            10 => each_varint(v, "Relation.types", |x| s.types.push(x as i32))?,
            _ => {}
        }
    }
    let mut o = object(Kind::Relation, id, decode_info(&info, ctx)?);
    o.tags = ctx.tags(&s.keys, &s.vals, &mut out.tags)?;
    o.items = span(&mut out.members, |out| members(id, s, ctx, out))?;
    Ok(o)
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

/// The arrays of one DenseNodes message, delta coded as stored.
#[derive(Default)]
struct DenseColumns {
    id: Vec<i64>,
    lat: Vec<i64>,
    lon: Vec<i64>,
    keys_vals: Vec<i32>,
    has_info: bool,
    version: Vec<i32>,
    timestamp: Vec<i64>,
    changeset: Vec<i64>,
    uid: Vec<i32>,
    user_sid: Vec<i32>,
    visible: Vec<bool>,
}

impl DenseColumns {
    fn read(&mut self, data: &[u8]) -> Result<()> {
        self.clear();
        let mut r = Reader::new(data);
        while let Some((n, v)) = r.field()? {
            match n {
                1 => each_varint(v, "DenseNodes.id", |x| self.id.push(wire::decode_zigzag(x)))?,
                5 => {
                    self.has_info = true;
                    self.read_info(wire::expect_bytes(v, "DenseInfo")?)?
                }
                8 => each_varint(v, "DenseNodes.lat", |x| {
                    self.lat.push(wire::decode_zigzag(x))
                })?,
                9 => each_varint(v, "DenseNodes.lon", |x| {
                    self.lon.push(wire::decode_zigzag(x))
                })?,
                10 => each_varint(v, "DenseNodes.keys_vals", |x| self.keys_vals.push(x as i32))?,
                _ => {}
            }
        }
        Ok(())
    }

    fn clear(&mut self) {
        self.has_info = false;
        self.id.clear();
        self.lat.clear();
        self.lon.clear();
        self.keys_vals.clear();
        self.version.clear();
        self.timestamp.clear();
        self.changeset.clear();
        self.uid.clear();
        self.user_sid.clear();
        self.visible.clear();
    }

    fn read_info(&mut self, data: &[u8]) -> Result<()> {
        let mut r = Reader::new(data);
        while let Some((n, v)) = r.field()? {
            let what = "DenseInfo";
            match n {
                1 => each_varint(v, what, |x| self.version.push(x as i32))?,
                2 => each_varint(v, what, |x| self.timestamp.push(wire::decode_zigzag(x)))?,
                3 => each_varint(v, what, |x| self.changeset.push(wire::decode_zigzag(x)))?,
                4 => each_varint(v, what, |x| self.uid.push(wire::decode_zigzag32(x)))?,
                5 => each_varint(v, what, |x| self.user_sid.push(wire::decode_zigzag32(x)))?,
                6 => each_varint(v, what, |x| self.visible.push(x != 0))?,
                _ => {}
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
        let lengths = [
            ("version", self.version.len()),
            ("timestamp", self.timestamp.len()),
            ("changeset", self.changeset.len()),
            ("uid", self.uid.len()),
            ("user_sid", self.user_sid.len()),
            ("visible", self.visible.len()),
        ];
        for (name, len) in lengths {
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
        let mut infos = DenseInfoDecoder::default();
        let mut keys_vals = KeysVals {
            rest: self.keys_vals.iter(),
        };
        let (mut id, mut lat, mut lon) = (0i64, 0i64, 0i64);
        for (i, ((&d_id, &d_lat), &d_lon)) in
            self.id.iter().zip(&self.lat).zip(&self.lon).enumerate()
        {
            id = id.wrapping_add(d_id);
            lat = lat.wrapping_add(d_lat);
            lon = lon.wrapping_add(d_lon);
            let info = match self.has_info {
                true => Some(infos.next(self, i, ctx)?),
                false => None,
            };
            let mut o = object(Kind::Node, id, info);
            (o.lat, o.lon) = (ctx.lat(lat), ctx.lon(lon));
            o.tags = span(&mut out.tags, |tags| keys_vals.next_tags(ctx, tags))?;
            out.objects.push(o);
        }
        keys_vals.finish()
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

/// Undoes the delta coding of `DenseInfo`, one node at a time. Each array is
/// either absent (empty: every node gets the default) or one entry per node.
#[derive(Default)]
struct DenseInfoDecoder {
    timestamp: i64,
    changeset: i64,
    uid: i32,
    user_sid: i32,
}

impl DenseInfoDecoder {
    fn next(&mut self, c: &DenseColumns, i: usize, ctx: &Context) -> Result<Info<u32>> {
        self.timestamp = self.timestamp.wrapping_add(at(&c.timestamp, i));
        self.changeset = self.changeset.wrapping_add(at(&c.changeset, i));
        self.uid = self.uid.wrapping_add(at(&c.uid, i));
        self.user_sid = self.user_sid.wrapping_add(at(&c.user_sid, i));
        let user = match c.user_sid.is_empty() {
            true => NO_USER,
            false => ctx.string_i32(self.user_sid)?,
        };
        Ok(Info {
            version: c.version.get(i).copied().unwrap_or(-1),
            timestamp_ms: ctx.timestamp(self.timestamp),
            changeset: self.changeset,
            uid: self.uid,
            user,
            visible: c.visible.get(i).copied(),
        })
    }
}

fn at<T: Copy + Default>(values: &[T], i: usize) -> T {
    values.get(i).copied().unwrap_or_default()
}
