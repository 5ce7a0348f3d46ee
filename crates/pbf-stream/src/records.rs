//! The record types of both streams, as typed serde structs. Field names are
//! the wire format: change them only with a schema version bump.

use std::path::PathBuf;

use pbf_format::compress::Codec;
use pbf_format::header::{BBox, Header};
use pbf_format::scan::{Summary, Ties};
use pbf_format::{Key, Kind};
use serde::{Deserialize, Serialize};

use crate::Counts;
use crate::ijson;

/// Schema name of the index stream.
pub const INDEX_SCHEMA: &str = "pbf-sort/index";
/// Schema name of the plan stream.
pub const PLAN_SCHEMA: &str = "pbf-sort/plan";
/// Major version of both schemas; readers refuse any other. Version 2 made
/// every number exact in an IEEE double (see [`crate::ijson`]): `mtime_ns`
/// became `mtime` and `mtime_nsec`, and ids beyond 2^53 are strings.
/// Version 3: copy ops carry their `first` and `last` keys (a copier
/// verifies the order from them), and both streams may carry `header`
/// records (an index stream for every OSMHeader after a file's first, a
/// plan stream for an output header that replaces an early plan record's).
pub const SCHEMA_VERSION: u32 = 3;

/// A sort key: `{"kind":"node","id":1,"version":2}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// Object kind (`pbf_format::Kind`'s serde: lower case).
    pub kind: Kind,
    /// Object id (a string beyond 2^53 in magnitude).
    #[serde(with = "ijson::int")]
    pub id: i64,
    /// Object version (0 when absent).
    pub version: u32,
}

impl From<Key> for KeyRecord {
    fn from(k: Key) -> KeyRecord {
        KeyRecord {
            kind: k.kind,
            id: k.id,
            version: k.version,
        }
    }
}

impl From<KeyRecord> for Key {
    fn from(k: KeyRecord) -> Key {
        Key::new(k.kind, k.id, k.version)
    }
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
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
    /// An OSMHeader after the file's first (files joined with `cat`): the
    /// blobs after it belong to a part with this header.
    Header(HeaderRecord),
    /// Closes a section.
    End(IndexEnd),
}

/// The `header` record of the index stream: a further OSMHeader of the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderRecord {
    /// Offset of the OSMHeader frame.
    pub offset: u64,
    /// The decoded OSMHeader.
    #[serde(with = "HeaderFields")]
    pub header: Header,
}

/// One version of a file: its path, size and times when it was indexed,
/// and its name as given. The index's `source` record and the plan's
/// sources carry it, and every stage that opens the file checks it
/// ([`crate::check_source`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// Size in bytes when indexed.
    pub size: u64,
    /// Modification time when indexed: seconds since the epoch.
    #[serde(with = "ijson::int")]
    pub mtime: i64,
    /// Modification time when indexed: nanoseconds past `mtime`.
    pub mtime_nsec: u32,
    /// Status change time when indexed: seconds since the epoch. Every
    /// write moves it, and no user can set it back (`touch -d` sets the
    /// mtime, and moves the ctime). Absent in older and hand-written
    /// streams: only size and mtime are compared then.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "ijson::opt_int"
    )]
    pub ctime: Option<i64>,
    /// Status change time when indexed: nanoseconds past `ctime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctime_nsec: Option<u32>,
    /// The file as named on pbf-index's command line (`-`: standard
    /// input), which messages name it by; absent: they name `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given: Option<PathBuf>,
}

/// The `source` record: which file, which version of it, and its header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    /// Always [`INDEX_SCHEMA`].
    pub schema: String,
    /// Schema major version.
    pub version: u32,
    /// The file and the version of it that was indexed.
    #[serde(flatten)]
    pub file: FileIdentity,
    /// The file's OSMHeader.
    #[serde(with = "HeaderFields")]
    pub header: Header,
    /// Keys read ahead: the smallest key of a data frame found near each of
    /// a few evenly spaced offsets, in offset order. A hint for watching
    /// the file's order before its blobs are read (`pbf-overlap
    /// --sources`); no output depends on it. Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
}

/// One of a source record's `samples`: `{"offset":O,"first":{key}}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Offset of the frame.
    pub offset: u64,
    /// Its smallest key, as a blob record's `first`.
    pub first: KeyRecord,
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
    /// Blob compression, by [`Codec::name`] (raw, zlib, zstd, lz4, ...);
    /// `None`, written `unknown`, where the Blob's data field is none of
    /// them.
    #[serde(with = "codec_name")]
    pub compression: Option<Codec>,
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
    /// Objects right after one of the same kind and id (another version,
    /// or the same again), counted where (kind, id) never decreases
    /// inside the blob. Written only when not 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicate_ids: u64,
    /// Some object has a negative id. Written only when true.
    #[serde(default, skip_serializing_if = "is_false")]
    pub negative_ids: bool,
    /// `{"first":S,"last":S}`: the blob's objects are in the merge's order
    /// of equal keys (timestamp in whole seconds, 0 when unset, never
    /// decreases between equal keys), and these are the tie seconds of its
    /// first and last object, against which a neighbouring blob's equal
    /// key is judged. Written for a blob with `repeats` in that order (the
    /// index reads the timestamps of such blobs alone); absent on every
    /// other blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ties: Option<Ties>,
    /// Where the keys came from.
    pub from: KeysFrom,
}

/// What the index knows of one OSMData blob besides where it sits: its
/// keys, where they came from, and how the blob is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobKeys {
    /// The key summary.
    pub summary: Summary,
    /// Where the keys came from.
    pub from: KeysFrom,
    /// The Blob's data field (`None`: none known).
    pub compression: Option<Codec>,
    /// Declared uncompressed size.
    pub raw_size: Option<u64>,
    /// The ends of the blob in the merge's order of equal keys, where the
    /// index read its timestamps and found it in that order.
    pub ties: Option<Ties>,
}

impl BlobRecord {
    /// The record of the `seq`th data blob, a frame of `length` bytes at
    /// `offset`, holding `keys`.
    pub fn new(seq: u64, offset: u64, length: u64, keys: &BlobKeys) -> BlobRecord {
        let s = &keys.summary;
        BlobRecord {
            seq,
            offset,
            length,
            compression: keys.compression,
            raw_size: keys.raw_size,
            first: s.first.into(),
            last: s.last.into(),
            counts: Counts::from_array(s.counts),
            sorted: s.sorted,
            repeats: s.repeats,
            versions_unsorted: s.versions_unsorted,
            duplicate_ids: s.duplicate_ids,
            negative_ids: s.negative_ids,
            ties: keys.ties,
            from: keys.from,
        }
    }

    /// The key summary of this blob.
    pub fn summary(&self) -> Summary {
        Summary {
            first: self.first.into(),
            last: self.last.into(),
            counts: self.counts.to_array(),
            sorted: self.sorted,
            repeats: self.repeats,
            versions_unsorted: self.versions_unsorted,
            duplicate_ids: self.duplicate_ids,
            negative_ids: self.negative_ids,
        }
    }
}

/// A blob record's `compression`: a [`Codec`] by name, `None` as
/// `unknown`. A name this reader does not know (a codec added later) reads
/// as `None`, as `unknown` does: no stage but the one that decompresses
/// depends on it, and that one reads the Blob's own field.
mod codec_name {
    use pbf_format::compress::Codec;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(c: &Option<Codec>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(super::codec_name(*c))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Codec>, D::Error> {
        let name = std::borrow::Cow::<str>::deserialize(d)?;
        Ok(Codec::from_name(&name))
    }
}

/// The name a blob record writes for `compression` (`unknown` for none).
pub fn codec_name(compression: Option<Codec>) -> &'static str {
    compression.map_or("unknown", Codec::name)
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
    /// Blobs of unknown types, skipped. (An OSMHeader after the first gets a
    /// `header` record instead.)
    #[serde(default)]
    pub skipped_blobs: u64,
    /// Blobs holding a negative id. Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub negative_id_blobs: u64,
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
    /// The output header, replacing the one of an early plan record; only
    /// before the first op.
    Header(OutputHeader),
    /// After an early plan record: the input turned out not to be in file
    /// order, so a copy ahead on that guess is wasted; only before the
    /// first op.
    Unsorted(Unsorted),
    /// After an early plan record: how far the last input has been read
    /// sorted and in file order, so far; only before the first op.
    Sorted(SortedThrough),
    /// Closes the plan.
    End(PlanEnd),
}

/// The plan stream's `unsorted` record: `{"type":"unsorted"}`. A planner
/// that wrote its plan record early (the first blobs of the last input
/// were in order) writes it as soon as a blob says otherwise, long before
/// the ops, so a copier copying that input ahead stops and drops its guess
/// then instead of when the first op comes (after a merge stage finishes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsorted {}

/// The plan stream's `sorted` record:
/// `{"type":"sorted","source":0,"through":OFFSET}`. A planner that wrote its
/// plan record early writes it as it reads the last input on in order: every
/// frame of `source` that ends at or before `through` was read, and they are
/// sorted and in file order. A copier copies that input ahead only as far as
/// these records say, so a guess proved wrong costs at most what was read
/// in order before the first blob out of it, never a copy of the whole file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortedThrough {
    /// The source read in order (the plan's last ordinary source).
    pub source: u32,
    /// Byte offset in it up to which its frames were read in order.
    pub through: u64,
}

/// The plan stream's `header` record. A plan record written early (before
/// every blob was read) may carry a header that a later OSMHeader of an
/// input changes; the planner then writes the whole new header here, before
/// any op, and a copier that wrote or copied ahead starts over behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputHeader {
    /// The OSMHeader to write to the output.
    #[serde(with = "HeaderFields")]
    pub header: Header,
    /// The plan's [`PlanHeader::copy_bytes`], once planned after an early
    /// plan record (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_bytes: Option<u64>,
}

/// A file the plan reads from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRef {
    /// Number used by ops.
    pub id: u32,
    /// The file and the version of it that was indexed.
    #[serde(flatten)]
    pub file: FileIdentity,
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
    #[serde(with = "HeaderFields")]
    pub header: Header,
    /// Written before the blobs were all read (`pbf-overlap --sources`):
    /// the ops are not known yet, and a copier may start copying on a guess
    /// while they are planned. False (absent) when the plan was made first:
    /// its ops follow at once, or as a merge stage finishes them, and a
    /// guess would only compete with that stage.
    #[serde(default, skip_serializing_if = "is_false")]
    pub early: bool,
    /// Bytes of the ordinary sources (not spools) that the copy ops copy,
    /// as planned: an output holds at least these and its header, so a
    /// copier knows before it writes whether its filesystem has room.
    /// Absent when the record went out before planning (`early`: a
    /// `header` record brings it then) and in older streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_bytes: Option<u64>,
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
    /// The blob record's `duplicate_ids`. Written only when not 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicate_ids: u64,
    /// The blob record's `negative_ids`. Written only when true.
    #[serde(default, skip_serializing_if = "is_false")]
    pub negative_ids: bool,
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
    /// Smallest key in the frames.
    pub first: KeyRecord,
    /// Largest key in the frames.
    pub last: KeyRecord,
    /// Number of objects in the frames.
    #[serde(default)]
    pub elements: u64,
    /// Objects in the frames right after one of the same kind and id
    /// (their `duplicate_ids`, and where one frame meets the next).
    /// Written only when not 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicate_ids: u64,
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
    /// The blobs, in file order (source id, then offset) as pbf-overlap
    /// writes them; a reader takes them in any order.
    pub inputs: Vec<MergeInput>,
    /// Smallest key of the op's blobs.
    pub first: KeyRecord,
    /// Largest key of the op's blobs.
    pub last: KeyRecord,
    /// Objects in the op's blobs.
    pub elements: u64,
}

impl MergeOp {
    /// Indexes of the inputs in file order (source id, then offset), as
    /// pbf-overlap writes them: sorted as one array of keys, since sorting
    /// indexes by keys read from the inputs was a cache miss per
    /// comparison on an op of millions. At most `u32::MAX` inputs are
    /// ordered.
    pub fn file_order(&self) -> Vec<u32> {
        let mut keyed: Vec<(u32, u64, u32)> = (0u32..)
            .zip(&self.inputs)
            .map(|(i, input)| (input.source, input.offset, i))
            .collect();
        keyed.sort_unstable();
        keyed.into_iter().map(|k| k.2).collect()
    }
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
        self.add_merge_of(op.inputs.len() as u64, op.elements);
    }

    /// Account for one merge op of `inputs` blobs holding `elements`
    /// objects (written with `Writer::write_merge`).
    pub fn add_merge_of(&mut self, inputs: u64, elements: u64) {
        self.ops += 1;
        self.merge_inputs += inputs;
        self.elements += elements;
    }
}

/// The OSMHeader as the header records write it: serde's view of
/// [`Header`], whose derive builds a `Header` from every field listed here,
/// so a field added to it and not here fails to compile. Every field may
/// be absent (`Header::default()`'s then). Integers beyond 2^53 (only a
/// damaged header holds them) are strings ([`ijson`]).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Header", default = "Header::default")]
struct HeaderFields {
    #[serde(skip_serializing_if = "Option::is_none", with = "opt_bbox")]
    bbox: Option<BBox>,
    required_features: Vec<String>,
    optional_features: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    writingprogram: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", with = "ijson::opt_int")]
    replication_timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none", with = "ijson::opt_int")]
    replication_sequence_number: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    replication_base_url: Option<String>,
}

/// The bounding box of [`HeaderFields`], in nanodegrees.
#[derive(Serialize, Deserialize)]
#[serde(remote = "BBox")]
struct BBoxFields {
    #[serde(with = "ijson::int")]
    left: i64,
    #[serde(with = "ijson::int")]
    right: i64,
    #[serde(with = "ijson::int")]
    top: i64,
    #[serde(with = "ijson::int")]
    bottom: i64,
}

/// `Option<BBox>` through [`BBoxFields`].
mod opt_bbox {
    use super::{BBox, BBoxFields};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Wrap(#[serde(with = "BBoxFields")] BBox);

    pub fn serialize<S: Serializer>(b: &Option<BBox>, s: S) -> Result<S::Ok, S::Error> {
        b.map(Wrap).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BBox>, D::Error> {
        Ok(Option::<Wrap>::deserialize(d)?.map(|b| b.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_record_is_the_osmheader_field_by_field() {
        let far = (1 << 53) + 1;
        let header = Header {
            bbox: Some(BBox {
                left: -far,
                right: 2,
                top: 3,
                bottom: -4,
            }),
            required_features: vec!["DenseNodes".into()],
            replication_sequence_number: Some(far),
            ..Header::default()
        };
        let record = OutputHeader {
            header,
            copy_bytes: None,
        };
        let line = serde_json::to_string(&record).expect("serialize");
        assert_eq!(
            line,
            r#"{"header":{"bbox":{"left":"-9007199254740993","right":2,"top":3,"bottom":-4},"required_features":["DenseNodes"],"optional_features":[],"replication_sequence_number":"9007199254740993"}}"#
        );
        let back: OutputHeader = serde_json::from_str(&line).expect("deserialize");
        assert_eq!(back, record);
        let bare: OutputHeader = serde_json::from_str(r#"{"header":{}}"#).expect("defaults");
        assert_eq!(bare.header, Header::default());
    }
}
