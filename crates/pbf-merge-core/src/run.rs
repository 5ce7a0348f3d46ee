//! A sorted run to merge and where its loads come from: a chain's blobs,
//! a batch of small blobs, or spill packets kept in memory or written to a
//! spill file. Planning runs (`runs.rs`), spilling them (`spill.rs`) and
//! merging them in pieces (`pieces.rs`) all read runs through this one
//! type.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::MergeStats;
use crate::error::{Error, Result};
use crate::input::{Inputs, Load};
use crate::packet;
use crate::sorted::Block;

/// A sorted run to merge: blobs loaded in turn (a chain, or one batch of
/// small blobs) or a spilled run.
pub(crate) struct Run {
    source: RunSource,
    /// Decoded memory it needs while merged: for a chain two loads (one
    /// read ahead), for a batch the batch.
    pub(crate) memory: u64,
    /// A batch of several small blobs, to be sorted into a compact run.
    batch: bool,
}

enum RunSource {
    Loads(Arc<Inputs>, Vec<Load>),
    /// Spill packets kept in memory, and the keys (first, last) of each.
    Kept(Vec<Arc<Vec<u8>>>, Vec<(u128, u128)>),
    Spilled {
        file: Arc<File>,
        dir: PathBuf,
        packets: Vec<(u64, u32)>,
        bounds: Vec<(u128, u128)>,
    },
}

impl Run {
    /// The memory `runs` need together while merged.
    pub(crate) fn memory_of(runs: &[Run]) -> u64 {
        runs.iter().map(|r| r.memory).sum()
    }

    /// True for a batch of several small blobs ([`Run::batch`]).
    pub(crate) fn is_batch(&self) -> bool {
        self.batch
    }

    /// A chain's run: loads that follow each other in key order, needing
    /// `memory`.
    pub(crate) fn chain(inputs: &Arc<Inputs>, loads: Vec<Load>, memory: u64) -> Run {
        Run {
            source: RunSource::Loads(Arc::clone(inputs), loads),
            memory,
            batch: false,
        }
    }

    /// A batch of small blobs of other chains, loaded and sorted as one
    /// block of `memory` bytes. Only a batch of several blobs counts as a
    /// batch ([`Run::is_batch`]); one blob is merged as a chain's is.
    pub(crate) fn batch(inputs: &Arc<Inputs>, load: Load, memory: u64) -> Run {
        let batch = load.len() > 1;
        Run {
            batch,
            ..Run::chain(inputs, vec![load], memory)
        }
    }

    /// A run of spill packets kept in memory, with their keys (first,
    /// last), needing `memory`.
    pub(crate) fn kept(packets: Vec<Arc<Vec<u8>>>, bounds: Vec<(u128, u128)>, memory: u64) -> Run {
        Run {
            memory,
            source: RunSource::Kept(packets, bounds),
            batch: false,
        }
    }

    /// A run of spill packets in `file` (a spill file in `dir`): each
    /// packet's (offset, length) and keys (first, last); needing `memory`.
    pub(crate) fn spilled(
        file: &Arc<File>,
        dir: &Path,
        packets: Vec<(u64, u32)>,
        bounds: Vec<(u128, u128)>,
        memory: u64,
    ) -> Run {
        Run {
            memory,
            source: RunSource::Spilled {
                file: Arc::clone(file),
                dir: dir.to_path_buf(),
                packets,
                bounds,
            },
            batch: false,
        }
    }

    /// How many loads the run has.
    pub(crate) fn loads(&self) -> usize {
        match &self.source {
            RunSource::Loads(_, loads) => loads.len(),
            RunSource::Kept(packets, _) => packets.len(),
            RunSource::Spilled { packets, .. } => packets.len(),
        }
    }

    /// The keys (first, last) of load `i`.
    pub(crate) fn bounds(&self, i: usize) -> (u128, u128) {
        match &self.source {
            RunSource::Loads(inputs, loads) => {
                let blobs = loads[i].iter().map(|&b| &inputs.blobs[b as usize]);
                let first = blobs.clone().map(|b| b.first()).min().unwrap_or(0);
                (first, blobs.map(|b| b.last()).max().unwrap_or(0))
            }
            RunSource::Kept(_, bounds) | RunSource::Spilled { bounds, .. } => bounds[i],
        }
    }

    /// Load `i`, decoded and sorted.
    pub(crate) fn load(&self, i: usize) -> Result<Block> {
        match &self.source {
            RunSource::Loads(inputs, loads) => inputs.load(&loads[i]),
            RunSource::Kept(packets, _) => packet::read_packet(&packets[i]).map_err(|e| match e {
                Error::CorruptSpill(m) => Error::Internal(format!("a packet kept in memory: {m}")),
                _ => e,
            }),
            RunSource::Spilled {
                file, dir, packets, ..
            } => {
                let (offset, len) = packets[i];
                let mut buf = vec![0u8; len as usize];
                file.read_exact_at(&mut buf, offset)
                    .map_err(|e| Error::spill(dir, e))?;
                packet::read_packet(&buf).map_err(|e| match e {
                    Error::CorruptSpill(m) => Error::CorruptSpill(format!(
                        "packet at offset {offset} in {}: {m}",
                        dir.display()
                    )),
                    _ => e,
                })
            }
        }
    }

    /// Bytes of its spill packets kept in memory (which copies of it
    /// share).
    pub(crate) fn kept_bytes(&self) -> u64 {
        match &self.source {
            RunSource::Kept(packets, _) => packets.iter().map(|r| r.len() as u64).sum(),
            _ => 0,
        }
    }

    /// The memory it needs while merged, less [`Run::kept_bytes`].
    pub(crate) fn decoded(&self) -> u64 {
        self.memory.saturating_sub(self.kept_bytes())
    }

    /// Count a run of spill packets in `stats`: kept in memory, or in a
    /// spill file.
    pub(crate) fn count_spilled(&self, stats: &mut MergeStats) {
        match &self.source {
            RunSource::Spilled { packets, .. } => {
                stats.spilled_runs += 1;
                stats.spilled_bytes += packets.iter().map(|p| u64::from(p.1)).sum::<u64>();
            }
            _ => {
                stats.kept_runs += 1;
                stats.kept_bytes += self.kept_bytes();
            }
        }
    }
}
