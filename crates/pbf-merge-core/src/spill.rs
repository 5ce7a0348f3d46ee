//! Spilling: batches of small blobs are merged, a group at a time, into
//! runs of spill packets ([`crate::packet`]) kept in memory (a spill file
//! past half the budget); when the runs of a merge op would then hold more
//! than the budget, groups of runs that fit are merged into one sorted run
//! each, written as spill packets to an anonymous temporary file beside the
//! spool, and read back one packet at a time; groups of spilled runs are
//! merged again until what is left fits.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::graph::Span;
use crate::pieces::in_turns;
use crate::progress::Phase;
use crate::run::Run;
use crate::writer::{BlockFormat, BlockWriter, Cut, Encoded, Target};
use crate::{MergeStats, Merger, lock};

impl Merger {
    /// Spill groups of runs until the runs left fit the budget for runs.
    /// A group takes the budget for runs, so groups are merged one at a
    /// time, and levels one after another.
    pub(crate) fn fit(
        &self,
        mut runs: Vec<Run>,
        budget: Budget,
        stats: &mut MergeStats,
    ) -> Result<Vec<Run>> {
        let limit = budget.runs;
        loop {
            if budget.fits(&runs) {
                return Ok(runs);
            }
            let mut remaining = Run::memory_of(&runs);
            stats.spill_levels += 1;
            self.opts
                .progress
                .phase(Phase::Spilling(stats.spill_levels));
            let file = Mutex::new(SpillFile::create(&self.opts.spill_dir)?);
            let mut rest: VecDeque<Run> = runs.into();
            let mut next = Vec::new();
            while remaining > limit && rest.len() >= 2 {
                let (group, group_memory) = take_group(&mut rest, limit, 2);
                let (run, dropped, span) = self.spill(group, budget, Place::File(&file), true)?;
                run.count_spilled(stats);
                stats.duplicates += dropped;
                stats.span = stats.span.then(span);
                remaining = remaining - group_memory + run.memory;
                next.push(run);
            }
            next.extend(rest);
            runs = next;
        }
    }

    /// Sort batches of small blobs into compact runs, a group of batches
    /// at a time, up to [`GROUPS`] groups side by side, each on a thread of
    /// its own: a decoded object takes ten times the bytes of its spill
    /// packet, so a shuffled file of small blobs would otherwise hold all
    /// its objects decoded. The runs stay in memory while they take at most
    /// half the budget for runs (counting a group being sorted at a quarter
    /// of its batches' bytes until its packets are known), and go to a
    /// spill file past that. Fewer than two batches are left as they are.
    pub(crate) fn compact(
        &self,
        runs: Vec<Run>,
        budget: Budget,
        stats: &mut MergeStats,
    ) -> Result<Vec<Run>> {
        let (batches, mut out): (Vec<Run>, Vec<Run>) = runs.into_iter().partition(Run::is_batch);
        if batches.len() < 2 {
            out.extend(batches);
            return Ok(out);
        }
        // At least SPREAD groups where the batches allow, so that no
        // group's merge is a large share of the work.
        let total = Run::memory_of(&batches);
        let limit = budget.group.min((total / SPREAD).max(budget.batch));
        let mut rest: VecDeque<Run> = batches.into();
        let mut groups = Vec::new();
        while !rest.is_empty() {
            groups.push(take_group(&mut rest, limit, 1));
        }
        let side_by_side = self.pool.current_num_threads().clamp(2, GROUPS);
        let (file, kept) = (OnceLock::new(), Mutex::new(0));
        let each = |_, (group, memory): (Vec<Run>, u64)| {
            // A group's runs are counted at a quarter of its batches until
            // its packets are known.
            let reserve = memory / 4;
            let in_memory = {
                let mut kept = lock(&kept);
                let fits = *kept + reserve <= budget.runs / 2;
                *kept += if fits { reserve } else { 0 };
                fits
            };
            if !in_memory {
                // One spill file for the groups, created on first use: two
                // threads may both create one, and the loser's is deleted
                // unused when dropped.
                if file.get().is_none() {
                    let _ = file.set(Mutex::new(SpillFile::create(&self.opts.spill_dir)?));
                }
                let Some(file) = file.get() else {
                    return Err(Error::Internal("no spill file".into()));
                };
                return self.spill(group, budget, Place::File(file), false);
            }
            let sorted = self.spill(group, budget, Place::Memory, false)?;
            let mut kept = lock(&kept);
            *kept = *kept - reserve + sorted.0.kept_bytes();
            Ok(sorted)
        };
        let mut span = Span::default();
        for (run, dropped, spilled) in in_turns(groups, side_by_side, each, || Ok(()))? {
            run.count_spilled(stats);
            stats.duplicates += dropped;
            span = span.beside(spilled);
            out.push(run);
        }
        stats.span = stats.span.then(span);
        Ok(out)
    }

    /// Merge a group of runs into one sorted run of spill packets, kept in
    /// memory or written to a spill file; returns it, the repeats dropped
    /// and the span of the merge. `in_pieces`: cut into key ranges
    /// merged side by side as memory allows, each piece writing its own
    /// packets, the run's packets being the pieces' in key order (a group
    /// that spills to a file takes the budget, so it is merged alone;
    /// groups of batches are sorted side by side already).
    fn spill(
        &self,
        group: Vec<Run>,
        budget: Budget,
        place: Place<'_>,
        in_pieces: bool,
    ) -> Result<(Run, u64, Span)> {
        let block_bytes = (budget.runs / 16).clamp(16 << 10, 16 << 20) as usize;
        let cut = Cut {
            elements: self.opts.encode.max_elements.min(PACKET_ELEMENTS),
            encoded: self.opts.encode.max_bytes,
            approx: block_bytes,
        };
        let format = BlockFormat::SpillPacket(self.opts.spill_compression);
        let writer = || {
            let target = SpillTarget::new(place);
            BlockWriter::new(target, format, cut, self.opts.keep, self.pool.clone())
        };
        let side_by_side = match in_pieces {
            true => self.pieces_side_by_side(&group, budget.runs),
            false => 1,
        };
        let mut cuts = match side_by_side {
            1 => Vec::new(),
            _ => crate::pieces::boundaries(&group),
        };
        let (mut loaded, mut loading) = (None, Span::default());
        if side_by_side > 1 && cuts.is_empty() && group.iter().all(|r| r.loads() == 1) {
            let (blocks, found, span) = self.load_and_cut(&group)?;
            (loaded, cuts, loading) = (Some(blocks), found, span);
        }
        // Merged as pieces, one (of every key) if need be, each writing its
        // own packets.
        let pieces = cuts.len() + 1;
        let writer = || writer().sharing(side_by_side.min(pieces));
        let (merged, span) = self.merge_pieces_apart(group, &cuts, loaded, writer, side_by_side)?;
        let mut target = SpillTarget::new(place);
        let mut dropped = 0;
        for piece in merged {
            target.extend(piece.target);
            dropped += piece.dropped;
        }
        let decoded = 2 * target.max_approx;
        let run = match target.place {
            Place::Memory => {
                let bytes: u64 = target.kept.iter().map(|r| r.len() as u64).sum();
                Run::kept(target.kept, target.bounds, decoded + bytes)
            }
            Place::File(file) => {
                let file = lock(file);
                let (packets, bounds) = (target.offsets, target.bounds);
                Run::spilled(&file.file, &file.dir, packets, bounds, decoded)
            }
        };
        Ok((run, dropped, loading.then(span)))
    }
}

/// Groups the batches of an op are sorted in, at least, where there are
/// enough batches.
const SPREAD: u64 = 16;

/// Elements of a spill packet, at most: small enough that the final merge
/// of a few runs has loads to cut into pieces ([`crate::pieces`]).
const PACKET_ELEMENTS: usize = 2048;

/// Groups of batches sorted side by side at most (each holds up to
/// [`Budget::group`]).
pub(crate) const GROUPS: usize = 4;

/// Take runs from the front of `rest` while they need at most `limit`
/// together, and at least `least` of them; returns them and what they need.
fn take_group(rest: &mut VecDeque<Run>, limit: u64, least: usize) -> (Vec<Run>, u64) {
    let (mut group, mut memory) = (Vec::new(), 0u64);
    while let Some(r) = rest.front() {
        if group.len() >= least && memory + r.memory > limit {
            break;
        }
        memory += r.memory;
        group.extend(rest.pop_front());
    }
    (group, memory)
}

/// How the memory budget of one merge op is spent: the blobs' entries come
/// off the top; of the rest, the sorting of batches being loaded may take up
/// to a quarter, and the runs merged at once the other three.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// For the runs merged at once ([`Run::memory`]).
    pub runs: u64,
    /// The most one batch of small blobs may hold.
    pub batch: u64,
    /// The most the batches sorted into one compact run may hold together:
    /// [`GROUPS`] groups sorted side by side hold half the budget, whatever
    /// the number of threads.
    pub group: u64,
}

impl Budget {
    /// The budget left of `memory` after `held` bytes of input blob entries, for a
    /// pool of `threads` threads, each of which may be sorting a batch.
    pub fn new(memory: u64, held: u64, threads: usize) -> Budget {
        let work = memory.saturating_sub(held).max(memory.min(MIN_WORK));
        let threads = threads.max(1) as u64;
        let batch = (work / 4 / threads).clamp(1, BATCH);
        Budget {
            runs: work - work / 4,
            batch,
            group: (work / 2 / GROUPS as u64).max(batch),
        }
    }

    /// True when `runs` can be merged as they are: one run, or all of them
    /// within the budget.
    pub fn fits(&self, runs: &[Run]) -> bool {
        runs.len() <= 1 || Run::memory_of(runs) <= self.runs
    }
}

/// The largest batch of small blobs, in estimated bytes: a batch is sorted
/// into a compact run (with the others of its group), so larger ones would
/// only hold more memory for the while.
const BATCH: u64 = 16 << 20;

/// The least budget a merge works with, whatever its blobs' entries take
/// (unless given less): past that, it spills on as many levels as it needs.
const MIN_WORK: u64 = 64 << 10;

/// An anonymous temporary file beside the spool; the OS deletes it when the
/// last run reading it is dropped.
struct SpillFile {
    file: Arc<File>,
    dir: PathBuf,
    len: u64,
}

impl SpillFile {
    fn create(dir: &Path) -> Result<SpillFile> {
        let file = tempfile::tempfile_in(dir).map_err(|e| Error::spill(dir, e))?;
        Ok(SpillFile {
            file: Arc::new(file),
            dir: dir.to_path_buf(),
            len: 0,
        })
    }
}

/// Where a spilled run's packets go.
#[derive(Clone, Copy)]
enum Place<'a> {
    /// Kept in memory.
    Memory,
    /// Written to a spill file (shared by the groups sorted side by side).
    File(&'a Mutex<SpillFile>),
}

/// Writes one spilled run's packets.
struct SpillTarget<'a> {
    place: Place<'a>,
    /// Packets in the file: (offset, length).
    offsets: Vec<(u64, u32)>,
    /// Packets in memory.
    kept: Vec<Arc<Vec<u8>>>,
    /// The keys (first, last) of each packet.
    bounds: Vec<(u128, u128)>,
    max_approx: u64,
}

impl<'a> SpillTarget<'a> {
    fn new(place: Place<'a>) -> SpillTarget<'a> {
        SpillTarget {
            place,
            offsets: Vec::new(),
            kept: Vec::new(),
            bounds: Vec::new(),
            max_approx: 0,
        }
    }

    /// Add the packets of `next`, whose keys follow this one's.
    fn extend(&mut self, next: SpillTarget<'a>) {
        self.offsets.extend(next.offsets);
        self.kept.extend(next.kept);
        self.bounds.extend(next.bounds);
        self.max_approx = self.max_approx.max(next.max_approx);
    }
}

impl Target for SpillTarget<'_> {
    fn write(&mut self, block: Encoded) -> Result<()> {
        self.max_approx = self.max_approx.max(block.approx);
        let (first, last) = (block.summary.first.packed(), block.summary.last.packed());
        self.bounds.push((first, last));
        let mut f = match &self.place {
            Place::Memory => {
                self.kept.push(Arc::new(block.bytes));
                return Ok(());
            }
            Place::File(f) => lock(f),
        };
        f.file
            .write_all_at(&block.bytes, f.len)
            .map_err(|e| Error::spill(&f.dir, e))?;
        self.offsets.push((f.len, block.bytes.len() as u32));
        f.len += block.bytes.len() as u64;
        Ok(())
    }
}
