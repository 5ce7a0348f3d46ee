//! One rule for diagnostics in every tool: `-v` and `-q` exclude each other
//! (exit 2, as in the driver); progress bars appear only when stderr is a
//! terminal, unless `--progress` forces one (drawn with plain ANSI escapes,
//! at `$COLUMNS` or 80 columns) or `--no-progress` or `-q` turns them off.
//! A bar fits its line and never wraps, each frame laid out for the
//! terminal's width at that moment (a window resized mid-run included): its
//! label keeps what names the work (the op number, the file name) as long
//! as the line allows, so the bar, the eta and the byte counts give way
//! first, then the label's detail in parentheses, then the middle of a long
//! file name. A job the shell runs in the background (`&`) draws nothing,
//! so no bar lands on the prompt; brought to the foreground, it draws again.

use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{ArgAction, ArgMatches, Command};
use indicatif::{
    HumanBytes, HumanDuration, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle,
    TermLike,
};
use pbf_output::cleanup::signalled;

use crate::args::flag;
use crate::lock;
use crate::signals::{CLEAR_LINE, clear_line_on_signal, handled_signals};

/// The help texts of `-v` and `-q`, which differ from tool to tool.
#[derive(Clone, Copy, Debug)]
pub struct VerbosityHelp {
    /// `-v/--verbose`.
    pub verbose: &'static str,
    /// `-q/--quiet`.
    pub quiet: &'static str,
}

/// Add `-v/--verbose` and `-q/--quiet`, which exclude each other. `-v`
/// counts: once for what was done to the user's files, twice (`-vv`) for
/// the internals too ([`verbosity`]).
pub fn verbosity_args(cmd: Command, help: VerbosityHelp) -> Command {
    cmd.arg(
        flag("verbose", help.verbose)
            .short('v')
            .action(ArgAction::Count),
    )
    .arg(
        flag("quiet", help.quiet)
            .short('q')
            .conflicts_with("verbose"),
    )
}

/// How many times `-v` was given (0 without it).
pub fn verbosity(m: &ArgMatches) -> u8 {
    m.get_count("verbose")
}

/// Add `--progress` and `--no-progress` (the last one given wins).
pub fn progress_args(cmd: Command) -> Command {
    let always = "Draw a progress bar on stderr even when it is not a terminal (or under -q)";
    let never = "Draw no progress bar, even on a terminal";
    cmd.arg(flag("progress", always).overrides_with("no-progress"))
        .arg(flag("no-progress", never).overrides_with("progress"))
}

/// When to draw a progress bar.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bars {
    /// Only when stderr is a terminal.
    #[default]
    Auto,
    /// Always (`--progress`).
    Always,
    /// Never (`--no-progress`, or `-q` without `--progress`).
    Never,
}

impl Bars {
    /// From a command built with [`verbosity_args`] and [`progress_args`].
    pub fn from_matches(m: &ArgMatches) -> Bars {
        let given = |id: &str| m.try_get_one::<bool>(id).ok().flatten() == Some(&true);
        if given("progress") {
            Bars::Always
        } else if given("no-progress") || given("quiet") {
            Bars::Never
        } else {
            Bars::Auto
        }
    }
}

/// Widest message before the bar; longer ones are elided in the middle.
const MESSAGE_WIDTH: usize = 28;

/// The label of this process's bar, as last set (one bar is drawn per
/// process, see [`Screen`]); fitted to the line at each frame.
static LABEL: Mutex<String> = Mutex::new(String::new());

/// The columns of the line the frame being drawn fills (see
/// [`Screen::width`], which indicatif asks before each frame): a terminal
/// made narrower mid-run gets a narrower line at the next frame.
static LINE_COLS: AtomicUsize = AtomicUsize::new(80);

/// Change a bar's label; each frame fits it to the line's width.
pub fn set_message(bar: &ProgressBar, text: &str) {
    *lock(&LABEL) = text.to_owned();
    // The message is not drawn (the label is); setting it draws a frame.
    bar.set_message(text.to_owned());
}

/// Fewest columns the bar itself is drawn in (`[=>  ]` still moves).
const MIN_BAR: usize = 5;

/// Columns a message wants to name its work ("merging op 12345 (9 blobs)"
/// less its detail, "indexing " and a file name elided to 11): the eta and
/// the byte counts give way before the message gets fewer.
const WANT_MESSAGE: usize = 20;

/// Fewest columns a bar is drawn in (`[=>  ]  42%`, a bar of 5 and the
/// percentage); on a narrower line nothing is drawn.
const MIN_LINE: u16 = 19;

/// Fewest columns a message is shown in at all.
const MIN_MESSAGE: usize = 10;

/// What a line shows after its bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tail {
    /// " 298.65 MiB/954.85 MiB eta 3m".
    CountsEta,
    /// " 298.65 MiB/954.85 MiB".
    Counts,
    /// "  42%".
    Percent,
}

impl Tail {
    /// The most columns it takes, with its leading space.
    fn columns(self) -> usize {
        match self {
            Tail::CountsEta => 1 + 21 + 8,
            Tail::Counts => 1 + 21,
            Tail::Percent => 1 + 4,
        }
    }
}

/// What a line of `width` columns shows: its tail, and the most columns its
/// label gets (0: no label; a shorter label leaves the rest to the bar).
/// Besides the label (and its space), the bar and the tail: the brackets.
/// The richest tail that leaves the label [`WANT_MESSAGE`] columns and the
/// bar [`MIN_BAR`] is drawn; on narrower lines the percentage alone, with
/// what is left for the label.
fn layout(width: usize) -> (Tail, usize) {
    let room = |tail: Tail| width.saturating_sub(1 + 2 + tail.columns() + MIN_BAR);
    for tail in [Tail::CountsEta, Tail::Counts, Tail::Percent] {
        if room(tail) >= WANT_MESSAGE {
            return (tail, MESSAGE_WIDTH.min(room(tail)));
        }
    }
    let label = room(Tail::Percent);
    (Tail::Percent, if label >= MIN_MESSAGE { label } else { 0 })
}

/// The `{label}` of a frame: the label fitted to the line's layout, then a
/// space; nothing where the line leaves it no room.
fn label_key(_: &ProgressState, w: &mut dyn fmt::Write) {
    let (_, cols) = layout(LINE_COLS.load(Ordering::Relaxed));
    if cols > 0 {
        let label = lock(&LABEL);
        let _ = write!(w, "{} ", padded(&label, cols));
    }
}

/// The `{tail}` of a frame, as the line's layout says.
fn tail_key(state: &ProgressState, w: &mut dyn fmt::Write) {
    let (tail, _) = layout(LINE_COLS.load(Ordering::Relaxed));
    let (pos, len) = (state.pos(), state.len().unwrap_or(0));
    let age = estimate_age(state.elapsed());
    let _ = w.write_str(&tail_text(tail, pos, len, age, state.eta()));
}

/// `tail` of a bar at `pos` of `len` after `elapsed`, `eta` left.
fn tail_text(tail: Tail, pos: u64, len: u64, elapsed: Duration, eta: Duration) -> String {
    let counts = || format!(" {}/{}", HumanBytes(pos), HumanBytes(len));
    match tail {
        Tail::CountsEta => counts() + &eta_text(elapsed, pos, len, eta).unwrap_or_default(),
        Tail::Counts => counts(),
        Tail::Percent => format!(" {:>3.0}%", share(pos, len) * 100.0),
    }
}

/// The share of the work done at `pos` of `len` (none of nothing).
fn share(pos: u64, len: u64) -> f64 {
    if len == 0 {
        0.0
    } else {
        pos as f64 / len as f64
    }
}

/// A byte-count progress bar on stderr as `bars` says; otherwise a hidden
/// bar that costs nothing. It is drawn on the [`Screen`] line, which one
/// process of a pipeline has at a time: the first to draw keeps it until it
/// exits, so a stage with nothing to show yet should count on a hidden bar
/// and [`draw`] it once its work starts.
pub fn progress(total_bytes: u64, message: &str, bars: Bars) -> ProgressBar {
    let bar = ProgressBar::hidden();
    bar.set_length(total_bytes);
    draw(&bar, message, bars);
    bar
}

/// Draw `bar`, hidden until now, from now on as `bars` says, labelled
/// `message`; it keeps the position it counted while hidden. Each frame is
/// laid out for the line's width at that moment.
pub fn draw(bar: &ProgressBar, message: &str, bars: Bars) {
    let terminal = io::stderr().is_terminal();
    if bars == Bars::Never || (bars == Bars::Auto && !terminal) {
        return;
    }
    let style = ProgressStyle::with_template("{label}[{wide_bar}]{tail}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key("label", label_key)
        .with_key("tail", tail_key)
        .progress_chars("=> ");
    bar.set_style(style);
    set_message(bar, message);
    let screen = Screen {
        terminal,
        frame: Mutex::new(Vec::new()),
    };
    bar.set_draw_target(ProgressDrawTarget::term_like_with_hz(Box::new(screen), 5));
    bar.enable_steady_tick(TICK);
    restart_eta_after_stalls(bar, || std::thread::sleep(TICK));
}

/// How often a drawn bar is drawn again, moving or not, and looked at for a
/// stall.
const TICK: Duration = Duration::from_millis(200);

/// A look that comes this late finds a process that did not run meanwhile:
/// stopped (Ctrl-Z until `fg`), or starved of a CPU.
const STALLED: Duration = Duration::from_secs(1);

/// Start `bar`'s estimate anew after a stall, looking every `pause` (a
/// [`TICK`]) from a thread of its own until the bar is finished or dropped:
/// the rate across a stop says nothing of the work left, and the eta shown
/// after `fg` would count the stopped time. The thread blocks the signals
/// the process handles, which its other threads take.
fn restart_eta_after_stalls(bar: &ProgressBar, pause: impl Fn() + Send + 'static) {
    let weak = bar.downgrade();
    let watcher = std::thread::Builder::new()
        .name("progress-stalls".into())
        .spawn(move || {
            let _ = handled_signals().thread_block();
            loop {
                let started = Instant::now();
                pause();
                let Some(bar) = weak.upgrade().filter(|b| !b.is_finished()) else {
                    break;
                };
                if started.elapsed() >= STALLED {
                    bar.reset_eta();
                    *lock(&ETA_RESTARTED) = Some(Instant::now());
                }
            }
        });
    // Without the thread, an estimate keeps the stopped time.
    drop(watcher);
}

/// When a bar's estimate last started anew after a stall
/// ([`restart_eta_after_stalls`]); an eta waits [`ETA_AFTER`] from then too.
static ETA_RESTARTED: Mutex<Option<Instant>> = Mutex::new(None);

/// How long the estimate of a bar `elapsed` into its work has run: since
/// the bar started, or since the estimate started anew after a stall.
fn estimate_age(elapsed: Duration) -> Duration {
    lock(&ETA_RESTARTED).map_or(elapsed, |at| elapsed.min(at.elapsed()))
}

/// Time and share of the work after which an estimate means something: the
/// first seconds of a merge read the plan, and their rate says nothing of
/// the rest.
const ETA_AFTER: Duration = Duration::from_secs(5);
const ETA_AFTER_SHARE: f64 = 0.05;

/// " eta 3m" for a bar at `pos` of `len` after `elapsed`, or nothing while
/// an estimate would mean nothing (too early, done, none made yet, or under
/// a second).
fn eta_text(elapsed: Duration, pos: u64, len: u64, eta: Duration) -> Option<String> {
    // Under a second: no estimate yet (none is 0: just started, or started
    // anew), or the last moments, where "eta 0s" would read as done.
    let meaningful = elapsed >= ETA_AFTER
        && (ETA_AFTER_SHARE..1.0).contains(&share(pos, len))
        && eta >= Duration::from_secs(1);
    meaningful.then(|| format!(" eta {:#}", HumanDuration(eta)))
}

/// A bar's label in at most `width` characters, keeping what names the
/// work: a detail in parentheses at its end goes first ("merging op 12 (9
/// blobs)" becomes "merging op 12"), then the middle of what follows the
/// first word ("indexing NAME" keeps "indexing " and both ends of NAME),
/// and on a line too narrow even for that, the end.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    if let Some(at) = text.rfind(" (").filter(|_| text.ends_with(')')) {
        return fit(&text[..at], width);
    }
    let elided = match text.split_once(' ') {
        Some((verb, rest)) if verb.chars().count() + 1 + 5 <= width => {
            format!("{verb} {}", elide(rest, width - verb.chars().count() - 1))
        }
        _ => elide(text, width),
    };
    elided.chars().take(width).collect()
}

/// `text` fitted to `width` columns and filled to them with spaces, so the
/// bar after it keeps its place and width whatever the label says.
fn padded(text: &str, width: usize) -> String {
    format!("{:<width$}", fit(text, width))
}

/// `text` in at most `width` characters, the middle replaced by `...`.
fn elide(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width || width < 5 {
        return text.to_owned();
    }
    let keep = width - 3;
    let head: String = text.chars().take(keep / 2).collect();
    let tail: String = text.chars().skip(n - (keep - keep / 2)).collect();
    format!("{head}...{tail}")
}

/// The one progress line of a pipeline on stderr. Every stage of a pipeline
/// shares stderr, so two bars drawn there would overwrite each other's line.
/// A process draws only while it holds an exclusive `flock` on stderr's file
/// (opened anew, so the lock is this process's and not the shared open
/// file's); it takes the lock at its first draw and keeps it until it exits.
/// A process that cannot have it draws nothing and tries again at its next
/// draw, so the line passes from stage to stage as each ends (or hands it
/// back, [`release_line`]). Each frame is
/// one write, so a diagnostic line (which clears the line first, see
/// [`crate::warn`]) never lands inside one. Where the lock cannot be taken
/// at all (a file system without `flock`), the process draws regardless, as
/// a lone tool would.
#[derive(Debug)]
struct Screen {
    terminal: bool,
    frame: Mutex<Vec<u8>>,
}

/// Whether this process holds the progress line: `None` until it first
/// asks.
static LINE: Mutex<Option<Line>> = Mutex::new(None);

#[derive(Debug)]
enum Line {
    /// The lock is ours until the process exits (dropping it would
    /// release it).
    Held(#[allow(dead_code)] nix::fcntl::Flock<std::fs::File>),
    /// Another process has it.
    Busy,
    /// No lock can be had here: draw.
    Unlockable,
}

impl Screen {
    /// Whether this process may draw now (see [`Screen`]).
    /// The first time it does on a terminal, a signal that ends the
    /// process from then on clears the line, so no stale bar stays there.
    fn owns_line(&self) -> bool {
        let ours = |line: &Option<Line>| matches!(line, Some(Line::Held(_) | Line::Unlockable));
        let mut line = lock(&LINE);
        if !ours(&line) {
            *line = Some(take_line());
            if self.terminal && ours(&line) {
                clear_line_on_signal(io::stderr().as_fd(), job_pgrp());
            }
        }
        ours(&line)
    }

    fn put(&self, s: &str) -> io::Result<()> {
        lock(&self.frame).extend_from_slice(s.as_bytes());
        Ok(())
    }

    /// Move the cursor `n` cells in the direction of CSI code `dir`.
    fn cursor(&self, n: usize, dir: char) -> io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}{dir}"))?;
        }
        Ok(())
    }
}

/// Hand the progress line back (see [`Screen`]) once this process's bar is
/// finished and cleared, for a process it waits for to draw there (pbf-copy
/// waits for its `--check-cmd`). A bar drawn later asks for the line anew.
pub fn release_line() {
    let mut line = lock(&LINE);
    if matches!(*line, Some(Line::Held(_))) {
        // Dropping the lock releases it.
        *line = None;
    }
}

/// Environment variable that names the process group of a process's job
/// where the process runs in a group of its own (pbf-copy's `--check-cmd`):
/// the terminal's foreground group is then the job's, not the process's.
pub const JOB_PGRP_ENV: &str = "PBF_SORT_JOB_PGRP";

/// The process group of this process's job: [`JOB_PGRP_ENV`] where set,
/// else its own.
pub fn job_pgrp() -> nix::unistd::Pid {
    env_pid(JOB_PGRP_ENV).unwrap_or_else(nix::unistd::getpgrp)
}

/// The process (or process group) id that the environment variable `name`
/// holds, if it holds one.
pub(crate) fn env_pid(name: &str) -> Option<nix::unistd::Pid> {
    let pid = std::env::var(name).ok()?.parse::<i32>().ok()?;
    (pid > 0).then(|| nix::unistd::Pid::from_raw(pid))
}

/// Whether this process's job is in the foreground of the terminal on
/// stderr: a job in the background draws no bar and clears no line, for
/// the line is the shell's prompt (and under `stty tostop` the write would
/// stop the job). A terminal that is not the controlling one has no
/// foreground group to ask about: true.
pub(crate) fn in_foreground() -> bool {
    nix::unistd::tcgetpgrp(io::stderr().as_fd()).map_or(true, |fg| fg == job_pgrp())
}

/// Try for the exclusive lock on stderr's file (see [`Screen`]).
fn take_line() -> Line {
    use nix::fcntl::{Flock, FlockArg};
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NOCTTY)
        .open("/proc/self/fd/2");
    let Ok(file) = opened else {
        return Line::Unlockable;
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Line::Held(lock),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Line::Busy,
        Err(_) => Line::Unlockable,
    }
}

impl TermLike for Screen {
    /// Three columns short of the terminal's (at least [`MIN_LINE`]; see
    /// `flush` for narrower lines), read anew for every frame
    /// (and kept for the frame's layout, [`LINE_COLS`]): a line that fills
    /// the last column leaves some terminals waiting to wrap, and the
    /// terminal's echo of Ctrl-C (`^C`) must fit beside the bar, or it
    /// wraps onto a new line and the line that is cleared after the
    /// interrupt is not the bar's.
    fn width(&self) -> u16 {
        let width = if self.terminal {
            console::Term::stderr().size().1
        } else {
            std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.parse().ok())
                .filter(|&w| w >= 20)
                .unwrap_or(80)
        };
        let width = width.saturating_sub(3);
        LINE_COLS.store(usize::from(width), Ordering::Relaxed);
        width.max(MIN_LINE)
    }

    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        self.cursor(n, 'A')
    }

    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        self.cursor(n, 'B')
    }

    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        self.cursor(n, 'C')
    }

    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        self.cursor(n, 'D')
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.put(&format!("{s}\n"))
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        self.put(s)
    }

    fn clear_line(&self) -> io::Result<()> {
        self.put(CLEAR_LINE)
    }

    /// The end of a frame: written in one piece if the line is ours.
    fn flush(&self) -> io::Result<()> {
        let frame = std::mem::take(&mut *lock(&self.frame));
        // A signal's handler clears the line as the process dies: nothing
        // more is drawn there, and a frame that crossed the handler's clear
        // is cleared again.
        let background = self.terminal && !in_foreground();
        if frame.is_empty() || signalled() || background || !self.owns_line() {
            return Ok(());
        }
        let mut err = io::stderr().lock();
        // A line too narrow for any bar: the bar would wrap, a row a frame.
        let too_narrow = LINE_COLS.load(Ordering::Relaxed) < usize::from(MIN_LINE);
        err.write_all(if too_narrow {
            CLEAR_LINE.as_bytes()
        } else {
            &frame
        })?;
        if signalled() {
            err.write_all(CLEAR_LINE.as_bytes())?;
        }
        err.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> Command {
        let help = VerbosityHelp {
            verbose: "v",
            quiet: "q",
        };
        progress_args(verbosity_args(Command::new("t"), help))
    }

    fn bars(args: &[&str]) -> Bars {
        let m = cmd().try_get_matches_from(args).expect("parse");
        Bars::from_matches(&m)
    }

    #[test]
    fn quiet_and_verbose_exclude_each_other() {
        let e = cmd()
            .try_get_matches_from(["t", "-q", "-v"])
            .expect_err("conflict");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn progress_flags_and_quiet_decide_the_bars() {
        assert_eq!(bars(&["t"]), Bars::Auto);
        assert_eq!(bars(&["t", "-q"]), Bars::Never);
        assert_eq!(bars(&["t", "--no-progress"]), Bars::Never);
        assert_eq!(bars(&["t", "-q", "--progress"]), Bars::Always);
        assert_eq!(bars(&["t", "--progress", "--no-progress"]), Bars::Never);
        assert_eq!(bars(&["t", "--no-progress", "--progress"]), Bars::Always);
    }

    #[test]
    fn bars_fit_narrow_lines() {
        // The widest text besides the bar: label, brackets, tail.
        for width in usize::from(MIN_LINE)..=200 {
            let (tail, label) = layout(width);
            let text = label + usize::from(label > 0) + 2 + tail.columns();
            assert!(text + MIN_BAR <= width, "{width}: {tail:?} {label}");
            assert!(label <= MESSAGE_WIDTH);
        }
        assert_eq!(layout(77), (Tail::CountsEta, MESSAGE_WIDTH), "80 columns");
        // A 40-column terminal (37 drawn): the percentage, and room for
        // "merging op 12 (34 blobs)".
        assert_eq!(layout(37), (Tail::Percent, 24));
        assert_eq!(layout(19), (Tail::Percent, 0));
    }

    #[test]
    fn tails_say_counts_eta_or_share() {
        let (mib, s) = (1 << 20, Duration::from_secs);
        let text = |tail| tail_text(tail, 3 * mib, 10 * mib, s(10), s(25));
        assert_eq!(text(Tail::CountsEta), " 3.00 MiB/10.00 MiB eta 25s");
        assert_eq!(text(Tail::Counts), " 3.00 MiB/10.00 MiB");
        assert_eq!(text(Tail::Percent), "  30%");
        assert_eq!(tail_text(Tail::Percent, 0, 0, s(0), s(0)), "   0%");
    }

    #[test]
    fn labels_fill_their_columns() {
        assert_eq!(padded("merging op 2", 16), "merging op 2    ");
        assert_eq!(padded("merging op 2 (40 blobs)", 16), "merging op 2    ");
        assert_eq!(
            padded("merging op 2 (40 blobs)", 23),
            "merging op 2 (40 blobs)"
        );
    }

    #[test]
    fn labels_keep_what_names_the_work() {
        assert_eq!(
            fit("merging op 12 (1234 blobs)", 28),
            "merging op 12 (1234 blobs)"
        );
        assert_eq!(fit("merging op 12 (1234 blobs)", 24), "merging op 12");
        assert_eq!(fit("merged 1234 ops (56789 blobs)", 24), "merged 1234 ops");
        let name = "indexing a-rather-long-extract-of-kualalumpur.osm.pbf";
        let e = fit(name, 24);
        assert_eq!(e.chars().count(), 24);
        assert!(
            e.starts_with("indexing a-rath") && e.ends_with("m.pbf"),
            "{e}"
        );
        assert!(e.contains("..."), "{e}");
        for width in 0..60 {
            for text in [name, "merging op 123456789 (2 blobs)", "copying"] {
                assert!(
                    fit(text, width).chars().count() <= width,
                    "{text} in {width}"
                );
            }
        }
    }

    #[test]
    fn a_stall_starts_the_estimate_anew_and_a_tick_does_not() {
        let moved = |stall: Duration| {
            let bar = ProgressBar::hidden();
            bar.set_length(1000);
            for i in 1..=10 {
                bar.set_position(i * 10);
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(!bar.eta().is_zero(), "an estimate before the stall");
            let first = std::sync::atomic::AtomicBool::new(true);
            restart_eta_after_stalls(&bar, move || {
                let pause = if first.swap(false, Ordering::SeqCst) {
                    stall
                } else {
                    TICK
                };
                std::thread::sleep(pause);
            });
            std::thread::sleep(stall + 3 * TICK);
            let eta = bar.eta();
            bar.finish();
            eta
        };
        assert!(moved(STALLED + TICK).is_zero(), "not started anew");
        let minute = Duration::from_secs(60);
        assert!(estimate_age(minute) < ETA_AFTER, "no eta waits again");
        assert!(!moved(TICK).is_zero(), "started anew without a stall");
    }

    #[test]
    fn an_eta_shows_once_it_means_something() {
        let s = Duration::from_secs;
        let eta = s(600);
        assert_eq!(eta_text(s(1), 50, 100, eta), None, "too early");
        assert_eq!(eta_text(s(60), 1, 100, eta), None, "too little done");
        assert_eq!(eta_text(s(60), 100, 100, eta), None, "done");
        assert_eq!(eta_text(s(60), 0, 0, eta), None, "nothing to do");
        assert_eq!(eta_text(s(60), 50, 100, s(0)), None, "no estimate yet");
        let last = Duration::from_millis(900);
        assert_eq!(eta_text(s(60), 99, 100, last), None, "under a second");
        assert_eq!(eta_text(s(60), 99, 100, s(1)).as_deref(), Some(" eta 1s"));
        let text = eta_text(s(5), 5, 100, eta).expect("an eta");
        assert_eq!(text, " eta 10m");
        assert!(text.len() <= 8, "the layout leaves 8 columns: {text:?}");
    }

    #[test]
    fn long_messages_are_elided_in_the_middle() {
        assert_eq!(elide("merging", 28), "merging");
        let e = elide("indexing /a/very/long/path/to/some/extract.osm.pbf", 28);
        assert_eq!(e.chars().count(), 28);
        assert!(
            e.starts_with("indexing /a/") && e.ends_with("tract.osm.pbf"),
            "{e}"
        );
    }
}
