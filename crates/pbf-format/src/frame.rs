//! PBF framing: a file is a sequence of frames, each a 4-byte big-endian
//! BlobHeader length, a BlobHeader, and a Blob of `datasize` bytes.
//!
//! Reading goes through `pread` on a shared file handle, so frames can be read
//! from many threads and at any offset. The header-only walk never reads blob
//! bodies. Every length the input controls is checked against a limit and the
//! file size before anything is allocated.

use std::fmt;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::compress::Codec;
use crate::error::{Error, ErrorKind, Result};
use crate::wire::{self, Reader, Value};

/// Largest BlobHeader we accept (the format's own limit).
pub const MAX_HEADER_LEN: u32 = 64 * 1024;
/// Largest Blob (compressed body) we accept.
pub const MAX_BLOB_LEN: u32 = 32 * 1024 * 1024;
/// Bytes read speculatively with the length prefix so most headers need one `pread`.
const HEADER_PROBE: usize = 256;
/// Bytes read at a time while searching for a frame start.
pub(crate) const SEARCH_CHUNK: usize = 64 << 10;
/// Bytes shared by consecutive search reads, so a BlobHeader across the
/// boundary of two reads is still seen whole.
pub(crate) const SEARCH_OVERLAP: usize = 1 << 10;

/// A BlobHeader `type`: the two the format defines, or any other, which
/// readers skip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlobType {
    /// `OSMHeader`: the file's first blob, a HeaderBlock.
    OsmHeader,
    /// `OSMData`: a PrimitiveBlock.
    OsmData,
    /// Any other type, as written.
    Other(String),
}

impl BlobType {
    /// The type named `name` on the wire.
    pub fn from_name(name: &str) -> BlobType {
        match name {
            "OSMHeader" => BlobType::OsmHeader,
            "OSMData" => BlobType::OsmData,
            other => BlobType::Other(other.to_owned()),
        }
    }

    /// The name on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            BlobType::OsmHeader => "OSMHeader",
            BlobType::OsmData => "OSMData",
            BlobType::Other(name) => name,
        }
    }
}

impl fmt::Display for BlobType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bytes of a Blob that indexdata is bound to (see [`BlobStart`]).
pub const BLOB_START_LEN: usize = 32;

/// A Blob's length and first bytes (at most [`BLOB_START_LEN`]): what our
/// indexdata's checksum covers besides the summary, so that indexdata moved
/// onto another blob, or kept by a tool that re-framed or re-compressed the
/// blob, no longer checks. Cheap to have: a header read takes the Blob's
/// first bytes with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobStart {
    datasize: u32,
    len: u8,
    bytes: [u8; BLOB_START_LEN],
}

impl BlobStart {
    /// The start of a whole Blob message.
    pub fn of(blob: &[u8]) -> BlobStart {
        let datasize = u32::try_from(blob.len()).unwrap_or(u32::MAX);
        BlobStart::from_prefix(datasize, blob).expect("a whole Blob holds its start")
    }

    /// The start of a Blob of `datasize` bytes from a prefix of it; `None`
    /// when the prefix is shorter than the bytes the start holds.
    pub fn from_prefix(datasize: u32, prefix: &[u8]) -> Option<BlobStart> {
        let len = BLOB_START_LEN.min(datasize as usize);
        let mut bytes = [0; BLOB_START_LEN];
        bytes[..len].copy_from_slice(prefix.get(..len)?);
        Some(BlobStart {
            datasize,
            len: len as u8,
            bytes,
        })
    }

    /// The Blob's length.
    pub fn datasize(&self) -> u32 {
        self.datasize
    }

    /// The Blob's first bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The header of one frame; everything but the blob body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Offset of the frame's first byte (the length prefix).
    pub offset: u64,
    /// Length of the BlobHeader message.
    pub header_len: u32,
    /// BlobHeader `type`.
    pub blob_type: BlobType,
    /// BlobHeader `indexdata`, when present.
    pub indexdata: Option<Vec<u8>>,
    /// Length of the Blob message.
    pub datasize: u32,
    /// Blob data field when the start of the Blob was read with the header;
    /// `None` when not known yet.
    pub compression: Option<Codec>,
    /// Blob `raw_size`, when it precedes the data field and was read with the header.
    pub raw_size: Option<u64>,
    /// The Blob's first bytes, when they were read with the header.
    pub blob_start: Option<BlobStart>,
}

impl FrameHeader {
    /// Offset of the Blob message.
    pub fn body_offset(&self) -> u64 {
        self.offset + 4 + u64::from(self.header_len)
    }

    /// Length of the whole frame.
    pub fn frame_len(&self) -> u64 {
        4 + u64::from(self.header_len) + u64::from(self.datasize)
    }

    /// Offset just past the frame.
    pub fn end(&self) -> u64 {
        self.offset + self.frame_len()
    }
}

/// Decode a BlobHeader message: (type, indexdata, datasize).
pub fn parse_blob_header(bytes: &[u8]) -> Result<(BlobType, Option<Vec<u8>>, u32)> {
    let mut r = Reader::new(bytes);
    let (mut kind, mut index, mut size) = (None, None, None);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, Value::Bytes(b)) => {
                let s = std::str::from_utf8(b)
                    .map_err(|_| Error::malformed("BlobHeader type is not UTF-8"))?;
                kind = Some(BlobType::from_name(s));
            }
            (2, Value::Bytes(b)) => index = Some(b.to_vec()),
            (3, Value::Varint(x)) => size = Some(x),
            (1..=3, _) => return Err(Error::malformed("BlobHeader field has the wrong wire type")),
            _ => {}
        }
    }
    let kind = kind.ok_or_else(|| Error::malformed("BlobHeader has no type"))?;
    let size = size.ok_or_else(|| Error::malformed("BlobHeader has no datasize"))?;
    // datasize is int32 on the wire: a negative value arrives as a huge varint.
    if size > u64::from(MAX_BLOB_LEN) {
        return Err(Error::too_large(
            "BlobHeader datasize",
            size,
            u64::from(MAX_BLOB_LEN),
        ));
    }
    Ok((kind, index, size as u32))
}

/// Read the Blob fields that precede its data field, from a prefix of the Blob:
/// the data field's codec and `raw_size` if seen. Stops at the data field, so
/// the data itself need not be in the prefix.
pub fn peek_blob(prefix: &[u8]) -> (Option<Codec>, Option<u64>) {
    let mut r = Reader::new(prefix);
    let mut raw_size = None;
    while let Ok(tag) = r.varint() {
        if (tag >> 3, tag & 7) == (2, 0) {
            raw_size = r.varint().ok();
            continue;
        }
        let codec = u32::try_from(tag >> 3).ok().and_then(Codec::from_field);
        return (codec.filter(|_| tag & 7 == 2), raw_size);
    }
    (None, raw_size)
}

/// Longest BlobHeader a written frame may have: libosmium up to 2.19 reads
/// the 4-byte length through a signed `char` and rejects any length with a
/// byte >= 0x80.
pub const MAX_WRITTEN_HEADER_LEN: usize = 127;

/// Append to `out` the 4-byte length and the BlobHeader of a frame whose
/// Blob has `datasize` bytes: the one place a BlobHeader is encoded. A
/// BlobHeader longer than [`MAX_WRITTEN_HEADER_LEN`] is refused, and then
/// nothing is appended.
pub fn put_frame_prefix(
    out: &mut Vec<u8>,
    blob_type: &BlobType,
    indexdata: Option<&[u8]>,
    datasize: usize,
) -> Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    wire::put_bytes(out, 1, blob_type.as_str().as_bytes());
    if let Some(ix) = indexdata {
        wire::put_bytes(out, 2, ix);
    }
    wire::put_key(out, 3, wire::WireType::Varint);
    wire::put_varint(out, datasize as u64);
    let len = out.len() - start - 4;
    if len > MAX_WRITTEN_HEADER_LEN {
        out.truncate(start);
        let field = "BlobHeader to write (libosmium <= 2.19 reads no longer one)";
        return Err(Error::too_large(
            field,
            len as u64,
            MAX_WRITTEN_HEADER_LEN as u64,
        ));
    }
    out[start..start + 4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

/// The 4-byte length and BlobHeader of a frame whose Blob has `datasize`
/// bytes (see [`put_frame_prefix`]).
pub fn frame_prefix(
    blob_type: &BlobType,
    indexdata: Option<&[u8]>,
    datasize: usize,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(4 + MAX_WRITTEN_HEADER_LEN);
    put_frame_prefix(&mut out, blob_type, indexdata, datasize)?;
    Ok(out)
}

/// A whole frame: its prefix (see [`put_frame_prefix`]), then `blob`.
pub fn encode_frame(
    blob_type: &BlobType,
    indexdata: Option<&[u8]>,
    blob: &[u8],
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(4 + MAX_WRITTEN_HEADER_LEN + blob.len());
    put_frame_prefix(&mut out, blob_type, indexdata, blob.len())?;
    out.extend_from_slice(blob);
    Ok(out)
}

/// Whether `head`, a file's first bytes (at least 15 of them), starts a PBF
/// file: a BlobHeader length within the limit, then the BlobHeader of an
/// `OSMHeader` blob. For readers of JSON streams given a PBF file instead.
pub fn starts_like_pbf(head: &[u8]) -> bool {
    let Some((prefix, rest)) = head.split_first_chunk::<4>() else {
        return false;
    };
    u32::from_be_bytes(*prefix) <= MAX_HEADER_LEN && rest.starts_with(b"\x0a\x09OSMHeader")
}

/// An open PBF file read with `pread`.
#[derive(Debug)]
pub struct PbfFile {
    file: File,
    path: PathBuf,
    size: u64,
    mtime: (i64, u32),
    ctime: (i64, u32),
}

impl PbfFile {
    /// Open a file for reading; its size, mtime and ctime are taken now.
    pub fn open(path: &Path) -> Result<PbfFile> {
        // Check before opening: opening a FIFO blocks until a writer appears.
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            return Err(not_a_regular_file(path));
        }
        let file = File::open(path).map_err(|e| Error::from(e).in_file(path))?;
        PbfFile::from_file(file, path)
    }

    /// A file opened already (and checked: a stream's source), read as
    /// [`PbfFile::open`] reads it.
    pub fn from_file(file: File, path: &Path) -> Result<PbfFile> {
        let meta = file.metadata().map_err(|e| Error::from(e).in_file(path))?;
        if !meta.is_file() {
            return Err(not_a_regular_file(path));
        }
        let mtime = (meta.mtime(), u32::try_from(meta.mtime_nsec()).unwrap_or(0));
        let ctime = (meta.ctime(), u32::try_from(meta.ctime_nsec()).unwrap_or(0));
        Ok(PbfFile {
            file,
            path: path.to_path_buf(),
            size: meta.len(),
            mtime,
            ctime,
        })
    }

    /// The file's name in messages: the path given to [`PbfFile::open`],
    /// or the name given to [`PbfFile::named`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Name the open file `name` in messages from now on: the name a user
    /// gave it, where it was opened by another path (a stream's absolute
    /// path).
    pub fn named(mut self, name: impl Into<PathBuf>) -> PbfFile {
        self.path = name.into();
        self
    }

    /// File size in bytes when opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Modification time when opened: seconds since the epoch and
    /// nanoseconds past them.
    pub fn mtime(&self) -> (i64, u32) {
        self.mtime
    }

    /// Status change time when opened (moved by every write, which no user
    /// can set back, unlike the mtime): seconds and nanoseconds.
    pub fn ctime(&self) -> (i64, u32) {
        self.ctime
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The frame reader over this file and its size when opened.
    pub fn frames(&self) -> FrameReader<'_> {
        FrameReader {
            file: &self.file,
            path: &self.path,
            size: self.size,
        }
    }

    /// Read exactly `len` bytes at `offset`, or report truncation of `what`.
    pub fn read_exact_at(&self, offset: u64, len: usize, what: &'static str) -> Result<Vec<u8>> {
        self.frames().read_exact_at(offset, len, what)
    }

    /// Read and check the frame header at `offset`. The whole frame must lie
    /// inside the file, so a truncated last blob is found without reading it.
    pub fn frame_header_at(&self, offset: u64) -> Result<FrameHeader> {
        self.frames().frame_header_at(offset)
    }

    /// Read the Blob message of a frame.
    pub fn read_body(&self, fh: &FrameHeader) -> Result<Vec<u8>> {
        self.read_exact_at(fh.body_offset(), fh.datasize as usize, "Blob")
            .map_err(|e| e.at(fh.offset))
    }

    /// Walk all frame headers from the start, without reading blob bodies.
    pub fn headers(&self) -> HeaderWalk<'_> {
        HeaderWalk {
            file: self,
            offset: 0,
            failed: false,
        }
    }

    /// The frames that seem to start at `from` or in the `window` bytes
    /// after it, in file order (see [`FrameSearch`]).
    pub fn search_frames(&self, from: u64, window: u64) -> FrameSearch<'_> {
        FrameSearch {
            file: self,
            end: from.saturating_add(window).min(self.size),
            base: from,
            buf: Vec::new(),
            pos: 0,
        }
    }
}

/// The error for a path that is not a regular file, which [`PbfFile`]
/// refuses.
fn not_a_regular_file(path: &Path) -> Error {
    let msg = "not a regular file (pipes cannot be indexed: offsets must be re-readable)";
    Error::malformed(msg).in_file(path)
}

/// Whether `bytes` at `at` start like a data or header frame that fits in the
/// file: a BlobHeader length under the limit, then a BlobHeader of type
/// `OSMData` or `OSMHeader` (whose first field is the usual
/// `0x0a 0x07 "OSMData"` or `0x0a 0x09 "OSMHeader"`). Only a guess: a raw
/// blob may contain such bytes.
pub(crate) fn plausible_frame(file: &PbfFile, at: u64, bytes: &[u8]) -> bool {
    let Some((prefix, rest)) = bytes.split_first_chunk::<4>() else {
        return false;
    };
    let hl = u32::from_be_bytes(*prefix);
    let typed = rest.starts_with(b"\x0a\x07OSMData") || rest.starts_with(b"\x0a\x09OSMHeader");
    if hl > MAX_HEADER_LEN || !typed {
        return false;
    }
    let Some(Ok((kind, _, datasize))) = rest.get(..hl as usize).map(parse_blob_header) else {
        return false;
    };
    let end = at + 4 + u64::from(hl) + u64::from(datasize);
    matches!(kind, BlobType::OsmData | BlobType::OsmHeader) && end <= file.size()
}

/// A search for frames from an offset where no walk from the file's start
/// says a frame begins: the offsets whose bytes look like a frame start
/// ([`plausible_frame`]) and whose header then checks as a walk checks it
/// ([`FrameReader::frame_header_in`]: lengths within the limits, the whole
/// frame inside the file). A hint, never a walk: a raw blob may hold such
/// bytes (a string `OSMData`, a whole frame stored in a tag), so a caller
/// that needs a real frame checks its Blob too. The file is read
/// [`SEARCH_CHUNK`] bytes at a time; a read that fails ends the search.
#[derive(Debug)]
pub struct FrameSearch<'a> {
    file: &'a PbfFile,
    /// No frame found starts here or after.
    end: u64,
    /// The bytes read last, from `base`; the next offset to look at is
    /// `base + pos`.
    base: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl Iterator for FrameSearch<'_> {
    type Item = FrameHeader;

    fn next(&mut self) -> Option<FrameHeader> {
        let size = self.file.size();
        loop {
            let at = self.base + self.pos as u64;
            if at >= self.end {
                return None;
            }
            let read_to = self.base + self.buf.len() as u64;
            if self.pos + SEARCH_OVERLAP > self.buf.len() && read_to < size {
                let len = (size - at).min(SEARCH_CHUNK as u64) as usize;
                self.buf = self.file.read_exact_at(at, len, "frame").ok()?;
                (self.base, self.pos) = (at, 0);
                continue;
            }
            let bytes = &self.buf[self.pos..];
            self.pos += 1;
            if plausible_frame(self.file, at, bytes) {
                if let Ok(fh) = self.file.frames().frame_header_in(at, bytes) {
                    return Some(fh);
                }
            }
        }
    }
}

/// The one frame-header reader: an open file, its name for errors, and
/// the size the caller knows it to have. A [`PbfFile`] reads through one
/// with its size when opened; a copier builds one over a file that grows
/// while it is read (a pbf-merge spool) with the size it just checked.
#[derive(Clone, Copy, Debug)]
pub struct FrameReader<'a> {
    /// The open file.
    pub file: &'a File,
    /// Its name in errors.
    pub path: &'a Path,
    /// How far it is read: every frame must end by here.
    pub size: u64,
}

impl FrameReader<'_> {
    /// Read exactly `len` bytes at `offset`, or report truncation of `what`.
    pub fn read_exact_at(&self, offset: u64, len: usize, what: &'static str) -> Result<Vec<u8>> {
        let available = self.size.saturating_sub(offset);
        if (len as u64) > available {
            return Err(self.truncated(what, len as u64, available, offset));
        }
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| Error::from(e).at(offset).in_file(self.path))?;
        Ok(buf)
    }

    fn truncated(&self, what: &'static str, needed: u64, available: u64, offset: u64) -> Error {
        Error::new(ErrorKind::Truncated {
            what,
            needed,
            available,
        })
        .at(offset)
        .in_file(self.path)
    }

    /// Read and check the frame header at `offset`. The whole frame must lie
    /// inside `size`, so a truncated last blob is found without reading it.
    pub fn frame_header_at(&self, offset: u64) -> Result<FrameHeader> {
        self.frame_header_in(offset, &[])
    }

    /// [`PbfFile::frame_header_at`] for a frame whose first bytes were read
    /// already: `bytes` are the file's bytes from `offset` on, as many as
    /// were read. The file is read only when they do not hold the probe and
    /// the BlobHeader, so a reader of many small frames that reads the file
    /// in large pieces checks their headers without a read each.
    pub fn frame_header_in(&self, offset: u64, bytes: &[u8]) -> Result<FrameHeader> {
        let probe_len = self.probe_len(offset);
        let read;
        let probe = match bytes.get(..probe_len) {
            Some(probe) => probe,
            None => {
                read = self.read_exact_at(offset, probe_len, "frame length")?;
                &read[..]
            }
        };
        let hl = self.probed_header_len(offset, probe)? as usize;
        let header = match bytes.get(4..4 + hl) {
            Some(header) => header.to_vec(),
            None if 4 + hl <= probe.len() => probe[4..4 + hl].to_vec(),
            None => self.read_exact_at(offset + 4, hl, "BlobHeader")?,
        };
        self.frame_from_probe(offset, probe, &header)
    }

    /// The first bytes of the Blob of `fh`, which our indexdata is bound to:
    /// those read with the header, else read now.
    pub fn blob_start(&self, fh: &FrameHeader) -> Result<BlobStart> {
        if let Some(start) = fh.blob_start {
            return Ok(start);
        }
        let len = BLOB_START_LEN.min(fh.datasize as usize);
        let prefix = self
            .read_exact_at(fh.body_offset(), len, "Blob")
            .map_err(|e| e.at(fh.offset))?;
        BlobStart::from_prefix(fh.datasize, &prefix).ok_or_else(|| {
            Error::malformed("Blob start not read")
                .at(fh.offset)
                .in_file(self.path)
        })
    }

    /// How many bytes [`FrameReader::frame_header_at`] reads first at
    /// `offset`: the length prefix and, for most frames, the whole BlobHeader.
    pub(crate) fn probe_len(&self, offset: u64) -> usize {
        (self.size.saturating_sub(offset)).min(HEADER_PROBE as u64) as usize
    }

    /// The BlobHeader length at the start of a probe read at `offset`, checked
    /// against the limit. The BlobHeader itself may extend past the probe.
    pub(crate) fn probed_header_len(&self, offset: u64, probe: &[u8]) -> Result<u32> {
        let Some(&prefix) = probe.first_chunk::<4>() else {
            return Err(self.truncated("frame length", 4, probe.len() as u64, offset));
        };
        let header_len = u32::from_be_bytes(prefix);
        if header_len > MAX_HEADER_LEN {
            let (size, limit) = (u64::from(header_len), u64::from(MAX_HEADER_LEN));
            let e = Error::too_large("BlobHeader length", size, limit);
            return Err(e.at(offset).in_file(self.path));
        }
        Ok(header_len)
    }

    /// Decode the frame at `offset` from its probe (see
    /// [`FrameReader::probe_len`]) and its BlobHeader bytes, and check that
    /// the frame ends by `size`.
    pub(crate) fn frame_from_probe(
        &self,
        offset: u64,
        probe: &[u8],
        header: &[u8],
    ) -> Result<FrameHeader> {
        let fail = |e: Error| e.at(offset).in_file(self.path);
        let (blob_type, indexdata, datasize) = parse_blob_header(header).map_err(fail)?;
        let body = probe.get(4 + header.len()..).unwrap_or_default();
        let body = &body[..body.len().min(datasize as usize)];
        let (compression, raw_size) = peek_blob(body);
        let fh = FrameHeader {
            offset,
            header_len: header.len() as u32,
            blob_type,
            indexdata,
            datasize,
            compression,
            raw_size,
            blob_start: BlobStart::from_prefix(datasize, body),
        };
        if fh.end() > self.size {
            return Err(self.truncated(
                "Blob",
                u64::from(datasize),
                self.size - fh.body_offset().min(self.size),
                offset,
            ));
        }
        Ok(fh)
    }
}

/// Iterator over the frame headers of a file; stops after the first error.
#[derive(Debug)]
pub struct HeaderWalk<'a> {
    file: &'a PbfFile,
    offset: u64,
    failed: bool,
}

impl Iterator for HeaderWalk<'_> {
    type Item = Result<FrameHeader>;

    fn next(&mut self) -> Option<Result<FrameHeader>> {
        if self.failed || self.offset >= self.file.size {
            return None;
        }
        match self.file.frame_header_at(self.offset) {
            Ok(fh) => {
                self.offset = fh.end();
                Some(Ok(fh))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_with(bytes: &[u8]) -> (PathBuf, PbfFile) {
        let dir = std::env::temp_dir().join(format!(
            "pbf-frame-test-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        let mut f = File::create(&dir).expect("create");
        f.write_all(bytes).expect("write");
        let pf = PbfFile::open(&dir).expect("open");
        (dir, pf)
    }

    #[test]
    fn a_pbf_start_is_told_from_text_and_other_frames() {
        assert!(starts_like_pbf(b"\0\0\0\x0d\x0a\x09OSMHeader\x18"));
        assert!(!starts_like_pbf(b"\0\0\0\x0d\x0a\x07OSMData\x18"));
        assert!(!starts_like_pbf(b"\0\x01\0\x01\x0a\x09OSMHeader"));
        assert!(!starts_like_pbf(b"{\"type\":\"source\""));
        assert!(!starts_like_pbf(b"\0\0\0"));
    }

    #[test]
    fn walks_frames_and_reports_truncation() {
        let mut bytes = encode_frame(&BlobType::OsmHeader, None, b"abc").expect("frame");
        bytes.extend(encode_frame(&BlobType::OsmData, Some(b"ix"), b"defgh").expect("frame"));
        let good_len = bytes.len();
        bytes.extend(encode_frame(&BlobType::OsmData, None, b"0123456789").expect("frame"));
        bytes.truncate(bytes.len() - 3);
        let (path, pf) = temp_with(&bytes);
        let got: Vec<_> = pf.headers().collect();
        assert_eq!(got.len(), 3);
        let first = got[0].as_ref().expect("frame 0");
        assert_eq!((first.blob_type.as_str(), first.datasize), ("OSMHeader", 3));
        let second = got[1].as_ref().expect("frame 1");
        assert_eq!(second.indexdata.as_deref(), Some(&b"ix"[..]));
        assert_eq!(pf.read_body(second).expect("body"), b"defgh");
        let err = got[2].as_ref().expect_err("truncated");
        assert_eq!(err.offset(), Some(good_len as u64));
        assert!(err.to_string().contains("truncated Blob"), "{err}");
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn a_written_blob_header_is_encoded_once_and_stays_readable() {
        let mut out = b"kept".to_vec();
        put_frame_prefix(&mut out, &BlobType::OsmData, Some(b"ix"), 300).expect("prefix");
        let hl = u32::from_be_bytes([out[4], out[5], out[6], out[7]]) as usize;
        assert_eq!(out.len(), 8 + hl);
        let (kind, ix, size) = parse_blob_header(&out[8..]).expect("BlobHeader");
        assert_eq!(
            (kind, ix.as_deref(), size),
            (BlobType::OsmData, Some(&b"ix"[..]), 300)
        );
        let long = [0u8; MAX_WRITTEN_HEADER_LEN];
        let err = put_frame_prefix(&mut out, &BlobType::OsmData, Some(&long), 300);
        let err = err.expect_err("too long for libosmium");
        assert!(err.to_string().contains("limit is 127"), "{err}");
        assert_eq!(out.len(), 8 + hl, "nothing appended");
    }

    #[test]
    fn oversized_header_is_refused_before_reading() {
        let mut bytes = 70_000u32.to_be_bytes().to_vec();
        bytes.extend([0u8; 16]);
        let (path, pf) = temp_with(&bytes);
        let err = pf.frame_header_at(0).expect_err("too large");
        assert!(
            err.to_string().contains("BlobHeader length is 70000 bytes"),
            "{err}"
        );
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn negative_datasize_is_refused() {
        let mut h = Vec::new();
        wire::put_bytes(&mut h, 1, b"OSMData");
        wire::put_key(&mut h, 3, wire::WireType::Varint);
        wire::put_varint(&mut h, (-5i64) as u64);
        assert!(parse_blob_header(&h).is_err());
    }

    /// A header frame, `junk`, then two data frames: the offsets where the
    /// data frames start, and the file.
    fn with_junk(junk: &[u8], name: &str) -> (PathBuf, PbfFile, [u64; 2]) {
        let mut bytes = encode_frame(&BlobType::OsmHeader, None, b"header").expect("frame");
        bytes.extend_from_slice(junk);
        let first = bytes.len() as u64;
        bytes.extend(encode_frame(&BlobType::OsmData, None, b"first").expect("frame"));
        let second = bytes.len() as u64;
        bytes.extend(encode_frame(&BlobType::OsmData, None, b"second").expect("frame"));
        let path =
            std::env::temp_dir().join(format!("pbf-frame-search-{}-{name}", std::process::id()));
        std::fs::write(&path, &bytes).expect("write");
        let pf = PbfFile::open(&path).expect("open");
        (path, pf, [first, second])
    }

    #[test]
    fn a_search_finds_the_frames_after_junk() {
        // Near misses: the type without a length before it, a length too
        // large, a header whose frame would end past the file; and enough
        // junk that the first frame's header crosses two search reads.
        let mut junk = b"\x0a\x07OSMData".to_vec();
        junk.extend_from_slice(b"\x00\x01\x00\x01\x0a\x07OSMData\x18\x01");
        let past_end = frame_prefix(&BlobType::OsmData, None, 1 << 20).expect("prefix");
        junk.extend(&past_end);
        junk.resize(SEARCH_CHUNK - 5, 0xff);
        let (path, pf, data) = with_junk(&junk, "junk");
        let found: Vec<u64> = pf.search_frames(20, 1 << 20).map(|fh| fh.offset).collect();
        assert_eq!(found, data);
        let next = pf.search_frames(data[0] + 1, 1 << 20).next();
        assert_eq!(next.map(|fh| fh.offset), Some(data[1]));
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn a_window_without_a_frame_start_gives_none() {
        let (path, pf, data) = with_junk(&vec![0u8; 3 * SEARCH_CHUNK], "zeros");
        assert!(pf.search_frames(20, data[0] - 20).next().is_none());
        let found = pf.search_frames(20, data[0] - 19).next();
        assert_eq!(found.map(|fh| fh.offset), Some(data[0]));
        assert!(pf.search_frames(data[1] + 1, 1 << 20).next().is_none());
        assert!(pf.search_frames(pf.size() + 5, 1 << 20).next().is_none());
        std::fs::remove_file(path).ok();
    }

    /// A frame stored inside another frame's Blob (as a raw blob may hold
    /// one in a string) is found, as the search cannot tell; its Blob is
    /// not one, which is how a caller that checks it tells.
    #[test]
    fn a_frame_inside_a_blob_is_found_and_its_blob_does_not_check() {
        let fake = encode_frame(&BlobType::OsmData, None, b"fake body").expect("frame");
        let mut body = b"string table ".to_vec();
        body.extend(&fake);
        let mut bytes = encode_frame(&BlobType::OsmHeader, None, b"header").expect("frame");
        let outer = bytes.len() as u64;
        bytes.extend(encode_frame(&BlobType::OsmData, None, &body).expect("frame"));
        let after = bytes.len() as u64;
        bytes.extend(encode_frame(&BlobType::OsmData, None, b"next").expect("frame"));
        let (path, pf) = temp_with(&bytes);
        let found: Vec<FrameHeader> = pf.search_frames(outer + 1, 1 << 20).collect();
        let offsets: Vec<u64> = found.iter().map(|fh| fh.offset).collect();
        let inside = offsets[0];
        assert!(inside > outer && inside < after, "{offsets:?}");
        assert_eq!(offsets[1..], [after]);
        let blob = pf.read_body(&found[0]).expect("body");
        assert!(crate::compress::blob_data(&blob).is_err());
        std::fs::remove_file(path).ok();
    }
}
