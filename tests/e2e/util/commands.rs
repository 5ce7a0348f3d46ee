//! Commands: our binaries and the driver, the system tools the tests lean
//! on (osmium above all), running a command with its output captured, and
//! running one bounded in time, in its own process group, with its peak
//! memory measured.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// A command for one of our binaries.
pub fn bin(tool: &str) -> Command {
    let path = match tool {
        "pbf-copy" => env!("CARGO_BIN_EXE_pbf-copy"),
        "pbf-index" => env!("CARGO_BIN_EXE_pbf-index"),
        "pbf-merge" => env!("CARGO_BIN_EXE_pbf-merge"),
        "pbf-overlap" => env!("CARGO_BIN_EXE_pbf-overlap"),
        "pbf-reflink" => env!("CARGO_BIN_EXE_pbf-reflink"),
        other => panic!("unknown tool {other}"),
    };
    Command::new(path)
}

/// One of our binaries' paths in single quotes, for a `bash -c` script.
pub fn bin_quoted(tool: &str) -> String {
    format!("'{}'", Path::new(bin(tool).get_program()).display())
}

/// Run a command with the given stdin, capturing stdout and stderr.
pub fn run_with_input(mut cmd: Command, input: &[u8]) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let data = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait");
    feeder.join().expect("stdin feeder");
    out
}

/// Run a command with empty stdin.
pub fn run(cmd: Command) -> Output {
    run_with_input(cmd, b"")
}

/// Run and require success; returns stdout.
pub fn succeeds(cmd: Command) -> Vec<u8> {
    succeeds_with(cmd, b"")
}

/// Run with `input` on stdin and require success; returns stdout.
pub fn succeeds_with(cmd: Command, input: &[u8]) -> Vec<u8> {
    let desc = format!("{cmd:?}");
    let out = run_with_input(cmd, input);
    assert!(
        out.status.success(),
        "{desc} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Fail the test loudly, naming the Debian package, when `cmd --version`
/// does not run (`.ci/deps` installs every such package).
pub fn require_tool(cmd: &str, package: &str, who: &str) {
    let ok = Command::new(cmd)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{cmd} (Debian package {package}) is required by {who}; install it"
    );
}

/// A command for a tool found through PATH (never an absolute path: a Nix
/// build has no `/usr/bin`); fails the test loudly, naming the Debian
/// package, when the tool is not there.
pub fn tool(cmd: &str, package: &str, who: &str) -> Command {
    require_tool(cmd, package, who);
    Command::new(cmd)
}

/// An `osmium` command; fails the test loudly when osmium-tool is not installed.
pub fn osmium() -> Command {
    tool("osmium", "osmium-tool", "the oracle tests")
}

/// The driver, with our binaries first on PATH.
pub fn pbf_sort() -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("pbf-sort");
    let mut c = Command::new(script);
    c.env("PATH", tools_path());
    c
}

/// PATH with the directory of our binaries and the driver's first.
pub fn tools_path() -> std::ffi::OsString {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_pbf-index"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin_dir, PathBuf::from(env!("CARGO_MANIFEST_DIR"))];
    dirs.extend(std::env::split_paths(&path));
    std::env::join_paths(dirs).expect("PATH")
}

/// Wait for the child, failing the test (and killing it) if it is still
/// running after `limit`, so that a signal it does not act on cannot hang
/// the suite.
pub fn wait_at_most(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running {limit:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How one bounded run ended.
pub struct Outcome {
    pub status: ExitStatus,
    pub stderr: String,
    /// Peak resident set of the largest process of the run, in KiB.
    pub max_rss_kb: u64,
}

/// Run `cmd` (stdout discarded) under GNU time (`time` on PATH) for its peak RSS, in
/// its own process group, killed with the whole group after `limit`.
/// Panics on a timeout: a hang is a failure.
pub fn run_bounded(cmd: &Command, limit: Duration, scratch: &Path) -> Outcome {
    run_bounded_to(cmd, limit, scratch, Stdio::null())
}

/// [`run_bounded`] with stdout going to `stdout`.
pub fn run_bounded_to(cmd: &Command, limit: Duration, scratch: &Path, stdout: Stdio) -> Outcome {
    use std::os::unix::process::CommandExt;
    let rss_file = scratch.join("rss.txt");
    let err_file = scratch.join("stderr.txt");
    let mut c = tool("time", "time", "the fault tests (peak RSS)");
    c.arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss_file)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    c.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(File::create(&err_file).expect("stderr file"))
        .process_group(0);
    let started = Instant::now();
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if started.elapsed() > limit {
            kill_group(child.id(), "KILL");
            let _ = child.wait();
            panic!("{cmd:?} hung: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = std::fs::read_to_string(&err_file).unwrap_or_default();
    let max_rss_kb = std::fs::read_to_string(&rss_file)
        .ok()
        .and_then(|s| s.lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0);
    // time(1) adds "Command terminated by signal N" when the child died by a
    // signal: that line is not a clean error line, so such a run fails.
    Outcome {
        status,
        stderr,
        max_rss_kb,
    }
}

/// Send a signal to a process group.
pub fn kill_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .status();
}

/// Wait until no live (non-zombie) process is left in process group
/// `pgid`, failing the test after `limit`. A shell killed by a signal exits
/// at once, while its pipeline's stages may still be running their signal
/// handlers: what they leave behind is known only when they are gone.
pub fn wait_for_group_gone(pgid: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while group_alive(pgid) {
        assert!(
            Instant::now() < deadline,
            "process group {pgid} still running {limit:?} after the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True when a process of group `pgid` is running (per /proc; zombies
/// do not count).
pub fn group_alive(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
        .any(|stat| {
            // After "pid (comm) ": state ppid pgrp ...
            let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
            let mut f = rest.split_whitespace();
            let state = f.next().unwrap_or("Z");
            let pgrp = f.nth(1).and_then(|g| g.parse::<u32>().ok());
            state != "Z" && pgrp == Some(pgid)
        })
}

/// The process id a script under test wrote to `path` (by a rename, so
/// whole), once it is there; the test fails after `limit` without it.
pub fn wait_for_pid_file(path: &Path, limit: Duration) -> u32 {
    let deadline = Instant::now() + limit;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{}: not written after {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = std::fs::read_to_string(path).expect("read the pid");
    text.trim().parse().expect("a pid")
}

/// Send a signal to one process.
pub fn kill_pid(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

/// Each frame a terminal shows: the text between carriage returns and
/// newlines, ANSI escapes removed.
pub fn screen_lines(tty: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut chars = tty.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters final-byte.
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
        .split(['\r', '\n'])
        .map(str::to_owned)
        .filter(|l| !l.trim().is_empty())
        .collect()
}
