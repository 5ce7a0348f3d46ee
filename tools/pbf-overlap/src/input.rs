//! Reading the index streams (pbf-stream(5)) into an [`Input`]: sources
//! numbered in order of appearance, their headers, and the blob records
//! kept to plan, judged for `--check`, or only counted. Each record is
//! checked as it comes (a file indexed twice, a blob outside its file, a
//! required feature not understood), and a caller sees the input after
//! every source and blob record, as the early plan watch needs.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use pbf_format::header::Header;
use pbf_stream::{BlobRecord, Counts, IndexReader, IndexRecord, Sample, SourceRecord, SourceRef};

use crate::check;
use crate::plan::{self, Segment};

/// Called after each source and blob record with everything read so far.
pub type OnRecord<'a> = dyn FnMut(&Input) -> Result<()> + 'a;

/// What the blob records are read for.
#[derive(Default)]
pub enum Purpose {
    /// Kept, to plan.
    Plan(plan::Blobs),
    /// Judged in file order as they come (`--check`).
    Check(check::Judge),
    /// Only counted, by the end records (`--objects-of`).
    #[default]
    Count,
}

/// Everything read from the index streams.
#[derive(Default)]
pub struct Input {
    /// The sources, numbered in order of appearance.
    pub sources: Vec<SourceRef>,
    /// Every OSMHeader read: each source's first, and later ones of a file
    /// joined from several.
    pub headers: Vec<Header>,
    /// The blob records, as kept for what they are read for.
    pub blobs: Purpose,
    /// The samples of the source read last, as its record gives them (for
    /// the early plan watch, `crate::ahead`).
    pub samples: Vec<Sample>,
    /// Blob records read.
    pub blob_records: u64,
    /// The sources' paths, to refuse a file indexed twice.
    paths: HashSet<PathBuf>,
    /// Objects per kind, from the end records.
    pub counts: Counts,
    /// The sources whose end record counts blobs with negative ids.
    pub negative_ids: Vec<u32>,
    /// Time spent parsing the index streams (measured for -v only).
    pub parsing: Duration,
    /// Whether to measure it.
    timed: bool,
    /// When reading began, for `-v`.
    started: Option<Instant>,
}

impl Input {
    /// Nothing read yet; parsing is timed when `timed` (for -vv).
    pub fn new(blobs: Purpose, timed: bool) -> Input {
        Input {
            blobs,
            timed,
            ..Input::default()
        }
    }

    /// Read every index stream of `names` ('-' for standard input), then
    /// sort the blobs to plan.
    pub fn read_all(&mut self, names: &[String], on_record: &mut OnRecord<'_>) -> Result<()> {
        let started = Instant::now();
        for name in names {
            self.read(pbf_cli::input_name(name), pbf_cli::input(name)?, on_record)?;
        }
        if let Purpose::Plan(blobs) = &mut self.blobs {
            blobs.sort();
        }
        self.started = Some(started);
        Ok(())
    }

    /// The name of each source, in source order: as given to pbf-index
    /// ([`SourceRef::name`]).
    pub fn source_names(&self) -> Vec<String> {
        self.sources.iter().map(SourceRef::name).collect()
    }

    /// The files the index describes, for messages: `a.osm.pbf` or
    /// `a.osm.pbf, b.osm.pbf` (`None` for an index without sources).
    pub fn files(&self) -> Option<String> {
        let names = self.source_names();
        (!names.is_empty()).then(|| names.join(", "))
    }

    /// Seconds since reading began.
    pub fn elapsed(&self) -> f64 {
        self.started.map_or(0.0, |t| t.elapsed().as_secs_f64())
    }

    /// The blob read last, when planning.
    pub fn last_planned(&self) -> Option<&Segment> {
        match &self.blobs {
            Purpose::Plan(blobs) => blobs.last(),
            _ => None,
        }
    }

    /// Read one index stream (one or more sections) named `name`.
    pub fn read(
        &mut self,
        name: &str,
        reader: Box<dyn BufRead>,
        on_record: &mut OnRecord<'_>,
    ) -> Result<()> {
        let mut rd = IndexReader::new(reader).timed(self.timed);
        let mut end_of_last = 0;
        while let Some(rec) = rd.next_record().with_context(|| name.to_owned())? {
            let at = |e: String| anyhow!("{name}: line {}: {e}", rd.line());
            match rec {
                IndexRecord::Source(s) => {
                    self.add_source(s).map_err(at)?;
                    end_of_last = 0;
                    on_record(self).with_context(|| format!("{name}: line {}", rd.line()))?;
                }
                IndexRecord::Blob(b) => {
                    self.check_range(&b, end_of_last).map_err(at)?;
                    end_of_last = b.offset + b.length;
                    self.add_blob(&b).map_err(at)?;
                    on_record(self).with_context(|| format!("{name}: line {}", rd.line()))?;
                }
                IndexRecord::Header(h) => self.add_header(h.header).map_err(at)?,
                IndexRecord::End(e) => {
                    self.counts.add(e.counts);
                    if e.negative_id_blobs > 0 {
                        self.negative_ids.push(self.sources.len() as u32 - 1);
                    }
                }
            }
        }
        self.parsing += rd.parse_time();
        Ok(())
    }

    fn add_source(&mut self, s: SourceRecord) -> Result<(), String> {
        let id = u32::try_from(self.sources.len()).map_err(|_| "too many sources".to_owned())?;
        let source = SourceRef {
            id,
            file: s.file,
            spool: false,
        };
        if !self.paths.insert(source.file.path.clone()) {
            return Err(format!(
                "{} is indexed twice; its objects would be duplicated",
                source.name()
            ));
        }
        self.samples = s.samples;
        self.sources.push(source);
        self.add_header(s.header)
    }

    /// A header of the source read last: its first, or a later one of a
    /// file joined from several (`cat`), which counts like another input's.
    fn add_header(&mut self, header: Header) -> Result<(), String> {
        let source = &self.sources[self.sources.len() - 1];
        if let Some(f) = header.unknown_required_feature() {
            return Err(format!(
                "{}: requires the feature {f:?}, which pbf-sort does not understand",
                source.name()
            ));
        }
        self.headers.push(header);
        Ok(())
    }

    /// A blob of the source read last, in file order.
    fn add_blob(&mut self, b: &BlobRecord) -> Result<(), String> {
        let source = self.sources.len() as u32 - 1;
        self.blob_records += 1;
        match &mut self.blobs {
            Purpose::Plan(blobs) => {
                let history = self.headers.last().is_some_and(|h| h.has_history());
                blobs.push(source, b, history)?
            }
            Purpose::Check(judge) => judge.blob(source, b),
            Purpose::Count => {}
        }
        Ok(())
    }

    /// Blobs must lie inside their file (the source read last), after the
    /// previous one.
    fn check_range(&self, b: &BlobRecord, end_of_last: u64) -> Result<(), String> {
        let src = &self.sources[self.sources.len() - 1];
        if b.offset < end_of_last {
            return Err(format!(
                "blob {} at offset {} starts before the previous blob ends ({end_of_last})",
                b.seq, b.offset
            ));
        }
        if b.offset + b.length > src.file.size {
            return Err(format!(
                "blob {} at offset {} (length {}) extends past the end of {} ({} bytes)",
                b.seq,
                b.offset,
                b.length,
                src.name(),
                src.file.size
            ));
        }
        Ok(())
    }
}
