//! What a user sees in a real terminal: the driver runs in a pseudo-terminal
//! of 40 or 80 columns, wider where only a message is asserted (its stdin,
//! stdout and stderr, and its controlling terminal, as in a shell), and what the stages drew there is rendered by a
//! terminal emulator (`vt100`). Asserted on every rendered state of the
//! screen while the run goes on: at most one progress bar, no line wrapped;
//! and on the screen once the run has ended: no bar left, the error line of
//! a failure present. A merge-heavy input must show a bar that moves. The
//! bars' bytes as drawn, read under `script(1)`, are in [`bars`].

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::util::commands::{bin_quoted, pbf_sort, wait_at_most};
use crate::util::files::{concat, data};

mod bars;

/// Rows of the pseudo-terminal.
const ROWS: u16 = 24;

/// What a run drew: every state of the screen, and how it ended.
struct Drawn {
    /// The screen's rows after each piece of output arrived.
    screens: Vec<Vec<String>>,
    /// Whether any state showed a bar wrapped onto a second row (a bar
    /// longer than the terminal's width).
    wrapped: bool,
    /// The first state drawn after the terminal was narrowed.
    narrowed_at: Option<usize>,
    status: ExitStatus,
}

impl Drawn {
    fn last(&self) -> &[String] {
        self.screens.last().map_or(&[], |s| s.as_slice())
    }

    /// The most bars any one state of the screen showed.
    fn most_bars(&self) -> usize {
        self.screens
            .iter()
            .map(|s| s.iter().filter(|r| is_bar(r)).count())
            .max()
            .unwrap_or(0)
    }

    /// The distinct bar rows drawn, in order.
    fn bars(&self) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for row in self.screens.iter().flatten().filter(|r| is_bar(r)) {
            if seen.last() != Some(row) {
                seen.push(row.clone());
            }
        }
        seen
    }

    fn show(&self) -> String {
        self.last().join("\n")
    }
}

/// A progress bar's row: brackets around the bar, then counts.
fn is_bar(row: &str) -> bool {
    let (Some(open), Some(close)) = (row.find('['), row.rfind(']')) else {
        return false;
    };
    open < close
        && row[open + 1..close]
            .chars()
            .all(|c| matches!(c, '=' | '>' | ' '))
        && (row.ends_with('%') || row.contains("B/") || row.contains(" eta "))
}

/// What the user does once a bar is on the screen.
#[derive(Clone, Copy, PartialEq)]
enum Then {
    /// Nothing: the run ends by itself.
    Watch,
    /// Types Ctrl-C.
    CtrlC,
    /// Makes the window this many columns wide, once the bar is the merge's
    /// (a stage whose bar goes on after the change).
    Narrow(u16),
    /// Types Ctrl-Z once a bar with this label is drawn.
    Suspend(&'static str),
}

/// Run `cmd` with a new pseudo-terminal of `cols` columns as its controlling
/// terminal and standard streams; once a bar is on the screen, the user does
/// what `then` says. The run must end within two minutes.
fn in_terminal(mut cmd: Command, mut cols: u16, then: Then) -> Drawn {
    let size = nix::pty::Winsize {
        ws_row: ROWS,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).expect("openpty");
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the terminal"));
    cmd.stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave))
        .env("TERM", "xterm")
        .env_remove("COLUMNS");
    // A process group and controlling terminal of its own (setsid), so
    // Ctrl-C reaches the driver and its stages as a shell's job.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            nix::unistd::setsid()?;
            if nix::libc::ioctl(0, nix::libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("start the driver");
    // The command holds copies of the terminal: only once every one is
    // closed does reading the master end.
    drop(cmd);
    drop(pty.slave);
    let master = std::fs::File::from(pty.master);
    let mut typist = master.try_clone().expect("dup the master");
    let window = master.try_clone().expect("dup the master");
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut buf = [0u8; 4096];
        // Read until every holder of the terminal has closed it (EIO).
        while let Ok(n @ 1..) = master.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut parser = vt100::Parser::new(
        ROWS.try_into().expect("rows"),
        cols.try_into().expect("cols"),
        0,
    );
    let mut drawn = Drawn {
        screens: Vec::new(),
        wrapped: false,
        narrowed_at: None,
        status: ExitStatus::default(),
    };
    let (mut typed, mut settled) = (false, true);
    let deadline = Instant::now() + Duration::from_secs(120);
    while let Ok(bytes) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        parser.process(&bytes);
        let screen = parser.screen();
        let rows: Vec<String> = screen.rows(0, cols).collect();
        // Frames drawn for the old width may still be on their way after
        // a narrowing: a wrap counts once a bar that fits has arrived.
        settled |= rows
            .iter()
            .any(|r| is_bar(r) && r.chars().count() < usize::from(cols));
        // A message may wrap as any text does; a bar must fit its line.
        drawn.wrapped |= settled
            && (1..ROWS).any(|r| {
                let (above, row) = (&rows[usize::from(r - 1)], &rows[usize::from(r)]);
                screen.row_wrapped(r - 1) && is_bar(&format!("{above}{row}"))
            });
        let cue = rows.iter().any(|r| match then {
            Then::Narrow(_) => is_bar(r) && names_a_merge_op(label(r)),
            Then::Suspend(wanted) => is_bar(r) && label(r) == wanted,
            _ => is_bar(r),
        });
        drawn.screens.push(rows);
        if typed || !cue {
            continue;
        }
        typed = true;
        match then {
            Then::Watch => {}
            Then::CtrlC => {
                use std::io::Write;
                typist.write_all(b"\x03").expect("type Ctrl-C");
            }
            Then::Suspend(_) => {
                use std::io::Write;
                typist.write_all(b"\x1a").expect("type Ctrl-Z");
            }
            Then::Narrow(narrow) => {
                resize(&window, narrow);
                parser.set_size(
                    ROWS.try_into().expect("rows"),
                    narrow.try_into().expect("cols"),
                );
                cols = narrow;
                drawn.narrowed_at = Some(drawn.screens.len());
                settled = false;
            }
        }
    }
    drawn.status = wait_at_most(&mut child, Duration::from_secs(10));
    reader.join().expect("reader");
    drawn
}

/// Make the terminal of `master` `cols` columns wide, as a window resized
/// by its user (the kernel tells the terminal's foreground processes).
fn resize(master: &std::fs::File, cols: u16) {
    use std::os::fd::AsRawFd;
    let size = nix::pty::Winsize {
        ws_row: ROWS,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one Winsize, which lives on our stack.
    let set = unsafe { nix::libc::ioctl(master.as_raw_fd(), nix::libc::TIOCSWINSZ, &size) };
    assert_eq!(set, 0, "TIOCSWINSZ: {}", std::io::Error::last_os_error());
}

/// `copies` copies of kualalumpur's blobs in one file: every key in every
/// copy, so each blob overlaps its copies and the whole file is merged.
fn repeated(dir: &Path, copies: usize) -> PathBuf {
    let out = dir.join("repeated.osm.pbf");
    concat(&vec![data("sorted-kualalumpur.osm.pbf"); copies], &out);
    out
}

/// The final screen holds no bar and no line a finished stage drew.
fn assert_clean(d: &Drawn, what: &str) {
    assert!(
        !d.last().iter().any(|r| is_bar(r)),
        "{what}: a bar is left on the screen:\n{}",
        d.show()
    );
    assert!(!d.wrapped, "{what}: a bar wrapped:\n{}", d.show());
    assert!(
        d.most_bars() <= 1,
        "{what}: two bars at once on the screen (bars drawn: {:?})",
        d.bars()
    );
}

/// The label of a bar row: what comes before its ` [`, without the spaces
/// that fill its columns.
fn label(bar: &str) -> &str {
    bar.find(" [").map_or("", |at| bar[..at].trim_end())
}

/// A label that names what a merge op merges: "merging B blob(s)...", its
/// number in parentheses where the bar has room ("merging 9 blobs (op 2)").
fn names_a_merge_op(label: &str) -> bool {
    label.strip_prefix("merging ").is_some_and(|rest| {
        let (n, noun) = rest.split_once(' ').unwrap_or((rest, ""));
        n.parse::<u64>().is_ok() && noun.starts_with("blob")
    })
}

#[test]
fn a_merge_shows_one_moving_bar_and_leaves_a_clean_screen() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A name longer than any label leaves room for: its middle is elided.
    let input = dir.path().join("kualalumpur-repeated-eight-times.osm.pbf");
    std::fs::rename(repeated(dir.path(), 8), &input).expect("rename");
    for cols in [40, 80] {
        let out = dir.path().join(format!("out-{cols}.osm.pbf"));
        let mut cmd = pbf_sort();
        cmd.arg(&input).arg("-o").arg(&out);
        let d = in_terminal(cmd, cols, Then::Watch);
        assert!(
            d.status.success(),
            "{cols} columns: {:?}\n{}",
            d.status,
            d.show()
        );
        assert_clean(&d, &format!("merge at {cols} columns"));
        let bars = d.bars();
        assert!(
            bars.len() >= 2,
            "{cols} columns: no moving bar was drawn: {bars:?}"
        );
        assert!(
            bars.iter().any(|b| names_a_merge_op(label(b))),
            "{cols} columns: no bar named the merge op: {bars:?}"
        );
        // Every label names its work: a merge op by what it merges, an input by
        // both ends of its name.
        for b in &bars {
            let l = label(b);
            assert!(
                !l.is_empty(),
                "{cols} columns: a bar without its label: {b:?}"
            );
            if l.starts_with("merging") {
                assert!(names_a_merge_op(l), "{cols} columns: {b:?}");
            }
            if let Some(name) = l.strip_prefix("indexing ") {
                assert!(
                    name.starts_with("kualal") && name.contains("...") && name.ends_with("m.pbf"),
                    "{cols} columns: the input's name is lost: {b:?}"
                );
            }
        }
        assert!(
            bars.iter()
                .all(|b| b.chars().count() + 3 <= usize::from(cols)),
            "{cols} columns: a bar leaves no room for the echo of Ctrl-C: {bars:?}"
        );
        assert!(out.exists(), "{cols} columns: no output");
    }
}

/// Under `--check`, the decode of the finished output draws its bar, named
/// by the output, once the copier's bar is gone, also where the terminal
/// stops background writers; the screen ends clean with the check's verdict.
#[test]
fn the_check_draws_its_bar() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = repeated(dir.path(), 16);
    let out = dir.path().join("checked.osm.pbf");
    // With `stty tostop`, a process outside the terminal's foreground
    // process group that writes there is stopped: the check, in its own
    // group, must write nonetheless.
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "stty tostop && exec \"$0\" -v --check \"$1\" -o \"$2\"",
    ])
    .arg(pbf_sort().get_program())
    .arg(&input)
    .arg(&out)
    .env("PATH", crate::util::commands::tools_path());
    let d = in_terminal(cmd, 80, Then::Watch);
    assert!(d.status.success(), "{:?}\n{}", d.status, d.show());
    assert_clean(&d, "--check");
    let bars = d.bars();
    assert!(
        bars.iter().any(|b| label(b) == "indexing checked.osm.pbf"),
        "no bar for the check: {bars:?}"
    );
    // The verdict names the files by their paths, which may wrap: its rows
    // joined as they were drawn.
    assert!(
        d.last()
            .concat()
            .contains("checked.osm.pbf holds the objects of"),
        "{}",
        d.show()
    );
}

/// A run that a shell with job control starts in the background (`&`)
/// draws no bar and clears no line, for the line is the shell's prompt;
/// with `stty tostop` set, any such write would stop the job, so its
/// success says none was made. Its `--check`, in a process group of its
/// own, draws none either, and a passing check says nothing unasked (the
/// verdict is `-v`'s, and `-v`'s lines would stop the job as any write to
/// the terminal does). The same run in the foreground of the same shell
/// draws its bars, and with `-v` says the verdict.
#[test]
fn a_job_in_the_background_draws_no_bar() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = repeated(dir.path(), 16);
    let run = |out: &str, how: &str| {
        // --dedupe: the copies' objects once, so the run has nothing to
        // warn of (a warning would stop a background job under tostop).
        let script = format!("stty tostop; set -m; \"$0\" --dedupe --check \"$1\" -o \"$2\" {how}");
        let mut cmd = Command::new("bash");
        cmd.args(["-c", &script])
            .arg(pbf_sort().get_program())
            .arg(&input)
            .arg(dir.path().join(out))
            .env("PATH", crate::util::commands::tools_path());
        in_terminal(cmd, 80, Then::Watch)
    };
    // What the check's index says of the output under -v.
    let verdict = |d: &Drawn, out: &str| {
        let said = d.last().concat();
        said.contains("pbf-index: ") && said.contains(&format!("/{out}: "))
    };
    let back = run("back.osm.pbf", "& wait $!");
    assert!(back.status.success(), "{:?}\n{}", back.status, back.show());
    assert_eq!(
        back.most_bars(),
        0,
        "drawn in the background: {:?}",
        back.bars()
    );
    assert!(!verdict(&back, "back.osm.pbf"), "{}", back.show());
    let front = run("front.osm.pbf", "-v");
    assert!(
        front.status.success(),
        "{:?}\n{}",
        front.status,
        front.show()
    );
    assert_clean(&front, "in the foreground");
    assert!(front.bars().len() > 1, "no bars in the foreground");
    assert!(verdict(&front, "front.osm.pbf"), "{}", front.show());
}

/// Ctrl-Z while `--check` reads the output back stops the whole run, the
/// check too, though it runs in a process group of its own that the
/// terminal's Ctrl-Z does not reach; `fg` continues it to its verdict.
#[test]
fn ctrl_z_during_the_check_stops_the_check_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = repeated(dir.path(), 16);
    // The check's processes name the output after `--given` (its shell
    // too, in its command), and so does pbf-copy's --check-cmd; read from
    // /proc (no ps in the Nix build sandbox), leaving out this shell, whose
    // command holds the pattern. The shell says "Stopped" once the driver
    // stops; a process of the check that was waiting for a CPU or a disk
    // stops when it next runs, so the count is taken again for up to ten
    // seconds before one still going is a failure (a check that is never
    // stopped ends in that time, and its verdict then comes first).
    let script = r#"set -m
"$0" -v --check "$1" -o "$2"
echo "stopped: $?"
count() {
    n=0 going=0 states=
    for d in /proc/[0-9]*; do
        [[ ${d#/proc/} != "$$" ]] && mapfile -d '' -t argv 2>/dev/null < "$d/cmdline" || continue
        [[ " ${argv[*]} " == *" --given "* ]] && stat=$(< "$d/stat") || continue
        state=${stat##*) } && n=$((n + 1))
        [[ $state == T* ]] || { going=$((going + 1)); states+=" ${argv[0]##*/}:${state%% *}"; }
    done
}
for _ in {1..50}; do count; ((going == 0)) && break; sleep 0.2; done
echo "check processes: $n going: $going$states"
fg >/dev/null
echo "ended: $?""#;
    let mut cmd = Command::new("bash");
    cmd.args(["-c", script])
        .arg(pbf_sort().get_program())
        .arg(&input)
        .arg(dir.path().join("checked.osm.pbf"))
        .env("PATH", crate::util::commands::tools_path());
    let d = in_terminal(cmd, 80, Then::Suspend("indexing checked.osm.pbf"));
    assert!(d.status.success(), "{:?}\n{}", d.status, d.show());
    let screen = d.last().concat();
    for said in [
        "stopped: 148",
        "going: 0",
        "ended: 0",
        "holds the objects of",
    ] {
        assert!(screen.contains(said), "no {said:?}:\n{}", d.show());
    }
    // pbf-copy names `--given` in its --check-cmd: more than it is the check.
    assert!(
        !screen.contains("check processes: 0") && !screen.contains("check processes: 1 "),
        "no check was running:\n{}",
        d.show()
    );
    // The check said its verdict only once continued.
    let at = |said: &str| screen.find(said).unwrap_or(0);
    assert!(
        at("holds the objects of") > at("check processes:"),
        "the check went on while the run was stopped:\n{}",
        d.show()
    );
    // The bar drawn when Ctrl-Z came stays above the shell's "Stopped", as
    // what any stopped job drew does; after `fg` the check draws again, and
    // clears its bar at its end.
    let last = d.last();
    let stopped = last.iter().position(|r| r.contains("Stopped"));
    let below = &last[stopped.map_or(0, |at| at + 1)..];
    assert!(!below.iter().any(|r| is_bar(r)), "{}", d.show());
    assert!(!d.wrapped, "a bar wrapped:\n{}", d.show());
}

/// A window made narrower while the merge draws its bar: the merge's next
/// frames are laid out for the new width, so no bar wraps, and the bar
/// still moves and names its work.
#[test]
fn a_narrowed_window_gets_bars_that_fit_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = repeated(dir.path(), 16);
    let out = dir.path().join("out.osm.pbf");
    let mut cmd = pbf_sort();
    cmd.arg(&input).arg("-o").arg(&out);
    let d = in_terminal(cmd, 80, Then::Narrow(40));
    assert!(d.status.success(), "{:?}\n{}", d.status, d.show());
    assert_clean(&d, "a window narrowed from 80 to 40 columns");
    let narrowed = d.narrowed_at.expect("a bar was drawn at 80 columns");
    let mut after: Vec<&String> = d.screens[narrowed..]
        .iter()
        .flatten()
        .filter(|r| is_bar(r))
        .collect();
    after.dedup();
    after.retain(|b| names_a_merge_op(label(b)));
    assert!(after.len() >= 2, "the merge's bar stopped: {after:?}");
    for b in &after {
        assert!(
            b.chars().count() + 3 <= 40,
            "wider than 40 columns allow: {b:?}"
        );
        assert!(
            !label(b).is_empty() && b.ends_with('%'),
            "the 40-column layout: {b:?}"
        );
    }
    assert!(out.exists(), "no output");
}

/// A terminal too narrow for any bar (under 22 columns) gets none: no frame
/// wraps onto a row of its own.
#[test]
fn a_terminal_too_narrow_for_a_bar_gets_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = repeated(dir.path(), 8);
    let out = dir.path().join("out.osm.pbf");
    let mut cmd = pbf_sort();
    cmd.arg(&input).arg("-o").arg(&out);
    let d = in_terminal(cmd, 12, Then::Watch);
    assert!(d.status.success(), "{:?}\n{}", d.status, d.show());
    let pieces: Vec<&String> = d
        .screens
        .iter()
        .flatten()
        .filter(|r| r.contains('[') || r.contains(']') || r.contains('%'))
        .collect();
    assert!(pieces.is_empty(), "pieces of a bar: {pieces:?}");
    assert!(out.exists(), "no output");
}

#[test]
fn a_sorted_input_leaves_a_clean_screen() {
    let dir = tempfile::tempdir().expect("tempdir");
    for cols in [40, 80] {
        let out = dir.path().join(format!("out-{cols}.osm.pbf"));
        let mut cmd = pbf_sort();
        cmd.arg(data("sorted-kualalumpur.osm.pbf"))
            .arg("-o")
            .arg(&out);
        let d = in_terminal(cmd, cols, Then::Watch);
        assert!(
            d.status.success(),
            "{cols} columns: {:?}\n{}",
            d.status,
            d.show()
        );
        assert_clean(&d, &format!("sorted input at {cols} columns"));
        assert!(
            d.bars()
                .iter()
                .all(|b| !b.contains("0 B/") || b.starts_with("indexing")),
            "{cols} columns: a bar that never moved was drawn: {:?}",
            d.bars()
        );
    }
}

#[test]
fn a_failure_leaves_its_error_line_and_no_bar() {
    let dir = tempfile::tempdir().expect("tempdir");
    let whole = repeated(dir.path(), 8);
    let bytes = std::fs::read(&whole).expect("read");
    let cut = dir.path().join("cut.osm.pbf");
    std::fs::write(&cut, &bytes[..bytes.len() * 9 / 10]).expect("write");
    for cols in [40, 80] {
        let out = dir.path().join(format!("out-{cols}.osm.pbf"));
        let mut cmd = pbf_sort();
        cmd.arg(&cut).arg("-o").arg(&out);
        let d = in_terminal(cmd, cols, Then::Watch);
        assert_eq!(d.status.code(), Some(1), "{cols} columns:\n{}", d.show());
        assert_clean(&d, &format!("failure at {cols} columns"));
        let text = d.last().join("\n");
        assert!(
            text.contains("pbf-sort: error: index stage"),
            "{cols} columns: no error line from the driver:\n{text}"
        );
        assert!(!out.exists(), "{cols} columns: an output was left");
    }
}

#[test]
fn ctrl_c_leaves_a_clean_screen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = repeated(dir.path(), 8);
    for cols in [40, 80] {
        let out = dir.path().join(format!("out-{cols}.osm.pbf"));
        let mut cmd = pbf_sort();
        cmd.arg(&input).arg("-o").arg(&out);
        let d = in_terminal(cmd, cols, Then::CtrlC);
        assert!(
            !d.status.success(),
            "{cols} columns: the run was not interrupted"
        );
        assert_clean(&d, &format!("Ctrl-C at {cols} columns"));
        assert!(!out.exists(), "{cols} columns: an output was left");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".pbf-sort"))
            .collect();
        assert!(left.is_empty(), "{cols} columns: left behind: {left:?}");
    }
}

#[test]
fn ctrl_c_on_a_pipeline_of_the_tools_leaves_a_clean_screen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = repeated(dir.path(), 8);
    let out = dir.path().join("out.osm.pbf");
    // No driver to clear the line after the stages: the stage drawing the
    // bar must clear it as Ctrl-C ends it.
    let script = format!(
        "{} '{}' | {} | {} | {} -o '{}'",
        bin_quoted("pbf-index"),
        input.display(),
        bin_quoted("pbf-overlap"),
        bin_quoted("pbf-merge"),
        bin_quoted("pbf-copy"),
        out.display()
    );
    for cols in [40, 80] {
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(&script);
        let d = in_terminal(cmd, cols, Then::CtrlC);
        assert!(
            !d.status.success(),
            "{cols} columns: the pipeline was not interrupted"
        );
        assert_clean(
            &d,
            &format!("Ctrl-C on the tools' pipeline at {cols} columns"),
        );
        assert!(!out.exists(), "{cols} columns: an output was left");
    }
}

/// `-o -` with standard output on the terminal: refused before a byte is
/// written (as gzip and zstd refuse it), by the driver and by a copier
/// run alone, with one line that says what to do.
#[test]
fn binary_output_to_the_terminal_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("sorted-andorra.osm.pbf");
    let plan = dir.path().join("plan.jsonl");
    let mut c = Command::new("sh");
    c.arg("-c").arg(format!(
        "{} \"$1\" | {} > \"$2\"",
        bin_quoted("pbf-index"),
        bin_quoted("pbf-overlap")
    ));
    c.args([
        "sh",
        input.to_str().expect("utf-8"),
        plan.to_str().expect("utf-8"),
    ]);
    assert!(c.status().expect("plan").success(), "no plan");
    let mut sort = pbf_sort();
    sort.arg(&input).args(["-o", "-"]);
    let mut copy = crate::util::commands::bin("pbf-copy");
    copy.arg(&plan).args(["-o", "-"]);
    for (who, cmd) in [("pbf-sort", sort), ("pbf-copy", copy)] {
        let d = in_terminal(cmd, 80, Then::Watch);
        assert_eq!(d.status.code(), Some(2), "{who}:\n{}", d.show());
        let text = d.last().join("\n");
        let want = format!("{who}: error: standard output is a terminal, and PBF is binary");
        assert!(text.trim_start().starts_with(&want), "{who}:\n{text}");
        assert!(
            !text.contains("OSMHeader"),
            "{who}: PBF on the screen:\n{text}"
        );
    }
}

/// A stage run by hand with its stream on the terminal: refused at once
/// (no stream is ever typed), not a silent wait that ends in "upstream
/// stage died?" when the user gives up.
#[test]
fn a_stage_refuses_a_stream_from_the_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.osm.pbf");
    let mut copy = crate::util::commands::bin("pbf-copy");
    copy.arg("-o").arg(&out);
    let stages = [
        ("pbf-overlap", crate::util::commands::bin("pbf-overlap")),
        ("pbf-merge", crate::util::commands::bin("pbf-merge")),
        ("pbf-copy", copy),
    ];
    for (who, cmd) in stages {
        let d = in_terminal(cmd, 80, Then::Watch);
        assert_eq!(d.status.code(), Some(2), "{who}:\n{}", d.show());
        let text = d.show();
        let want = format!("{who}: error: standard input is a terminal: this stage reads");
        assert!(text.trim_start().starts_with(&want), "{who}:\n{text}");
        assert!(!out.exists(), "{who}: an output was left");
    }
}

/// Standard input on the terminal, named `-` or by a path to it, or the
/// terminal named as an input: refused at once, rather than waiting for
/// typed bytes that are never PBF; and by the `--dry-run` script too, with
/// `-o -` to the terminal.
#[test]
fn standard_input_on_the_terminal_is_refused_however_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    for arg in ["-", "/dev/stdin", "/dev/fd/0"] {
        let out = dir.path().join("out.osm.pbf");
        let mut cmd = pbf_sort();
        cmd.arg(arg).arg("-o").arg(&out);
        let d = in_terminal(cmd, 120, Then::Watch);
        assert_eq!(d.status.code(), Some(2), "{arg}:\n{}", d.show());
        let text = d.last().join("\n");
        let want = match arg {
            "-" => "pbf-sort: error: standard input is a terminal".to_owned(),
            path => format!("pbf-sort: error: {path}: is a terminal"),
        };
        let want = format!("{want}; pipe a PBF file into 'pbf-sort -'");
        assert!(text.trim_start().starts_with(&want), "{arg}:\n{text}");
        assert!(!out.exists(), "{arg}: an output was left");
    }
    // The terminal named as an input, with standard input a file.
    let out = dir.path().join("tty.osm.pbf");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "exec pbf-sort /dev/tty -o \"$1\" < \"$2\"", "sh"])
        .arg(&out)
        .arg(data("sorted-andorra.osm.pbf"))
        .env("PATH", crate::util::commands::tools_path());
    let d = in_terminal(cmd, 120, Then::Watch);
    assert_eq!(d.status.code(), Some(2), "/dev/tty:\n{}", d.show());
    let want = "pbf-sort: error: /dev/tty: is a terminal; pipe a PBF file into 'pbf-sort -'";
    assert!(
        d.show().trim_start().starts_with(want),
        "/dev/tty:\n{}",
        d.show()
    );
    assert!(!out.exists(), "/dev/tty: an output was left");
    // The --dry-run script, run on the terminal, refuses it as the run does.
    let script = dir.path().join("run.sh");
    let input = data("sorted-andorra.osm.pbf");
    for (args, want) in [
        (["-", "-o", "x.osm.pbf"], "standard input is a terminal"),
        (
            [input.to_str().expect("utf-8"), "-o", "-"],
            "standard output is a terminal",
        ),
    ] {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "pbf-sort --dry-run \"$@\" < /dev/null > run.sh && exec bash run.sh",
        ])
        .arg("sh")
        .args(args)
        .current_dir(dir.path())
        .env("PATH", crate::util::commands::tools_path());
        let d = in_terminal(cmd, 120, Then::Watch);
        assert_eq!(d.status.code(), Some(2), "{args:?}:\n{}", d.show());
        let want = format!("pbf-sort: error: {want}");
        assert!(
            d.show().trim_start().starts_with(&want),
            "{args:?}:\n{}",
            d.show()
        );
        assert!(
            script.exists() && !dir.path().join("x.osm.pbf").exists(),
            "{args:?}"
        );
    }
}
