//! Spilling: when the chains of a merge op would hold more decoded
//! elements than the memory budget, groups of runs that fit are merged into
//! one sorted run each, written as spill records ([`crate::record`]) to an
//! anonymous temporary file beside the spool, and read back one record at a
//! time; groups of spilled runs are merged again until what is left fits.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::input::InputBlob;
use crate::record;
use crate::sorted::Block;
use crate::stream::Loader;
use crate::writer::{BlockWriter, Codec, Cut, Encoded, Target};
use crate::{MergeStats, Merger, merge};

impl Merger {
    /// True when `runs` can be merged as they are: one run, or all of them
    /// within the memory budget.
    pub(crate) fn fits(&self, runs: &[Run]) -> bool {
        runs.len() <= 1 || Run::memory_of(runs) <= self.opts.memory
    }

    /// Spill groups of runs until the runs left fit the memory budget.
    pub(crate) fn fit(&self, mut runs: Vec<Run>, stats: &mut MergeStats) -> Result<Vec<Run>> {
        let budget = self.opts.memory;
        loop {
            if self.fits(&runs) {
                return Ok(runs);
            }
            let mut remaining = Run::memory_of(&runs);
            stats.spill_levels += 1;
            let mut file = SpillFile::create(&self.opts.spill_dir)?;
            let mut rest: std::collections::VecDeque<Run> = runs.into();
            let mut next = Vec::new();
            while remaining > budget && rest.len() >= 2 {
                let (mut group, mut group_memory) = (Vec::new(), 0u64);
                while let Some(r) = rest.front() {
                    if group.len() >= 2 && group_memory + r.memory > budget {
                        break;
                    }
                    group_memory += r.memory;
                    group.extend(rest.pop_front());
                }
                let run = self.spill(group, &mut file, stats)?;
                remaining = remaining - group_memory + run.memory;
                next.push(run);
            }
            next.extend(rest);
            runs = next;
        }
    }

    /// Merge a group of runs into one sorted run in a spill file.
    fn spill(&self, group: Vec<Run>, file: &mut SpillFile, stats: &mut MergeStats) -> Result<Run> {
        let target = SpillTarget {
            file,
            records: Vec::new(),
            max_approx: 0,
        };
        let block_bytes = (self.opts.memory / 16).clamp(16 << 10, 16 << 20) as usize;
        let cut = Cut {
            elements: self.opts.encode.max_elements,
            encoded: self.opts.encode.max_bytes,
            approx: block_bytes,
        };
        let codec = Codec::Spill(self.opts.spill_compression);
        let mut w = BlockWriter::new(target, codec, cut, self.opts.dedupe, self.pool.clone());
        merge::merge(self.streams(group), &mut w)?;
        stats.duplicates += w.dropped;
        let target = w.finish()?;
        stats.spilled_runs += 1;
        stats.spilled_bytes += target.records.iter().map(|r| u64::from(r.1)).sum::<u64>();
        Ok(Run {
            memory: 2 * target.max_approx,
            source: RunSource::Spilled {
                file: Arc::clone(&target.file.file),
                dir: target.file.dir.clone(),
                records: target.records,
            },
        })
    }
}

/// A sorted run to merge: a chain of input blobs or a spilled run.
pub(crate) struct Run {
    source: RunSource,
    /// Decoded memory it needs while merged: two blocks (one read ahead).
    pub(crate) memory: u64,
}

enum RunSource {
    Chain(Vec<Arc<InputBlob>>),
    Spilled {
        file: Arc<File>,
        dir: PathBuf,
        records: Vec<(u64, u32)>,
    },
}

impl Run {
    /// The memory `runs` need together while merged.
    pub(crate) fn memory_of(runs: &[Run]) -> u64 {
        runs.iter().map(|r| r.memory).sum()
    }

    pub(crate) fn chain(blobs: Vec<Arc<InputBlob>>) -> Run {
        let largest = blobs.iter().map(|b| b.estimate).max().unwrap_or(0);
        Run {
            source: RunSource::Chain(blobs),
            memory: 2 * largest,
        }
    }

    pub(crate) fn loaders(self) -> Vec<Loader> {
        match self.source {
            RunSource::Chain(blobs) => blobs
                .into_iter()
                .map(|b| Box::new(move || b.load()) as Loader)
                .collect(),
            RunSource::Spilled { file, dir, records } => records
                .into_iter()
                .map(|(offset, len)| {
                    let (file, dir) = (Arc::clone(&file), dir.clone());
                    Box::new(move || read_spilled(&file, &dir, offset, len)) as Loader
                })
                .collect(),
        }
    }
}

fn read_spilled(file: &File, dir: &Path, offset: u64, len: u32) -> Result<Block> {
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| Error::spill(dir, e))?;
    record::read_record(&buf).map_err(|e| match e.kind() {
        ErrorKind::CorruptSpill(m) => Error::new(ErrorKind::CorruptSpill(format!(
            "record at offset {offset} in {}: {m}",
            dir.display()
        ))),
        _ => e,
    })
}

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

/// Writes one spilled run's records into a spill file.
struct SpillTarget<'a> {
    file: &'a mut SpillFile,
    records: Vec<(u64, u32)>,
    max_approx: u64,
}

impl Target for SpillTarget<'_> {
    fn write(&mut self, block: Encoded) -> Result<()> {
        let f = &mut *self.file;
        f.file
            .write_all_at(&block.bytes, f.len)
            .map_err(|e| Error::spill(&f.dir, e))?;
        self.records.push((f.len, block.bytes.len() as u32));
        f.len += block.bytes.len() as u64;
        self.max_approx = self.max_approx.max(block.approx);
        Ok(())
    }
}
