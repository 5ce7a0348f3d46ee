//! `shuffle`: every element of the input in one seeded, uniformly random
//! order, re-encoded into blobs: the worst case for a sorter. It streams:
//! pass 1 decodes the input blocks in parallel and deals each element to one
//! of M buckets at random, spilling the buckets to temporary files (lz4
//! blocks) beside the output; pass 2 loads one bucket at a time, shuffles it
//! in memory and writes it. Random dealing plus a shuffle of each bucket is a
//! uniform permutation of the whole file, and memory is bounded by one
//! bucket (`--bucket-size` of input bytes).

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use pbf_format::block::{Element, EncodeOptions, decode_block, split_points};
use pbf_format::compress::{Compression, decode_blob};
use pbf_format::frame::PbfFile;
use pbf_format::header::encode_header_frame;
use pbf_output::OutputFile;
use rayon::prelude::*;
use tempfile::NamedTempFile;

use crate::encode::{FrameEncoder, ordered};
use crate::input::Input;
use crate::rng::Rng;

/// Input frames decoded per batch in pass 1.
const BATCH: usize = 32;

/// Write the shuffled file; returns the bytes written.
pub fn run(
    input: &Path,
    output: &mut OutputFile,
    spill_dir: &Path,
    seed: u64,
    bucket_size: u64,
    encoder: FrameEncoder,
) -> Result<()> {
    let inp = Input::open(input)?;
    let buckets = inp.file.size().div_ceil(bucket_size.max(1)).max(1) as usize;
    let spills = deal(&inp, seed, buckets, spill_dir)?;
    let mut header = inp.header.clone();
    header.optional_features.retain(|f| !f.starts_with("Sort."));
    output.write_all(&encode_header_frame(&header, encoder.compression)?)?;
    for (b, spill) in spills.into_iter().enumerate() {
        let mut elements = load(&spill)?;
        Rng::new(seed, (1 << 40) + b as u64).shuffle(&mut elements);
        let ranges = split_points(&elements, &encoder.opts);
        ordered(ranges, |r| encoder.frame(&elements[r]), output)?;
    }
    Ok(())
}

/// Pass 1: deal every element to a random bucket file.
fn deal(inp: &Input, seed: u64, buckets: usize, dir: &Path) -> Result<Vec<NamedTempFile>> {
    let spill_encoder = FrameEncoder {
        opts: EncodeOptions::default(),
        compression: Compression::Lz4,
        indexdata: false,
    };
    let mut files = Vec::with_capacity(buckets);
    for _ in 0..buckets {
        let f = tempfile::Builder::new()
            .prefix(".pbf-gen-bucket-")
            .tempfile_in(dir)
            .with_context(|| format!("{}: cannot create a bucket file", dir.display()))?;
        files.push(f);
    }
    let mut writers: Vec<BufWriter<&std::fs::File>> = files
        .iter()
        .map(|f| BufWriter::with_capacity(1 << 20, f.as_file()))
        .collect();
    for (n, batch) in inp.data.chunks(BATCH).enumerate() {
        let dealt: Vec<Vec<Vec<Element>>> = batch
            .par_iter()
            .enumerate()
            .map(|(i, fh)| {
                let mut rng = Rng::new(seed, (n * BATCH + i) as u64);
                let mut parts = vec![Vec::new(); buckets];
                for e in inp.decode(fh)? {
                    parts[rng.below(buckets)].push(e);
                }
                Ok(parts)
            })
            .collect::<Result<_>>()?;
        let mut per_bucket: Vec<Vec<Element>> = vec![Vec::new(); buckets];
        for parts in dealt {
            for (bucket, part) in per_bucket.iter_mut().zip(parts) {
                bucket.extend(part);
            }
        }
        let encoded: Vec<Vec<u8>> = per_bucket
            .par_iter()
            .map(|els| spill_encoder.frames(els))
            .collect::<Result<_>>()?;
        for (w, bytes) in writers.iter_mut().zip(encoded) {
            w.write_all(&bytes).context("writing a bucket file")?;
        }
    }
    for w in &mut writers {
        w.flush().context("writing a bucket file")?;
    }
    drop(writers);
    Ok(files)
}

/// Pass 2: every element of one bucket file.
fn load(spill: &NamedTempFile) -> Result<Vec<Element>> {
    let file = PbfFile::open(spill.path())?;
    let mut frames = Vec::new();
    let mut offset = 0;
    while offset < file.size() {
        let fh = file.frame_header_at(offset)?;
        offset = fh.end();
        frames.push(fh);
    }
    let blocks: Vec<Vec<Element>> = frames
        .par_iter()
        .map(|fh| Ok(decode_block(&decode_blob(&file.read_body(fh)?)?)?))
        .collect::<Result<_>>()
        .with_context(|| format!("{}: reading a bucket file", spill.path().display()))?;
    Ok(blocks.into_iter().flatten().collect())
}
