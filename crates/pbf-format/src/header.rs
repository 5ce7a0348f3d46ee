//! The OSMHeader block: bounding box, features, writing program, source and
//! replication fields, decoded to plain values and encoded back, and read
//! from the start of a file (one rule for every tool: the first blob must be
//! the OSMHeader).

use prost::Message;

use crate::compress::{Compression, decode_blob, encode_blob};
use crate::error::{Error, ErrorKind, Result};
use crate::frame::{
    BlobType, FrameHeader, MAX_HEADER_LEN, PbfFile, encode_frame, parse_blob_header,
};
use crate::sniff::{NotPbf, SNIFF_LEN, identify};

/// Feature every output declares: our sort order.
pub const SORT_FEATURE: &str = "Sort.Type_then_ID";

/// A bounding box in nanodegrees: the `HeaderBBox` message itself.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct BBox {
    /// West edge.
    #[prost(sint64, required, tag = "1")]
    pub left: i64,
    /// East edge.
    #[prost(sint64, required, tag = "2")]
    pub right: i64,
    /// North edge.
    #[prost(sint64, required, tag = "3")]
    pub top: i64,
    /// South edge.
    #[prost(sint64, required, tag = "4")]
    pub bottom: i64,
}

/// The OSMHeader: the `HeaderBlock` message itself (prost attributes, so
/// decoding and encoding copy no field). The streams' header records hold
/// this type through pbf-stream's serde view of it, which the compiler
/// holds to these fields.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Header {
    /// Bounding box, if any.
    #[prost(message, optional, tag = "1")]
    pub bbox: Option<BBox>,
    /// Features a reader must support.
    #[prost(string, repeated, tag = "4")]
    pub required_features: Vec<String>,
    /// Features a reader may use.
    #[prost(string, repeated, tag = "5")]
    pub optional_features: Vec<String>,
    /// The program that wrote the file.
    #[prost(string, optional, tag = "16")]
    pub writingprogram: Option<String>,
    /// Data source.
    #[prost(string, optional, tag = "17")]
    pub source: Option<String>,
    /// Replication timestamp, seconds since the epoch
    /// (`osmosis_replication_timestamp`).
    #[prost(int64, optional, tag = "32")]
    pub replication_timestamp: Option<i64>,
    /// Replication sequence number (`osmosis_replication_sequence_number`).
    #[prost(int64, optional, tag = "33")]
    pub replication_sequence_number: Option<i64>,
    /// Replication base URL (`osmosis_replication_base_url`).
    #[prost(string, optional, tag = "34")]
    pub replication_base_url: Option<String>,
}

/// The required features a file may declare and still be sorted: each is
/// kept by a blob copy and by a merge (`pbf-overlap`'s output header says
/// which survive). A reader must refuse a file that requires any other.
pub const UNDERSTOOD_FEATURES: &[&str] = &[
    "OsmSchema-V0.6",
    "DenseNodes",
    "HistoricalInformation",
    "LocationsOnWays",
    SORT_FEATURE,
    "Sort.Geographic",
];

impl Header {
    /// The first required feature not in [`UNDERSTOOD_FEATURES`].
    pub fn unknown_required_feature(&self) -> Option<&str> {
        self.required_features
            .iter()
            .map(String::as_str)
            .find(|f| !UNDERSTOOD_FEATURES.contains(f))
    }

    /// True when the header claims `Sort.Type_then_ID`.
    pub fn claims_sorted(&self) -> bool {
        self.optional_features.iter().any(|f| f == SORT_FEATURE)
    }

    /// True when the file holds history (several versions per object).
    pub fn has_history(&self) -> bool {
        self.required_features
            .iter()
            .any(|f| f == "HistoricalInformation")
    }
}

/// Decode an uncompressed HeaderBlock.
pub fn decode_header(data: &[u8]) -> Result<Header> {
    Ok(Header::decode(data)?)
}

/// Read a file's OSMHeader from the first of its `frames` (a walk of `file`
/// from offset 0): that frame and the decoded header. An empty file, or one
/// whose first bytes say it is of another kind ([`crate::sniff`]) or cannot
/// start a PBF frame ([`no_frame_start`]), is not a PBF file
/// ([`ErrorKind::NotPbf`]); one whose first frame is an OSMData frame, or
/// is cut short, is a damaged PBF file.
pub fn read_file_header(
    file: &PbfFile,
    frames: &mut impl Iterator<Item = Result<FrameHeader>>,
) -> Result<(FrameHeader, Header)> {
    let path = file.path();
    let Some(first) = frames.next() else {
        return Err(Error::new(ErrorKind::NotPbf(NotPbf::Empty)).in_file(path));
    };
    let first = first.map_err(|e| not_pbf(file).unwrap_or(e))?;
    if first.blob_type != BlobType::OsmHeader {
        if let Some(e) = not_pbf(file) {
            return Err(e);
        }
        let msg = format!(
            "first blob is {:?}, expected OSMHeader",
            first.blob_type.as_str()
        );
        return Err(Error::malformed(msg).at(0).in_file(path));
    }
    let header = read_header_frame(file, &first)?;
    Ok((first, header))
}

/// The error for a file whose first bytes say it is of a kind that is not
/// PBF (see [`crate::sniff`]), or cannot start a PBF frame
/// ([`no_frame_start`]); `None` when they do not.
fn not_pbf(file: &PbfFile) -> Option<Error> {
    let len = file.size().min(SNIFF_LEN as u64) as usize;
    let head = file.read_exact_at(0, len, "file start").ok()?;
    let kind = match identify(&head) {
        Some(kind) => kind,
        None => NotPbf::Unknown(no_frame_start(file)?),
    };
    Some(Error::new(ErrorKind::NotPbf(kind)).in_file(file.path()))
}

/// Why the first bytes of `file` cannot be the first frame of a PBF file,
/// whatever follows them: a BlobHeader length over [`MAX_HEADER_LEN`] (text
/// and most other bytes: the length's first two bytes are not zero), a
/// whole BlobHeader that does not parse, or one whose type is neither
/// `OSMHeader` nor `OSMData`. `None` when they can, or when the file ends
/// before they tell (a PBF file cut short).
fn no_frame_start(file: &PbfFile) -> Option<String> {
    // A file shorter than the length prefix gives its smallest value.
    let have = file.size().min(4) as usize;
    let mut prefix = [0u8; 4];
    prefix[..have].copy_from_slice(&file.read_exact_at(0, have, "frame length").ok()?);
    let len = u32::from_be_bytes(prefix);
    if len > MAX_HEADER_LEN {
        let (give, of) = match have {
            4 => ("give", ""),
            _ => ("start", "at least "),
        };
        return Some(format!(
            "its first {have} bytes {give} a BlobHeader length of {of}{len} bytes, and a PBF \
             frame's is at most {MAX_HEADER_LEN}"
        ));
    }
    if have < 4 {
        return None;
    }
    let header = file.read_exact_at(4, len as usize, "BlobHeader").ok()?;
    match parse_blob_header(&header) {
        Err(e) => Some(format!("its first BlobHeader does not parse ({e})")),
        Ok((BlobType::Other(kind), ..)) => Some(format!(
            "its first BlobHeader's type is {kind:?}, not \"OSMHeader\" or \"OSMData\""
        )),
        Ok(_) => None,
    }
}

/// Read and decode the OSMHeader in frame `fh` of `file`, refusing one that
/// requires a feature not in [`UNDERSTOOD_FEATURES`] (the format says a
/// reader must).
pub fn read_header_frame(file: &PbfFile, fh: &FrameHeader) -> Result<Header> {
    let place = |e: Error| e.at(fh.offset).in_file(file.path());
    let header = decode_blob(&file.read_body(fh)?)
        .and_then(|raw| decode_header(&raw))
        .map_err(place)?;
    if let Some(f) = header.unknown_required_feature() {
        let msg = format!(
            "the OSMHeader requires the feature {f:?}, which this toolkit does not understand \
             (it understands {})",
            UNDERSTOOD_FEATURES.join(", ")
        );
        return Err(place(Error::new(ErrorKind::Unsupported(msg))));
    }
    Ok(header)
}

/// Encode a HeaderBlock (uncompressed).
pub fn encode_header(h: &Header) -> Vec<u8> {
    h.encode_to_vec()
}

/// The whole OSMHeader frame for `h`, its blob compressed with
/// `compression`: what a writer starts a file with.
pub fn encode_header_frame(h: &Header, compression: Compression) -> Result<Vec<u8>> {
    let blob = encode_blob(&encode_header(h), compression)?;
    encode_frame(&BlobType::OsmHeader, None, &blob)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_file_header` on a file of `bytes`: the error's kind and text.
    fn first_frame_error(bytes: &[u8], name: &str) -> (bool, String) {
        let path =
            std::env::temp_dir().join(format!("pbf-header-test-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).expect("write");
        let file = PbfFile::open(&path).expect("open");
        let err = read_file_header(&file, &mut file.headers()).expect_err(name);
        std::fs::remove_file(&path).expect("remove");
        (matches!(err.kind(), ErrorKind::NotPbf(_)), err.to_string())
    }

    #[test]
    fn a_file_whose_first_frame_cannot_be_pbf_is_not_pbf() {
        use crate::frame::encode_frame;
        let other = encode_frame(&BlobType::Other("Hello".into()), None, b"x").expect("frame");
        let cases: [(&[u8], &str, &str); 5] = [
            (
                b"hello world\n",
                "text",
                "BlobHeader length of 1751477356 bytes",
            ),
            (b"{\"a\": 1}\n", "json", "BlobHeader length of"),
            (b"\0\0\0\x03\xff\xff\xff rest", "unparsed", "does not parse"),
            (&other, "other-type", "type is \"Hello\""),
            (
                b"hi\n",
                "short-text",
                "first 3 bytes start a BlobHeader length of at least",
            ),
        ];
        for (bytes, name, says) in cases {
            let (not_pbf, msg) = first_frame_error(bytes, name);
            assert!(not_pbf, "{name}: {msg}");
            assert!(
                msg.contains("not a PBF file") && msg.contains(says),
                "{msg}"
            );
        }
    }

    #[test]
    fn a_pbf_file_cut_short_or_without_its_header_is_damaged_not_other() {
        use crate::frame::encode_frame;
        let header = encode_frame(&BlobType::OsmHeader, None, b"header").expect("frame");
        let data = encode_frame(&BlobType::OsmData, None, b"data").expect("frame");
        for (bytes, name) in [
            (&header[..header.len() - 2], "cut-in-blob"),
            (&header[..8], "cut-in-header"),
            (&header[..3], "cut-in-length"),
            (&data[..], "data-first"),
        ] {
            let (not_pbf, msg) = first_frame_error(bytes, name);
            assert!(!not_pbf, "{name}: {msg}");
        }
    }

    #[test]
    fn round_trip() {
        let h = Header {
            bbox: Some(BBox {
                left: -1,
                right: 2,
                top: 3,
                bottom: -4,
            }),
            required_features: vec!["OsmSchema-V0.6".into(), "DenseNodes".into()],
            optional_features: vec![SORT_FEATURE.into()],
            writingprogram: Some("pbf-sort".into()),
            source: None,
            replication_timestamp: Some(1_700_000_000),
            replication_sequence_number: Some(42),
            replication_base_url: Some("https://example.invalid/".into()),
        };
        let back = decode_header(&encode_header(&h)).expect("decode");
        assert_eq!(back, h);
        assert!(back.claims_sorted());
        assert!(!back.has_history());
    }
}
