//! Padding frames: valid OSMData frames of an exact length that hold no
//! objects, so a writer can move the next frame to any offset (pbf-reflink
//! puts copied ranges at block-aligned offsets to clone them; pbf-merge aligns
//! its spool the same way).
//!
//! Layout, chosen so that every reader we know accepts it:
//!
//! ```text
//! u32be len | BlobHeader{type "OSMData", datasize}          (11..13 bytes, no indexdata)
//! Blob{raw_size, zlib_data}                                  zlib with *stored* deflate blocks
//!   PrimitiveBlock{stringtable{"", MARKER + zeros, zeros...}} no primitive groups
//! ```
//!
//! - The filler lives inside the string table, an ordinary field every reader
//!   decodes, cut into strings of at most [`CHUNK`] bytes (libosmium rejects
//!   strings over 1024 bytes as "overlong"); unknown fields are avoided on
//!   purpose: libosmium up to 2.19 throws "unknown compression" on an unknown
//!   Blob field, and osmconvert reads only zlib blobs with `raw_size` first.
//! - zlib with stored blocks (written here by hand) has a size that is an
//!   exact function of the input, so the frame length can be hit to the byte.
//! - The BlobHeader stays at most 13 bytes (older libosmium rejects 128+).
//!
//! A block whose string table holds a string starting with [`MARKER`] and
//! no primitive group is recognised by [`is_padding_block`], so pbf-index
//! counts such frames as padding rather than warning about empty blobs.

use crate::error::Result;
use crate::wire::{self, Reader, Value};

/// Start of the filler string that marks a padding block.
pub const MARKER: &[u8] = b"pbf-sort padding";

/// The shortest padding frame.
pub const MIN_FRAME: u64 = 52;

/// The longest padding frame [`frame`] builds (enough for 4 MiB blocks).
pub const MAX_FRAME: u64 = 4 << 20;

/// Most bytes of one filler string.
pub const CHUNK: u64 = 1000;

/// Most bytes of one stored deflate block.
const STORED_MAX: u64 = 65_535;

/// Bytes a varint of `v` takes.
fn varint_len(v: u64) -> u64 {
    prost::encoding::encoded_len_varint(v) as u64
}

/// The length of the frame of `zeros` filler bytes and `empties` extra
/// empty strings, from the sizes of its nested messages.
fn frame_len(zeros: u64, empties: u64) -> u64 {
    let string = MARKER.len() as u64 + zeros;
    let full = (string - 1) / CHUNK;
    let last = string - full * CHUNK;
    let table =
        2 * (1 + empties) + full * (1 + varint_len(CHUNK) + CHUNK) + 1 + varint_len(last) + last;
    let block = 1 + varint_len(table) + table;
    let stored_blocks = block.div_ceil(STORED_MAX).max(1);
    let zlib = 2 + 5 * stored_blocks + block + 4;
    let blob = 1 + varint_len(block) + 1 + varint_len(zlib) + zlib;
    let header = 2 + 7 + 1 + varint_len(blob);
    4 + header + blob
}

/// The filler layout giving a frame of exactly `len` bytes.
fn solve(len: u64) -> Option<(u64, u64)> {
    if !(MIN_FRAME..=MAX_FRAME).contains(&len) {
        return None;
    }
    // Each longer varint or extra stored block adds a few bytes: start below.
    let slack = 64 + 5 * len.div_ceil(STORED_MAX) + 3 * len.div_ceil(CHUNK);
    let start = (len - MIN_FRAME).saturating_sub(slack);
    for zeros in start..=len - MIN_FRAME {
        for empties in 0..8 {
            if frame_len(zeros, empties) == len {
                return Some((zeros, empties));
            }
        }
    }
    None
}

/// A padding frame of exactly `len` bytes, or `None` when `len` is outside
/// [`MIN_FRAME`]..=[`MAX_FRAME`].
pub fn frame(len: u64) -> Option<Vec<u8>> {
    let (zeros, empties) = solve(len)?;
    // Every message fits in the frame's length.
    let mut table = Vec::with_capacity(len as usize);
    for _ in 0..=empties {
        wire::put_bytes(&mut table, 1, b"");
    }
    let mut filler = MARKER.to_vec();
    filler.resize(MARKER.len() + zeros as usize, 0);
    for chunk in filler.chunks(CHUNK as usize) {
        wire::put_bytes(&mut table, 1, chunk);
    }
    let mut block = Vec::with_capacity(len as usize);
    wire::put_bytes(&mut block, 1, &table);
    let zlib = stored_zlib(&block);
    let mut blob = Vec::with_capacity(len as usize);
    wire::put_key(&mut blob, 2, wire::WireType::Varint);
    wire::put_varint(&mut blob, block.len() as u64);
    wire::put_bytes(&mut blob, 3, &zlib);
    let out = crate::frame::encode_frame(&crate::frame::BlobType::OsmData, None, &blob).ok()?;
    debug_assert_eq!(out.len() as u64, len, "{zeros} zeros, {empties} empties");
    Some(out)
}

/// `data` as a zlib stream of stored (uncompressed) deflate blocks.
fn stored_zlib(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&[0x78, 0x01]);
    let mut chunks = data.chunks(STORED_MAX as usize).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = u8::from(chunks.peek().is_none());
        let n = chunk.len() as u16;
        out.push(last);
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(!n).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&libdeflater::adler32(data).to_be_bytes());
    out
}

/// True when [`frame`] can build a frame of exactly `len` bytes: every
/// length from [`MIN_FRAME`] to [`MAX_FRAME`] but a few dozen the varints
/// jump over (e.g. 143: a Blob of 128 bytes needs a BlobHeader one byte
/// longer than one of 127). [`padding`] covers those with two frames.
pub fn fits(len: u64) -> bool {
    solve(len).is_some()
}

/// Padding of exactly `len` bytes: one frame, or two when no single frame
/// has that length. `None` when `len` is below [`MIN_FRAME`] or above
/// [`MAX_FRAME`].
pub fn padding(len: u64) -> Option<Vec<u8>> {
    if fits(len) {
        return frame(len);
    }
    let first =
        (MIN_FRAME..MIN_FRAME + 64).find(|&a| len >= a + MIN_FRAME && fits(a) && fits(len - a))?;
    let mut out = frame(first)?;
    out.extend(frame(len - first)?);
    Some(out)
}

/// The length of the padding to put at `pos` so that the next byte lands at
/// an offset congruent to `target` modulo `block` (a power of two): 0 when it
/// already does, else the gap, or the gap plus one block when the gap is
/// shorter than [`MIN_FRAME`]. Always below `block + MIN_FRAME`.
pub fn gap(pos: u64, target: u64, block: u64) -> u64 {
    let g = target.wrapping_sub(pos) & (block - 1);
    if g == 0 || g >= MIN_FRAME {
        g
    } else {
        g + block
    }
}

/// True when a decompressed PrimitiveBlock is one of our padding blocks: no
/// primitive group, and a string-table string starting with [`MARKER`].
pub fn is_padding_block(block: &[u8]) -> bool {
    padding_block(block).unwrap_or(false)
}

fn padding_block(block: &[u8]) -> Result<bool> {
    let mut marked = false;
    let mut r = Reader::new(block);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, Value::Bytes(table)) => marked |= table_has_marker(table)?,
            (2, _) => return Ok(false),
            _ => {}
        }
    }
    Ok(marked)
}

fn table_has_marker(table: &[u8]) -> Result<bool> {
    let mut r = Reader::new(table);
    while let Some((n, v)) = r.field()? {
        if matches!((n, v), (1, Value::Bytes(s)) if s.starts_with(MARKER)) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::{blob_data, decode_blob};
    use crate::frame::parse_blob_header;
    use crate::scan::scan_block;

    #[test]
    fn every_length_is_reachable() {
        let missing: Vec<u64> = (MIN_FRAME..=140_000).filter(|&l| !fits(l)).collect();
        assert!(
            missing.len() < 40 && missing.contains(&143),
            "{} missing, from {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
        for len in missing {
            let p = padding(len).expect("two frames");
            assert_eq!(p.len() as u64, len);
        }
        assert!(solve(MIN_FRAME - 1).is_none());
        assert!(solve(MAX_FRAME).is_some());
        assert!(solve(MAX_FRAME + 1).is_none());
    }

    /// Check every frame of `bytes` and return how many there are.
    fn check_frames(mut bytes: &[u8]) -> usize {
        let mut n = 0;
        while !bytes.is_empty() {
            let hl = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
            assert!(hl < 128, "BlobHeader of {hl} bytes");
            let (kind, ix, size) = parse_blob_header(&bytes[4..4 + hl]).expect("header");
            assert_eq!((kind.as_str(), ix), ("OSMData", None));
            let (body, rest) = bytes[4 + hl..].split_at(size as usize);
            assert_eq!(blob_data(body).expect("blob").compression.name(), "zlib");
            let block = decode_blob(body).expect("zlib");
            assert!(scan_block(&block).expect("scan").is_none(), "holds objects");
            assert!(is_padding_block(&block));
            assert!(
                crate::block::decode_block(&block)
                    .expect("codec")
                    .is_empty()
            );
            assert!(longest_string(&block) <= 1024, "libosmium's limit");
            bytes = rest;
            n += 1;
        }
        n
    }

    fn longest_string(block: &[u8]) -> usize {
        let mut r = Reader::new(block);
        let mut longest = 0;
        while let Some((_, v)) = r.field().expect("block") {
            let Value::Bytes(table) = v else { continue };
            let mut t = Reader::new(table);
            while let Some((_, Value::Bytes(s))) = t.field().expect("table") {
                longest = longest.max(s.len());
            }
        }
        longest
    }

    #[test]
    fn padding_has_the_exact_length_and_decodes_as_padding() {
        let mut lens: Vec<u64> = (MIN_FRAME..MIN_FRAME + 300).collect();
        lens.extend([
            4095,
            4096,
            4147,
            16_383,
            16_384,
            16_400,
            65_574,
            131_100,
            1 << 20,
        ]);
        for len in lens {
            let p = padding(len).expect("padding");
            assert_eq!(p.len() as u64, len);
            assert_eq!(check_frames(&p), if fits(len) { 1 } else { 2 }, "{len}");
        }
        assert!(padding(MIN_FRAME - 1).is_none());
    }

    #[test]
    fn stored_zlib_matches_flate2() {
        use std::io::Read;
        for n in [0usize, 1, 65_535, 65_536, 200_000] {
            let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            let z = stored_zlib(&data);
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(&z[..])
                .read_to_end(&mut out)
                .expect("inflate");
            assert_eq!(out, data);
        }
    }

    #[test]
    fn gaps_respect_the_minimum_frame() {
        let b = 4096;
        assert_eq!(gap(4096, 8192, b), 0);
        assert_eq!(gap(100, 4096, b), 3996);
        assert_eq!(gap(4090, 4096, b), 6 + 4096);
        assert_eq!(gap(4096 - MIN_FRAME, 0, b), MIN_FRAME);
        for pos in 0..3 * b {
            let g = gap(pos, 123, b);
            assert_eq!((pos + g) % b, 123);
            assert!(g == 0 || (MIN_FRAME..b + MIN_FRAME).contains(&g), "{g}");
        }
        for block in [512u64, 4096, 16_384, 65_536, 1 << 20] {
            for target in [0, 1, 51, 52, 143, 16_400 % block, block - 1] {
                for pos in [0, 7, block / 2, 3 * block - 1] {
                    let g = gap(pos, target, block);
                    assert_eq!((pos + g) % block, target % block);
                    assert!(g == 0 || (MIN_FRAME..block + MIN_FRAME).contains(&g), "{g}");
                    assert!(g == 0 || padding(g).is_some(), "{block} {g}");
                }
            }
        }
    }

    #[test]
    fn ordinary_blocks_are_not_padding() {
        let mut block = Vec::new();
        let mut table = Vec::new();
        wire::put_bytes(&mut table, 1, b"");
        wire::put_bytes(&mut table, 1, MARKER);
        wire::put_bytes(&mut block, 1, &table);
        assert!(is_padding_block(&block));
        wire::put_bytes(&mut block, 2, b"");
        assert!(!is_padding_block(&block), "a group makes it data");
        assert!(!is_padding_block(b"\x0a\x02\x0a\x00"));
        assert!(!is_padding_block(b"\xff"));
    }
}
