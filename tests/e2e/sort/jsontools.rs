//! The streams through the JSON tools a user puts between two stages. jq and
//! JavaScript read numbers as IEEE doubles, so every number in a stream must
//! be exact in one (pbf-stream(5)); these tests run real files, and a file of
//! ids beyond 2^53, through `jq -c .`, a jq filter that edits the plan, and a
//! Python reader that rounds every number to a double as JavaScript does, and
//! require the copier to accept the result and write osmium's sort.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

/// `jq -c .`: parse and print every record again.
const JQ: &str = "jq -c .";
/// A jq filter that edits the plan: drop the per-frame keys of copy ops.
const JQ_DROP_FRAMES: &str = "jq -c 'if .type == \"copy\" then del(.frames) else . end'";
/// A reader that turns every number into the nearest double, as jq 1.6 and
/// JavaScript do, and writes integral values back as integers.
const PY_DOUBLES: &str = "python3 -c 'import json, sys\n\
for line in sys.stdin:\n    \
    rec = json.loads(line, parse_int=lambda s: int(float(s)))\n    \
    print(json.dumps(rec, separators=(\",\", \":\")))'";

/// Fail loudly when jq is missing (`.ci/run` installs it).
fn require_jq() {
    require_tool("jq", "jq", "these tests");
}

/// Sort `input` into `out` by hand, with `filter` between every two stages
/// and `last` between pbf-merge and pbf-copy.
fn sort_through(input: &Path, out: &Path, filter: &str, last: &str) -> String {
    let spool = out.with_extension("spool");
    let script = format!(
        "{index} -q '{input}' | {filter} | {overlap} | {filter} | {merge} -q --spool '{spool}' \
         | {last} | {copy} -q -o '{out}'",
        index = bin_quoted("pbf-index"),
        overlap = bin_quoted("pbf-overlap"),
        merge = bin_quoted("pbf-merge"),
        copy = bin_quoted("pbf-copy"),
        input = input.display(),
        spool = spool.display(),
        out = out.display(),
    );
    let mut c = Command::new("bash");
    c.args(["-o", "pipefail", "-c", &script]);
    let o = run(c);
    assert!(
        o.status.success(),
        "{script}\nfailed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!spool.exists(), "the copier removes the spool it consumed");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A PBF of objects with ids beyond 2^53 (and at the i64 limits), out of
/// order so that the planner merges, written by osmium from OPL.
fn big_ids(dir: &Path) -> PathBuf {
    let opl = dir.join("big-ids.opl");
    let lines = [
        "n9007199254740993 v1 dV c1 t2020-01-01T00:00:00Z i1 uA Tamenity=bench x1.0 y1.0",
        "n-9007199254740995 v2 dV c1 t2020-01-01T00:00:00Z i1 uA T x1.1 y1.1",
        "n5 v1 dV c1 t2020-01-01T00:00:00Z i1 uA T x1.2 y1.2",
        "n9223372036854775807 v1 dV c1 t2020-01-01T00:00:00Z i1 uA T x1.3 y1.3",
        "n-9223372036854775807 v1 dV c1 t2020-01-01T00:00:00Z i1 uA T x1.4 y1.4",
        "w9007199254740993 v1 dV c1 t2020-01-01T00:00:00Z i1 uA T Nn5,n9007199254740993",
        "n9007199254740992 v1 dV c1 t2020-01-01T00:00:00Z i1 uA T x1.5 y1.5",
        "n9007199254740994 v3 dV c1 t2020-01-01T00:00:00Z i1 uA T x1.6 y1.6",
    ];
    std::fs::write(&opl, lines.join("\n") + "\n").expect("write OPL");
    let pbf = dir.join("big-ids.osm.pbf");
    let mut c = osmium();
    c.arg("cat").arg(&opl).arg("-o").arg(&pbf).arg("-O");
    succeeds(c);
    pbf
}

#[test]
fn every_real_file_sorts_through_jq() {
    require_jq();
    let dir = tempfile::tempdir().expect("tempdir");
    for input in good_files() {
        let out = dir.path().join(format!("{}.sorted.pbf", name(&input)));
        sort_through(&input, &out, JQ, JQ_DROP_FRAMES);
        assert_sorted_like_osmium(&out, &[&input], dir.path(), &name(&input));
    }
}

#[test]
fn streams_survive_a_reader_that_rounds_to_doubles() {
    require_tool("python3", "python3", "this test");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut inputs = vec![
        data("unsorted-vex.osm.pbf"),
        data("sorted-64bit-ids.osm.pbf"),
        data("history-niue.osh.pbf"),
    ];
    inputs.push(big_ids(dir.path()));
    for input in inputs {
        let out = dir.path().join(format!("{}.sorted.pbf", name(&input)));
        sort_through(&input, &out, PY_DOUBLES, PY_DOUBLES);
        assert_sorted_like_osmium(&out, &[&input], dir.path(), &name(&input));
    }
}

#[test]
fn ids_beyond_two_to_the_53_are_strings_and_survive_jq() {
    require_jq();
    let dir = tempfile::tempdir().expect("tempdir");
    let input = big_ids(dir.path());
    let mut c = bin("pbf-index");
    c.arg("-q").arg(&input);
    let index = String::from_utf8(succeeds(c)).expect("utf8");
    assert!(
        index.contains(r#""id":"9223372036854775807""#)
            && index.contains(r#""id":"-9007199254740995""#),
        "ids beyond 2^53 are written as strings: {index}"
    );
    assert!(
        index.contains(r#""id":9007199254740992"#),
        "2^53 itself is a number: {index}"
    );
    assert!(index.contains(r#""mtime":"#) && !index.contains(r#""mtime_ns":"#));
    let out = dir.path().join("sorted.osm.pbf");
    sort_through(&input, &out, JQ, JQ);
    assert_sorted_like_osmium(&out, &[&input], dir.path(), "big ids through jq");
}

#[test]
fn a_stream_of_the_previous_version_is_refused_in_one_line() {
    let input = data("sorted-andorra.osm.pbf");
    let mut c = bin("pbf-index");
    c.arg("-q").arg(&input);
    let index = String::from_utf8(succeeds(c)).expect("utf8");
    let old = index.replacen("\"version\":3", "\"version\":2", 1);
    let o = run_with_input(bin("pbf-overlap"), old.as_bytes());
    let says = "line 1: pbf-sort/index version 2 is not supported (this tool reads version 3)";
    refused("version 2", &o, 1, &[says]);
}
