//! `PBF_SORT_SUMMARY_DIR`: each tool's own account of its run, for the
//! driver's `--summary-json`.
//!
//! The driver is a bash script: `wait` gives it a stage's exit status and
//! nothing of what the stage used, and no shell reads a child's rusage. So
//! every tool reports itself: when [`SUMMARY_DIR_ENV`] names a directory,
//! [`crate::main`] writes `DIR/TOOL.PID.json` as the tool returns, one
//! [`Report`] object holding its exit status, wall time, peak resident set
//! size and the counters the tool gave [`counters`] (what its `-v` line
//! prints, as typed fields).
//!
//! An environment variable rather than an option: it reaches our tools
//! through a replacement stage that wraps them (the process id then tells
//! the driver which stage a report belongs to, as long as the wrapper
//! `exec`s the tool), and a tool run by hand without it writes nothing. A
//! tool killed by a signal, or ended by its own SIGPIPE, writes nothing
//! either; `--help` and `--version` are no run and write nothing.
//!
//! The file is written under a temporary name (`TOOL.PID.tmp`) and renamed,
//! so a reader finds a whole object or none. A report that cannot be written
//! is a warning: it never changes the tool's exit status.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;
use serde_json::value::RawValue;

/// Environment variable naming the directory reports are written to.
pub const SUMMARY_DIR_ENV: &str = "PBF_SORT_SUMMARY_DIR";

/// The counters of the run, serialised when the tool gave them.
static COUNTERS: Mutex<Option<Box<RawValue>>> = Mutex::new(None);

/// Give the run's counters to its report (`counters` there); a later call
/// replaces them. Nothing is serialised when no report is asked for.
pub fn counters<T: Serialize>(counters: &T) {
    if summary_dir().is_none() {
        return;
    }
    if let (Ok(raw), Ok(mut slot)) = (serde_json::value::to_raw_value(counters), COUNTERS.lock()) {
        *slot = Some(raw);
    }
}

/// One tool's report: the file `TOOL.PID.json`.
#[derive(Serialize)]
pub struct Report<'a> {
    /// The tool's name (`pbf-merge`).
    pub tool: &'a str,
    /// The toolkit's version.
    pub version: &'a str,
    /// Its process id.
    pub pid: u32,
    /// Its exit status.
    pub exit: u8,
    /// Seconds from its start to its return.
    pub wall_s: f64,
    /// Its peak resident set size (`ru_maxrss` of `getrusage(RUSAGE_SELF)`),
    /// in bytes; null where the kernel does not say.
    pub peak_rss_bytes: Option<u64>,
    /// What the tool counted, as its `-v` line; absent when it gave none
    /// (a usage error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<Box<RawValue>>,
}

fn summary_dir() -> Option<PathBuf> {
    std::env::var_os(SUMMARY_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Write the report of a run that ends with `code`, when one is asked for.
pub(crate) fn write(tool: &str, code: ExitCode, started: Instant) {
    let Some(dir) = summary_dir() else {
        return;
    };
    let pid = std::process::id();
    let report = Report {
        tool,
        version: env!("CARGO_PKG_VERSION"),
        pid,
        exit: status(code),
        wall_s: started.elapsed().as_secs_f64(),
        peak_rss_bytes: peak_rss(),
        counters: COUNTERS.lock().ok().and_then(|mut c| c.take()),
    };
    let path = dir.join(format!("{tool}.{pid}.json"));
    let tmp = dir.join(format!("{tool}.{pid}.tmp"));
    let written = serde_json::to_vec(&report)
        .map_err(std::io::Error::from)
        .and_then(|json| std::fs::write(&tmp, json))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        let why = format!("warning: {}: cannot write the report: {e}", path.display());
        crate::warn(tool, why);
    }
}

/// The number an [`ExitCode`] carries (it shows none, but equals the code
/// made from it).
fn status(code: ExitCode) -> u8 {
    (0..=u8::MAX)
        .find(|&n| ExitCode::from(n) == code)
        .unwrap_or(1)
}

/// This process's peak resident set size in bytes (Linux counts `ru_maxrss`
/// in KiB).
fn peak_rss() -> Option<u64> {
    use nix::sys::resource::{UsageWho, getrusage};
    let kib = getrusage(UsageWho::RUSAGE_SELF).ok()?.max_rss();
    u64::try_from(kib).ok()?.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_code_gives_its_number_back() {
        for n in [0, 1, 2, 141, 255] {
            assert_eq!(status(ExitCode::from(n)), n);
        }
        assert_eq!(status(ExitCode::SUCCESS), 0);
        assert_eq!(status(ExitCode::FAILURE), 1);
    }

    #[test]
    fn peak_rss_is_at_least_what_this_process_holds() {
        let held = vec![1u8; 8 << 20];
        let peak = peak_rss().expect("getrusage");
        assert!(peak >= held.len() as u64, "{peak}");
        drop(held);
    }
}
