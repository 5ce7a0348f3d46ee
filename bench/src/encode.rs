//! Encoding elements into frames, and the ordered parallel pipeline every
//! re-encoding subcommand uses: tasks are turned into frames on all cores in
//! batches, while a writer thread appends the previous batch in task order.

use std::sync::mpsc::sync_channel;

use anyhow::{Result, anyhow};
use pbf_format::block::{Element, EncodeOptions, encode_block, split_points};
use pbf_format::compress::{Compression, encode_blob};
use pbf_format::frame::{BlobStart, BlobType, encode_frame};
use pbf_format::indexdata;
use pbf_format::scan::{Accumulator, Summary};
use pbf_output::OutputFile;
use rayon::prelude::*;

/// Tasks computed per batch: enough to keep every core busy, few enough
/// that a batch of frames stays small in memory.
const BATCH: usize = 64;

/// How output blocks are cut, encoded and compressed.
#[derive(Clone, Copy, Debug)]
pub struct FrameEncoder {
    /// Block cutting and node encoding.
    pub opts: EncodeOptions,
    /// Blob compression.
    pub compression: Compression,
    /// Write our indexdata into every BlobHeader.
    pub indexdata: bool,
}

impl FrameEncoder {
    /// Frames for `elements` in the given order, cut by the block limits.
    pub fn frames(&self, elements: &[Element]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for range in split_points(elements, &self.opts) {
            out.extend(self.frame(&elements[range])?);
        }
        Ok(out)
    }

    /// One frame holding all of `elements`.
    pub fn frame(&self, elements: &[Element]) -> Result<Vec<u8>> {
        let block = encode_block(elements, &self.opts);
        self.wrap(&block, &summarize(elements)?)
    }

    /// Compress an encoded block into a frame; `summary` describes it and is
    /// written as indexdata when asked for.
    pub fn wrap(&self, block: &[u8], summary: &Summary) -> Result<Vec<u8>> {
        let blob = encode_blob(block, self.compression)?;
        let ix = self
            .indexdata
            .then(|| indexdata::encode(summary, &BlobStart::of(&blob)));
        Ok(encode_frame(&BlobType::OsmData, ix.as_deref(), &blob)?)
    }
}

/// The key summary of a non-empty block's elements.
pub fn summarize(elements: &[Element]) -> Result<Summary> {
    let mut acc = Accumulator::default();
    elements.iter().for_each(|e| acc.push(e.key()));
    acc.finish()
        .ok_or_else(|| anyhow!("internal error: empty block"))
}

/// Run `work` on every task on the rayon pool and append the results to
/// `out` in task order.
pub fn ordered<T, F>(
    tasks: impl IntoIterator<Item = T>,
    work: F,
    out: &mut OutputFile,
) -> Result<()>
where
    T: Send,
    F: Fn(T) -> Result<Vec<u8>> + Sync,
{
    std::thread::scope(|s| {
        let (tx, rx) = sync_channel::<Vec<Vec<u8>>>(1);
        let writer = s.spawn(move || -> Result<()> {
            for batch in rx {
                for frames in batch {
                    out.write_all(&frames)?;
                }
            }
            Ok(())
        });
        let mut tasks = tasks.into_iter();
        let result = loop {
            let batch: Vec<T> = tasks.by_ref().take(BATCH).collect();
            if batch.is_empty() {
                break Ok(());
            }
            let done: Result<Vec<Vec<u8>>> = batch.into_par_iter().map(&work).collect();
            match done {
                Ok(frames) => {
                    if tx.send(frames).is_err() {
                        break Ok(()); // the writer failed; its error is reported below
                    }
                }
                Err(e) => break Err(e),
            }
        };
        drop(tx);
        let written = writer
            .join()
            .map_err(|_| anyhow!("internal error: writer thread panicked"))?;
        result.and(written)
    })
}
