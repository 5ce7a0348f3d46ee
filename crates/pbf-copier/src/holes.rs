//! Freeing a spool's bytes as the copy passes them. A spool (pbf-merge's
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
use std::path::PathBuf;

use crate::frames;
use anyhow::{Context, Result};
use pbf_format::frame::BlobType;
use pbf_output::{Punched, punch_hole};
use pbf_stream::PlanHeader;

use crate::Options;

/// Bytes at the start of a spool that are never punched: they hold its
/// first frame header (a BlobHeader is at most 64 KiB).
pub const KEEP_HEAD: u64 = 64 << 10;

/// The spools of one plan and what freeing their copied ranges did.
#[derive(Debug, Default)]
pub struct SpoolHoles {
    spools: Vec<Spool>,
    /// Bytes punched out of spools.
    pub freed: u64,
    /// Ranges not punched because the filesystem cannot (or the spool could
    /// not be opened for writing).
    pub unsupported: u64,
}

#[derive(Debug)]
struct Spool {
    id: u32,
    path: PathBuf,
    /// A handle for punching: `None` until first used, then `Some(None)`
    /// where the spool is not to be punched.
    writer: Option<Option<File>>,
}

impl SpoolHoles {
    /// The spools of `plan`, none with `--keep-spools`.
    pub fn new(plan: &PlanHeader, opts: Options) -> SpoolHoles {
        let spools = plan
            .sources
            .iter()
            .filter(|s| s.spool && !opts.keep_spools)
            .map(|s| Spool {
                id: s.id,
                path: s.file.path.clone(),
                writer: None,
            })
            .collect();
        SpoolHoles {
            spools,
            ..SpoolHoles::default()
        }
    }

    /// The `len` bytes at `offset` of source `id`, read through `file`, are
    /// in the output: free them when `id` is a spool.
    pub fn passed(&mut self, id: u32, file: &File, offset: u64, len: u64) -> Result<()> {
        let Some(spool) = self.spools.iter_mut().find(|s| s.id == id) else {
            return Ok(());
        };
        let writer = spool
            .writer
            .get_or_insert_with(|| open_writer(&spool.path, file));
        let Some(w) = writer else {
            self.unsupported += 1;
            return Ok(());
        };
        let start = offset.max(KEEP_HEAD);
        let end = offset + len;
        if end <= start {
            return Ok(());
        }
        match punch_hole(w, start, end - start)
            .with_context(|| format!("{}: freeing copied bytes", spool.path.display()))?
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
fn open_writer(path: &std::path::Path, read: &File) -> Option<File> {
    let w = OpenOptions::new().write(true).open(path).ok()?;
    let (a, b) = (w.metadata().ok()?, read.metadata().ok()?);
    let same = a.dev() == b.dev() && a.ino() == b.ino() && a.is_file();
    let first = frames::frame_reader(read, path)
        .ok()?
        .frame_header_at(0)
        .ok()?;
    (same && first.blob_type == BlobType::OsmData).then_some(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_stream::SourceRef;

    fn options(keep_spools: bool) -> Options {
        Options {
            add_indexdata: false,
            keep_spools,
            space_check: true,
            verbose: 0,
            quiet: true,
            bars: pbf_cli::Bars::default(),
        }
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
        let read = File::open(&path).expect("open");
        let mut holes = SpoolHoles::new(&plan(&path, true), options(false));
        holes
            .passed(0, &read, 0, bytes.len() as u64)
            .expect("punch");
        let after = std::fs::read(&path).expect("read");
        assert_eq!(after.len(), bytes.len());
        let head = KEEP_HEAD as usize;
        assert_eq!(after[..head], bytes[..head]);
        if holes.unsupported == 0 {
            assert!(
                holes.freed >= (bytes.len() - head - 8192) as u64,
                "{holes:?}"
            );
            let block = read.metadata().expect("stat").blksize() as usize;
            let end = bytes.len() / block * block;
            assert!(after[head..end].iter().all(|&b| b == 0));
        }
        assert!(holes.verbose_words().contains("spool bytes freed"));
    }

    #[test]
    fn kept_spools_and_files_that_are_no_spool_are_left_whole() {
        let dir = tempfile::tempdir().expect("dir");
        for (keep, spool, osmheader) in [
            (true, true, false),
            (false, false, false),
            (false, true, true),
        ] {
            let (path, bytes) = spool_file(dir.path(), osmheader);
            let read = File::open(&path).expect("open");
            let mut holes = SpoolHoles::new(&plan(&path, spool), options(keep));
            holes
                .passed(0, &read, 0, bytes.len() as u64)
                .expect("no punch");
            assert_eq!(std::fs::read(&path).expect("read"), bytes);
            assert_eq!(holes.freed, 0);
        }
    }
}
