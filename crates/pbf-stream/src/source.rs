//! Source identity: a stream names files by path, size and mtime, and every
//! consumer re-checks them before reading, so a file that changed since it
//! was indexed is refused instead of being copied at stale offsets.

use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;

use crate::error::{Error, ErrorKind};
use crate::records::SourceRef;

/// Modification time of a file as the streams record it: seconds since the
/// epoch and nanoseconds past them (each exact in a JSON reader's double).
pub fn mtime(meta: &Metadata) -> (i64, u32) {
    let nsec = u32::try_from(meta.mtime_nsec()).unwrap_or(0);
    (meta.mtime(), nsec)
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
    let (size, (sec, nsec)) = (meta.len(), mtime(&meta));
    if size != src.size || (sec, nsec) != (src.mtime, src.mtime_nsec) {
        return Err(Error::new(ErrorKind::SourceChanged(format!(
            "{}: changed since it was indexed (size {} -> {size}, mtime {}.{:09} -> {sec}.{nsec:09}); re-run pbf-index",
            path.display(),
            src.size,
            src.mtime,
            src.mtime_nsec
        ))));
    }
    Ok(file)
}
