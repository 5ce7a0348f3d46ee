//! Errors of the stream layer, each tied to the line it was found on.

use std::fmt;
use std::io;

/// A stream error: the cause and the 1-based line number, when known.
#[derive(Debug)]
pub struct Error {
    line: Option<u64>,
    kind: ErrorKind,
}

/// The cause of an [`Error`].
#[derive(Debug)]
pub(crate) enum ErrorKind {
    /// Reading or writing failed.
    Io(io::Error),
    /// A line is not a valid record.
    Json(serde_json::Error),
    /// Records are in an order the schema forbids, a count disagrees, a
    /// line is longer than [`crate::MAX_LINE`], or a file named in the
    /// stream is not the file that was indexed.
    Invalid(String),
    /// The stream ended without its `end` record.
    MissingEnd,
    /// The stream holds no record at all ("index" or "plan").
    EmptyStream(&'static str),
}

impl Error {
    /// A new error.
    pub(crate) fn new(kind: ErrorKind) -> Error {
        Error { line: None, kind }
    }

    /// An error in what the stream says (or in a file it names), in `msg`.
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Invalid(msg.into()))
    }

    /// Attach a line number (kept if already set).
    pub fn at_line(mut self, line: u64) -> Error {
        self.line.get_or_insert(line);
        self
    }

    /// True when this error only echoes a failure upstream: the stream was
    /// empty or stopped before its `end` record, so the stage that wrote it
    /// has already failed (and said why).
    pub fn is_upstream_failure(&self) -> bool {
        matches!(self.kind, ErrorKind::MissingEnd | ErrorKind::EmptyStream(_))
    }

    /// True when the underlying cause is a broken pipe on output.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(&self.kind, ErrorKind::Io(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::new(ErrorKind::Io(e))
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::new(ErrorKind::Json(e))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // An empty stream has no line to name.
        if let (Some(l), false) = (self.line, matches!(self.kind, ErrorKind::EmptyStream(_))) {
            write!(f, "line {l}: ")?;
        }
        match &self.kind {
            ErrorKind::Io(e) => write!(f, "{e}"),
            ErrorKind::Json(e) => write!(f, "invalid record: {}", json_cause(e, self.line)),
            ErrorKind::Invalid(m) => write!(f, "{m}"),
            ErrorKind::EmptyStream(what) => {
                write!(f, "empty {what} stream (upstream stage died?)")
            }
            ErrorKind::MissingEnd => write!(
                f,
                "stream ended without an end record (upstream stage died?)"
            ),
        }
    }
}

/// serde's words for `e`, with its place: within a stream line it already
/// named, "at column N" (the record is that line's first and only one).
fn json_cause(e: &serde_json::Error, stream_line: Option<u64>) -> String {
    let text = e.to_string();
    let place = format!(" at line {} column {}", e.line(), e.column());
    match (stream_line, text.strip_suffix(&place)) {
        (Some(_), Some(cause)) if e.line() == 1 => format!("{cause} at column {}", e.column()),
        _ => text,
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // A JSON error's words are in this error's own (see `json_cause`).
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_error(text: &str) -> serde_json::Error {
        serde_json::from_str::<serde_json::Value>(text).expect_err("not JSON")
    }

    #[test]
    fn a_record_names_its_stream_line_once() {
        let e = Error::new(ErrorKind::Json(json_error("#notes"))).at_line(3);
        assert_eq!(
            e.to_string(),
            "line 3: invalid record: expected value at column 1"
        );
        assert!(std::error::Error::source(&e).is_none(), "said once");
        let empty = Error::new(ErrorKind::EmptyStream("index")).at_line(1);
        assert_eq!(
            empty.to_string(),
            "empty index stream (upstream stage died?)"
        );
        // Without a stream line, serde's own place stays.
        let e = Error::new(ErrorKind::Json(json_error("{\n x")));
        assert!(e.to_string().ends_with("at line 2 column 2"), "{e}");
    }
}
