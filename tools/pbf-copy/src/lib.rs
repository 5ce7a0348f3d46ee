//! `pbf-copy`: the last stage of the fast path. It reads a plan that holds
//! only copy ops, checks that every source is still the file that was
//! indexed, writes the plan's OSMHeader and then every range in order with
//! `copy_file_range` (no decoding), and renames the output into place only
//! after the plan's `end` record was read and validated. All of the file
//! safety (temporary file, fsync, rename, signals, `-o -`) lives in the
//! `pbf-output` crate, shared with `pbf-reflink`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};
use pbf_output::{CopyStats, OutputFile, OutputOptions, Sources, frames};
use pbf_stream::{CopyOp, PlanReader, PlanRecord};

const NAME: &str = "pbf-copy";

/// The command-line interface.
pub fn command() -> Command {
    Command::new(NAME)
        .version(env!("CARGO_PKG_VERSION"))
        .about("Write a sorted OpenStreetMap PBF file from a plan by copying byte ranges")
        .long_about(
            "Read a plan stream (pbf-stream(5)) that holds only copy ops, as written by \
             pbf-overlap for sorted input or by pbf-merge, and write the output: the plan's \
             OSMHeader, then every copied range in order with copy_file_range(2), falling back to \
             read/write where the kernel refuses. Blob bodies are never decoded.\n\n\
             Before writing, every source is checked against the size and mtime recorded in the \
             plan. The output is written to a temporary file beside OUT, fsynced and renamed onto \
             OUT only after the plan's end record; on an error or SIGINT/SIGTERM/SIGHUP the \
             temporary file is removed and an existing OUT is left untouched. A plan that still \
             holds merge ops is refused: run pbf-merge first.",
        )
        .arg(
            Arg::new("plan")
                .value_name("PLAN")
                .help("Plan stream to execute; - or absent for standard input")
                .default_value("-"),
        )
        .arg(
            Arg::new("output")
                .short('o')
                .long("output")
                .value_name("OUT")
                .help(
                    "Output file; - writes to standard output (e.g. a pipe). A stream cannot \
                     be taken back: on an error it ends with bytes no PBF reader accepts, and \
                     the exit status is 1 (use set -o pipefail)",
                )
                .required(true)
                .value_parser(value_parser!(PathBuf)),
        )
        .arg(
            Arg::new("overwrite")
                .short('O')
                .long("overwrite")
                .help("Replace OUT if it exists (never an input)")
                .action(ArgAction::SetTrue),
        )
        .arg(
            Arg::new("temp-dir")
                .long("temp-dir")
                .value_name("DIR")
                .help(
                    "Write the temporary file in DIR instead of beside OUT; DIR must be on OUT's \
                     filesystem (pbf-sort passes its own temporary directory)",
                )
                .value_parser(value_parser!(PathBuf)),
        )
        .arg(
            Arg::new("add-indexdata")
                .long("add-indexdata")
                .help(
                    "Give every data frame a new BlobHeader with pbf-sort indexdata (the body is \
                     still copied in the kernel), so the next pbf-index reads headers only",
                )
                .action(ArgAction::SetTrue),
        )
        .arg(
            Arg::new("remove-spools")
                .long("remove-spools")
                .help("Delete the plan's spool sources (written by pbf-merge) after success")
                .action(ArgAction::SetTrue),
        )
        .arg(
            Arg::new("verbose")
                .short('v')
                .long("verbose")
                .help("Print a summary on stderr: ops, bytes copied in the kernel and by read/write, time")
                .action(ArgAction::SetTrue),
        )
        .arg(
            Arg::new("quiet")
                .short('q')
                .long("quiet")
                .help("No progress bar and no warnings")
                .conflicts_with("verbose")
                .action(ArgAction::SetTrue),
        )
}

/// Options of one run.
#[derive(Clone, Copy, Debug)]
struct Options {
    add_indexdata: bool,
    remove_spools: bool,
    verbose: bool,
    quiet: bool,
}

/// Run with parsed arguments.
pub fn run(m: &ArgMatches) -> Result<ExitCode> {
    let started = Instant::now();
    let opts = Options {
        add_indexdata: m.get_flag("add-indexdata"),
        remove_spools: m.get_flag("remove-spools"),
        verbose: m.get_flag("verbose"),
        quiet: m.get_flag("quiet"),
    };
    let plan_arg = m.get_one::<String>("plan").map_or("-", String::as_str);
    let plan_name = pbf_cli::input_name(plan_arg).to_owned();
    let output = m
        .get_one::<PathBuf>("output")
        .ok_or_else(|| anyhow!("-o/--output is required"))?;
    let mut plan = PlanReader::new(pbf_cli::input(plan_arg)?).context(plan_name.clone())?;
    let mut sources = Sources::open(plan.header())?;
    let out_opts = OutputOptions {
        overwrite: m.get_flag("overwrite"),
        inputs: sources.paths(),
        temp_dir: m.get_one::<PathBuf>("temp-dir").cloned(),
    };
    let mut out = OutputFile::create(output, &out_opts)?;
    out.write_all(&frames::header_frame(&plan.header().header)?)?;
    let bar = pbf_cli::progress(sources.known_bytes(), "copying", opts.quiet);
    let mut ops = 0u64;
    while let Some(rec) = plan.next_op().context(plan_name.clone())? {
        let line = plan.line();
        match rec {
            PlanRecord::Copy(op) => {
                copy_op(&op, &mut sources, &mut out, opts)
                    .with_context(|| format!("{plan_name}: line {line}"))?;
                ops += 1;
                bar.inc(op.length);
            }
            PlanRecord::Merge(_) => return Err(merges_left(&mut plan, &plan_name, line)),
            PlanRecord::Plan(_) | PlanRecord::End(_) => {
                bail!("{plan_name}: line {line}: unexpected record")
            }
        }
    }
    bar.finish_and_clear();
    let stats = out.stats();
    let written = out.position();
    out.commit()?;
    if opts.remove_spools {
        remove_spools(&sources, opts.quiet);
    }
    if opts.verbose {
        report(ops, written, stats, started);
    }
    Ok(ExitCode::SUCCESS)
}

/// Append one copy op: the whole range at once, or frame by frame with new
/// BlobHeaders for `--add-indexdata`.
fn copy_op(op: &CopyOp, sources: &mut Sources, out: &mut OutputFile, opts: Options) -> Result<()> {
    let (file, path) = sources.range(op.source, op.offset, op.length)?;
    if !opts.add_indexdata {
        out.copy_from(file, path, op.offset, op.length)?;
        return Ok(());
    }
    if op.frames.is_empty() {
        bail!(
            "--add-indexdata needs the per-frame keys (\"frames\") of every copy op, and this \
             one at offset {} of {} has none",
            op.offset,
            path.display()
        );
    }
    let mut offset = op.offset;
    for keys in &op.frames {
        out.copy_frame_with_indexdata(file, path, offset, keys)?;
        offset += keys.length;
    }
    Ok(())
}

/// The error for a plan that still holds merge ops, after counting them.
fn merges_left<R: std::io::BufRead>(
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
    anyhow!(
        "{plan_name}: line {first_line}: plan still has {merges} merge op(s): run pbf-merge first"
    )
}

/// Delete spool files after the output was committed; a failure is reported,
/// the output stays. Only files that are provably spools whose every byte is
/// now in the output are deleted (a plan's paths could name any file).
fn remove_spools(sources: &Sources, quiet: bool) {
    for (spool, removable) in sources.removable_spools() {
        if let Err(why) = removable {
            pbf_cli::warn(
                NAME,
                format!(
                    "warning: not removing {} as a spool: {why}",
                    spool.display()
                ),
            );
            continue;
        }
        if let Err(e) = std::fs::remove_file(spool) {
            if !quiet || e.kind() != std::io::ErrorKind::NotFound {
                pbf_cli::warn(
                    NAME,
                    format!(
                        "warning: output written, but removing spool {} failed: {e}",
                        spool.display()
                    ),
                );
            }
        }
    }
}

fn report(ops: u64, written: u64, stats: CopyStats, started: Instant) {
    let secs = started.elapsed().as_secs_f64();
    pbf_cli::warn(
        NAME,
        format!(
            "{ops} copy ops, {written} bytes written: {} copied in the kernel, {} by read/write \
             ({} fallbacks), {} from memory; {secs:.3} s ({:.1} MB/s)",
            stats.kernel_bytes,
            stats.fallback_bytes,
            stats.fallbacks,
            stats.written_bytes,
            written as f64 / secs.max(1e-9) / 1e6
        ),
    );
}
