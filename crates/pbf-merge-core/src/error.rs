//! The engine's one error type. Every error prints as one line naming the
//! file and, where there is one, the blob offset, so the tool can report it
//! as is and stop without writing the plan's `end` record.

use std::fmt;
use std::io;
use std::path::Path;

/// A merge error: what went wrong, and where.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Reading, decompressing or decoding an input blob failed (the format
    /// error names the file and offset).
    Format(pbf_format::Error),
    /// A source is not the file the plan was made for.
    Source(pbf_stream::Error),
    /// The plan does not describe the file: wrong frame length or type,
    /// keys outside the planned range, a different element count (the
    /// message names the input file and the frame offset: [`Error::plan`]).
    Plan(String),
    /// A blob's indexdata says what the blob does not hold: the plan was
    /// made from it (pbf-index trusted it) and is wrong with it (the
    /// message names the input file and the frame offset).
    Indexdata(String),
    /// Writing the spool failed (disk full, for example): the message
    /// names the spool file and where the write started ([`Error::spool`]),
    /// and the cause.
    Spool(String, io::Error),
    /// A temporary spill file could not be created, written or read: the
    /// message names the directory of the spill files, and the cause.
    Spill(String, io::Error),
    /// A spill file holds something we did not write (a bug or a disk error).
    CorruptSpill(String),
    /// The caller's output callback failed (writing the plan, for example).
    Output(io::Error),
    /// A worker thread died or an internal check failed (a bug).
    Internal(String),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The plan does not describe the frame at `offset` of `path`: `message`
    /// says what disagrees.
    pub(crate) fn plan(path: &Path, offset: u64, message: impl fmt::Display) -> Error {
        let path = path.display();
        Error::Plan(format!(
            "{path}: blob at offset {offset}: plan does not match the file: {message}"
        ))
    }

    /// Writing the spool at `path` failed, the write starting at `offset`.
    pub(crate) fn spool(path: &Path, offset: u64, error: io::Error) -> Error {
        let hint = match error.kind() {
            io::ErrorKind::StorageFull => "; give --tmpdir DIR on a filesystem with room for it",
            _ => "",
        };
        let path = path.display();
        let m = format!("{path}: cannot write spool at offset {offset}: {error}{hint}");
        Error::Spool(m, error)
    }

    pub(crate) fn spill(dir: &Path, error: io::Error) -> Error {
        Error::Spill(format!("spill file in {}: {error}", dir.display()), error)
    }
}

impl From<pbf_format::Error> for Error {
    fn from(e: pbf_format::Error) -> Error {
        Error::Format(e)
    }
}

impl From<pbf_stream::Error> for Error {
    fn from(e: pbf_stream::Error) -> Error {
        Error::Source(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Format(e) => write!(f, "{e}"),
            Error::Source(e) => write!(f, "{e}"),
            Error::Plan(m) | Error::Indexdata(m) => f.write_str(m),
            Error::Spool(m, _) | Error::Spill(m, _) => f.write_str(m),
            Error::CorruptSpill(m) => write!(f, "corrupt spill file: {m}"),
            Error::Output(e) => write!(f, "{e}"),
            Error::Internal(m) => write!(f, "internal error: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Format(e) => Some(e),
            Error::Source(e) => Some(e),
            Error::Spool(_, e) | Error::Spill(_, e) => Some(e),
            Error::Output(e) => Some(e),
            _ => None,
        }
    }
}
