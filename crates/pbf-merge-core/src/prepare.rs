//! Reading a merge op's frame headers and partitioning its blobs into
//! chains, the two halves of preparing an op. For an op of many blobs they
//! run side by side: the chains on a thread of their own, the headers in
//! parts on the pool ([`PART_INPUTS`]).

use pbf_format::Key;
use pbf_stream::{KeyRecord, MergeOp};

use crate::Merger;
use crate::chains::{self, Chains};
use crate::error::{Error, Result};
use crate::graph::Tasks;
use crate::input::{InputBlob, Inputs, OpFiles, READ_STRETCH};

/// Inputs of a merge op from which its chains are found on a thread of
/// their own.
const MANY_INPUTS: usize = 4096;

/// Inputs whose headers are read on one thread, at least, where an op has
/// more (at most [`PARTS`] parts).
const PART_INPUTS: usize = 1024;

/// Parts an op's headers are read in, at most.
const PARTS: usize = 8;

impl Merger {
    /// Read and check the frame headers of an op's inputs (in `order`, file
    /// order) and partition its blobs into chains; the CPU time of the tasks
    /// that ran on other threads (reading parts, finding chains) goes to
    /// `beside`.
    pub(crate) fn read_and_partition(
        &self,
        op: &MergeOp,
        order: &[u32],
        beside: &Tasks,
    ) -> Result<(Inputs, Chains)> {
        let key = |k: KeyRecord| Key::from(k).packed();
        let range = |p: usize| {
            let input = &op.inputs[order[p] as usize];
            (key(input.first), key(input.last))
        };
        let files = OpFiles::of(op, order, &self.sources)?;
        let (blobs, chains) = match order.len() < MANY_INPUTS {
            true => (
                files.read(op, order, 0)?,
                chains::partition_by(order.len(), range),
            ),
            false => self.read_beside(op, order, &files, range, beside)?,
        };
        Ok((files.inputs(blobs, &self.opts.progress), chains))
    }

    /// The headers of `order` read in parts on the pool while a thread of its
    /// own (not the pool's, which may still be encoding the previous op's last
    /// blocks) forms the chains.
    fn read_beside(
        &self,
        op: &MergeOp,
        order: &[u32],
        files: &OpFiles,
        range: impl Fn(usize) -> (u128, u128) + Sync,
        beside: &Tasks,
    ) -> Result<(Vec<InputBlob>, Chains)> {
        std::thread::scope(|s| {
            let range = &range;
            let helper = s.spawn(move || beside.time(|| chains::partition_by(order.len(), range)));
            let blobs = self.read_parts(op, order, files, beside);
            let chains = helper
                .join()
                .map_err(|_| Error::Internal("the thread finding chains panicked".into()))?;
            Ok((blobs?, chains))
        })
    }

    /// The headers of `order`, read in parts of at least [`PART_INPUTS`]
    /// (at most [`PARTS`], fewer where the budget is small), side by side on the pool (its
    /// threads exist already, so the parts' buffers come from memory they
    /// hold anyway), each timed as a task of `beside`; errors in file order.
    fn read_parts(
        &self,
        op: &MergeOp,
        order: &[u32],
        files: &OpFiles,
        beside: &Tasks,
    ) -> Result<Vec<InputBlob>> {
        use rayon::prelude::*;
        // Each part reads up to READ_STRETCH at a time, and the parts
        // together read at most a sixteenth of the budget at once (one part
        // however small).
        let within = ((self.opts.memory / 16 / READ_STRETCH) as usize).clamp(1, PARTS);
        let parts = (order.len() / PART_INPUTS).clamp(1, within);
        let size = order.len().div_ceil(parts).max(1);
        let read = |(i, part): (usize, &[u32])| {
            let first = (i * size) as u32;
            beside.time(|| files.read(op, part, first))
        };
        let read: Vec<Result<Vec<InputBlob>>> = self
            .pool
            .install(|| order.par_chunks(size).enumerate().map(read).collect());
        let mut blobs = Vec::with_capacity(order.len());
        for part in read {
            blobs.extend(part?);
        }
        Ok(blobs)
    }
}
