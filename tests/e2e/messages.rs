//! What the tools say when they refuse something. Each error path below (a
//! plan out of output order, a
//! blob whose indexdata lies, a corrupt zlib stream, a raw_size that
//! disagrees with the data, an index whose end record was edited) must end
//! in exit 1 with one line on stderr that names the file and says the cause
//! in words: no Rust Debug output (`Key { kind: .. }`, `Some(..)`) reaches
//! the user.

use std::path::{Path, PathBuf};

use pbf_format::compress::blob_data;
use pbf_format::frame::PbfFile;
use pbf_format::wire::{WireType, put_bytes, put_key, put_varint};
use pbf_format::{Key, Kind};
use pbf_stream::{CopyOp, FrameKeys, KeyRecord, MergeInput, MergeOp, PlanRecord};

use crate::util::*;

/// One refusal: a tool, its arguments, and what its one line must hold.
struct Refusal {
    tool: &'static str,
    args: Vec<PathBuf>,
    /// The file the line must name (its file name is enough).
    names: PathBuf,
    says: String,
}

fn refusal(tool: &'static str, args: &[&Path], names: &Path, says: &str) -> Refusal {
    Refusal {
        tool,
        args: args.iter().map(|p| p.to_path_buf()).collect(),
        names: names.to_path_buf(),
        says: says.to_owned(),
    }
}

/// The first piece of `line` that looks like Rust `Debug` output: a struct
/// (`Name { field: `), a variant or tuple struct (`Name(`), or `Some(`.
fn debug_output(line: &str) -> Option<&str> {
    let bytes = line.as_bytes();
    let word_start = |end: usize| {
        let mut i = end;
        while i > 0 && bytes[i - 1].is_ascii_alphanumeric() {
            i -= 1;
        }
        i
    };
    for (at, _) in line.match_indices(" { ") {
        let start = word_start(at);
        let named = at > start && bytes[start].is_ascii_uppercase();
        let field: String = line[at + 3..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if named && !field.is_empty() && line[at + 3 + field.len()..].starts_with(':') {
            return Some(&line[start..]);
        }
    }
    for (at, _) in line.match_indices('(') {
        let start = word_start(at);
        if at > start && bytes[start].is_ascii_uppercase() {
            return Some(&line[start..]);
        }
    }
    None
}

#[test]
fn debug_output_is_recognised() {
    for debug in [
        "keys Key { kind: Way, id: 5, version: 0 }..",
        "end record says PlanEnd { ops: 3 }",
        "cause: Some(7)",
        "Io(Custom { kind: Other })",
    ] {
        assert!(debug_output(debug).is_some(), "{debug}");
    }
    for words in [
        "copy op w5 v1..w9 v2 starts before the op on line 2 ends (w7 v1)",
        "Broken pipe (os error 32)",
        "the end record does not match the ops before it (ops: 3 in the end record)",
    ] {
        assert_eq!(debug_output(words), None, "{words}");
    }
}

impl Refusal {
    fn check(&self) {
        let mut c = bin(self.tool);
        c.args(&self.args);
        let o = run(c);
        let err = String::from_utf8_lossy(&o.stderr);
        let what = format!("{} {:?}", self.tool, self.args);
        assert_eq!(o.status.code(), Some(1), "{what}: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
        let file = name(&self.names);
        assert!(err.contains(&file), "{what}: does not name {file}: {err}");
        assert!(
            err.contains(&self.says),
            "{what}: want {:?} in {err}",
            self.says
        );
        assert_eq!(debug_output(&err), None, "{what}: Debug output in {err}");
    }
}

/// The plan pbf-overlap makes of `input`, as lines.
fn plan_lines(input: &Path) -> Vec<String> {
    let mut c = bin("pbf-index");
    c.arg("-q").arg(input);
    let index = succeeds(c);
    let plan = succeeds_with(bin("pbf-overlap"), &index);
    String::from_utf8(plan)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[&String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write");
}

fn key(kind: Kind, id: i64, version: u32) -> KeyRecord {
    Key::new(kind, id, version).into()
}

#[test]
fn edited_plans_run_and_reordered_ones_are_refused_in_words() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let lines = plan_lines(&data("unsorted-osmconvert-claims-sorted.osm.pbf"));
    assert_eq!(lines.len(), 5, "plan record, three copy ops, end");
    let out = d.join("out.osm.pbf");
    let spool = d.join("spool.pbf");
    // An op deleted with jq, the end record left as it was.
    let edited = d.join("edited.jsonl");
    write_lines(&edited, &[&lines[0], &lines[1], &lines[3], &lines[4]]);
    // Two ops swapped.
    let swapped = d.join("swapped.jsonl");
    write_lines(
        &swapped,
        &[&lines[0], &lines[2], &lines[1], &lines[3], &lines[4]],
    );
    let order = "line 3: copy op n27033787 v2..n3375219872 v1 starts before the op on line 2 \
                 ends (w330369619 v1): the ops are not in output order";
    let quiet = Path::new("-q");
    for tool in ["pbf-copy", "pbf-reflink"] {
        // The edited plan runs: its end record is not recounted.
        let mut c = bin(tool);
        c.arg("-q").arg("-O").arg(&edited).arg("-o").arg(&out);
        succeeds(c);
        assert_eq!(fileinfo(&out)["data"]["objects_ordered"], true, "{tool}");
        std::fs::remove_file(&out).expect("remove the edited plan's output");
        refusal(
            tool,
            &[quiet, &swapped, Path::new("-o"), &out],
            &swapped,
            order,
        )
        .check();
    }
    let spool_arg = [Path::new("--spool"), &spool];
    let args = [&[swapped.as_path()][..], &spool_arg].concat();
    refusal("pbf-merge", &args, &swapped, order).check();
    assert!(!out.exists() && !spool.exists());
}

#[test]
fn an_index_whose_end_record_was_edited_is_refused_in_words() {
    let dir = tempfile::tempdir().expect("dir");
    let mut c = bin("pbf-index");
    c.arg("-q").arg(data("sorted-andorra.osm.pbf"));
    let index = String::from_utf8(succeeds(c)).expect("utf-8");
    let mut lines: Vec<String> = index.lines().map(str::to_owned).collect();
    let last = lines.len() - 1;
    lines[last] = lines[last].replacen("\"node\":", "\"node\":1", 1);
    let edited = dir.path().join("edited.idx");
    write_lines(&edited, &lines.iter().collect::<Vec<_>>());
    let says = format!("line {}: the end record says", last + 1);
    refusal("pbf-overlap", &[&edited], &edited, &says).check();
}

/// The header frame and the first data frame of `input`, and that data
/// frame's zlib data and raw_size.
fn first_blob(input: &Path) -> (Vec<u8>, Vec<u8>, u64) {
    let f = PbfFile::open(input).expect("open");
    let frames: Vec<_> = f.headers().map(|h| h.expect("frame")).collect();
    let head = f
        .read_exact_at(0, frames[0].frame_len() as usize, "header")
        .expect("read");
    let body = f.read_body(&frames[1]).expect("body");
    let b = blob_data(&body).expect("blob");
    let raw = b.raw_size.expect("a raw_size");
    (head, b.data.to_vec(), raw)
}

/// A file of `head` and one OSMData frame holding zlib `data` that says it
/// inflates to `raw_size` bytes.
fn file_with_blob(path: &Path, head: &[u8], data: &[u8], raw_size: u64) {
    let mut blob = Vec::new();
    put_key(&mut blob, 2, WireType::Varint);
    put_varint(&mut blob, raw_size);
    put_bytes(&mut blob, 3, data);
    let mut header = Vec::new();
    put_bytes(&mut header, 1, b"OSMData");
    put_key(&mut header, 3, WireType::Varint);
    put_varint(&mut header, blob.len() as u64);
    let mut bytes = head.to_vec();
    bytes.extend((header.len() as u32).to_be_bytes());
    bytes.extend(header);
    bytes.extend(blob);
    std::fs::write(path, bytes).expect("write");
}

#[test]
fn corrupt_zlib_and_a_wrong_raw_size_are_told_apart() {
    let dir = tempfile::tempdir().expect("dir");
    let (head, data, raw) = first_blob(&data("sorted-andorra.osm.pbf"));
    let offset = head.len();
    let cases = [
        (
            "short.osm.pbf",
            raw - 7,
            data.clone(),
            format!("raw_size says {}", raw - 7),
        ),
        (
            "long.osm.pbf",
            raw + 7,
            data.clone(),
            format!("raw_size says {}", raw + 7),
        ),
        (
            "corrupt.osm.pbf",
            raw,
            {
                let mut bad = data.clone();
                let mid = bad.len() / 2;
                bad[mid] ^= 0x55;
                bad
            },
            "corrupt zlib data".to_owned(),
        ),
    ];
    for (file, raw_size, bytes, says) in cases {
        let path = dir.path().join(file);
        file_with_blob(&path, &head, &bytes, raw_size);
        if raw_size != raw {
            let full = format!("zlib data inflates to {raw} bytes but {says}");
            refusal("pbf-index", &[&path], &path, &full).check();
        } else {
            refusal("pbf-index", &[&path], &path, &says).check();
        }
        let mut c = bin("pbf-index");
        c.arg(&path);
        let err = String::from_utf8_lossy(&run(c).stderr).into_owned();
        assert!(err.contains(&format!("offset {offset}")), "{err}");
    }
}

#[test]
fn indexdata_that_lies_is_named_by_the_merge() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("sorted-andorra.osm.pbf");
    let (src, blobs) = index(&input);
    let b = &blobs[0];
    assert_eq!(b.first.kind, Kind::Node);
    let (first, last) = (key(Kind::Way, 5, 0), key(Kind::Way, 9, 4));
    // pbf-copy --add-indexdata writes the frame keys the plan gives it:
    // ways, for a blob of nodes.
    let lying = CopyOp {
        source: 0,
        offset: b.offset,
        length: b.length,
        blobs: 1,
        first,
        last,
        elements: b.counts.total(),
        duplicate_ids: 0,
        frames: vec![FrameKeys {
            length: b.length,
            first,
            last,
            counts: b.counts,
            duplicate_ids: 0,
            negative_ids: false,
        }],
    };
    let liar = dir.path().join("liar.osm.pbf");
    let plan = plan_bytes(&plan_header(&src), &[PlanRecord::Copy(lying)], true);
    let mut c = bin("pbf-copy");
    c.args(["--add-indexdata", "-o"]).arg(&liar);
    let o = run_with_input(c, &plan);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A merge op of that blob, with the keys its indexdata claims.
    let frame = PbfFile::open(&liar)
        .expect("open")
        .headers()
        .nth(1)
        .expect("a data frame")
        .expect("frame");
    let merge = MergeOp {
        inputs: vec![MergeInput {
            source: 0,
            offset: frame.offset,
            length: frame.frame_len(),
            first,
            last,
            sorted: true,
            elements: b.counts.total(),
        }],
        first,
        last,
        elements: b.counts.total(),
    };
    let plan_path = dir.path().join("merge.jsonl");
    let liar_src = index(&liar).0;
    std::fs::write(
        &plan_path,
        plan_bytes(&plan_header(&liar_src), &[PlanRecord::Merge(merge)], true),
    )
    .expect("write plan");
    let says = format!(
        "indexdata of blob at offset {} of {} claims w5 v0..w9 v4, the blob holds {}..",
        frame.offset,
        liar.canonicalize().expect("canonical").display(),
        Key::from(b.first)
    );
    let spool = dir.path().join("spool.pbf");
    refusal(
        "pbf-merge",
        &[&plan_path, Path::new("--spool"), &spool],
        &liar,
        &says,
    )
    .check();
}

/// Run `c` in `dir`; it must fail with exit 1 and a line naming `name` as
/// given (relative), never by the directory it lies in.
fn fails_naming(mut c: std::process::Command, dir: &Path, name: &str, says: &str) -> String {
    c.current_dir(dir);
    let what = format!("{:?}", c.get_args().collect::<Vec<_>>());
    let o = run(c);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{what}: {err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(first.contains(&format!("{name}{says}")), "{what}: {err}");
    let abs = dir.display().to_string();
    assert!(!err.contains(&abs), "{what}: names {abs}: {err}");
    err
}

/// Errors name an input as the user typed it: pbf-index as its argument,
/// the later stages as the index stream's `given` name, not by the
/// absolute path the stream records for opening it.
#[test]
fn errors_name_inputs_as_typed_relative_paths_too() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    std::fs::create_dir(d.join("bad")).expect("mkdir");
    let bytes = std::fs::read(data("sorted-andorra.osm.pbf")).expect("read");
    std::fs::write(d.join("bad/trunc.osm.pbf"), &bytes[..50_000]).expect("write");
    let trunc = "bad/trunc.osm.pbf";
    let mut c = bin("pbf-index");
    c.args(["-q", trunc]);
    fails_naming(c, d, trunc, ": blob at offset ");
    let mut c = pbf_sort();
    c.args(["-q", trunc, "-o", "out.osm.pbf"]);
    let err = fails_naming(c, d, trunc, ": blob at offset ");
    assert!(
        err.contains("index stage 'pbf-index' failed (exit 1)"),
        "{err}"
    );
    assert!(!d.join("out.osm.pbf").exists());
    // Downstream: the index stream carries the name as given.
    let over = "bad/over.osm.pbf";
    std::fs::copy(data("unsorted-vex.osm.pbf"), d.join(over)).expect("copy");
    let mut c = bin("pbf-index");
    c.current_dir(d).args(["-q", over]);
    let index = succeeds(c);
    let text = String::from_utf8_lossy(&index);
    assert!(text.contains(&format!("\"given\":\"{over}\"")), "{text}");
    let mut c = bin("pbf-index");
    c.current_dir(d).args(["-q", over, over]);
    let twice = succeeds(c);
    let o = run_with_input(bin("pbf-overlap"), &twice);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{over} is indexed twice")), "{err}");
    assert!(!err.contains(&d.display().to_string()), "{err}");
    // A merge op whose first input claims fewer keys than its blob holds.
    let plan = String::from_utf8(succeeds_with(bin("pbf-overlap"), &index)).expect("utf-8");
    let mut lines: Vec<String> = plan.lines().map(str::to_owned).collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(r#"{"type":"merge""#))
        .expect("a merge op");
    let mut op: serde_json::Value = serde_json::from_str(&lines[at]).expect("json");
    op["inputs"][0]["first"] = op["inputs"][0]["last"].clone();
    lines[at] = op.to_string();
    write_lines(&d.join("edited.jsonl"), &lines.iter().collect::<Vec<_>>());
    let mut c = bin("pbf-merge");
    c.args(["-q", "edited.jsonl", "--spool", "spool.pbf"]);
    fails_naming(c, d, over, ": blob at offset ");
    // The input changed after it was indexed.
    std::fs::write(d.join("plan.jsonl"), &plan).expect("write plan");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(d.join(over))
        .expect("open");
    std::io::Write::write_all(&mut f, b"\0").expect("append");
    let mut c = bin("pbf-merge");
    c.args(["-q", "plan.jsonl", "--spool", "spool.pbf"]);
    fails_naming(c, d, over, ": changed since it was indexed");
    for copier in ["pbf-copy", "pbf-reflink"] {
        let mut c = bin(copier);
        c.args(["-q", "plan.jsonl", "-o", "out.osm.pbf"]);
        fails_naming(c, d, over, ": changed since it was indexed");
    }
    assert!(!d.join("out.osm.pbf").exists() && !d.join("spool.pbf").exists());
}

/// A stream pretty-printed by `jq .` is refused at its first line with
/// the reason and the fix (`jq -c`), which then works.
#[test]
fn a_pretty_printed_stream_is_refused_naming_jq_c() {
    let mut c = bin("pbf-index");
    c.arg("-q").arg(data("unsorted-type-regression.osm.pbf"));
    let index = succeeds(c);
    let mut jq = tool("jq", "jq", "the jq tests");
    jq.arg(".");
    let pretty = succeeds_with(jq, &index);
    assert!(
        pretty.starts_with(b"{\n"),
        "jq . spreads records over lines"
    );
    let o = run_with_input(bin("pbf-overlap"), &pretty);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(
            "pbf-overlap: error: standard input: line 1: a JSON object that does not end on its line"
        ) && err.contains("stream records are one JSON object per line (jq -c keeps them so"),
        "{err}"
    );
    let mut jq = tool("jq", "jq", "the jq tests");
    jq.arg("-c").arg(".");
    let compact = succeeds_with(jq, &pretty);
    let plan = succeeds_with(bin("pbf-overlap"), &compact);
    assert!(plan.ends_with(b"}\n"), "a plan from the jq -c stream");
}
