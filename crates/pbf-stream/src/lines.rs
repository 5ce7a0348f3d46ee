//! Reading and writing the streams line by line. Lines are bounded before they
//! are buffered, every record is checked against the schema's order, and the
//! `end` record's counts are checked against what was read.

use std::fmt;
use std::io::{BufRead, Read, Write};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::Serialize;

use crate::error::{Error, ErrorKind};
use crate::order::OrderCheck;
use crate::records::*;
use crate::{Counts, plural};

/// Longest line accepted (a merge op of millions of blobs is one long line).
pub const MAX_LINE: usize = 512 * 1024 * 1024;

/// The time a stage spent on its streams themselves: parsing the records it
/// read and serialising the ones it wrote, without waiting for a pipe or
/// another stage. Each tool's `-v` line reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamTime {
    /// Parsing records read.
    pub parsing: Duration,
    /// Serialising records written.
    pub writing: Duration,
}

impl fmt::Display for StreamTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "streams: {:.3} s parsing, {:.3} s serialising",
            self.parsing.as_secs_f64(),
            self.writing.as_secs_f64()
        )
    }
}

/// Time spent on one kind of work, measured only when asked: two clock
/// reads cost about 36 ns, a tenth of what writing or parsing a blob
/// record costs, and a stage writes or reads one per blob.
#[derive(Clone, Copy, Debug, Default)]
struct Stopwatch {
    off: bool,
    total: Duration,
}

impl Stopwatch {
    fn start(&self) -> Option<Instant> {
        (!self.off).then(Instant::now)
    }

    fn stop(&mut self, started: Option<Instant>) {
        if let Some(started) = started {
            self.total += started.elapsed();
        }
    }
}

/// Reads bounded lines and counts them.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    line: u64,
    parsing: Stopwatch,
}

impl<R: BufRead> LineReader<R> {
    /// Wrap a buffered reader.
    pub fn new(inner: R) -> LineReader<R> {
        LineReader {
            inner,
            buf: Vec::new(),
            line: 0,
            parsing: Stopwatch::default(),
        }
    }

    /// Whether to measure the time spent parsing (on unless turned off;
    /// off, [`LineReader::parse_time`] stays zero).
    pub fn timed(mut self, on: bool) -> LineReader<R> {
        self.parsing.off = !on;
        self
    }

    /// Time spent parsing records so far.
    pub fn parse_time(&self) -> Duration {
        self.parsing.total
    }

    /// The number of the line last returned.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The next non-empty line without its newline (and carriage
    /// returns), or `None` at EOF. A stream that starts as a PBF file does
    /// is refused at its first line in words that say so, not as JSON that
    /// does not parse.
    pub fn next_line(&mut self) -> Result<Option<&[u8]>, Error> {
        if self.line == 0 {
            self.refuse_pbf()?;
        }
        loop {
            // A merge op of millions of blobs is one line of hundreds of
            // megabytes: its buffer is not kept for the short lines after it.
            if self.buf.capacity() > KEEP_LINE_BUFFER {
                self.buf = Vec::new();
            }
            self.buf.clear();
            self.line += 1;
            // At most one byte past MAX_LINE is buffered: `take` bounds the
            // line, and `read_until` finds the newline with the standard
            // library's word-at-a-time search (a byte loop took a tenth of
            // pbf-overlap's time on an index of small blobs).
            let room = (MAX_LINE + 1) as u64;
            let read = (&mut self.inner)
                .take(room)
                .read_until(b'\n', &mut self.buf);
            read.map_err(|e| Error::from(e).at_line(self.line))?;
            if self.buf.len() > MAX_LINE {
                let msg = format!("line longer than {MAX_LINE} bytes");
                return Err(Error::invalid(msg).at_line(self.line));
            }
            if self.buf.is_empty() {
                return Ok(None);
            }
            while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
                self.buf.pop();
            }
            if !self.buf.is_empty() {
                return Ok(Some(&self.buf));
            }
        }
    }

    /// Fail when the stream's first bytes start a PBF file.
    fn refuse_pbf(&mut self) -> Result<(), Error> {
        let head = self
            .inner
            .fill_buf()
            .map_err(|e| Error::from(e).at_line(1))?;
        if !pbf_format::frame::starts_like_pbf(head) {
            return Ok(());
        }
        Err(Error::invalid(
            "a PBF file, not a JSON Lines stream: the stages after pbf-index read streams \
             (pbf-index FILE | pbf-overlap | pbf-merge | pbf-copy -o OUT), and pbf-sort FILE \
             -o OUT sorts it",
        )
        .at_line(1))
    }

    /// Parse the next record, or `None` at EOF.
    pub fn next_record<T: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<T>, Error> {
        self.next_parsed(|line| serde_json::from_slice::<T>(line))
    }

    /// Parse the next line with `parse`, or `None` at EOF.
    fn next_parsed<T>(
        &mut self,
        parse: impl FnOnce(&[u8]) -> serde_json::Result<T>,
    ) -> Result<Option<T>, Error> {
        if self.next_line()?.is_none() {
            return Ok(None);
        }
        let started = self.parsing.start();
        let parsed = parse(&self.buf);
        self.parsing.stop(started);
        let err = |e| explain(&self.buf, e).at_line(self.line);
        parsed.map(Some).map_err(err)
    }
}

/// The largest line buffer kept for the next line.
const KEEP_LINE_BUFFER: usize = 1 << 20;

/// How every blob record our writer (and `jq -c`) writes begins.
const BLOB_START: &[u8] = br#"{"type":"blob","#;

/// How every merge record our writer (and `jq -c`) writes begins.
const MERGE_START: &[u8] = br#"{"type":"merge","#;

/// One record of a stream whose records are nearly all one variant (`wrap`),
/// whose lines in our writer's form (and `jq -c`'s, which keeps the order of
/// keys) begin with `start`: the index's blob records (1.3 million for a
/// planet), the plan's merge ops (one of millions of blobs is one line).
/// serde reads an internally tagged enum by buffering each record into a
/// tree first (several times the size of its line); a line that starts with
/// `start` is read straight into the variant's struct instead (which ignores
/// the `type` field), about twice as fast, and one in the exact form our
/// writer writes is read without serde (`fast`, [`crate::fast`]), faster
/// still (three times for merge ops). Every other line takes the general path.
fn parse_mostly<T: for<'de> Deserialize<'de>, V: for<'de> Deserialize<'de>>(
    line: &[u8],
    start: &[u8],
    fast: impl Fn(&[u8]) -> Option<V>,
    wrap: impl Fn(V) -> T,
) -> serde_json::Result<T> {
    if !line.starts_with(start) {
        return serde_json::from_slice(line);
    }
    fast(line)
        .map_or_else(|| serde_json::from_slice(line), Ok)
        .map(wrap)
}

/// The fields every header record has, to explain a failed parse.
#[derive(Deserialize)]
struct Probe {
    #[serde(rename = "type")]
    kind: Option<String>,
    schema: Option<String>,
    version: Option<u32>,
}

fn explain(line: &[u8], e: serde_json::Error) -> Error {
    // An object that its line ends inside of, where pretty-printing breaks
    // a line (after `{`, `[` or `,`): the first line of a record spread
    // over several (`jq .`, where `jq -c` was meant). A line cut anywhere
    // else (a writer that died) keeps the parser's word.
    let text = line.trim_ascii();
    if e.is_eof() && text.starts_with(b"{") && matches!(text.last(), Some(b'{' | b'[' | b',')) {
        return Error::invalid(
            "a JSON object that does not end on its line, as in a pretty-printed stream: \
             stream records are one JSON object per line (jq -c keeps them so; jq . \
             spreads each over several)",
        );
    }
    if let Ok(p) = serde_json::from_slice::<Probe>(line) {
        if let (Some(s), Some(v)) = (&p.schema, p.version) {
            if v != SCHEMA_VERSION {
                return unsupported(s, v);
            }
        }
        if p.kind.is_none() {
            return Error::invalid("record has no \"type\" field");
        }
    }
    Error::new(ErrorKind::Json(e))
}

fn unsupported(schema: &str, version: u32) -> Error {
    Error::invalid(format!(
        "{schema} version {version} is not supported (this tool reads version \
         {SCHEMA_VERSION}): write the stream again with the stages of this version"
    ))
}

/// The chunks a long merge op is written in ([`Writer::write_merge`]).
pub const MERGE_CHUNK: usize = 64 * 1024;

/// Writes records, one JSON object per line.
#[derive(Debug)]
pub struct Writer<W: Write> {
    inner: W,
    /// One serialised record: written to `inner` in one call.
    line: Vec<u8>,
    writing: Stopwatch,
}

impl<W: Write> Writer<W> {
    /// Wrap a writer (buffer it yourself).
    pub fn new(inner: W) -> Writer<W> {
        Writer {
            inner,
            line: Vec::new(),
            writing: Stopwatch::default(),
        }
    }

    /// Whether to measure the time spent serialising (on unless turned
    /// off; off, [`Writer::serialise_time`] stays zero).
    pub fn timed(mut self, on: bool) -> Writer<W> {
        self.writing.off = !on;
        self
    }

    /// Write one blob record and a newline: nearly every line of an index,
    /// written without serde in the form serde writes ([`crate::fast`]).
    pub fn write_blob(&mut self, record: &BlobRecord) -> Result<(), Error> {
        let started = self.writing.start();
        self.line.clear();
        if !crate::fast::write_blob(&mut self.line, record) {
            return self.write(&IndexRecord::Blob(record.clone()));
        }
        self.end_line(started)
    }

    /// Write one record and a newline.
    pub fn write<T: Serialize>(&mut self, record: &T) -> Result<(), Error> {
        let started = self.writing.start();
        self.line.clear();
        serde_json::to_writer(&mut self.line, record)?;
        self.end_line(started)
    }

    /// End the line serialised since `started` and write it.
    fn end_line(&mut self, started: Option<Instant>) -> Result<(), Error> {
        self.line.push(b'\n');
        self.writing.stop(started);
        self.inner.write_all(&self.line)?;
        Ok(())
    }

    /// Write a `merge` op whose inputs come one at a time: the line
    /// `write(&PlanRecord::Merge(op))` writes for the op of these fields,
    /// without holding the op or its whole line. A file of small blobs in
    /// random order is one merge op of millions of blobs (2.3 million
    /// inputs, a 400 MB line), so the line goes out in chunks of about
    /// [`MERGE_CHUNK`] bytes.
    pub fn write_merge(
        &mut self,
        first: KeyRecord,
        last: KeyRecord,
        elements: u64,
        inputs: impl IntoIterator<Item = MergeInput>,
    ) -> Result<(), Error> {
        let mut started = self.writing.start();
        // The record as serde writes it ([`MERGE_START`], the fields in the
        // order `MergeOp` declares them), the inputs one at a time.
        self.line.clear();
        self.line.extend_from_slice(MERGE_START);
        self.line.extend_from_slice(br#""inputs":["#);
        for (i, input) in inputs.into_iter().enumerate() {
            if i > 0 {
                self.line.push(b',');
            }
            if !crate::fast::write_merge_input(&mut self.line, &input) {
                serde_json::to_writer(&mut self.line, &input)?;
            }
            if self.line.len() >= MERGE_CHUNK {
                self.writing.stop(started);
                self.inner.write_all(&self.line)?;
                self.line.clear();
                started = self.writing.start();
            }
        }
        self.line.extend_from_slice(br#"],"first":"#);
        serde_json::to_writer(&mut self.line, &first)?;
        self.line.extend_from_slice(br#","last":"#);
        serde_json::to_writer(&mut self.line, &last)?;
        self.line.extend_from_slice(br#","elements":"#);
        serde_json::to_writer(&mut self.line, &elements)?;
        self.line.push(b'}');
        self.end_line(started)
    }

    /// Time spent serialising records so far.
    pub fn serialise_time(&self) -> Duration {
        self.writing.total
    }

    /// Flush and return the inner writer.
    pub fn finish(mut self) -> Result<W, Error> {
        self.inner.flush()?;
        Ok(self.inner)
    }

    /// Flush without giving up the writer.
    pub fn flush(&mut self) -> Result<(), Error> {
        Ok(self.inner.flush()?)
    }
}

/// Reads an index stream of one or more sections, validating each.
#[derive(Debug)]
pub struct IndexReader<R> {
    lines: LineReader<R>,
    /// The open section: its blob records so far, and their counts.
    section: Option<(u64, Counts)>,
    sections: u64,
}

impl<R: BufRead> IndexReader<R> {
    /// Read from a buffered reader.
    pub fn new(inner: R) -> IndexReader<R> {
        IndexReader {
            lines: LineReader::new(inner),
            section: None,
            sections: 0,
        }
    }

    /// Line number of the record last returned.
    pub fn line(&self) -> u64 {
        self.lines.line()
    }

    /// Whether to measure the time spent parsing ([`LineReader::timed`]).
    pub fn timed(mut self, on: bool) -> IndexReader<R> {
        self.lines = self.lines.timed(on);
        self
    }

    /// Time spent parsing records so far.
    pub fn parse_time(&self) -> Duration {
        self.lines.parse_time()
    }

    /// The next record; `None` at the end of the stream (after an `end` record).
    pub fn next_record(&mut self) -> Result<Option<IndexRecord>, Error> {
        let line = self.lines.line() + 1;
        let Some(rec) = self
            .lines
            .next_parsed(|l| parse_mostly(l, BLOB_START, crate::fast::blob, IndexRecord::Blob))?
        else {
            return match self.section {
                Some(_) => Err(Error::new(ErrorKind::MissingEnd).at_line(line)),
                None if self.sections == 0 => {
                    Err(Error::new(ErrorKind::EmptyStream("index")).at_line(line))
                }
                None => Ok(None),
            };
        };
        self.check(&rec).map_err(|e| e.at_line(self.lines.line()))?;
        Ok(Some(rec))
    }

    fn check(&mut self, rec: &IndexRecord) -> Result<(), Error> {
        match (rec, &mut self.section) {
            (IndexRecord::Source(s), None) => {
                check_schema(&s.schema, s.version, INDEX_SCHEMA)?;
                self.sections += 1;
                self.section = Some((0, Counts::default()));
            }
            (IndexRecord::Blob(b), Some((blobs, counts))) => {
                check_blob(b)?;
                *blobs += 1;
                counts.add(b.counts);
            }
            (IndexRecord::Header(_), Some(_)) => {}
            (IndexRecord::End(e), Some((blobs, counts))) => {
                if e.blobs != *blobs || e.counts != *counts {
                    let holding =
                        |blobs, counts| format!("{} holding {counts}", plural(blobs, "blob"));
                    let said = holding(e.blobs, &e.counts);
                    let found = holding(*blobs, &*counts);
                    return Err(Error::invalid(format!(
                        "the end record says {said}, the section's blob records add up to \
                         {found}: the index is incomplete or was edited; index the file again \
                         with pbf-index"
                    )));
                }
                self.section = None;
            }
            (IndexRecord::Source(_), _) => {
                return Err(Error::invalid(
                    "source record inside an open section (missing end?)",
                ));
            }
            (_, None) => return Err(Error::invalid("record before the source record")),
        }
        Ok(())
    }
}

fn check_blob(b: &BlobRecord) -> Result<(), Error> {
    let problem = if b.length < 4 || b.offset.checked_add(b.length).is_none() {
        " has an impossible range"
    } else if u8::from(b.sorted) + u8::from(b.repeats) + u8::from(b.versions_unsorted) > 1 {
        ": at most one of sorted, repeats and versions_unsorted can be true"
    } else if pbf_format::Key::from(b.first) > pbf_format::Key::from(b.last) {
        ": first key is after last key"
    } else {
        return Ok(());
    };
    Err(Error::invalid(format!("blob {}{problem}", b.seq)))
}

/// Reads a plan stream, validating ops against the header, their order
/// against their keys; `end` must close it (its counts may be stale: an
/// edited plan keeps its end record).
#[derive(Debug)]
pub struct PlanReader<R> {
    lines: LineReader<R>,
    header: PlanHeader,
    seen: PlanEnd,
    order: OrderCheck,
    done: bool,
}

impl<R: BufRead> PlanReader<R> {
    /// Read the `plan` header record.
    pub fn new(inner: R) -> Result<PlanReader<R>, Error> {
        let mut lines = LineReader::new(inner);
        let header = match lines.next_record::<PlanRecord>()? {
            Some(PlanRecord::Plan(h)) => check_header(h),
            Some(_) => Err(Error::invalid(
                "plan stream does not start with a plan record",
            )),
            None => Err(Error::new(ErrorKind::EmptyStream("plan"))),
        };
        let header = header.map_err(|e| e.at_line(lines.line()))?;
        Ok(PlanReader {
            lines,
            header,
            seen: PlanEnd::default(),
            order: OrderCheck::default(),
            done: false,
        })
    }

    /// The plan header.
    pub fn header(&self) -> &PlanHeader {
        &self.header
    }

    /// Line number of the record last returned.
    pub fn line(&self) -> u64 {
        self.lines.line()
    }

    /// Time spent parsing records so far.
    pub fn parse_time(&self) -> Duration {
        self.lines.parse_time()
    }

    /// The next op (`Copy` or `Merge`, or a `Header` that replaces the plan
    /// record's header and brings its `copy_bytes` when it has them, only
    /// before any op); `None` after a valid `end` record.
    pub fn next_op(&mut self) -> Result<Option<PlanRecord>, Error> {
        if self.done {
            return Ok(None);
        }
        let Some(rec) = self
            .lines
            .next_parsed(|l| parse_mostly(l, MERGE_START, crate::fast::merge, PlanRecord::Merge))?
        else {
            return Err(Error::new(ErrorKind::MissingEnd).at_line(self.lines.line()));
        };
        let line = self.lines.line();
        self.check(&rec, line).map_err(|e| e.at_line(line))?;
        if let PlanRecord::End(_) = rec {
            self.done = true;
            if self.lines.next_line()?.is_some() {
                return Err(
                    Error::invalid("records after the end record").at_line(self.lines.line())
                );
            }
            return Ok(None);
        }
        Ok(Some(rec))
    }

    fn check(&mut self, rec: &PlanRecord, line: u64) -> Result<(), Error> {
        match rec {
            PlanRecord::Plan(_) => return Err(Error::invalid("second plan record")),
            PlanRecord::Unsorted(_) => self.news_before_ops("unsorted")?,
            PlanRecord::Sorted(s) => {
                self.news_before_ops("sorted")?;
                let src = self.source(s.source);
                if !src.is_some_and(|r| !r.spool && s.through <= r.file.size) {
                    return Err(Error::invalid(format!(
                        "sorted record: offset {} of source {} lies outside the plan's sources",
                        s.through, s.source
                    )));
                }
            }
            PlanRecord::Header(h) => {
                if self.seen.ops > 0 {
                    return Err(Error::invalid(
                        "header record after an op: the output header must come before the data",
                    ));
                }
                self.header.header = h.header.clone();
                self.header.copy_bytes = h.copy_bytes.or(self.header.copy_bytes);
            }
            PlanRecord::Copy(c) => {
                self.check_range(c.source, c.offset, c.length)?;
                let framed: u64 = c.frames.iter().map(|f| f.length).sum();
                if !c.frames.is_empty() && (framed != c.length || c.frames.len() as u64 != c.blobs)
                {
                    return Err(Error::invalid(
                        "copy op frames do not add up to its length and blob count",
                    ));
                }
                self.order.copy(c, line, &self.header.sources)?;
                self.seen.add_copy(c);
            }
            PlanRecord::Merge(m) => {
                if m.inputs.is_empty() {
                    return Err(Error::invalid("merge op without inputs"));
                }
                for i in &m.inputs {
                    self.check_range(i.source, i.offset, i.length)?;
                }
                self.order.merge(m, line, &self.header.sources)?;
                self.seen.add_merge(m);
            }
            // Its counts are not checked: a plan edited with jq keeps its
            // end record, and only a stage that ended writes one at all.
            PlanRecord::End(_) => {}
        }
        Ok(())
    }

    /// A record about the input's order (`what`), which is news only
    /// before the first op.
    fn news_before_ops(&self, what: &str) -> Result<(), Error> {
        if self.seen.ops > 0 {
            return Err(Error::invalid(format!(
                "{what} record after an op: it is news only before the first op"
            )));
        }
        Ok(())
    }

    /// The plan's source `id`.
    fn source(&self, id: u32) -> Option<&SourceRef> {
        self.header.sources.iter().find(|s| s.id == id)
    }

    fn check_range(&self, source: u32, offset: u64, length: u64) -> Result<(), Error> {
        let src = self.source(source).ok_or_else(|| {
            Error::invalid(format!(
                "op names source {source}, which the plan does not list"
            ))
        })?;
        // A spool grows while the plan streams: its ranges are checked
        // against the file when they are read, not against `size` here.
        let end = offset
            .checked_add(length)
            .filter(|&e| (src.spool || e <= src.file.size) && length > 0);
        if end.is_none() {
            return Err(Error::invalid(format!(
                "range {offset}+{length} lies outside {} ({} bytes)",
                src.name(),
                src.file.size
            )));
        }
        Ok(())
    }
}

/// The plan record, refused when its schema is not this reader's or it
/// lists a source id twice.
fn check_header(h: PlanHeader) -> Result<PlanHeader, Error> {
    check_schema(&h.schema, h.version, PLAN_SCHEMA)?;
    for (i, s) in h.sources.iter().enumerate() {
        if h.sources[..i].iter().any(|t| t.id == s.id) {
            return Err(Error::invalid(format!("source id {} listed twice", s.id)));
        }
    }
    Ok(h)
}

/// Refuse a header record of another schema (`want`) or major version.
fn check_schema(schema: &str, version: u32, want: &str) -> Result<(), Error> {
    if schema != want {
        return Err(Error::invalid(format!(
            "expected schema {want}, found {schema}"
        )));
    }
    if version != SCHEMA_VERSION {
        return Err(unsupported(schema, version));
    }
    Ok(())
}
