//! The merge engine behind `pbf-merge`: executes one plan `merge` op (blobs
//! whose key ranges overlap) into sorted, re-encoded PBF frames appended to a
//! [`Spool`], in bounded memory.
//!
//! How a run is merged:
//! 1. every input frame header is read and checked against the plan
//!    ([`SourceFiles`] checked every source's identity when it was opened);
//! 2. the blobs are partitioned into the fewest chains of mutually
//!    non-overlapping blobs ([`chains::partition`]); a chain is one sorted
//!    stream that holds one load at a time (plus one read ahead): a blob,
//!    or consecutive small blobs of up to 1 MiB decoded. A blob that is
//!    unsorted inside is sorted when it is decoded. The blobs of chains
//!    smaller than that are gathered into batches, each decoded into one
//!    block and sorted (see `runs.rs`), and with two batches or more,
//!    groups of batches are merged into runs of spill records kept in
//!    memory (or in a spill file past half the budget). Where the plan's
//!    keys bound every chain to a few blobs that are small together, the
//!    chains are not formed and every blob is batched (`prepare.rs`);
//! 3. if the runs together would hold more than the budget (what is left
//!    of [`Options::memory`] after a 64-byte record per input blob, less a
//!    quarter for the batches being sorted), groups of runs that fit are
//!    merged into sorted temporary runs (spill files beside the spool,
//!    fast compression, deleted when closed), and groups of runs again until
//!    what is left fits (multi-level);
//! 4. the remaining runs are k-way merged with galloping, cut into blocks of
//!    up to 8000 elements, encoded and compressed in parallel, and appended to
//!    the spool in order; each block's BlobHeader carries our indexdata.
//!
//! Equal keys (same type, id and version) are ordered as `osmium sort` orders
//! them: by timestamp, then in input order (source id, blob offset, position
//! in blob); see [`pbf_format::key`]. With [`Options::dedupe`] only the first
//! is kept.
//! The caller learns about written frames through a callback as soon as they
//! are in the spool, so a downstream stage can copy them while later blocks
//! and runs are still being merged.
#![deny(missing_docs)]

pub mod chains;
mod error;
mod input;
mod merge;
mod prepare;
mod record;
mod runs;
mod sorted;
mod spill;
mod spool;
mod stream;
mod writer;

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use pbf_format::block::EncodeOptions;
use pbf_format::compress::Compression;
use pbf_format::scan::Summary;
use pbf_stream::MergeOp;
use rayon::ThreadPool;

pub use error::{Error, ErrorKind, Result};
pub use input::{LoadProgress, SourceFiles};
pub use spool::Spool;

use prepare::Partition;
use spill::{Budget, Run};
use stream::Stream;
use writer::{BlockFormat, BlockWriter, Cut, Encoded, Target};

/// How to merge.
#[derive(Clone, Debug)]
pub struct Options {
    /// Memory budget of a merge op (default 1 GiB): a record of each input
    /// blob, decoded objects (estimated from the blobs' sizes and object
    /// counts, and for spill records by each object's decoded size as the
    /// merge counts it) and sorted runs kept in memory. Encoding buffers (a few blocks per thread) come on
    /// top.
    pub memory: u64,
    /// Compression of the output blocks (default zlib:6).
    pub compression: Compression,
    /// Drop repeated (type, id, version), keeping the one that sorts first.
    pub dedupe: bool,
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
    /// Told the length of every input frame once it is decoded (progress).
    pub on_load: LoadProgress,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            memory: 1 << 30,
            compression: Compression::default(),
            dedupe: false,
            encode: EncodeOptions::default(),
            spill_compression: Compression::Lz4,
            spill_dir: std::env::temp_dir(),
            align: 0,
            indexdata: false,
            on_load: LoadProgress::default(),
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
    /// Elements dropped by `dedupe`.
    pub duplicates: u64,
    /// Chains the inputs formed (0 when they were not formed because none
    /// could be large: see [`MergeStats::longest_chain`]).
    pub chains: u64,
    /// When the chains were not formed: no chain could hold more than
    /// this many blobs, and that many together are small, so every blob
    /// was batched (0 when the chains were formed).
    pub longest_chain: u64,
    /// Batches the blobs of small chains were gathered into, each merged
    /// as one sorted run.
    pub batches: u64,
    /// Bytes held for the inputs' records while merging, taken off the
    /// memory budget.
    pub held: u64,
    /// Spill levels (0: merged directly).
    pub spill_levels: u64,
    /// Temporary runs written.
    pub spilled_runs: u64,
    /// Bytes written to spill files.
    pub spilled_bytes: u64,
    /// Sorted runs of spill records kept in memory.
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
}

/// A merge op whose inputs are checked and partitioned
/// ([`Merger::prepare`]), ready for [`Merger::merge_prepared`].
pub struct Prepared {
    stats: MergeStats,
    start: Start,
}

/// How a prepared op starts.
enum Start {
    /// The runs fit the budget; their first blocks are loading.
    Loading(Vec<Stream>),
    /// Batches of small blobs must be sorted into compact runs, or runs
    /// spilled into fewer runs, first.
    MustSpill(Vec<Run>, Budget),
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let start = match &self.start {
            Start::Loading(s) => format!("loading {} streams", s.len()),
            Start::MustSpill(r, _) => format!("{} runs to spill", r.len()),
        };
        f.debug_struct("Prepared")
            .field("stats", &self.stats)
            .field("start", &start)
            .finish()
    }
}

/// Bytes of frames reported to the caller at a time (a run's last frames
/// are reported when it ends, whatever their size).
const REPORT_BYTES: u64 = 8 << 20;

/// Executes merge ops.
#[derive(Debug)]
pub struct Merger {
    opts: Options,
    sources: SourceFiles,
    pool: Arc<ThreadPool>,
}

impl Merger {
    /// A merger reading from `sources`, decoding and encoding on `pool`. The
    /// merge itself runs on the calling thread, which must not be one of the
    /// pool's threads.
    pub fn new(opts: Options, sources: SourceFiles, pool: Arc<ThreadPool>) -> Merger {
        Merger {
            opts,
            sources,
            pool,
        }
    }

    /// Execute one merge op, appending sorted frames to `spool`. `report` is
    /// called with frames already written, in order, at least once per 8 MiB
    /// and once at the end.
    pub fn merge(
        &self,
        op: &MergeOp,
        spool: &mut Spool,
        report: &mut dyn FnMut(&[WrittenFrame]) -> io::Result<()>,
    ) -> Result<MergeStats> {
        self.merge_prepared(self.prepare(op)?, spool, report, &mut || {})
    }

    /// Read and check a merge op's input frame headers, partition its
    /// blobs into chains and plan its runs. When the runs fit the memory
    /// budget as they are, their first blocks start loading on the pool
    /// now; an op whose batches must be sorted into runs, or that must
    /// spill, does nothing more until [`Merger::merge_prepared`].
    pub fn prepare(&self, op: &MergeOp) -> Result<Prepared> {
        let order = input::file_order(op)?;
        let (inputs, partition) =
            prepare::read_and_partition(op, &order, &self.sources, &self.opts.on_load)?;
        let inputs = Arc::new(inputs);
        drop(order);
        let blobs = &inputs.blobs;
        let mut stats = MergeStats {
            inputs: blobs.len() as u64,
            elements_in: blobs.iter().map(|b| u64::from(b.elements)).sum(),
            ..MergeStats::default()
        };
        // Every blob's record, and its index in the load that reads it.
        stats.held = (inputs.heap_size() + blobs.len() * size_of::<u32>()) as u64;
        let threads = self.pool.current_num_threads();
        let budget = Budget::new(self.opts.memory, stats.held, threads);
        let runs = match partition {
            Partition::Chains(chains) => {
                stats.chains = chains.len() as u64;
                runs::plan(&inputs, &chains, budget)
            }
            Partition::AllSmall(longest) => {
                stats.longest_chain = longest as u64;
                runs::plan_small(&inputs, budget)
            }
        };
        stats.batches = runs.iter().filter(|r| r.is_batch()).count() as u64;
        let start = if budget.fits(&runs) && stats.batches < 2 {
            stats.final_memory = Run::memory_of(&runs);
            Start::Loading(self.streams(runs))
        } else {
            Start::MustSpill(runs, budget)
        };
        Ok(Prepared { stats, start })
    }

    /// Execute a prepared merge op, as [`Merger::merge`] does. `before_tail`
    /// is called once every element is merged, while the last blocks are
    /// still being encoded: preparing the next op there lets its first
    /// blocks decode meanwhile, so the pool does not idle between ops.
    pub fn merge_prepared(
        &self,
        prepared: Prepared,
        spool: &mut Spool,
        report: &mut dyn FnMut(&[WrittenFrame]) -> io::Result<()>,
        before_tail: &mut dyn FnMut(),
    ) -> Result<MergeStats> {
        let mut stats = prepared.stats;
        let streams = match prepared.start {
            Start::Loading(streams) => streams,
            Start::MustSpill(runs, budget) => {
                let runs = self.compact(runs, budget, &mut stats)?;
                let runs = self.fit(runs, budget, &mut stats)?;
                stats.final_memory = Run::memory_of(&runs);
                self.streams(runs)
            }
        };
        if self.opts.align > 1 {
            stats.padding = spool.align(self.opts.align)?;
        }
        let target = SpoolTarget {
            spool,
            report,
            pending: Vec::new(),
            pending_bytes: 0,
            frames: 0,
            bytes: 0,
        };
        let encode = self.opts.encode;
        let cut = Cut {
            elements: encode.max_elements,
            encoded: encode.max_bytes,
            approx: usize::MAX,
        };
        let format = BlockFormat::PbfFrame(self.opts.compression, encode, self.opts.indexdata);
        let mut w = BlockWriter::new(target, format, cut, self.opts.dedupe, self.pool.clone());
        merge::merge(streams, &mut w)?;
        before_tail();
        let (written, dropped) = (w.written, w.dropped);
        let mut target = w.finish()?;
        target.flush()?;
        stats.elements_out = written;
        stats.duplicates += dropped;
        (stats.frames, stats.bytes) = (target.frames, target.bytes);
        if stats.elements_out + stats.duplicates != stats.elements_in {
            return Err(Error::new(ErrorKind::Internal(format!(
                "read {} elements, wrote {} and dropped {}",
                stats.elements_in, stats.elements_out, stats.duplicates
            ))));
        }
        Ok(stats)
    }

    fn streams(&self, runs: Vec<Run>) -> Vec<Stream> {
        runs.into_iter()
            .map(|r| Stream::new(r.loaders(), Arc::clone(&self.pool)))
            .collect()
    }
}

/// Appends frames to the spool and reports them to the caller.
struct SpoolTarget<'a> {
    spool: &'a mut Spool,
    report: &'a mut dyn FnMut(&[WrittenFrame]) -> io::Result<()>,
    pending: Vec<WrittenFrame>,
    pending_bytes: u64,
    frames: u64,
    bytes: u64,
}

impl SpoolTarget<'_> {
    fn flush(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            (self.report)(&self.pending).map_err(|e| Error::new(ErrorKind::Output(e)))?;
            self.pending.clear();
            self.pending_bytes = 0;
        }
        Ok(())
    }
}

impl Target for SpoolTarget<'_> {
    fn write(&mut self, block: Encoded) -> Result<()> {
        let length = block.bytes.len() as u64;
        let offset = self.spool.append(&block.bytes)?;
        self.pending.push(WrittenFrame {
            offset,
            length,
            summary: block.summary,
        });
        self.pending_bytes += length;
        self.frames += 1;
        self.bytes += length;
        if self.pending_bytes >= REPORT_BYTES {
            self.flush()?;
        }
        Ok(())
    }
}
