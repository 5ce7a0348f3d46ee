//! The copier's side of the re-compressed frames file
//! (`pbf_format::recompressed`): `pbf-copy --recompress C --recompressed
//! FILE` copies the frames `pbf-index` already re-compressed instead of
//! inflating them again, from copy ops ([`Ready::pieces`]) and, for a sorted
//! input, ahead of the plan (`crate::ahead`).

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use pbf_format::compress::Compression;
use pbf_format::recompressed::{Piece, Table};
use pbf_output::{Error, ErrorKind, OutputFile, Result};

use crate::CopySources;

/// `--recompressed FILE`: the frames pbf-index re-compressed, whose table
/// is read when the first op needs it. By then the index has finished the
/// file: a plan's ops come after the whole index of its input.
#[derive(Debug)]
pub struct Ready {
    path: PathBuf,
    /// The compression the copier writes, which the file's must be, and the
    /// plan's inputs, one of which the file's must be.
    compression: Compression,
    inputs: Vec<PathBuf>,
    loaded: Option<(File, Table)>,
    /// Bytes of its frames put in the output (for `-v`).
    copied: u64,
}

impl Ready {
    /// The file at `path`, not read yet, for a copy re-compressing to
    /// `compression` from `sources`.
    pub fn new(path: PathBuf, compression: Compression, sources: &CopySources) -> Ready {
        let inputs = sources.files().map(|(_, _, p)| p.to_path_buf()).collect();
        Ready {
            path,
            compression,
            inputs,
            loaded: None,
            copied: 0,
        }
    }

    /// `offset..offset + len` of the source `src` (at `src_path`, as the plan
    /// names it) cut into frames ready in the file and input bytes to
    /// re-compress. A source the file is not of is all input; the file must
    /// be of one of the plan's inputs as it still is.
    pub fn pieces(
        &mut self,
        (src, src_path): (&File, &Path),
        (offset, len): (u64, u64),
    ) -> Result<Vec<Piece>> {
        let table = self.table()?;
        if table.input() != src_path {
            return Ok(vec![Piece::Input(offset..offset + len)]);
        }
        if !table.is_of(src) {
            let why = format!(
                "written for {} as it was before it changed",
                src_path.display()
            );
            return Err(Error::invalid(self.path.display().to_string(), why));
        }
        Ok(table.pieces(offset, len))
    }

    /// Count `n` bytes of the file's frames as put in the output (by the
    /// copy ahead).
    pub fn add_copied(&mut self, n: u64) {
        self.copied += n;
    }

    /// Append the file's `range` (a [`Piece::Ready`] of [`Ready::pieces`])
    /// to `out`.
    pub fn copy_into(&mut self, out: &mut OutputFile, range: Range<u64>) -> Result<()> {
        let (file, _) = self
            .loaded
            .as_ref()
            .expect("ready pieces come from its table");
        out.copy_from(file, &self.path, range.start, range.end - range.start)?;
        self.copied += range.end - range.start;
        Ok(())
    }

    /// Bytes of the file's frames put in the output.
    pub fn copied(&self) -> u64 {
        self.copied
    }

    /// Frames the file holds (0 before its table is read).
    pub fn frames(&self) -> usize {
        self.loaded.as_ref().map_or(0, |(_, t)| t.entries().len())
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The frames ready from the file's start for the input range
    /// `offset..offset + len` of `src`, as the copy ahead copied them: for
    /// each, where it ends in the file and in the input; they cover the
    /// range's first frames and end where one is not ready.
    pub fn prefix(
        &mut self,
        src: (&File, &Path),
        (offset, len): (u64, u64),
    ) -> Result<Vec<(u64, u64)>> {
        let Some(Piece::Ready(first)) = self.pieces(src, (offset, len))?.first().cloned() else {
            return Ok(Vec::new());
        };
        if first.start != 0 {
            return Ok(Vec::new());
        }
        let (_, table) = self.loaded.as_ref().expect("read by pieces");
        let ends = table.entries().iter().take_while(|e| e.offset < first.end);
        Ok(ends
            .map(|e| (e.offset + e.len, e.input_offset + e.input_len))
            .collect())
    }

    fn table(&mut self) -> Result<&Table> {
        if self.loaded.is_none() {
            let name = self.path.display().to_string();
            let file = File::open(&self.path).map_err(|e| Error::io(name.clone(), e))?;
            let table = Table::read(&file, &self.path)
                .map_err(|e| Error::new(name.clone(), ErrorKind::Format(e)))?;
            if table.compression() != self.compression {
                let why = format!(
                    "holds frames in {}, not in {} (--recompress)",
                    table.compression(),
                    self.compression
                );
                return Err(Error::invalid(name, why));
            }
            if !self.inputs.iter().any(|p| p == table.input()) {
                let why = format!(
                    "holds frames of {}, not of an input of the plan",
                    table.input().display()
                );
                return Err(Error::invalid(name, why));
            }
            self.loaded = Some((file, table));
        }
        Ok(&self.loaded.as_ref().expect("loaded").1)
    }
}
