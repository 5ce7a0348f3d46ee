//! Helpers for the engine's integration tests: write blobs of elements into a
//! real PBF file, describe them as plan merge inputs, run the engine, and
//! read back what it wrote in the order it reported.

#![allow(dead_code)]

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pbf_format::Keep;
use pbf_format::block::{self, Element, EncodeOptions};
use pbf_format::compress::{self, Compression};
use pbf_format::frame::{self, PbfFile};
use pbf_format::header::{self, Header};
use pbf_format::indexdata;
use pbf_format::scan::Accumulator;
use pbf_merge_core::{Flight, MergeStats, Merger, Options, Ready, Spool, WrittenFrame};
use pbf_stream::{FileIdentity, MergeInput, MergeOp, SourceFiles, SourceRef};

/// One input blob: its elements in stored order and whether to use DenseNodes.
#[derive(Clone, Debug)]
pub struct Blob {
    pub elements: Vec<Element>,
    pub dense: bool,
}

/// Write a PBF file (OSMHeader, then one frame per blob); returns the
/// source record and each blob's (offset, length).
pub fn write_pbf(path: &Path, id: u32, blobs: &[Blob]) -> (SourceRef, Vec<(u64, u64)>) {
    let mut bytes = frame::encode_frame(
        &frame::BlobType::OsmHeader,
        None,
        &compress::encode_blob(
            &header::encode_header(&Header::default()),
            Compression::None,
        )
        .expect("header blob"),
    )
    .expect("frame");
    let mut ranges = Vec::new();
    for b in blobs {
        let opts = EncodeOptions {
            dense_nodes: b.dense,
            ..EncodeOptions::default()
        };
        let raw = block::encode_block(&b.elements, &opts);
        let blob = compress::encode_blob(&raw, Compression::Zlib(1)).expect("blob");
        let f = frame::encode_frame(&frame::BlobType::OsmData, None, &blob).expect("frame");
        ranges.push((bytes.len() as u64, f.len() as u64));
        bytes.extend(f);
    }
    File::create(path)
        .and_then(|mut f| f.write_all(&bytes))
        .expect("write pbf");
    (source_ref(path, id), ranges)
}

/// The plan's record of a file as it is now.
pub fn source_ref(path: &Path, id: u32) -> SourceRef {
    let meta = std::fs::metadata(path).expect("metadata");
    SourceRef {
        id,
        file: FileIdentity::of(&path.canonicalize().expect("canonical"), &meta, None),
        spool: false,
    }
}

/// A merge input describing a blob written by [`write_pbf`].
pub fn merge_input(source: u32, (offset, length): (u64, u64), blob: &Blob) -> MergeInput {
    let mut acc = Accumulator::default();
    for e in &blob.elements {
        acc.push(e.key());
    }
    let s = acc.finish().expect("blob is not empty");
    MergeInput {
        source,
        offset,
        length,
        first: s.first.into(),
        last: s.last.into(),
        sorted: s.sorted,
        elements: s.elements(),
    }
}

/// A merge op over inputs, ordered by first key (pbf-overlap writes them in
/// file order; the merge takes any order).
pub fn merge_op(mut inputs: Vec<MergeInput>) -> MergeOp {
    inputs.sort_by_key(|i| pbf_format::Key::from(i.first));
    let first = inputs
        .iter()
        .map(|i| pbf_format::Key::from(i.first))
        .min()
        .expect("inputs");
    let last = inputs
        .iter()
        .map(|i| pbf_format::Key::from(i.last))
        .max()
        .expect("inputs");
    MergeOp {
        elements: inputs.iter().map(|i| i.elements).sum(),
        inputs,
        first: first.into(),
        last: last.into(),
    }
}

/// A merger over `sources` with a pool of two threads.
pub fn merger(sources: &[SourceRef], opts: Options) -> pbf_merge_core::Result<Merger> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    Ok(Merger::new(
        opts,
        SourceFiles::open(sources)?,
        Arc::new(pool),
    ))
}

/// Run the engine over ops one op at a time (a flight of one); returns
/// every element written, in reported order, the per-op stats, and the
/// reported frames.
pub fn run(
    dir: &Path,
    sources: &[SourceRef],
    ops: &[MergeOp],
    opts: Options,
) -> pbf_merge_core::Result<(Vec<Element>, Vec<MergeStats>, Vec<WrittenFrame>)> {
    let spool_path = dir.join("spool");
    let (_, stats, frames) = fly(&spool_path, sources, ops, opts, 1)?;
    Ok((read_frames(&spool_path, &frames), stats, frames))
}

/// Run the engine over ops as pbf-merge does, up to `window` ops in flight;
/// returns the spool's bytes, the per-op stats and the reported frames.
pub fn run_in_flight(
    dir: &Path,
    sources: &[SourceRef],
    ops: &[MergeOp],
    opts: Options,
    window: usize,
) -> pbf_merge_core::Result<(Vec<u8>, Vec<MergeStats>, Vec<WrittenFrame>)> {
    fly(&dir.join("flight-spool"), sources, ops, opts, window)
}

/// Merge `ops` into a new spool at `spool_path`, up to `window` in flight.
fn fly(
    spool_path: &Path,
    sources: &[SourceRef],
    ops: &[MergeOp],
    opts: Options,
    window: usize,
) -> pbf_merge_core::Result<(Vec<u8>, Vec<MergeStats>, Vec<WrittenFrame>)> {
    let mut spool = Spool::create(spool_path)?;
    let mut flight = Flight::new(Arc::new(merger(sources, opts)?), window);
    let (mut frames, mut stats) = (Vec::new(), Vec::new());
    let mut report = |f: &[WrittenFrame]| {
        frames.extend_from_slice(f);
        Ok(())
    };
    let mut started = 0;
    while stats.len() < ops.len() {
        while started < ops.len() && flight.has_room() {
            flight.start(ops[started].clone());
            started += 1;
        }
        if let Ready::Done(s) = flight.write_oldest(&mut spool, &mut report, None)? {
            stats.push(s);
        }
    }
    let bytes = std::fs::read(spool_path).expect("read the spool");
    Ok((bytes, stats, frames))
}

/// Decode the spool's frames in the given order, checking each frame's
/// BlobHeader size, indexdata (when written: `Options::indexdata`) and block
/// order on the way.
pub fn read_frames(spool: &Path, frames: &[WrittenFrame]) -> Vec<Element> {
    let file = PbfFile::open(spool).expect("open spool");
    let mut out = Vec::new();
    let mut expect_offset = 0;
    for f in frames {
        assert_eq!(
            f.offset, expect_offset,
            "frames are reported in spool order"
        );
        expect_offset = f.offset + f.length;
        let fh = file.frame_header_at(f.offset).expect("frame header");
        assert_eq!(fh.frame_len(), f.length);
        assert!(fh.header_len < 128, "BlobHeader of {} bytes", fh.header_len);
        if let Some(ix) = fh.indexdata.as_deref() {
            let start = fh.blob_start.expect("blob start read with the header");
            assert_eq!(indexdata::decode(ix, &start), Some(f.summary), "indexdata");
        }
        let raw = compress::decode_blob(&file.read_body(&fh).expect("body")).expect("blob");
        let elements = block::decode_block(&raw).expect("block");
        assert!(elements.len() <= 8000);
        let mut acc = Accumulator::default();
        for e in &elements {
            acc.push(e.key());
        }
        assert_eq!(acc.finish(), Some(f.summary));
        out.extend(elements);
    }
    out
}

/// What the merge must give: `input_order` stably sorted by (key, tie
/// seconds), then kept as `keep` says: the first of equal keys, or the last
/// of each kind and id unless it is deleted.
pub fn brute_force(input_order: Vec<Element>, keep: Keep) -> Vec<Element> {
    let mut v = input_order;
    v.sort_by_key(|e| (e.key(), e.tie_seconds()));
    match keep {
        Keep::All => {}
        Keep::Dedupe => v.dedup_by_key(|e| e.key()),
        Keep::Latest => {
            let object = |e: &Element| (e.kind(), e.id());
            let newest = |i: usize| v.get(i + 1).is_none_or(|n| object(n) != object(&v[i]));
            let deleted = |e: &Element| e.info().and_then(|i| i.visible) == Some(false);
            let keep: Vec<bool> = (0..v.len()).map(|i| newest(i) && !deleted(&v[i])).collect();
            let mut k = keep.into_iter();
            v.retain(|_| k.next().unwrap_or(false));
        }
    }
    v
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Path helper.
pub fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}
