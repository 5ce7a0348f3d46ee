//! The frames a copier writes itself rather than copies: the new
//! OSMHeader, and the data frames of a plan's copy ops re-framed with
//! indexdata (`--add-indexdata`), one op at a time, the same for both
//! copiers. BlobHeaders are encoded, and their length checked, by the one
//! frame writer ([`pbf_format::frame::put_frame_prefix`]).

use std::fs::File;
use std::path::Path;

use pbf_format::Key;
use pbf_format::frame::{BlobType, FrameHeader, FrameReader, frame_prefix};
use pbf_format::header::{Header, encode_header_frame};
use pbf_format::indexdata;
use pbf_format::scan::Summary;
use pbf_stream::{CopyOp, FrameKeys};

use pbf_output::{Error, ErrorKind, Result};

/// The OSMHeader frame for a plan's header record, zlib-compressed.
pub fn header_frame(h: &Header) -> Result<Vec<u8>> {
    encode_header_frame(h, Default::default())
        .map_err(|e| Error::new("writing the OSMHeader", ErrorKind::Format(e)))
}

/// The frame reader over `file` at its size now: a spool grows while it is
/// read, and each range the plan copies from it was checked against its
/// size when it was asked for ([`crate::CopySources::range`]).
pub fn frame_reader<'a>(file: &'a File, path: &'a Path) -> Result<FrameReader<'a>> {
    let size = file
        .metadata()
        .map_err(|e| Error::io(format!("{}: stat", path.display()), e))?
        .len();
    Ok(FrameReader { file, path, size })
}

/// The header of the frame at offset 0 of `file`, if it starts with one.
pub fn first_frame(file: &File, path: &Path) -> Option<FrameHeader> {
    frame_reader(file, path).ok()?.frame_header_at(0).ok()
}

/// A passthrough data frame with a new BlobHeader that carries our
/// indexdata: the length prefix and BlobHeader to write, then the Blob to
/// copy from the source as it is.
#[derive(Debug)]
pub struct Reframed {
    /// The 4-byte length and the new BlobHeader.
    pub prefix: Vec<u8>,
    /// Where the Blob starts in the source.
    pub body_offset: u64,
    /// The Blob's length.
    pub body_len: u64,
}

/// Re-frame every frame of the copy op `op` of `file` with indexdata for
/// its keys (pbf-copy and pbf-reflink with `--add-indexdata`): `put` gets
/// the frames in order, each to be written as its prefix then its Blob.
pub fn reframe_op<E: From<Error>>(
    op: &CopyOp,
    (file, path): (&File, &Path),
    mut put: impl FnMut(Reframed) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let src = frame_reader(file, path)?;
    let mut offset = op.offset;
    for keys in &op.frames {
        put(reframe_with_indexdata(&src, offset, keys)?)?;
        offset += keys.length;
    }
    Ok(())
}

/// Re-frame the data frame at `offset` of `src` with indexdata for `keys`.
/// The frame must be an OSMData frame of exactly `keys.length` bytes.
pub fn reframe_with_indexdata(
    src: &FrameReader<'_>,
    offset: u64,
    keys: &FrameKeys,
) -> Result<Reframed> {
    let in_file = |e: Error| e.within(src.path.display());
    let format = |e| Error::new(src.path.display().to_string(), ErrorKind::Format(e));
    let fh = src.frame_header_at(offset).map_err(format)?;
    check_data_frame(&fh, keys.length).map_err(in_file)?;
    let summary = frame_summary(keys).map_err(in_file)?;
    let start = src.blob_start(&fh).map_err(format)?;
    let ix = indexdata::encode(&summary, &start);
    let prefix = frame_prefix(&BlobType::OsmData, Some(&ix), fh.datasize as usize)
        .map_err(|e| Error::new(frame_at(src.path, offset), ErrorKind::Format(e)))?;
    Ok(Reframed {
        prefix,
        body_offset: fh.body_offset(),
        body_len: u64::from(fh.datasize),
    })
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
        duplicate_ids: k.duplicate_ids,
        negative_ids: k.negative_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::Kind;
    use pbf_format::compress::decode_blob;
    use pbf_format::frame::{BlobStart, MAX_WRITTEN_HEADER_LEN, encode_frame, parse_blob_header};
    use pbf_format::header::decode_header;
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
            duplicate_ids: 0,
            negative_ids: false,
        };
        let ix = indexdata::encode(&s, &BlobStart::of(&[0xff; 40]));
        let prefix = frame_prefix(&BlobType::OsmData, Some(&ix), u32::MAX as usize);
        let prefix = prefix.expect("prefix");
        assert!(
            prefix.len() - 4 <= MAX_WRITTEN_HEADER_LEN,
            "{}",
            prefix.len()
        );
        assert_eq!(prefix[..3], [0, 0, 0]);
    }

    #[test]
    fn reframes_a_data_frame_with_indexdata() {
        let mut f = tempfile::tempfile().expect("temp");
        f.write_all(b"junk").expect("junk");
        let frame = encode_frame(&BlobType::OsmData, Some(b"ix"), b"body").expect("frame");
        f.write_all(&frame).expect("frame");
        let src = frame_reader(&f, Path::new("t.pbf")).expect("reader");
        let counts = pbf_stream::Counts::from_array([1, 0, 0, 0]);
        let key = pbf_stream::KeyRecord::from(Key::new(Kind::Node, 1, 0));
        let mut keys = FrameKeys {
            length: frame.len() as u64,
            first: key,
            last: key,
            counts,
            duplicate_ids: 0,
            negative_ids: false,
        };
        let r = reframe_with_indexdata(&src, 4, &keys).expect("reframed");
        // 4 bytes of junk before the frame, a Blob of 4 bytes at its end.
        let body_offset = 4 + frame.len() as u64 - 4;
        assert_eq!((r.body_offset, r.body_len), (body_offset, 4));
        let (kind, ix, size) = parse_blob_header(&r.prefix[4..]).expect("new BlobHeader");
        assert_eq!((kind, size), (BlobType::OsmData, 4));
        let summary = indexdata::decode(&ix.expect("indexdata"), &BlobStart::of(b"body"));
        assert_eq!(summary.map(|s| s.first), Some(Key::new(Kind::Node, 1, 0)));
        keys.length += 1;
        let err = reframe_with_indexdata(&src, 4, &keys).expect_err("length");
        assert!(err.to_string().contains("plan does not match"), "{err}");
        let err = reframe_with_indexdata(&src, 4 + frame.len() as u64 - 2, &keys).expect_err("eof");
        assert!(
            err.to_string().starts_with("t.pbf: blob at offset"),
            "{err}"
        );
    }
}
