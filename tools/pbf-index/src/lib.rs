//! `pbf-index`: the first stage. For each input file it writes a `source`
//! record with the decoded OSMHeader and keys sampled across the file (a
//! look ahead for the planner), one `blob` record per OSMData blob with
//! the smallest and largest sort keys, per-kind counts and the sorted flag, and
//! an `end` record. Blobs carrying trusted indexdata are described from their
//! BlobHeader alone; the others are read, decompressed and key-scanned in
//! parallel, and records still come out in file order.

use std::borrow::Cow;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};
use pbf_cli::args::{flag, option};
use pbf_format::compress::{blob_data, with_decoded};
use pbf_format::frame::{BlobType, FrameHeader, PbfFile};
use pbf_format::header::{read_file_header, read_header_frame};
use pbf_format::scan::{scan_block, scan_ties};
use pbf_format::walk::{Io, Walk};
use pbf_format::{indexdata, padding};
use pbf_stream::{
    BlobKeys, BlobRecord, Counts, FileIdentity, HeaderRecord, IndexEnd, IndexRecord, KeysFrom,
    Sample, SourceRecord, StreamTime, Writer,
};
use rayon::prelude::*;

/// Most frames handed to the worker pool at a time (only headers are held
/// until a worker reads its frames).
const BATCH: usize = 4096;
/// Most bytes of frames in one batch: a batch of large blobs is cut sooner,
/// so the bodies workers hold at once stay bounded.
const BATCH_BYTES: u64 = 16 << 20;
/// Contiguous frames to scan are read with one `pread` up to this many
/// bytes (a larger frame is read alone). A file of small blobs has millions
/// of frames of a few hundred bytes: one read each was half a million
/// system calls for 580,414 blobs.
const SPAN_BYTES: u64 = 64 << 10;

/// A file is sampled at this many evenly spaced offsets (the first, 0,
/// aside), and once more in its last [`SAMPLE_WINDOW`].
const SAMPLES: u64 = 32;
/// How far past a sampled offset the search for a frame goes.
const SAMPLE_WINDOW: u64 = 1 << 20;
/// Smaller files get no samples: their index is over in moments, and a
/// copy ahead of one costs next to nothing.
const MIN_SAMPLED: u64 = 1 << 20;

/// The help heading of the options only the pbf-sort driver runs.
const DRIVER_HEADING: &str = "Run by pbf-sort, not by hand";

/// How the header walk reads unless `--io` says otherwise: the faster on a
/// cold cache (see bench/io-walk.md).
const DEFAULT_IO: Io = Io::Uring;

/// The command-line interface.
pub fn command() -> Command {
    let help = pbf_cli::VerbosityHelp {
        verbose: "Print a summary per file on stderr (blobs from indexdata or decoded, objects, \
                  time); given twice (-vv), also the time spent serialising the index stream",
        quiet: "No progress bar and no warnings on stderr",
    };
    let cmd = Command::new("pbf-index")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Index the blobs of OpenStreetMap PBF files as JSON Lines")
        .long_about(
            "Index the blobs of OpenStreetMap PBF files as JSON Lines (the index stream of \
             pbf-stream(5)) on standard output: one section per FILE with a source record, one \
             blob record per OSMData blob (offset, length, smallest and largest sort key, counts, \
             sorted flag) and an end record.\n\n\
             Blobs whose BlobHeader carries pbf-sort indexdata that checks (its checksum covers \
             the summary, the Blob's length and first bytes, so indexdata damaged, moved or kept \
             by a tool that rewrote the blob does not) are indexed from the header alone; the \
             others are decompressed and key-scanned in parallel. Indexdata of other writers is \
             not trusted unless --trust-indexdata says so.\n\n\
             A blob whose keys repeat (never decreasing) is always read, and the timestamps of \
             its objects with their keys: where equal keys are in the order pbf-merge gives \
             them (timestamp, then input order), its record's ties carry the timestamps of its \
             first and last object, and pbf-overlap copies it. No other blob's timestamps are \
             read.\n\n\
             Before the blobs, each file of 1 MiB or more is sampled: the first data frame found \
             within 1 MiB after each of 31 evenly spaced offsets and one in the last MiB gives \
             its smallest key to the source record's samples, a look ahead that lets \
             pbf-overlap --sources tell early that a file is not in order. A sample is only a \
             hint: a frame found that does not check gives none, and nothing but that early \
             word depends on them.",
        )
        .arg(
            Arg::new("files")
                .value_name("FILE")
                .help(
                    "PBF files to index (regular files: offsets must be re-readable); - is \
                     standard input when it is a regular file (pbf-index - < FILE)",
                )
                .num_args(1..)
                // The driver options go alone (exclusive), without FILE.
                .required(true)
                .value_parser(value_parser!(PathBuf)),
        )
        .arg(pbf_cli::jobs_arg(
            "Worker threads for decompression and scanning [default: all cores]",
        ))
        .arg(flag(
            "decode",
            "Scan every blob, trusting no indexdata (to verify a file: pbf-index --decode F | \
             pbf-overlap --check)",
        ))
        .arg(
            option(
                "trust-indexdata",
                "WRITER",
                "Also index from pbfhogg's indexdata, without reading the blobs",
            )
            .conflicts_with("decode")
            .long_help(
                "Also index from another writer's indexdata, without reading the blobs. The \
                 one writer known is `pbfhogg` (its v2 indexdata, used only in files whose \
                 header claims Sort.Type_then_ID). It carries no versions and no sorted \
                 flag: every such blob is taken to be sorted inside, and a real pbfhogg \
                 0.5.0 output declares the order with a blob whose nodes are 1, 3, 2. By \
                 default such blobs are scanned; use this only for files you vouch for.",
            )
            .value_parser(["pbfhogg"]),
        )
        .arg(flag(
            "validate",
            "Check that every FILE is a PBF file at all, and exit: 0 when each starts like one \
             (its first frame is an OSMHeader or OSMData frame, or is cut short), 2 with one \
             line naming the first that does not and what it is (OSM XML, OPL, o5m, \
             compressed, empty, or bytes that cannot start a PBF frame: a BlobHeader length \
             over 64 KiB, a BlobHeader that does not parse or of another type) or why it \
             cannot be read; no index is written. Damage after the first frame is found by \
             indexing it (pbf-sort checks its inputs this way before it starts a stage)",
        ))
        .arg(
            option(
                "given",
                "FILE",
                "Name FILE as NAME in messages and in the index stream",
            )
            .value_names(["FILE", "NAME"])
            .num_args(2)
            .action(ArgAction::Append)
            .value_parser(value_parser!(PathBuf))
            .long_help(
                "Name FILE as NAME in messages and in the index stream's `given`, which the \
                     later stages name it by: for a FILE that a caller saved from what the user \
                     named NAME (pbf-sort saves a pipe or FIFO so). Without it a FILE is named \
                     as it is given here",
            ),
        )
        // The pbf-sort driver's plumbing (pbf_cli::driver), run only by the
        // driver: listed apart under a heading of their own.
        .arg(
            flag(
                "driver-help",
                "Print the help of the pbf-sort driver, and exit (pbf-sort --help)",
            )
            .help_heading(DRIVER_HEADING)
            .exclusive(true),
        )
        .arg(
            Arg::new("driver-summary")
                .long("driver-summary")
                .help_heading(DRIVER_HEADING)
                .value_names(["DIR", "FILE"])
                .num_args(2)
                .exclusive(true)
                .value_parser(value_parser!(PathBuf))
                .help("Write the summary of a pbf-sort run described in DIR to FILE, and exit")
                .long_help(
                    "Write the summary of a pbf-sort run to FILE as one JSON object, and exit \
                     (pbf-sort --summary-json FILE): the driver's description of the run (the \
                     file DIR/run) joined with the reports the run's programs wrote into DIR, \
                     its PBF_SORT_SUMMARY_DIR (see pbf-sort(1), The summary of a run). FILE \
                     is written under a temporary name beside it and renamed: it holds a \
                     whole object or is left as it was",
                ),
        )
        .arg(
            option(
                "driver-args",
                "ARG",
                "Parse a pbf-sort command line (every ARG after this option) and judge the \
                 files it names, and exit: 0 with its options as bash assignments, 2 with \
                 one line naming what cannot work (pbf-sort asks before a stage starts)",
            )
            .help_heading(DRIVER_HEADING)
            .num_args(0..)
            .allow_hyphen_values(true)
            .exclusive(true)
            .value_parser(value_parser!(std::ffi::OsString)),
        )
        .arg(
            option(
                "io",
                "METHOD",
                "How the header walk reads the file: pread or uring",
            )
            .long_help(
                "How the header walk reads the file: `pread` reads one header at a time \
                     (queue depth 1); `uring` cuts the file into regions and keeps one header \
                     read per region in flight through io_uring (falling back to pread, with a \
                     warning, where io_uring is unavailable). Both give the same records. \
                     Measured on a 1 GB file indexed from headers alone, cold cache: pread \
                     1.1-1.9 s, uring 0.4-0.9 s; warm cache: both about 0.1 s (bench/io-walk.md).",
            )
            .value_parser(["pread", "uring"])
            .default_value(DEFAULT_IO.name()),
        );
    pbf_cli::progress_args(pbf_cli::verbosity_args(cmd, help))
}

/// Options of one run.
#[derive(Clone, Copy, Debug)]
struct Options {
    decode: bool,
    /// `--trust-indexdata pbfhogg`, in a file whose header claims its
    /// order (the only files whose pbfhogg indexdata is read).
    trust_pbfhogg: bool,
    quiet: bool,
    verbose: u8,
    bars: pbf_cli::Bars,
    io: Io,
}

/// Run with parsed arguments.
pub fn run(m: &ArgMatches) -> Result<ExitCode> {
    let io = m
        .get_one::<String>("io")
        .map_or(Ok(DEFAULT_IO), |s| s.parse())?;
    let opts = Options {
        decode: m.get_flag("decode"),
        trust_pbfhogg: m.get_one::<String>("trust-indexdata").is_some(),
        quiet: m.get_flag("quiet"),
        verbose: pbf_cli::verbosity(m),
        bars: pbf_cli::Bars::from_matches(m),
        io,
    };
    if let Some(done) = for_the_driver(m)? {
        return Ok(done);
    }
    let files: Vec<&PathBuf> = m.get_many("files").unwrap_or_default().collect();
    let given: Vec<&PathBuf> = m.get_many("given").unwrap_or_default().collect();
    let name = |path| given_name(&given, path);
    // Found before any work: a usage error (exit 2).
    files
        .iter()
        .try_for_each(|p| usable(p, name(p)))
        .map_err(|e| pbf_cli::usage(pbf_cli::one_line(&e)))?;
    if m.get_flag("validate") {
        return validate(files.iter().map(|p| (p.as_path(), name(p))));
    }
    let jobs = pbf_cli::jobs(m.get_one::<usize>("jobs").copied());
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs).build()?;
    // Serialising is timed for -v only: a clock read per record adds up.
    let mut out = Writer::new(pbf_cli::stdout()).timed(opts.verbose > 1);
    let mut counters = Counters::default();
    for path in files {
        let file = (path.as_path(), name(path));
        counters.add(&pool.install(|| index_file(file, opts, &mut out))?);
    }
    out.finish()?;
    pbf_cli::report::counters(&counters);
    Ok(ExitCode::SUCCESS)
}

/// The `--driver-*` options: what the pbf-sort driver asks of Rust
/// (`pbf_cli::driver`); none given, `None`.
fn for_the_driver(m: &ArgMatches) -> Result<Option<ExitCode>> {
    use pbf_cli::driver;
    let printed = if m.get_flag("driver-help") {
        driver::help().into_bytes()
    } else if let Some(words) = m.get_many::<std::ffi::OsString>("driver-args") {
        // Inputs that are files must be PBF, judged as --validate judges them.
        let is_pbf = |f: &Path| validate(std::iter::once((f, f))).map(drop);
        match driver::args::parse(words.cloned(), is_pbf) {
            Ok(assignments) => assignments,
            Err(e) => {
                // The driver's command line: the line is the driver's.
                pbf_cli::warn("pbf-sort", format!("error: {}", pbf_cli::one_line(&e)));
                return Ok(Some(ExitCode::from(2)));
            }
        }
    } else if let Some(paths) = m.get_many::<PathBuf>("driver-summary") {
        let paths: Vec<&PathBuf> = paths.collect();
        driver::summary::write(paths[0], paths[1])?;
        return Ok(Some(ExitCode::SUCCESS));
    } else {
        return Ok(None);
    };
    let mut out = pbf_cli::stdout();
    match out.write_all(&printed).and_then(|()| out.flush()) {
        // A reader that stopped early (a broken pipe) got what it wanted.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            // Printed for the driver, which the user ran: the line is its.
            pbf_cli::warn("pbf-sort", format!("error: {e}"));
            Ok(Some(ExitCode::FAILURE))
        }
        _ => Ok(Some(ExitCode::SUCCESS)),
    }
}

/// The counters of a run's report (`pbf_cli::report`): the counts of the
/// `-v` lines, summed over the files.
#[derive(Default, serde::Serialize)]
struct Counters {
    files: u64,
    blobs: u64,
    /// Blobs whose keys came from trusted indexdata.
    from_indexdata: u64,
    /// Blobs decompressed and key-scanned.
    decoded: u64,
    /// Objects per kind, as the `end` records' `counts`.
    objects: Counts,
}

impl Counters {
    fn add(&mut self, file: &Tally) {
        self.files += 1;
        self.blobs += file.end.blobs;
        self.from_indexdata += file.from_indexdata;
        self.decoded += file.end.blobs - file.from_indexdata;
        self.objects.add(file.end.counts);
    }
}

/// `--validate`: each file must open, and must not be of a kind that is
/// not PBF (exit 2 through `pbf_cli::main`); a PBF file damaged inside is
/// left to the index run, which names the blob.
fn validate<'a>(files: impl Iterator<Item = (&'a Path, &'a Path)>) -> Result<ExitCode> {
    for (path, given) in files {
        let file = PbfFile::open(open_path(path)).map_err(|e| pbf_cli::usage(e.to_string()))?;
        let file = file.named(open_path(given));
        if let Err(e) = read_file_header(&file, &mut file.headers()) {
            if matches!(e.kind(), pbf_format::ErrorKind::NotPbf(_)) {
                return Err(e.into());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The name of FILE `path`: the NAME of the last `--given FILE NAME` pair
/// (`given`, flattened) for it, else the path itself.
fn given_name<'a>(given: &[&'a PathBuf], path: &'a PathBuf) -> &'a Path {
    let named = given.chunks(2).rev().find(|pair| pair[0] == path);
    named.map_or(path, |pair| pair[1])
}

/// Counters of one file, for the `end` record.
#[derive(Default)]
struct Tally {
    end: IndexEnd,
    data_seq: u64,
    from_indexdata: u64,
}

/// What to do instead of indexing a stream: the plan names the file by path
/// and offset, so the later stages must be able to read it again.
const SAVE_FIRST: &str = "save it to a regular file first (pbf-sort - does that for you)";

/// `-`: standard input, indexed when it is a regular file (`pbf-index - <
/// file`), opened through this name; messages call it standard input, as
/// every stage does, and the index stream records the file's own path for
/// the later stages.
const STDIN: &str = "/dev/stdin";

/// The path to open for an argument (`-` is [`STDIN`]).
fn open_path(path: &Path) -> &Path {
    if path == Path::new("-") {
        Path::new(STDIN)
    } else {
        path
    }
}

/// How messages name an argument: as given, `-` in words.
fn shown(given: &Path) -> &Path {
    if given == Path::new("-") {
        Path::new(pbf_cli::input_name("-"))
    } else {
        given
    }
}

/// A file that can be indexed: it exists and is a regular file (checked
/// before any work, so a wrong argument is a usage error); named `given`.
fn usable(path: &Path, given: &Path) -> Result<()> {
    if path == Path::new("-") && !std::fs::metadata(STDIN).is_ok_and(|m| m.is_file()) {
        bail!(
            "-: standard input is not a regular file, and a stream cannot be indexed: later \
             stages re-read the file by offset; {SAVE_FIRST}"
        );
    }
    let (path, shown) = (open_path(path), shown(given).display());
    // Before canonicalize: /dev/stdin on a pipe resolves to "pipe:[N]", which
    // does not exist, and a FIFO would block the open.
    let in_words = |e: std::io::Error| anyhow::anyhow!(pbf_cli::paths::io_line(&shown, &e));
    let meta = std::fs::metadata(path).map_err(in_words)?;
    if meta.is_dir() {
        bail!("{shown}: is a directory");
    }
    if !meta.is_file() {
        bail!(
            "{shown}: not a regular file (a pipe or device): later stages re-read the file by \
             offset; {SAVE_FIRST}"
        );
    }
    // A regular file: opening it cannot block. One that cannot be read is
    // refused here, as the driver refuses it.
    std::fs::File::open(path).map_err(in_words)?;
    Ok(())
}

/// Index the file `path`, named `given`.
fn index_file<W: Write + Send>(
    (path, given): (&Path, &Path),
    opts: Options,
    out: &mut Writer<W>,
) -> Result<Tally> {
    let started = std::time::Instant::now();
    let serialised = out.serialise_time();
    // Messages name the file as given; the stream records its absolute
    // path, for the later stages to open.
    let (path, shown) = (open_path(path), shown(given));
    let abs = std::fs::canonicalize(path).with_context(|| format!("{}", shown.display()))?;
    let file = PbfFile::open(path)?.named(shown);
    let mut walk = Walk::new(&file, opts.io);
    if let Some(e) = walk.fallback().filter(|_| !opts.quiet) {
        let msg = format!(
            "{}: io_uring unavailable ({e}), reading with pread",
            file.path().display()
        );
        pbf_cli::warn("pbf-index", msg);
    }
    let (header_frame, header) = read_file_header(&file, &mut walk)?;
    let opts = Options {
        trust_pbfhogg: opts.trust_pbfhogg && header.claims_sorted(),
        ..opts
    };
    let samples = samples(&file, header_frame.end(), opts);
    let sampled = samples.len();
    out.write(&IndexRecord::Source(SourceRecord {
        schema: pbf_stream::INDEX_SCHEMA.into(),
        version: pbf_stream::SCHEMA_VERSION,
        file: FileIdentity {
            path: abs,
            size: file.size(),
            mtime: file.mtime().0,
            mtime_nsec: file.mtime().1,
            ctime: Some(file.ctime().0),
            ctime_nsec: Some(file.ctime().1),
            given: Some(given.to_path_buf()),
        },
        header,
        samples,
    }))?;
    // The file name only, elided in its middle where the line is narrow
    // (pbf_cli::fit).
    let name = shown
        .file_name()
        .unwrap_or(shown.as_os_str())
        .to_string_lossy();
    let message = format!("indexing {name}");
    let bar = pbf_cli::progress(file.size(), &message, opts.bars);
    let mut tally = Tally::default();
    let mut batches = Batches {
        file: &file,
        opts,
        batch: Vec::with_capacity(BATCH),
        bytes: 0,
        described: None,
    };
    index_frames(walk, &mut batches, &mut tally, out, &bar)?;
    bar.finish_and_clear();
    let end = &tally.end;
    // Say that empty or other-typed blobs were skipped, when any were.
    if !opts.quiet && (end.empty_blobs > 0 || end.skipped_blobs > 0) {
        pbf_cli::warn(
            "pbf-index",
            format!(
                "{}: {} and {} of other types skipped (counted in the end record)",
                shown.display(),
                pbf_cli::plural(end.empty_blobs, "empty OSMData blob"),
                pbf_cli::plural(end.skipped_blobs, "blob")
            ),
        );
    }
    out.write(&IndexRecord::End(end.clone()))?;
    // -v: one line of what the file held and where its keys came from.
    if opts.verbose > 0 {
        let streams = (opts.verbose > 1).then(|| StreamTime {
            parsing: Duration::ZERO,
            writing: out.serialise_time() - serialised,
        });
        let streams = streams.map(|s| format!("; {s}")).unwrap_or_default();
        pbf_cli::warn(
            "pbf-index",
            format!(
                "{}: {} ({} from indexdata, {} decoded), {}, {}, {:.3} s{streams}",
                shown.display(),
                pbf_cli::plural(end.blobs, "blob"),
                tally.from_indexdata,
                end.blobs - tally.from_indexdata,
                pbf_cli::plural(end.counts.total(), "object"),
                pbf_cli::plural(sampled as u64, "sample"),
                started.elapsed().as_secs_f64()
            ),
        );
    }
    Ok(tally)
}

/// Describe and write the record of every frame `walk` finds (the
/// records of header frames in their place), walking ahead on a thread of
/// its own.
fn index_frames<W: Write + Send>(
    walk: Walk<'_>,
    batches: &mut Batches<'_>,
    tally: &mut Tally,
    out: &mut Writer<W>,
    bar: &pbf_cli::ProgressBar,
) -> Result<()> {
    std::thread::scope(|s| {
        for fh in walk_ahead(s, walk).iter().flatten() {
            let fh = fh?;
            if fh.blob_type == BlobType::OsmHeader {
                batches.write_remaining(tally, out)?;
                // A joined file's parts each end their batch here: the bar
                // moves part by part, though no batch ever fills.
                bar.set_position(fh.offset);
                let header = read_header_frame(batches.file, &fh)?;
                out.write(&IndexRecord::Header(HeaderRecord {
                    offset: fh.offset,
                    header,
                }))?;
                continue;
            }
            if fh.blob_type != BlobType::OsmData {
                tally.end.skipped_blobs += 1;
                continue;
            }
            let done = fh.end();
            if batches.push(fh) {
                batches.describe_batch_write_previous(tally, out)?;
                bar.set_position(done);
            }
        }
        batches.write_remaining(tally, out)
    })
}

/// Frame headers handed from the walking thread at a time.
const WALKED: usize = 1024;

/// Walk the file's frame headers on a thread of `scope`, a few thousand
/// ahead, so the walk (a fifth of the work on a file of small blobs) runs
/// while the batch before is described and written. The thread stops after
/// an error, or when the receiver is dropped.
fn walk_ahead<'s, 'f: 's>(
    scope: &'s std::thread::Scope<'s, '_>,
    mut walk: Walk<'f>,
) -> std::sync::mpsc::Receiver<Vec<pbf_format::Result<FrameHeader>>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(4);
    // Full batches, then the rest (empty when the walk ends on a batch).
    scope.spawn(move || {
        loop {
            let mut walked = Vec::with_capacity(WALKED);
            walked.extend(walk.by_ref().take(WALKED));
            let rest = walked.len() < WALKED;
            if tx.send(walked).is_err() || rest {
                return;
            }
        }
    });
    rx
}

/// The samples of a file whose data frames start at `data_start`: at each
/// sampled offset, the first OSMData frame that seems to start within
/// [`SAMPLE_WINDOW`] after it (`PbfFile::search_frames`), described as its
/// blob record would be (trusted indexdata, else the Blob decompressed and
/// key-scanned), on the pool. Offsets whose candidate does not describe
/// (bytes inside a blob that look like a frame, an empty blob) give none;
/// two offsets that find the same frame give one sample.
fn samples(file: &PbfFile, data_start: u64, opts: Options) -> Vec<Sample> {
    let size = file.size();
    if size < MIN_SAMPLED {
        return Vec::new();
    }
    let mut offsets: Vec<u64> = (1..SAMPLES).map(|i| size / SAMPLES * i).collect();
    offsets.push(size.saturating_sub(SAMPLE_WINDOW));
    let mut samples: Vec<Sample> = offsets
        .par_iter()
        .filter_map(|&at| {
            let mut found = file.search_frames(at.max(data_start), SAMPLE_WINDOW);
            let fh = found.find(|fh| fh.blob_type == BlobType::OsmData)?;
            let body = || file.read_body(&fh).map(Cow::Owned);
            match describe(file, &fh, opts, body) {
                Ok(Described::Keys(keys)) => Some(Sample {
                    offset: fh.offset,
                    first: keys.summary.first.into(),
                }),
                _ => None,
            }
        })
        .collect();
    samples.sort_by_key(|s| s.offset);
    samples.dedup_by_key(|s| s.offset);
    samples
}

/// The frames of a file in batches: each batch is described on the pool
/// while the records of the batch before it are written.
struct Batches<'a> {
    file: &'a PbfFile,
    opts: Options,
    /// Frames not handed out yet, and their bytes.
    batch: Vec<FrameHeader>,
    bytes: u64,
    /// The batch handed out last, described, not written yet.
    described: Option<(Vec<FrameHeader>, Vec<pbf_format::Result<Described>>)>,
}

impl Batches<'_> {
    /// Add a frame; true when the batch is full.
    fn push(&mut self, fh: FrameHeader) -> bool {
        self.bytes += fh.frame_len();
        self.batch.push(fh);
        self.batch.len() >= BATCH || self.bytes >= BATCH_BYTES
    }

    /// Describe the frames added since the last call (on the pool) while
    /// writing the records of the batch described before.
    fn describe_batch_write_previous<W: Write + Send>(
        &mut self,
        tally: &mut Tally,
        out: &mut Writer<W>,
    ) -> Result<()> {
        let frames = std::mem::take(&mut self.batch);
        self.bytes = 0;
        let before = self.described.take();
        let (file, opts) = (self.file, self.opts);
        let (described, written) = rayon::join(
            || describe_all(file, &frames, opts),
            || write_described(before, tally, out),
        );
        written?;
        if !frames.is_empty() {
            self.described = Some((frames, described));
        }
        Ok(())
    }

    /// Describe the frames added so far and write the records of every
    /// frame added: the batch before, then this one.
    fn write_remaining<W: Write + Send>(
        &mut self,
        tally: &mut Tally,
        out: &mut Writer<W>,
    ) -> Result<()> {
        self.describe_batch_write_previous(tally, out)?;
        self.describe_batch_write_previous(tally, out)
    }
}

/// Describe frames in parallel, in spans of contiguous frames read at once.
fn describe_all(
    file: &PbfFile,
    frames: &[FrameHeader],
    opts: Options,
) -> Vec<pbf_format::Result<Described>> {
    let spans = spans(frames, |fh| from_indexdata(fh, opts).is_none());
    // One span a job: a worker that runs out steals the next span, where
    // rayon's own split left spans of a batch's end queued behind a busy one.
    let described: Vec<Vec<_>> = spans
        .par_iter()
        .with_max_len(1)
        .map(|span| describe_span(file, &frames[span.clone()], opts))
        .collect();
    described.into_iter().flatten().collect()
}

/// Cut frames into spans: runs of contiguous frames that must be read
/// (`read`), together at most [`SPAN_BYTES`] long, and single frames.
fn spans(frames: &[FrameHeader], read: impl Fn(&FrameHeader) -> bool) -> Vec<Range<usize>> {
    let mut spans: Vec<Range<usize>> = Vec::new();
    for (i, fh) in frames.iter().enumerate() {
        let joins = match spans.last() {
            Some(last) if i > 0 && read(fh) && read(&frames[i - 1]) => {
                let start = &frames[last.start];
                frames[i - 1].end() == fh.offset && fh.end() - start.offset <= SPAN_BYTES
            }
            _ => false,
        };
        match spans.last_mut() {
            Some(last) if joins => last.end = i + 1,
            _ => spans.push(i..i + 1),
        }
    }
    spans
}

/// Describe contiguous frames, reading them with one `pread` when they are
/// to be scanned (each frame alone when that read fails, so an error names
/// its frame as before).
fn describe_span(
    file: &PbfFile,
    frames: &[FrameHeader],
    opts: Options,
) -> Vec<pbf_format::Result<Described>> {
    let (Some(first), Some(last)) = (frames.first(), frames.last()) else {
        return Vec::new();
    };
    let len = (last.end() - first.offset) as usize;
    let together = (frames.len() > 1)
        .then(|| file.read_exact_at(first.offset, len, "Blob").ok())
        .flatten();
    let body = |fh: &FrameHeader| -> pbf_format::Result<Cow<'_, [u8]>> {
        match &together {
            Some(bytes) => {
                let at = (fh.body_offset() - first.offset) as usize;
                Ok(Cow::Borrowed(&bytes[at..at + fh.datasize as usize]))
            }
            None => file.read_body(fh).map(Cow::Owned),
        }
    };
    frames
        .iter()
        .map(|fh| describe(file, fh, opts, || body(fh)))
        .collect()
}

/// Describe a frame: from its trusted indexdata, else from its Blob, read
/// by `body`, decompressed and scanned.
fn describe<'a>(
    file: &PbfFile,
    fh: &FrameHeader,
    opts: Options,
    body: impl FnOnce() -> pbf_format::Result<Cow<'a, [u8]>>,
) -> pbf_format::Result<Described> {
    match from_indexdata(fh, opts) {
        Some(d) => Ok(d),
        None => body().and_then(|b| scan(file, fh, &b)),
    }
}

/// Write the records of a described batch in file order.
fn write_described<W: Write>(
    described: Option<(Vec<FrameHeader>, Vec<pbf_format::Result<Described>>)>,
    tally: &mut Tally,
    out: &mut Writer<W>,
) -> Result<()> {
    let Some((frames, described)) = described else {
        return Ok(());
    };
    for (fh, d) in frames.iter().zip(described) {
        let seq = tally.data_seq;
        tally.data_seq += 1;
        let keys = match d? {
            Described::Keys(keys) => keys,
            Described::Empty => {
                tally.end.empty_blobs += 1;
                continue;
            }
            Described::Padding => {
                tally.end.padding_blobs += 1;
                continue;
            }
        };
        let record = BlobRecord::new(seq, fh.offset, fh.frame_len(), &keys);
        tally.end.blobs += 1;
        tally.from_indexdata += u64::from(keys.from == KeysFrom::Indexdata);
        tally.end.counts.add(record.counts);
        tally.end.negative_id_blobs += u64::from(record.negative_ids);
        out.write_blob(&record)?;
    }
    Ok(())
}

/// What one OSMData frame holds.
enum Described {
    /// Objects: their keys, where the keys came from, compression, raw size.
    Keys(BlobKeys),
    /// No objects.
    Empty,
    /// No objects, and marked as alignment padding (pbf_format::padding):
    /// counted apart and not warned about.
    Padding,
}

/// The keys of a frame from its trusted indexdata, when it has some (and
/// `--decode` is not given).
fn from_indexdata(fh: &FrameHeader, opts: Options) -> Option<Described> {
    let ix = fh.indexdata.as_deref().filter(|_| !opts.decode)?;
    let ours = fh
        .blob_start
        .and_then(|start| indexdata::decode(ix, &start));
    let theirs = || opts.trust_pbfhogg.then(|| indexdata::decode_pbfhogg(ix));
    // Repeated keys are judged by timestamps, which indexdata lacks: such
    // a blob is read.
    let summary = ours.or_else(|| theirs().flatten()).filter(|s| !s.repeats)?;
    Some(Described::Keys(BlobKeys {
        summary,
        from: KeysFrom::Indexdata,
        compression: fh.compression,
        raw_size: fh.raw_size,
        ties: None,
    }))
}

/// The keys of a frame from its Blob `body`, decompressed and scanned.
fn scan(file: &PbfFile, fh: &FrameHeader, body: &[u8]) -> pbf_format::Result<Described> {
    let place = |e: pbf_format::Error| e.at(fh.offset).in_file(file.path());
    let data = blob_data(body).map_err(place)?;
    let (compression, raw_size) = (Some(data.compression), data.raw_size);
    let scanned = with_decoded(body, |raw| {
        Ok(match scan_block(raw)? {
            // The tie ends of a blob whose keys repeat (in order), when
            // its equal keys are in the merge's order; `None` for every
            // other blob, whose timestamps are not read. A block the tie
            // scan cannot read is judged out of order: the merge that then
            // reads it gives the error.
            Some(summary) => Described::Keys(BlobKeys {
                summary,
                from: KeysFrom::Decoded,
                compression,
                raw_size,
                ties: summary
                    .repeats
                    .then(|| scan_ties(raw).ok().flatten())
                    .flatten(),
            }),
            None if padding::is_padding_block(raw) => Described::Padding,
            None => Described::Empty,
        })
    });
    scanned.and_then(|described| described).map_err(place)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data frame at `offset` whose Blob is `datasize` bytes, behind a
    /// BlobHeader of 14.
    fn frame(offset: u64, datasize: u32) -> FrameHeader {
        FrameHeader {
            offset,
            header_len: 14,
            blob_type: BlobType::OsmData,
            indexdata: None,
            datasize,
            compression: None,
            raw_size: None,
            blob_start: None,
        }
    }

    /// Frames of `sizes` bytes one after the other from offset 100.
    fn contiguous(sizes: &[u32]) -> Vec<FrameHeader> {
        let mut at = 100;
        sizes
            .iter()
            .map(|&n| {
                let fh = frame(at, n - 18);
                at = fh.end();
                fh
            })
            .collect()
    }

    #[test]
    fn contiguous_frames_are_read_together_up_to_the_span_limit() {
        let small = contiguous(&[300; 10]);
        assert_eq!(spans(&small, |_| true), vec![Range { start: 0, end: 10 }]);
        let per_span = (SPAN_BYTES / 300) as usize;
        let many = contiguous(&vec![300; per_span + 5]);
        assert_eq!(
            spans(&many, |_| true),
            [0..per_span, per_span..per_span + 5]
        );
        let big = SPAN_BYTES as u32 + 1;
        let mixed = contiguous(&[300, big, 300, 300]);
        assert_eq!(spans(&mixed, |_| true), [0..1, 1..2, 2..4]);
    }

    #[test]
    fn gaps_and_frames_not_to_read_cut_spans() {
        let mut frames = contiguous(&[300; 6]);
        for fh in &mut frames[3..] {
            fh.offset += 1;
        }
        assert_eq!(spans(&frames, |_| true), [0..3, 3..6]);
        let frames = contiguous(&[300; 6]);
        let read = |fh: &FrameHeader| fh.offset != frames[2].offset;
        assert_eq!(spans(&frames, read), [0..2, 2..3, 3..6]);
        assert!(spans(&[], |_| true).is_empty());
    }
}
