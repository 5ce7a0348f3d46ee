//! The one error type of this crate: a cause plus the context that names the
//! file and the operation, so a tool can print it as a single line.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// An error: what was being done (file, operation, offset) and why it failed.
#[derive(Debug)]
pub struct Error {
    context: String,
    kind: ErrorKind,
}

/// The cause of an [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A system call failed.
    Io(io::Error),
    /// The output exists and overwriting was not allowed.
    Exists,
    /// The output is the same file as this input.
    SameAsInput(PathBuf),
    /// A source ended before the range to copy did.
    ShortSource {
        /// Offset at which the source ended.
        offset: u64,
        /// Bytes still missing.
        missing: u64,
    },
    /// A PBF frame could not be read or written.
    Format(pbf_format::Error),
    /// A plan source cannot be read as the plan says (it changed since it
    /// was indexed, or a spool does not hold a range).
    Stream(pbf_stream::Error),
    /// The output's filesystem cannot hold what the plan copies (the
    /// context names its directory).
    NoSpace {
        /// Bytes the output still needs at least.
        needed: u64,
        /// Bytes free there.
        free: u64,
    },
    /// Anything else, explained in words.
    Invalid(String),
}

impl Error {
    /// A new error with a context such as `"/out.pbf: fsync"`.
    pub fn new(context: impl Into<String>, kind: ErrorKind) -> Error {
        Error {
            context: context.into(),
            kind,
        }
    }

    /// An I/O error in `context`.
    pub fn io(context: impl Into<String>, err: io::Error) -> Error {
        Error::new(context, ErrorKind::Io(err))
    }

    /// An [`ErrorKind::Invalid`] error.
    pub fn invalid(context: impl Into<String>, msg: impl Into<String>) -> Error {
        Error::new(context, ErrorKind::Invalid(msg.into()))
    }

    /// Put `outer` in front of the existing context.
    pub fn within(mut self, outer: impl fmt::Display) -> Error {
        self.context = if self.context.is_empty() {
            outer.to_string()
        } else {
            format!("{outer}: {}", self.context)
        };
        self
    }

    /// The cause.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

/// The I/O cause is not repeated in `Display`: it is the error's `source()`,
/// so `anyhow`'s `{:#}` prints it once after the context (and a broken pipe
/// can be recognised in the chain). A cause that starts with the context
/// (a format or stream error names its file) says it once.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cause = match &self.kind {
            ErrorKind::Io(_) => return f.write_str(&self.context),
            ErrorKind::Exists => "file exists (use -O/--overwrite to replace it)".to_owned(),
            ErrorKind::SameAsInput(p) => format!(
                "is the same file as the input {} (an input is never overwritten)",
                p.display()
            ),
            ErrorKind::ShortSource { offset, missing } => format!(
                "source ends at offset {offset}, {missing} bytes short (file shrank since it was indexed?)"
            ),
            ErrorKind::Format(e) => e.to_string(),
            ErrorKind::Stream(e) => e.to_string(),
            ErrorKind::NoSpace { needed, free } => format!(
                "not enough free space: the output needs at least {needed} bytes more on this \
                 filesystem, which has {free} bytes free (--no-space-check writes anyway)"
            ),
            ErrorKind::Invalid(m) => m.clone(),
        };
        let said = cause
            .strip_prefix(self.context.as_str())
            .is_some_and(|rest| rest.starts_with(": "));
        if !self.context.is_empty() && !said {
            write!(f, "{}: ", self.context)?;
        }
        f.write_str(&cause)
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
