//! The copier that `pbf-copy` and `pbf-reflink` share: both execute a
//! copy-only plan with the same options and guarantees and differ only in how
//! a range reaches the output, so this crate holds the rest of the job: the
//! common options (each tool keeps its own help texts), opening the plan, its
//! sources and the output, the loop over the plan's copy ops and header
//! records (a merge op or a stray record is refused; the plan reader has
//! checked the ops' order), the output header, which a plan `header` record
//! can replace before the first op, and finishing: the last check that no
//! source changed while it was read, the check of the complete output
//! (`--check-cmd`), the commit, and removing spools (by default: once
//! read, on success, failure or signal; `--keep-spools` keeps them). The
//! copier's side of the copy-ahead protocol is [`ahead`], whole. It is kept
//! out of `pbf-output` so the I/O library depends on no command-line code
//! and no plan protocol.
//! It answers in `anyhow` errors with the plan's name and line, as the tools
//! print them.
#![deny(missing_docs)]

pub mod ahead;
pub mod frames;
mod sources;

use std::io::BufRead;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::{Arg, ArgMatches, Command, value_parser};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use pbf_format::Key;
use pbf_format::header::Header;
use pbf_stream::{CopyOp, OutputHeader, PlanReader, PlanRecord, SortedThrough};

use pbf_cli::args::{flag, option};
use pbf_output::{CopyStats, OutputFile, OutputOptions};

pub use sources::{CopySources, SpoolHoles};

/// Add the plan argument and the `-o`, `-O`, `--tmpdir` and `--check-cmd`
/// options; `-o`'s help text, `output`, differs between the tools.
pub fn output_args(cmd: Command, output: &'static str) -> Command {
    cmd.arg(
        Arg::new("plan")
            .value_name("PLAN")
            .help("Plan stream to execute; - or absent for standard input")
            .default_value("-"),
    )
    .arg(
        option("output", "OUT", output)
            .short('o')
            .required(true)
            .value_parser(value_parser!(PathBuf)),
    )
    .arg(flag("overwrite", "Replace OUT if it exists (never an input)").short('O'))
    .arg(
        option(
            "tmpdir",
            "DIR",
            "Write the temporary file in DIR instead of beside OUT; DIR must be on OUT's \
             filesystem",
        )
        .value_parser(value_parser!(PathBuf)),
    )
    .arg(option(
        "check-cmd",
        "CMD",
        "Before OUT is written, run CMD with sh -c on the complete, fsynced output under a \
         temporary name, which CMD gets as $1: OUT is written only when CMD exits 0; otherwise \
         the output is removed, an existing OUT is left as it was, and the exit status is 1 \
         (pbf-sort --check passes its check this way). Not with -o -",
    ))
}

/// Add the `--add-indexdata`, `--keep-spools`, `--remove-spools`,
/// `--no-space-check`, `-v`, `-q`, `--progress` and `--no-progress` options.
/// The help texts of `--add-indexdata`, `add_indexdata`, and of `-v` and
/// `-q`, `verbosity`, differ between the tools.
pub fn write_args(
    cmd: Command,
    add_indexdata: &'static str,
    verbosity: pbf_cli::VerbosityHelp,
) -> Command {
    let keep = "Keep the plan's spool files (written by pbf-merge); by default they are removed \
                once read: after the output is committed, or on an error or signal";
    let remove = "Remove the spool files once read (the default; undoes an earlier --keep-spools)";
    let space = "Write even when OUT's filesystem reports too little free space for what the \
                 plan copies as it is (its copy_bytes, see pbf-stream(5)), for a filesystem \
                 that reports free space wrongly; the run then fails with ENOSPC if it really \
                 runs out, leaving nothing behind";
    let cmd = cmd
        .arg(flag("add-indexdata", add_indexdata))
        .arg(flag("keep-spools", keep).overrides_with("remove-spools"))
        .arg(flag("remove-spools", remove).overrides_with("keep-spools"))
        .arg(flag("no-space-check", space));
    pbf_cli::progress_args(pbf_cli::verbosity_args(cmd, verbosity))
}

/// The shared options of one run.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// `--add-indexdata`.
    pub add_indexdata: bool,
    /// Not `--no-space-check`: refuse an output its filesystem cannot hold.
    pub space_check: bool,
    /// How many times `-v` was given: once for what was done, twice for its internals too.
    pub verbose: u8,
    /// `-q`.
    pub quiet: bool,
    /// `--progress`, `--no-progress` and `-q`.
    pub bars: pbf_cli::Bars,
}

impl Options {
    /// The options as parsed by a command built with [`output_args`] and
    /// [`write_args`].
    pub fn from_matches(m: &ArgMatches) -> Options {
        Options {
            add_indexdata: m.get_flag("add-indexdata"),
            space_check: !m.get_flag("no-space-check"),
            verbose: pbf_cli::verbosity(m),
            quiet: m.get_flag("quiet"),
            bars: pbf_cli::Bars::from_matches(m),
        }
    }
}

/// The `-o` path.
pub fn output_path(m: &ArgMatches) -> Result<&PathBuf> {
    m.get_one::<PathBuf>("output")
        .ok_or_else(|| anyhow!("-o/--output is required"))
}

/// A plan opened for execution: its reader, its checked sources, and the
/// output (a temporary file until [`finish`]).
pub struct Job {
    /// The plan, past its header record.
    pub plan: PlanReader<Box<dyn BufRead + Send>>,
    /// The plan's name for messages.
    pub plan_name: String,
    /// The plan's sources, checked against their recorded size and mtime.
    pub sources: CopySources,
    /// The output.
    pub out: OutputFile,
    /// `--check-cmd`: run on the complete output before it becomes OUT.
    pub check: Option<String>,
}

impl Job {
    /// Read the plan's header, check its sources and create the output.
    pub fn open(m: &ArgMatches) -> Result<Job> {
        let plan_arg = m.get_one::<String>("plan").map_or("-", String::as_str);
        let plan_name = pbf_cli::input_name(plan_arg).to_owned();
        let output = output_path(m)?;
        // Before the plan is read (it may come slowly through a pipe).
        pbf_cli::paths::check_output(output, m.get_flag("overwrite"))?;
        if let Some(dir) = m.get_one::<PathBuf>("tmpdir") {
            pbf_cli::paths::check_temp_dir(dir, output)?;
        }
        let check = m.get_one::<String>("check-cmd").cloned();
        if check.is_some() && output.as_os_str() == "-" {
            return Err(pbf_cli::usage(
                "--check-cmd needs an output file: standard output cannot be taken back",
            ));
        }
        let plan = PlanReader::new(pbf_cli::input(plan_arg)?).context(plan_name.clone())?;
        let sources = CopySources::open(plan.header(), !m.get_flag("keep-spools"))?;
        let out_opts = OutputOptions {
            overwrite: m.get_flag("overwrite"),
            inputs: sources.paths(),
            temp_dir: m.get_one::<PathBuf>("tmpdir").cloned(),
        };
        // An output that is one of the plan's inputs is found before any
        // work: a usage error (exit 2), as the driver's refusal of it is.
        let out = OutputFile::create(output, &out_opts).map_err(|e| match e.kind() {
            pbf_output::ErrorKind::SameAsInput(_) => pbf_cli::usage(e.to_string()),
            _ => e.into(),
        })?;
        Ok(Job {
            plan,
            plan_name,
            sources,
            out,
            check,
        })
    }
}

/// A record of the plan that a copier acts on.
#[derive(Clone, Copy, Debug)]
pub enum Step<'a> {
    /// A `header` record: the output header is this one instead, and the
    /// plan's `copy_bytes` when it has them (only before the first op).
    Header(&'a OutputHeader),
    /// A copy op.
    Copy(&'a CopyOp),
    /// An `unsorted` record: a copy ahead on the early plan record's guess
    /// is wasted (only before the first op).
    Unsorted,
    /// A `sorted` record: the source is read in order up to this offset, so
    /// a copy ahead may go that far (only before the first op).
    Sorted(SortedThrough),
}

/// What the copy ops of a plan held ([`for_each_copy`]), as the copiers'
/// run reports open.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Copied {
    /// Copy ops.
    pub ops: u64,
    /// Objects right after one of the same kind and id, in the ops and
    /// where one op meets the next.
    pub duplicate_ids: u64,
}

impl Copied {
    /// Say once, unless `quiet`, what an importer trips on in the output
    /// `out` of header `head`: a history file under a current-state name
    /// (`.osm.pbf`), or objects more than once in a file that is no history
    /// file (osm2pgsql: "appears more than once").
    pub fn warn_for_importers(&self, name: &str, out: &str, head: &OutputHead, quiet: bool) {
        if quiet {
            return;
        }
        if head.header.has_history() {
            if out.ends_with(".osm.pbf") {
                pbf_cli::warn(
                    name,
                    format!(
                        "notice: {out}: the inputs hold history, so the output does too \
                         (every version of each object); --latest writes their current state"
                    ),
                );
            }
            return;
        }
        if self.duplicate_ids == 0 {
            return;
        }
        let n = self.duplicate_ids;
        let (repeat, them) = match n {
            1 => ("object repeats", "it"),
            _ => ("objects repeat", "them"),
        };
        pbf_cli::warn(
            name,
            format!(
                "warning: {out}: {n} {repeat} the type and id of the one before {them}, which \
                 osm2pgsql refuses: --latest keeps only the newest version of each object \
                 (--dedupe drops only exact repeats)"
            ),
        );
    }
}

/// Call `each` with every copy op and header record of the plan and its
/// line, under a progress bar over the sources' bytes (`total`, see
/// [`CopySources::known_bytes`]) labelled `message`; returns what the ops
/// held. A merge op left in the plan, or a record out of place, is an
/// error; the plan reader refuses ops out of output order.
///
/// The bar (see [`pbf_cli::progress`]) is drawn once the first op is done:
/// a plan record can come long before its ops (`pbf-overlap --sources`),
/// and a bar is drawn only when it has moved. While a stage upstream
/// (pbf-index, pbf-merge) still draws, the line is its, and this bar shows
/// once that stage has ended.
pub fn for_each_copy(
    plan: &mut PlanReader<Box<dyn BufRead + Send>>,
    plan_name: &str,
    (total, message, bars): (u64, &'static str, pbf_cli::Bars),
    mut each: impl FnMut(Step<'_>, u64) -> Result<()>,
) -> Result<Copied> {
    let mut copied = Copied::default();
    let mut last: Option<Key> = None;
    // Counted from the start, drawn once an op is done: a bar that stood at
    // 0 while the first op is copied would say nothing.
    let bar = pbf_cli::ProgressBar::hidden();
    bar.set_length(total);
    while let Some(rec) = plan.next_op().context(plan_name.to_owned())? {
        let line = plan.line();
        match rec {
            PlanRecord::Copy(op) => {
                each(Step::Copy(&op), line)?;
                let first = Key::from(op.first);
                let met = last.is_some_and(|l| l.same_object(&first));
                copied.duplicate_ids += op.duplicate_ids + u64::from(met);
                last = Some(op.last.into());
                copied.ops += 1;
                bar.inc(op.length);
                if copied.ops == 1 {
                    pbf_cli::draw(&bar, message, bars);
                }
            }
            PlanRecord::Header(h) => each(Step::Header(&h), line)?,
            PlanRecord::Unsorted(_) => each(Step::Unsorted, line)?,
            PlanRecord::Sorted(s) => each(Step::Sorted(s), line)?,
            PlanRecord::Merge(_) => return Err(merges_left(plan, plan_name, line)),
            PlanRecord::Plan(_) | PlanRecord::End(_) => {
                bail!("{plan_name}: line {line}: unexpected record")
            }
        }
    }
    bar.finish_and_clear();
    Ok(copied)
}

/// The output header: written before the first op's bytes (or at the end of
/// a plan without ops), unless a copier writes it earlier to copy ahead
/// behind it ([`ahead`]). A plan `header` record replaces it; when it was written
/// already, the output starts over from offset 0 and keeps nothing.
#[derive(Debug)]
pub struct OutputHead {
    header: Header,
    written: bool,
}

impl OutputHead {
    /// The plan record's header, not written yet.
    pub fn new(header: &Header) -> OutputHead {
        OutputHead {
            header: header.clone(),
            written: false,
        }
    }

    /// Unless `--no-space-check`: refuse an output whose filesystem cannot
    /// hold this header and `copied` bytes more (what the copier writes as
    /// it is of the plan's `copy_bytes`), before it writes them. `None`
    /// (nothing known of what it writes) checks nothing.
    pub fn check_room(&self, out: &OutputFile, copied: Option<u64>, opts: Options) -> Result<()> {
        if let (true, Some(copied)) = (opts.space_check, copied) {
            let header = frames::header_frame(&self.header).map_err(|e| e.within(out.name()))?;
            let header = header.len() as u64;
            out.check_room(header + copied)?;
        }
        Ok(())
    }

    /// Write the header unless it is written already.
    pub fn write(&mut self, out: &mut OutputFile) -> Result<()> {
        if !self.written {
            let header = frames::header_frame(&self.header).map_err(|e| e.within(out.name()))?;
            out.write_all(&header)?;
            self.written = true;
        }
        Ok(())
    }

    /// True when `header` is the one this writes (a plan `header` record
    /// that only brings `copy_bytes` changes nothing).
    pub fn is(&self, header: &Header) -> bool {
        self.header == *header
    }

    /// Take `header` instead; an output that holds the old one starts over
    /// (unless it is the same header).
    pub fn replace(&mut self, header: &Header, out: &mut OutputFile) -> Result<()> {
        if self.is(header) {
            return Ok(());
        }
        self.header = header.clone();
        if self.written {
            out.restart()?;
            self.written = false;
        }
        Ok(())
    }
}

/// The error for a plan that still holds merge ops, after counting them.
fn merges_left<R: BufRead>(
    plan: &mut PlanReader<R>,
    plan_name: &str,
    first_line: u64,
) -> anyhow::Error {
    let mut merges = 1u64;
    loop {
        match plan.next_op() {
            Ok(Some(PlanRecord::Merge(_))) => merges += 1,
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                return anyhow!(
                    "{plan_name}: line {first_line}: plan still has merge ops (at least {merges}; \
                     the plan then fails: {e}): run pbf-merge first"
                );
            }
        }
    }
    let merges = pbf_cli::plural(merges, "merge op");
    anyhow!("{plan_name}: line {first_line}: plan still has {merges}: run pbf-merge first")
}

/// The error for `--add-indexdata` on a copy op without per-frame keys.
pub fn frames_missing(op: &CopyOp, path: &Path) -> anyhow::Error {
    anyhow!(
        "--add-indexdata needs the per-frame keys (\"frames\") of every copy op, and this one at \
         offset {} of {} has none",
        op.offset,
        path.display()
    )
}

/// Once every byte was read: refuse an output whose sources changed while
/// they were read; else commit it (after `check` passed on it, when given),
/// then remove the spools (unless `--keep-spools`).
pub fn finish(
    name: &str,
    mut out: OutputFile,
    sources: &mut CopySources,
    check: Option<&str>,
) -> Result<Finished> {
    if let Err(e) = sources.check_unchanged() {
        let lost = match out.is_stream() {
            true => "what went to standard output is not a complete output",
            false => "the output was not written",
        };
        bail!("{e}; {lost}");
    }
    out.flush()?;
    let (stats, written) = (out.stats(), out.position());
    let started = Instant::now();
    let mut checking = Duration::ZERO;
    match check {
        Some(cmd) => {
            let out_name = out.name().to_owned();
            out.commit_checked(&mut |path| {
                let check_started = Instant::now();
                let checked = run_check(cmd, path, &out_name);
                checking = check_started.elapsed();
                checked
            })?;
        }
        None => out.commit()?,
    }
    let committing = started.elapsed().saturating_sub(checking);
    // The output stands: a signal now would only make a success look like
    // a failure.
    pbf_output::cleanup::ignore_signals();
    // A plan's paths are arbitrary: a spool not provably copied whole is
    // kept, and named (the output stands).
    for (spool, why) in sources.finish_spools() {
        pbf_cli::warn(
            name,
            format!(
                "warning: not removing {} as a spool: {why}",
                spool.display()
            ),
        );
    }
    Ok(Finished {
        stats,
        written,
        committing,
    })
}

/// What [`finish`] found of a committed output.
#[derive(Clone, Copy, Debug)]
pub struct Finished {
    /// How the output's bytes were copied.
    pub stats: CopyStats,
    /// The output's length.
    pub written: u64,
    /// Time the commit took (the fsyncs and the rename), without
    /// `--check-cmd`'s.
    pub committing: Duration,
}

/// Run `--check-cmd` on the complete output at `path` (its standard output
/// goes to standard error, which belongs to diagnostics): an error unless it
/// exits 0.
fn run_check(cmd: &str, path: &Path, out_name: &str) -> pbf_output::Result<()> {
    let failed = |what: String| {
        pbf_output::Error::invalid(
            out_name,
            format!(
                "{what}; the output, checked as {}, was not written",
                path.display()
            ),
        )
    };
    // Our bar is finished: the check may draw its own on the line.
    pbf_cli::release_line();
    let stderr = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| pbf_output::Error::io("--check-cmd: dup of standard error", e))?;
    // Its own process group, which a signal that ends us stops whole: the
    // shell and what it started, so no check speaks after we are gone.
    // Outside the terminal's foreground group, a write to the terminal
    // would stop it under `stty tostop` (SIGTTOU), unless that is ignored,
    // as it is for the shell and what it starts. It is told its job's
    // group, which the terminal's foreground is while the job draws. Ctrl-Z
    // stops the job's group only: the check is stopped and continued with
    // us (pbf_cli::signals).
    let mut check = Process::new("/bin/sh");
    check
        .arg("-c")
        .arg(cmd)
        .arg("sh")
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stderr))
        .env(pbf_cli::JOB_PGRP_ENV, pbf_cli::job_pgrp().to_string());
    // SAFETY: sigaction is async-signal-safe, and the closure allocates
    // nothing.
    unsafe {
        check.pre_exec(|| {
            let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
            sigaction(Signal::SIGTTOU, &ignore)
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    let (mut child, stopped_on_signal) = pbf_cli::signals::spawn_in_group(&mut check)
        .map_err(|e| pbf_output::Error::io("--check-cmd: starting /bin/sh", e))?;
    let status = child
        .wait()
        .map_err(|e| pbf_output::Error::io("--check-cmd: waiting for /bin/sh", e))?;
    drop(stopped_on_signal);
    match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(&status),
    ) {
        (Some(0), _) => Ok(()),
        (Some(code), _) => Err(failed(format!("--check-cmd failed (exit {code})"))),
        (None, Some(sig)) => Err(failed(format!("--check-cmd was killed by signal {sig}"))),
        (None, None) => Err(failed("--check-cmd failed".into())),
    }
}
