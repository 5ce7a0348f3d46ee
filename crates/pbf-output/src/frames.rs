//! The frames an output tool writes itself rather than copies: the new
//! OSMHeader, and new BlobHeaders for passthrough data frames (with
//! indexdata). Every BlobHeader we write is checked to stay under 128 bytes:
//! libosmium up to 2.19 reads the 4-byte length through a signed `char` and
//! rejects any length with a byte >= 0x80.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use pbf_format::Key;
use pbf_format::compress::{Compression, encode_blob};
use pbf_format::frame::{
    BLOB_START_LEN, BlobStart, BlobType, FrameHeader, MAX_HEADER_LEN, encode_blob_header,
    encode_frame, parse_blob_header,
};
use pbf_format::header::{Header, encode_header};
use pbf_format::scan::Summary;
use pbf_stream::FrameKeys;

use crate::error::{Error, ErrorKind, Result};

/// Longest BlobHeader we write.
pub const MAX_WRITTEN_BLOB_HEADER: usize = 127;

/// The OSMHeader frame for a plan's header record, zlib-compressed.
pub fn header_frame(h: &Header) -> Result<Vec<u8>> {
    header_frame_with(h, Compression::default())
}

/// The OSMHeader frame for `h`, compressed with `compression`.
pub fn header_frame_with(h: &Header, compression: Compression) -> Result<Vec<u8>> {
    let block = encode_header(h);
    let blob = encode_blob(&block, compression)
        .map_err(|e| Error::new("encoding the OSMHeader", ErrorKind::Format(e)))?;
    let header = encode_blob_header(&BlobType::OsmHeader, None, blob.len());
    check_blob_header_len(header.len())?;
    Ok(encode_frame(&BlobType::OsmHeader, None, &blob))
}

/// The 4-byte length and BlobHeader of an OSMData frame whose Blob has
/// `datasize` bytes, with `indexdata` when given.
pub fn data_frame_prefix(indexdata: Option<&[u8]>, datasize: u32) -> Result<Vec<u8>> {
    let header = encode_blob_header(&BlobType::OsmData, indexdata, datasize as usize);
    check_blob_header_len(header.len())?;
    let mut out = Vec::with_capacity(4 + header.len());
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(&header);
    Ok(out)
}

fn check_blob_header_len(len: usize) -> Result<()> {
    if len > MAX_WRITTEN_BLOB_HEADER {
        return Err(Error::invalid(
            "writing a BlobHeader",
            format!(
                "BlobHeader would be {len} bytes; at most {MAX_WRITTEN_BLOB_HEADER} are readable by libosmium <= 2.19"
            ),
        ));
    }
    Ok(())
}

/// Read the frame header (length prefix and BlobHeader, not the Blob) at
/// `offset` of `file`; `path` names the file in errors.
pub fn read_frame_header(file: &File, path: &Path, offset: u64) -> Result<FrameHeader> {
    let at = || frame_at(path, offset);
    let read = |len: usize, pos: u64| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, pos).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                Error::invalid(at(), "file ends inside the frame header")
            } else {
                Error::io(at(), e)
            }
        })?;
        Ok(buf)
    };
    let len = read(4, offset)?;
    let header_len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]);
    if header_len > MAX_HEADER_LEN {
        return Err(Error::invalid(
            at(),
            format!("BlobHeader length is {header_len} bytes, limit is {MAX_HEADER_LEN}"),
        ));
    }
    let bytes = read(header_len as usize, offset + 4)?;
    let (blob_type, indexdata, datasize) =
        parse_blob_header(&bytes).map_err(|e| Error::new(at(), ErrorKind::Format(e)))?;
    Ok(FrameHeader {
        offset,
        header_len,
        blob_type,
        indexdata,
        datasize,
        compression: None,
        raw_size: None,
        blob_start: None,
    })
}

/// The first bytes of the Blob of frame `fh` of `file`, which our indexdata
/// is bound to (`pbf_format::frame::BlobStart`).
pub fn read_blob_start(file: &File, path: &Path, fh: &FrameHeader) -> Result<BlobStart> {
    let mut buf = [0u8; BLOB_START_LEN];
    let len = BLOB_START_LEN.min(fh.datasize as usize);
    file.read_exact_at(&mut buf[..len], fh.body_offset())
        .map_err(|e| Error::io(frame_at(path, fh.offset), e))?;
    BlobStart::from_prefix(fh.datasize, &buf[..len])
        .ok_or_else(|| Error::invalid(frame_at(path, fh.offset), "Blob start not read"))
}

/// How errors name a frame: `PATH: frame at offset N`.
pub fn frame_at(path: &Path, offset: u64) -> String {
    format!("{}: frame at offset {offset}", path.display())
}

/// Check that a frame a plan copies is an OSMData frame of the planned length.
pub fn check_data_frame(fh: &FrameHeader, planned_len: u64) -> Result<()> {
    let at = format!("frame at offset {}", fh.offset);
    if fh.blob_type != BlobType::OsmData {
        return Err(Error::invalid(
            at,
            format!(
                "is an {:?} frame, the plan expects OSMData",
                fh.blob_type.as_str()
            ),
        ));
    }
    if fh.frame_len() != planned_len {
        return Err(Error::invalid(
            at,
            format!(
                "is {} bytes long, the plan says {planned_len} (plan does not match the file)",
                fh.frame_len()
            ),
        ));
    }
    Ok(())
}

/// The key summary to store as indexdata for a frame of a copy op. Copy ops
/// only ever hold blobs whose keys strictly increase (pbf-overlap emits
/// copies for sorted blobs only, and pbf-merge writes sorted blobs), so the
/// summary is marked sorted.
pub fn frame_summary(k: &FrameKeys) -> Result<Summary> {
    let (first, last) = (Key::from(k.first), Key::from(k.last));
    if first > last {
        return Err(Error::invalid(
            "plan frame keys",
            format!("first key {first} is after last key {last}"),
        ));
    }
    Ok(Summary {
        first,
        last,
        counts: k.counts.to_array(),
        sorted: true,
        repeats: false,
        versions_unsorted: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::Kind;
    use pbf_format::compress::decode_blob;
    use pbf_format::header::decode_header;
    use pbf_format::indexdata;
    use std::io::Write;

    #[test]
    fn header_frame_round_trips() {
        let rec = Header {
            required_features: vec!["OsmSchema-V0.6".into(), "DenseNodes".into()],
            optional_features: vec!["Sort.Type_then_ID".into()],
            writingprogram: Some("pbf-sort".into()),
            ..Header::default()
        };
        let frame = header_frame(&rec).expect("frame");
        let hl = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        let (kind, ix, size) = parse_blob_header(&frame[4..4 + hl]).expect("blob header");
        assert_eq!(
            (kind.as_str(), ix, size as usize),
            ("OSMHeader", None, frame.len() - 4 - hl)
        );
        let block = decode_blob(&frame[4 + hl..]).expect("blob");
        assert_eq!(decode_header(&block).expect("header"), rec);
    }

    #[test]
    fn largest_indexdata_header_stays_readable() {
        let s = Summary {
            first: Key::new(Kind::Node, i64::MIN, u32::MAX),
            last: Key::new(Kind::Changeset, i64::MAX, u32::MAX),
            counts: [u64::MAX; 4],
            sorted: true,
            repeats: false,
            versions_unsorted: false,
        };
        let prefix = data_frame_prefix(
            Some(&indexdata::encode(&s, &BlobStart::of(&[0xff; 40]))),
            u32::MAX,
        )
        .expect("prefix");
        assert!(
            prefix.len() - 4 <= MAX_WRITTEN_BLOB_HEADER,
            "{}",
            prefix.len()
        );
        assert_eq!(prefix[..3], [0, 0, 0]);
    }

    #[test]
    fn reads_and_checks_a_frame_header() {
        let mut f = tempfile::tempfile().expect("temp");
        f.write_all(b"junk").expect("junk");
        f.write_all(&encode_frame(&BlobType::OsmData, Some(b"ix"), b"body"))
            .expect("frame");
        let fh = read_frame_header(&f, Path::new("t.pbf"), 4).expect("header");
        assert_eq!((fh.blob_type.as_str(), fh.datasize), ("OSMData", 4));
        assert_eq!(fh.indexdata.as_deref(), Some(&b"ix"[..]));
        check_data_frame(&fh, fh.frame_len()).expect("matches");
        let err = check_data_frame(&fh, fh.frame_len() + 1).expect_err("length");
        assert!(err.to_string().contains("plan does not match"), "{err}");
        let err = read_frame_header(&f, Path::new("t.pbf"), fh.end() - 2).expect_err("eof");
        assert!(
            err.to_string().starts_with("t.pbf: frame at offset"),
            "{err}"
        );
    }
}
