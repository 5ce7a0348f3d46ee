//! `pbf-reflink`: `pbf-copy` for filesystems with shared extents (XFS with
//! `reflink=1`, btrfs). It executes the same copy-only plans with the same
//! guarantees (source checks, temporary file, fsync, rename after the plan's
//! `end`, `-O`, `-o -`, `--add-indexdata`, `--keep-spools`), but lays the
//! output out so each range's source offset and output offset are congruent
//! modulo the filesystem block size (padding frames that readers skip, see
//! `pbf_format::padding`) and clones the aligned middle of each range with
//! `FICLONERANGE`: a sorted file becomes a few ioctls and shares its blocks.
//!
//! Clone support is probed before the first byte is written. Where the
//! output cannot receive clones (another filesystem type, a pipe) it writes
//! exactly what `pbf-copy` writes, after a one-line notice; with
//! `--require-reflink` it exits 1 instead; `--probe` answers that question
//! alone, for a driver choosing its copier. The mechanics live in
//! `cloner.rs`, the options and plan loop it shares with `pbf-copy` in
//! `pbf_copier`.

mod cloner;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{ArgMatches, Command};
use pbf_cli::args::flag;
use pbf_copier as copier;
use pbf_copier::frames;
use pbf_copier::{Copied, CopySources, Job, OutputHead, SpoolHoles, Step};
use pbf_output::{CopyStats, OutputFile};
use pbf_stream::CopyOp;

use cloner::{Cloner, SourceRange};

const NAME: &str = "pbf-reflink";

/// The command-line interface.
pub fn command() -> Command {
    let cmd = Command::new(NAME)
        .version(env!("CARGO_PKG_VERSION"))
        .about("Write a sorted OpenStreetMap PBF file from a plan by cloning block-aligned ranges")
        .long_about(
            "Read a plan stream (pbf-stream(5)) that holds only copy ops, as pbf-copy does, and \
             write the same objects: the plan's OSMHeader, then every range in order. Each range \
             is placed at an output offset congruent to its source offset modulo the filesystem \
             block size, by writing a padding frame before it (an OSMData blob holding an empty \
             block, which readers skip), and its block-aligned middle is cloned with \
             FICLONERANGE (shared extents on XFS with reflink=1 or btrfs); the unaligned head and \
             tail are copied. A range is cloned only when its padding is at most 1/8 of the bytes \
             cloned, so padding stays below one block plus one padding frame per range.\n\n\
             Before writing, pbf-reflink checks every source like pbf-copy (and again before \
             the output is put in place) and probes whether \
             the output's filesystem can clone and every source is on it. If not, it prints a \
             one-line notice and writes exactly what pbf-copy writes (no padding); with \
             --require-reflink it exits 1 without writing anything; --probe asks only that. \
             Cloned ranges take no room; when it copies like pbf-copy, it checks first that \
             OUT's filesystem has room like pbf-copy (--no-space-check skips that). The \
             output is written to a temporary file in OUT's directory (unnamed where the \
             filesystem allows), fsynced and put in place as OUT only after the plan's end \
             record, and after --check-cmd passed on it when given; on an error or \
             SIGINT/SIGTERM/SIGHUP the temporary file is removed. A plan \
             whose ops are not in output order by the keys they carry, or that reads a byte \
             twice, is refused like pbf-copy refuses it.",
        );
    let cmd = copier::output_args(cmd, OUTPUT_HELP)
        .arg(flag(
            "require-reflink",
            "Exit 1 before writing anything when the output cannot receive clones or a source \
             is not on its filesystem, and fail if a spool cannot be cloned",
        ))
        .arg(flag(
            "probe",
            "Read no plan: print the block size clones are aligned to in OUT's directory (or \
             --tmpdir) and exit 0 when files there can receive clones, 1 when they cannot (the \
             reason on standard error unless -q). Only unnamed scratch files are written \
             (pbf-sort chooses its copier this way)",
        ));
    copier::write_args(cmd, ADD_INDEXDATA_HELP, VERBOSITY_HELP)
}

/// The help texts of the options shared with pbf-copy: -o, --add-indexdata, -v and -q.
const OUTPUT_HELP: &str = "Output file; - writes to standard output (a pipe or file, not a terminal), which cannot receive clones (copied like \
             pbf-copy; refused with --require-reflink)";
const ADD_INDEXDATA_HELP: &str = "Give every data frame a new BlobHeader with pbf-sort indexdata; each frame's \
                    Blob (not the frame) is then aligned and cloned on its own. osmium, Osmosis \
                    and pyosmium read such files; osmconvert 0.9 (osmctools) does not (it reads \
                    only BlobHeaders of 11 to 17 bytes)";
const VERBOSITY_HELP: pbf_cli::VerbosityHelp = pbf_cli::VerbosityHelp {
    verbose: "Print the output, the bytes written and cloned, the ops and the time on stderr; \
              given twice (-vv), a summary instead: bytes cloned, bytes copied, padding added, \
              time, and the time spent parsing the plan",
    quiet: "No progress bar, no notices and no warnings",
};

/// A range still to be written: consecutive ops of one source are joined so
/// their clone spans the op boundary.
#[derive(Clone, Copy, Debug)]
struct Pending {
    source: u32,
    offset: u64,
    length: u64,
    first_line: u64,
}

/// The counters of a run's report (`pbf_cli::report`), as its `-v` line.
#[derive(serde::Serialize)]
struct Counters {
    #[serde(flatten)]
    copied: Copied,
    /// The bytes of the output.
    written_bytes: u64,
    /// Bytes cloned, in how many clones; bytes copied (in the kernel and
    /// by read/write); padding frames and their bytes; bytes written from
    /// memory in all (headers, padding).
    cloned_bytes: u64,
    clones: u64,
    copied_bytes: u64,
    padding_bytes: u64,
    padding_frames: u64,
    memory_bytes: u64,
}

/// The output file, written through the cloner when it can clone.
struct CloningOutput {
    out: OutputFile,
    cloner: Option<Cloner>,
    /// `--require-reflink`.
    require: bool,
}

/// Run with parsed arguments. A reader of `-o -` that stops early ends the
/// run by SIGPIPE, once the run's files are cleaned up.
pub fn run(m: &ArgMatches) -> Result<ExitCode> {
    pbf_cli::sigpipe_if_cut(place(m))
}

fn place(m: &ArgMatches) -> Result<ExitCode> {
    let started = Instant::now();
    let opts = copier::Options::from_matches(m);
    let require = m.get_flag("require-reflink");
    if require && copier::output_path(m)? == Path::new("-") {
        bail!("-o -: standard output cannot receive clones (--require-reflink)");
    }
    if m.get_flag("probe") {
        return probe_only(m, opts.quiet);
    }
    let Job {
        mut plan,
        plan_name,
        mut sources,
        out,
        check,
    } = Job::open(m)?;
    let cloner = probe(&out, &sources, opts.quiet, require)?;
    // A clone shares the source's blocks and takes no room: only an output
    // copied like pbf-copy's needs room for what the plan copies.
    let copied = cloner.is_none() && !opts.add_indexdata;
    let as_it_is = |copy_bytes: Option<u64>| copy_bytes.filter(|_| copied);
    let mut w = CloningOutput {
        out,
        cloner,
        require,
    };
    // Written with the first op, after any plan `header` record: the
    // alignment of every range then counts from the header it keeps.
    let mut head = OutputHead::new(&plan.header().header);
    head.check_room(&w.out, as_it_is(plan.header().copy_bytes), opts)?;
    let bar = (sources.known_bytes(), "writing", opts.bars);
    let mut pending: Option<Pending> = None;
    let copied = copier::for_each_copy(&mut plan, &plan_name, bar, |step, line| {
        let op = match step {
            Step::Header(h) => {
                head.replace(&h.header, &mut w.out)?;
                return head.check_room(&w.out, as_it_is(h.copy_bytes), opts);
            }
            // pbf-reflink does not copy ahead.
            Step::Unsorted | Step::Sorted(_) => return Ok(()),
            Step::Copy(op) => op,
        };
        head.write(&mut w.out)?;
        if opts.add_indexdata {
            w.frames(op, &mut sources)
                .with_context(|| format!("{plan_name}: line {line}"))
        } else if let Some(p) = join(&mut pending, op, line) {
            w.range(p, &mut sources)
                .with_context(|| format!("{plan_name}: lines {}..{line}", p.first_line))
        } else {
            Ok(())
        }
    })?;
    head.write(&mut w.out)?;
    if let Some(p) = pending {
        w.range(p, &mut sources)
            .with_context(|| format!("{plan_name}: lines {}..", p.first_line))?;
    }
    let CloningOutput { out, cloner, .. } = w;
    let clone = cloner.as_ref().map(|c| c.stats).unwrap_or_default();
    let out_name = out.name().to_owned();
    let copier::Finished { stats, written, .. } =
        copier::finish(NAME, out, &mut sources, check.as_deref())?;
    copied.warn_for_importers(NAME, &out_name, &head, opts.quiet);
    let counters = Counters {
        copied,
        written_bytes: written,
        cloned_bytes: clone.cloned,
        clones: clone.clones,
        // Clones are counted by the output as kernel bytes: take them out.
        copied_bytes: stats.copied().saturating_sub(clone.cloned),
        padding_bytes: clone.padding,
        padding_frames: clone.padding_frames,
        memory_bytes: stats.written_bytes,
    };
    pbf_cli::report::counters(&counters);
    if opts.verbose == 1 {
        let secs = started.elapsed().as_secs_f64();
        pbf_cli::warn(
            NAME,
            format!(
                "{out_name}: {written} bytes written in {}, {} of them cloned, {secs:.3} s",
                pbf_cli::plural(counters.copied.ops, "copy op"),
                counters.cloned_bytes
            ),
        );
    } else if opts.verbose > 1 {
        let block = cloner.map(|c| c.block);
        report(
            &counters,
            stats,
            block,
            &sources.holes,
            (started, plan.parse_time()),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--probe`: can files in the output's directory receive clones?
fn probe_only(m: &ArgMatches, quiet: bool) -> Result<ExitCode> {
    let out = copier::output_path(m)?;
    let (dir, what) = match m.get_one::<std::path::PathBuf>("tmpdir") {
        Some(d) => (d.as_path(), "--tmpdir"),
        None if out == Path::new("-") => {
            notice(quiet, "standard output cannot receive clones".into());
            return Ok(ExitCode::from(pbf_cli::EXIT_NO));
        }
        None => (pbf_cli::paths::dir_of(out), "output"),
    };
    pbf_cli::paths::check_dir(what, dir)?;
    match cloner::probe_dir(dir)? {
        Ok(block) => {
            println!("{block}");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            notice(quiet, format!("{why}; {USE_INSTEAD}"));
            Ok(ExitCode::from(pbf_cli::EXIT_NO))
        }
    }
}

/// Probe clone support before anything is written; `None` means "copy like
/// pbf-copy" (after a notice unless `quiet`), and with `--require-reflink`
/// (`require`) an error.
fn probe(
    out: &OutputFile,
    sources: &CopySources,
    quiet: bool,
    require: bool,
) -> Result<Option<Cloner>> {
    let mut cloner = match Cloner::probe(out)? {
        Ok(c) => c,
        Err(why) => {
            if require {
                bail!("{}: {why}; {USE_INSTEAD} (--require-reflink)", out.name());
            }
            notice(quiet, format!("{why}: copying like pbf-copy"));
            return Ok(None);
        }
    };
    let mut refused = Vec::new();
    for (id, file, path) in sources.files() {
        if let Some(why) = cloner.probe_source(out, id, file)? {
            refused.push(format!("{}: {why}", path.display()));
        }
    }
    if refused.is_empty() {
        return Ok(Some(cloner));
    }
    if require {
        bail!(
            "{}; {USE_INSTEAD} (--require-reflink: every source must be on the output's \
             filesystem)",
            refused.join("; ")
        );
    }
    // No source can clone, and no spool might: nothing is cloned.
    let none = refused.len() == sources.files().count() && sources.spools().next().is_none();
    let how = match none {
        true => "copying like pbf-copy",
        false => "its ranges are copied",
    };
    notice(quiet, format!("{}: {how}", refused.join("; ")));
    Ok((!none).then_some(cloner))
}

/// What copies where clones cannot be made, said after the reason.
const USE_INSTEAD: &str = "use pbf-copy (in pbf-sort: --copier copy)";

fn notice(quiet: bool, msg: String) {
    if !quiet {
        pbf_cli::warn(NAME, format!("notice: {msg}"));
    }
}

/// Add `op` to the pending range; returns the range to write first when
/// `op` does not continue it.
fn join(pending: &mut Option<Pending>, op: &CopyOp, line: u64) -> Option<Pending> {
    if let Some(p) = pending {
        if p.source == op.source && p.offset + p.length == op.offset {
            p.length += op.length;
            return None;
        }
    }
    pending.replace(Pending {
        source: op.source,
        offset: op.offset,
        length: op.length,
        first_line: line,
    })
}

impl CloningOutput {
    /// Write one range of a source, then free it when it is a spool's.
    fn range(&mut self, p: Pending, sources: &mut CopySources) -> Result<()> {
        let (file, path) = sources.range(p.source, p.offset, p.length)?;
        let r = SourceRange {
            id: p.source,
            file,
            path,
            offset: p.offset,
            len: p.length,
        };
        self.append(r, &[])?;
        sources.passed(p.source, p.offset, p.length)
    }

    /// Write the range `r` after `prefix`: cloned when we can.
    fn append(&mut self, r: SourceRange<'_>, prefix: &[u8]) -> Result<()> {
        match &mut self.cloner {
            Some(c) => c.append(&mut self.out, r, prefix, self.require)?,
            None => {
                self.out.write_all(prefix)?;
                self.out.copy_from(r.file, r.path, r.offset, r.len)?;
            }
        }
        Ok(())
    }

    /// Write the frames of `op` with new BlobHeaders carrying indexdata;
    /// each Blob body is aligned and cloned on its own.
    fn frames(&mut self, op: &CopyOp, sources: &mut CopySources) -> Result<()> {
        let (file, path) = sources.range(op.source, op.offset, op.length)?;
        if op.frames.is_empty() {
            return Err(copier::frames_missing(op, path));
        }
        frames::reframe_op(op, (file, path), |f| {
            let body = SourceRange {
                id: op.source,
                file,
                path,
                offset: f.body_offset,
                len: f.body_len,
            };
            self.append(body, &f.prefix)
        })?;
        sources.passed(op.source, op.offset, op.length)
    }
}

/// The `-vv` line: `c`, with the output's own counts and the block size
/// ranges were aligned to (none when copied like pbf-copy).
fn report(
    c: &Counters,
    stats: CopyStats,
    block: Option<u64>,
    holes: &SpoolHoles,
    (started, parsing): (Instant, std::time::Duration),
) {
    let secs = started.elapsed().as_secs_f64();
    let streams = pbf_stream::StreamTime {
        parsing,
        writing: std::time::Duration::ZERO,
    };
    let how = match block {
        Some(b) => format!("{b}-byte blocks"),
        None => "copied like pbf-copy".into(),
    };
    let ranges = (c.cloned_bytes + c.copied_bytes).max(1);
    pbf_cli::warn(
        NAME,
        format!(
            "{}, {} bytes written ({how}): {} cloned in {}, {} copied \
             ({} in the kernel, {} by read/write), {} bytes of padding in {}, {} from \
             memory in all; {:.1} % of range bytes cloned; {}; {secs:.3} s; {streams}",
            pbf_cli::plural(c.copied.ops, "copy op"),
            c.written_bytes,
            c.cloned_bytes,
            pbf_cli::plural(c.clones, "clone"),
            c.copied_bytes,
            stats.kernel_bytes.saturating_sub(c.cloned_bytes),
            stats.fallback_bytes,
            c.padding_bytes,
            pbf_cli::plural(c.padding_frames, "frame"),
            c.memory_bytes,
            100.0 * c.cloned_bytes as f64 / ranges as f64,
            holes.verbose_words(),
        ),
    );
}
