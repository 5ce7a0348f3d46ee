//! The guess pbf-copy copies ahead on: that the plan copies the data frames
//! of its only input whole and in file order, which is the plan of a sorted
//! file. The copy starts as soon as the plan record is read (pbf-overlap
//! `--sources` writes it before planning, so under pbf-sort this is while
//! the index is still being built) and runs beside the wait for the ops, as
//! far as the plan's `sorted` records say the input was read in order.
//! Each copy op that continues the guess only moves its end; the first one
//! that does not, or the plan's end, lands it: the copied prefix the plan
//! asked for stays, the rest is cut off (`pbf_output::CopyAhead`). A plan
//! `header` record (a new output header) drops it whole.

use std::path::Path;

use anyhow::{Context, Result};
use pbf_format::frame::BlobType;
use pbf_output::{CopyAhead, CopySources, Landed, OutputFile, frames};
use pbf_stream::{CopyOp, SortedThrough};

/// A copy ahead and how far the plan has confirmed it.
#[derive(Debug)]
pub struct Guess {
    source: u32,
    ahead: CopyAhead,
    /// The source offset the next op must start at to continue the guess.
    next: u64,
    /// The plan line of the last op that continued it, for errors.
    line: u64,
}

impl Guess {
    /// Start copying the data frames of the plan's only ordinary source
    /// (there may be spools beside it) behind what `out` holds. `None` when
    /// there is no such source or it does not start with an OSMHeader frame:
    /// the plan is then followed as it comes, and any problem with the file
    /// is reported there.
    pub fn start(sources: &CopySources, out: &OutputFile) -> Result<Option<Guess>> {
        let mut files = sources.files();
        let (Some((source, file, path)), None) = (files.next(), files.next()) else {
            return Ok(None);
        };
        let Some(start) = data_start(file, path) else {
            return Ok(None);
        };
        let size = file
            .metadata()
            .with_context(|| format!("{}: stat", path.display()))?
            .len();
        if start >= size {
            return Ok(None);
        }
        let ahead = out.copy_ahead(file, path, start, size - start)?;
        Ok(Some(Guess {
            source,
            next: start,
            ahead,
            line: 0,
        }))
    }

    /// Take `op` (at plan line `line`) into the guess when it continues it.
    pub fn extends(&mut self, op: &CopyOp, line: u64) -> bool {
        if op.source != self.source || op.offset != self.next {
            return false;
        }
        self.next += op.length;
        self.line = line;
        true
    }

    /// Copy ahead as far as a plan `sorted` record says the input was read
    /// in order (a record about another source says nothing of this one).
    pub fn allow(&self, sorted: SortedThrough) {
        if sorted.source == self.source {
            self.ahead.allow(sorted.through);
        }
    }

    /// Stop copying ahead (a plan `unsorted` record: the input is not in
    /// file order), keeping what was copied for the ops to confirm.
    pub fn halt(&self) {
        self.ahead.halt();
    }

    /// End the guess and keep nothing of it: a plan `header` record
    /// replaced the header it was copied behind, so every offset moved.
    pub fn drop_all(self, out: &mut OutputFile) -> Result<Landed> {
        Ok(out.land_ahead(self.ahead, 0)?)
    }

    /// End the guess: keep what the plan confirmed of the copy ahead and
    /// copy the rest of the confirmed range (past the copy's end, or what the
    /// thread had not copied yet) in the ordinary way.
    /// Errors name `plan_name` and the line of the last op it took.
    pub fn land(
        self,
        plan_name: &str,
        sources: &mut CopySources,
        out: &mut OutputFile,
    ) -> Result<Landed> {
        let line = self.line;
        self.land_inner(sources, out)
            .with_context(|| format!("{plan_name}: line {line}"))
    }

    fn land_inner(self, sources: &mut CopySources, out: &mut OutputFile) -> Result<Landed> {
        let (offset, want) = (self.ahead.offset(), self.next - self.ahead.offset());
        let landed = out.land_ahead(self.ahead, want)?;
        let rest = want - landed.kept;
        if rest > 0 {
            let from = offset + landed.kept;
            let (file, path) = sources.range(self.source, from, rest)?;
            out.copy_from(file, path, from, rest)?;
        }
        Ok(landed)
    }
}

/// Where the data frames start: just past the OSMHeader frame at offset 0.
fn data_start(file: &std::fs::File, path: &Path) -> Option<u64> {
    let fh = frames::frame_reader(file, path)
        .ok()?
        .frame_header_at(0)
        .ok()?;
    (fh.blob_type == BlobType::OsmHeader).then(|| fh.body_offset() + u64::from(fh.datasize))
}
