//! The driver's account of a run: `pbf-sort --summary-json FILE` writes one
//! JSON object per run (also a failed one), whose numbers agree with the
//! files and with osmium, and each tool's own report under
//! `PBF_SORT_SUMMARY_DIR` (`pbf_cli::report`), which the summary embeds.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::util::*;

/// `v[key]`, which must be there (null or not): the summary's fields are
/// always written, null standing for what the run did not learn.
fn field<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or_else(|| panic!("no {key:?} in {v}"))
}

fn number(v: &Value, key: &str) -> u64 {
    field(v, key)
        .as_u64()
        .unwrap_or_else(|| panic!("{key:?} is no count in {v}"))
}

fn seconds(v: &Value, key: &str) -> f64 {
    field(v, key)
        .as_f64()
        .unwrap_or_else(|| panic!("{key:?} is no time in {v}"))
}

/// The summary file, parsed as JSON (`serde_json` refuses anything else).
fn summary(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| {
        panic!(
            "{}: not JSON ({e}): {}",
            path.display(),
            String::from_utf8_lossy(&text)
        )
    })
}

/// Run the driver with `args`; it must exit `code`.
fn sort(args: &[&std::ffi::OsStr], code: i32) -> Output {
    let mut c = pbf_sort();
    c.args(args);
    let o = run(c);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Nothing of the run's own is left in `dir`: no `.pbf-sort.*` and no
/// summary under its temporary name.
fn nothing_left(dir: &Path) {
    let left: Vec<String> = entries(dir)
        .into_iter()
        .filter(|e| e.starts_with(".pbf-sort") || e.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The objects per kind osmium counts in `path`, as the streams write them.
fn osmium_objects(path: &Path) -> Value {
    let count = &fileinfo(path)["data"]["count"];
    serde_json::json!({
        "node": count["nodes"],
        "way": count["ways"],
        "relation": count["relations"],
    })
}

#[test]
fn a_run_is_summarised_and_its_numbers_agree_with_the_files() {
    let (_t, dir) = scratch();
    let unsorted = data("unsorted-vex.osm.pbf");
    let out = dir.join("out.osm.pbf");
    let file = dir.join("run.json");
    let args = [
        "--check".as_ref(),
        "--summary-json".as_ref(),
        file.as_os_str(),
        unsorted.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    sort(&args, 0);
    let s = summary(&file);
    assert_eq!(number(&s, "exit"), 0);
    assert!(field(&s, "failed_stage").is_null(), "{s}");
    let size = std::fs::metadata(&out).expect("output").len();
    let output = field(&s, "output");
    assert_eq!(field(output, "path").as_str(), out.to_str());
    assert_eq!(number(output, "size"), size);
    let inputs = field(&s, "inputs").as_array().expect("inputs");
    assert_eq!(inputs.len(), 1);
    assert_eq!(field(&inputs[0], "path").as_str(), unsorted.to_str());
    let input_size = std::fs::metadata(&unsorted).expect("input").len();
    assert_eq!(number(&inputs[0], "size"), input_size);
    let copier = field(&s, "copier").as_str().expect("copier");
    assert!(["pbf-copy", "pbf-reflink"].contains(&copier), "{copier}");
    assert_eq!(field(&s, "objects"), &osmium_objects(&unsorted));

    let stages = field(&s, "stages").as_array().expect("stages");
    let roles: Vec<&str> = stages
        .iter()
        .map(|st| field(st, "role").as_str().expect("role"))
        .collect();
    assert_eq!(roles, ["index", "planning", "merge", "copy"]);
    let tools = ["pbf-index", "pbf-overlap", "pbf-merge", copier];
    let mut before = 0.0;
    for (st, tool) in stages.iter().zip(tools) {
        assert_eq!(number(st, "exit"), 0, "{st}");
        let command = field(st, "command").as_array().expect("command");
        let program = command[0].as_str().expect("program");
        assert!(program.ends_with(tool), "{st}");
        let ended = seconds(st, "wall_s");
        assert!(before <= ended, "stages end in pipeline order: {s}");
        before = ended;
        let report = field(st, "report");
        assert_eq!(field(report, "tool").as_str(), Some(tool));
        assert_eq!(number(report, "exit"), 0);
        assert!(number(report, "pid") > 0);
        assert!(number(report, "peak_rss_bytes") > 1 << 20, "{report}");
        assert!(seconds(report, "wall_s") <= ended, "{report}");
        assert!(field(report, "counters").is_object(), "{report}");
    }
    assert!(before <= seconds(&s, "wall_s"), "{s}");

    // The run's totals are the stages' own counts.
    let counters = |i: usize| field(field(&stages[i], "report"), "counters");
    let bytes = field(&s, "bytes");
    assert_eq!(number(bytes, "written"), size);
    assert_eq!(number(counters(3), "written_bytes"), size);
    assert_eq!(
        number(&s, "duplicate_ids"),
        number(counters(3), "duplicate_ids")
    );
    assert_eq!(field(counters(0), "objects"), field(&s, "objects"));
    assert_eq!(number(bytes, "copied"), number(counters(1), "copy_bytes"));
    assert_eq!(number(bytes, "merged"), number(counters(2), "read_bytes"));
    // This file's blobs all overlap: every data frame is merged.
    assert!(number(bytes, "merged") > 0, "{s}");
    assert!(number(bytes, "copied") + number(bytes, "merged") < input_size);
    assert_eq!(
        number(counters(2), "elements_out"),
        number(counters(1), "merge_elements")
    );

    // --check ran pbf-index (of the output and of the input) and
    // pbf-overlap --check under the copier: reports of no stage's process.
    let mut others: Vec<&str> = field(&s, "reports")
        .as_array()
        .expect("reports")
        .iter()
        .map(|r| field(r, "tool").as_str().expect("tool"))
        .collect();
    others.sort_unstable();
    assert_eq!(others, ["pbf-index", "pbf-index", "pbf-overlap"]);
    nothing_left(&dir);
}

#[test]
fn a_failed_run_is_summarised_with_the_stage_that_failed() {
    let (_t, dir) = scratch();
    let truncated = data("bad-truncated.osm.pbf");
    let out = dir.join("out.osm.pbf");
    let file = dir.join("run.json");
    // An earlier run's summary is replaced.
    std::fs::write(&file, "{}").expect("old summary");
    let args = [
        "--summary-json".as_ref(),
        file.as_os_str(),
        truncated.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    sort(&args, 1);
    assert!(!out.exists(), "no output");
    let s = summary(&file);
    assert_eq!(number(&s, "exit"), 1);
    assert_eq!(field(&s, "failed_stage").as_str(), Some("index"));
    assert!(field(field(&s, "output"), "size").is_null(), "{s}");
    let bytes = field(&s, "bytes");
    assert!(field(bytes, "written").is_null(), "{s}");
    // The index stage failed before its end records: no counts.
    assert!(field(&s, "objects").is_null(), "{s}");
    let index = &field(&s, "stages")[0];
    assert_eq!(field(index, "role").as_str(), Some("index"));
    assert_eq!(number(index, "exit"), 1);
    let report = field(index, "report");
    assert_eq!(number(report, "exit"), 1);
    assert!(report.get("counters").is_none(), "{report}");
    nothing_left(&dir);
}

#[test]
fn odd_names_are_escaped_in_the_summary() {
    let (_t, dir) = scratch();
    let odd = "q\"uote b\\ackslash new\nline\ttab é";
    let input = dir.join(format!("{odd}.osm.pbf"));
    std::fs::copy(data("unsorted-vex.osm.pbf"), &input).expect("copy");
    let out = dir.join(format!("out {odd}.osm.pbf"));
    let file = dir.join(format!("{odd}.json"));
    let args = [
        "--summary-json".as_ref(),
        file.as_os_str(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    sort(&args, 0);
    let s = summary(&file);
    assert_eq!(
        field(&field(&s, "inputs")[0], "path").as_str(),
        input.to_str()
    );
    assert_eq!(field(field(&s, "output"), "path").as_str(), out.to_str());
    let index = field(&field(&s, "stages")[0], "command");
    assert_eq!(
        index.as_array().and_then(|a| a.last()),
        Some(&Value::from(input.to_str()))
    );
    nothing_left(&dir);
}

#[test]
fn a_replacement_that_execs_a_tool_keeps_its_report() {
    let (_t, dir) = scratch();
    let input = data("unsorted-vex.osm.pbf");
    for (exec, stage_report) in [("exec ", true), ("", false)] {
        let script = dir.join("my-merge");
        std::fs::write(&script, format!("#!/bin/sh\n{exec}pbf-merge \"$@\"\n")).expect("script");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&script, mode).expect("chmod");
        let out = dir.join("out.osm.pbf");
        let file = dir.join("run.json");
        let args = [
            "-O".as_ref(),
            "--merge-cmd".as_ref(),
            script.as_os_str(),
            "--summary-json".as_ref(),
            file.as_os_str(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ];
        sort(&args, 0);
        let s = summary(&file);
        let merge = &field(&s, "stages")[2];
        assert_eq!(field(merge, "command")[0].as_str(), script.to_str());
        let others = field(&s, "reports").as_array().expect("reports");
        if stage_report {
            assert_eq!(
                field(field(merge, "report"), "tool").as_str(),
                Some("pbf-merge")
            );
            assert!(others.is_empty(), "{s}");
            assert!(number(field(&s, "bytes"), "merged") > 0);
        } else {
            // Run as the script's child, pbf-merge is no stage's process.
            assert!(field(merge, "report").is_null(), "{s}");
            assert_eq!(others.len(), 1, "{s}");
            assert_eq!(field(&others[0], "tool").as_str(), Some("pbf-merge"));
            assert!(field(field(&s, "bytes"), "merged").is_null(), "{s}");
        }
    }
}

#[test]
fn a_tool_reports_itself_under_pbf_sort_summary_dir_only() {
    let (_t, dir) = scratch();
    let reports = dir.join("reports");
    std::fs::create_dir(&reports).expect("dir");
    let input = data("sorted-monaco-lz4.osm.pbf");
    let mut c = bin("pbf-index");
    c.arg(&input).env("PBF_SORT_SUMMARY_DIR", &reports);
    let child = run(c);
    assert!(child.status.success());
    // A usage error is reported too, without counters.
    let mut c = bin("pbf-merge");
    c.args(["--memory", "0"])
        .env("PBF_SORT_SUMMARY_DIR", &reports);
    assert_eq!(run(c).status.code(), Some(2));
    // Without the variable, nothing.
    let mut c = bin("pbf-index");
    c.arg(&input).env_remove("PBF_SORT_SUMMARY_DIR");
    assert!(run(c).status.success());

    let mut names = entries(&reports);
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    let (index, merge) = (&names[0], &names[1]);
    assert!(
        index.starts_with("pbf-index.") && index.ends_with(".json"),
        "{index}"
    );
    assert!(
        merge.starts_with("pbf-merge.") && merge.ends_with(".json"),
        "{merge}"
    );
    let index = summary(&reports.join(index));
    assert_eq!(field(&index, "tool").as_str(), Some("pbf-index"));
    assert_eq!(
        field(&index, "version").as_str(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(number(&index, "exit"), 0);
    let counters = field(&index, "counters");
    assert_eq!(number(counters, "files"), 1);
    assert_eq!(field(counters, "objects"), &osmium_objects(&input));
    let blobs = number(counters, "blobs");
    assert_eq!(
        number(counters, "from_indexdata") + number(counters, "decoded"),
        blobs
    );
    let merge = summary(&reports.join(merge));
    assert_eq!(number(&merge, "exit"), 2);
    assert!(merge.get("counters").is_none(), "{merge}");
    assert!(number(&merge, "peak_rss_bytes") > 0);
}
