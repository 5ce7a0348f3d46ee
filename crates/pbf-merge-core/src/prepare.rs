//! Reading a merge op's frame headers and partitioning its blobs into
//! chains, the two halves of preparing an op. For an op of many blobs they
//! run side by side: the chains on a thread of their own, the headers in
//! parts on the pool ([`PART_INPUTS`]).

use pbf_format::Key;
use pbf_stream::{KeyRecord, MergeOp};
use rayon::ThreadPool;

use crate::chains::{self, Chains};
use crate::error::{Error, Result};
use crate::graph::Tasks;
use crate::input::{InputBlob, Inputs, OpFiles, READ_STRETCH};
use crate::progress::Progress;
use pbf_stream::SourceFiles;

/// Inputs of a merge op from which its chains are found on a thread of
/// their own.
const MANY_INPUTS: usize = 4096;

/// Inputs whose headers are read on one thread, at least, where an op has
/// more (at most [`PARTS`] parts).
const PART_INPUTS: usize = 1024;

/// Parts an op's headers are read in, at most.
const PARTS: usize = 8;

/// Parts an op's headers are read in, at most, within a memory budget of
/// `memory` bytes: each part reads up to [`READ_STRETCH`] at a time, and the
/// parts together read at most a sixteenth of the budget at once (one part
/// however small).
pub(crate) fn parts_within(memory: u64) -> usize {
    let parts = memory / 16 / READ_STRETCH;
    (parts as usize).clamp(1, PARTS)
}

/// What reads an op's headers beside its preparing thread.
pub(crate) struct Helpers<'a> {
    /// Parts the headers are read in, at most ([`parts_within`]).
    pub parts: usize,
    /// The pool the parts are read on: its threads exist already, so
    /// the parts' buffers come from memory they hold anyway.
    pub pool: &'a ThreadPool,
    /// Where the CPU time of the tasks beside the preparing thread goes.
    pub tasks: &'a Tasks,
}

/// Read and check the frame headers of an op's inputs (in `order`, file
/// order) and partition its blobs into chains; the CPU time of the tasks
/// that ran on other threads (reading parts, finding chains) goes to the
/// helpers' tasks.
pub(crate) fn read_and_partition(
    op: &MergeOp,
    order: &[u32],
    sources: &SourceFiles,
    progress: &Progress,
    helpers: &Helpers<'_>,
) -> Result<(Inputs, Chains)> {
    let key = |k: KeyRecord| Key::from(k).packed();
    let range = |p: usize| {
        let input = &op.inputs[order[p] as usize];
        (key(input.first), key(input.last))
    };
    let files = OpFiles::of(op, order, sources)?;
    if order.len() < MANY_INPUTS {
        let blobs = files.read(op, order, 0)?;
        let chains = chains::partition_by(order.len(), range);
        return Ok((files.inputs(blobs, progress), chains));
    }
    let (blobs, chains) = read_beside(op, order, &files, range, helpers)?;
    Ok((files.inputs(blobs, progress), chains))
}

/// The headers of `order` read in parts on the pool while a thread of its
/// own (not the pool's, which may still be encoding the previous op's last
/// blocks) forms the chains.
fn read_beside(
    op: &MergeOp,
    order: &[u32],
    files: &OpFiles,
    range: impl Fn(usize) -> (u128, u128) + Sync,
    helpers: &Helpers<'_>,
) -> Result<(Vec<InputBlob>, Chains)> {
    std::thread::scope(|s| {
        let range = &range;
        let helper = s.spawn(move || {
            helpers
                .tasks
                .time(|| chains::partition_by(order.len(), range))
        });
        let blobs = read_parts(op, order, files, helpers);
        let chains = helper
            .join()
            .map_err(|_| Error::Internal("the thread finding chains panicked".into()))?;
        Ok((blobs?, chains))
    })
}

/// The headers of `order`, read in up to
/// `helpers.parts` parts of at least [`PART_INPUTS`], side by side on the
/// pool, each timed as a task of the helpers'; errors in file order.
fn read_parts(
    op: &MergeOp,
    order: &[u32],
    files: &OpFiles,
    helpers: &Helpers<'_>,
) -> Result<Vec<InputBlob>> {
    use rayon::prelude::*;
    let parts = (order.len() / PART_INPUTS).clamp(1, helpers.parts.max(1));
    let size = order.len().div_ceil(parts).max(1);
    let read = |(i, part): (usize, &[u32])| {
        let first = (i * size) as u32;
        helpers.tasks.time(|| files.read(op, part, first))
    };
    let read: Vec<Result<Vec<InputBlob>>> = helpers
        .pool
        .install(|| order.par_chunks(size).enumerate().map(read).collect());
    let mut blobs = Vec::with_capacity(order.len());
    for part in read {
        blobs.extend(part?);
    }
    Ok(blobs)
}
