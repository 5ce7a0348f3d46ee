//! The inputs of a merge op: the plan's sources opened and identity-checked,
//! each input frame validated against the plan before anything is merged,
//! and the loading of one blob into a sorted [`Block`].
//!
//! Equal keys are ordered by timestamp, then in input order, so every
//! element carries a rank ([`Order::rank`]): its timestamp and its blob's
//! position in (source id, offset) order. Elements of one blob with equal
//! ranks keep their stored order, so the result does not depend on how
//! blobs were grouped into chains or spilled.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use pbf_format::block::{self, Element};
use pbf_format::compress::decode_blob;
use pbf_format::frame::{BlobType, FrameHeader, PbfFile};
use pbf_format::scan::Summary;
use pbf_format::{Key, compress, indexdata};
use pbf_stream::{MergeOp, SourceRef, check_source};

use crate::error::{Error, ErrorKind, Result};
use crate::sorted::{Block, Order};

/// The plan's source files, opened once and shared by the decoding threads.
#[derive(Debug, Default)]
pub struct Sources {
    files: HashMap<u32, Arc<PbfFile>>,
}

impl Sources {
    /// Open every source of a plan. Ordinary sources must still have the size
    /// and mtime the plan recorded; spool sources (still growing) are opened
    /// as they are, and every frame read from them is checked against the
    /// file's size at that moment.
    pub fn open(sources: &[SourceRef]) -> Result<Sources> {
        let mut files = HashMap::new();
        for src in sources {
            if !src.spool {
                check_source(src)?;
            }
            let file = PbfFile::open(&src.path)?;
            if !src.spool && file.size() != src.size {
                return Err(Error::plan(
                    &src.path,
                    0,
                    format!("size changed to {} bytes while opening", file.size()),
                ));
            }
            files.insert(src.id, Arc::new(file));
        }
        Ok(Sources { files })
    }

    fn get(&self, id: u32) -> Option<&Arc<PbfFile>> {
        self.files.get(&id)
    }
}

/// One validated input frame of a merge op.
#[derive(Debug)]
pub(crate) struct InputBlob {
    pub file: Arc<PbfFile>,
    pub frame: FrameHeader,
    /// Smallest key according to the plan.
    pub first: Key,
    /// Largest key according to the plan.
    pub last: Key,
    /// Element count according to the plan.
    pub elements: u64,
    /// The blob's position in (source id, offset) order.
    pub position: u32,
    /// Estimated memory of the decoded blob, in [`Element::approx_size`] terms.
    pub estimate: u64,
    /// Told the frame's length once the blob is decoded.
    pub on_load: LoadProgress,
}

/// A callback told the frame length of every input blob once it is decoded
/// (on a decoding thread), so a progress bar moves during a merge op.
#[derive(Clone, Default)]
pub struct LoadProgress(Option<Arc<dyn Fn(u64) + Send + Sync>>);

impl LoadProgress {
    /// Call `f` with each decoded input frame's length.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> LoadProgress {
        LoadProgress(Some(Arc::new(f)))
    }

    fn loaded(&self, bytes: u64) {
        if let Some(f) = &self.0 {
            f(bytes);
        }
    }
}

impl std::fmt::Debug for LoadProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "LoadProgress(on)"
        } else {
            "LoadProgress(off)"
        })
    }
}

/// Read and check the frame headers of a merge op's inputs. Input
/// positions follow (source id, offset) order.
pub(crate) fn inputs(
    op: &MergeOp,
    sources: &Sources,
    on_load: &LoadProgress,
) -> Result<Vec<Arc<InputBlob>>> {
    if u32::try_from(op.inputs.len()).is_err() {
        let m = format!("{} inputs in one merge op", op.inputs.len());
        return Err(Error::plan(Path::new("<plan>"), 0, m));
    }
    let mut order: Vec<usize> = (0..op.inputs.len()).collect();
    order.sort_by_key(|&i| (op.inputs[i].source, op.inputs[i].offset));
    let mut position_of = vec![0u32; op.inputs.len()];
    for (position, &i) in (0u32..).zip(&order) {
        position_of[i] = position;
    }
    let mut out = Vec::with_capacity(op.inputs.len());
    for (i, input) in op.inputs.iter().enumerate() {
        let file = sources.get(input.source).ok_or_else(|| {
            Error::plan(
                Path::new("<plan>"),
                input.offset,
                format!("source {} is not open", input.source),
            )
        })?;
        let frame = file.frame_header_at(input.offset)?;
        let place = |m: String| Error::plan(file.path(), input.offset, m);
        if frame.frame_len() != input.length {
            return Err(place(format!(
                "the plan says the frame is {} bytes, the file says {}",
                input.length,
                frame.frame_len()
            )));
        }
        if frame.blob_type != BlobType::OsmData {
            return Err(place(format!(
                "frame type is {:?}, not OSMData",
                frame.blob_type.as_str()
            )));
        }
        if input.elements > u64::from(u32::MAX) {
            return Err(place(format!("{} elements in one blob", input.elements)));
        }
        let (first, last) = (Key::from(input.first), Key::from(input.last));
        if first > last {
            return Err(place("first key after last key".into()));
        }
        let estimate = estimate(&frame, input.elements);
        out.push(Arc::new(InputBlob {
            file: Arc::clone(file),
            frame,
            first,
            last,
            elements: input.elements,
            position: position_of[i],
            estimate,
            on_load: on_load.clone(),
        }));
    }
    Ok(out)
}

/// Memory estimate of a decoded blob: the elements themselves plus their heap
/// data, taken as three times the uncompressed block (ids and refs widen to
/// 8 bytes, tags to fat pointers). When the blob header does not tell the
/// uncompressed size, a compression ratio of 4 is assumed.
fn estimate(frame: &FrameHeader, elements: u64) -> u64 {
    let raw = frame.raw_size.unwrap_or(match frame.compression {
        Some(compress::Codec::Raw) => u64::from(frame.datasize),
        _ => 4 * u64::from(frame.datasize),
    });
    let raw = raw.min(compress::MAX_RAW_SIZE as u64);
    elements * (size_of::<Element>() + size_of::<Order>()) as u64 + 3 * raw
}

impl InputBlob {
    /// Read, decompress and decode the blob, check it against the plan, and
    /// return its elements sorted by (key, rank).
    pub fn load(&self) -> Result<Block> {
        let body = self.file.read_body(&self.frame)?;
        let place = |e: pbf_format::Error| e.at(self.frame.offset).in_file(self.file.path());
        let raw = decode_blob(&body).map_err(place)?;
        drop(body);
        let columns = block::decode_columns(raw).map_err(place)?;
        let block = Block::from_columns(columns, self.position);
        self.check(&block)?;
        self.on_load.loaded(self.frame.frame_len());
        Ok(block)
    }

    /// The decoded elements must be as many as planned and inside the
    /// planned key range, or the chains built from the plan would be wrong.
    fn check(&self, block: &Block) -> Result<()> {
        let elements = block.len() as u64;
        if elements != self.elements {
            let said = format!("{} elements", self.elements);
            return Err(self.disagrees(&said, &format!("{elements}"), |s| {
                s.elements() == self.elements
            }));
        }
        // The block is sorted: its first and last keys are its extremes.
        let (Some(min), Some(max)) = (block.rest().first(), block.rest().last()) else {
            return Ok(());
        };
        if min.key < self.first.packed() || max.key > self.last.packed() {
            let holds = format!(
                "{}..{}",
                Key::from_packed(min.key),
                Key::from_packed(max.key)
            );
            let said = format!("{}..{}", self.first, self.last);
            return Err(self.disagrees(&said, &holds, |s| {
                (s.first, s.last) == (self.first, self.last)
            }));
        }
        Ok(())
    }

    /// The error for a blob that holds `holds` where the plan said `said`:
    /// the blob's indexdata is named as the culprit when it makes the same
    /// claim (`claims_it`), else the plan.
    fn disagrees(&self, said: &str, holds: &str, claims_it: impl Fn(&Summary) -> bool) -> Error {
        let path = self.file.path();
        let offset = self.frame.offset;
        if indexdata_of(&self.frame).is_some_and(|s| claims_it(&s)) {
            return Error::new(ErrorKind::Indexdata {
                path: path.to_path_buf(),
                offset,
                message: format!("claims {said}, the blob holds {holds}"),
            });
        }
        Error::plan(
            path,
            offset,
            format!("the plan says {said}, the blob holds {holds}"),
        )
    }
}

/// What the frame's indexdata (ours or pbfhogg's) says of the blob, if it
/// carries any that decodes.
fn indexdata_of(frame: &FrameHeader) -> Option<Summary> {
    let bytes = frame.indexdata.as_deref()?;
    let ours = frame
        .blob_start
        .and_then(|start| indexdata::decode(bytes, &start));
    ours.or_else(|| indexdata::decode_pbfhogg(bytes))
}
