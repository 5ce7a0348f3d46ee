//! `pbf-copy`: the last stage of the fast path. It reads a plan that holds
//! only copy ops, checks that every source is still the file that was
//! indexed, writes the plan's OSMHeader and then every range in order (no
//! decoding; past the page cache, or with `copy_file_range`), and renames the output into place only
//! after the plan's `end` record was read and validated. All of the file
//! safety (temporary file, fsync, rename, signals, `-o -`) lives in the
//! `pbf-output` crate, shared with `pbf-reflink`, and so do the options,
//! the plan loop, the check before the commit and the copy ahead of the
//! plan (`pbf_copier`, `pbf_copier::ahead`): this file holds what copying
//! adds, and `recompress.rs` the `--recompress` copy.

mod recompress;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{ArgMatches, Command};
use pbf_cli::args::flag;
use pbf_copier as copier;
use pbf_copier::ahead::{Ahead, Landed};
use pbf_copier::frames;
use pbf_copier::{Copied, CopySources, Job, Options, OutputHead, SpoolHoles, Step};
use pbf_format::compress::Compression;
use pbf_format::frame::BlobStart;
use pbf_format::indexdata;
use pbf_output::{CopyStats, OutputFile};
use pbf_stream::{CopyOp, StreamTime};

use recompress::recompress_range;

const NAME: &str = "pbf-copy";

/// The command-line interface.
pub fn command() -> Command {
    let cmd = Command::new(NAME)
        .version(env!("CARGO_PKG_VERSION"))
        .about("Write a sorted OpenStreetMap PBF file from a plan by copying byte ranges")
        .long_about(
            "Read a plan stream (pbf-stream(5)) that holds only copy ops, as written by \
             pbf-overlap for sorted input or by pbf-merge, and write the output: the plan's \
             OSMHeader, then every copied range in order. Where OUT's filesystem allows, ranges \
             are read into memory and written past the page cache (O_DIRECT) in 8 MiB stages; \
             otherwise, and with --kernel-copy, with copy_file_range(2), falling back to \
             read/write where the kernel refuses. Blob bodies are never decoded.\n\n\
             Before writing, every source is checked against the size, mtime and ctime recorded \
             in the plan, and once more after the plan's end record, before the output is put in \
             place: a source rewritten in place during the run (its ctime moves with every \
             write) fails the run with exit 1 and no output (with -o -, the stream ends with \
             bytes no PBF reader accepts once it reads the data (osmium fileinfo -e, osmium cat)). When the plan says how many bytes its copy ops copy \
             (copy_bytes), OUT's filesystem must have room for them and the header before a \
             byte is written (else exit 1, naming OUT's directory, the bytes needed and the \
             bytes free; --no-space-check skips this). The output is written to a temporary file in OUT's directory (unnamed where the \
             filesystem allows, so not even SIGKILL leaves it behind), fsynced and put in place \
             as OUT only after the plan's end record, and after --check-cmd passed on it when \
             given; on an error or SIGINT/SIGTERM/SIGHUP the temporary file is removed and an \
             existing OUT is left untouched. A plan that still \
             holds merge ops is refused: run pbf-merge first. So is a plan whose ops are not in \
             output order by the keys they carry, or that copies a byte twice: the output says \
             Sort.Type_then_ID and the bytes are never decoded, so the order the keys show is \
             all pbf-copy vouches for.\n\n\
             With --recompress every copied Blob is inflated and compressed again (in parallel; \
             the block inside is never decoded), for example to turn a zlib file into zstd or \
             raw; the copy then goes through memory instead of the kernel.\n\n\
             Copy ahead: when the plan record says it was written early (pbf-overlap --sources \
             writes it before it plans, once the first blobs are read in order) and the plan \
             has one input file (beside spools), its data frames are copied behind the header \
             on a second thread, on the guess that the input is sorted and the ops will \
             copy them whole and in order, so this copy runs while the input is still being \
             indexed: as far as the plan's sorted records say the input was read in order, \
             and no further once an unsorted record says it is not. Each step is handed to \
             the disk as it is copied. A plan record written after planning starts no copy: its ops follow at \
             once, or as pbf-merge finishes them, and a guess would only compete with the \
             merge. Each op that follows the guess is checked \
             against it; the first op that does not, or the end of the plan, stops the thread: \
             the output keeps only the copied prefix the ops asked for and is cut back to it, \
             so a wrong guess costs a wasted copy and never a wrong byte. Not with -o -, \
             --add-indexdata or --recompress, which do not write the input's bytes as they are.",
        )
        .arg(flag(
            "no-copy-ahead",
            "Wait for the ops instead of copying ahead on the guess that the plan's only input \
             is sorted (a wrong guess costs a wasted copy: on a slow disk with unsorted input, \
             this saves it)",
        ))
        .arg(flag(
            "kernel-copy",
            "Copy every range (the copy ahead's too) with copy_file_range(2): through OUT's page \
             cache, or on the server of a network filesystem that copies there. By default, \
             where OUT's filesystem allows, ranges are read into memory and written past the \
             page cache (O_DIRECT) in 8 MiB stages: half the CPU, and as fast once input and \
             output outgrow memory",
        ))
        .arg(pbf_cli::compression_arg(
            "recompress",
            "Re-compress every copied blob: zlib[:0-9], zstd[:1-22], lz4 or none (osmium 1.15 \
             cannot read zstd) [default: blobs keep their compression]",
        ))
        .arg(
            flag(
                "spools-compressed",
                "With --recompress, copy the frames of spool sources as they are: pbf-merge \
                 already wrote them in that compression (pbf-sort passes this when it gives \
                 both stages the same --compression)",
            )
            .requires("recompress"),
        )
        .arg(
            pbf_cli::jobs_arg("Threads for --recompress [default: all cores]").requires("recompress"),
        );
    let cmd = copier::output_args(cmd, OUTPUT_HELP);
    copier::write_args(cmd, ADD_INDEXDATA_HELP, VERBOSITY_HELP)
}

/// The help texts of the options shared with pbf-reflink: -o, --add-indexdata, -v and -q.
const OUTPUT_HELP: &str = "Output file; - writes to standard output (a pipe or file, not a terminal). A stream cannot be taken \
             back: on an error it ends with bytes no PBF reader accepts and the exit status is 1, \
             and stopped by a signal (Ctrl-C) it ends the same way (use set -o pipefail)";
const ADD_INDEXDATA_HELP: &str = "Give every data frame a new BlobHeader with pbf-sort indexdata (the body is \
                    still copied as it is), so the next pbf-index reads headers only. \
                    osmium, Osmosis and pyosmium read such files; osmconvert 0.9 (osmctools) \
                    does not (it reads only BlobHeaders of 11 to 17 bytes)";
const VERBOSITY_HELP: pbf_cli::VerbosityHelp = pbf_cli::VerbosityHelp {
    verbose: "Print the output, the bytes written, the ops and the time on stderr; given twice \
              (-vv), a summary instead: ops, bytes copied in the kernel, past the page cache \
              and by read/write (after how many refusals of the kernel's copy), bytes written \
              from memory (headers), \
              bytes copied ahead and kept or dropped, the time in all and the time spent copying \
              and committing (the MB/s are over that, not over waits for the plan), and the \
              time spent parsing the plan",
    quiet: "No progress bar and no warnings",
};

/// Run with parsed arguments. A reader of `-o -` that stops early ends the
/// run by SIGPIPE, once the run's files are cleaned up.
pub fn run(m: &ArgMatches) -> Result<ExitCode> {
    pbf_cli::sigpipe_if_cut(copy(m))
}

fn copy(m: &ArgMatches) -> Result<ExitCode> {
    let started = Instant::now();
    let opts = Options::from_matches(m);
    let recompress = m.get_one::<Compression>("recompress").map(|&c| Recompress {
        compression: c,
        threads: pbf_cli::jobs(m.get_one::<usize>("jobs").copied()),
        spools_as_they_are: m.get_flag("spools-compressed"),
    });
    let mut job = Job::open(m)?;
    if !m.get_flag("kernel-copy") {
        job.out.buffer_appends();
    }
    let mut head = OutputHead::new(&job.plan.header().header);
    // What the plan copies as it is goes into the output byte for byte;
    // --recompress and --add-indexdata rewrite it, to a size not known yet.
    let as_is = recompress.is_none() && !opts.add_indexdata;
    let as_it_is = |copy_bytes: Option<u64>| copy_bytes.filter(|_| as_is);
    head.check_room(&job.out, as_it_is(job.plan.header().copy_bytes), opts)?;
    // A guess whose copy cannot fit is not copied: right, the plan will not
    // fit either; wrong, it only filled the disk.
    let wanted = job.plan.header().early
        && !m.get_flag("no-copy-ahead")
        && as_is
        && !job.out.is_stream()
        && head
            .check_room(&job.out, Some(job.sources.known_bytes()), opts)
            .is_ok();
    let mut ahead = Ahead::start(wanted, &mut head, &job.sources, &mut job.out)?;
    let bar = (job.sources.known_bytes(), "copying", opts.bars);
    let (sources, out, plan_name) = (&mut job.sources, &mut job.out, &job.plan_name);
    // Time spent copying, for -v: not the waits for the plan's next record.
    let mut copying = Duration::ZERO;
    let copied = copier::for_each_copy(&mut job.plan, plan_name, bar, |step, line| {
        let step = ahead.follow((step, line), plan_name, &mut head, sources, out)?;
        match step {
            Some(Step::Header(h)) => head.check_room(out, as_it_is(h.copy_bytes), opts),
            Some(Step::Copy(op)) => {
                let started = Instant::now();
                let copied = copy_op(op, sources, out, opts, recompress);
                copying += started.elapsed();
                copied.with_context(|| format!("{plan_name}: line {line}"))
            }
            Some(Step::Sorted(_) | Step::Unsorted) | None => Ok(()),
        }
    })?;
    head.write(out)?;
    let landed = ahead.land(plan_name, sources, out)?;
    let parsing = job.plan.parse_time();
    let out_name = job.out.name().to_owned();
    let finished = copier::finish(NAME, job.out, &mut job.sources, job.check.as_deref())?;
    copied.warn_for_importers(NAME, &out_name, &head, opts.quiet);
    let ops = copied.ops;
    let (stats, written) = (finished.stats, finished.written);
    copying += landed.map_or(Duration::ZERO, |l| l.copying) + finished.committing;
    pbf_cli::report::counters(&Counters {
        copied,
        written_bytes: written,
        kernel_bytes: stats.kernel_bytes,
        direct_bytes: stats.direct_bytes,
        fallback_bytes: stats.fallback_bytes,
        fallbacks: stats.fallbacks,
        memory_bytes: stats.written_bytes,
        ahead_kept_bytes: landed.map(|l| l.kept),
        ahead_dropped_bytes: landed.map(|l| l.dropped),
    });
    if opts.verbose == 1 {
        let secs = started.elapsed().as_secs_f64();
        let ops = pbf_cli::plural(ops, "copy op");
        pbf_cli::warn(
            NAME,
            format!("{out_name}: {written} bytes written in {ops}, {secs:.3} s"),
        );
    } else if opts.verbose > 1 {
        let times = (started, copying, parsing);
        report(ops, written, stats, landed, &job.sources.holes, times);
    }
    Ok(ExitCode::SUCCESS)
}

/// `--recompress`: the compression, its threads, and whether spool frames
/// (`--spools-compressed`) are copied as they are.
#[derive(Clone, Copy)]
struct Recompress {
    compression: Compression,
    threads: usize,
    spools_as_they_are: bool,
}

/// Append one copy op: the whole range at once, frame by frame with new
/// BlobHeaders for `--add-indexdata`, or re-compressed for `--recompress`;
/// then free what it copied of a spool.
fn copy_op(
    op: &CopyOp,
    sources: &mut CopySources,
    out: &mut OutputFile,
    opts: Options,
    recompress: Option<Recompress>,
) -> Result<()> {
    let recompress = recompress.filter(|r| !(r.spools_as_they_are && sources.is_spool(op.source)));
    let (file, path) = sources.range(op.source, op.offset, op.length)?;
    if opts.add_indexdata && op.frames.is_empty() {
        return Err(copier::frames_missing(op, path));
    }
    if let Some(r) = recompress {
        // The i-th frame's keys give its new Blob indexdata (--add-indexdata).
        let indexdata = |i: usize, blob: &BlobStart| -> pbf_output::Result<Option<Vec<u8>>> {
            let keys = op.frames.get(i).filter(|_| opts.add_indexdata);
            keys.map(|k| Ok(indexdata::encode(&frames::frame_summary(k)?, blob)))
                .transpose()
        };
        let range = (op.offset, op.length);
        recompress_range(out, (file, path), range, r, &indexdata)?;
    } else if !opts.add_indexdata {
        out.copy_from(file, path, op.offset, op.length)?;
    } else {
        frames::reframe_op(op, (file, path), |frame| {
            out.write_all(&frame.prefix)?;
            out.copy_from(file, path, frame.body_offset, frame.body_len)
        })?;
    }
    sources.passed(op.source, op.offset, op.length)
}

/// The counters of a run's report (`pbf_cli::report`), as its `-v` line.
#[derive(serde::Serialize)]
struct Counters {
    #[serde(flatten)]
    copied: Copied,
    /// The bytes of the output.
    written_bytes: u64,
    /// Bytes copied in the kernel, read into memory and written past the
    /// page cache, by read/write (after how many refusals), and written from
    /// memory (headers, new BlobHeaders).
    kernel_bytes: u64,
    direct_bytes: u64,
    fallback_bytes: u64,
    fallbacks: u64,
    memory_bytes: u64,
    /// Of a copy ahead (absent without one): bytes kept and dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    ahead_kept_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ahead_dropped_bytes: Option<u64>,
}

/// The `-v` line. Its times: when the run started, the time spent copying
/// ops, copying ahead and committing the output (the rate is over this,
/// not over the waits for the plan), and the time spent parsing the plan.
fn report(
    ops: u64,
    written: u64,
    stats: CopyStats,
    landed: Option<&Landed>,
    holes: &SpoolHoles,
    (started, copying, parsing): (Instant, Duration, Duration),
) {
    let secs = started.elapsed().as_secs_f64();
    let copying = copying.as_secs_f64();
    let streams = StreamTime {
        parsing,
        ..StreamTime::default()
    };
    let ahead = landed.map_or(String::new(), |l| {
        let stop = l.stopped_by.as_ref();
        let stop = stop.map_or(String::new(), |e| format!(" (the copy stopped early: {e})"));
        let (kept, dropped) = (l.kept, l.dropped);
        format!("; copied ahead: {kept} bytes kept, {dropped} bytes dropped{stop}")
    });
    pbf_cli::warn(
        NAME,
        format!(
            "{}, {written} bytes written: {} copied in the kernel, {} past the page cache, {} \
             by read/write ({} fallbacks), {} from memory{ahead}; {}; {secs:.3} s, of which \
             {copying:.3} s copying and committing ({:.1} MB/s); {streams}",
            pbf_cli::plural(ops, "copy op"),
            stats.kernel_bytes,
            stats.direct_bytes,
            stats.fallback_bytes,
            stats.fallbacks,
            stats.written_bytes,
            holes.verbose_words(),
            written as f64 / copying.max(1e-9) / 1e6
        ),
    );
}
