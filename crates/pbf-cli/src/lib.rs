//! What every tool binary shares, so each `main.rs` is one line and each tool
//! crate holds only its own policy: the main wrapper with the toolkit's exit
//! codes (0 success, 1 failure, 2 usage, an input that is not PBF among
//! them, told what to run to get a PBF from it; a broken pipe is a quiet 0),
//! `-` for stdin/stdout, one rule for `-q`, `-v` and progress bars in every
//! tool ([`diag`]), what a signal must undo on the terminal and in a
//! command run in a process group of its own ([`signals`]), parsing of
//! common option values, the report of a
//! run that the driver's `--summary-json` gathers ([`report`]), and what
//! the `pbf-sort` driver asks of Rust: its command line and help, the
//! judgement of its files and its summary ([`driver`]).
#![deny(missing_docs)]

use clap::{ArgMatches, Command};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::{Mutex, MutexGuard, PoisonError};

mod advice;
pub mod args;
mod diag;
pub mod driver;
pub mod paths;
pub mod report;
pub mod signals;

pub use diag::{
    Bars, JOB_PGRP_ENV, VerbosityHelp, draw, fit, job_pgrp, progress, progress_args, release_line,
    set_message, verbosity, verbosity_args,
};
/// The progress bar type [`progress`] returns.
pub use indicatif::ProgressBar;
/// A count and its noun, as every message words it.
pub use pbf_stream::plural;

/// `mutex`'s guard, whether or not a thread panicked holding it: what the
/// toolkit keeps behind a mutex (a label, a queue, plain fields) is whole
/// between statements, and the panic is reported where it happened.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Exit status for "the answer is no" (for example `--check` on an unsorted file).
pub const EXIT_NO: u8 = 1;

/// Parse arguments with `command`, call `run`, and turn its result into an
/// exit code. Errors print one line, `NAME: error: CAUSE: CAUSE...`. Under
/// `PBF_SORT_SUMMARY_DIR` the run's report is written as it returns
/// ([`report`]).
pub fn main(
    name: &str,
    command: Command,
    run: fn(&ArgMatches) -> anyhow::Result<ExitCode>,
) -> ExitCode {
    let started = std::time::Instant::now();
    die_with_driver();
    let code = parse_and_run(name, command, run);
    report::write(name, code, started);
    code
}

fn parse_and_run(
    name: &str,
    command: Command,
    run: fn(&ArgMatches) -> anyhow::Result<ExitCode>,
) -> ExitCode {
    let matches = match command.try_get_matches() {
        Ok(m) => m,
        Err(e) if !e.use_stderr() => return print_help(name, &e),
        Err(e) => {
            let line = clap_line(&e);
            warn(name, format!("error: {line} (see '{name} --help')"));
            return ExitCode::from(2);
        }
    };
    match run(&matches) {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        // Under the driver, a stream cut short by a failed upstream stage is
        // not news: that stage printed the cause, the driver says the rest.
        Err(err) if std::env::var_os(DRIVER_PID_ENV).is_some() && is_upstream_failure(&err) => {
            ExitCode::FAILURE
        }
        Err(err) => {
            warn(name, format!("error: {}", one_line(&err)));
            if is_not_pbf(&err) || err.downcast_ref::<Usage>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// clap's message in one line: its first paragraph (the lines before the
/// first blank one, which name the argument), without the "error: " clap
/// starts with, and its tips (the option meant by a misspelt one).
fn clap_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let lines = || text.lines().map(str::trim);
    let first: Vec<&str> = lines().take_while(|l| !l.is_empty()).collect();
    let tips = lines().filter_map(|l| l.strip_prefix("tip: "));
    let line = first.join(" ") + &tips.map(|tip| format!("; {tip}")).collect::<String>();
    line.strip_prefix("error: ").unwrap_or(&line).to_owned()
}

/// A problem found before any work (a missing input, an output that
/// exists): the command line cannot work as given, exit status 2.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A [`Usage`] error (exit status 2) with this message.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(msg.into()))
}

/// True when an input is not a PBF file at all (XML, OPL, compressed...):
/// the wrong kind of file was given, a usage error (exit 2).
pub fn is_not_pbf(err: &anyhow::Error) -> bool {
    let not_pbf = |e: &pbf_format::Error| matches!(e.kind(), pbf_format::ErrorKind::NotPbf(_));
    any_cause(err, not_pbf)
}

/// True when a cause in `err`'s chain is an `E` that `is` holds for.
fn any_cause<E: std::error::Error + 'static>(err: &anyhow::Error, is: impl Fn(&E) -> bool) -> bool {
    err.chain().any(|c| c.downcast_ref::<E>().is_some_and(&is))
}

/// `--help` or `--version` on standard output, which must take it: a
/// write error (`> /dev/full`) is exit 1 with a line saying so; a reader
/// that stopped early (`| head -1`) is no error.
fn print_help(name: &str, e: &clap::Error) -> ExitCode {
    match e.print().and_then(|()| io::stdout().flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            let line = paths::io_line("standard output", &err);
            warn(name, format!("error: {line}"));
            ExitCode::FAILURE
        }
    }
}

/// Environment variable through which the `pbf-sort` driver names itself.
pub const DRIVER_PID_ENV: &str = "PBF_SORT_DRIVER_PID";

/// When this process is a stage started by the `pbf-sort` driver (our parent
/// is the process named in [`DRIVER_PID_ENV`]), ask the kernel to send us
/// SIGTERM when the driver dies. A driver killed with SIGKILL cannot clean up,
/// but its stages then still stop (and remove their temporaries) instead of
/// finishing and publishing an output nobody is waiting for.
fn die_with_driver() {
    use nix::sys::signal::Signal::SIGTERM;
    let Some(driver) = diag::env_pid(DRIVER_PID_ENV) else {
        return;
    };
    if nix::unistd::getppid() != driver || nix::sys::prctl::set_pdeathsig(SIGTERM).is_err() {
        return;
    }
    // The driver may have died between fork and prctl.
    if nix::unistd::getppid() != driver {
        let _ = nix::sys::signal::raise(SIGTERM);
    }
}

/// The error and its causes on one line, `outer: cause: cause`, leaving out a
/// cause whose text the line already holds (library errors print their I/O
/// cause and also return it as their source), and ending in what to run
/// when an input is not PBF.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for text in err.chain().map(|cause| cause.to_string()) {
        if !line.contains(&text) {
            let sep = if line.is_empty() { "" } else { ": " };
            line.extend([sep, text.as_str()]);
        }
    }
    if let Some(how) = err.chain().find_map(advice::for_cause) {
        line = format!("{line}: {how}");
    }
    paths::without_os_errors(&line).replace('\n', " ")
}

/// True when the error only echoes an upstream stage's failure (an empty
/// stream, or one without its `end` record).
pub fn is_upstream_failure(err: &anyhow::Error) -> bool {
    any_cause(err, pbf_stream::Error::is_upstream_failure)
}

/// True when any cause in the chain is a broken pipe.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    any_cause(err, |e: &io::Error| e.kind() == io::ErrorKind::BrokenPipe)
}

/// For a tool whose standard output is a file that a cut makes invalid (a
/// PBF, unlike a JSON Lines stream, whose reader knows where it stopped):
/// a broken pipe is no quiet success but death by SIGPIPE, as for any
/// filter whose reader stopped early (`osmium cat | head`: status 141).
/// Call it with the tool's result once everything of the run is dropped
/// (temporary files, spools), because the process ends here.
pub fn sigpipe_if_cut(result: anyhow::Result<ExitCode>) -> anyhow::Result<ExitCode> {
    use nix::sys::signal::{SigHandler, Signal, raise, signal};
    match &result {
        Err(e) if is_broken_pipe(e) => {
            // SAFETY: restores the default action; no handler runs.
            let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
            let _ = raise(Signal::SIGPIPE);
            // Still here (SIGPIPE blocked): fail with the shell's status.
            Ok(ExitCode::from(128 + Signal::SIGPIPE as u8))
        }
        _ => result,
    }
}

/// Open an input: a path, or standard input for `-` (a [`Usage`] error
/// when it cannot be opened, or when standard input is a terminal, where
/// no stream ever comes). A pipe on standard input is widened (to 1 MiB,
/// see `widen_pipe`), and read up to [`INPUT_BUFFER`] at a time.
pub fn input(path: &str) -> anyhow::Result<Box<dyn BufRead + Send>> {
    let read: Box<dyn io::Read + Send> = if path == "-" {
        if io::stdin().is_terminal() {
            return Err(usage(TERMINAL_INPUT));
        }
        widen_pipe(io::stdin());
        Box::new(io::stdin())
    } else {
        // Inputs are opened before any work: one that cannot be is a usage error.
        Box::new(File::open(path).map_err(|e| usage(paths::io_line(path, &e)))?)
    };
    Ok(Box::new(BufReader::with_capacity(INPUT_BUFFER, read)))
}

/// Why a stage does not wait for a stream typed on the terminal.
pub const TERMINAL_INPUT: &str = "standard input is a terminal: this stage reads the stream of \
     the stage before it; pipe it in or name its file (see --help)";

/// Bytes an input is read at a time: as much as a widened pipe holds. With
/// 64 KiB, pbf-overlap read the 158 MB index of 580,414 small blobs from a
/// pipe in 317-333 ms; with 1 MiB, in 299-311 ms.
const INPUT_BUFFER: usize = 1 << 20;

/// Display name of an input for error messages.
pub fn input_name(path: &str) -> &str {
    if path == "-" { "standard input" } else { path }
}

/// Buffered standard output; a pipe there is widened (to 1 MiB, see
/// `widen_pipe`).
pub fn stdout() -> BufWriter<Stdout> {
    widen_pipe(io::stdout());
    BufWriter::with_capacity(1 << 16, Stdout(io::stdout()))
}

/// Standard output that names itself in its errors: a write that fails
/// (`> /dev/full`) says `standard output: No space left on device`, as an
/// input's error names the input. The kind is kept, so a broken pipe is
/// still one ([`is_broken_pipe`]).
pub struct Stdout(io::Stdout);

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(name_stdout)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(name_stdout)
    }
}

/// The error with `standard output: ` before its cause, kind unchanged.
fn name_stdout(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), paths::io_line("standard output", &e))
}

/// Bytes a pipe between two stages holds. Linux's default of 64 KiB makes
/// the writer of a long record (a merge op of half a million small blobs
/// is a 101 MB line) and its reader take turns every 64 KiB: with 1 MiB,
/// pbf-overlap hands that line to pbf-merge in 0.13-0.17 s instead of
/// 0.23-0.29 s. 1 MiB is what `/proc/sys/fs/pipe-max-size` lets any user
/// set by default.
const PIPE_BYTES: nix::libc::c_int = 1 << 20;

/// Let the pipe on `fd`, if it is one, hold [`PIPE_BYTES`]. Either end may
/// ask: the capacity belongs to the pipe. A refusal (not a pipe, or a
/// lower limit) leaves it as it was: slower, never wrong.
fn widen_pipe(fd: impl std::os::fd::AsFd) {
    use nix::fcntl::{FcntlArg, fcntl};
    use std::os::fd::AsRawFd;
    let fd = fd.as_fd().as_raw_fd();
    if matches!(fcntl(fd, FcntlArg::F_GETPIPE_SZ), Ok(n) if n < PIPE_BYTES) {
        let _ = fcntl(fd, FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
    }
}

/// Print a diagnostic line on stderr, prefixed with the tool name.
pub fn warn(name: &str, msg: impl std::fmt::Display) {
    // One write: stages of one pipeline share stderr, and a line written in
    // pieces can be cut by another stage's line (a pipe keeps each write of
    // up to 4096 bytes whole). On a terminal the line may hold a stage's
    // progress bar: it is cleared first, so the message starts a clean
    // line and the bar is drawn again below it (in the foreground only: in
    // the background the line is the shell's).
    let clear = if io::stderr().is_terminal() && diag::in_foreground() {
        signals::CLEAR_LINE
    } else {
        ""
    };
    let line = format!("{clear}{name}: {msg}\n");
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

/// Parse a size such as `512M`, `1G`, `1GiB`, `64k` or plain bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().map_err(|_| format!("invalid size '{s}'"))?;
    let unit = unit.to_ascii_lowercase();
    let mult: u64 = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(format!("invalid size unit in '{s}' (use k, M, G or T)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// The smallest `--memory`: the smallest budget the merge is tested with
/// (tests/e2e/merge.rs spills every few blocks at 64k). A budget of 0 has no
/// meaning, and one below this would spill after every block.
const MIN_MEMORY: u64 = 64 << 10;

/// Parse `--memory` (pbf-merge's, and the driver's for it): a size of
/// at least [`MIN_MEMORY`].
pub fn parse_budget(s: &str) -> Result<u64, String> {
    let n = parse_size(s)?;
    if n < MIN_MEMORY {
        return Err(format!("{s} is below the smallest budget, 64k"));
    }
    Ok(n)
}

/// `--ID C`, a compression option (`pbf-merge --compression`, `pbf-copy
/// --recompress`, and the driver's `--compression` for its completions):
/// any form [`pbf_format::compress::Compression`] parses, and the codec
/// names for shell completions to offer. The names
/// are hidden from `--help`, whose text names every form with its levels.
pub fn compression_arg(id: &'static str, help: &'static str) -> clap::Arg {
    args::option(id, "C", help)
        .value_parser(CompressionParser)
        .hide_possible_values(true)
}

/// The value parser of [`compression_arg`].
#[derive(Clone, Copy, Debug)]
struct CompressionParser;

impl clap::builder::TypedValueParser for CompressionParser {
    type Value = pbf_format::compress::Compression;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        let parse = |s: &str| s.parse::<pbf_format::compress::Compression>();
        parse.parse_ref(cmd, arg, value)
    }

    /// The codec names a completion offers, each with its levels: a level
    /// follows a colon, which bash splits words at, so it is left to type.
    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        use clap::builder::PossibleValue;
        let names = [
            PossibleValue::new("zlib").help("zlib:0 to zlib:9; zlib is zlib:6 (the default)"),
            PossibleValue::new("zstd")
                .help("zstd:1 to zstd:22; zstd is zstd:3 (osmium 1.15 reads no zstd)"),
            PossibleValue::new("lz4").help("lz4"),
            PossibleValue::new("none").help("uncompressed"),
        ];
        Some(Box::new(names.into_iter()))
    }
}

/// Most threads `-j` takes.
const MOST_JOBS: usize = 4096;

/// `-j/--jobs N` with `help`: a thread count of 1 to 4096. 0 and negative
/// counts are refused (exit 2) with the range in the message, rather than
/// taken to mean anything or read as another option.
pub fn jobs_arg(help: &'static str) -> clap::Arg {
    args::option("jobs", "N", help)
        .short('j')
        .value_hint(clap::ValueHint::Other)
        .allow_negative_numbers(true)
        .value_parser(parse_jobs)
}

/// Parse a `-j` value (see [`jobs_arg`]).
pub fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if (1..=MOST_JOBS as i128).contains(&n) => Ok(n as usize),
        _ => Err(format!("'{s}' is not a thread count from 1 to {MOST_JOBS}")),
    }
}

/// The `-j` value, or every core when it is not given.
pub fn jobs(n: Option<usize>) -> usize {
    n.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn jobs_are_counts_from_one() {
        assert_eq!(super::parse_jobs("1"), Ok(1));
        assert_eq!(super::parse_jobs("4096"), Ok(4096));
        for bad in ["0", "-3", "4097", "two", "", "99999999999999999999999"] {
            let why = super::parse_jobs(bad).expect_err("refused");
            assert!(why.contains("from 1 to 4096"), "{bad}: {why}");
        }
    }

    use super::*;

    #[test]
    fn a_misspelt_option_is_named_with_the_one_meant() {
        let cmd = || {
            clap::Command::new("tool")
                .arg(clap::Arg::new("tmpdir").long("tmpdir"))
                .arg(clap::Arg::new("output").long("output"))
        };
        let e = cmd()
            .try_get_matches_from(["tool", "--temp-dir", "x"])
            .expect_err("unknown");
        assert_eq!(
            clap_line(&e),
            "unexpected argument '--temp-dir' found; a similar argument exists: '--tmpdir'"
        );
        let e = cmd()
            .try_get_matches_from(["tool", "--zzz"])
            .expect_err("unknown");
        assert_eq!(clap_line(&e), "unexpected argument '--zzz' found");
    }

    #[test]
    fn a_pipe_is_widened_as_far_as_the_system_allows() {
        use nix::fcntl::{FcntlArg, fcntl};
        use std::os::fd::AsRawFd;
        let (read, write) = nix::unistd::pipe().expect("pipe");
        let size = |fd: &std::os::fd::OwnedFd| fcntl(fd.as_raw_fd(), FcntlArg::F_GETPIPE_SZ);
        let before = size(&read).expect("pipe size");
        let max: i32 = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
            .expect("pipe-max-size")
            .trim()
            .parse()
            .expect("a number");
        widen_pipe(&write);
        let after = size(&read).expect("pipe size");
        // Root may pass the limit; anyone else gets at most the limit.
        let root =
            std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").expect("proc"))
                == 0;
        let allowed = root || max >= PIPE_BYTES;
        assert_eq!(
            after,
            if allowed {
                PIPE_BYTES.max(before)
            } else {
                before
            }
        );
        // A file is left alone, without an error.
        let file = File::open(std::env::current_exe().expect("test binary")).expect("open");
        widen_pipe(&file);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("1X").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn one_line_drops_repeated_causes() {
        let io = io::Error::new(io::ErrorKind::NotFound, "gone");
        #[derive(Debug)]
        struct Wrap(io::Error);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "x.pbf: offset 4: {}", self.0)
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = anyhow::Error::from(Wrap(io)).context("reading");
        assert_eq!(one_line(&e), "reading: x.pbf: offset 4: gone");
    }

    #[test]
    fn one_line_leaves_out_os_error_numbers() {
        let full = io::Error::from_raw_os_error(nix::libc::ENOSPC);
        let e = anyhow::Error::from(full).context("out.pbf: write at offset 0");
        assert_eq!(
            one_line(&e),
            "out.pbf: write at offset 0: No space left on device"
        );
    }

    #[test]
    fn standard_output_names_itself_in_its_errors() {
        let e = name_stdout(io::Error::from_raw_os_error(nix::libc::ENOSPC));
        assert_eq!(e.to_string(), "standard output: No space left on device");
        let cut = name_stdout(io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!(cut.kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn broken_pipe_is_recognised() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("writing");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
