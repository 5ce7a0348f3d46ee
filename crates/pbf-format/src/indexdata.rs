//! Indexdata: a per-blob key summary stored in the BlobHeader's `indexdata`
//! field, so a file can be indexed by reading headers only.
//!
//! Our format (version 4), at most 64 bytes so a BlobHeader stays under 128
//! bytes (libosmium up to 2.19 rejects longer ones):
//!
//! ```text
//! "PBSX"                 magic, 4 bytes
//! 0x03                   format version
//! flags                  bit 0: keys strictly increase inside the blob;
//!                        bit 1: keys never decrease but some repeat;
//!                        bit 2: keys decrease, but only between versions
//!                        of one object (at most one of the three is set;
//!                        readers before bit 2 existed scan such a blob);
//!                        bit 3: some id is negative
//! first key              kind (1 byte: 0 node, 1 way, 2 relation, 3 changeset),
//!                        id (zigzag varint), version (varint)
//! last key               same encoding
//! counts                 four varints: nodes, ways, relations, changesets
//! duplicate ids          varint: objects right after one of the same kind
//!                        and id (`scan::Summary::duplicate_ids`)
//! crc32                  4 bytes little-endian, of everything before it,
//!                        then the Blob's datasize (4 bytes little-endian)
//!                        and its first bytes (`frame::BlobStart`)
//! ```
//!
//! Indexdata is trusted without reading the blob, so a corrupted summary
//! would put the blob in the wrong place of a sorted output: the checksum
//! makes a damaged one (a flipped bit, a cut) fall back to scanning, and so
//! does one that no longer sits on the blob it was written for (a blob
//! re-compressed or re-framed by another tool that kept the BlobHeader's
//! indexdata, or indexdata pasted onto another blob). It does not stop a
//! deliberate lie: `pbf-index --decode` and `pbf-sort --check` ignore
//! indexdata. Versions 1 to 3 (no checksum; a checksum of the summary
//! alone; no count of duplicate ids) are not trusted: such blobs are
//! scanned.
//! Any other magic or version is ignored (the blob is then scanned). We also
//! read the 42-byte v2 indexdata written by pbfhogg (byte 0 = 0x02, byte 1 =
//! kind, then little-endian i64 min id, i64 max id, u64 count and four i32 bbox
//! values); it carries no versions and no sorted flag, and a real pbfhogg
//! 0.5.0 output declares `Sort.Type_then_ID` with a blob unsorted inside, so
//! it is used only when the user vouches for the file
//! (`pbf-index --trust-indexdata pbfhogg`) and its header claims the order.

use crate::frame::BlobStart;
use crate::key::{Key, Kind};
use crate::scan::Summary;
use crate::wire::{self, Reader};

/// Magic prefix of our indexdata.
pub const MAGIC: &[u8; 4] = b"PBSX";
/// Current format version.
pub const VERSION: u8 = 4;

/// Encode a blob summary as our indexdata for the Blob that starts as `blob`.
pub fn encode(s: &Summary, blob: &BlobStart) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    let order = u8::from(s.sorted) | u8::from(s.repeats) << 1 | u8::from(s.versions_unsorted) << 2;
    out.push(order | u8::from(s.negative_ids) << 3);
    for k in [s.first, s.last] {
        out.push(k.kind as u8);
        wire::put_varint(&mut out, wire::encode_zigzag(k.id));
        wire::put_varint(&mut out, u64::from(k.version));
    }
    for c in s.counts {
        wire::put_varint(&mut out, c);
    }
    wire::put_varint(&mut out, s.duplicate_ids);
    let sum = crc32(&out, blob);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The checksum of a summary's bytes and the Blob they describe.
fn crc32(bytes: &[u8], blob: &BlobStart) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(bytes);
    c.update(&blob.datasize().to_le_bytes());
    c.update(blob.bytes());
    c.sum()
}

/// Decode our indexdata of the Blob that starts as `blob`; `None` when it is
/// not ours, of another version, malformed, or written for another Blob.
pub fn decode(bytes: &[u8], blob: &BlobStart) -> Option<Summary> {
    let (body, sum) = bytes.split_last_chunk::<4>()?;
    if crc32(body, blob) != u32::from_le_bytes(*sum) {
        return None;
    }
    let rest = body.strip_prefix(MAGIC)?;
    let (&[version, flags], rest) = rest.split_first_chunk::<2>()?;
    let (negative_ids, flags) = (flags & 8 != 0, flags & !8);
    if version != VERSION || !matches!(flags, 0 | 1 | 2 | 4) {
        return None;
    }
    let mut r = Reader::new(rest);
    let first = read_key(&mut r)?;
    let last = read_key(&mut r)?;
    let mut counts = [0u64; 4];
    for c in &mut counts {
        *c = r.varint().ok()?;
    }
    let duplicate_ids = r.varint().ok()?;
    if !r.is_empty() || first > last || counts.iter().all(|&c| c == 0) {
        return None;
    }
    Some(Summary {
        first,
        last,
        counts,
        sorted: flags == 1,
        repeats: flags == 2,
        versions_unsorted: flags == 4,
        duplicate_ids,
        negative_ids,
    })
}

fn read_key(r: &mut Reader<'_>) -> Option<Key> {
    let kind = Kind::from_index(u8::try_from(r.varint().ok()?).ok()?)?;
    let id = wire::decode_zigzag(r.varint().ok()?);
    let version = u32::try_from(r.varint().ok()?).ok()?;
    Some(Key::new(kind, id, version))
}

/// Decode pbfhogg's 42-byte v2 indexdata into a conservative summary: the
/// first key has version 0 and the last version `u32::MAX`, so the range
/// covers every version of its ids. `None` when the bytes are not v2 or the
/// id range cannot be expressed in our order (ids <= 0 sort by absolute value,
/// so a signed min/max does not bound them).
pub fn decode_pbfhogg(bytes: &[u8]) -> Option<Summary> {
    if bytes.len() != 42 || bytes[0] != 0x02 {
        return None;
    }
    let kind = Kind::from_index(bytes[1]).filter(|k| *k != Kind::Changeset)?;
    let le = |at: usize| -> Option<[u8; 8]> { bytes.get(at..at + 8)?.try_into().ok() };
    let min = i64::from_le_bytes(le(2)?);
    let max = i64::from_le_bytes(le(10)?);
    let count = u64::from_le_bytes(le(18)?);
    if min <= 0 || max < min || count == 0 {
        return None;
    }
    let mut counts = [0u64; 4];
    counts[kind.index()] = count;
    Some(Summary {
        first: Key::new(kind, min, 0),
        last: Key::new(kind, max, u32::MAX),
        counts,
        sorted: true,
        repeats: false,
        versions_unsorted: false,
        duplicate_ids: 0,
        negative_ids: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOB: &[u8] =
        b"\x10\xe8\x07\x1a\x05zlib-compressed data of the blob, longer than its start";

    fn start() -> BlobStart {
        BlobStart::of(BLOB)
    }

    fn summary() -> Summary {
        Summary {
            first: Key::new(Kind::Node, -5, 0),
            last: Key::new(Kind::Relation, i64::MAX, u32::MAX),
            counts: [u64::MAX / 3, 1, 2, 0],
            sorted: true,
            repeats: false,
            versions_unsorted: false,
            duplicate_ids: u64::MAX,
            negative_ids: false,
        }
    }

    #[test]
    fn order_flags_round_trip() {
        let repeats = Summary {
            sorted: false,
            repeats: true,
            ..summary()
        };
        let versions = Summary {
            sorted: false,
            versions_unsorted: true,
            ..summary()
        };
        let unsorted = Summary {
            sorted: false,
            ..summary()
        };
        for (s, flags) in [(repeats, 2), (versions, 4), (unsorted, 0)] {
            let bytes = encode(&s, &start());
            assert_eq!(bytes[5], flags);
            assert_eq!(decode(&bytes, &start()), Some(s));
        }
    }

    #[test]
    fn round_trip_and_fits_a_small_blob_header() {
        let s = summary();
        let bytes = encode(&s, &start());
        assert!(bytes.len() <= 64, "{} bytes", bytes.len());
        let prefix = crate::frame::frame_prefix(
            &crate::frame::BlobType::OsmData,
            Some(&bytes),
            32 * 1024 * 1024,
        );
        assert!(prefix.is_ok_and(|p| p.len() - 4 < 128));
        assert_eq!(decode(&bytes, &start()), Some(s));
    }

    #[test]
    fn foreign_or_broken_indexdata_is_ignored() {
        let mut bytes = encode(&summary(), &start());
        assert_eq!(decode(&bytes[..bytes.len() - 1], &start()), None);
        bytes[4] = 1;
        assert_eq!(decode(&bytes, &start()), None);
        assert_eq!(decode(b"hello", &start()), None);
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let bytes = encode(&summary(), &start());
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert_eq!(decode(&b, &start()), None, "bit {i}");
        }
    }

    #[test]
    fn bound_to_the_blob_it_was_written_for() {
        let bytes = encode(&summary(), &start());
        let mut other = BLOB.to_vec();
        other[20] ^= 1;
        assert_eq!(decode(&bytes, &BlobStart::of(&other)), None, "other start");
        let longer = [BLOB, b"!"].concat();
        assert_eq!(
            decode(&bytes, &BlobStart::of(&longer)),
            None,
            "other datasize"
        );
        let mut tail = BLOB.to_vec();
        *tail.last_mut().expect("bytes") ^= 1;
        assert_eq!(
            decode(&bytes, &BlobStart::of(&tail)),
            Some(summary()),
            "past the start"
        );
        let short = BlobStart::of(b"\x10\x01");
        assert_eq!(decode(&encode(&summary(), &short), &short), Some(summary()));
        assert_eq!(
            BlobStart::from_prefix(40, &BLOB[..31]),
            None,
            "prefix too short"
        );
    }

    #[test]
    fn version_2_is_not_trusted() {
        let mut bytes = encode(&summary(), &start());
        bytes[4] = 2;
        let (body, _) = bytes.split_last_chunk::<4>().expect("sum");
        let mut c = flate2::Crc::new();
        c.update(body);
        let v2 = [body, &c.sum().to_le_bytes()].concat();
        assert_eq!(decode(&v2, &start()), None);
    }

    #[test]
    fn pbfhogg_v2() {
        let mut b = vec![0x02, 0x01];
        b.extend(10i64.to_le_bytes());
        b.extend(20i64.to_le_bytes());
        b.extend(7u64.to_le_bytes());
        b.extend([0u8; 16]);
        let s = decode_pbfhogg(&b).expect("v2");
        assert_eq!(s.first, Key::new(Kind::Way, 10, 0));
        assert_eq!(s.counts, [0, 7, 0, 0]);
        b[2..10].copy_from_slice(&(-3i64).to_le_bytes());
        assert_eq!(decode_pbfhogg(&b), None);
    }
}
