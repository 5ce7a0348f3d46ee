//! `pbf-sort --summary-json FILE`: the run as one JSON object, joined from
//! the driver's description of it ([`super::run`], the file `run` in the
//! reports' directory) and what each tool reported of itself there
//! ([`crate::report`]). The object's fields are documented in pbf-sort(1).
//!
//! [`write`] reads the reports (`TOOL.PID.json`; a stage's is the one its
//! process wrote, the others go to `reports`) and puts the object in place
//! under a temporary name and a rename, so FILE holds a whole object, of
//! this run or of an earlier one.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::value::RawValue;

use super::run::Run;

/// The summary object, its fields in the order pbf-sort(1) gives them.
#[derive(Serialize)]
struct Summary {
    exit: Option<u64>,
    failed_stage: Option<String>,
    wall_s: Option<f64>,
    inputs: Vec<FileSize>,
    output: FileSize,
    copier: Option<String>,
    bytes: Bytes,
    objects: Option<Box<RawValue>>,
    /// Objects of the output that repeat the type and id of the one
    /// before them, as the copier counted them.
    duplicate_ids: Option<Box<RawValue>>,
    stages: Vec<Stage>,
    reports: Vec<Box<RawValue>>,
}

/// A file of the run: its path as given, its size in bytes.
#[derive(Serialize)]
struct FileSize {
    path: String,
    size: Option<u64>,
}

/// The run's bytes, from the stages' counters and the output's size.
#[derive(Serialize)]
struct Bytes {
    copied: Option<Box<RawValue>>,
    merged: Option<Box<RawValue>>,
    written: Option<u64>,
}

/// A stage in pipeline order: as the driver saw it end, and its process's
/// own report.
#[derive(Serialize)]
struct Stage {
    role: Option<String>,
    command: Vec<String>,
    exit: Option<u64>,
    wall_s: Option<f64>,
    report: Option<Box<RawValue>>,
}

/// Join the driver's description and the reports in `dir` into the
/// summary and put it in place as `file`.
pub fn write(dir: &Path, file: &Path) -> Result<()> {
    let summary = assemble(dir, now_us())?;
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut json = serde_json::to_vec(&summary)?;
    json.push(b'\n');
    let written = std::fs::write(&tmp, json).and_then(|()| std::fs::rename(&tmp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("{}: cannot write the summary", file.display()))
}

/// The summary of the run described in `dir`, `now` microseconds after the
/// epoch.
fn assemble(dir: &Path, now: u64) -> Result<Summary> {
    let run = Run::read(&dir.join("run"))?;
    let facts = &run.fields;
    let started = facts.number("started")?;
    let mut reports = reports(dir)?;
    let stages = stages(&run, started, &mut reports)?;
    let counter = |role: &str, name: &str| {
        let stage = stages.iter().find(|s| s.role.as_deref() == Some(role))?;
        counter(stage.report.as_deref()?, name)
    };
    let output = facts.get("output").unwrap_or_default();
    let written = (facts.flag("committed") && output != "-")
        .then(|| size(output))
        .flatten();
    let inputs = facts.all("input").into_iter().zip(facts.all("file"));
    let file_size = |path: &OsStr, size| FileSize {
        path: path.to_string_lossy().into_owned(),
        size,
    };
    Ok(Summary {
        exit: facts.number("exit")?,
        failed_stage: facts.text("failed_stage"),
        wall_s: seconds(started, Some(now)),
        inputs: inputs
            .map(|(path, file)| file_size(path, size(file)))
            .collect(),
        output: file_size(output, written),
        copier: facts.text("copier"),
        bytes: Bytes {
            copied: counter("planning", "copy_bytes"),
            merged: counter("merge", "read_bytes"),
            written,
        },
        objects: counter("index", "objects"),
        duplicate_ids: counter("copy", "duplicate_ids"),
        stages,
        reports: reports.into_values().collect(),
    })
}

/// The run's stages, each with the report its process wrote, taken out of
/// `reports`; the tees of `--keep-plan` are no stage of the summary's.
fn stages(
    run: &Run,
    started: Option<u64>,
    reports: &mut BTreeMap<String, Box<RawValue>>,
) -> Result<Vec<Stage>> {
    let piped = run
        .stages
        .iter()
        .filter(|s| s.text("stage").as_deref() != Some("--keep-plan"));
    piped
        .map(|stage| {
            Ok(Stage {
                role: stage.text("stage"),
                command: stage
                    .all("arg")
                    .iter()
                    .map(|a| a.to_string_lossy().into())
                    .collect(),
                exit: stage.number("exit")?,
                wall_s: seconds(started, stage.number("ended")?),
                report: stage.text("pid").and_then(|pid| reports.remove(&pid)),
            })
        })
        .collect()
}

/// The reports in `dir` by the process id in their name (`TOOL.PID.json`),
/// each as it was written.
fn reports(dir: &Path) -> Result<BTreeMap<String, Box<RawValue>>> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_suffix(".json")
            .and_then(|n| n.rsplit('.').next())
        else {
            continue;
        };
        let path = dir.join(&name);
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
        let report = RawValue::from_string(text.trim_end().to_owned())
            .with_context(|| format!("{}: not JSON", path.display()))?;
        found.insert(pid.to_owned(), report);
    }
    Ok(found)
}

/// What a report's `counters` give `name`: a count or an object of counts,
/// as written; none for anything else.
fn counter(report: &RawValue, name: &str) -> Option<Box<RawValue>> {
    #[derive(serde::Deserialize)]
    struct Counters<'a> {
        #[serde(borrow)]
        counters: Option<BTreeMap<String, &'a RawValue>>,
    }
    let report: Counters<'_> = serde_json::from_str(report.get()).ok()?;
    let value = *report.counters?.get(name)?;
    let text = value.get();
    let counts = text.starts_with(|c: char| c.is_ascii_digit() || c == '{');
    counts.then(|| value.to_owned())
}

/// The size of the file at `path`, if there is one.
fn size(path: &OsStr) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// Seconds from `started` to `ended` (microseconds), to the millisecond.
fn seconds(started: Option<u64>, ended: Option<u64>) -> Option<f64> {
    let ms = ended?.saturating_sub(started?) / 1000;
    Some(ms as f64 / 1000.0)
}

fn now_us() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    since.map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Write `fields` as the driver does: each NUL-terminated.
    fn facts(path: &Path, fields: &[&str]) {
        let mut bytes = Vec::new();
        for f in fields {
            bytes.extend_from_slice(f.as_bytes());
            bytes.push(0);
        }
        std::fs::write(path, bytes).expect("facts");
    }

    fn report(dir: &Path, name: &str, json: &str) {
        std::fs::write(dir.join(name), json).expect("report");
    }

    fn summary(dir: &Path, now: u64) -> Value {
        let s = assemble(dir, now).expect("summary");
        serde_json::from_slice(&serde_json::to_vec(&s).expect("json")).expect("parse")
    }

    #[test]
    fn a_run_joins_the_drivers_facts_and_the_stages_reports() {
        let t = tempfile::tempdir().expect("dir");
        let dir = t.path();
        let input = dir.join("in.osm.pbf");
        std::fs::write(&input, [0u8; 10]).expect("input");
        let output = dir.join("out \"odd\"\nname.osm.pbf");
        std::fs::write(&output, [0u8; 7]).expect("output");
        let (input_s, output_s) = (input.to_str().expect("utf-8"), output.to_str().expect("u"));
        let (input_field, output_field) = (format!("file={input_s}"), format!("output={output_s}"));
        let run = [
            "exit=0",
            "started=1000000",
            "failed_stage=",
            &output_field,
            "committed=1",
            "copier=pbf-copy",
            "input=-",
            &input_field,
        ];
        let stages = [
            "stage=index",
            "pid=11",
            "exit=0",
            "ended=1500000",
            "stage=--keep-plan",
            "pid=13",
            "arg=tee",
            "stage=planning",
            "pid=12",
            "exit=0",
            "ended=2250999",
            "arg=pbf-overlap",
            "arg=a=b",
        ];
        facts(&dir.join("run"), &[&run[..], &stages[..]].concat());
        let objects = r#"{"node":3,"way":2,"relation":1}"#;
        report(
            dir,
            "pbf-index.11.json",
            &format!(r#"{{"tool":"pbf-index","counters":{{"objects":{objects}}}}}"#),
        );
        report(
            dir,
            "pbf-overlap.12.json",
            r#"{"tool":"pbf-overlap","counters":{"copy_bytes":42}}"#,
        );
        report(dir, "pbf-index.99.json", r#"{"tool":"pbf-index","exit":0}"#);
        let s = summary(dir, 3_000_000);
        assert_eq!(s["exit"], 0);
        assert!(s["failed_stage"].is_null());
        assert_eq!(s["wall_s"], 2.0);
        assert_eq!(s["inputs"], serde_json::json!([{"path": "-", "size": 10}]));
        assert_eq!(
            s["output"],
            serde_json::json!({"path": output_s, "size": 7})
        );
        assert_eq!(s["copier"], "pbf-copy");
        assert_eq!(
            s["bytes"],
            serde_json::json!({"copied": 42, "merged": null, "written": 7})
        );
        // A report's values are embedded as written, their keys in order.
        let text = serde_json::to_string(&assemble(dir, 0).expect("summary")).expect("json");
        assert!(text.contains(&format!(r#""objects":{objects}"#)), "{text}");
        assert_eq!(s["stages"][0]["wall_s"], 0.5);
        assert_eq!(s["stages"][0]["command"], serde_json::json!([]));
        assert_eq!(s["stages"][0]["report"]["tool"], "pbf-index");
        assert_eq!(s["stages"][1]["wall_s"], 1.25);
        assert_eq!(
            s["stages"][1]["command"],
            serde_json::json!(["pbf-overlap", "a=b"])
        );
        assert_eq!(
            s["reports"],
            serde_json::json!([{"tool": "pbf-index", "exit": 0}])
        );
        let keys: Vec<&String> = s.as_object().expect("object").keys().collect();
        assert_eq!(keys.len(), 11, "{keys:?}");
    }

    #[test]
    fn what_the_run_did_not_learn_is_null() {
        let t = tempfile::tempdir().expect("dir");
        let dir = t.path();
        let run = [
            "exit=130",
            "started=5",
            "failed_stage=merge",
            "output=gone.osm.pbf",
            "committed=0",
            "copier=pbf-reflink",
            "stage=merge",
            "pid=7",
            "exit=1",
            "ended=9",
            "stage=copy",
            "pid=",
            "exit=",
            "ended=",
        ];
        facts(&dir.join("run"), &run);
        // The merge's report gives no counters; another stage's is absent.
        report(dir, "pbf-merge.7.json", r#"{"tool":"pbf-merge","exit":1}"#);
        let s = summary(dir, 5);
        assert_eq!(s["exit"], 130);
        assert_eq!(s["failed_stage"], "merge");
        assert_eq!(
            s["output"],
            serde_json::json!({"path": "gone.osm.pbf", "size": null})
        );
        let nulls = serde_json::json!({"copied": null, "merged": null, "written": null});
        assert_eq!(s["bytes"], nulls);
        assert!(s["objects"].is_null());
        let stages = s["stages"].as_array().expect("stages");
        let roles: Vec<&Value> = stages.iter().map(|st| &st["role"]).collect();
        assert_eq!(roles, ["merge", "copy"]);
        assert_eq!(stages[0]["report"]["exit"], 1);
        for key in ["exit", "wall_s", "report"] {
            assert!(stages[1][key].is_null(), "{key}: {s}");
        }
        assert_eq!(s["reports"], serde_json::json!([]));
    }

    #[test]
    fn a_counter_is_a_count_or_an_object_of_counts() {
        let raw = |s: &str| RawValue::from_string(s.to_owned()).expect("raw");
        let r = raw(r#"{"counters":{"n":5,"o":{"a":1},"s":"x","z":null}}"#);
        assert_eq!(
            counter(&r, "n").map(|v| v.get().to_owned()),
            Some("5".into())
        );
        assert_eq!(
            counter(&r, "o").map(|v| v.get().to_owned()),
            Some(r#"{"a":1}"#.into())
        );
        for name in ["s", "z", "missing"] {
            assert!(counter(&r, name).is_none(), "{name}");
        }
        assert!(counter(&raw(r#"{"exit":2}"#), "n").is_none());
    }

    #[test]
    fn a_summary_is_renamed_into_place_whole() {
        let t = tempfile::tempdir().expect("dir");
        let dir = t.path().join("reports");
        std::fs::create_dir(&dir).expect("reports");
        facts(
            &dir.join("run"),
            &["exit=0", "started=0", "output=-", "committed=1"],
        );
        let file = t.path().join("run.json");
        std::fs::write(&file, "{}").expect("an earlier summary");
        write(&dir, &file).expect("write");
        let text = std::fs::read_to_string(&file).expect("summary");
        let s: Value = serde_json::from_str(&text).expect("JSON");
        assert!(s["output"]["size"].is_null(), "no size for -o -: {s}");
        assert!(text.ends_with("}\n"));
        let left = std::fs::read_dir(t.path()).expect("dir").count();
        assert_eq!(left, 2, "reports and run.json only");
        assert!(write(&dir, &t.path().join("missing/run.json")).is_err());
        facts(&dir.join("run"), &["no equals sign"]);
        assert!(write(&dir, &file).is_err());
    }
}
