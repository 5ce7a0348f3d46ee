//! The spool: the file merged blocks are written to. It is a plain sequence
//! of PBF data frames (no OSMHeader), appended in order, so a downstream
//! stage can copy byte ranges of it while later runs are still merging: every
//! frame is written with `write(2)` before its range is reported, which makes
//! it visible to other processes without an fsync.
//!
//! Alignment hook: frames are appended back to back. Block-aligned spools
//! (for reflinking, a later concern) would pad here, in [`Spool::append`]'s
//! caller, before the first frame of an op.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};

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
        let fail = |error| {
            Error::new(ErrorKind::Spool {
                path: path.to_path_buf(),
                offset: 0,
                error,
            })
        };
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(fail)?;
        let path = std::fs::canonicalize(path).map_err(fail)?;
        Ok(Spool { file, path, len: 0 })
    }

    /// Create a new spool with a unique name in the temporary directory
    /// (`$TMPDIR`). The file is kept after the process exits: the plan
    /// refers to it, and whoever consumes the plan removes it.
    pub fn create_temp() -> Result<Spool> {
        let dir = std::env::temp_dir();
        let kept = tempfile::Builder::new()
            .prefix("pbf-merge-")
            .suffix(".spool")
            .tempfile_in(&dir)
            .and_then(|t| t.keep().map_err(|e| e.error))
            .map_err(|e| Error::spill(&dir, e))?;
        let (file, path) = kept;
        Ok(Spool { file, path, len: 0 })
    }

    /// The absolute path of the spool.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing is written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Append whole frames; returns the offset they were written at.
    pub fn append(&mut self, bytes: &[u8]) -> Result<u64> {
        let offset = self.len;
        self.file.write_all(bytes).map_err(|error| {
            Error::new(ErrorKind::Spool {
                path: self.path.clone(),
                offset,
                error,
            })
        })?;
        self.len += bytes.len() as u64;
        Ok(offset)
    }
}
