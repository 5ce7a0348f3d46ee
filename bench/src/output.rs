//! Writing an output file safely: a temporary file beside the target that is
//! fsynced and renamed only when complete, so an interrupted generator never
//! leaves a short file that a later benchmark would time.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pbf_format::compress::{Compression, encode_blob};
use pbf_format::frame::{BlobType, encode_frame};
use pbf_format::header::{Header, encode_header};
use tempfile::NamedTempFile;

/// An output file being written.
pub struct Output {
    path: PathBuf,
    writer: BufWriter<NamedTempFile>,
    written: u64,
}

impl Output {
    /// Start writing `path` (through a temporary file in its directory).
    pub fn create(path: &Path) -> Result<Output> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".pbf-gen-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .with_context(|| format!("{}: cannot create a temporary file", dir.display()))?;
        Ok(Output {
            path: path.to_path_buf(),
            writer: BufWriter::with_capacity(1 << 20, tmp),
            written: 0,
        })
    }

    /// Append bytes.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer
            .write_all(bytes)
            .with_context(|| format!("{}: write failed", self.path.display()))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The temporary file, flushed, for writers that bypass the buffer.
    pub fn file(&mut self) -> Result<&File> {
        self.writer.flush()?;
        Ok(self.writer.get_ref().as_file())
    }

    /// Account for bytes written directly to [`Output::file`].
    pub fn wrote_directly(&mut self, n: u64) {
        self.written += n;
    }

    /// Flush, fsync and rename into place.
    pub fn finish(self) -> Result<u64> {
        let path = self.path;
        let tmp = self
            .writer
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("{}: write failed", path.display()))?;
        // Temporary files are created 0600; outputs are ordinary files.
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("{}: chmod failed", path.display()))?;
        tmp.as_file()
            .sync_all()
            .with_context(|| format!("{}: fsync failed", path.display()))?;
        tmp.persist(&path)
            .with_context(|| format!("{}: rename failed", path.display()))?;
        Ok(self.written)
    }
}

/// The OSMHeader frame for `header`.
pub fn header_frame(header: &Header, compression: Compression) -> Result<Vec<u8>> {
    let blob = encode_blob(&encode_header(header), compression)?;
    Ok(encode_frame(&BlobType::OsmHeader, None, &blob))
}

/// Make sure `out` is not one of `inputs` (we would truncate what we read).
pub fn refuse_overwriting_input(out: &Path, inputs: &[PathBuf]) -> Result<()> {
    let Ok(o) = std::fs::canonicalize(out) else {
        return Ok(());
    };
    for i in inputs {
        if std::fs::canonicalize(i).is_ok_and(|c| c == o) {
            anyhow::bail!("{}: output is also an input", out.display());
        }
    }
    Ok(())
}
