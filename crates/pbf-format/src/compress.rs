//! Blob bodies: the `Blob` message and its compressions. Reading supports raw,
//! zlib, zstd and lz4; lzma and bzip2 are reported as unsupported. Writing
//! supports raw, zlib (the default everywhere, readable by every tool), zstd
//! and lz4. Inflated sizes are bounded by `raw_size` and by [`MAX_RAW_SIZE`].
//!
//! zlib goes through libdeflate, whose one-shot codec is faster than a
//! streaming zlib at the same level (a blob is always whole in memory): it
//! compresses, and inflates blobs that state their `raw_size`; flate2 inflates
//! the rare blob without one. The (de)compressor state is kept per thread.

use std::fmt;
use std::io::Read;
use std::str::FromStr;

use crate::error::{Error, ErrorKind, Result};
use crate::wire::{self, Reader, Value};

/// Largest uncompressed block we accept.
pub const MAX_RAW_SIZE: usize = 32 * 1024 * 1024;

/// How a blob body is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Uncompressed (`raw`).
    None,
    /// zlib at a level 0..=9.
    Zlib(u32),
    /// zstd at a level 1..=22.
    Zstd(i32),
    /// lz4 block format.
    Lz4,
}

impl Default for Compression {
    fn default() -> Compression {
        Compression::Zlib(6)
    }
}

impl Compression {
    /// The Blob data field this compression writes.
    pub fn codec(self) -> Codec {
        match self {
            Compression::None => Codec::Raw,
            Compression::Zlib(_) => Codec::Zlib,
            Compression::Zstd(_) => Codec::Zstd,
            Compression::Lz4 => Codec::Lz4,
        }
    }
}

/// The data field of a Blob, as read: how its bytes are stored. A blob does
/// not record the level it was compressed at, so reading yields a `Codec`
/// and writing takes a [`Compression`] (a codec and a level); the names are
/// this enum's in both directions. Each codec's value is its Blob field
/// number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// `raw` (field 1).
    Raw = 1,
    /// `zlib_data` (field 3).
    Zlib = 3,
    /// `lzma_data` (field 4), read as unsupported.
    Lzma = 4,
    /// `OBSOLETE_bzip2_data` (field 5), read as unsupported.
    Bzip2 = 5,
    /// `lz4_data` (field 6).
    Lz4 = 6,
    /// `zstd_data` (field 7).
    Zstd = 7,
}

impl Codec {
    /// Every codec, in Blob field order.
    pub const ALL: [Codec; 6] = [
        Codec::Raw,
        Codec::Zlib,
        Codec::Lzma,
        Codec::Bzip2,
        Codec::Lz4,
        Codec::Zstd,
    ];

    /// The codec of a [`Codec::name`].
    pub fn from_name(name: &str) -> Option<Codec> {
        Codec::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The codec of Blob field number `field`, if it is a data field.
    pub fn from_field(field: u32) -> Option<Codec> {
        Codec::ALL.into_iter().find(|c| c.field() == field)
    }

    /// The Blob field number of the data.
    pub fn field(self) -> u32 {
        self as u32
    }

    /// The name used in the index stream and in messages ("raw", "zlib",
    /// "lzma", "bzip2", "lz4", "zstd").
    pub fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zlib => "zlib",
            Codec::Lzma => "lzma",
            Codec::Bzip2 => "bzip2",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compression::None => write!(f, "none"),
            Compression::Zlib(l) => write!(f, "zlib:{l}"),
            Compression::Zstd(l) => write!(f, "zstd:{l}"),
            Compression::Lz4 => write!(f, "lz4"),
        }
    }
}

impl FromStr for Compression {
    type Err = String;

    /// Parse `none`, `zlib[:0-9]`, `zstd[:1-22]` or `lz4`.
    fn from_str(s: &str) -> std::result::Result<Compression, String> {
        let (name, level) = match s.split_once(':') {
            Some((n, l)) => (n, Some(l)),
            None => (s, None),
        };
        let level_in = |lo: i64, hi: i64, default: i64| -> std::result::Result<i64, String> {
            let Some(l) = level else { return Ok(default) };
            match l.parse::<i64>() {
                Ok(v) if (lo..=hi).contains(&v) => Ok(v),
                _ => Err(format!(
                    "compression level for {name} must be from {lo} to {hi}, not '{l}'"
                )),
            }
        };
        match name {
            "none" | "raw" if level.is_none() => Ok(Compression::None),
            "zlib" => Ok(Compression::Zlib(level_in(0, 9, 6)? as u32)),
            "zstd" => Ok(Compression::Zstd(level_in(1, 22, 3)? as i32)),
            "lz4" if level.is_none() => Ok(Compression::Lz4),
            _ => Err(format!(
                "unknown compression '{s}' (expected none, zlib[:0-9], zstd[:1-22] or lz4)"
            )),
        }
    }
}

/// What a Blob holds, read without decompressing.
#[derive(Clone, Copy, Debug)]
pub struct BlobData<'a> {
    /// The data field: how the bytes are stored.
    pub compression: Codec,
    /// Declared uncompressed size, when given.
    pub raw_size: Option<u64>,
    /// The stored (possibly compressed) bytes.
    pub data: &'a [u8],
}

/// Parse a Blob message without decompressing it.
pub fn blob_data(blob: &[u8]) -> Result<BlobData<'_>> {
    let mut r = Reader::new(blob);
    let mut raw_size = None;
    let mut found: Option<(Codec, &[u8])> = None;
    while let Some((n, v)) = r.field()? {
        if n == 2 {
            let v = wire::expect_varint(v, "Blob raw_size")?;
            // int32 on the wire: negative values arrive as huge varints.
            raw_size = Some(v);
            continue;
        }
        let Some(codec) = Codec::from_field(n) else {
            continue;
        };
        let Value::Bytes(b) = v else {
            return Err(Error::malformed(format!(
                "Blob {codec} field is not length-delimited"
            )));
        };
        if found.is_some() {
            return Err(Error::malformed("Blob holds more than one data field"));
        }
        found = Some((codec, b));
    }
    let (compression, data) = found.ok_or_else(|| Error::malformed("Blob holds no data field"))?;
    Ok(BlobData {
        compression,
        raw_size,
        data,
    })
}

fn too_large(field: &'static str, size: u64) -> Error {
    Error::too_large(field, size, MAX_RAW_SIZE as u64)
}

/// Decompress a Blob message into the block bytes it holds.
pub fn decode_blob(blob: &[u8]) -> Result<Vec<u8>> {
    let b = blob_data(blob)?;
    let limit = match b.raw_size {
        Some(n) if n > MAX_RAW_SIZE as u64 => return Err(too_large("Blob raw_size", n)),
        Some(n) => n as usize,
        None => MAX_RAW_SIZE,
    };
    let out = match b.compression {
        Codec::Raw => {
            if b.data.len() > MAX_RAW_SIZE {
                return Err(too_large("raw Blob", b.data.len() as u64));
            }
            b.data.to_vec()
        }
        // Of `limit` (`raw_size`) bytes: a short result fails the check below.
        Codec::Zlib if b.raw_size.is_some() => {
            let mut out = vec![0u8; limit];
            let n = inflate_into(b.data, &mut out)?;
            out.truncate(n);
            out
        }
        Codec::Zlib => inflate(b.data, limit)?,
        Codec::Zstd => zstd::bulk::decompress(b.data, limit)
            .map_err(|e| Error::malformed(format!("corrupt zstd data: {e}")))?,
        Codec::Lz4 => {
            let Some(n) = b.raw_size else {
                return Err(Error::malformed("lz4 Blob without raw_size"));
            };
            lz4_flex::block::decompress(b.data, n as usize)
                .map_err(|e| Error::malformed(format!("corrupt lz4 data: {e}")))?
        }
        other @ (Codec::Lzma | Codec::Bzip2) => {
            return Err(Error::new(ErrorKind::Unsupported(format!(
                "{other}-compressed blob"
            ))));
        }
    };
    if let Some(n) = b.raw_size.filter(|&n| out.len() as u64 != n) {
        return Err(inflates_to(b.compression, out.len(), n));
    }
    Ok(out)
}

/// Decompress a Blob message and give its block bytes to `f`. A zlib blob
/// that states its `raw_size` (nearly every one) is inflated into a buffer
/// of the calling thread, kept from one call to the next, so the bytes are
/// not allocated and zeroed again for every blob (7 % of `pbf-index`'s
/// instructions on a sorted file); any other blob goes through
/// [`decode_blob`].
pub fn with_decoded<T>(blob: &[u8], f: impl FnOnce(&[u8]) -> T) -> Result<T> {
    let b = blob_data(blob)?;
    let size = match (b.compression, b.raw_size) {
        (Codec::Zlib, Some(n)) if n <= MAX_RAW_SIZE as u64 => n as usize,
        _ => return decode_blob(blob).map(|out| f(&out)),
    };
    SCRATCH.with_borrow_mut(|buf| {
        // The buffer's length only grows, so only new bytes are zeroed.
        if buf.len() < size {
            buf.resize(size, 0);
        }
        let n = inflate_into(b.data, &mut buf[..size])?;
        if n != size {
            return Err(inflates_to(Codec::Zlib, n, size));
        }
        Ok(f(&buf[..size]))
    })
}

/// The error for a blob whose data inflates to `n` bytes where its
/// `raw_size` says otherwise.
fn inflates_to(codec: Codec, n: impl fmt::Display, raw_size: impl fmt::Display) -> Error {
    Error::malformed(format!(
        "{codec} data inflates to {n} bytes but raw_size says {raw_size}"
    ))
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    static INFLATER: std::cell::RefCell<libdeflater::Decompressor> =
        std::cell::RefCell::new(libdeflater::Decompressor::new());
    static DEFLATERS: std::cell::RefCell<Vec<(i32, libdeflater::Compressor)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    static ZSTDS: std::cell::RefCell<Vec<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Inflate zlib data into `out`, which it must fit; returns the length.
fn inflate_into(data: &[u8], out: &mut [u8]) -> Result<usize> {
    match INFLATER.with_borrow_mut(|d| d.zlib_decompress(data, out)) {
        Ok(n) => Ok(n),
        Err(libdeflater::DecompressionError::InsufficientSpace) => Err(past(data, out.len())),
        Err(e) => Err(Error::malformed(format!("corrupt zlib data: {e}"))),
    }
}

/// Why zlib data did not fit in the `raw_size` bytes its Blob states: a
/// corrupt stream says so, a valid one says how large it really is. Found
/// by inflating it again, up to the block limit (an error path only).
fn past(data: &[u8], raw_size: usize) -> Error {
    let mut z = flate2::read::ZlibDecoder::new(data).take(MAX_RAW_SIZE as u64 + 1);
    match std::io::copy(&mut z, &mut std::io::sink()) {
        Err(e) => Error::malformed(format!("corrupt zlib data: {e}")),
        Ok(n) if n > MAX_RAW_SIZE as u64 => Error::malformed(format!(
            "zlib data inflates past {MAX_RAW_SIZE} bytes, the most a block may hold, but \
             raw_size says {raw_size}"
        )),
        Ok(n) => inflates_to(Codec::Zlib, n, raw_size),
    }
}

fn inflate(data: &[u8], limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(limit.min(MAX_RAW_SIZE));
    let mut z = flate2::read::ZlibDecoder::new(data).take(limit as u64 + 1);
    z.read_to_end(&mut out)
        .map_err(|e| Error::malformed(format!("corrupt zlib data: {e}")))?;
    if out.len() > limit {
        return Err(Error::malformed(format!(
            "zlib data inflates past {limit} bytes, the most a block may hold"
        )));
    }
    Ok(out)
}

/// Compress block bytes into a Blob message.
pub fn encode_blob(data: &[u8], c: Compression) -> Result<Vec<u8>> {
    let mut room = vec![0u8; blob_room(data.len(), c)];
    let blob = encode_blob_into(data, c, &mut room)?;
    room.copy_within(blob.clone(), 0);
    room.truncate(blob.len());
    Ok(room)
}

/// Most bytes a Blob's fields before its data take: `raw_size`, then the
/// data field's key and length.
pub const MAX_BLOB_HEAD: usize = 2 * (1 + 10);

/// The room [`encode_blob_into`] needs for `len` block bytes in `c`.
pub fn blob_room(len: usize, c: Compression) -> usize {
    let stored = match c {
        Compression::None => len,
        // libdeflate's bound for zlib: the deflate bound, 2 bytes of zlib
        // header and 4 of Adler-32.
        Compression::Zlib(_) => len + len / 8 + 64 + 6 + 1024,
        Compression::Zstd(_) => zstd::zstd_safe::compress_bound(len),
        Compression::Lz4 => lz4_flex::block::get_maximum_output_size(len),
    };
    MAX_BLOB_HEAD + stored
}

/// Compress block bytes into a Blob message written inside `room` (at
/// least [`blob_room`] bytes long), without a copy of the compressed
/// bytes: they go straight to `room[MAX_BLOB_HEAD..]`, and the fields
/// before them just ahead of them. Returns where in `room` the Blob lies;
/// what is before it is free for the frame's own prefix. The same bytes
/// as [`encode_blob`].
pub fn encode_blob_into(
    data: &[u8],
    c: Compression,
    room: &mut [u8],
) -> Result<std::ops::Range<usize>> {
    let (head, stored) = room.split_at_mut(MAX_BLOB_HEAD);
    let n = match c {
        Compression::None => {
            let room = stored.get_mut(..data.len());
            let out = room.ok_or_else(|| io_error("no room for the compressed Blob"))?;
            out.copy_from_slice(data);
            data.len()
        }
        Compression::Zlib(level) => deflate_into(data, level, stored)?,
        Compression::Zstd(level) => zstd_into(data, level, stored)?,
        Compression::Lz4 => lz4_flex::block::compress_into(data, stored).map_err(io_error)?,
    };
    let mut fields = Vec::with_capacity(MAX_BLOB_HEAD);
    if c != Compression::None {
        wire::put_key(&mut fields, 2, wire::WireType::Varint);
        wire::put_varint(&mut fields, data.len() as u64);
    }
    wire::put_key(&mut fields, c.codec().field(), wire::WireType::Len);
    wire::put_varint(&mut fields, n as u64);
    let start = MAX_BLOB_HEAD - fields.len();
    head[start..].copy_from_slice(&fields);
    Ok(start..MAX_BLOB_HEAD + n)
}

/// Deflate `data` into `out` at `level` with this thread's compressor for
/// that level; returns the length.
fn deflate_into(data: &[u8], level: u32, out: &mut [u8]) -> Result<usize> {
    let level = i32::try_from(level)
        .ok()
        .and_then(|l| libdeflater::CompressionLvl::new(l).ok())
        .ok_or_else(|| Error::new(ErrorKind::Unsupported(format!("zlib level {level}"))))?;
    DEFLATERS.with_borrow_mut(|cache| {
        let new = || Ok(libdeflater::Compressor::new(level));
        cached(cache, i32::from(level), new)?
            .zlib_compress(data, out)
            .map_err(io_error)
    })
}

/// Compress `data` into `out` with zstd at `level`, with this thread's
/// context for that level; returns the length.
fn zstd_into(data: &[u8], level: i32, out: &mut [u8]) -> Result<usize> {
    ZSTDS.with_borrow_mut(|cache| {
        let new = || zstd::bulk::Compressor::new(level);
        Ok(cached(cache, level, new)?.compress_to_buffer(data, out)?)
    })
}

/// This thread's compressor for `level` in `cache`, made by `new` on
/// first use.
fn cached<C>(
    cache: &mut Vec<(i32, C)>,
    level: i32,
    new: impl FnOnce() -> std::io::Result<C>,
) -> std::io::Result<&mut C> {
    let i = match cache.iter().position(|(l, _)| *l == level) {
        Some(i) => i,
        None => {
            cache.push((level, new()?));
            cache.len() - 1
        }
    };
    Ok(&mut cache[i].1)
}

/// A compressor's failure, as an I/O error.
fn io_error(e: impl ToString) -> Error {
    Error::new(ErrorKind::Io(std::io::Error::other(e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_compression() {
        let data: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        for c in ["none", "zlib", "zlib:1", "zstd", "zstd:19", "lz4"] {
            let c: Compression = c.parse().expect("parse");
            let blob = encode_blob(&data, c).expect("encode");
            assert_eq!(blob_data(&blob).expect("parse").compression, c.codec());
            assert_eq!(decode_blob(&blob).expect("decode"), data, "{c}");
        }
    }

    #[test]
    fn codec_names_read_back() {
        for c in Codec::ALL {
            assert_eq!(Codec::from_name(c.name()), Some(c));
            assert_eq!(Codec::from_field(c.field()), Some(c));
        }
        assert_eq!(Codec::from_name("unknown"), None);
    }

    #[test]
    fn parse_errors() {
        assert!("zlib:10".parse::<Compression>().is_err());
        assert!("gzip".parse::<Compression>().is_err());
        assert_eq!("zlib".parse::<Compression>(), Ok(Compression::Zlib(6)));
    }

    #[test]
    fn with_decoded_gives_what_decode_blob_gives() {
        // Large, small, then large again: the kept buffer is longer than
        // the second block and must not leak into it.
        let sizes = [50_000u32, 3_000, 20_000];
        for c in ["none", "zlib", "zstd", "lz4"] {
            let c: Compression = c.parse().expect("parse");
            for (k, n) in sizes.iter().enumerate() {
                let data: Vec<u8> = (0..*n).map(|i| (i as usize * 31 + k) as u8).collect();
                let blob = encode_blob(&data, c).expect("encode");
                let got = with_decoded(&blob, |b| b.to_vec()).expect("decode");
                assert_eq!(got, data, "{c}, {n} bytes");
            }
        }
    }

    #[test]
    fn with_decoded_refuses_a_lying_raw_size() {
        let data = vec![7u8; 5000];
        let mut blob = encode_blob(&data, Compression::Zlib(6)).expect("encode");
        assert_eq!(&blob[..3], &[0x10, 0x88, 0x27]);
        blob[1] = 0x87; // 4999: too small
        let err = with_decoded(&blob, |_| ()).expect_err("too small");
        assert!(
            err.to_string()
                .contains("inflates to 5000 bytes but raw_size says 4999"),
            "{err}"
        );
        blob[1] = 0x89; // 5001: too large
        let err = with_decoded(&blob, |_| ()).expect_err("too large");
        assert!(
            err.to_string()
                .contains("inflates to 5000 bytes but raw_size says 5001"),
            "{err}"
        );
    }

    #[test]
    fn lying_raw_size_is_an_error() {
        let data = vec![7u8; 5000];
        let mut blob = encode_blob(&data, Compression::Zlib(6)).expect("encode");
        // raw_size is the first field: key 0x10, then varint 5000 = [0x88, 0x27]; claim 4999.
        assert_eq!(&blob[..3], &[0x10, 0x88, 0x27]);
        blob[1] = 0x87;
        let err = decode_blob(&blob).expect_err("must fail");
        assert!(
            err.to_string()
                .contains("inflates to 5000 bytes but raw_size says 4999"),
            "{err}"
        );
    }

    #[test]
    fn a_corrupt_zlib_stream_says_it_is_corrupt() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let blob = encode_blob(&data, Compression::Zlib(6)).expect("encode");
        // Every bit of the deflate data flipped in turn, until one breaks
        // the stream: none may be called a size disagreement.
        let start = blob.len() - blob_data(&blob).expect("parse").data.len();
        let mut corrupt = 0;
        for at in start + 2..blob.len() {
            let mut bad = blob.clone();
            bad[at] ^= 0x10;
            for result in [decode_blob(&bad).map(drop), with_decoded(&bad, |_| ())] {
                let Err(err) = result else { continue };
                let err = err.to_string();
                assert!(err.contains("corrupt zlib data"), "byte {at}: {err}");
                corrupt += 1;
            }
        }
        assert!(corrupt > 0, "no flip broke the stream");
    }

    #[test]
    fn huge_raw_size_is_refused() {
        let mut blob = Vec::new();
        wire::put_key(&mut blob, 2, wire::WireType::Varint);
        wire::put_varint(&mut blob, 1 << 40);
        wire::put_bytes(&mut blob, 3, b"x");
        assert!(
            decode_blob(&blob)
                .expect_err("too large")
                .to_string()
                .contains("raw_size")
        );
    }

    #[test]
    fn lzma_is_unsupported() {
        let mut blob = Vec::new();
        wire::put_bytes(&mut blob, 4, b"x");
        assert!(
            decode_blob(&blob)
                .expect_err("unsupported")
                .to_string()
                .contains("unsupported: lzma")
        );
    }
}
