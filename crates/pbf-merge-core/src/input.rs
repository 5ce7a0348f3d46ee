//! The inputs of a merge op: the files of its sources (a plan's
//! [`SourceFiles`]), each input frame validated against the plan before anything is merged,
//! and the loading of blobs into sorted [`Block`]s: one blob alone, or many
//! small ones gathered into one block (a load), read from the file in large
//! stretches and decoded on the pool.
//!
//! Equal keys are ordered by timestamp, then in input order, so every
//! element carries a rank ([`Order::rank`]): its timestamp and its blob's
//! position in (source id, offset) order. Elements of one blob with equal
//! ranks keep their stored order, so the result does not depend on how
//! blobs were grouped into chains, loads or spilled runs.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use pbf_format::block::{self, Columns, Decoder, Object};
use pbf_format::compress::with_decoded;
use pbf_format::frame::{BlobType, FrameHeader, PbfFile};
use pbf_format::scan::Summary;
use pbf_format::{Key, compress, indexdata};
use pbf_stream::{MergeInput, MergeOp, SourceFiles};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::graph::{self, Clock, Span};
use crate::progress::{self, Progress};
use crate::sorted::{Block, Order};

/// Parts a load of many small blobs is decoded in, at least,
/// whatever the number of threads.
const DECODE_PARTS: usize = 32;

/// The entry of every input blob is held while its op is merged, and
/// counted against the budget.
const _: () = assert!(size_of::<InputBlob>() == 64);

/// The checked input blobs of one merge op, shared by its loaders.
#[derive(Debug)]
pub(crate) struct Inputs {
    /// The op's source files; [`InputBlob::file`] indexes them.
    files: Vec<Arc<PbfFile>>,
    /// The blobs in (source id, offset) order: blob `i` has position `i`.
    pub blobs: Vec<InputBlob>,
    progress: Progress,
}

/// One validated input frame of a merge op: 64 bytes, kept for every blob
/// of an op while it is merged (and counted against the budget).
#[derive(Clone, Copy, Debug)]
pub(crate) struct InputBlob {
    /// Smallest key according to the plan, packed ([`InputBlob::first`]),
    /// in two halves: a `u128` would align the entry to 16 bytes.
    first: [u64; 2],
    /// Largest key according to the plan, likewise.
    last: [u64; 2],
    /// Offset of the frame.
    offset: u64,
    header_len: u32,
    datasize: u32,
    /// Element count according to the plan.
    pub elements: u32,
    /// The blob's position in (source id, offset) order.
    pub position: u32,
    /// Decoded memory estimate ([`estimate`]), at most `u32::MAX`.
    estimate: u32,
    /// Index into [`Inputs::files`].
    file: u32,
}

/// Frames whose headers or bodies are read in one stretch: at most this many
/// bytes, with gaps of at most [`READ_GAP`] between frames.
pub(crate) const READ_STRETCH: u64 = 4 << 20;

/// The largest gap between two frames read in one stretch.
const READ_GAP: u64 = 64 << 10;

/// Bytes of a frame's start read to check its header (as
/// [`PbfFile::frame_header_at`] reads).
const PROBE: u64 = 256;

/// The plan indexes of a merge op's inputs in (source id, offset) order:
/// the inputs' positions.
pub(crate) fn file_order(op: &MergeOp) -> Result<Vec<u32>> {
    if u32::try_from(op.inputs.len()).is_err() {
        let m = format!("{} inputs in one merge op", op.inputs.len());
        return Err(Error::plan(Path::new("<plan>"), 0, m));
    }
    Ok(op.file_order())
}

/// The source files an op's inputs lie in, each with its index in
/// [`Inputs::files`], numbered in file order.
pub(crate) struct OpFiles {
    files: Vec<Arc<PbfFile>>,
    index: HashMap<u32, u32>,
}

impl OpFiles {
    /// The files of the inputs `order` lists (file order, so the inputs of
    /// one source follow each other).
    pub fn of(op: &MergeOp, order: &[u32], sources: &SourceFiles) -> Result<OpFiles> {
        let mut files = OpFiles {
            files: Vec::new(),
            index: HashMap::new(),
        };
        let source = |i: &u32| op.inputs[*i as usize].source;
        for run in order.chunk_by(|a, b| source(a) == source(b)) {
            let input = &op.inputs[run[0] as usize];
            let file = sources.source(input.source)?.file()?;
            files.index.insert(input.source, files.files.len() as u32);
            files.files.push(Arc::clone(file));
        }
        Ok(files)
    }

    /// Read and check the frame headers of the inputs `order` lists (a
    /// stretch of [`file_order`], the first of which has position
    /// `position`): headers of frames close together are read in one
    /// stretch.
    pub fn read(&self, op: &MergeOp, order: &[u32], position: u32) -> Result<Vec<InputBlob>> {
        let mut blobs = Vec::with_capacity(order.len());
        let mut at = 0;
        while at < order.len() {
            let stretch = header_stretch(op, &order[at..]);
            let first = &op.inputs[order[at] as usize];
            // `of` refused an op naming a source that is not open.
            let index = self.index.get(&first.source).copied().ok_or_else(|| {
                let m = format!("source {} was not looked up for this op", first.source);
                Error::Internal(m)
            })?;
            let file = &self.files[index as usize];
            // From the first frame to the last one's probe, or as much of
            // that as the file has.
            let last = &op.inputs[order[at + stretch.len() - 1] as usize];
            let to = last.offset.saturating_add(PROBE);
            let len = to.min(file.size()).saturating_sub(first.offset) as usize;
            let bytes = match stretch.len() {
                1 => Vec::new(),
                _ => file.read_exact_at(first.offset, len, "frames")?,
            };
            for (position, &i) in (position + at as u32..).zip(stretch) {
                let input = &op.inputs[i as usize];
                let from = (input.offset - first.offset) as usize;
                let frame = file
                    .frames()
                    .frame_header_in(input.offset, bytes.get(from..).unwrap_or_default())?;
                blobs.push(checked(file, &frame, input, position, index)?);
            }
            at += stretch.len();
        }
        Ok(blobs)
    }

    /// The op's inputs: `blobs`, in position order.
    pub fn inputs(self, blobs: Vec<InputBlob>, progress: &Progress) -> Inputs {
        Inputs {
            files: self.files,
            blobs,
            progress: progress.clone(),
        }
    }
}

/// The inputs (in position order) whose headers are read in one stretch with
/// the first: same source, each close to the one before, all within
/// [`READ_STRETCH`].
fn header_stretch<'a>(op: &MergeOp, order: &'a [u32]) -> &'a [u32] {
    let input = |i: u32| &op.inputs[i as usize];
    stretch(order, |first, prev, next| {
        let (first, prev, next) = (input(first), input(prev), input(next));
        next.source == first.source
            && next.offset.saturating_sub(prev.offset) <= READ_GAP
            && next.offset.saturating_add(PROBE) - first.offset <= READ_STRETCH
    })
}

/// The longest start of `items` (at least one) in which each item is
/// `close(first, previous, item)`.
fn stretch(items: &[u32], close: impl Fn(u32, u32, u32) -> bool) -> &[u32] {
    let mut n = 1;
    while n < items.len() && close(items[0], items[n - 1], items[n]) {
        n += 1;
    }
    &items[..n.min(items.len())]
}

/// An input checked against its frame header.
fn checked(
    file: &PbfFile,
    frame: &FrameHeader,
    input: &MergeInput,
    position: u32,
    index: u32,
) -> Result<InputBlob> {
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
    let Ok(elements) = u32::try_from(input.elements) else {
        return Err(place(format!("{} elements in one blob", input.elements)));
    };
    let (first, last) = (Key::from(input.first), Key::from(input.last));
    if first > last {
        return Err(place("first key after last key".into()));
    }
    let estimate = estimate(frame, input.elements);
    Ok(InputBlob {
        first: halves(first.packed()),
        last: halves(last.packed()),
        offset: frame.offset,
        header_len: frame.header_len,
        datasize: frame.datasize,
        elements,
        position,
        estimate: u32::try_from(estimate).unwrap_or(u32::MAX),
        file: index,
    })
}

/// Decoded memory of one object besides its tags, refs, members and
/// strings: its `Object` in the columns and its order entry.
pub(crate) const OBJECT_BYTES: u64 = (size_of::<Object>() + size_of::<Order>()) as u64;

/// Memory estimate of a decoded blob: an `Object` and an order entry per
/// object, and three times the uncompressed block (a copy of its string
/// table, the table's entries, tags, way refs and members; the columns
/// keep the string table's bytes, not the whole block, so this errs on the
/// large side).
/// When the blob header does not tell the uncompressed size, a compression
/// ratio of 4 is assumed.
fn estimate(frame: &FrameHeader, elements: u64) -> u64 {
    let raw = frame.raw_size.unwrap_or(match frame.compression {
        Some(compress::Codec::Raw) => u64::from(frame.datasize),
        _ => 4 * u64::from(frame.datasize),
    });
    let raw = raw.min(compress::MAX_RAW_SIZE as u64);
    elements * OBJECT_BYTES + 3 * raw
}

/// A packed key in two halves, high first.
fn halves(key: u128) -> [u64; 2] {
    [(key >> 64) as u64, key as u64]
}

impl InputBlob {
    /// Smallest key according to the plan, packed.
    pub fn first(&self) -> u128 {
        (u128::from(self.first[0]) << 64) | u128::from(self.first[1])
    }

    /// Largest key according to the plan, packed.
    pub fn last(&self) -> u128 {
        (u128::from(self.last[0]) << 64) | u128::from(self.last[1])
    }

    /// Estimated memory of the blob decoded.
    pub fn estimate(&self) -> u64 {
        u64::from(self.estimate)
    }

    fn frame_len(&self) -> u64 {
        4 + u64::from(self.header_len) + u64::from(self.datasize)
    }

    fn body_offset(&self) -> u64 {
        self.offset + 4 + u64::from(self.header_len)
    }
}

/// Blobs to load into one block, given as indexes into [`Inputs::blobs`].
pub(crate) type Load = Vec<u32>;

impl Inputs {
    /// The input bytes told to the progress as the op's elements are
    /// merged ([`progress::Meter`]).
    pub fn merged_bytes(&self) -> u64 {
        let frames = self.blobs.iter().map(InputBlob::frame_len);
        frames.map(progress::second_half).sum()
    }

    /// Read, decompress and decode the blobs of a load, check each against
    /// the plan, and return their elements sorted by (key, rank). A load of
    /// several blobs is read in stretches of frames close together, decoded on
    /// the pool, and gathered into one block.
    pub fn load(&self, load: &[u32]) -> Result<Block> {
        if let [one] = load {
            return self.load_one(&self.blobs[*one as usize]);
        }
        // The plan's counts, checked as each blob is decoded; a load of
        // several blobs holds at most max(SMALL, Budget::batch) estimated
        // bytes, 120 of them an object.
        let mut parts: Vec<Columns> = Vec::new();
        let mut at = 0;
        // Reading and gathering on this thread, runs decoded side by side.
        let mut clock = Clock::start();
        let mut span = Span::default();
        while at < load.len() {
            let stretch = self.body_stretch(&load[at..]);
            at += stretch.len();
            let first = &self.blobs[stretch[0] as usize];
            let last = &self.blobs[stretch[stretch.len() - 1] as usize];
            let bytes = self.files[first.file as usize]
                .read_exact_at(
                    first.offset,
                    (last.offset + last.frame_len() - first.offset) as usize,
                    "frames",
                )
                .map_err(|e| e.at(first.offset))?;
            span = span.then(Span::task(clock.elapsed()));
            // Parts of the blobs decoded each into columns of its own on the
            // pool, a few per thread and at least DECODE_PARTS, then
            // appended in order.
            let count = (4 * rayon::current_num_threads()).max(DECODE_PARTS);
            let part = stretch.len().div_ceil(count);
            let decoded: Vec<(Result<Columns>, u64)> = stretch
                .par_chunks(part)
                .map(|part| {
                    let clock = Clock::start();
                    (
                        self.decode_part(part, &bytes, first.offset),
                        clock.elapsed(),
                    )
                })
                .collect();
            clock = Clock::start();
            let tasks = decoded.iter().map(|d| Span::task(d.1));
            span = span.then(tasks.fold(Span::default(), Span::beside));
            for (columns, _) in decoded {
                parts.push(columns?);
            }
        }
        // Each blob holds as many objects as planned (checked when decoded).
        let positions = load
            .iter()
            .map(|&i| &self.blobs[i as usize])
            .flat_map(|b| std::iter::repeat_n(b.position, b.elements as usize))
            .collect();
        let block = Block::from_parts(parts, positions).ok_or_else(|| {
            let m = format!("a load of {} blobs is too large for one block", load.len());
            Error::Internal(m)
        });
        graph::report_nested(span.then(Span::task(clock.elapsed())));
        block
    }

    /// The blobs of a load (from its start) read in one stretch: frames of
    /// one file in file order, each close after the one before, all within
    /// [`READ_STRETCH`] (or a single frame).
    fn body_stretch<'a>(&self, load: &'a [u32]) -> &'a [u32] {
        let blob = |i: u32| &self.blobs[i as usize];
        stretch(load, |first, prev, next| {
            let (first, prev, next) = (blob(first), blob(prev), blob(next));
            let prev_end = prev.offset + prev.frame_len();
            next.file == first.file
                && next.offset >= prev_end
                && next.offset - prev_end <= READ_GAP
                && next.offset + next.frame_len() - first.offset <= READ_STRETCH
        })
    }

    /// Decode blobs `part` of the frames `bytes` read from `offset` into one
    /// set of columns.
    fn decode_part(&self, part: &[u32], bytes: &[u8], offset: u64) -> Result<Columns> {
        let blobs = part.iter().map(|&i| &self.blobs[i as usize]);
        let objects = blobs.clone().map(|b| b.elements as usize).sum();
        let mut columns = Columns::with_capacity(objects);
        let mut decoder = Decoder::default();
        for blob in blobs.clone() {
            let from = (blob.body_offset() - offset) as usize;
            let body = &bytes[from..from + blob.datasize as usize];
            self.decode_into(&mut decoder, blob, body, &mut columns)?;
        }
        // Told once per run: a progress bar's counter is shared by every
        // decoding thread, and a run is many tiny blobs.
        self.progress.loaded(blobs.map(InputBlob::frame_len).sum());
        Ok(columns)
    }

    /// Decompress and decode one blob's body to the end of `columns`, and
    /// check it against the plan.
    fn decode_into(
        &self,
        decoder: &mut Decoder,
        blob: &InputBlob,
        body: &[u8],
        columns: &mut Columns,
    ) -> Result<()> {
        let path = self.files[blob.file as usize].path();
        let place = |e: pbf_format::Error| e.at(blob.offset).in_file(path);
        let added = with_decoded(body, |raw| decoder.decode_into(raw, columns))
            .and_then(|added| added)
            .map_err(place)?;
        let keys = added.clone().map(|i| columns.get(i).key().packed());
        let range = keys.clone().min().zip(keys.max());
        self.check(blob, added.len(), range)
    }

    /// Read, decompress and decode one blob, check it against the plan, and
    /// return its elements sorted by (key, rank).
    fn load_one(&self, blob: &InputBlob) -> Result<Block> {
        let file = &self.files[blob.file as usize];
        let body = file
            .read_exact_at(blob.body_offset(), blob.datasize as usize, "Blob")
            .map_err(|e| e.at(blob.offset))?;
        let place = |e: pbf_format::Error| e.at(blob.offset).in_file(file.path());
        let columns = with_decoded(&body, block::decode_columns)
            .and_then(|columns| columns)
            .map_err(place)?;
        drop(body);
        let blobs = vec![blob.position; columns.len()];
        let block = Block::from_packet(columns, blobs);
        // The block is sorted: its first and last keys are its extremes.
        let range = block.rest().first().zip(block.rest().last());
        self.check(blob, block.len(), range.map(|(a, b)| (a.key, b.key)))?;
        self.progress.loaded(blob.frame_len());
        Ok(block)
    }

    /// The decoded elements must be as many as planned and inside the
    /// planned key range (`range`: the smallest and largest packed key
    /// found), or the chains built from the plan would be wrong.
    fn check(&self, blob: &InputBlob, elements: usize, range: Option<(u128, u128)>) -> Result<()> {
        let elements = elements as u64;
        if elements != u64::from(blob.elements) {
            let said = format!("{} elements", blob.elements);
            return Err(self.disagrees(blob, &said, &format!("{elements}"), |s| {
                s.elements() == u64::from(blob.elements)
            }));
        }
        let Some((min, max)) = range else {
            return Ok(());
        };
        if min < blob.first() || max > blob.last() {
            let holds = format!("{}..{}", Key::from_packed(min), Key::from_packed(max));
            let (first, last) = (
                Key::from_packed(blob.first()),
                Key::from_packed(blob.last()),
            );
            let said = format!("{first}..{last}");
            return Err(self.disagrees(blob, &said, &holds, |s| (s.first, s.last) == (first, last)));
        }
        Ok(())
    }

    /// The error for a blob that holds `holds` where the plan said `said`:
    /// the blob's indexdata is named as the culprit when it makes the same
    /// claim (`claims_it`), else the plan.
    fn disagrees(
        &self,
        blob: &InputBlob,
        said: &str,
        holds: &str,
        claims_it: impl Fn(&Summary) -> bool,
    ) -> Error {
        let file = &self.files[blob.file as usize];
        // What the frame's indexdata (ours or pbfhogg's) says of the blob,
        // if it carries any that decodes.
        let frame = file.frame_header_at(blob.offset).ok();
        let claimed = frame.as_ref().and_then(|f| {
            let bytes = f.indexdata.as_deref()?;
            let ours = f.blob_start.and_then(|s| indexdata::decode(bytes, &s));
            ours.or_else(|| indexdata::decode_pbfhogg(bytes))
        });
        if claimed.is_some_and(|s| claims_it(&s)) {
            return Error::Indexdata(format!(
                "indexdata of blob at offset {} of {} claims {said}, the blob holds {holds}: \
                 the indexdata is wrong; index the file again with pbf-index --decode, which \
                 reads every blob instead",
                blob.offset,
                file.path().display()
            ));
        }
        Error::plan(
            file.path(),
            blob.offset,
            format!("the plan says {said}, the blob holds {holds}"),
        )
    }
}
