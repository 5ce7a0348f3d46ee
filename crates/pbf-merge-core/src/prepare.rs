//! Reading a merge op's frame headers and partitioning its blobs into
//! chains, the two halves of preparing an op. For an op of many blobs they
//! run on two threads. Where the plan's keys alone show that no chain can
//! hold more than a few blobs (a shuffled file of small blobs: every blob
//! spans most of the keys), the chains are not formed at all: the second
//! thread reads half of the headers instead, and once the headers give the
//! blobs' sizes, the few largest together confirm that every chain would
//! be small, so every blob is batched as the chains would have had it.
//! The headers of such an op are read in parts, side by side on the pool
//! ([`PART_INPUTS`]).

use pbf_format::Key;
use pbf_stream::{KeyRecord, MergeOp};
use rayon::ThreadPool;

use crate::chains::{self, Chains};
use crate::error::{Error, ErrorKind, Result};
use crate::graph::Tasks;
use crate::input::{InputBlob, Inputs, OpFiles, READ_STRETCH};
use crate::progress::Progress;
use crate::runs::SMALL;
use pbf_stream::SourceFiles;

/// Inputs of a merge op from which its chains are found, or bounded, on a
/// thread of their own.
const MANY_INPUTS: usize = 4096;

/// The longest chain the plan's keys may bound: past that many blobs the
/// chains are formed (the bound sorts this many widths).
const BOUND_LIMIT: usize = 1024;

/// Inputs whose headers are read on one thread, at least, where an op has
/// more (at most [`PARTS`] parts of each half).
const PART_INPUTS: usize = 1024;

/// Parts each half of an op's headers is read in, at most.
const PARTS: usize = 8;

/// Parts each half of an op's headers is read in, at most, within a
/// memory budget of `memory` bytes: each part reads up to [`READ_STRETCH`]
/// at a time, and the parts of both halves together read at most a
/// sixteenth of the budget at once (one part a half however small).
pub(crate) fn parts_within(memory: u64) -> usize {
    let parts = memory / 16 / READ_STRETCH / 2;
    (parts as usize).clamp(1, PARTS)
}

/// What reads an op's headers beside its preparing thread.
pub(crate) struct Helpers<'a> {
    /// Parts each half is read in, at most ([`parts_within`]).
    pub parts: usize,
    /// The pool the parts are read on: its threads exist already, so
    /// the parts' buffers come from memory they hold anyway.
    pub pool: &'a ThreadPool,
    /// Where the CPU time of the tasks beside the preparing thread goes.
    pub tasks: &'a Tasks,
}

/// How the blobs of an op were partitioned.
pub(crate) enum Partition {
    /// Into chains.
    Chains(Chains),
    /// Not at all: no chain could hold more than this many blobs, and so
    /// many together hold at most [`SMALL`] bytes decoded, so every chain
    /// would be small and every blob is batched.
    AllSmall(usize),
}

/// Read and check the frame headers of an op's inputs (in `order`, file
/// order) and partition its blobs; the CPU time of the tasks that ran on
/// other threads (reading parts, finding chains) goes to the helpers'
/// tasks.
pub(crate) fn read_and_partition(
    op: &MergeOp,
    order: &[u32],
    sources: &SourceFiles,
    progress: &Progress,
    helpers: &Helpers<'_>,
) -> Result<(Inputs, Partition)> {
    let key = |k: KeyRecord| Key::from(k).packed();
    let range = |p: usize| {
        let input = &op.inputs[order[p] as usize];
        (key(input.first), key(input.last))
    };
    let files = OpFiles::of(op, order, sources)?;
    if order.len() < MANY_INPUTS {
        let blobs = files.read(op, order, 0)?;
        let chains = chains::partition_by(order.len(), range);
        return Ok((files.inputs(blobs, progress), Partition::Chains(chains)));
    }
    let (blobs, found) = read_beside(op, order, &files, range, helpers)?;
    let inputs = files.inputs(blobs, progress);
    let partition = match found {
        Found::Chains(chains) => Partition::Chains(chains),
        Found::Bound(longest) if small_together(&inputs, longest) => Partition::AllSmall(longest),
        Found::Bound(_) => Partition::Chains(chains::partition_by(order.len(), range)),
    };
    Ok((inputs, partition))
}

/// What the second thread found of the chains.
enum Found {
    Chains(Chains),
    /// No chain holds more blobs than this.
    Bound(usize),
}

/// The headers of `order` read on this thread while a second one bounds
/// or forms the chains (not on the pool, which may still be encoding the
/// previous op's last blocks). When the keys bound the chains, the second
/// thread reads the second half of the headers.
fn read_beside(
    op: &MergeOp,
    order: &[u32],
    files: &OpFiles,
    range: impl Fn(usize) -> (u128, u128) + Sync,
    helpers: &Helpers<'_>,
) -> Result<(Vec<InputBlob>, Found)> {
    let half = order.len() / 2;
    let (first, second) = order.split_at(half);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let range = &range;
        let helper = s.spawn(move || -> Result<(Found, Option<Vec<InputBlob>>)> {
            let bound = helpers
                .tasks
                .time(|| chains::longest_bound(order.len(), range, BOUND_LIMIT));
            let _ = tx.send(bound.is_some());
            Ok(match bound {
                Some(longest) => {
                    let rest = read_parts(op, (second, half), files, helpers)?;
                    (Found::Bound(longest), Some(rest))
                }
                None => {
                    let chains = helpers
                        .tasks
                        .time(|| chains::partition_by(order.len(), range));
                    (Found::Chains(chains), None)
                }
            })
        });
        let blobs = read_parts(op, (first, 0), files, helpers);
        // The second half is read here unless the helper reads it.
        let mine = match rx.recv() {
            Ok(true) => None,
            _ => Some(read_parts(op, (second, half), files, helpers)),
        };
        let helped = helper.join().map_err(|_| {
            Error::new(ErrorKind::Internal(
                "the thread finding chains panicked".into(),
            ))
        });
        // Errors in file order: the first half's, then the second's.
        let mut blobs = blobs?;
        let (found, theirs) = helped??;
        match (theirs, mine) {
            (Some(rest), None) => blobs.extend(rest),
            (None, Some(rest)) => blobs.extend(rest?),
            _ => {
                let m = "both threads or neither read the second half of the headers";
                return Err(Error::new(ErrorKind::Internal(m.into())));
            }
        }
        Ok((blobs, found))
    })
}

/// The headers of `order` (the inputs from `position` on), read in up to
/// `helpers.parts` parts of at least [`PART_INPUTS`], side by side on the
/// pool, each timed as a task of the helpers'; errors in file order.
fn read_parts(
    op: &MergeOp,
    (order, position): (&[u32], usize),
    files: &OpFiles,
    helpers: &Helpers<'_>,
) -> Result<Vec<InputBlob>> {
    use rayon::prelude::*;
    let parts = (order.len() / PART_INPUTS).clamp(1, helpers.parts.max(1));
    let size = order.len().div_ceil(parts).max(1);
    let read = |(i, part): (usize, &[u32])| {
        let first = (position + i * size) as u32;
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

/// True when the `longest` largest blobs together hold at most [`SMALL`]
/// bytes decoded: then no chain of at most `longest` blobs is large.
fn small_together(inputs: &Inputs, longest: usize) -> bool {
    let mut estimates: Vec<u64> = inputs.blobs.iter().map(|b| b.estimate()).collect();
    let n = estimates.len();
    let largest = match longest < n {
        true => estimates.select_nth_unstable_by(longest, |a, b| b.cmp(a)).0,
        false => estimates.as_mut_slice(),
    };
    largest.iter().sum::<u64>() <= SMALL
}
