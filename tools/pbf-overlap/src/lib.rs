//! `pbf-overlap`: the planning stage. It reads index streams (from pbf-index),
//! proves which blobs can be copied as they are, and writes the plan stream:
//! the output header, then copy ops for blobs whose key ranges overlap no
//! other blob and merge ops for the runs that do, in output order. With
//! `--check` it only answers whether the input is already in order.

mod check;
mod header;
mod plan;
mod samples;

use std::collections::HashSet;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};
use pbf_format::header::Header;
use pbf_stream::{
    BlobRecord, CopyOp, Counts, IndexReader, IndexRecord, OutputHeader, PlanEnd, PlanHeader,
    PlanRecord, SortedThrough, SourceRecord, SourceRef, StreamTime, Unsorted, Writer,
};

use plan::{Op, Segment};
use samples::Samples;

const NAME: &str = "pbf-overlap";

/// The command-line interface.
pub fn command() -> Command {
    let cmd = Command::new(NAME)
        .version(env!("CARGO_PKG_VERSION"))
        .about("Plan the sort: which blobs can be copied, which must be merged")
        .long_about(
            "Read index streams written by pbf-index and write the plan stream of pbf-stream(5) \
             on standard output: a plan record with the sources and the header of the output \
             file, the ops in output order, and an end record with counts.\n\n\
             Every blob is a segment [first key, last key] of the Sort.Type_then_ID key space. \
             The segments are sorted by first key and swept with a running maximum of the last \
             key, so overlap is transitive and blobs sharing a boundary key overlap. A blob that \
             overlaps no other and is sorted inside becomes a copy op; consecutive copies of \
             frames that are contiguous in the same file are coalesced into one copy op (at most \
             16384 frames each) carrying the keys of each frame (unless --no-frame-keys). Every \
             other run of blobs (several overlapping blobs, or one blob not sorted inside) \
             becomes a merge op for pbf-merge.\n\n\
             The output header keeps the inputs' required features (LocationsOnWays only when \
             every input has it; DenseNodes when a merge is planned), replaces Sort.* features by \
             Sort.Type_then_ID, keeps the union of the bounding boxes when every input has one, \
             and keeps source and replication fields only when all inputs agree.\n\n\
             With --check nothing is written to standard output: the exit status is 0 when the \
             input is already in order, 1 when it is not (the reason goes to standard \
             error), and 2 on an error, like cmp(1). Each file of the index streams is \
             judged on its own; with several, each reason names its file. Order is judged as osmium fileinfo -e \
             judges it, by type and id alone: repeated objects and versions of one object in \
             any order count as in order (the planner still merges such blobs). The check \
             judges the index it reads: a blob described by indexdata is judged by its \
             writer's word. To verify a file from its contents, index it with pbf-index \
             --decode (pbf-index --decode F | pbf-overlap --check), as pbf-sort --check does. \
             With \
             --objects-of INDEX it also answers 1 when the input does not hold as many objects \
             of each kind as INDEX (pbf-sort --check compares its output with its inputs this \
             way).",
        )
        .arg(
            Arg::new("index")
                .value_name("INDEX")
                .help(
                    "Index streams to read, each holding one or more sections; '-' or none \
                     reads standard input. Sources are numbered in order of appearance",
                )
                .num_args(0..),
        )
        .arg(
            Arg::new("check")
                .long("check")
                .help("Write no plan; exit 0 when the input is already in order, 1 when not, 2 on error")
                .action(ArgAction::SetTrue),
        )
        .arg(
            Arg::new("objects-of")
                .long("objects-of")
                .value_name("INDEX")
                .requires("check")
                .help(
                    "With --check, also exit 1 unless the input holds as many nodes, ways, \
                     relations and changesets as the index stream INDEX (its end records); when \
                     it does, say so in one line on standard error (unless -q). Messages name \
                     each side by the files its index describes",
                ),
        )
        .arg(
            Arg::new("objects-of-as")
                .long("objects-of-as")
                .value_name("NAMES")
                .requires("objects-of")
                .help(
                    "With --objects-of, name the files of that index NAMES in messages: for \
                     inputs the caller saved to files of its own (standard input, pipes)",
                ),
        )
        .arg(
            Arg::new("check-as")
                .long("check-as")
                .value_name("NAME")
                .requires("check")
                .help(
                    "With --check, name the file the index describes NAME in messages: for a \
                     check run on a temporary file that becomes NAME once it passes (the \
                     copiers' --check-cmd)",
                ),
        )
        .arg(
            Arg::new("no-frame-keys")
                .long("no-frame-keys")
                .help(
                    "Leave the per-frame keys out of copy ops. Only pbf-copy and pbf-reflink \
                     --add-indexdata need them, and for a sorted gigabyte they are megabytes of \
                     JSON that every later stage parses before the copy starts (pbf-sort passes \
                     this unless --add-indexdata)",
                )
                .action(ArgAction::SetTrue),
        )
        .arg(
            Arg::new("dedupe")
                .long("dedupe")
                .conflicts_with("check")
                .help(
                    "Plan for pbf-merge --dedupe: a blob whose keys repeat is merged (so the \
                     repeats are dropped), not copied because its equal keys are in order \
                     (pbf-sort passes this with --dedupe)",
                )
                .action(ArgAction::SetTrue),
        )
        .arg(
            Arg::new("sources")
                .long("sources")
                .value_name("N")
                .conflicts_with("check")
                .value_parser(value_parser!(u32).range(1..))
                .help(
                    "The index streams hold N sources. The plan record is then written as soon \
                     as the N-th source's first 16 blobs are read sorted and in file order, \
                     before the blobs are planned, and marked \"early\": true, unless the output \
                     header depends on the ops (DenseNodes is added for merges and no input \
                     requires it); with one source, pbf-copy starts copying ahead then. After it, \
                     \"sorted\" records say how far the last source is read in order (one at \
                     once, then one per 16 MiB) and an \"unsorted\" record when it is not. A \
                     blob is out of order, too, when one of the samples pbf-index took further on \
                     in its file sorts at or before its last key, so a file of two sorted files \
                     joined is seen before the index reaches the seam. Any other number of \
                     sources is an error (pbf-sort passes its number of inputs)",
                ),
        )
        .arg(
            Arg::new("generator")
                .long("generator")
                .value_name("NAME")
                .help("writingprogram of the output header [default: pbf-sort <version>]"),
        )
        ;
    let help = pbf_cli::VerbosityHelp {
        verbose: "Print one summary line on standard error: blobs passed through in copy ops and \
                  their bytes, blobs and elements to merge in merge ops, time, and the time \
                  spent parsing the index streams and serialising the plan (with --check: \
                  the blobs checked, time and parsing time)",
        quiet: "With --check, do not explain why the input is not in order",
    };
    pbf_cli::verbosity_args(cmd, help)
}

/// Run with parsed arguments.
pub fn run(m: &ArgMatches) -> Result<ExitCode> {
    if m.get_flag("check") {
        // Like cmp(1): 1 means "not in order", so an error must exit 2.
        return Ok(match read_check_input(m) {
            Ok((input, objects_of)) => {
                pbf_cli::report::counters(&CheckCounters {
                    blobs: input.blob_records,
                });
                if m.get_flag("verbose") {
                    let streams = StreamTime {
                        parsing: input.parsing,
                        writing: Duration::ZERO,
                    };
                    pbf_cli::warn(NAME, check_summary(&input, streams));
                }
                let checked = m.get_one::<String>("check-as").cloned();
                check(&input, checked, objects_of, m.get_flag("quiet"))
            }
            Err(err) => {
                pbf_cli::warn(NAME, format!("error: {}", pbf_cli::one_line(&err)));
                ExitCode::from(2)
            }
        });
    }
    let program = match m.get_one::<String>("generator") {
        Some(g) => g.clone(),
        None => format!("pbf-sort {}", env!("CARGO_PKG_VERSION")),
    };
    let out = Box::new(pbf_cli::stdout());
    let sources = m.get_one::<u32>("sources").copied();
    let mut plan = PlanOut::new(out, program, sources, m.get_flag("verbose"));
    let blobs = plan::Blobs::new(m.get_flag("dedupe"));
    let mut input = Input::new(Purpose::Plan(blobs));
    read_input(m, &mut input, &mut |input| plan.record_read(input))?;
    let (tally, writing) = plan.finish(&input, !m.get_flag("no-frame-keys"))?;
    pbf_cli::report::counters(&PlanCounters {
        blobs: input.blob_records,
        copy_blobs: tally.copy_blobs,
        copy_ops: tally.copy_ops,
        copy_bytes: tally.end.copy_bytes,
        merge_blobs: tally.end.merge_inputs,
        merge_ops: tally.merge_ops,
        merge_elements: tally.merge_elements,
    });
    if m.get_flag("verbose") {
        let streams = StreamTime {
            parsing: input.parsing,
            writing,
        };
        pbf_cli::warn(NAME, summary(&input, &tally, streams));
    }
    Ok(ExitCode::SUCCESS)
}

/// The `--objects-of` index of `--check`: the files it describes (for
/// messages) and their objects per kind.
struct Reference {
    files: String,
    several: bool,
    counts: Counts,
}

/// For `--check`: the input, and the `--objects-of` index when given.
fn read_check_input(m: &ArgMatches) -> Result<(Input, Option<Reference>)> {
    let mut input = Input::new(Purpose::Check(check::Judge::default()));
    read_input(m, &mut input, &mut |_| Ok(()))?;
    let Some(arg) = m.get_one::<String>("objects-of") else {
        return Ok((input, None));
    };
    let name = pbf_cli::input_name(arg).to_owned();
    let mut other = Input::new(Purpose::Count);
    other.read(&name, pbf_cli::input(arg)?, &mut |_| Ok(()))?;
    let shown = m.get_one::<String>("objects-of-as").cloned();
    let reference = Reference {
        files: shown.or_else(|| files_of(&other)).unwrap_or(name),
        several: other.sources.len() > 1,
        counts: other.counts,
    };
    Ok((input, Some(reference)))
}

/// The files an index describes, for messages: `a.osm.pbf` or
/// `a.osm.pbf, b.osm.pbf` (`None` for an index without sources).
fn files_of(input: &Input) -> Option<String> {
    let names = source_names(input);
    (!names.is_empty()).then(|| names.join(", "))
}

/// The name of each source of an index, in source order: as given to
/// pbf-index ([`SourceRef::name`]).
fn source_names(input: &Input) -> Vec<String> {
    input.sources.iter().map(SourceRef::name).collect()
}

/// Called after each source and blob record with everything read so far.
type OnRecord<'a> = dyn FnMut(&Input) -> Result<()> + 'a;

/// Read every index stream named on the command line into `input`, and
/// sort the blobs to plan.
fn read_input(m: &ArgMatches, input: &mut Input, on_record: &mut OnRecord<'_>) -> Result<()> {
    let names: Vec<String> = match m.get_many::<String>("index") {
        Some(v) => v.cloned().collect(),
        None => vec!["-".to_owned()],
    };
    let started = Instant::now();
    input.timed = m.get_flag("verbose");
    for name in &names {
        input.read(pbf_cli::input_name(name), pbf_cli::input(name)?, on_record)?;
    }
    if let Purpose::Plan(blobs) = &mut input.blobs {
        blobs.sort();
    }
    input.started = Some(started);
    Ok(())
}

/// What the blob records are read for.
enum Purpose {
    /// Kept, to plan.
    Plan(plan::Blobs),
    /// Judged in file order as they come (`--check`).
    Check(check::Judge),
    /// Only counted, by the end records (`--objects-of`).
    Count,
}

/// Everything read from the index streams.
struct Input {
    sources: Vec<SourceRef>,
    headers: Vec<Header>,
    blobs: Purpose,
    /// The samples of the source read last.
    samples: Samples,
    /// Blob records read.
    blob_records: u64,
    paths: HashSet<PathBuf>,
    /// Objects per kind, from the end records.
    counts: Counts,
    /// Time spent parsing the index streams (measured for -v only).
    parsing: Duration,
    /// Whether to measure it.
    timed: bool,
    /// When reading began, for `-v`.
    started: Option<Instant>,
}

impl Input {
    fn new(blobs: Purpose) -> Input {
        Input {
            sources: Vec::new(),
            headers: Vec::new(),
            blobs,
            samples: Samples::default(),
            blob_records: 0,
            paths: HashSet::new(),
            counts: Counts::default(),
            parsing: Duration::ZERO,
            timed: false,
            started: None,
        }
    }

    /// The blob read last, when planning.
    fn last_planned(&self) -> Option<&Segment> {
        match &self.blobs {
            Purpose::Plan(blobs) => blobs.last(),
            _ => None,
        }
    }

    /// Read one index stream (one or more sections) named `name`.
    fn read(
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
                IndexRecord::End(e) => self.counts.add(e.counts),
            }
        }
        self.parsing += rd.parse_time();
        Ok(())
    }

    fn add_source(&mut self, s: SourceRecord) -> Result<(), String> {
        let id = u32::try_from(self.sources.len()).map_err(|_| "too many sources".to_owned())?;
        let path = s.path;
        let source = SourceRef {
            id,
            path,
            size: s.size,
            mtime: s.mtime,
            mtime_nsec: s.mtime_nsec,
            ctime: s.ctime,
            ctime_nsec: s.ctime_nsec,
            given: s.given,
            spool: false,
        };
        if !self.paths.insert(source.path.clone()) {
            return Err(format!(
                "{} is indexed twice; its objects would be duplicated",
                source.name()
            ));
        }
        self.samples = Samples::new(&s.samples);
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
            Purpose::Plan(blobs) => blobs.push(source, b)?,
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
        if b.offset + b.length > src.size {
            return Err(format!(
                "blob {} at offset {} (length {}) extends past the end of {} ({} bytes)",
                b.seq,
                b.offset,
                b.length,
                src.name(),
                src.size
            ));
        }
        Ok(())
    }
}

/// Blobs of the last source that must be read sorted and in file order
/// before `--sources` writes the plan record early: a copier copies ahead on
/// the guess that the input is sorted, and an input whose first blobs are
/// out of order (blob-permuted, or unsorted inside its blobs) would waste
/// that copy. Sixteen blobs are a moment of indexing.
const IN_ORDER_FIRST: u32 = 16;

/// Bytes of the last source read in order between two `sorted` records: a
/// copier copies ahead in steps of this size too, so it follows the index
/// a step behind, with a record per step.
const SORTED_STEP: u64 = 16 << 20;

/// The plan stream being written: its record goes out as soon as it is
/// known (`--sources`), the ops once every blob is read.
struct PlanOut {
    out: Writer<Box<dyn std::io::Write>>,
    program: String,
    /// `--sources`.
    sources: Option<u32>,
    /// Blobs of the last source read so far in order, and the last one's
    /// largest key; `None` once one was out of order (after an early plan
    /// record: the `unsorted` record went out), or the header proved to
    /// depend on the ops.
    in_order: Option<(u32, u128)>,
    /// The header of the plan record, when it went out before the blobs
    /// were read.
    early: Option<Header>,
    /// The offset of the last `sorted` record.
    sorted_through: u64,
}

impl PlanOut {
    /// A plan written to `out`; serialising is timed when `timed` (for
    /// -v: a clock read per record adds up).
    fn new(
        out: Box<dyn std::io::Write>,
        program: String,
        sources: Option<u32>,
        timed: bool,
    ) -> PlanOut {
        PlanOut {
            out: Writer::new(out).timed(timed),
            program,
            sources,
            in_order: Some((0, 0)),
            early: None,
            sorted_through: 0,
        }
    }

    /// After a source or blob record: with `--sources N`, write the plan
    /// record once N sources are in and the first blobs of the last one are
    /// in order, when no op can change the output header.
    fn record_read(&mut self, input: &Input) -> Result<()> {
        let Some(want) = self.sources else {
            return Ok(());
        };
        let have = input.sources.len();
        if have > want as usize {
            bail!("--sources {want}, but the index streams hold more sources");
        }
        if self.early.is_some() {
            return self.watch_order(input);
        }
        if self.in_order.is_none() || have < want as usize {
            return Ok(());
        }
        let Some(seg) = input
            .last_planned()
            .filter(|s| s.source() as usize + 1 == have)
        else {
            return Ok(());
        };
        self.follow(seg, &input.samples);
        if self.in_order.is_none_or(|(n, _)| n < IN_ORDER_FIRST) {
            return Ok(());
        }
        // Every source is in: whatever the answer, it is final, so the
        // watch ends here either way. (A later OSMHeader of the last source
        // can still change the header: `finish` then writes a header record.)
        let header = header::output_header(&input.headers, false, &self.program);
        if header != header::output_header(&input.headers, true, &self.program) {
            self.in_order = None;
            return Ok(());
        }
        self.out.write(&plan_record(input, header.clone(), None))?;
        self.early = Some(header);
        self.sorted(seg)
    }

    /// Say that the last source is in order through `seg`, now (after the
    /// early plan record) or once it is a step past the last such record.
    fn sorted(&mut self, seg: &Segment) -> Result<()> {
        if self.sorted_through > 0 && seg.end() < self.sorted_through + SORTED_STEP {
            return Ok(());
        }
        self.sorted_through = seg.end();
        self.out.write(&PlanRecord::Sorted(SortedThrough {
            source: seg.source(),
            through: seg.end(),
        }))?;
        self.out.flush()?;
        Ok(())
    }

    /// Take `seg`, the last source's newest blob, into the watch of its
    /// order: still in order when sorted inside, after the blob before, and
    /// before every sample further on in the file (see [`Samples`]).
    fn follow(&mut self, seg: &Segment, samples: &Samples) {
        self.in_order = self.in_order.and_then(|(n, last)| {
            let next = seg.sorted() && (n == 0 || seg.first() > last) && !samples.contradict(seg);
            next.then_some((n + 1, seg.last()))
        });
    }

    /// After an early plan record: at the first blob of the last source out
    /// of file order, say so at once (a copier copying that source ahead
    /// stops), long before the ops.
    fn watch_order(&mut self, input: &Input) -> Result<()> {
        let Some(seg) = input.last_planned() else {
            return Ok(());
        };
        // The early record needed the source in order so far: once that
        // ends, the record below has gone out.
        if self.in_order.is_none() || seg.source() as usize + 1 != input.sources.len() {
            return Ok(());
        }
        self.follow(seg, &input.samples);
        if self.in_order.is_some() {
            return self.sorted(seg);
        }
        self.out.write(&PlanRecord::Unsorted(Unsorted {}))?;
        self.out.flush()?;
        Ok(())
    }

    /// Write the plan record (unless it went out early), the ops and the end;
    /// returns what was planned and the time spent serialising it.
    fn finish(mut self, input: &Input, frame_keys: bool) -> Result<(Tally, Duration)> {
        if let Some(want) = self.sources.filter(|&n| n as usize != input.sources.len()) {
            bail!(
                "--sources {want}, but the index streams hold {} source(s)",
                input.sources.len()
            );
        }
        let Purpose::Plan(blobs) = &input.blobs else {
            bail!("internal error: no blobs were kept to plan");
        };
        let merges = blobs.runs().any(|r| !plan::is_copy(r));
        let header = header::output_header(&input.headers, merges, &self.program);
        let copy_bytes = Some(blobs.copy_bytes());
        // After an early plan record, the header record brings what the
        // plan copies (and the header, changed or not) before the first op.
        let record = match self.early.take() {
            None => plan_record(input, header, copy_bytes),
            Some(_) => PlanRecord::Header(OutputHeader { header, copy_bytes }),
        };
        self.out.write(&record)?;
        let mut tally = Tally::default();
        for op in blobs.ops(frame_keys) {
            match op {
                Op::Copy(c) => {
                    tally.copy(&c);
                    self.out.write(&PlanRecord::Copy(c))?;
                }
                Op::Merge(m) => {
                    let elements = m.elements();
                    self.out
                        .write_merge(m.first(), m.last(), elements, m.inputs())?;
                    tally.merge(m.len(), elements);
                }
            }
        }
        self.out.write(&PlanRecord::End(tally.end))?;
        let writing = self.out.serialise_time();
        self.out.finish()?;
        Ok((tally, writing))
    }
}

/// What the ops of a plan hold, for its end record and `-v`.
#[derive(Default)]
struct Tally {
    end: PlanEnd,
    copy_ops: u64,
    copy_blobs: u64,
    merge_ops: u64,
    merge_elements: u64,
}

impl Tally {
    fn copy(&mut self, c: &CopyOp) {
        self.end.add_copy(c);
        self.copy_ops += 1;
        self.copy_blobs += c.blobs;
    }

    fn merge(&mut self, inputs: u64, elements: u64) {
        self.end.add_merge_of(inputs, elements);
        self.merge_ops += 1;
        self.merge_elements += elements;
    }
}

/// The plan record: early (before planning) when `copy_bytes` is not
/// known yet.
fn plan_record(input: &Input, header: Header, copy_bytes: Option<u64>) -> PlanRecord {
    PlanRecord::Plan(PlanHeader {
        schema: pbf_stream::PLAN_SCHEMA.into(),
        version: pbf_stream::SCHEMA_VERSION,
        sources: input.sources.clone(),
        header,
        early: copy_bytes.is_none(),
        copy_bytes,
    })
}

/// `--check`: exit 0 when the input is in order (and holds the objects of
/// `objects_of`, when given), else 1 with the reasons on standard error.
/// `check_as` names the checked file in messages instead of its path.
fn check(
    input: &Input,
    check_as: Option<String>,
    objects_of: Option<Reference>,
    quiet: bool,
) -> ExitCode {
    let names = match &check_as {
        Some(name) => vec![name.clone(); input.sources.len()],
        None => source_names(input),
    };
    let reasons = match &input.blobs {
        Purpose::Check(judge) => judge.reasons(&names),
        _ => Vec::new(),
    };
    let mut why: Vec<String> = reasons
        .into_iter()
        .map(|line| format!("not in order: {line}"))
        .collect();
    let mut same = None;
    if let Some(other) = objects_of {
        // Each side named by its files: the index checked, and the other.
        let checked = check_as
            .or_else(|| files_of(input))
            .unwrap_or_else(|| "the input".into());
        let (files, want) = (other.files, other.counts);
        let verb = if other.several { "hold" } else { "holds" };
        if want == input.counts {
            same = Some(format!("{checked} holds the objects of {files}: {want}"));
        } else {
            why.push(format!(
                "objects differ: {checked} holds {}; {files} {verb} {want}",
                input.counts
            ));
        }
    }
    if why.is_empty() {
        if let Some(line) = same.filter(|_| !quiet) {
            pbf_cli::warn(NAME, line);
        }
        return ExitCode::SUCCESS;
    }
    if !quiet {
        for line in why {
            pbf_cli::warn(NAME, line);
        }
    }
    ExitCode::from(pbf_cli::EXIT_NO)
}

/// The counters of a plan's report (`pbf_cli::report`), as its `-v` line.
#[derive(serde::Serialize)]
struct PlanCounters {
    /// Blob records read.
    blobs: u64,
    /// Blobs passed through in copy ops, in how many ops, and their bytes.
    copy_blobs: u64,
    copy_ops: u64,
    copy_bytes: u64,
    /// Blobs to merge in merge ops, in how many ops, and their objects.
    merge_blobs: u64,
    merge_ops: u64,
    merge_elements: u64,
}

/// The counters of a `--check` run's report: the blob records checked.
#[derive(serde::Serialize)]
struct CheckCounters {
    blobs: u64,
}

/// The `-v` line of a plan; the time includes waiting for the index streams.
fn summary(input: &Input, tally: &Tally, streams: StreamTime) -> String {
    format!(
        "{} blobs: {} passed through in {} copy op(s) of {} bytes, {} to merge in {} merge \
         op(s) of {} elements; {:.3}s; {streams}",
        input.blob_records,
        tally.copy_blobs,
        tally.copy_ops,
        tally.end.copy_bytes,
        tally.end.merge_inputs,
        tally.merge_ops,
        tally.merge_elements,
        elapsed(input)
    )
}

/// The `-v` line of `--check`.
fn check_summary(input: &Input, streams: StreamTime) -> String {
    format!(
        "{} blobs checked; {:.3}s; {streams}",
        input.blob_records,
        elapsed(input)
    )
}

/// Seconds since reading began.
fn elapsed(input: &Input) -> f64 {
    input.started.map_or(0.0, |t| t.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::io::Cursor;
    use std::rc::Rc;

    use pbf_stream::{IndexEnd, Sample};

    /// A writer whose bytes the test reads while a [`PlanOut`] owns it.
    #[derive(Clone, Default)]
    struct Shared(Rc<RefCell<Vec<u8>>>);

    impl std::io::Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The index of one file whose blobs hold the ways `keys` (first,
    /// last), 1000 bytes apart, sampled at the blobs `sampled`.
    fn index(keys: &[(i64, i64)], sampled: &[usize]) -> Vec<u8> {
        let blobs: Vec<BlobRecord> = keys
            .iter()
            .zip(0..)
            .map(|(&(first, last), i)| BlobRecord {
                seq: i,
                ..plan::tests::way(first, last, 100 + i * 1000, 1000)
            })
            .collect();
        let samples = sampled
            .iter()
            .map(|&i| Sample {
                offset: blobs[i].offset,
                first: blobs[i].first,
            })
            .collect();
        let header = Header {
            required_features: vec!["OsmSchema-V0.6".into(), "DenseNodes".into()],
            ..Header::default()
        };
        let mut w = Writer::new(Vec::new());
        let source = SourceRecord {
            schema: pbf_stream::INDEX_SCHEMA.into(),
            version: pbf_stream::SCHEMA_VERSION,
            path: "/in.osm.pbf".into(),
            size: 100 + 1000 * blobs.len() as u64,
            mtime: 0,
            mtime_nsec: 0,
            ctime: None,
            ctime_nsec: None,
            given: None,
            header,
            samples,
        };
        w.write(&IndexRecord::Source(source)).expect("source");
        let mut end = IndexEnd::default();
        for b in blobs {
            end.blobs += 1;
            end.counts.add(b.counts);
            w.write(&IndexRecord::Blob(b)).expect("blob");
        }
        w.write(&IndexRecord::End(end)).expect("end");
        w.finish().expect("index")
    }

    /// What `pbf-overlap --sources 1` writes for `index`: each record's
    /// type (`plan early` for an early plan record) and how many blob
    /// records had been read when it went out (all of them for those
    /// written at the end).
    fn written(index: Vec<u8>) -> Vec<(u64, String)> {
        let buf = Shared::default();
        let mut plan = PlanOut::new(Box::new(buf.clone()), "test".into(), Some(1), false);
        let mut input = Input::new(Purpose::Plan(plan::Blobs::default()));
        let mut lines = Vec::new();
        let mut take_lines = |read: u64| {
            let mut bytes = buf.0.borrow_mut();
            let text = String::from_utf8(std::mem::take(&mut *bytes)).expect("utf-8");
            for line in text.lines() {
                let kind = line["{\"type\":\"".len()..]
                    .split('"')
                    .next()
                    .expect("type");
                let early = if line.contains("\"early\":true") {
                    " early"
                } else {
                    ""
                };
                lines.push((read, format!("{kind}{early}")));
            }
        };
        let mut on_record = |input: &Input| {
            plan.record_read(input)?;
            take_lines(input.blob_records);
            Ok(())
        };
        input
            .read("index", Box::new(Cursor::new(index)), &mut on_record)
            .expect("read");
        if let Purpose::Plan(blobs) = &mut input.blobs {
            blobs.sort();
        }
        plan.finish(&input, false).expect("plan");
        take_lines(input.blob_records);
        lines
    }

    /// Blobs of ways [10 i, 10 i + 9] for i in `range`.
    fn sorted_keys(range: std::ops::Range<i64>) -> Vec<(i64, i64)> {
        range.map(|i| (10 * i, 10 * i + 9)).collect()
    }

    /// Blobs of ways that interleave those of `sorted_keys(range)`.
    fn interleaving(range: std::ops::Range<i64>) -> Vec<(i64, i64)> {
        range.map(|i| (10 * i + 5, 10 * i + 8)).collect()
    }

    /// The first record of `kind` and when it went out.
    fn first_of<'a>(lines: &'a [(u64, String)], kind: &str) -> Option<&'a (u64, String)> {
        lines.iter().find(|(_, k)| k == kind)
    }

    #[test]
    fn a_sample_against_the_first_blobs_keeps_the_plan_record_back() {
        // Two sorted halves: the second's keys fall among the first's.
        let keys = [sorted_keys(0..20), interleaving(0..20)].concat();
        let without = written(index(&keys, &[]));
        assert_eq!(first_of(&without, "plan early").map(|l| l.0), Some(16));
        assert_eq!(first_of(&without, "unsorted").map(|l| l.0), Some(21));
        let with = written(index(&keys, &[10, 20, 30]));
        assert_eq!(with[0], (40, "plan".to_owned()), "{with:?}");
        assert!(first_of(&with, "sorted").is_none(), "{with:?}");
        assert!(first_of(&with, "unsorted").is_none(), "{with:?}");
    }

    #[test]
    fn a_sample_against_a_later_blob_says_unsorted_when_that_blob_is_read() {
        // In order through blob 29; blob 30 on interleave blobs 20 to 29.
        let keys = [sorted_keys(0..30), interleaving(20..30)].concat();
        let without = written(index(&keys, &[]));
        assert_eq!(first_of(&without, "unsorted").map(|l| l.0), Some(31));
        // The sample of blob 32 (first key 225) sorts inside blob 22.
        let with = written(index(&keys, &[8, 32]));
        assert_eq!(with[0], (16, "plan early".to_owned()), "{with:?}");
        assert_eq!(with[1], (16, "sorted".to_owned()), "{with:?}");
        assert_eq!(first_of(&with, "unsorted").map(|l| l.0), Some(23));
        let ops = |lines: &[(u64, String)]| -> Vec<String> {
            lines
                .iter()
                .skip(2)
                .filter(|l| l.1 != "unsorted")
                .map(|l| l.1.clone())
                .collect()
        };
        assert_eq!(ops(&with), ops(&without), "the same ops");
    }

    /// The records `pbf-overlap` writes for `index`, with `--sources`
    /// when given.
    fn plan_records(index: Vec<u8>, sources: Option<u32>) -> Vec<PlanRecord> {
        let buf = Shared::default();
        let mut plan = PlanOut::new(Box::new(buf.clone()), "test".into(), sources, false);
        let mut input = Input::new(Purpose::Plan(plan::Blobs::default()));
        let mut on_record = |input: &Input| plan.record_read(input);
        input
            .read("index", Box::new(Cursor::new(index)), &mut on_record)
            .expect("read");
        if let Purpose::Plan(blobs) = &mut input.blobs {
            blobs.sort();
        }
        plan.finish(&input, false).expect("plan");
        let mut lines = pbf_stream::LineReader::new(Cursor::new(buf.0.take()));
        std::iter::from_fn(|| lines.next_record().expect("a plan record")).collect()
    }

    #[test]
    fn the_plan_says_what_its_copy_ops_copy_before_the_first_op() {
        // Blobs 16 to 19 overlap the blobs after them: 16 blobs are copied.
        let keys = [sorted_keys(0..20), interleaving(16..20)].concat();
        let copied = Some(16 * 1000);
        let planned = plan_records(index(&keys, &[]), None);
        let PlanRecord::Plan(p) = &planned[0] else {
            panic!("{planned:?}");
        };
        assert_eq!((p.early, p.copy_bytes), (false, copied));
        assert!(!planned.iter().any(|r| matches!(r, PlanRecord::Header(_))));
        // An early plan record cannot know: the header record brings it.
        let early = plan_records(index(&keys, &[]), Some(1));
        let PlanRecord::Plan(p) = &early[0] else {
            panic!("{early:?}");
        };
        assert_eq!((p.early, p.copy_bytes), (true, None));
        let first_op = early
            .iter()
            .position(|r| matches!(r, PlanRecord::Copy(_) | PlanRecord::Merge(_)))
            .expect("ops");
        let PlanRecord::Header(h) = &early[first_op - 1] else {
            panic!("{early:?}");
        };
        assert_eq!((&h.header, h.copy_bytes), (&p.header, copied));
        assert_eq!(early[first_op..], planned[1..], "the same ops");
    }

    #[test]
    fn samples_of_a_sorted_file_change_nothing() {
        let keys = sorted_keys(0..40);
        let every: Vec<usize> = (0..40).step_by(3).collect();
        let with = written(index(&keys, &every));
        assert_eq!(with, written(index(&keys, &[])));
        assert_eq!(with[0], (16, "plan early".to_owned()), "{with:?}");
        assert_eq!(with[1], (16, "sorted".to_owned()), "{with:?}");
        assert!(first_of(&with, "unsorted").is_none(), "{with:?}");
    }
}
