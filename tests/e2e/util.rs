//! Helpers shared by the end-to-end tests: where the data and the binaries
//! are, running a command and capturing its output, inputs built from the
//! data files, and the osmium oracle.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use pbf_format::frame::{BlobType, PbfFile};
use pbf_format::header::{BBox, Header};
use pbf_stream::{
    BlobRecord, IndexRecord, OutputHeader, PlanEnd, PlanHeader, PlanRecord, SourceRecord,
    SourceRef, Writer,
};

/// The directory of real PBF files: `$PBF_SORT_TEST_DATA`, else the
/// repository's `tests/fixtures`.
pub fn data_dir() -> PathBuf {
    let dir = std::env::var_os("PBF_SORT_TEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"));
    assert!(
        dir.is_dir(),
        "test data directory {} is missing (set PBF_SORT_TEST_DATA)",
        dir.display()
    );
    dir
}

/// Every PBF file in the data directory, sorted by name.
pub fn all_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .expect("read data dir")
        .map(|e| {
            e.expect("dir entry")
                .path()
                .canonicalize()
                .expect("canonical path")
        })
        .filter(|p| p.extension().is_some_and(|e| e == "pbf"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no .pbf files in {}", data_dir().display());
    v
}

/// The valid files (not `bad-*`).
pub fn good_files() -> Vec<PathBuf> {
    all_files()
        .into_iter()
        .filter(|p| !name(p).starts_with("bad-"))
        .collect()
}

/// A data file by name.
pub fn data(name: &str) -> PathBuf {
    let p = data_dir().join(name);
    assert!(p.is_file(), "{} is missing", p.display());
    p.canonicalize().expect("canonical path")
}

/// File name as a string.
pub fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

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

/// Parse JSON Lines into typed records.
pub fn records<T: for<'de> serde::Deserialize<'de>>(jsonl: &[u8]) -> Vec<T> {
    jsonl
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice(l)
                .unwrap_or_else(|e| panic!("bad record {}: {e}", String::from_utf8_lossy(l)))
        })
        .collect()
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

/// Whether this process runs as root (the owner of `/proc/self` is its
/// effective user): mount tests skip, with the reason, when not.
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Make a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// `osmium cat -f opl` of a file.
pub fn opl(path: &Path) -> String {
    let mut c = osmium();
    c.args(["cat", "-f", "opl"]).arg(path);
    String::from_utf8(succeeds(c)).expect("opl is UTF-8")
}

/// `osmium fileinfo -e -j` of a file, parsed.
pub fn fileinfo(path: &Path) -> serde_json::Value {
    let mut c = osmium();
    c.args(["fileinfo", "-e", "-j"]).arg(path);
    serde_json::from_slice(&succeeds(c)).expect("fileinfo JSON")
}

/// Write `input` with its data frames in a seeded pseudo-random order.
pub fn permute(input: &Path, out: &Path, seed: u64) {
    let frames = PbfFile::open(input).expect("open").headers().count();
    let mut order: Vec<usize> = (0..frames - 1).collect();
    let mut x = seed | 1;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    reorder(input, out, &order);
}

/// Write `input`'s header frame, then its data frames in `order` (indexes
/// among the data frames, each once): a file whose blobs a sorted plan
/// copies out of file order.
pub fn reorder(input: &Path, out: &Path, order: &[usize]) {
    let f = PbfFile::open(input).expect("open");
    let frames: Vec<_> = f.headers().map(|h| h.expect("frame")).collect();
    let (head, data) = frames.split_first().expect("header frame");
    let mut bytes = f
        .read_exact_at(0, head.frame_len() as usize, "header")
        .expect("read");
    for &i in order {
        bytes.extend(
            f.read_exact_at(data[i].offset, data[i].frame_len() as usize, "frame")
                .expect("read"),
        );
    }
    std::fs::write(out, bytes).expect("write reordered");
}

/// The bytes of every data frame of a file.
pub fn data_frames(path: &Path) -> Vec<Vec<u8>> {
    let f = PbfFile::open(path).expect("open");
    f.headers()
        .map(|h| h.expect("frame"))
        .filter(|h| h.blob_type == BlobType::OsmData)
        .map(|h| {
            f.read_exact_at(h.offset, h.frame_len() as usize, "frame")
                .expect("read")
        })
        .collect()
}

/// Header frame, then every data frame of the data file `name` `reps` times
/// in a row: the copies overlap, so the sort merges.
pub fn overlapping_copies(name: &str, reps: usize, out: &Path) {
    let f = PbfFile::open(&data(name)).expect("open");
    let mut bytes = Vec::new();
    for (i, h) in f.headers().map(|h| h.expect("frame")).enumerate() {
        let frame = f
            .read_exact_at(h.offset, h.frame_len() as usize, "frame")
            .expect("read");
        for _ in 0..if i == 0 { 1 } else { reps } {
            bytes.extend_from_slice(&frame);
        }
    }
    std::fs::write(out, bytes).expect("write input");
}

/// `osmium sort` of the inputs, as OPL. Written as OPL directly: osmium's PBF
/// writer drops `visible=false` (the deleted flag of history objects) when
/// the output's header lacks HistoricalInformation; its OPL writer keeps what
/// it read.
pub fn osmium_sorted_opl(inputs: &[&Path], dir: &Path) -> String {
    let out = dir.join("osmium-sorted.opl");
    let mut c = osmium();
    c.arg("sort").args(inputs).arg("-o").arg(&out).arg("-O");
    succeeds(c);
    std::fs::read_to_string(&out).expect("read osmium OPL")
}

/// Check that `out` holds the objects `osmium sort` makes of `inputs`, that
/// osmium finds them ordered and the header says Sort.Type_then_ID; returns
/// osmium's fileinfo of `out`.
pub fn assert_sorted_like_osmium(
    out: &Path,
    inputs: &[&Path],
    dir: &Path,
    what: &str,
) -> serde_json::Value {
    assert_eq!(
        opl(out),
        osmium_sorted_opl(inputs, dir),
        "{what}: objects differ from osmium sort"
    );
    let info = fileinfo(out);
    assert_eq!(
        info["data"]["objects_ordered"],
        serde_json::Value::Bool(true),
        "{what}: not ordered"
    );
    let sorting = &info["header"]["option"]["sorting"];
    assert_eq!(
        sorting.as_str(),
        Some("Type_then_ID"),
        "{what}: header lacks Sort.Type_then_ID"
    );
    info
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

/// A file's index: its source record and blob records.
pub fn index(path: &Path) -> (SourceRecord, Vec<BlobRecord>) {
    let mut c = bin("pbf-index");
    c.arg("-q").arg(path);
    let mut source = None;
    let mut blobs = Vec::new();
    for rec in records::<IndexRecord>(&succeeds(c)) {
        match rec {
            IndexRecord::Source(s) => source = Some(s),
            IndexRecord::Blob(b) => blobs.push(b),
            IndexRecord::End(_) | IndexRecord::Header(_) => {}
        }
    }
    (source.expect("source record"), blobs)
}

/// The plan header for one source, with the sorted flag in its header.
pub fn plan_header(src: &SourceRecord) -> PlanHeader {
    let mut header = src.header.clone();
    header.optional_features.retain(|f| !f.starts_with("Sort."));
    header.optional_features.push("Sort.Type_then_ID".into());
    PlanHeader {
        schema: pbf_stream::PLAN_SCHEMA.into(),
        version: pbf_stream::SCHEMA_VERSION,
        sources: vec![SourceRef {
            id: 0,
            path: src.path.clone(),
            size: src.size,
            mtime: src.mtime,
            mtime_nsec: src.mtime_nsec,
            spool: false,
        }],
        header,
        early: false,
    }
}

/// A plan as JSON Lines: header, the ops, and (when `end`) the end record.
pub fn plan_bytes(header: &PlanHeader, ops: &[PlanRecord], end: bool) -> Vec<u8> {
    let mut w = Writer::new(Vec::new());
    w.write(&PlanRecord::Plan(header.clone())).expect("plan");
    let mut tally = PlanEnd::default();
    for op in ops {
        match op {
            PlanRecord::Copy(c) => tally.add_copy(c),
            PlanRecord::Merge(m) => tally.add_merge(m),
            _ => panic!("not an op"),
        }
        w.write(op).expect("op");
    }
    if end {
        w.write(&PlanRecord::End(tally)).expect("end");
    }
    w.finish().expect("finish")
}

/// The generator the header of [`with_header_record`] names.
pub const NEW_GENERATOR: &str = "a header record that replaced the early plan record's header";

/// `plan` with its plan record marked early and a `header` record after it
/// that replaces the output header: another generator (longer, so every
/// offset after the header moves) and a bounding box.
pub fn with_header_record(plan: &[u8]) -> Vec<u8> {
    let mut recs: Vec<PlanRecord> = records(plan);
    let PlanRecord::Plan(first) = &mut recs[0] else {
        panic!("a plan record first");
    };
    first.early = true;
    let header = Header {
        writingprogram: Some(NEW_GENERATOR.into()),
        bbox: Some(BBox {
            left: 1_000_000_000,
            right: 2_000_000_000,
            top: 43_000_000_000,
            bottom: 42_000_000_000,
        }),
        ..first.header.clone()
    };
    recs.insert(1, PlanRecord::Header(OutputHeader { header }));
    let mut w = Writer::new(Vec::new());
    for r in &recs {
        w.write(r).expect("record");
    }
    w.finish().expect("finish")
}

/// Check that `out`'s header is the one [`with_header_record`] put in and
/// that it holds `input`'s objects.
pub fn assert_header_record_taken(out: &Path, input: &Path) {
    let info = fileinfo(out);
    assert_eq!(
        info["header"]["option"]["generator"], NEW_GENERATOR,
        "{info}"
    );
    let bbox: Vec<f64> = info["header"]["boxes"][0]
        .as_array()
        .unwrap_or_else(|| panic!("no bounding box: {info}"))
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect();
    assert_eq!(bbox, [1.0, 42.0, 2.0, 43.0], "{info}");
    assert_eq!(opl(out), opl(input), "the data after the new header");
}
