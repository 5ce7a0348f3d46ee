//! Shared machinery of the fault-injection tests (hostile input, hostile
//! streams, crash soak, disk full): running a tool with a time limit and its
//! peak memory measured, a seeded generator, the checks that every failure
//! is one clean line and leaves nothing behind, and a small tmpfs mount.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// A seeded xorshift generator: every fault is reproducible from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A budget from the environment, else `default`.
pub fn env_budget(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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
fn group_alive(pgid: u32) -> bool {
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

/// Send a signal to one process.
pub fn kill_pid(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

/// Lines that only echo an upstream failure (the root cause is on another line).
pub fn is_cascade(line: &str) -> bool {
    line.contains("upstream stage died")
        || line.contains("empty index stream")
        || line.contains("empty plan stream")
        || is_stage_failure(line)
}

/// The driver's line naming the stage that failed (its cause is the line of
/// that stage).
pub fn is_stage_failure(line: &str) -> bool {
    line.starts_with("pbf-sort: error: ")
        && line.contains(" stage '")
        && line.ends_with("; no output was written")
}

/// Check a failed run's stderr: no panic or abort, every line a clean
/// `tool: error: ...` line, and exactly one root cause, which names `file`
/// (and an offset when `offset` is set). A file that is not PBF at all is a
/// usage error (exit 2) whose line says what the file is instead of an
/// offset; anything else fails with exit 1. Returns the root-cause line.
pub fn check_clean_failure(what: &str, o: &Outcome, file: &str, offset: bool) -> String {
    let err = &o.stderr;
    let not_pbf = err.contains(", not PBF: ");
    assert_eq!(
        o.status.code(),
        Some(if not_pbf { 2 } else { 1 }),
        "{what}: exit {:?}; stderr:\n{err}",
        o.status
    );
    let offset = offset && !not_pbf;
    for bad in [
        "panicked",
        "RUST_BACKTRACE",
        "memory allocation",
        "Aborted",
        "stack overflow",
    ] {
        assert!(!err.contains(bad), "{what}: '{bad}' on stderr:\n{err}");
    }
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    for l in &lines {
        assert!(
            l.starts_with("pbf-") && l.contains(": error: "),
            "{what}: not a clean error line: {l}\nstderr:\n{err}"
        );
    }
    let mut roots: Vec<&&str> = lines.iter().filter(|l| !is_cascade(l)).collect();
    if roots.is_empty() && lines.len() == 1 {
        // A stage run alone: "stream ended without an end record" is the cause.
        roots = lines.iter().collect();
    }
    assert_eq!(
        roots.len(),
        1,
        "{what}: want one root-cause line, got:\n{err}"
    );
    let root = roots[0].to_string();
    assert!(
        root.contains(file),
        "{what}: error does not name {file}: {root}"
    );
    if offset {
        assert!(
            root.contains("offset"),
            "{what}: error names no offset: {root}"
        );
    }
    root
}

/// Entries of a directory (names).
pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Is `out` a sorted PBF file? osmium's answer when osmium reads `input`;
/// when even osmium refuses the (corrupt) input, our own index of the output
/// must pass `pbf-overlap --check` (the output is as readable as the input).
pub fn output_is_sorted(out: &Path, input: &Path) -> Result<(), String> {
    let osmium_reads = |p: &Path| {
        Command::new("osmium")
            .args(["fileinfo", "-e", "-j"])
            .arg(p)
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
    };
    if osmium_reads(input).is_some() {
        let info = osmium_reads(out).ok_or("osmium cannot read the output")?;
        return match info["data"]["objects_ordered"].as_bool() {
            Some(true) => Ok(()),
            _ => Err(format!("osmium: output not ordered: {}", info["data"])),
        };
    }
    let index = Command::new(env!("CARGO_BIN_EXE_pbf-index"))
        .arg("-q")
        .arg(out)
        .output()
        .map_err(|e| e.to_string())?;
    if !index.status.success() {
        return Err(format!(
            "pbf-index of the output: {}",
            String::from_utf8_lossy(&index.stderr)
        ));
    }
    let mut c = bin("pbf-overlap");
    c.arg("--check");
    let o = run_with_input(c, &index.stdout);
    if !o.status.success() {
        return Err(format!(
            "pbf-overlap --check: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(())
}

/// A tmpfs mounted for one test, unmounted (lazily, so a busy mount cannot
/// wedge the test) and removed on drop.
pub struct Mount {
    pub dir: tempfile::TempDir,
}

impl Mount {
    /// Mount a tmpfs of `size` (e.g. "8m") with extra `-o` options; `None`
    /// with the reason when mounting is not permitted here.
    pub fn tmpfs(size: &str, opts: &str) -> Result<Mount, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut o = format!("size={size}");
        if !opts.is_empty() {
            o = format!("{o},{opts}");
        }
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &o, "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Remount read-only.
    pub fn read_only(&self) -> Result<(), String> {
        let out = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(self.path())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A scratch directory and a fresh, empty output directory inside it.
pub fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("mkdir out");
    (dir, out)
}
