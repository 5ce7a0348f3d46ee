//! One error type for the whole format layer. Every error can carry the file
//! and byte offset it concerns, so a tool can print one line that names the
//! file, the blob offset and the cause.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A format-layer error: what went wrong, and where.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    path: Option<PathBuf>,
    offset: Option<u64>,
}

/// The cause of an [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An operating-system read or write failed.
    Io(io::Error),
    /// The data ends before a structure is complete.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        available: u64,
    },
    /// A length stored in the input exceeds what we accept.
    TooLarge {
        /// The field that holds the length.
        field: &'static str,
        /// The stored value.
        size: u64,
        /// The largest value accepted.
        limit: u64,
    },
    /// The bytes are not a valid protobuf message or PBF structure.
    Malformed(String),
    /// A valid but unsupported feature (lzma or bzip2 blobs, for example).
    Unsupported(String),
    /// Not a PBF file at all: what it seems to be.
    NotPbf(crate::sniff::NotPbf),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A new error of the given kind, not yet placed in a file.
    pub fn new(kind: ErrorKind) -> Error {
        Error {
            kind,
            path: None,
            offset: None,
        }
    }

    /// A [`ErrorKind::TooLarge`] error: `field` holds `size`, over `limit`.
    pub fn too_large(field: &'static str, size: u64, limit: u64) -> Error {
        Error::new(ErrorKind::TooLarge { field, size, limit })
    }

    /// A [`ErrorKind::Malformed`] error with a message.
    pub fn malformed(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Malformed(msg.into()))
    }

    /// Attach the file this error concerns (kept if already set).
    pub fn in_file(mut self, path: &Path) -> Error {
        self.path.get_or_insert_with(|| path.to_path_buf());
        self
    }

    /// Attach the byte offset of the blob this error concerns (kept if already set).
    pub fn at(mut self, offset: u64) -> Error {
        self.offset.get_or_insert(offset);
        self
    }

    /// The cause.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The file, when known.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The byte offset of the frame concerned, when known.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::new(ErrorKind::Io(e))
    }
}

impl From<prost::DecodeError> for Error {
    fn from(e: prost::DecodeError) -> Error {
        Error::malformed(format!("protobuf decode error: {e}"))
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Io(e) => write!(f, "{e}"),
            ErrorKind::Truncated {
                what,
                needed,
                available,
            } => write!(
                f,
                "truncated {what}: needs {needed} bytes, only {available} available"
            ),
            ErrorKind::TooLarge { field, size, limit } => {
                write!(f, "{field} is {size} bytes, limit is {limit}")
            }
            ErrorKind::Malformed(m) => write!(f, "{m}"),
            ErrorKind::Unsupported(m) => write!(f, "unsupported: {m}"),
            ErrorKind::NotPbf(kind) => write!(f, "{kind}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{}: ", p.display())?;
        }
        if let Some(o) = self.offset {
            write!(f, "blob at offset {o}: ")?;
        }
        write!(f, "{}", self.kind)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_offset_and_cause() {
        let e = Error::new(ErrorKind::TooLarge {
            field: "BlobHeader length",
            size: 70000,
            limit: 65536,
        })
        .at(12)
        .in_file(Path::new("/tmp/x.pbf"));
        assert_eq!(
            e.to_string(),
            "/tmp/x.pbf: blob at offset 12: BlobHeader length is 70000 bytes, limit is 65536"
        );
    }
}
