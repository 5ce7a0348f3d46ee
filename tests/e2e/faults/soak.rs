//! Crash soak: `pbf-sort` on inputs that take a few seconds (overlapping
//! copies of a real file's frames for the merge path, a blob-permuted sorted
//! file for the copy path), killed at seeded random moments with SIGKILL,
//! SIGINT or SIGTERM, sent to the driver or to one of its stages, round after
//! round within a time budget. Every round checks: OUT absent, or identical
//! to what it was before; the input unchanged; no temporaries left after
//! SIGINT/SIGTERM; after a SIGKILL of the driver, the next run removes the
//! stale temporary directory; a rerun succeeds with a sorted output.
//!
//! Budget: `PBF_SORT_SOAK_SECS` (default 40), seed `PBF_SORT_SOAK_SEED` (default 1).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

fn hash(path: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    std::fs::read(path).expect("read").hash(&mut h);
    h.finish()
}

fn start(input: &Path, out: &Path) -> Child {
    let mut c = pbf_sort();
    c.arg("-q")
        .arg("-O")
        .arg(input)
        .arg("-o")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c.spawn().expect("spawn pbf-sort")
}

/// The pipeline stages among the direct children of `pid`, with their command
/// names. The driver's helpers (mktemp, cp, stat, and the `rm` of its cleanup)
/// are not stages: a signal to the `rm` that removes the temporary directory
/// leaves that directory, as a SIGKILL to the driver does, so they are not
/// victims here.
fn stages(pid: u32) -> Vec<(u32, String)> {
    let list =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    list.split_whitespace()
        .filter_map(|c| c.parse::<u32>().ok())
        .filter_map(|c| {
            let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).ok()?;
            Some((c, comm.trim().to_owned()))
        })
        .filter(|(_, comm)| comm.starts_with("pbf-"))
        .collect()
}

/// Wait until no process still runs with `PBF_SORT_DRIVER_PID=pid` (stages
/// of a driver killed with SIGKILL die by PDEATHSIG and clean up).
fn wait_stages_gone(pid: u32) {
    let needle = format!("PBF_SORT_DRIVER_PID={pid}");
    let t = Instant::now();
    loop {
        let alive = std::fs::read_dir("/proc")
            .expect("proc")
            .filter_map(|e| e.ok())
            .any(|e| {
                std::fs::read(e.path().join("environ"))
                    .map(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
                    .unwrap_or(false)
            });
        if !alive {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "stages of killed driver {pid} still run"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn rerun(input: &Path, out: &Path, what: &str) {
    let mut c = pbf_sort();
    c.arg("-q").arg("-O").arg(input).arg("-o").arg(out);
    let o = run(c);
    assert!(
        o.status.success(),
        "{what}: rerun failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.exists(), "{what}: the rerun succeeded and left no OUT");
}

struct Tally {
    rounds: u64,
    by_signal: [u64; 3],
    stage_kills: u64,
    finished_first: u64,
    reruns: u64,
}

#[test]
fn killed_at_random_moments_nothing_is_lost() {
    let budget = Duration::from_secs(env_budget("PBF_SORT_SOAK_SECS", 40));
    let mut rng = Rng::new(env_budget("PBF_SORT_SOAK_SEED", 1), 0);
    let dir = tempfile::tempdir().expect("dir");
    let merge_in = dir.path().join("overlapping.osm.pbf");
    overlapping_copies("sorted-kualalumpur.osm.pbf", 4, &merge_in);
    let copy_in = dir.path().join("permuted.osm.pbf");
    permute(&data("sorted-liechtenstein.osm.pbf"), &copy_in, 7);
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.join("sorted.osm.pbf");
    // Each input with its hash, the time of a full run, and the complete output
    // (deterministic), which a kill landing after the commit point leaves.
    let inputs: Vec<(PathBuf, u64, Duration, Vec<u8>)> = [merge_in, copy_in]
        .into_iter()
        .map(|p| {
            let t = Instant::now();
            rerun(&p, &out, "baseline");
            let took = t.elapsed();
            assert_eq!(
                fileinfo(&out)["data"]["objects_ordered"],
                serde_json::Value::Bool(true)
            );
            let complete = std::fs::read(&out).expect("read baseline");
            std::fs::remove_file(&out).expect("rm");
            let h = hash(&p);
            (p, h, took, complete)
        })
        .collect();
    let signals = ["KILL", "INT", "TERM"];
    let mut t = Tally {
        rounds: 0,
        by_signal: [0; 3],
        stage_kills: 0,
        finished_first: 0,
        reruns: 0,
    };
    let started = Instant::now();
    while started.elapsed() < budget || t.rounds < 6 {
        let (input, input_hash, took, complete) = &inputs[rng.below(2)];
        let s = rng.below(3);
        let signal = signals[s];
        // Before: no OUT, an OUT from an earlier run, or junk that must survive.
        let before: Option<Vec<u8>> = match rng.below(3) {
            0 => None,
            1 => Some(b"an older output that must survive a failed run".to_vec()),
            _ => out.exists().then(|| std::fs::read(&out).expect("read")),
        };
        match &before {
            Some(b) => std::fs::write(&out, b).expect("write OUT"),
            None => {
                let _ = std::fs::remove_file(&out);
            }
        }
        let delay =
            Duration::from_micros(rng.below(took.as_micros() as usize * 11 / 10 + 1) as u64);
        let mut child = start(input, &out);
        let driver = child.id();
        std::thread::sleep(delay);
        let stages = stages(driver);
        let at_stage = rng.below(2) == 0 && !stages.is_empty();
        let victim = if at_stage {
            stages[rng.below(stages.len())].clone()
        } else {
            (driver, "pbf-sort".into())
        };
        kill_pid(victim.0, signal);
        let status = wait_at_most(&mut child, Duration::from_secs(60));
        let what = format!(
            "round {}: SIG{signal} to {} after {delay:?}",
            t.rounds, victim.1
        );
        if status.success() {
            t.finished_first += 1;
            assert!(out.exists(), "{what}: the run succeeded and left no OUT");
            assert_eq!(
                fileinfo(&out)["data"]["objects_ordered"],
                serde_json::Value::Bool(true),
                "{what}"
            );
        } else {
            // Killed: OUT is as before, or (the signal came after the rename
            // that publishes it) the complete output; never anything else.
            let now = std::fs::read(&out).ok();
            let unchanged = now == before;
            assert!(
                unchanged || now.as_ref() == Some(complete),
                "{what}: OUT changed and is not the complete output"
            );
        }
        assert_eq!(hash(input), *input_hash, "{what}: the input changed");
        if signal == "KILL" && !at_stage && !status.success() {
            wait_stages_gone(driver);
            // The stale directory of the killed driver goes with the next run.
            rerun(input, &out, &what);
            t.reruns += 1;
            let stale: Vec<String> = entries(&out_dir)
                .into_iter()
                .filter(|e| e.starts_with(&format!(".pbf-sort.{driver}.")))
                .collect();
            assert!(stale.is_empty(), "{what}: the next run left {stale:?}");
        } else if t.rounds % 5 == 0 {
            rerun(input, &out, &what);
            t.reruns += 1;
        }
        let left: Vec<String> = entries(&out_dir)
            .into_iter()
            .filter(|e| *e != "sorted.osm.pbf")
            .collect();
        assert!(left.is_empty(), "{what}: temporaries left: {left:?}");
        t.rounds += 1;
        t.by_signal[s] += 1;
        t.stage_kills += u64::from(at_stage);
    }
    rerun(&inputs[0].0, &out, "final");
    assert_eq!(
        fileinfo(&out)["data"]["objects_ordered"],
        serde_json::Value::Bool(true)
    );
    eprintln!(
        "soak: {} rounds in {:.0?} (SIGKILL {}, SIGINT {}, SIGTERM {}; {} sent to a stage, {} runs \
         finished before the signal), {} reruns: OUT never half-written, inputs unchanged, no \
         temporaries left",
        t.rounds,
        started.elapsed(),
        t.by_signal[0],
        t.by_signal[1],
        t.by_signal[2],
        t.stage_kills,
        t.finished_first,
        t.reruns + 1
    );
}
