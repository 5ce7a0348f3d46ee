//! The OSMHeader block: bounding box, features, writing program, source and
//! replication fields, decoded to plain values and encoded back, and read
//! from the start of a file (one rule for every tool: the first blob must be
//! the OSMHeader).

use prost::Message;

use crate::compress::decode_blob;
use crate::error::{Error, Result};
use crate::frame::{BlobType, FrameHeader, PbfFile};
use crate::proto;

/// Feature every output declares: our sort order.
pub const SORT_FEATURE: &str = "Sort.Type_then_ID";

/// A bounding box in nanodegrees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BBox {
    /// West edge.
    pub left: i64,
    /// East edge.
    pub right: i64,
    /// North edge.
    pub top: i64,
    /// South edge.
    pub bottom: i64,
}

/// The decoded OSMHeader.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Bounding box, if any.
    pub bbox: Option<BBox>,
    /// Features a reader must support.
    pub required_features: Vec<String>,
    /// Features a reader may use.
    pub optional_features: Vec<String>,
    /// The program that wrote the file.
    pub writingprogram: Option<String>,
    /// Data source.
    pub source: Option<String>,
    /// Replication timestamp, seconds since the epoch.
    pub replication_timestamp: Option<i64>,
    /// Replication sequence number.
    pub replication_sequence_number: Option<i64>,
    /// Replication base URL.
    pub replication_base_url: Option<String>,
}

impl Header {
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
    let h = proto::HeaderBlock::decode(data)?;
    Ok(Header {
        bbox: h.bbox.map(|b| BBox {
            left: b.left,
            right: b.right,
            top: b.top,
            bottom: b.bottom,
        }),
        required_features: h.required_features,
        optional_features: h.optional_features,
        writingprogram: h.writingprogram,
        source: h.source,
        replication_timestamp: h.osmosis_replication_timestamp,
        replication_sequence_number: h.osmosis_replication_sequence_number,
        replication_base_url: h.osmosis_replication_base_url,
    })
}

/// Read a file's OSMHeader from the first of its `frames` (a walk of `file`
/// from offset 0): that frame and the decoded header. An empty file, or one
/// whose first blob is not an OSMHeader, is not a PBF file.
pub fn read_file_header(
    file: &PbfFile,
    frames: &mut impl Iterator<Item = Result<FrameHeader>>,
) -> Result<(FrameHeader, Header)> {
    let path = file.path();
    let first = match frames.next() {
        Some(r) => r?,
        None => return Err(Error::malformed("empty file, not a PBF file").in_file(path)),
    };
    if first.blob_type != BlobType::OsmHeader {
        let msg = format!(
            "first blob is {:?}, expected OSMHeader",
            first.blob_type.as_str()
        );
        return Err(Error::malformed(msg).at(0).in_file(path));
    }
    let header = decode_blob(&file.read_body(&first)?)
        .and_then(|raw| decode_header(&raw))
        .map_err(|e| e.at(0).in_file(path))?;
    Ok((first, header))
}

/// Encode a HeaderBlock (uncompressed).
pub fn encode_header(h: &Header) -> Vec<u8> {
    proto::HeaderBlock {
        bbox: h.bbox.map(|b| proto::HeaderBBox {
            left: b.left,
            right: b.right,
            top: b.top,
            bottom: b.bottom,
        }),
        required_features: h.required_features.clone(),
        optional_features: h.optional_features.clone(),
        writingprogram: h.writingprogram.clone(),
        source: h.source.clone(),
        osmosis_replication_timestamp: h.replication_timestamp,
        osmosis_replication_sequence_number: h.replication_sequence_number,
        osmosis_replication_base_url: h.replication_base_url.clone(),
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

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
