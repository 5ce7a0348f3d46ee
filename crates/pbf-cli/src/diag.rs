//! One rule for diagnostics in every tool: `-v` and `-q` exclude each other
//! (exit 2, as in the driver); progress bars appear only when stderr is a
//! terminal, unless `--progress` forces one (drawn with plain ANSI escapes,
//! at `$COLUMNS` or 80 columns) or `--no-progress` or `-q` turns them off.
//! A bar fits its line: the message is elided, and the bar takes what is left.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

/// The help texts of `-v` and `-q`, which differ from tool to tool.
#[derive(Clone, Copy, Debug)]
pub struct VerbosityHelp {
    /// `-v/--verbose`.
    pub verbose: &'static str,
    /// `-q/--quiet`.
    pub quiet: &'static str,
}

/// Add `-v/--verbose` and `-q/--quiet`, which exclude each other.
pub fn verbosity_args(cmd: Command, help: VerbosityHelp) -> Command {
    cmd.arg(
        Arg::new("verbose")
            .short('v')
            .long("verbose")
            .help(help.verbose)
            .action(ArgAction::SetTrue),
    )
    .arg(
        Arg::new("quiet")
            .short('q')
            .long("quiet")
            .help(help.quiet)
            .conflicts_with("verbose")
            .action(ArgAction::SetTrue),
    )
}

/// Add `--progress` and `--no-progress` (the last one given wins).
pub fn progress_args(cmd: Command) -> Command {
    cmd.arg(
        Arg::new("progress")
            .long("progress")
            .help("Draw a progress bar on stderr even when it is not a terminal (or under -q)")
            .overrides_with("no-progress")
            .action(ArgAction::SetTrue),
    )
    .arg(
        Arg::new("no-progress")
            .long("no-progress")
            .help("Draw no progress bar, even on a terminal")
            .overrides_with("progress")
            .action(ArgAction::SetTrue),
    )
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
        let flag = |id: &str| m.try_get_one::<bool>(id).ok().flatten() == Some(&true);
        if flag("progress") {
            Bars::Always
        } else if flag("no-progress") || flag("quiet") {
            Bars::Never
        } else {
            Bars::Auto
        }
    }

    /// Never when `hide` (another stage draws), else as it is.
    pub fn unless(self, hide: bool) -> Bars {
        if hide { Bars::Never } else { self }
    }
}

/// Widest message before the bar; longer ones are elided in the middle.
const MESSAGE_WIDTH: usize = 28;

/// The message width of the bar drawn last (see [`layout`]), for
/// [`set_message`].
static MESSAGE_COLS: AtomicUsize = AtomicUsize::new(MESSAGE_WIDTH);

/// Change a bar's message, elided to the width its line leaves it.
pub fn set_message(bar: &ProgressBar, text: &str) {
    bar.set_message(elide(text, MESSAGE_COLS.load(Ordering::Relaxed)));
}

/// The template of a bar that fits `width` columns, and the width its
/// message gets (0: no message). The byte counts take up to 21 columns
/// ("298.65 MiB/954.85 MiB"), the eta 8, brackets and spaces 4, and the bar
/// itself at least 8; on narrower lines the eta goes, then the message.
fn layout(width: usize) -> (&'static str, usize) {
    const FIXED: usize = 21 + 4 + 8;
    const MIN_MESSAGE: usize = 10;
    if width >= FIXED + 8 + MIN_MESSAGE {
        let msg = MESSAGE_WIDTH.min(width - FIXED - 8);
        ("{msg} [{wide_bar}] {bytes}/{total_bytes} eta {eta}", msg)
    } else if width >= FIXED + MIN_MESSAGE {
        ("{msg} [{wide_bar}] {bytes}/{total_bytes}", width - FIXED)
    } else {
        ("[{wide_bar}] {bytes}/{total_bytes}", 0)
    }
}

/// A byte-count progress bar on stderr as `bars` says; otherwise a hidden
/// bar that costs nothing.
pub fn progress(total_bytes: u64, message: &str, bars: Bars) -> ProgressBar {
    let terminal = io::stderr().is_terminal();
    let (target, width) = match bars {
        Bars::Never => return ProgressBar::hidden(),
        Bars::Auto if !terminal => return ProgressBar::hidden(),
        Bars::Auto | Bars::Always if terminal => {
            let width = console::Term::stderr().size().1;
            (ProgressDrawTarget::stderr(), width)
        }
        Bars::Auto | Bars::Always => {
            let width = PlainStderr.width();
            (
                ProgressDrawTarget::term_like_with_hz(Box::new(PlainStderr), 5),
                width,
            )
        }
    };
    let bar = ProgressBar::with_draw_target(Some(total_bytes), target);
    let (template, message_width) = layout(usize::from(width));
    MESSAGE_COLS.store(message_width, Ordering::Relaxed);
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(elide(message, message_width));
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// `text` in at most `width` characters, the middle replaced by `...`.
pub fn elide(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width || width < 5 {
        return text.to_owned();
    }
    let keep = width - 3;
    let head: String = text.chars().take(keep / 2).collect();
    let tail: String = text.chars().skip(n - (keep - keep / 2)).collect();
    format!("{head}...{tail}")
}

/// Stderr that is not a terminal, for `--progress`: ANSI escapes, and the
/// width from `$COLUMNS` (80 when unset).
#[derive(Debug)]
struct PlainStderr;

impl PlainStderr {
    fn put(&self, s: &str) -> io::Result<()> {
        io::stderr().lock().write_all(s.as_bytes())
    }

    /// Move the cursor `n` cells in the direction of CSI code `dir`.
    fn cursor(&self, n: usize, dir: char) -> io::Result<()> {
        if n == 0 {
            Ok(())
        } else {
            self.put(&format!("\x1b[{n}{dir}"))
        }
    }
}

impl TermLike for PlainStderr {
    fn width(&self) -> u16 {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse().ok())
            .filter(|&w| w >= 20)
            .unwrap_or(80)
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
        self.put("\r\x1b[2K")
    }

    fn flush(&self) -> io::Result<()> {
        io::stderr().flush()
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
        assert_eq!(Bars::Always.unless(true), Bars::Never);
    }

    #[test]
    fn bars_fit_narrow_lines() {
        // The widest text besides the bar: message, byte counts, eta.
        for width in [20, 40, 43, 50, 51, 60, 80, 200] {
            let (template, msg) = layout(width);
            let eta = if template.contains("{eta}") { 8 } else { 0 };
            let text = msg + 21 + 4 + eta;
            assert!(text + 8 <= width.max(33), "{width}: {template} {msg}");
            assert!(msg <= MESSAGE_WIDTH);
        }
        assert_eq!(layout(80).1, MESSAGE_WIDTH);
        assert!(
            layout(50).0.contains("{msg}"),
            "a 50-column line keeps the message"
        );
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
