//! The record types of both streams, as typed serde structs. Field names are
//! the wire format: change them only with a schema version bump.

use std::path::PathBuf;

use pbf_format::header::{BBox, Header};
use pbf_format::scan::Summary;
use pbf_format::{Key, Kind};
use serde::{Deserialize, Serialize};

use crate::ijson;

/// Schema name of the index stream.
pub const INDEX_SCHEMA: &str = "pbf-sort/index";
/// Schema name of the plan stream.
pub const PLAN_SCHEMA: &str = "pbf-sort/plan";
/// Major version of both schemas; readers refuse any other. Version 2 made
/// every number exact in an IEEE double (see [`crate::ijson`]): `mtime_ns`
/// became `mtime` and `mtime_nsec`, and ids beyond 2^53 are strings.
pub const SCHEMA_VERSION: u32 = 2;

/// An object kind as written in the streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KindName {
    /// node
    Node,
    /// way
    Way,
    /// relation
    Relation,
    /// changeset
    Changeset,
}

impl From<Kind> for KindName {
    fn from(k: Kind) -> KindName {
        match k {
            Kind::Node => KindName::Node,
            Kind::Way => KindName::Way,
            Kind::Relation => KindName::Relation,
            Kind::Changeset => KindName::Changeset,
        }
    }
}

impl From<KindName> for Kind {
    fn from(k: KindName) -> Kind {
        match k {
            KindName::Node => Kind::Node,
            KindName::Way => Kind::Way,
            KindName::Relation => Kind::Relation,
            KindName::Changeset => Kind::Changeset,
        }
    }
}

/// A sort key: `{"kind":"node","id":1,"version":2}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// Object kind.
    pub kind: KindName,
    /// Object id (a string beyond 2^53 in magnitude).
    #[serde(with = "ijson::int")]
    pub id: i64,
    /// Object version (0 when absent).
    pub version: u32,
}

impl From<Key> for KeyRecord {
    fn from(k: Key) -> KeyRecord {
        KeyRecord {
            kind: k.kind.into(),
            id: k.id,
            version: k.version,
        }
    }
}

impl From<KeyRecord> for Key {
    fn from(k: KeyRecord) -> Key {
        Key::new(k.kind.into(), k.id, k.version)
    }
}

/// Objects per kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Nodes.
    pub node: u64,
    /// Ways.
    pub way: u64,
    /// Relations.
    pub relation: u64,
    /// Changesets (omitted when zero).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub changeset: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Counts {
    /// From an array indexed by [`Kind::index`].
    pub fn from_array(a: [u64; 4]) -> Counts {
        Counts {
            node: a[0],
            way: a[1],
            relation: a[2],
            changeset: a[3],
        }
    }

    /// As an array indexed by [`Kind::index`].
    pub fn to_array(self) -> [u64; 4] {
        [self.node, self.way, self.relation, self.changeset]
    }

    /// Sum of all kinds.
    pub fn total(self) -> u64 {
        self.to_array().iter().sum()
    }

    /// Add another count, kind by kind.
    pub fn add(&mut self, o: Counts) {
        let (a, b) = (self.to_array(), o.to_array());
        *self = Counts::from_array([a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]);
    }
}

/// A bounding box in nanodegrees (each a string beyond 2^53 in magnitude,
/// which only a damaged header holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BBoxRecord {
    /// West.
    #[serde(with = "ijson::int")]
    pub left: i64,
    /// East.
    #[serde(with = "ijson::int")]
    pub right: i64,
    /// North.
    #[serde(with = "ijson::int")]
    pub top: i64,
    /// South.
    #[serde(with = "ijson::int")]
    pub bottom: i64,
}

/// The decoded OSMHeader of a file, or the header planned for the output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderRecord {
    /// Bounding box.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bbox: Option<BBoxRecord>,
    /// Required features.
    #[serde(default)]
    pub required_features: Vec<String>,
    /// Optional features.
    #[serde(default)]
    pub optional_features: Vec<String>,
    /// Writing program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writingprogram: Option<String>,
    /// Source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Replication timestamp (seconds since the epoch).
    #[serde(
        default,
        with = "ijson::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub replication_timestamp: Option<i64>,
    /// Replication sequence number.
    #[serde(
        default,
        with = "ijson::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub replication_sequence_number: Option<i64>,
    /// Replication base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_base_url: Option<String>,
}

impl From<Header> for HeaderRecord {
    fn from(h: Header) -> HeaderRecord {
        HeaderRecord {
            bbox: h.bbox.map(|b| BBoxRecord {
                left: b.left,
                right: b.right,
                top: b.top,
                bottom: b.bottom,
            }),
            required_features: h.required_features,
            optional_features: h.optional_features,
            writingprogram: h.writingprogram,
            source: h.source,
            replication_timestamp: h.replication_timestamp,
            replication_sequence_number: h.replication_sequence_number,
            replication_base_url: h.replication_base_url,
        }
    }
}

impl From<HeaderRecord> for Header {
    fn from(h: HeaderRecord) -> Header {
        Header {
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
            replication_timestamp: h.replication_timestamp,
            replication_sequence_number: h.replication_sequence_number,
            replication_base_url: h.replication_base_url,
        }
    }
}

/// Where a blob's keys came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeysFrom {
    /// Trusted indexdata in the BlobHeader (no decompression).
    Indexdata,
    /// A key scan of the decompressed block.
    Decoded,
}

/// One record of the index stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum IndexRecord {
    /// Opens a section: one input file.
    Source(SourceRecord),
    /// One OSMData blob.
    Blob(BlobRecord),
    /// Closes a section.
    End(IndexEnd),
}

/// The `source` record: which file, which version of it, and its header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    /// Always [`INDEX_SCHEMA`].
    pub schema: String,
    /// Schema major version.
    pub version: u32,
    /// Absolute path of the file.
    pub path: PathBuf,
    /// Size in bytes when indexed.
    pub size: u64,
    /// Modification time when indexed: seconds since the epoch.
    #[serde(with = "ijson::int")]
    pub mtime: i64,
    /// Modification time when indexed: nanoseconds past `mtime`.
    pub mtime_nsec: u32,
    /// The file's OSMHeader.
    pub header: HeaderRecord,
}

/// The `blob` record: one OSMData frame and the keys it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobRecord {
    /// Position among the file's data blobs, from 0.
    pub seq: u64,
    /// Offset of the frame (its length prefix).
    pub offset: u64,
    /// Length of the whole frame.
    pub length: u64,
    /// Blob compression: raw, zlib, zstd, lz4.
    pub compression: String,
    /// Declared uncompressed size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_size: Option<u64>,
    /// Smallest key.
    pub first: KeyRecord,
    /// Largest key.
    pub last: KeyRecord,
    /// Objects per kind.
    pub counts: Counts,
    /// Keys strictly increase inside the blob.
    pub sorted: bool,
    /// Keys never decrease inside the blob but some repeat (an object kept
    /// twice by a merge without dedupe). Written only when true; never true
    /// together with `sorted`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub repeats: bool,
    /// Keys decrease inside the blob, but only between versions of one
    /// object: (kind, id) never decreases, so `osmium fileinfo -e` calls the
    /// blob ordered. Written only when true; never true together with
    /// `sorted` or `repeats`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub versions_unsorted: bool,
    /// Where the keys came from.
    pub from: KeysFrom,
}

impl BlobRecord {
    /// The key summary of this blob.
    pub fn summary(&self) -> Summary {
        Summary {
            first: self.first.into(),
            last: self.last.into(),
            counts: self.counts.to_array(),
            sorted: self.sorted,
            repeats: self.repeats,
            versions_unsorted: self.versions_unsorted,
        }
    }
}

/// The `end` record of an index section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEnd {
    /// Number of `blob` records in the section.
    pub blobs: u64,
    /// Objects per kind, summed over the blobs.
    pub counts: Counts,
    /// OSMData blobs holding no objects (no `blob` record is written for them).
    #[serde(default)]
    pub empty_blobs: u64,
    /// Padding frames (empty OSMData blobs marked as padding, written by
    /// pbf-reflink and pbf-merge to align data to filesystem blocks); not
    /// counted in `empty_blobs`. Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub padding_blobs: u64,
    /// Blobs skipped: unknown blob types, and OSMHeader blobs after the first
    /// (as in files joined with `cat`).
    #[serde(default)]
    pub skipped_blobs: u64,
}

/// One record of the plan stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PlanRecord {
    /// Opens the plan.
    Plan(PlanHeader),
    /// Copy contiguous frames from a source.
    Copy(CopyOp),
    /// Decode and merge overlapping blobs.
    Merge(MergeOp),
    /// Closes the plan.
    End(PlanEnd),
}

/// A file the plan reads from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRef {
    /// Number used by ops.
    pub id: u32,
    /// Absolute path.
    pub path: PathBuf,
    /// Size in bytes when indexed.
    pub size: u64,
    /// Modification time when indexed: seconds since the epoch.
    #[serde(with = "ijson::int")]
    pub mtime: i64,
    /// Modification time when indexed: nanoseconds past `mtime`.
    pub mtime_nsec: u32,
    /// A spool file written by `pbf-merge` while the plan streams: it grows
    /// until the `end` record, so `size` and the mtime are not checked; every
    /// range is checked against the file's size when it is read instead.
    #[serde(default, skip_serializing_if = "is_false")]
    pub spool: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The `plan` record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanHeader {
    /// Always [`PLAN_SCHEMA`].
    pub schema: String,
    /// Schema major version.
    pub version: u32,
    /// The files ops read from.
    pub sources: Vec<SourceRef>,
    /// The OSMHeader to write to the output.
    pub header: HeaderRecord,
}

/// The keys of one frame inside a copy op, for writing indexdata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameKeys {
    /// Frame length.
    pub length: u64,
    /// Smallest key.
    pub first: KeyRecord,
    /// Largest key.
    pub last: KeyRecord,
    /// Objects per kind.
    pub counts: Counts,
}

/// A `copy` op: `length` bytes of whole frames at `offset` of `source`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyOp {
    /// Source id.
    pub source: u32,
    /// Offset of the first frame.
    pub offset: u64,
    /// Bytes to copy.
    pub length: u64,
    /// Number of frames.
    pub blobs: u64,
    /// Number of objects in the frames.
    #[serde(default)]
    pub elements: u64,
    /// Per-frame keys, in order; their lengths add up to `length`. Empty when
    /// the producer did not provide them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<FrameKeys>,
}

/// One blob to merge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeInput {
    /// Source id.
    pub source: u32,
    /// Frame offset.
    pub offset: u64,
    /// Frame length.
    pub length: u64,
    /// Smallest key.
    pub first: KeyRecord,
    /// Largest key.
    pub last: KeyRecord,
    /// Keys strictly increase inside the blob.
    pub sorted: bool,
    /// Number of objects.
    pub elements: u64,
}

/// A `merge` op: blobs whose key ranges overlap, to be decoded and merged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeOp {
    /// The blobs, ordered by first key.
    pub inputs: Vec<MergeInput>,
    /// Smallest key of the run.
    pub first: KeyRecord,
    /// Largest key of the run.
    pub last: KeyRecord,
    /// Objects in the run.
    pub elements: u64,
}

/// The `end` record of a plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEnd {
    /// Number of ops.
    pub ops: u64,
    /// Bytes in copy ops.
    pub copy_bytes: u64,
    /// Blobs in merge ops.
    pub merge_inputs: u64,
    /// Objects in the whole plan.
    pub elements: u64,
}

impl PlanEnd {
    /// Account for one copy op.
    pub fn add_copy(&mut self, op: &CopyOp) {
        self.ops += 1;
        self.copy_bytes += op.length;
        self.elements += op.elements;
    }

    /// Account for one merge op.
    pub fn add_merge(&mut self, op: &MergeOp) {
        self.ops += 1;
        self.merge_inputs += op.inputs.len() as u64;
        self.elements += op.elements;
    }
}
