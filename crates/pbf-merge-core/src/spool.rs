//! The spool: the file merged blocks are written to. It is a plain sequence
//! of PBF data frames (no OSMHeader), appended in order, so a downstream
//! stage can copy byte ranges of it while later ops are still merging: every
//! frame is written with `write(2)` before its range is reported, which makes
//! it visible to other processes without an fsync.
//!
//! Alignment: frames are appended back to back, but with
//! [`crate::Options::align`] each merge op's first frame starts at a multiple
//! of the filesystem block size ([`Spool::align`] writes a padding frame from
//! `pbf_format::padding` before it), so `pbf-reflink` clones a merged run from
//! its first block on. The padding keeps the spool a valid frame sequence;
//! the plan's copy ops never cover it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use pbf_format::padding;

use crate::error::{Error, Result};

/// An open spool file and how much of it is written.
#[derive(Debug)]
pub struct Spool {
    file: File,
    path: PathBuf,
    len: u64,
}

impl Spool {
    /// Create a spool at `path`. The file must not exist: an existing file
    /// is refused whatever its contents, so a spool still read by a
    /// downstream stage is never overwritten.
    pub fn create(path: &Path) -> Result<Spool> {
        let fail = |error| Error::spool(path, 0, error);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(fail)?;
        let path = std::fs::canonicalize(path).map_err(fail)?;
        Ok(Spool { file, path, len: 0 })
    }

    /// Create a new spool with a unique name in `dir` (`--tmpdir`, else
    /// `$TMPDIR`). The file is kept after the process exits: the plan
    /// refers to it, and whoever consumes the plan removes it.
    pub fn create_in(dir: &Path) -> Result<Spool> {
        let kept = tempfile::Builder::new()
            .prefix("pbf-merge-")
            .suffix(".spool")
            .tempfile_in(dir)
            .and_then(|t| t.keep().map_err(|e| e.error))
            .map_err(|e| Error::spill(dir, e))?;
        let (file, path) = kept;
        Ok(Spool { file, path, len: 0 })
    }

    /// The absolute path of the spool.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when nothing is written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pad the spool with a padding frame so the next frame starts at a
    /// multiple of `block` (a power of two, at most 1 MiB; 0 or 1: no
    /// padding); returns the padding's length (0 when already aligned).
    pub fn align(&mut self, block: u64) -> Result<u64> {
        let block = block.max(1);
        if !block.is_power_of_two() || block > 1 << 20 {
            return Err(Error::Internal(format!(
                "spool alignment {block} is not a power of two of at most 1 MiB"
            )));
        }
        let gap = padding::gap(self.len, 0, block);
        if gap == 0 {
            return Ok(0);
        }
        let bytes = padding::padding(gap)
            .ok_or_else(|| Error::Internal(format!("no padding of {gap} bytes")))?;
        self.append(&bytes)?;
        Ok(gap)
    }

    /// Append whole frames; returns the offset they were written at.
    pub fn append(&mut self, bytes: &[u8]) -> Result<u64> {
        let offset = self.len;
        self.file
            .write_all(bytes)
            .map_err(|error| Error::spool(&self.path, offset, error))?;
        self.len += bytes.len() as u64;
        Ok(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_pads_to_the_next_block_with_padding_frames() {
        let dir = tempfile::tempdir().expect("dir");
        let mut spool = Spool::create(&dir.path().join("s.pbf")).expect("spool");
        assert_eq!(spool.align(4096).expect("empty"), 0);
        spool.append(&[0u8; 100]).expect("frame");
        assert_eq!(spool.align(0).expect("no alignment"), 0);
        assert_eq!(spool.align(1).expect("no alignment"), 0);
        assert_eq!(spool.align(4096).expect("align"), 3996);
        assert_eq!(std::fs::metadata(spool.path()).expect("stat").len(), 4096);
        assert_eq!(spool.align(4096).expect("aligned"), 0);
        spool.append(&[0u8; 4090]).expect("frame");
        assert_eq!(spool.align(4096).expect("short gap"), 6 + 4096);
        assert_eq!(
            std::fs::metadata(spool.path()).expect("stat").len(),
            3 * 4096
        );
        assert!(spool.align(3000).is_err());
        let bytes = std::fs::read(spool.path()).expect("read");
        let pad = &bytes[100..4096];
        let hl = u32::from_be_bytes([pad[0], pad[1], pad[2], pad[3]]) as usize;
        let (kind, _, size) = pbf_format::frame::parse_blob_header(&pad[4..4 + hl]).expect("hdr");
        assert_eq!(
            (kind.as_str(), 4 + hl + size as usize),
            ("OSMData", pad.len())
        );
        let block = pbf_format::compress::decode_blob(&pad[4 + hl..]).expect("blob");
        assert!(padding::is_padding_block(&block));
    }
}
