//! The merge engine behind `pbf-merge`: executes one plan `merge` op (blobs
//! whose key ranges overlap) into sorted, re-encoded PBF frames appended to a
//! [`Spool`], in bounded memory.
//!
//! How a run is merged:
//! 1. every input frame header is read and checked against the plan
//!    ([`pbf_stream::SourceFiles`] checked every source's identity when it was opened);
//! 2. the blobs are partitioned into the fewest chains of mutually
//!    non-overlapping blobs (`chains::partition_by`); a chain is one sorted
//!    stream that holds one load at a time (plus one read ahead): a blob,
//!    or consecutive small blobs of up to 1 MiB decoded. A blob that is
//!    unsorted inside is sorted when it is decoded. The blobs of chains
//!    smaller than that are gathered into batches, each decoded into one
//!    block and sorted (see `runs.rs`), and with two batches or more,
//!    groups of batches are merged into runs of spill packets kept in
//!    memory (or in a spill file past half the budget);
//! 3. if the runs together would hold more than the budget (what is left
//!    of [`Options::memory`] after a 64-byte entry per input blob, less a
//!    quarter for the batches being sorted), groups of runs that fit are
//!    merged into sorted temporary runs (spill files beside the spool,
//!    fast compression, deleted when closed), and groups of runs again until
//!    what is left fits (multi-level);
//! 4. the remaining runs are k-way merged with galloping, cut into blocks of
//!    up to 8000 elements, encoded and compressed in parallel, and appended to
//!    the spool in order; a block's BlobHeader carries our indexdata only
//!    when [`Options::indexdata`] asks for it.
//!
//! Equal keys (same type, id and version) are ordered as `osmium sort` orders
//! them: by timestamp, then in input order (source id, blob offset, position
//! in blob); see [`pbf_format::key`]. [`Options::keep`] says which of them
//! are kept ([`Keep`]).
//! The caller learns about written frames through a callback as soon as they
//! are in the spool, so a downstream stage can copy them while later blocks
//! and runs are still being merged.
#![deny(missing_docs)]

mod chains;
mod error;
mod flight;
mod graph;
mod input;
mod merge;
mod packet;
mod pieces;
mod prepare;
mod progress;
mod run;
mod runs;
mod sorted;
mod spill;
mod spool;
mod stream;
mod writer;

use std::path::PathBuf;
use std::sync::Arc;

use pbf_format::Keep;
use pbf_format::block::EncodeOptions;
use pbf_format::compress::Compression;
use pbf_format::scan::Summary;
use pbf_stream::{MergeOp, SourceFiles};
use rayon::ThreadPool;

pub use error::{Error, Result};
pub use flight::{Flight, Ready};
pub use graph::Span;
use progress::Meter;
pub use progress::{Phase, Progress};
pub use spool::Spool;

use graph::Clock;
use run::Run;
use spill::Budget;

/// Lock `mutex`, whatever a panicking holder left: what the merge keeps
/// behind a mutex (counters, results, a block, a gate's fields) is written
/// whole, and the panic is reported where it happened. (pbf-cli, above this
/// crate, has its twin for the tools.)
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
use writer::{BlockFormat, BlockWriter, Cut, Target};

/// How to merge.
#[derive(Clone, Debug)]
pub struct Options {
    /// Memory budget of a merge op (default 1 GiB): an entry of each input
    /// blob, decoded objects (estimated from the blobs' sizes and object
    /// counts, and for spill packets by each object's decoded size as the
    /// merge counts it) and sorted runs kept in memory. Encoding buffers (a few blocks per thread) come on
    /// top.
    pub memory: u64,
    /// Compression of the output blocks (default zlib:6).
    pub compression: Compression,
    /// What is kept of one object's versions (default: every one).
    pub keep: Keep,
    /// Block cutting and node encoding of the output (default: 8000 elements, DenseNodes).
    pub encode: EncodeOptions,
    /// Compression of spill files (default lz4: fast, they are read once).
    pub spill_compression: Compression,
    /// Directory for spill files (normally the spool's directory).
    pub spill_dir: PathBuf,
    /// Start each merge op's frames in the spool at a multiple of this many
    /// bytes (the filesystem block size, for `pbf-reflink`); 0 or 1: no
    /// padding (default).
    pub align: u64,
    /// Write our indexdata into each output frame's BlobHeader (default
    /// false: osmconvert reads only BlobHeaders of 11 to 17 bytes, and the
    /// copiers write indexdata into the output from the plan's keys when
    /// asked).
    pub indexdata: bool,
    /// Told the input bytes of work done as the merge goes ([`Progress`]).
    pub progress: Progress,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            memory: 1 << 30,
            compression: Compression::default(),
            keep: Keep::All,
            encode: EncodeOptions::default(),
            spill_compression: Compression::Lz4,
            spill_dir: std::env::temp_dir(),
            align: 0,
            indexdata: false,
            progress: Progress::default(),
        }
    }
}

/// One frame written to the spool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrittenFrame {
    /// Offset of the frame in the spool.
    pub offset: u64,
    /// Length of the whole frame.
    pub length: u64,
    /// Keys of the frame's block.
    pub summary: Summary,
}

/// What one merge did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeStats {
    /// Input blobs.
    pub inputs: u64,
    /// Elements read.
    pub elements_in: u64,
    /// Elements written to the spool.
    pub elements_out: u64,
    /// Elements dropped by [`Options::keep`]: repeats, older versions,
    /// deleted newest versions.
    pub duplicates: u64,
    /// Chains the inputs formed.
    pub chains: u64,
    /// Batches the blobs of small chains were gathered into, each merged
    /// as one sorted run.
    pub batches: u64,
    /// Bytes held for the input blobs' entries while merging, taken off the
    /// memory budget.
    pub held: u64,
    /// Spill levels (0: merged directly).
    pub spill_levels: u64,
    /// Temporary runs written.
    pub spilled_runs: u64,
    /// Bytes written to spill files.
    pub spilled_bytes: u64,
    /// Sorted runs of spill packets kept in memory.
    pub kept_runs: u64,
    /// Bytes of the runs kept in memory.
    pub kept_bytes: u64,
    /// Estimated decoded memory of the final merge.
    pub final_memory: u64,
    /// Frames written to the spool.
    pub frames: u64,
    /// Bytes written to the spool (frames, not padding).
    pub bytes: u64,
    /// Bytes of padding written before the op's frames ([`Options::align`]).
    pub padding: u64,
    /// CPU time and critical path of the op's tasks (see [`Span`]).
    pub span: Span,
}

/// A merge op whose inputs are checked and partitioned
/// ([`Merger::prepare`]), ready to be merged ([`Merger::execute`]).
pub(crate) struct Prepared {
    stats: MergeStats,
    runs: Vec<Run>,
    /// The budget within which batches of small blobs must be sorted into
    /// compact runs, or runs spilled into fewer runs, first (`None`: the
    /// runs fit the budget as they are).
    spill: Option<Budget>,
    /// Input bytes told to [`Options::progress`] as the elements are merged.
    merged_bytes: u64,
}

impl Prepared {
    /// The memory the op holds while it is merged, out of a budget of
    /// `memory` ([`Options::memory`]): its blobs' entries and its runs; an op
    /// that must sort batches or spill takes the whole budget.
    pub(crate) fn memory(&self, memory: u64) -> u64 {
        match self.spill {
            None => (self.stats.held + self.stats.final_memory).min(memory),
            Some(_) => memory,
        }
    }
}

/// Executes merge ops.
#[derive(Debug)]
pub struct Merger {
    opts: Options,
    sources: SourceFiles,
    pool: Arc<ThreadPool>,
}

impl Merger {
    /// A merger reading from `sources`, decoding and encoding on `pool`. Its
    /// ops are merged in a [`Flight`], each on a thread of its own (not one
    /// of the pool's).
    pub fn new(opts: Options, sources: SourceFiles, pool: Arc<ThreadPool>) -> Merger {
        Merger {
            opts,
            sources,
            pool,
        }
    }

    /// Read and check a merge op's input frame headers, partition its
    /// blobs into chains and plan its runs. Nothing is decoded until
    /// [`Merger::execute`].
    pub(crate) fn prepare(&self, op: &MergeOp) -> Result<Prepared> {
        let clock = Clock::start();
        let order = input::file_order(op)?;
        let beside = graph::Tasks::default();
        let (inputs, chains) = self.read_and_partition(op, &order, &beside)?;
        let inputs = Arc::new(inputs);
        drop(order);
        let blobs = &inputs.blobs;
        let mut stats = MergeStats {
            inputs: blobs.len() as u64,
            elements_in: blobs.iter().map(|b| u64::from(b.elements)).sum(),
            ..MergeStats::default()
        };
        // Every blob's entry, and its index in the load that reads it.
        let entry = size_of::<input::InputBlob>();
        stats.held = (blobs.capacity() * entry + blobs.len() * size_of::<u32>()) as u64;
        let threads = self.pool.current_num_threads();
        let budget = Budget::new(self.opts.memory, stats.held, threads);
        stats.chains = chains.len() as u64;
        let runs = runs::plan(&inputs, &chains, budget);
        stats.batches = runs.iter().filter(|r| r.is_batch()).count() as u64;
        let spill = match budget.fits(&runs) && stats.batches < 2 {
            true => {
                stats.final_memory = Run::memory_of(&runs);
                None
            }
            false => Some(budget),
        };
        // This thread's work, then the tasks it waited for (which ran
        // beside part of it).
        stats.span = Span::task(clock.elapsed()).then(beside.span());
        let merged_bytes = inputs.merged_bytes();
        Ok(Prepared {
            stats,
            runs,
            spill,
            merged_bytes,
        })
    }

    /// Merge a prepared op into `target`, spilling first where it must.
    fn execute<T: Target>(&self, prepared: Prepared, target: T) -> Result<MergeStats> {
        let mut stats = prepared.stats;
        let meter = Meter::new(
            self.opts.progress.clone(),
            prepared.merged_bytes,
            stats.elements_in,
        );
        let (runs, side_by_side) = match prepared.spill {
            None => (prepared.runs, 1),
            Some(budget) => {
                let runs = self.compact(prepared.runs, budget, &mut stats)?;
                let runs = self.fit(runs, budget, &mut stats)?;
                self.opts.progress.phase(Phase::Final);
                stats.final_memory = Run::memory_of(&runs);
                let side_by_side = self.pieces_side_by_side(&runs, budget.runs);
                (runs, side_by_side)
            }
        };
        let encode = self.opts.encode;
        let cut = Cut {
            elements: encode.max_elements,
            encoded: encode.max_bytes,
            approx: usize::MAX,
        };
        let format = BlockFormat::PbfFrame(self.opts.compression, encode, self.opts.indexdata);
        let w =
            BlockWriter::new(target, format, cut, self.opts.keep, self.pool.clone()).metered(meter);
        let cuts = pieces::boundaries(&runs);
        let merged = match cuts.is_empty() || side_by_side < 2 {
            true => self.merge_runs(runs, w)?,
            false => self.merge_pieces(runs, &cuts, None, w, side_by_side)?,
        };
        stats.span = stats.span.then(merged.span);
        stats.elements_out = merged.written;
        stats.duplicates += merged.dropped;
        if stats.elements_out + stats.duplicates != stats.elements_in {
            return Err(Error::Internal(format!(
                "read {} elements, wrote {} and dropped {}",
                stats.elements_in, stats.elements_out, stats.duplicates
            )));
        }
        Ok(stats)
    }

    /// How many pieces of a merge of `runs` may be merged at once within
    /// `limit` bytes, one more than the pool's threads at most (1: one
    /// merge). With n pieces at once a run holds at most 2n of its loads
    /// decoded (a piece's stream holds one and reads one ahead; a load that
    /// spans pieces is decoded once), a run of one load one however many
    /// pieces share it, and packets kept in memory are shared by all.
    /// Only an op that holds the whole budget (one that had to sort batches
    /// or spill: it runs alone) is merged in pieces.
    pub(crate) fn pieces_side_by_side(&self, runs: &[Run], limit: u64) -> usize {
        let shared: u64 = runs.iter().map(|r| r.memory - r.decoded()).sum();
        let need = |n: usize| -> u64 {
            let loads = |r: &Run| r.loads().min(2 * n) as u64;
            shared
                + runs
                    .iter()
                    .map(|r| loads(r) * (r.decoded() / 2))
                    .sum::<u64>()
        };
        let most = self.pool.current_num_threads() + 1;
        (2..=most)
            .take_while(|&n| need(n) <= limit)
            .last()
            .unwrap_or(1)
    }
}

/// What one k-way merge wrote.
pub(crate) struct Merged<T> {
    pub target: T,
    pub written: u64,
    pub dropped: u64,
    pub span: Span,
}

impl<T: Target> Merged<T> {
    /// What `w` wrote, once finished, after the merge of `span`.
    pub fn of(w: BlockWriter<T>, span: Span) -> Result<Merged<T>> {
        let (written, dropped, encodes) = (w.written, w.dropped, Arc::clone(&w.tasks));
        let target = w.finish()?;
        Ok(Merged {
            target,
            written,
            dropped,
            span: span.then(encodes.span()),
        })
    }
}
