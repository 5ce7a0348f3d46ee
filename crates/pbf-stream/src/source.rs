//! Source identity: a stream names files by path, size and mtime, and every
//! consumer re-checks them before reading, so a file that changed since it
//! was indexed is refused instead of being copied at stale offsets.

use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;

use crate::error::{Error, ErrorKind};
use crate::records::SourceRef;

/// Modification time of a file in nanoseconds since the epoch.
pub fn mtime_ns(meta: &Metadata) -> i64 {
    meta.mtime() * 1_000_000_000 + meta.mtime_nsec()
}

/// Open a source and check that its size and mtime are those in the stream.
pub fn check_source(src: &SourceRef) -> Result<File, Error> {
    let path = &src.path;
    // Refuse a FIFO or device before opening it: opening a FIFO blocks until
    // a writer appears, so a plan naming one would hang the stage.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(Error::new(ErrorKind::SourceChanged(format!(
            "{}: not a regular file",
            path.display()
        ))));
    }
    let file = File::open(path).map_err(|e| {
        Error::new(ErrorKind::SourceChanged(format!(
            "{}: cannot open: {e}",
            path.display()
        )))
    })?;
    let meta = file.metadata()?;
    let (size, mtime) = (meta.len(), mtime_ns(&meta));
    if size != src.size || mtime != src.mtime_ns {
        return Err(Error::new(ErrorKind::SourceChanged(format!(
            "{}: changed since it was indexed (size {} -> {size}, mtime_ns {} -> {mtime}); re-run pbf-index",
            path.display(),
            src.size,
            src.mtime_ns
        ))));
    }
    Ok(file)
}
