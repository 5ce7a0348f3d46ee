//! Freeing a spool's bytes as the copy passes them
//! ([`crate::CopySources::passed`]). A spool (pbf-merge's
//! merged blobs) is read once, op by op, and removed after the commit; until
//! then, the bytes already copied into the output took their room twice. So
//! once an op's range of a spool is in the output (copied or cloned), its
//! whole blocks are punched out of the spool (`fallocate` punch-hole, size
//! kept). Nothing reads them again: a copier reads each spool byte once (a
//! plan that copies a byte twice is refused), the copy ahead and a restart
//! of the output read only ordinary sources, and the removal after the
//! commit reads only the first frame header and the padding frames no op
//! copies.
//!
//! Not with `--keep-spools` (a kept spool is replayed), not in a file that
//! is a spool by the plan's word only (it must be a regular file starting
//! with an OSMData frame, as the removal demands), and never the first
//! [`KEEP_HEAD`] bytes, whose frame header is how a spool is recognised for
//! removal. A filesystem that cannot punch holes is counted for `-v`, not
//! an error.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::frames;
use anyhow::{Context, Result};
use pbf_format::frame::BlobType;
use pbf_output::{Punched, punch_hole};

/// Bytes at the start of a spool that are never punched: they hold its
/// first frame header (a BlobHeader is at most 64 KiB).
pub const KEEP_HEAD: u64 = 64 << 10;

/// What freeing the spools' copied ranges did
/// ([`crate::CopySources::passed`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct SpoolHoles {
    /// Bytes punched out of spools.
    pub freed: u64,
    /// Ranges not punched because the filesystem cannot (or the spool could
    /// not be opened for writing).
    pub unsupported: u64,
}

impl SpoolHoles {
    /// Free the `len` bytes at `offset` of the spool at `path`, read
    /// through `read`, which are in the output. `writer` is the spool's
    /// handle for punching: `None` until first used, then `Some(None)`
    /// where the spool is not to be punched.
    pub(crate) fn punch(
        &mut self,
        writer: &mut Option<Option<File>>,
        (path, read): (&Path, &File),
        offset: u64,
        len: u64,
    ) -> Result<()> {
        let Some(w) = writer.get_or_insert_with(|| open_writer(path, read)) else {
            self.unsupported += 1;
            return Ok(());
        };
        let start = offset.max(KEEP_HEAD);
        let end = offset + len;
        if end <= start {
            return Ok(());
        }
        match punch_hole(w, start, end - start)
            .with_context(|| format!("{}: freeing copied bytes", path.display()))?
        {
            Punched::Freed(n) => self.freed += n,
            Punched::Unsupported => self.unsupported += 1,
        }
        Ok(())
    }

    /// The `-v` words: bytes freed, and ranges the filesystem kept.
    pub fn verbose_words(&self) -> String {
        match self.unsupported {
            0 => format!("{} spool bytes freed", self.freed),
            n => format!(
                "{} spool bytes freed ({n} ranges not: no hole punching there)",
                self.freed
            ),
        }
    }
}

/// A write handle on the spool at `path` that `read` reads, when it is one
/// to punch: the same file (device and inode), regular, starting with an
/// OSMData frame.
fn open_writer(path: &Path, read: &File) -> Option<File> {
    let w = OpenOptions::new().write(true).open(path).ok()?;
    let (a, b) = (w.metadata().ok()?, read.metadata().ok()?);
    let same = a.dev() == b.dev() && a.ino() == b.ino() && a.is_file();
    let first = frames::first_frame(read, path)?;
    (same && first.blob_type == BlobType::OsmData).then_some(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CopySources;
    use pbf_stream::{PlanHeader, SourceRef};
    use std::path::PathBuf;

    /// The sources of a plan of `path` (`remove`: spools are removed, and
    /// punched as copied), with the range `0..len` read and copied.
    fn passed(path: &Path, spool: bool, remove: bool, len: u64) -> CopySources {
        let mut sources = CopySources::open(&plan(path, spool), remove).expect("open");
        sources.range(0, 0, len).expect("range");
        sources.passed(0, 0, len).expect("punch");
        sources
    }

    /// A plan header naming `path` as source 0, a spool or not.
    fn plan(path: &std::path::Path, spool: bool) -> PlanHeader {
        let meta = std::fs::metadata(path).expect("meta");
        PlanHeader {
            schema: pbf_stream::PLAN_SCHEMA.into(),
            version: pbf_stream::SCHEMA_VERSION,
            sources: vec![SourceRef {
                id: 0,
                file: pbf_stream::FileIdentity::of(path, &meta, None),
                spool,
            }],
            header: Default::default(),
            early: false,
            copy_bytes: None,
        }
    }

    /// A file of OSMData frames, half a MiB (`osmheader`: an OSMHeader first).
    fn spool_file(dir: &std::path::Path, osmheader: bool) -> (PathBuf, Vec<u8>) {
        let path = dir.join("spool.pbf");
        let mut bytes = Vec::new();
        if osmheader {
            bytes.extend(frames::header_frame(&Default::default()).expect("header"));
        }
        while bytes.len() < 512 << 10 {
            let frame = pbf_format::frame::encode_frame(&BlobType::OsmData, None, &[7u8; 4096]);
            bytes.extend(frame.expect("frame"));
        }
        std::fs::write(&path, &bytes).expect("write");
        (path, bytes)
    }

    #[test]
    fn a_copied_range_of_a_spool_is_freed_past_its_head() {
        let dir = tempfile::tempdir().expect("dir");
        let (path, bytes) = spool_file(dir.path(), false);
        let sources = passed(&path, true, true, bytes.len() as u64);
        let holes = sources.holes;
        let after = std::fs::read(&path).expect("read");
        assert_eq!(after.len(), bytes.len());
        let head = KEEP_HEAD as usize;
        assert_eq!(after[..head], bytes[..head]);
        if holes.unsupported == 0 {
            assert!(
                holes.freed >= (bytes.len() - head - 8192) as u64,
                "{holes:?}"
            );
            let block = std::fs::metadata(&path).expect("stat").blksize() as usize;
            let end = bytes.len() / block * block;
            assert!(after[head..end].iter().all(|&b| b == 0));
        }
        assert!(holes.verbose_words().contains("spool bytes freed"));
    }

    #[test]
    fn kept_spools_and_files_that_are_no_spool_are_left_whole() {
        let dir = tempfile::tempdir().expect("dir");
        for (remove, spool, osmheader) in [
            (false, true, false),
            (true, false, false),
            (true, true, true),
        ] {
            let (path, bytes) = spool_file(dir.path(), osmheader);
            let len = bytes.len() as u64;
            assert_eq!(passed(&path, spool, remove, len).holes.freed, 0);
            assert_eq!(std::fs::read(&path).expect("read"), bytes);
        }
    }
}
