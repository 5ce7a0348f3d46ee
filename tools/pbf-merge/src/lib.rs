//! `pbf-merge`: the merge stage. It reads a plan, executes every merge op
//! into a spool file with the engine of `pbf-merge-core`, and writes the plan
//! again with each merge op replaced by copy ops from the spool (added to
//! the sources), so that only copy ops are left for `pbf-copy`. Copy ops
//! pass through unchanged and in order. The plan streams: copy ops go out,
//! and standard output is flushed, as soon as the frames they name are in
//! the spool, so the copier works while later ops are still merging. On any
//! error no `end` record is written, so nothing downstream writes an output.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Arg, ArgMatches, Command, value_parser};
use pbf_cli::args::{flag, option};
use pbf_format::compress::Compression;
use pbf_merge_core::{Flight, MergeStats, Merger, Options, Ready, Span, Spool, WrittenFrame};
mod alloc;
mod ops;

use ops::OpQueue;
use pbf_cli::{lock, plural};
use pbf_format::{Keep, Key, Kind};
use pbf_stream::{
    CopyOp, Counts, FileIdentity, FrameKeys, KeyRecord, MergeOp, PlanEnd, PlanHeader, PlanReader,
    PlanRecord, SourceFiles, SourceRef, StreamTime, Writer,
};

const NAME: &str = "pbf-merge";

/// The command-line interface.
pub fn command() -> Command {
    let cmd = Command::new(NAME)
        .version(env!("CARGO_PKG_VERSION"))
        .about("Execute the merge ops of a plan into a spool file")
        .long_about(
            "Read a plan stream (pbf-stream(5)) written by pbf-overlap and write it again on \
             standard output with every merge op executed: the blobs of the op are decoded, \
             merged into Sort.Type_then_ID order and re-encoded into blocks of up to 8000 \
             elements (DenseNodes; indexdata in the BlobHeaders only with --indexdata) appended to the \
             spool file, and the merge op is replaced by copy ops of those frames. The spool is \
             added to the plan's sources as a growing file. Copy ops pass through unchanged.\n\n\
             Blobs of a merge op are partitioned into the fewest chains of non-overlapping blobs and \
             merged k-way, one decoded blob per chain at a time. Small blobs (a few objects \
             each, as converters write them) are gathered into batches that are decoded and \
             sorted together, and sorted into compact runs kept in memory; where the keys show \
             that no chain could hold more than a few small blobs (a shuffled file), every \
             blob is batched without forming the chains. When the runs do \
             not fit in --memory, groups that fit are merged into sorted temporary runs beside \
             the spool (deleted when done), on as many levels as needed.\n\n\
             Several merge ops are merged at once (one more than -j), each on a thread of its own, \
             their frames appended to the spool in plan order; together they stay within --memory, \
             and an op that must sort batches or spill runs alone. Such an op sorts its groups of \
             batches side by side, and cuts its final merge into key ranges (equal keys in one) \
             merged side by side, whose elements go in key order to the one writer that cuts the \
             blocks: the output is the same, byte for byte, whatever -j is.\n\n\
             Elements with the same type, id \
             and version sort as osmium sort puts them: by timestamp (whole seconds; an unset \
             timestamp first), then in input order (source, offset, position); --dedupe keeps \
             only the first, --latest only the last of each type and id (its newest version), \
             and not even that when it is deleted.\n\n\
             The spool is removed once the copier has read it (pbf-copy and pbf-reflink do so \
             unless --keep-spools), here on an error or a signal, and at the end when no op \
             merged anything (the plan then still lists it, but no op reads it).\n\n\
             On an error (a corrupt blob, a plan that does not match its files, a spool that \
             cannot be written) one line names the file and offset, the exit status is 1 and no \
             end record is written.",
        )
        .arg(
            Arg::new("plan")
                .value_name("PLAN")
                .help("Plan stream to read; '-' or none reads standard input"),
        )
        .arg(
            option(
                "spool",
                "PATH",
                "Spool file to create (it must not exist) [default: a new file in --tmpdir, \
                 else $TMPDIR]. The copier removes it once it has read it (pbf-copy \
                 --keep-spools keeps it); it is removed here on an error or \
                 SIGINT/SIGTERM/SIGHUP, and at the end when no op merged anything",
            )
            .value_parser(value_parser!(PathBuf)),
        )
        .arg(
            option(
                "tmpdir",
                "DIR",
                "Make the spool, under a new name, and the merge's spills in DIR [default: \
                 $TMPDIR]",
            )
            .conflicts_with("spool")
            .value_parser(value_parser!(PathBuf)),
        )
        .arg(
            option(
                "memory",
                "SIZE",
                "Budget for a merge op, e.g. 512M, 4G: decoded objects, sorted runs kept in \
                 memory and 64 bytes per input blob; encoding buffers of a few blocks per \
                 thread come on top",
            )
            .default_value("1G")
            .value_parser(pbf_cli::parse_budget),
        )
        .arg(
            pbf_cli::jobs_arg("Worker threads for decoding, encoding and compression [default: all cores]"),
        )
        .arg(
            pbf_cli::compression_arg(
                "compression",
                "Compression of merged blocks: zlib[:0-9], zstd[:1-22], lz4 or none. Copied \
                 blobs keep their own; osmium 1.15 cannot read zstd",
            )
            .default_value("zlib:6"),
        )
        .arg(
            option(
                "align",
                "BYTES",
                "Start each merge op's frames in the spool at a multiple of BYTES (the \
                 filesystem block size, e.g. 4096; a power of two up to 1M), padding with \
                 frames readers skip, so pbf-reflink can clone the merged frames [default: none]",
            )
            .value_parser(parse_align),
        )
        .arg(flag(
            "dedupe",
            "Drop repeated (type, id, version), keeping the one that sorts first",
        ))
        .arg(flag(
            "latest",
            "Keep only the newest version of each object: the highest version, then the later \
             timestamp, then the later input; none where that one is deleted",
        ))
        .arg(flag(
            "indexdata",
            "Write pbf-sort indexdata into the BlobHeader of every merged blob. Off by default: \
             the copiers copy these frames as they are, and osmconvert 0.9 (osmctools) reads \
             only BlobHeaders of 11 to 17 bytes; pbf-copy --add-indexdata writes indexdata into \
             the output from the plan's keys",
        ));
    let help = pbf_cli::VerbosityHelp {
        verbose: "Print the merges' objects in and out and the spool path on standard error; given \
                  twice (-vv), a summary of the merges instead (with the chains, batches and \
                  spills, the time \
                  spent parsing and serialising the plan stream and the merge's available \
                  parallelism: the merge tasks' CPU time over the longest chain of tasks that had to run \
                  one after another, about how many cores the merge could keep busy; see \
                  AVAILABLE PARALLELISM in pbf-merge(1))",
        quiet: "No progress bar; nothing on standard error but errors",
    };
    pbf_cli::progress_args(pbf_cli::verbosity_args(cmd, help))
}

/// Run with parsed arguments.
pub fn run(m: &ArgMatches) -> Result<ExitCode> {
    alloc::keep_freed_memory();
    let name = m.get_one::<String>("plan").map_or("-", String::as_str);
    let verbose = pbf_cli::verbosity(m);
    // Before the plan is read (it may come slowly through a pipe).
    // `--tmpdir DIR`, else `$TMPDIR`, and how messages name it.
    let (spool_dir, what) = match m.get_one::<PathBuf>("tmpdir") {
        Some(dir) => (dir.clone(), "--tmpdir"),
        None => (std::env::temp_dir(), "the spool's $TMPDIR"),
    };
    match m.get_one::<PathBuf>("spool") {
        Some(spool) => check_spool(spool)?,
        None => pbf_cli::paths::check_dir(what, &spool_dir)?,
    }
    let reader = PlanReader::new(pbf_cli::input(name)?)
        .with_context(|| pbf_cli::input_name(name).to_owned())?;
    let sources = SourceFiles::open(&reader.header().sources)?;
    let mut spool = match m.get_one::<PathBuf>("spool") {
        Some(p) => Spool::create(p)?,
        None => Spool::create_in(&spool_dir)?,
    };
    // A signal must not leave the spool behind. After success the plan names
    // it and the copier removes it; the registration only lasts this run.
    // The spool is ours, and useless without the end record.
    let remove = |path: &Path| {
        let _ = std::fs::remove_file(path);
    };
    let on_signal = pbf_output::cleanup::remove_on_signal(spool.path())
        .inspect_err(|_| remove(spool.path()))?;
    let started = Instant::now();
    let result = execute(m, name, reader, sources, &mut spool);
    drop(on_signal);
    let total = result.inspect_err(|_| remove(spool.path()))?;
    pbf_cli::report::counters(&total.counters);
    if verbose > 0 {
        pbf_cli::warn(NAME, summary(&total, &spool, started, verbose > 1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--spool PATH` must name a new file in a directory the run can write
/// (a usage error, exit 2, otherwise).
fn check_spool(spool: &Path) -> Result<()> {
    pbf_cli::paths::check_dir("--spool", pbf_cli::paths::dir_of(spool))?;
    if spool.symlink_metadata().is_ok() {
        return Err(pbf_cli::usage(format!(
            "{}: exists (--spool names a file to create)",
            spool.display()
        )));
    }
    Ok(())
}

/// Pass the plan record on at once (with the spool added to its sources),
/// then, once the ops start, merge and rewrite them.
fn execute<R: io::BufRead + Send + 'static>(
    m: &ArgMatches,
    name: &str,
    reader: PlanReader<R>,
    sources: SourceFiles,
    spool: &mut Spool,
) -> Result<Totals> {
    let (out, spool_id) = forward_plan_record(&reader, spool)?;
    let plan_sources = reader.header().sources.clone();
    let mut queue = OpQueue::start(reader, pbf_cli::input_name(name));
    let first = Some(queue.next()?);
    let progress = Progress::new(&plan_sources, pbf_cli::Bars::from_matches(m));
    let spill_dir = spool.path().parent().map(Path::to_path_buf);
    let opts = Options {
        progress: progress.engine(),
        memory: *m.get_one::<u64>("memory").context("--memory")?,
        compression: *m
            .get_one::<Compression>("compression")
            .context("--compression")?,
        keep: Keep::from_options(m.get_flag("dedupe"), m.get_flag("latest")),
        indexdata: m.get_flag("indexdata"),
        align: m.get_one::<u64>("align").copied().unwrap_or(0),
        spill_dir: spill_dir.unwrap_or_else(std::env::temp_dir),
        ..Options::default()
    };
    let jobs = pbf_cli::jobs(m.get_one::<usize>("jobs").copied());
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build()?;
    let merger = Merger::new(opts, sources, Arc::new(pool));
    // One op more than threads: an op's thread waits on its loads now and
    // then, and the oldest op's encodes may not fill the pool.
    let flight = Flight::new(Arc::new(merger), jobs + 1);
    let result = rewrite((first, spool_id), queue, out, flight, spool, &progress);
    progress.bar.finish_and_clear();
    result
}

/// `--align`: a power of two of at most 1 MiB.
fn parse_align(s: &str) -> std::result::Result<u64, String> {
    let n = pbf_cli::parse_size(s)?;
    if n.is_power_of_two() && n <= 1 << 20 {
        Ok(n)
    } else {
        Err(format!("{s} is not a power of two of at most 1M"))
    }
}

/// Totals over all merge ops: the report's counters, and what only the
/// `-vv` line prints.
#[derive(Default)]
struct Totals {
    counters: Counters,
    max_chains: u64,
    max_batches: u64,
    max_levels: u64,
    kept_runs: u64,
    kept_bytes: u64,
    streams: StreamTime,
    /// The merge's task graph: CPU time and critical path.
    span: Span,
}

impl Totals {
    /// Take in one merge op's stats; `read_bytes`: the bytes of its input
    /// frames, read and decoded.
    fn add(&mut self, s: &MergeStats, read_bytes: u64) {
        let c = &mut self.counters;
        c.merges += 1;
        c.blobs += s.inputs;
        c.read_bytes += read_bytes;
        c.elements_in += s.elements_in;
        c.elements_out += s.elements_out;
        c.duplicates += s.duplicates;
        c.frames += s.frames;
        c.spool_bytes += s.bytes;
        c.padding_bytes += s.padding;
        c.spilled_runs += s.spilled_runs;
        c.spilled_bytes += s.spilled_bytes;
        self.kept_runs += s.kept_runs;
        self.kept_bytes += s.kept_bytes;
        self.max_chains = self.max_chains.max(s.chains);
        self.max_batches = self.max_batches.max(s.batches);
        self.max_levels = self.max_levels.max(s.spill_levels);
    }
}

/// The counters of a run's report (`pbf_cli::report`), as its `-v` line.
#[derive(Default, serde::Serialize)]
struct Counters {
    /// Merge ops, their input blobs and the bytes of those blobs' frames.
    merges: u64,
    blobs: u64,
    read_bytes: u64,
    /// Objects decoded, objects written, repeats dropped (`--dedupe`).
    elements_in: u64,
    elements_out: u64,
    duplicates: u64,
    /// Frames written to the spool, their bytes, and alignment padding.
    frames: u64,
    spool_bytes: u64,
    padding_bytes: u64,
    /// Runs and bytes spilled to disk beyond `--memory`.
    spilled_runs: u64,
    spilled_bytes: u64,
}

/// The `-v` line: what was merged, and where it went; with `vv` (`-vv`),
/// the same counts with the merge's internals.
fn summary(t: &Totals, spool: &Spool, started: Instant, vv: bool) -> String {
    let secs = started.elapsed().as_secs_f64();
    let s = &t.counters;
    match (s.merges, vv) {
        (0, false) => return "no merge ops: the plan passed on as it is".into(),
        (0, true) => {
            let streams = t.streams;
            return format!("no merge ops: the plan passed on as it is in {secs:.3} s; {streams}");
        }
        _ => {}
    }
    let merged = format!(
        "{} of {}: {} objects in, {} out ({} dropped)",
        plural(s.merges, "merge"),
        plural(s.blobs, "blob"),
        s.elements_in,
        s.elements_out,
        s.duplicates,
    );
    let spool = spool.path().display();
    if !vv {
        return format!("{merged}, in {spool} ({secs:.3} s)");
    }
    format!(
        "{merged}; at most {}, {} of small \
         blobs sorted into {} in memory ({} bytes) and {} ({}, {} bytes spilled); {}, {} bytes \
         (and {} of alignment padding) in {spool} ({secs:.3} s); available parallelism {:.1} ({:.3} s of task CPU time over a \
         critical path of {:.3} s); {}",
        plural(t.max_chains, "chain"),
        plural(t.max_batches, "batch"),
        plural(t.kept_runs, "run"),
        t.kept_bytes,
        plural(t.max_levels, "spill level"),
        plural(s.spilled_runs, "run"),
        s.spilled_bytes,
        plural(s.frames, "frame"),
        s.spool_bytes,
        s.padding_bytes,
        t.span.parallelism(),
        t.span.work as f64 / 1e9,
        t.span.path as f64 / 1e9,
        t.streams
    )
}

/// The progress bar (see [`pbf_cli::progress`]): input bytes of the ops
/// done out of the sources' sizes. A copy op counts when it passes; a merge
/// op's input frames count half as the engine decodes them and half as it
/// merges their elements ([`pbf_merge_core::Progress`]), so the bar moves
/// through both phases of a long merge op. Its label names the oldest op in
/// flight, the one the output waits for (ops end in plan order, and an op
/// that spills runs alone, so its phases are that op's). It is drawn from
/// the first merge op on: passing copy ops on is not work to show (the
/// copier shows it), and a plan without merge ops draws nothing.
struct Progress {
    bar: pbf_cli::ProgressBar,
    bars: pbf_cli::Bars,
    drawn: std::sync::Once,
    /// The ops in flight, oldest first: (number from 1, input blobs).
    flying: Arc<Mutex<VecDeque<(u64, u64)>>>,
}

impl Progress {
    fn new(sources: &[SourceRef], bars: pbf_cli::Bars) -> Progress {
        let total = sources
            .iter()
            .filter(|s| !s.spool)
            .map(|s| s.file.size)
            .sum();
        let bar = pbf_cli::ProgressBar::hidden();
        bar.set_length(total);
        Progress {
            bar,
            bars,
            drawn: std::sync::Once::new(),
            flying: Arc::default(),
        }
    }

    /// The engine's callbacks (on any thread): input bytes of work done,
    /// and the phase of an op that spills, in the oldest op's label.
    fn engine(&self) -> pbf_merge_core::Progress {
        let bar = self.bar.clone();
        let labelled = self.bar.clone();
        let flying = Arc::clone(&self.flying);
        pbf_merge_core::Progress::new(move |bytes| bar.inc(bytes)).with_phases(move |phase| {
            if let Some(&(n, blobs)) = lock(&flying).front() {
                let message = format!("merging {} ({phase}, op {n})", plural(blobs, "blob"));
                pbf_cli::set_message(&labelled, &message);
            }
        })
    }

    /// Merge op number `n` (from 1) is handed to the engine.
    fn merging(&self, op: &MergeOp, n: u64) {
        let mut flying = lock(&self.flying);
        flying.push_back((n, op.inputs.len() as u64));
        let message = oldest_label(&flying);
        drop(flying);
        if let Some(message) = message {
            self.drawn
                .call_once(|| pbf_cli::draw(&self.bar, &message, self.bars));
            pbf_cli::set_message(&self.bar, &message);
        }
    }

    /// The oldest merge op is done.
    fn merged(&self, totals: &Totals) {
        let mut flying = lock(&self.flying);
        flying.pop_front();
        let message = oldest_label(&flying).unwrap_or_else(|| {
            format!(
                "merged {} ({})",
                plural(totals.counters.merges, "op"),
                plural(totals.counters.blobs, "blob")
            )
        });
        drop(flying);
        pbf_cli::set_message(&self.bar, &message);
    }
}

/// "merging B blobs (op N)" of the oldest op in flight, if any: a narrow
/// bar drops the op's number first, and still says what is merged.
fn oldest_label(flying: &VecDeque<(u64, u64)>) -> Option<String> {
    let &(n, blobs) = flying.front()?;
    Some(format!("merging {} (op {n})", plural(blobs, "blob")))
}

/// The plan stream this stage writes.
type PlanOut = Writer<io::BufWriter<pbf_cli::Stdout>>;

/// Write the plan record with the spool added to its sources, and flush it:
/// a plan record written before its ops (pbf-overlap --sources) lets the
/// copier start copying ahead. Returns the writer and the spool's id.
fn forward_plan_record<R: io::BufRead>(
    reader: &PlanReader<R>,
    spool: &Spool,
) -> Result<(PlanOut, u32)> {
    let mut header: PlanHeader = reader.header().clone();
    let spool_id = header.sources.iter().map(|s| s.id + 1).max().unwrap_or(0);
    header.sources.push(SourceRef {
        id: spool_id,
        file: FileIdentity::unrecorded(spool.path()),
        spool: true,
    });
    let mut out = Writer::new(pbf_cli::stdout());
    out.write(&PlanRecord::Plan(header))?;
    out.flush()?;
    Ok((out, spool_id))
}

/// A record of the plan held back until the merge ops before it are in
/// the spool.
enum Waiting {
    Record(Box<PlanRecord>),
    /// A merge op in flight, and the bytes of its input frames.
    Merge(u64),
}

/// Copy the ops to `out`, executing merge ops on the way: several in flight
/// at once, and every record written in plan order, a merge op's copy ops
/// as its frames reach the spool. `first` is the plan's first op, already
/// read (`Some(None)` when the plan holds no op, only its end).
fn rewrite(
    (mut first, spool_id): (Option<Option<PlanRecord>>, u32),
    mut queue: OpQueue,
    mut out: PlanOut,
    mut flight: Flight,
    spool: &mut Spool,
    progress: &Progress,
) -> Result<Totals> {
    let mut end = PlanEnd::default();
    let mut totals = Totals::default();
    let mut waiting: VecDeque<Waiting> = VecDeque::new();
    let (mut ended, mut started) = (false, 0u64);
    loop {
        // Read while another op may start; wait for a record only when
        // nothing is in flight.
        let mut read_some = false;
        while !ended && flight.has_room() {
            let record = match first.take() {
                Some(record) => record,
                None if waiting.is_empty() => queue.next()?,
                None => match queue.try_next()? {
                    Some(record) => record,
                    None => break,
                },
            };
            read_some = true;
            match record {
                Some(PlanRecord::Merge(op)) => {
                    started += 1;
                    progress.merging(&op, started);
                    waiting.push_back(Waiting::Merge(op.inputs.iter().map(|i| i.length).sum()));
                    flight.start(op);
                }
                Some(PlanRecord::Plan(_) | PlanRecord::End(_)) | None => ended = true,
                Some(record) => waiting.push_back(Waiting::Record(Box::new(record))),
            }
        }
        while let Some(front) = waiting.pop_front() {
            let bytes = match front {
                // A new output header (after an early plan record) and word
                // of how far the input is in order are flushed at once, so
                // a copier can start over or copy ahead.
                Waiting::Record(record) => {
                    match *record {
                        PlanRecord::Copy(c) => {
                            end.add_copy(&c);
                            progress.bar.inc(c.length);
                            out.write(&PlanRecord::Copy(c))?;
                        }
                        record => {
                            out.write(&record)?;
                            out.flush()?;
                        }
                    }
                    continue;
                }
                Waiting::Merge(bytes) => bytes,
            };
            out.flush()?;
            // Block when nothing else can be done meanwhile.
            let wait = match (ended || !flight.has_room(), read_some) {
                (true, _) => None,
                (false, true) => Some(Duration::ZERO),
                (false, false) => Some(Duration::from_millis(5)),
            };
            let mut report = |frames: &[WrittenFrame]| {
                let copy = copy_op(spool_id, frames);
                end.add_copy(&copy);
                out.write(&PlanRecord::Copy(copy))
                    .and_then(|()| out.flush())
                    .map_err(io_error)
            };
            match flight.write_oldest(spool, &mut report, wait)? {
                Ready::Merging => {
                    waiting.push_front(Waiting::Merge(bytes));
                    break;
                }
                Ready::Done(stats) => {
                    totals.add(&stats, bytes);
                    progress.merged(&totals);
                }
            }
        }
        if ended && waiting.is_empty() {
            break;
        }
    }
    totals.span = flight.span();
    drop(flight);
    // Nothing merged: no op names the spool, so an empty file is not left
    // behind (the plan still lists it; consumers open a spool on first use).
    if spool.is_empty() {
        std::fs::remove_file(spool.path())
            .with_context(|| format!("{}: removing the unused spool", spool.path().display()))?;
    }
    out.write(&PlanRecord::End(end))?;
    totals.streams = StreamTime {
        parsing: queue.parse_time(),
        writing: out.serialise_time(),
    };
    out.finish()?;
    Ok(totals)
}

/// One copy op over consecutive spool frames.
fn copy_op(source: u32, frames: &[WrittenFrame]) -> CopyOp {
    CopyOp {
        source,
        offset: frames.first().map_or(0, |f| f.offset),
        length: frames.iter().map(|f| f.length).sum(),
        blobs: frames.len() as u64,
        first: key_bound(frames.iter().map(|f| f.summary.first).min()),
        last: key_bound(frames.iter().map(|f| f.summary.last).max()),
        elements: frames.iter().map(|f| f.summary.elements()).sum(),
        duplicate_ids: frames.iter().map(|f| f.summary.duplicate_ids).sum::<u64>()
            + frames
                .windows(2)
                .filter(|w| w[0].summary.last.same_object(&w[1].summary.first))
                .count() as u64,
        frames: frames
            .iter()
            .map(|f| FrameKeys {
                length: f.length,
                first: f.summary.first.into(),
                last: f.summary.last.into(),
                counts: Counts::from_array(f.summary.counts),
                duplicate_ids: f.summary.duplicate_ids,
                negative_ids: f.summary.negative_ids,
            })
            .collect(),
    }
}

/// A copy op's bound from its frames' keys. The engine reports at least one
/// frame; none would give the smallest key, and a copy op of length 0 that
/// every plan reader refuses.
fn key_bound(key: Option<Key>) -> KeyRecord {
    key.unwrap_or(Key::new(Kind::Node, 0, 0)).into()
}

/// A stream error as an I/O error for the engine's callback, keeping a
/// broken pipe recognisable.
fn io_error(e: pbf_stream::Error) -> io::Error {
    if e.is_broken_pipe() {
        io::Error::from(io::ErrorKind::BrokenPipe)
    } else {
        io::Error::other(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::{Key, Kind, scan::Summary};

    #[test]
    fn copy_ops_cover_the_frames() {
        let s = Summary {
            first: Key::new(Kind::Node, 1, 1),
            last: Key::new(Kind::Way, 2, 1),
            counts: [3, 1, 0, 0],
            sorted: true,
            repeats: false,
            versions_unsorted: false,
            duplicate_ids: 0,
            negative_ids: false,
        };
        let frames = [
            WrittenFrame {
                offset: 100,
                length: 10,
                summary: s,
            },
            WrittenFrame {
                offset: 110,
                length: 20,
                summary: s,
            },
        ];
        let c = copy_op(7, &frames);
        assert_eq!(
            (c.source, c.offset, c.length, c.blobs, c.elements),
            (7, 100, 30, 2, 8)
        );
        assert_eq!(c.frames[1].length, 20);
        assert_eq!(c.frames[0].counts[pbf_format::Kind::Node], 3);
    }
}
