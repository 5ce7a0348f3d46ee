//! The private format of spill packets: sorted runs that did not fit the
//! memory budget wait in temporary files in this compact form rather than as
//! PBF. A packet is written and read back by the same process, so it can skip
//! what PBF needs for interchange: no string table sorted by use, no dense or
//! granularity coding, no protobuf field headers. Elements go out in order,
//! each with its input blob's position (the rest of its rank, the
//! timestamp, is in the element); strings are written once per packet (deduplicated by
//! content) and referenced by index after that, so decoding
//! allocates each distinct string of a packet once.
//!
//! Layout of the uncompressed payload (all integers varints, signed ones
//! zigzagged; "delta" means from the previous element's value, or from the
//! previous item of the same list):
//!
//! ```text
//! packet   = count element*
//! element  = flags blob(delta) id(delta) info? tags body
//! flags    = kind (bits 0-1) | has info (bit 2) | visible: 0 none, 1 false, 2 true (bits 3-4)
//!          | compact info (bit 5) | grid (bit 6)
//! info     = compact: version seconds:u32 changeset:u32 uid:i32 user:string
//!          | else: version timestamp_ms changeset uid user:string
//! tags     = n (key:string value:string)*
//! body     = node: grid: lat/100 lon/100 as 4 bytes each, little-endian, signed
//!                | else lat lon
//!          | way: n ref(delta)* m (lat(delta) lon(delta))*   m is 0 or n
//!          | relation: n (kind id(delta) role:string)*
//!          | changeset: nothing
//! string   = 0 len bytes   (a new string, next index)
//!          | i + 1         (string i of this packet)
//! ```
//!
//! `u32` and `i32` are 4 bytes, little-endian. Timestamps, changesets, user
//! ids and node positions are long varints of unpredictable length, so the
//! common case (whole seconds and a changeset that fit 4 bytes; coordinates
//! on the usual grid of 100 nanodegrees) is written at a fixed width
//! instead, which costs neither side a loop or a mispredicted branch
//! (bench/merge-perf.md, "Spill packets").
//!
//! The payload is compressed as a PBF Blob (so its raw size is checked on
//! the way back) and framed by its length. Reading validates every count
//! against the bytes left before allocating, so a corrupt packet gives
//! [`Error::CorruptSpill`], never a huge allocation or a panic.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use pbf_format::Kind;
use pbf_format::block::{BadIndex, ColumnsBuilder, Info, Obj, prefetched};
use pbf_format::compress::{self, Compression};
use pbf_format::hash::FxBuild;
use pbf_format::wire::{self, decode_zigzag, encode_zigzag, put_varint as put};

use crate::error::{Error, Result};
use crate::sorted::Block;

/// Encode sorted elements and their input blobs' positions as one framed
/// spill packet.
pub(crate) fn write_packet(elements: &[Obj<'_>], blobs: &[u32], c: Compression) -> Result<Vec<u8>> {
    let mut w = Writer {
        out: Vec::with_capacity(elements.len() * 48),
        strings: FxMap::with_capacity_and_hasher(elements.len(), Default::default()),
        blob: 0,
        id: 0,
    };
    put(&mut w.out, elements.len() as u64);
    for (e, &blob) in prefetched(elements).zip(blobs) {
        w.element(e, blob);
    }
    let blob = compress::encode_blob(&w.out, c)?;
    let mut out = Vec::with_capacity(4 + blob.len());
    out.extend_from_slice(&(blob.len() as u32).to_be_bytes());
    out.extend_from_slice(&blob);
    Ok(out)
}

/// Decode a framed spill packet written by [`write_packet`].
pub(crate) fn read_packet(packet: &[u8]) -> Result<Block> {
    let (head, blob) = packet
        .split_first_chunk::<4>()
        .ok_or_else(|| corrupt("short packet"))?;
    if u32::from_be_bytes(*head) as usize != blob.len() {
        return Err(corrupt("packet length disagrees with its frame"));
    }
    let payload = compress::decode_blob(blob).map_err(|e| corrupt(&e.to_string()))?;
    let mut r = Reader::new(&payload);
    let count = r.count(MIN_ELEMENT)?;
    // The objects' room up front: growing it was a copy of every object
    // read so far at each doubling.
    r.out = ColumnsBuilder::with_capacity(count);
    let mut blobs = Vec::with_capacity(count);
    for _ in 0..count {
        blobs.push(r.element()?);
    }
    if !r.r.is_empty() {
        return Err(corrupt("bytes after the last element"));
    }
    let columns = r
        .out
        .finish(payload)
        .ok_or_else(|| corrupt("string outside the packet"))?;
    Ok(Block::from_packet(columns, blobs))
}

/// The fewest bytes an element takes (a changeset: flags, blob, id and
/// an empty list of tags, a byte each), which bounds the count a packet
/// may claim before room is made for its objects.
const MIN_ELEMENT: usize = 4;

fn corrupt(m: &str) -> Error {
    Error::CorruptSpill(m.into())
}

fn put_signed(out: &mut Vec<u8>, v: i64) {
    put(out, encode_zigzag(v));
}

/// Metadata fields at a fixed width: a timestamp in whole seconds and a
/// changeset that fit 4 unsigned bytes, and the user id.
#[derive(Clone, Copy)]
struct Compact {
    seconds: u32,
    changeset: u32,
    uid: i32,
}

impl Compact {
    fn of(i: Info<&[u8]>) -> Option<Compact> {
        if i.timestamp_ms % 1000 != 0 {
            return None;
        }
        Some(Compact {
            seconds: u32::try_from(i.timestamp_ms / 1000).ok()?,
            changeset: u32::try_from(i.changeset).ok()?,
            uid: i.uid,
        })
    }

    fn write(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.seconds.to_le_bytes());
        out.extend_from_slice(&self.changeset.to_le_bytes());
        out.extend_from_slice(&self.uid.to_le_bytes());
    }
}

/// A position on the grid of 100 nanodegrees, in grid units that fit 4
/// signed bytes.
fn on_grid((lat, lon): (i64, i64)) -> Option<(i32, i32)> {
    if lat % 100 != 0 || lon % 100 != 0 {
        return None;
    }
    Some((
        i32::try_from(lat / 100).ok()?,
        i32::try_from(lon / 100).ok()?,
    ))
}

type FxMap<K> = HashMap<K, u64, FxBuild>;

/// The payload being written, with the packet's strings so far.
struct Writer<'a> {
    out: Vec<u8>,
    strings: FxMap<&'a [u8]>,
    blob: u32,
    id: i64,
}

impl<'a> Writer<'a> {
    fn element(&mut self, e: Obj<'a>, blob: u32) {
        let info = e.info();
        // 0 none, 1 false, 2 true.
        let visible = info.and_then(|i| i.visible).map_or(0, |v| 1 + u64::from(v));
        let compact = info.and_then(Compact::of);
        let grid = match e.kind() {
            Kind::Node => on_grid(e.position()),
            _ => None,
        };
        let flags = e.kind().index() as u64
            | u64::from(info.is_some()) << 2
            | visible << 3
            | u64::from(compact.is_some()) << 5
            | u64::from(grid.is_some()) << 6;
        put(&mut self.out, flags);
        put_signed(&mut self.out, i64::from(blob) - i64::from(self.blob));
        put_signed(&mut self.out, e.id().wrapping_sub(self.id));
        (self.blob, self.id) = (blob, e.id());
        if let Some(i) = info {
            put_signed(&mut self.out, i64::from(i.version));
            match compact {
                Some(c) => c.write(&mut self.out),
                None => {
                    put_signed(&mut self.out, i.timestamp_ms);
                    put_signed(&mut self.out, i.changeset);
                    put_signed(&mut self.out, i64::from(i.uid));
                }
            }
            self.string(i.user);
        }
        put(&mut self.out, e.tag_count() as u64);
        for (k, v) in e.tags() {
            self.string(k);
            self.string(v);
        }
        match e.kind() {
            Kind::Node => match grid {
                Some((lat, lon)) => {
                    self.out.extend_from_slice(&lat.to_le_bytes());
                    self.out.extend_from_slice(&lon.to_le_bytes());
                }
                None => {
                    let (lat, lon) = e.position();
                    put_signed(&mut self.out, lat);
                    put_signed(&mut self.out, lon);
                }
            },
            Kind::Way => self.way(e),
            Kind::Relation => self.relation(e),
            Kind::Changeset => {}
        }
    }

    fn way(&mut self, w: Obj<'a>) {
        let (refs, locations) = (w.refs(), w.locations());
        put(&mut self.out, refs.len() as u64);
        let mut prev = 0i64;
        for &r in refs {
            put_signed(&mut self.out, r.wrapping_sub(prev));
            prev = r;
        }
        put(&mut self.out, locations.len() as u64);
        let (mut lat0, mut lon0) = (0i64, 0i64);
        for &(lat, lon) in locations {
            put_signed(&mut self.out, lat.wrapping_sub(lat0));
            put_signed(&mut self.out, lon.wrapping_sub(lon0));
            (lat0, lon0) = (lat, lon);
        }
    }

    fn relation(&mut self, r: Obj<'a>) {
        put(&mut self.out, r.member_count() as u64);
        let mut prev = 0i64;
        for (kind, id, role) in r.members() {
            put(&mut self.out, kind.index() as u64);
            put_signed(&mut self.out, id.wrapping_sub(prev));
            prev = id;
            self.string(role);
        }
    }

    fn string(&mut self, s: &'a [u8]) {
        let next = self.strings.len() as u64;
        match self.strings.entry(s) {
            Entry::Occupied(i) => put(&mut self.out, i.get() + 1),
            Entry::Vacant(v) => {
                v.insert(next);
                put(&mut self.out, 0);
                put(&mut self.out, s.len() as u64);
                self.out.extend_from_slice(s);
            }
        }
    }
}

/// A cursor over a payload, building the packet's columns.
struct Reader<'a> {
    r: wire::Reader<'a>,
    out: ColumnsBuilder,
    blob: u32,
    id: i64,
    /// The current element's tags, until its object is added (reused).
    tags: Vec<(u32, u32)>,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader {
            r: wire::Reader::new(buf),
            out: ColumnsBuilder::default(),
            blob: 0,
            id: 0,
            tags: Vec::new(),
        }
    }

    #[inline]
    fn varint(&mut self) -> Result<u64> {
        self.r.try_varint().ok_or_else(|| corrupt("bad varint"))
    }

    fn signed(&mut self) -> Result<i64> {
        Ok(decode_zigzag(self.varint()?))
    }

    /// Four bytes of a fixed-width field.
    fn fixed(&mut self) -> Result<[u8; 4]> {
        self.r
            .try_take(4)
            .and_then(|b| b.first_chunk::<4>().copied())
            .ok_or_else(|| corrupt("truncated fixed-width field"))
    }

    /// A coordinate on the grid of 100 nanodegrees, in nanodegrees.
    fn grid(&mut self) -> Result<i64> {
        Ok(i64::from(i32::from_le_bytes(self.fixed()?)) * 100)
    }

    fn i32(&mut self) -> Result<i32> {
        i32::try_from(self.signed()?).map_err(|_| corrupt("32-bit field out of range"))
    }

    /// A count of items that take at least `min_bytes` each: checked
    /// against the bytes left before anything is allocated for them.
    fn count(&mut self, min_bytes: usize) -> Result<usize> {
        let n = self.varint()?;
        let left = self.r.rest().len();
        match usize::try_from(n) {
            Ok(n) if n.saturating_mul(min_bytes) <= left => Ok(n),
            _ => Err(corrupt("count larger than the packet")),
        }
    }

    /// A string reference: its index in the columns (new strings are
    /// declared as ranges of the payload). Indexes that were never handed
    /// out are caught by the builder.
    fn string(&mut self) -> Result<u32> {
        let i = self.varint()?;
        if i > 0 {
            return u32::try_from(i - 1).map_err(|_| corrupt("string index out of range"));
        }
        let len = self.count(1)?;
        // A packet is at most MAX_RAW_SIZE bytes, so offsets fit in u32.
        let start = self.r.position() as u32;
        self.r
            .try_take(len)
            .ok_or_else(|| corrupt("truncated string"))?;
        Ok(self.out.string(start, self.r.position() as u32))
    }

    /// One element into the columns; returns its input blob's position.
    fn element(&mut self) -> Result<u32> {
        let flags = self.varint()?;
        if flags >> 7 != 0 || (flags >> 3) & 3 == 3 {
            return Err(corrupt("bad element flags"));
        }
        self.blob = i64::from(self.blob)
            .checked_add(self.signed()?)
            .and_then(|b| u32::try_from(b).ok())
            .ok_or_else(|| corrupt("blob position out of range"))?;
        self.id = self.id.wrapping_add(self.signed()?);
        let info = match flags & 4 {
            0 => None,
            _ => Some(self.info(flags)?),
        };
        let kind = Kind::from_index((flags & 3) as u8).unwrap_or(Kind::Changeset);
        // Tags come before the position in a packet, after it in columns.
        self.tags()?;
        let position = match (kind, flags & 64) {
            (Kind::Node, 0) => (self.signed()?, self.signed()?),
            (Kind::Node, _) => (self.grid()?, self.grid()?),
            _ => (0, 0),
        };
        self.out
            .object(kind, self.id, position, info)
            .map_err(bad_index)?;
        for &(k, v) in &self.tags {
            self.out.tag(k, v).map_err(bad_index)?;
        }
        match kind {
            Kind::Way => self.way()?,
            Kind::Relation => self.relation()?,
            _ => {}
        }
        Ok(self.blob)
    }

    fn info(&mut self, flags: u64) -> Result<Info<u32>> {
        let version = self.i32()?;
        let (timestamp_ms, changeset, uid) = match flags & 32 {
            0 => (self.signed()?, self.signed()?, self.i32()?),
            _ => (
                i64::from(u32::from_le_bytes(self.fixed()?)) * 1000,
                i64::from(u32::from_le_bytes(self.fixed()?)),
                i32::from_le_bytes(self.fixed()?),
            ),
        };
        Ok(Info {
            version,
            timestamp_ms,
            changeset,
            uid,
            user: self.string()?,
            visible: [None, Some(false), Some(true)][((flags >> 3) & 3) as usize],
        })
    }

    /// Read the element's tags into `self.tags`.
    fn tags(&mut self) -> Result<()> {
        let n = self.count(2)?;
        self.tags.clear();
        for _ in 0..n {
            let tag = (self.string()?, self.string()?);
            self.tags.push(tag);
        }
        Ok(())
    }

    fn way(&mut self) -> Result<()> {
        let n = self.count(1)?;
        let mut prev = 0i64;
        for _ in 0..n {
            prev = prev.wrapping_add(self.signed()?);
            self.out.way_ref(prev);
        }
        let m = self.count(2)?;
        if m != 0 && m != n {
            return Err(corrupt("way locations and refs differ in number"));
        }
        let (mut lat, mut lon) = (0i64, 0i64);
        for _ in 0..m {
            lat = lat.wrapping_add(self.signed()?);
            lon = lon.wrapping_add(self.signed()?);
            self.out.location(lat, lon);
        }
        Ok(())
    }

    fn relation(&mut self) -> Result<()> {
        let n = self.count(3)?;
        let mut prev = 0i64;
        for _ in 0..n {
            let kind = Kind::from_index(self.varint()?.min(255) as u8)
                .filter(|k| *k != Kind::Changeset)
                .ok_or_else(|| corrupt("bad member type"))?;
            prev = prev.wrapping_add(self.signed()?);
            let role = self.string()?;
            self.out.member(kind, prev, role).map_err(bad_index)?;
        }
        Ok(())
    }
}

fn bad_index(_: BadIndex) -> Error {
    corrupt("string index out of range")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::block::{Changeset, Columns, Element, Member, Node, Relation, Str, Way};

    fn s(x: &str) -> Str {
        Str::from(x.as_bytes())
    }

    fn info(version: i32, user: &str, visible: Option<bool>) -> Option<Info> {
        Some(Info {
            version,
            timestamp_ms: -1_234_567,
            changeset: i64::MAX,
            uid: i32::MIN,
            user: s(user),
            visible,
        })
    }

    /// A node at (lat, lon) last changed at `timestamp_ms`.
    fn placed(id: i64, timestamp_ms: i64, lat: i64, lon: i64) -> Element {
        placed_in(id, (timestamp_ms, 9, 4), lat, lon)
    }

    /// [`placed`] with the (timestamp_ms, changeset, uid) of its metadata.
    fn placed_in(
        id: i64,
        (timestamp_ms, changeset, uid): (i64, i64, i32),
        lat: i64,
        lon: i64,
    ) -> Element {
        Element::Node(Node {
            id,
            info: Some(Info {
                version: 2,
                timestamp_ms,
                changeset,
                uid,
                user: s("carol"),
                visible: Some(true),
            }),
            lat,
            lon,
            tags: Vec::new(),
        })
    }

    fn sample() -> Vec<Element> {
        let shared = s("highway");
        let max_seconds = i64::from(u32::MAX) * 1000;
        let (max_grid, min_grid) = (i64::from(i32::MAX) * 100, i64::from(i32::MIN) * 100);
        vec![
            // Whole seconds and grid positions, at and past the fixed
            // widths' limits.
            placed(20, 1_700_000_000_000, 51_500_000_000, -180_000_000_000),
            placed_in(
                21,
                (max_seconds, u32::MAX.into(), i32::MIN),
                max_grid,
                min_grid,
            ),
            placed(22, max_seconds + 1000, max_grid + 100, min_grid - 100),
            placed_in(25, (1000, i64::from(u32::MAX) + 1, 1), 0, 0),
            placed_in(26, (1000, -1, -1), 0, 0),
            placed(23, 0, 0, 0),
            placed(24, -1000, 150, 7),
            Element::Node(Node {
                id: i64::MIN,
                info: info(-1, "", None),
                lat: -900_000_000_000,
                lon: i64::MAX,
                tags: vec![(shared.clone(), s("stop")), (s("highway"), s("\u{e9}"))],
            }),
            Element::Node(Node {
                id: 5,
                info: None,
                lat: 0,
                lon: 0,
                tags: Vec::new(),
            }),
            Element::Way(Way {
                id: -3,
                info: info(7, "alice", Some(false)),
                tags: vec![(shared, s("primary"))],
                refs: vec![10, -4, i64::MAX, i64::MIN],
                locations: vec![(1, 2), (-3, 4), (i64::MAX, i64::MIN), (0, 0)],
            }),
            Element::Way(Way {
                id: 9,
                info: info(1, "alice", Some(true)),
                tags: Vec::new(),
                refs: vec![1, 2],
                locations: Vec::new(),
            }),
            Element::Relation(Relation {
                id: 2,
                info: info(3, "bob", None),
                tags: vec![(s("type"), s("route"))],
                members: vec![
                    Member {
                        kind: Kind::Way,
                        id: 9,
                        role: s("outer"),
                    },
                    Member {
                        kind: Kind::Relation,
                        id: -9,
                        role: s(""),
                    },
                ],
            }),
            Element::Changeset(Changeset { id: 77 }),
        ]
    }

    /// Every object of `columns`, in order.
    fn views(columns: &Columns) -> Vec<Obj<'_>> {
        columns.views().collect()
    }

    #[test]
    fn packets_round_trip_every_field() {
        let elements = sample();
        let columns = Columns::from_elements(&elements);
        let blobs = [7, 8, 9, 10, 11, 12, 13, 3, 1, u32::MAX, 0, 40, 41];
        for c in [Compression::None, Compression::Lz4] {
            let packet = write_packet(&views(&columns), &blobs, c).expect("write");
            let mut block = read_packet(&packet).expect("read");
            let mut got = Vec::new();
            while let Some((order, e)) = block.take() {
                let e = e.into_element();
                assert_eq!(order.rank >> 32, u64::from(e.tie_seconds()));
                got.push((order.blob(), e));
            }
            got.sort_by_key(|g| g.0);
            let mut want: Vec<_> = blobs.iter().copied().zip(elements.clone()).collect();
            want.sort_by_key(|w| w.0);
            assert_eq!(got, want);
        }
    }

    /// A string reached again is written once and referenced after that.
    #[test]
    fn each_string_is_written_once_per_packet() {
        let columns = Columns::from_elements(&sample());
        let packet = write_packet(&views(&columns), &[0; 13], Compression::None).expect("write");
        let payload = compress::decode_blob(&packet[4..]).expect("blob");
        for word in ["highway", "alice", "stop"] {
            let found = payload
                .windows(word.len())
                .filter(|w| *w == word.as_bytes());
            assert_eq!(found.count(), 1, "{word}");
        }
    }

    /// Whole seconds and grid positions take the fixed widths; others
    /// (here: a timestamp with milliseconds, a position off the grid) keep
    /// their varints.
    #[test]
    fn common_timestamps_and_positions_are_fixed_width() {
        // Today's changesets and user ids are 4-5 byte varints.
        let (changeset, uid) = (150_000_000, 20_000_000);
        let flags_of = |timestamp_ms: i64, lat: i64| {
            let e = placed_in(20, (timestamp_ms, changeset, uid), lat, 1_340_000_000);
            let columns = Columns::from_elements(&[e]);
            let packet = write_packet(&views(&columns), &[0], Compression::None).expect("w");
            let payload = compress::decode_blob(&packet[4..]).expect("blob");
            (payload[1], payload.len())
        };
        let (flags, fixed) = flags_of(1_700_000_000_000, 51_500_000_000);
        assert_eq!(flags & 0b110_0000, 0b110_0000);
        let (flags, varints) = flags_of(1_700_000_000_001, 51_500_000_001);
        assert_eq!(flags & 0b110_0000, 0);
        assert!(fixed < varints, "{fixed} bytes fixed, {varints} as varints");
    }

    #[test]
    fn corrupt_packets_are_errors() {
        let columns = Columns::from_elements(&sample());
        let blobs: Vec<u32> = (0..columns.len() as u32).collect();
        let packet = write_packet(&views(&columns), &blobs, Compression::None).expect("w");
        let payload = compress::decode_blob(&packet[4..]).expect("blob");
        // Every truncation and every single-byte change either decodes or
        // fails cleanly; none panics or allocates past the packet.
        for cut in 0..payload.len() {
            let blob = compress::encode_blob(&payload[..cut], Compression::None).expect("b");
            let mut framed = (blob.len() as u32).to_be_bytes().to_vec();
            framed.extend_from_slice(&blob);
            assert!(read_packet(&framed).is_err(), "truncated at {cut}");
        }
        for i in 0..payload.len() {
            for b in [0x00, 0x7f, 0xff] {
                let mut p = payload.clone();
                p[i] = b;
                let blob = compress::encode_blob(&p, Compression::None).expect("b");
                let mut framed = (blob.len() as u32).to_be_bytes().to_vec();
                framed.extend_from_slice(&blob);
                // What decodes is safe to read: every string index holds.
                if let Ok(mut block) = read_packet(&framed) {
                    while let Some((_, item)) = block.take() {
                        let _ = item.into_element();
                    }
                }
            }
        }
        // A huge count is refused before allocating.
        let mut p = Vec::new();
        put(&mut p, u64::MAX >> 1);
        let blob = compress::encode_blob(&p, Compression::None).expect("b");
        let mut framed = (blob.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&blob);
        assert!(read_packet(&framed).is_err());
        assert!(read_packet(&packet[..packet.len() - 1]).is_err());
    }
}
