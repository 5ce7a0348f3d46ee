//! Hostile index and plan streams through the real stages: real streams of
//! real files, edited (a line dropped, a field of the wrong type, a range
//! past the end, overlapping ops, a changed source, a line of gigabytes
//! from a generator), fed to pbf-overlap, pbf-merge and pbf-copy. Each ends
//! in one clean error with a line number, exit 1 and no output, or in a
//! sorted output. A plan can never make a tool write or delete anything but
//! its output and its own temporaries.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;

/// A copy of a data file in `dir` (so it can be changed), with its index and plans.
struct Streams {
    input: PathBuf,
    index: String,
    plan: String,
    merged: String,
}

fn streams(dir: &Path, name: &str) -> Streams {
    let input = dir.join(name);
    std::fs::copy(data(name), &input).expect("copy input");
    let mut c = bin("pbf-index");
    c.arg("-q").arg(&input);
    let index = String::from_utf8(succeeds(c)).expect("utf8");
    let plan = run_with_input(bin("pbf-overlap"), index.as_bytes());
    assert!(plan.status.success());
    let mut m = bin("pbf-merge");
    m.arg("-q")
        .arg("--spool")
        .arg(dir.join(format!("{name}.spool")));
    let merged = run_with_input(m, &plan.stdout);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    Streams {
        input,
        index,
        plan: String::from_utf8(plan.stdout).expect("utf8"),
        merged: String::from_utf8(merged.stdout).expect("utf8"),
    }
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_owned).collect()
}

fn join(v: &[String]) -> String {
    v.iter().map(|l| format!("{l}\n")).collect()
}

/// Replace the first `from` on line `n` (0-based) by `to`.
fn edit(s: &str, n: usize, from: &str, to: &str) -> String {
    let mut v = lines(s);
    assert!(v[n].contains(from), "line {n} has no {from}: {}", v[n]);
    v[n] = v[n].replacen(from, to, 1);
    join(&v)
}

/// Run a stage on `stream` (written to a file); it must fail cleanly with a
/// line number, or succeed (then the caller decides). Returns the outcome.
fn stage(tool: &str, args: &[&str], stream: &str, dir: &Path, what: &str) -> Outcome {
    let file = dir.join("stream.jsonl");
    std::fs::write(&file, stream).expect("write stream");
    let mut c = bin(tool);
    c.args(args).arg(&file);
    run_bounded(&c, Duration::from_secs(60), dir)
        .tap(|o| assert!(!o.stderr.contains("panicked"), "{what}: {}", o.stderr))
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&Self)) -> Self {
        f(&self);
        self
    }
}
impl Tap for Outcome {}

#[test]
fn hostile_index_streams_fail_with_a_line_number() {
    let dir = tempfile::tempdir().expect("dir");
    let s = streams(dir.path(), "unsorted-type-regression.osm.pbf");
    let v = lines(&s.index);
    let n = v.len();
    let size = std::fs::metadata(&s.input).expect("meta").len();
    let mut cases: Vec<(&str, String)> = vec![
        ("no source record", join(&v[1..])),
        ("no end record", join(&v[..n - 1])),
        (
            "blob before source",
            join(
                &[v[1].clone(), v[0].clone()]
                    .into_iter()
                    .chain(v[2..].iter().cloned())
                    .collect::<Vec<_>>(),
            ),
        ),
        (
            "end before the blobs",
            join(
                &[v[0].clone(), v[n - 1].clone()]
                    .into_iter()
                    .chain(v[1..n - 1].iter().cloned())
                    .collect::<Vec<_>>(),
            ),
        ),
        ("a blob twice", join(&[&v[..2], &v[1..]].concat())),
        (
            "version 4",
            edit(&s.index, 0, "\"version\":3", "\"version\":4"),
        ),
        (
            "another schema",
            edit(&s.index, 0, "pbf-sort/index", "pbf-sort/other"),
        ),
        (
            "offset is a string",
            edit(&s.index, 1, "\"offset\":", "\"offset\":\"x\",\"was\":"),
        ),
        (
            "negative offset",
            edit(&s.index, 1, "\"offset\":", "\"offset\":-5,\"was\":"),
        ),
        (
            "offset past the end",
            edit(
                &s.index,
                1,
                "\"offset\":",
                &format!("\"offset\":{},\"was\":", size + 100),
            ),
        ),
        (
            "length 2^64-1",
            edit(
                &s.index,
                1,
                "\"length\":",
                "\"length\":18446744073709551615,\"was\":",
            ),
        ),
        (
            "unknown kind",
            edit(&s.index, 1, "\"kind\":\"node\"", "\"kind\":\"area\""),
        ),
        (
            "first after last",
            edit(
                &s.index,
                1,
                "\"first\":{\"kind\":\"node\"",
                "\"first\":{\"kind\":\"relation\"",
            ),
        ),
        (
            "unknown record type",
            edit(&s.index, 1, "\"type\":\"blob\"", "\"type\":\"blub\""),
        ),
        ("not JSON", edit(&s.index, 2, "{", "[")),
        ("truncated line", {
            let mut t = s.index.clone();
            t.truncate(t.len() - 10);
            t
        }),
        ("NUL bytes", edit(&s.index, 1, "\"seq\"", "\0\0\"seq\"")),
        (
            "counts lie in end",
            edit(&s.index, n - 1, "\"blobs\":", "\"blobs\":1,\"was\":"),
        ),
        (
            "source changed (size)",
            edit(
                &s.index,
                0,
                &format!("\"size\":{size}"),
                &format!("\"size\":{}", size - 1),
            ),
        ),
        (
            "source missing",
            edit(
                &s.index,
                0,
                "unsorted-type-regression.osm.pbf",
                "no-such-file.osm.pbf",
            ),
        ),
    ];
    cases.push(("empty stream", String::new()));
    let name = "stream.jsonl";
    for (what, stream) in &cases {
        // pbf-overlap reads the index; whatever it lets through, pbf-merge and
        // pbf-copy must catch before an output appears.
        let o = stage("pbf-overlap", &[], stream, dir.path(), what);
        if o.status.success() {
            let out_dir = dir.path().join("out");
            std::fs::create_dir_all(&out_dir).expect("mkdir");
            let out = out_dir.join("o.osm.pbf");
            let mut c = Command::new("bash");
            c.arg("-c")
                .arg("set -o pipefail; \"$1\" -q \"$4\" | \"$2\" -q --spool \"$5\" | \"$3\" -q -o \"$6\"")
                .arg("x")
                .args([env!("CARGO_BIN_EXE_pbf-overlap"), env!("CARGO_BIN_EXE_pbf-merge"), env!("CARGO_BIN_EXE_pbf-copy")])
                .arg(dir.path().join("stream.jsonl"))
                .arg(out_dir.join("spool"))
                .arg(&out);
            let o = run_bounded(&c, Duration::from_secs(60), dir.path());
            if o.status.success() {
                output_is_sorted(&out, &s.input)
                    .unwrap_or_else(|e| panic!("{what}: exit 0 but {e}"));
                std::fs::remove_dir_all(&out_dir).expect("rm");
                continue;
            }
            let root = check_clean_failure(what, &o, "", false);
            let named = ["line ", "changed since", "cannot open"]
                .iter()
                .any(|w| root.contains(w));
            assert!(named, "{what}: {root}");
            assert!(!out.exists(), "{what}: output left");
            std::fs::remove_dir_all(&out_dir).expect("rm");
            eprintln!("index stream '{what}': passed pbf-overlap, stopped downstream: {root}");
            continue;
        }
        if stream.is_empty() {
            // An empty stream has no line to name: it says so instead.
            let root = check_clean_failure(what, &o, name, false);
            assert!(root.contains("empty index stream"), "{what}: {root}");
            continue;
        }
        // One line, with a line number.
        let root = check_clean_failure(what, &o, name, false);
        let one = o.stderr.lines().count() == 1;
        assert!(one && root.contains("line "), "{what}:\n{}", o.stderr);
    }
}

#[test]
fn hostile_plans_fail_before_any_output() {
    let dir = tempfile::tempdir().expect("dir");
    let s = streams(dir.path(), "unsorted-type-regression.osm.pbf");
    let m = lines(&s.merged);
    let n = m.len();
    let size = std::fs::metadata(&s.input).expect("meta").len();
    let copy_line = (1..n - 1)
        .find(|&i| m[i].contains("\"source\":0"))
        .expect("a copy op of the input");
    let dup = join(&[&m[..copy_line + 1], &m[copy_line..]].concat());
    let cases: Vec<(&str, String)> = vec![
        ("no plan record", join(&m[1..])),
        ("no end record", join(&m[..n - 1])),
        (
            "version 4",
            edit(&s.merged, 0, "\"version\":3", "\"version\":4"),
        ),
        (
            "offset past the end",
            edit(
                &s.merged,
                copy_line,
                "\"offset\":",
                &format!("\"offset\":{},\"was\":", size),
            ),
        ),
        (
            "negative length",
            edit(
                &s.merged,
                copy_line,
                "\"length\":",
                "\"length\":-1,\"was\":",
            ),
        ),
        (
            "length is a string",
            edit(
                &s.merged,
                copy_line,
                "\"length\":",
                "\"length\":\"1\",\"was\":",
            ),
        ),
        (
            "zero length",
            edit(&s.merged, copy_line, "\"length\":", "\"length\":0,\"was\":"),
        ),
        (
            "unknown source",
            edit(&s.merged, copy_line, "\"source\":0", "\"source\":77"),
        ),
        ("the same range copied twice", dup),
        ("records after end", format!("{}{}\n", s.merged, m[1])),
        (
            "source changed (mtime)",
            edit(&s.merged, 0, "\"mtime_nsec\":", "\"mtime_nsec\":1,\"was\":"),
        ),
        (
            "source listed twice",
            edit(
                &s.merged,
                0,
                "\"sources\":[",
                &format!("\"sources\":[{},", source_json(&s.merged)),
            ),
        ),
    ];
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = out_dir.join("o.osm.pbf");
    let out_s = out.to_string_lossy().into_owned();
    for (what, plan) in &cases {
        let o = stage("pbf-copy", &["-q", "-o", &out_s], plan, dir.path(), what);
        if o.status.success() {
            output_is_sorted(&out, &s.input)
                .unwrap_or_else(|e| panic!("pbf-copy on plan '{what}': exit 0 but {e}"));
            std::fs::remove_file(&out).expect("rm");
        } else {
            let root = check_clean_failure(what, &o, "", false);
            assert!(
                root.contains("line ") || root.contains("changed since"),
                "{what}: {root}"
            );
            assert_eq!(o.stderr.lines().count(), 1, "{what}: {}", o.stderr);
        }
        assert!(
            entries(&out_dir).is_empty(),
            "pbf-copy on plan '{what}' left {:?}",
            entries(&out_dir)
        );
    }
    // The unmerged plan through pbf-merge, with the same kinds of damage.
    let p = lines(&s.plan);
    let pn = p.len();
    let merge_line = (1..pn - 1)
        .find(|&i| p[i].contains("\"type\":\"merge\""))
        .expect("a merge op");
    let merge_cases: Vec<(&str, String)> = vec![
        ("no end record", join(&p[..pn - 1])),
        (
            "merge input past the end",
            edit(
                &s.plan,
                merge_line,
                "\"offset\":",
                &format!("\"offset\":{},\"was\":", size),
            ),
        ),
        ("merge without inputs", {
            let mut v = p.clone();
            v[merge_line] = r#"{"type":"merge","inputs":[],"first":{"kind":"node","id":1,"version":1},"last":{"kind":"node","id":1,"version":1},"elements":1}"#.into();
            join(&v)
        }),
        (
            "merge input not at a frame",
            edit(&s.plan, merge_line, "\"offset\":", "\"offset\":1,\"was\":"),
        ),
    ];
    for (what, plan) in &merge_cases {
        let spool = out_dir.join("spool.pbf");
        let sp = spool.to_string_lossy().into_owned();
        let o = stage("pbf-merge", &["-q", "--spool", &sp], plan, dir.path(), what);
        assert_eq!(
            o.status.code(),
            Some(1),
            "pbf-merge on '{what}' exit {:?}: {}",
            o.status,
            o.stderr
        );
        check_clean_failure(what, &o, "", false);
        assert!(!spool.exists(), "pbf-merge on '{what}' left its spool");
    }
}

/// The first source object of a plan header line, as JSON text.
fn source_json(plan: &str) -> String {
    let first = plan.lines().next().expect("line");
    let v: serde_json::Value = serde_json::from_str(first).expect("json");
    v["sources"][0].to_string()
}

#[test]
fn a_line_of_gigabytes_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("dir");
    let gib = env_budget("PBF_SORT_LONG_LINE_MB", 700);
    for (tool, prefix) in [
        ("pbf-overlap", r#"{"type":"source","path":""#),
        ("pbf-copy", r#"{"type":"plan","sources":[{"path":""#),
    ] {
        let out = dir.path().join("never.osm.pbf");
        let script = format!(
            "set -o pipefail; {{ printf '%s' '{prefix}'; yes aaaaaaaaaaaaaaa | tr -d '\\n' | head -c {gib}M; }} | \"$0\" {} -",
            if tool == "pbf-copy" {
                format!("-q -o '{}'", out.display())
            } else {
                String::new()
            }
        );
        let mut c = Command::new("bash");
        c.arg("-c").arg(script).arg(if tool == "pbf-copy" {
            env!("CARGO_BIN_EXE_pbf-copy")
        } else {
            env!("CARGO_BIN_EXE_pbf-overlap")
        });
        let o = run_bounded_to(&c, Duration::from_secs(300), dir.path(), Stdio::null());
        assert!(!o.stderr.contains("panicked"), "{tool}: {}", o.stderr);
        assert!(
            o.stderr.contains("line 1: line longer than"),
            "{tool}: {}",
            o.stderr
        );
        assert_ne!(
            o.status.code(),
            Some(0),
            "{tool} accepted a line of {gib} MiB"
        );
        let limit_mb = 512 + 128;
        assert!(
            o.max_rss_kb < limit_mb * 1024,
            "{tool}: peak RSS {} KiB for a {gib} MiB line",
            o.max_rss_kb
        );
        assert!(!out.exists());
        eprintln!(
            "{tool}: a {gib} MiB line refused at line 1, peak RSS {} MiB",
            o.max_rss_kb / 1024
        );
    }
}

#[test]
fn a_plan_cannot_make_pbf_copy_write_or_delete_elsewhere() {
    let dir = tempfile::tempdir().expect("dir");
    let s = streams(dir.path(), "unsorted-type-regression.osm.pbf");
    let precious = dir.path().join("precious.txt");
    // As large as the spool, so every range the plan copies from it exists.
    let spool_len =
        serde_json::from_str::<serde_json::Value>(s.merged.lines().next().expect("plan"))
            .expect("json")["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .find(|s| s["spool"] == true)
            .and_then(|s| {
                s["path"]
                    .as_str()
                    .map(|p| std::fs::metadata(p).expect("spool").len())
            })
            .expect("spool");
    let text = b"precious:x:1:1:not a spool file\n".repeat(spool_len as usize / 32 + 1);
    std::fs::write(&precious, &text).expect("write");
    let meta = std::fs::metadata(&precious).expect("meta");
    let mtime = meta
        .modified()
        .expect("mtime")
        .duration_since(std::time::UNIX_EPOCH)
        .expect("epoch")
        .as_nanos();
    let m = lines(&s.merged);
    // 1. A spool source that names a file that is not a spool, copied whole,
    //    with spool removal (the default): the file must survive.
    let v: serde_json::Value = serde_json::from_str(&m[0]).expect("json");
    let spool_id = v["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .find(|s| s["spool"] == true)
        .map(|s| s["id"].clone())
        .expect("a spool source");
    let spool_path = v["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .find(|s| s["spool"] == true)
        .map(|s| s["path"].as_str().expect("path").to_owned())
        .expect("spool");
    let hostile = s.merged.replace(&spool_path, &precious.to_string_lossy());
    let out = dir.path().join("o.osm.pbf");
    let out_s = out.to_string_lossy().into_owned();
    let o = stage(
        "pbf-copy",
        &["-q", "-o", &out_s],
        &hostile,
        dir.path(),
        "spool is precious",
    );
    assert!(
        precious.exists(),
        "pbf-copy deleted a file that is not a spool ({spool_id}): {}",
        o.stderr
    );
    assert_eq!(std::fs::read(&precious).expect("read"), text);
    let _ = mtime;
    let _ = std::fs::remove_file(&out);
    // 2. The plan's own source as the output, with -O: refused, input intact.
    let before = std::fs::read(&s.input).expect("read");
    let input_s = s.input.to_string_lossy().into_owned();
    let o = stage(
        "pbf-copy",
        &["-q", "--keep-spools", "-O", "-o", &input_s],
        &s.merged,
        dir.path(),
        "output is a source",
    );
    // Found before any work: a usage error.
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert_eq!(
        std::fs::read(&s.input).expect("read"),
        before,
        "the input was overwritten"
    );
    // 3. The spool as the output: refused, spool intact.
    let spool_before = std::fs::read(&spool_path).expect("spool");
    let o = stage(
        "pbf-copy",
        &["-q", "--keep-spools", "-O", "-o", &spool_path],
        &s.merged,
        dir.path(),
        "output is the spool",
    );
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert_eq!(
        std::fs::read(&spool_path).expect("spool"),
        spool_before,
        "the spool was overwritten"
    );
    // 4. pbf-merge with an existing file as its spool: refused before any
    // work (a usage error), file intact.
    let o = stage(
        "pbf-merge",
        &["-q", "--spool", &precious.to_string_lossy()],
        &s.plan,
        dir.path(),
        "spool exists",
    );
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert_eq!(std::fs::read(&precious).expect("read"), text);
    // 5. A source that is a FIFO must not hang a stage.
    let fifo = dir.path().join("fifo.osm.pbf");
    mkfifo(&fifo);
    let fifo_plan = s.merged.replace(
        &s.input.to_string_lossy().into_owned(),
        &fifo.to_string_lossy(),
    );
    let o = stage(
        "pbf-copy",
        &["-q", "-o", &out_s],
        &fifo_plan,
        dir.path(),
        "source is a FIFO",
    );
    assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
    assert!(!out.exists());
}
