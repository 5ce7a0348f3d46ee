//! What the tools and the driver say when they refuse something, in one
//! place. A refusal ends in one line, `TOOL: error: ...`, that names what
//! was refused and says why in words (no Rust Debug output such as
//! `Key { kind: .. }` or `Some(..)`), with nothing left behind, as
//! `util::refused` checks (the driver adds its line naming a stage that
//! refused its input). The tables of [`Refusal`] rows hold the
//! refusals before any work (exit 2): option values, paths and files that
//! are not PBF, in the driver and in every tool. The tests below them
//! build what is refused later (exit 1): plans out of output order, blobs
//! whose indexdata lies, corrupt zlib data, a raw_size that disagrees with
//! the data, edited streams; then the refusals that need a standard stream
//! of their own (closed, a file the shell made, a pipe) or a PATH without
//! the toolkit, and the hints of not-PBF streams, run as given.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use pbf_format::compress::blob_data;
use pbf_format::frame::PbfFile;
use pbf_format::wire::{WireType, put_bytes, put_key, put_varint};
use pbf_format::{Key, Kind};
use pbf_stream::{CopyOp, FrameKeys, KeyRecord, MergeInput, MergeOp, PlanRecord};

use crate::util::*;

/// One refusal: a tool (or the driver), its arguments, its exit status and
/// what its one line must hold.
struct Refusal {
    tool: &'static str,
    args: Vec<OsString>,
    code: i32,
    says: Vec<String>,
}

impl Refusal {
    fn new<A: AsRef<OsStr>>(tool: &'static str, args: &[A], code: i32, says: &[&str]) -> Self {
        Refusal {
            tool,
            args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
            code,
            says: says.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Run it in `dir`: refused in one line starting with the tool's name,
    /// no stage started (a replaced index stage would leave a mark), and
    /// `dir` left as it was, inputs and all.
    fn check(&self, dir: &Path) {
        let stage = tempfile::tempdir().expect("dir");
        let (script, mark) = marker_stage(stage.path());
        let mut c = match self.tool {
            "pbf-sort" => pbf_sort(),
            tool => bin(tool),
        };
        c.current_dir(dir)
            .args(&self.args)
            .env("PBF_SORT_INDEX", &script);
        let what = format!("{} {:?}", self.tool, self.args);
        let before = holdings(dir);
        let tool = format!("{}: error: ", self.tool);
        let mut says: Vec<&str> = self.says.iter().map(String::as_str).collect();
        says.push(&tool);
        refused(&what, &run(c), self.code, &says);
        assert!(!mark.exists(), "{what}: a stage ran");
        assert!(holdings(dir) == before, "{what}: changed {}", dir.display());
    }
}

/// The driver refusing `args` before any work, in `dir`, with one line
/// holding `needle`.
pub(crate) fn refused_up_front(dir: &Path, args: &[&str], needle: &str) {
    Refusal::new("pbf-sort", args, 2, &[needle]).check(dir);
}

/// Every path under `dir` with what it holds (a link: its target).
fn holdings(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut all = BTreeMap::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("ls") {
            let path = e.expect("entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("stat");
            let held = if meta.is_symlink() {
                let target = std::fs::read_link(&path).expect("readlink");
                target.into_os_string().into_encoded_bytes()
            } else if meta.is_dir() {
                dirs.push(path.clone());
                b"a directory".to_vec()
            } else {
                std::fs::read(&path).expect("read")
            };
            all.insert(path, held);
        }
    }
    all
}

/// An executable script at `path`.
fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A stage replacement that only records that it ran.
fn marker_stage(dir: &Path) -> (PathBuf, PathBuf) {
    let marker = dir.join("a-stage-ran");
    let script = dir.join("record-stage");
    write_script(
        &script,
        &format!("#!/bin/sh\ntouch '{}'\n", marker.display()),
    );
    (script, marker)
}

/// Write `src` as `format` (an osmium output format) to `out`.
fn osmium_cat(src: &Path, format: &str, out: &Path) {
    let mut c = osmium();
    c.arg("cat")
        .arg(src)
        .args(["-f", format, "-O", "-o"])
        .arg(out);
    succeeds(c);
}

/// Files of no known kind whose first bytes cannot start a PBF frame.
fn unknown_data() -> [(&'static str, Vec<u8>); 6] {
    // Bytes of a fixed xorshift sequence: the first two are not zero.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let random: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    assert!(random[0] != 0 && random[1] != 0);
    [
        ("t.txt", b"hello world\n".to_vec()),
        ("data.csv", b"id,lat,lon\n1,1.5,2.5\n".to_vec()),
        ("data.json", b"{\"type\": \"FeatureCollection\"}\n".to_vec()),
        ("README.md", b"# Title\n\nSome words.\n".to_vec()),
        ("run.sh", b"#!/bin/sh\necho hi\n".to_vec()),
        ("random.bin", random),
    ]
}

/// The directory the tables' rows run in: `in.osm.pbf` (a real file),
/// `plan.jsonl` (a sorted file's plan), a directory `d`, `exists.osm.pbf`,
/// an empty `taken`, `empty.osm.pbf`, a link `dangling.osm.pbf` to nothing,
/// and files that are not PBF: `in.osm`, `in.opl`, `in.osm.bz2`,
/// `in.osm.gz`, `in.o5m` and those of [`unknown_data`].
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    std::fs::copy(data("sorted-andorra.osm.pbf"), d.join("in.osm.pbf")).expect("copy");
    let o = overlap(&[], &index_stream(&data("sorted-kualalumpur.osm.pbf")));
    assert!(o.status.success());
    std::fs::write(d.join("plan.jsonl"), &o.stdout).expect("write plan");
    std::fs::create_dir(d.join("d")).expect("mkdir");
    std::fs::write(d.join("exists.osm.pbf"), b"keep").expect("write");
    std::fs::write(d.join("taken"), b"").expect("write");
    std::fs::write(d.join("empty.osm.pbf"), b"").expect("write");
    std::os::unix::fs::symlink("gone/x.osm.pbf", d.join("dangling.osm.pbf")).expect("link");
    let src = data("unsorted-type-regression.osm.pbf");
    for (file, format) in [
        ("in.osm", "osm"),
        ("in.opl", "opl"),
        ("in.osm.bz2", "osm.bz2"),
        ("in.osm.gz", "osm.gz"),
    ] {
        osmium_cat(&src, format, &d.join(file));
    }
    std::fs::write(d.join("in.o5m"), b"\xff\xe0\x04o5m2\xff\xdc").expect("write o5m start");
    for (file, bytes) in unknown_data() {
        std::fs::write(d.join(file), bytes).expect("write");
    }
    dir
}

/// Check every row in a fresh [`scratch`] directory.
fn check_all(rows: &[Refusal]) {
    let dir = scratch();
    for row in rows {
        row.check(dir.path());
    }
}

/// The driver with `args`, refused before any work in one line holding
/// each of `says`.
fn driver(args: &[&str], says: &[&str]) -> Refusal {
    Refusal::new("pbf-sort", args, 2, says)
}

/// Option values, checked before any stage starts, also under `--dry-run`.
fn option_values() -> Vec<Refusal> {
    let cases: &[(&[&str], &str)] = &[
        (&["--compression", "gzip"], "'--compression <C>'"),
        (&["--memory", "1X"], "1X"),
        (&["--compression=zstd:99"], "'--compression <C>'"),
        (&["--memory", "1X"], "'--memory <SIZE>'"),
        (&["--memory", "0"], "64k"),
        (&["--jobs", "x"], "'--jobs <N>'"),
        (&["-j", "-1"], "'--jobs <N>'"),
        (&["-j", "0"], "'0'"),
        (
            &["--copier", "fast"],
            "invalid value 'fast' for '--copier <WHICH>'",
        ),
        (
            &["-q", "-v"],
            "the argument '--quiet' cannot be used with '--verbose",
        ),
        (&["-qv"], "cannot be used with"),
        (&["--merge-cmd", "pbf-mrge"], "merge stage 'pbf-mrge'"),
        (&["--bogus"], "unexpected argument '--bogus' found"),
        // A long option a letter away from one is named.
        (
            &["--lastest"],
            "unexpected argument '--lastest' found; a similar argument exists: '--latest'",
        ),
        (&["--ovewrite"], "a similar argument exists: '--overwrite'"),
        // An abbreviation of two options names both.
        (
            &["--over"],
            "option '--over' is ambiguous: it could be '--overwrite' or '--overlap-cmd'",
        ),
        (&["-Z"], "unexpected argument '-Z' found"),
        // One output, as for osmium and GNU sort.
        (
            &["-o", "other.osm.pbf"],
            "'--output <OUTPUT>' cannot be used multiple times",
        ),
        (
            &["--output=-"],
            "'--output <OUTPUT>' cannot be used multiple times",
        ),
    ];
    let mut rows = vec![];
    for (extra, needle) in cases {
        for dry in [&[][..], &["--dry-run"][..]] {
            let args = [*extra, dry, &["in.osm.pbf", "-o", "o.osm.pbf"][..]].concat();
            rows.push(driver(&args, &[*needle]));
        }
    }
    rows
}

/// Paths, checked before any stage starts, named with the cause.
fn paths() -> Vec<Refusal> {
    let cases: &[(&[&str], &str)] = &[
        (
            &["in.osm.pbf", "-o", "/nonexistent-dir/x.osm.pbf"],
            "/nonexistent-dir: no such directory",
        ),
        (&["/nonexistent.osm.pbf", "-o", "x.osm.pbf"], "no such file"),
        (
            &["missing.osm.pbf", "-o", "x.osm.pbf"],
            "missing.osm.pbf: no such file",
        ),
        (&["in.osm.pbf", "-o", "d/"], "is a directory"),
        (
            &["in.osm.pbf", "-O", "-o", "d"],
            "d: is a directory; name the output file",
        ),
        (&["in.osm.pbf", "-o", "nodir/"], "there is none"),
        (
            &["in.osm.pbf", "-o", "exists.osm.pbf"],
            "exists (use -O/--overwrite",
        ),
        (
            &["in.osm.pbf", "-o", "in.osm.pbf"],
            "the output is also an input",
        ),
        (
            &["in.osm.pbf", "-O", "-o", "in.osm.pbf"],
            "the output is also an input",
        ),
        (
            &[
                "--tmpdir",
                "/nonexistent-dir",
                "in.osm.pbf",
                "-o",
                "x.osm.pbf",
            ],
            "/nonexistent-dir: no such directory (--tmpdir)",
        ),
        (
            &["--tmpdir", "in.osm.pbf", "in.osm.pbf", "-o", "x.osm.pbf"],
            "not a directory (--tmpdir)",
        ),
        (
            &["in.osm.pbf", "in.osm.pbf", "-o", "x.osm.pbf"],
            "in.osm.pbf: given twice: its objects would be written twice",
        ),
        (
            &["in.osm.pbf", "./in.osm.pbf", "-o", "x.osm.pbf"],
            "./in.osm.pbf (as in.osm.pbf): given twice",
        ),
        (
            &["--tmpdir", "/proc", "in.osm.pbf", "-o", "x.osm.pbf"],
            "/proc: holds the system's names for devices and processes, not files (--tmpdir)",
        ),
        (
            &[
                "--summary-json",
                "/dev/run.json",
                "in.osm.pbf",
                "-o",
                "x.osm.pbf",
            ],
            "/dev: holds the system's names for devices and processes",
        ),
        (
            &["--keep-plan", "/dev", "in.osm.pbf", "-o", "x.osm.pbf"],
            "(--keep-plan)",
        ),
        (
            &[
                "--keep-plan",
                "taken/plans",
                "in.osm.pbf",
                "-o",
                "x.osm.pbf",
            ],
            "--keep-plan",
        ),
        (
            &["in.osm.pbf", "-o", "dangling.osm.pbf"],
            "a symbolic link to a file that does not exist",
        ),
        (
            &["-", "-", "-o", "x.osm.pbf"],
            "standard input (-) can be given only once",
        ),
        (
            &["--check", "in.osm.pbf", "-o", "-"],
            "--check needs -o FILE to read back",
        ),
        (
            &["--check", "in.osm.pbf"],
            "--check needs -o FILE to read back",
        ),
    ];
    let mut rows: Vec<Refusal> = cases
        .iter()
        .map(|(args, needle)| driver(&[&["-q"][..], *args].concat(), &[*needle]))
        .collect();
    // Output names that promise another format.
    for out in ["x.osm", "x.osm.bz2", "x.opl", "x.o5m", "x.osh", "x.pbf.gz"] {
        rows.push(driver(&["in.osm.pbf", "-o", out], &[out, ".osm.pbf"]));
    }
    rows.push(driver(&[], &[]));
    rows
}

#[test]
fn the_driver_refuses_options_and_paths_before_any_stage() {
    check_all(
        &[option_values(), paths()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>(),
    );
    // A name without a known suffix is allowed.
    let dir = tempfile::tempdir().expect("dir");
    let plain = dir.path().join("sorted");
    let mut c = pbf_sort();
    c.arg("-q")
        .arg(data("unsorted-vex.osm.pbf"))
        .arg("-o")
        .arg(&plain);
    succeeds(c);
    assert!(plain.is_file());
}

/// Every tool's usage and paths: the same rule (exit 2, one line starting
/// with the tool's name and `error:`) and the driver's words.
#[test]
fn every_tool_refuses_before_any_work_in_the_drivers_words() {
    let tools = [
        "pbf-index",
        "pbf-overlap",
        "pbf-merge",
        "pbf-copy",
        "pbf-reflink",
    ];
    let mut rows = vec![];
    for tool in tools {
        let out: &[&str] = match tool {
            "pbf-copy" | "pbf-reflink" => &["-o", "out.osm.pbf"],
            _ => &[],
        };
        let input: &[&str] = if tool == "pbf-index" {
            &["in.osm.pbf"]
        } else {
            &[]
        };
        rows.push(Refusal::new(tool, &["--bogus"], 2, &["'--bogus'"]));
        for flags in [["-q", "-v"], ["--verbose", "--quiet"]] {
            let args = [&flags[..], input, out].concat();
            rows.push(Refusal::new(tool, &args, 2, &["cannot be used with"]));
        }
        let args = [&["missing.jsonl"][..], out].concat();
        rows.push(Refusal::new(tool, &args, 2, &["missing.jsonl"]));
        let args = [&["missing.osm.pbf"][..], out].concat();
        rows.push(Refusal::new(
            tool,
            &args,
            2,
            &["missing.osm.pbf: no such file"],
        ));
    }
    let missing = ["--validate", "missing.osm.pbf"];
    rows.push(Refusal::new(
        "pbf-index",
        &missing,
        2,
        &["missing.osm.pbf: no such file"],
    ));
    for tool in ["pbf-index", "pbf-merge", "pbf-copy"] {
        rows.push(Refusal::new(tool, &["-j", "0", "in.osm.pbf"], 2, &["'0'"]));
    }
    let memory = ["--memory", "0"];
    rows.push(Refusal::new("pbf-merge", &memory, 2, &["64k"]));
    for copier in ["pbf-copy", "pbf-reflink"] {
        let exists = ["-o", "exists.osm.pbf"];
        rows.push(Refusal::new(copier, &exists, 2, &["exists (use -O"]));
        for (out, says) in [
            ("d", "d: is a directory; name the output file"),
            ("d/", "d/: is a directory; name the output file"),
            ("gone/", "gone/: names a directory, and there is none"),
            ("gone/x.osm.pbf", "gone: no such directory (output)"),
        ] {
            let args = ["-O", "plan.jsonl", "-o", out];
            rows.push(Refusal::new(copier, &args, 2, &[says]));
        }
    }
    // A --spool that cannot be created, refused before the plan is read.
    let spools = [
        ("gone/x.spool", "gone: no such directory (--spool)"),
        ("taken", "taken: exists (--spool names a file to create)"),
    ];
    for (spool, says) in spools {
        let args = ["--spool", spool, "plan.jsonl"];
        rows.push(Refusal::new("pbf-merge", &args, 2, &[says]));
    }
    check_all(&rows);
}

/// Files that are not PBF are named for what they are, with the command
/// that makes a PBF of them, before any work, by the driver and the index
/// stage (also under `--validate`).
#[test]
fn files_that_are_not_pbf_are_named_for_what_they_are() {
    let mut rows = vec![];
    for (file, kind, fix) in [
        ("in.osm", "OSM XML", "osmium cat"),
        ("in.opl", "OPL text", "osmium cat"),
        ("in.osm.bz2", "bzip2-compressed", "bzip2 -dc"),
        ("in.osm.gz", "gzip-compressed", "gzip -dc"),
        ("in.o5m", "o5m", "osmium cat"),
    ] {
        let says = [file, kind, fix, "not PBF"];
        rows.push(driver(&[file, "-o", "out.osm.pbf"], &says));
        rows.push(Refusal::new("pbf-index", &[file], 2, &[file, kind]));
    }
    // Named right after the tool, as given.
    let empty = "empty.osm.pbf: empty (0 bytes), not a PBF file";
    let says = format!("pbf-index: error: {empty}");
    rows.push(Refusal::new("pbf-index", &["empty.osm.pbf"], 2, &[&says]));
    let says = format!("pbf-sort: error: {empty}");
    rows.push(driver(&["empty.osm.pbf", "-o", "out.osm.pbf"], &[&says]));
    for (file, _) in unknown_data() {
        let says = format!("pbf-index: error: {file}: unknown data, not a PBF file");
        for args in [["--validate", file], ["-q", file]] {
            rows.push(Refusal::new("pbf-index", &args, 2, &[&says]));
        }
        let says = format!("pbf-sort: error: {file}: unknown data, not a PBF file");
        rows.push(driver(&[file, "-o", "w.osm.pbf"], &[&says]));
    }
    check_all(&rows);
}

/// A refusal later than the start (exit 1) naming the file `names` (its
/// file name is enough), saying `says`.
fn refusal(tool: &'static str, args: &[&Path], names: &Path, says: &str) -> Refusal {
    Refusal::new(tool, args, 1, &[name(names).as_str(), says])
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
        .check(d);
    }
    let spool_arg = [Path::new("--spool"), &spool];
    let args = [&[swapped.as_path()][..], &spool_arg].concat();
    refusal("pbf-merge", &args, &swapped, order).check(d);
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
    refusal("pbf-overlap", &[&edited], &edited, &says).check(dir.path());
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
            refusal("pbf-index", &[&path], &path, &full).check(dir.path());
        } else {
            refusal("pbf-index", &[&path], &path, &says).check(dir.path());
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
    .check(dir.path());
}

/// Run `c` in `dir`; it must fail with exit 1 and a line naming `name` as
/// given (relative), never by the directory it lies in (the driver: then
/// its line naming the stage, and no `out.osm.pbf`). Returns stderr.
fn fails_naming(mut c: std::process::Command, dir: &Path, name: &str, says: &str) -> String {
    let driver = c.get_program().to_string_lossy().ends_with("/pbf-sort");
    c.current_dir(dir);
    let what = format!("{:?}", c.get_args().collect::<Vec<_>>());
    let o = run(c);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let want = format!("{name}{says}");
    match driver {
        true => fails_in_a_stage(&what, &o, &dir.join("out.osm.pbf"), &[&want]),
        false => refused(&what, &o, 1, &[&want]),
    };
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
/// A planner that reverses the order of its copy ops: its outputs hold every
/// object, but not in order, and the stages after it refuse its plans.
fn reversing_planner(dir: &Path) -> PathBuf {
    let script = dir.join("reversing-overlap");
    let text = format!(
        "#!/bin/sh\nset -e\nplan=$(mktemp)\n{} \"$@\" > \"$plan\"\n\
         head -n 1 \"$plan\"; sed '1d;$d' \"$plan\" | tac; tail -n 1 \"$plan\"\nrm -f \"$plan\"\n",
        bin_quoted("pbf-overlap")
    );
    write_script(&script, &text);
    script
}

#[test]
fn a_reversed_plan_is_refused_without_check() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let planner = reversing_planner(d);
    let input = d.join("permuted.osm.pbf");
    permute(&data("sorted-kualalumpur.osm.pbf"), &input, 7);
    let out = d.join("o.osm.pbf");
    let mut c = pbf_sort();
    c.args(["-q", "--overlap-cmd"])
        .arg(&planner)
        .arg(&input)
        .arg("-o")
        .arg(&out);
    let says = ["the ops are not in output order"];
    fails_in_a_stage("a reversed plan", &run(c), &out, &says);
}

/// Standard input cut short, or not PBF at all: one clean error naming
/// standard input (never the copy the driver saved it to), no output.
#[test]
fn a_pipe_that_ends_early_or_is_not_pbf_fails_naming_standard_input() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let bytes = std::fs::read(data("unsorted-vex.osm.pbf")).expect("read");
    let xml = b"<?xml version='1.0' encoding='UTF-8'?>\n<osm version=\"0.6\">\n</osm>\n";
    let cuts: [(&[u8], &str); 4] = [
        (&[], "empty"),
        (&bytes[..100], "truncated"),
        (&bytes[..bytes.len() / 3], "truncated"),
        (xml, "OSM XML"),
    ];
    for (input, says) in cuts {
        let out = d.join("o.osm.pbf");
        let mut c = pbf_sort();
        c.args(["-q", "-", "-o"]).arg(&out);
        let o = run_with_input(c, input);
        let err = String::from_utf8_lossy(&o.stderr);
        let what = format!("{} bytes", input.len());
        // Empty or not PBF at all is a usage error, as for a file.
        let code = if says == "truncated" { 1 } else { 2 };
        assert_eq!(o.status.code(), Some(code), "{what}: {err}");
        assert!(
            err.starts_with("pbf-index: error: standard input: ") && err.contains(says),
            "{what}: {err}"
        );
        assert!(
            !err.contains(".pbf-sort."),
            "{what}: names the saved copy: {err}"
        );
        assert!(
            err.contains("pbf-sort: error: index stage 'pbf-index' failed (exit "),
            "{what}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(entries(d).is_empty(), "{what}: left {:?}", entries(d));
    }
}

/// A closed standard output (`>&-`) is refused where the run would write
/// there (`-o -`, `--dry-run`, `--help`, `--version`): the stages would
/// find /dev/null in its place, so the data would go nowhere and the run
/// would succeed.
#[test]
fn a_closed_standard_output_is_refused_where_the_run_writes_there() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("dir");
    let input = data("unsorted-vex.osm.pbf");
    let out = dir.path().join("o.osm.pbf");
    let cases: [(&[&OsStr], &str); 4] = [
        (&["-o".as_ref(), "-".as_ref()], "-o - has nowhere to go"),
        (
            &["--dry-run".as_ref(), "-o".as_ref(), out.as_os_str()],
            "--dry-run has nowhere to go",
        ),
        (&["--help".as_ref()], "the help has nowhere to go"),
        (&["--version".as_ref()], "the version has nowhere to go"),
    ];
    for (args, why) in cases {
        let mut c = pbf_sort();
        c.arg(&input)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: close(2) is async-signal-safe.
        unsafe {
            c.pre_exec(|| {
                nix::libc::close(1);
                Ok(())
            });
        }
        let o = c.output().expect("pbf-sort");
        assert_eq!(
            refused(&format!("{args:?}"), &o, 2, &[]),
            format!("pbf-sort: error: standard output is closed: {why}")
        );
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    }
}

/// A program of the run that is not there (a fresh checkout before `make
/// build`) is named with how to get it, before anything runs: the
/// toolkit's own by name, a replacement by its command as given.
#[test]
fn a_missing_stage_program_is_named_with_how_to_get_it() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let input = data("unsorted-vex.osm.pbf");
    let input = input.to_str().expect("utf-8");
    let (marker_script, marker) = marker_stage(d);
    let marker_script = marker_script.to_str().expect("utf-8").to_owned();
    // A PATH with the toolkit's programs but `missing`, and the test's own
    // directories that hold none of them (bash, coreutils).
    let system: Vec<PathBuf> = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .filter(|dir| !dir.join("pbf-index").exists())
        .collect();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_pbf-index"))
        .parent()
        .expect("dir");
    let run_without = |missing: &str, args: &[&str]| {
        let tools = d.join(format!("without-{missing}"));
        std::fs::create_dir_all(&tools).expect("mkdir");
        for t in [
            "pbf-index",
            "pbf-overlap",
            "pbf-merge",
            "pbf-copy",
            "pbf-reflink",
        ] {
            if t != missing && !tools.join(t).exists() {
                std::os::unix::fs::symlink(bin_dir.join(t), tools.join(t)).expect("link");
            }
        }
        let mut c = pbf_sort();
        let path = std::env::join_paths(std::iter::once(tools).chain(system.iter().cloned()));
        c.env("PATH", path.expect("PATH"))
            .env("PBF_SORT_INDEX", &marker_script)
            .args(args);
        run(c)
    };
    let out = d.join("o.osm.pbf");
    let out = out.to_str().expect("utf-8");
    for missing in ["pbf-index", "pbf-merge", "pbf-copy", "pbf-reflink"] {
        for args in [
            &["-q", input, "-o", out][..],
            &["--dry-run", "-j", "2", input, "-o", out],
        ] {
            let o = run_without(missing, args);
            assert_eq!(
                refused(&format!("{missing} {args:?}"), &o, 2, &[]),
                format!(
                    "pbf-sort: error: {missing} not found beside the driver or on PATH; build the \
                     toolkit (make build, then put target/release on PATH, or make install) or \
                     install the Nix package"
                ),
                "{args:?}"
            );
            assert!(!marker.exists(), "{missing}: a stage ran");
        }
    }
    let o = run_without("pbf-index", &["--version"]);
    refused(
        "--version",
        &o,
        2,
        &["pbf-index not found beside the driver"],
    );
    // A replacement's command, named as given, before the toolkit asks
    // about the inputs.
    let o = run_without(
        "none",
        &["--overlap-cmd", "./my-planner -x", input, "-o", out],
    );
    assert_eq!(
        refused("--overlap-cmd", &o, 2, &[]),
        "pbf-sort: error: planning stage './my-planner -x': ./my-planner: command not found \
         (see 'pbf-sort --help')"
    );
    assert!(!marker.exists() && entries(d).iter().all(|e| !e.starts_with(".pbf-sort")));
}

/// Without -o, the message says how to write to standard output, and
/// that a file the shell made for `>` is left empty.
#[test]
fn no_output_names_o_dash_and_the_file_the_shell_made() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("unsorted-vex.osm.pbf");
    let mut c = pbf_sort();
    c.arg(&input).stdout(Stdio::piped());
    assert_eq!(
        refused("no -o", &run(c), 2, &[]),
        "pbf-sort: error: no output given (-o OUTPUT, or -o - for standard output) (see \
         'pbf-sort --help')"
    );
    // pbf-sort in.osm.pbf > out.osm.pbf
    let shell_made = dir.path().join("out.osm.pbf");
    let mut c = pbf_sort();
    c.arg(&input)
        .stdout(std::fs::File::create(&shell_made).expect("create"));
    let o = c.output().expect("run");
    assert_eq!(
        refused("> out.osm.pbf", &o, 2, &[]),
        "pbf-sort: error: no output given (-o OUTPUT, or -o - for standard output: the shell's \
         '>' made that file, left empty) (see 'pbf-sort --help')"
    );
    assert_eq!(std::fs::metadata(&shell_made).expect("meta").len(), 0);
    // As it says: -o - writes the sorted file to standard output.
    let want = dir.path().join("want.osm.pbf");
    let mut c = pbf_sort();
    c.arg("-q").arg(&input).arg("-o").arg(&want);
    succeeds(c);
    let mut c = pbf_sort();
    c.args(["-q", "-o", "-"])
        .arg(&input)
        .stdout(std::fs::File::create(&shell_made).expect("create"));
    assert!(c.status().expect("run").success());
    assert_eq!(
        std::fs::read(&shell_made).expect("read"),
        std::fs::read(&want).expect("read")
    );
}

/// Run `command` with bash in `dir`, our tools first on PATH; it must
/// succeed.
fn bash_succeeds(command: &str, dir: &Path) {
    let o = std::process::Command::new("bash")
        .args(["-o", "pipefail", "-c", command])
        .current_dir(dir)
        .env("PATH", tools_path())
        .output()
        .expect("bash");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{command}: {err}");
}

/// The command a not-PBF line gives after `after`, up to `;` or the end.
fn hinted<'a>(line: &'a str, after: &str) -> &'a str {
    let from = line.find(after).map(|i| i + after.len());
    let from = from.unwrap_or_else(|| panic!("no {after:?} in {line}"));
    let rest = line[from..].trim_end();
    rest.split(';').next().expect("a command")
}

/// No temporary directory of the driver's is left in `dir`.
fn no_temporaries(dir: &Path) -> bool {
    entries(dir).iter().all(|e| !e.starts_with(".pbf-sort"))
}

/// XML, compressed or no data on standard input is no PBF either: exit 2,
/// and the hint for standard input is a command for a stream, which works
/// when the stream is put where it says `...`.
#[test]
fn streams_that_are_not_pbf_exit_2_with_a_working_hint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let src = data("unsorted-type-regression.osm.pbf");
    let out = d.join("out.osm.pbf");
    // XML, and bzip2-compressed PBF, on standard input.
    let xml = d.join("in.osm");
    osmium_cat(&src, "osm", &xml);
    let bz2 = d.join("in.osm.pbf.bz2");
    bash_succeeds(&format!("bzip2 -c {} > in.osm.pbf.bz2", src.display()), d);
    let cases = [
        (
            &xml,
            "OSM XML",
            "convert it: ",
            "... | osmium cat -F xml - -f pbf -o - | ",
        ),
        (
            &bz2,
            "bzip2-compressed",
            "decompress it: ",
            "... | bzip2 -dc | pbf-sort -",
        ),
    ];
    for (input, kind, after, fix) in cases {
        let bytes = std::fs::read(input).expect("read");
        // pbf-index - reads standard input when it is a regular file.
        let mut c = bin("pbf-index");
        c.arg("-").stdin(std::fs::File::open(input).expect("open"));
        let index = c.output().expect("pbf-index");
        let line = refused("pbf-index -", &index, 2, &[fix]) + "\n";
        let want = format!("pbf-index: error: standard input: this is {kind}");
        assert!(line.starts_with(&want), "{line}");
        assert!(!line.contains("osmium cat standard input"), "{line}");
        let mut c = pbf_sort();
        c.args(["-q", "-", "-o"]).arg(&out);
        let sort = run_with_input(c, &bytes);
        let err = String::from_utf8_lossy(&sort.stderr).into_owned();
        assert_eq!(sort.status.code(), Some(2), "pbf-sort -: {err}");
        let driver =
            "pbf-sort: error: index stage 'pbf-index' failed (exit 2); no output was written";
        assert_eq!(err, format!("{line}{driver}\n"));
        assert!(!out.exists() && no_temporaries(d));
        // The hint, with the stream where it says "...".
        let command = hinted(&line, after)
            .replacen("...", &format!("cat {}", input.display()), 1)
            .replace("OUT.osm.pbf", "hinted.osm.pbf");
        bash_succeeds(&command, d);
        assert_sorted_like_osmium(&d.join("hinted.osm.pbf"), &[&src], d, &command);
        std::fs::remove_file(d.join("hinted.osm.pbf")).expect("rm");
    }
    // Standard input that is empty.
    let mut c = pbf_sort();
    c.args(["-q", "-", "-o"]).arg(&out);
    let o = run_with_input(c, b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("pbf-index: error: standard input: empty (0 bytes), not a PBF"),
        "{err}"
    );
}

/// Files of no known kind (text, JSON, CSV, a script, random bytes) on
/// standard input, a pipe the driver saves for the index stage, are not
/// PBF either: exit 2 from the index stage. A PBF file cut short after its
/// first frame stays a damaged PBF file (exit 1 from the index stage).
#[test]
fn text_json_and_random_bytes_on_standard_input_are_not_pbf() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let out = d.join("w.osm.pbf");
    for (file, bytes) in unknown_data() {
        let mut c = pbf_sort();
        c.current_dir(d).args(["-q", "-", "-o", "w.osm.pbf"]);
        let o = run_with_input(c, &bytes);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file} on stdin: {err}");
        assert!(
            err.starts_with("pbf-index: error: standard input: unknown data, not a PBF file"),
            "{file} on stdin: {err}"
        );
        assert!(!out.exists() && no_temporaries(d), "{file}");
    }
    // A real PBF file cut short after its OSMHeader frame is PBF, damaged.
    let pbf = std::fs::read(data("unsorted-vex.osm.pbf")).expect("read");
    std::fs::write(d.join("cut.osm.pbf"), &pbf[..pbf.len() / 2]).expect("write");
    let mut c = bin("pbf-index");
    c.current_dir(d).args(["--validate", "cut.osm.pbf"]);
    succeeds(c);
    let mut c = bin("pbf-index");
    c.current_dir(d).args(["-q", "cut.osm.pbf"]);
    refused("cut.osm.pbf", &run(c), 1, &["cut.osm.pbf: blob at offset"]);
}

/// PBF compressed by bzip2, gzip, xz or zstd: the hint decompresses it
/// into `pbf-sort -` (and, were it XML, into osmium), and works as given.
#[test]
fn compressed_pbf_is_named_with_the_command_that_decompresses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let src = data("unsorted-type-regression.osm.pbf");
    for tool in ["bzip2", "gzip", "xz", "zstd"] {
        let suffix = match tool {
            "bzip2" => "bz2",
            "gzip" => "gz",
            other => other,
        };
        let file = format!("x.osm.pbf.{suffix}");
        bash_succeeds(&format!("{tool} -c < {} > {file}", src.display()), d);
        let mut c = pbf_sort();
        c.current_dir(d).args([&file, "-o", "out.osm.pbf"]);
        let o = c.output().expect("run");
        let pbf = format!("if it holds PBF, decompress it: {tool} -dc {file} | pbf-sort - -o OUT");
        let xml = format!("if OSM XML: {tool} -dc {file} | osmium cat -F xml - -f pbf -o - |");
        let kind = format!("{file}: this is {tool}-compressed data, not PBF");
        let line = refused(&file, &o, 2, &[&kind, &pbf, &xml]);
        let command = hinted(&line, "decompress it: ").replace("OUT.osm.pbf", "hinted.osm.pbf");
        bash_succeeds(&command, d);
        assert_sorted_like_osmium(&d.join("hinted.osm.pbf"), &[&src], d, &command);
        std::fs::remove_file(d.join("hinted.osm.pbf")).expect("rm");
        assert!(!d.join("out.osm.pbf").exists());
    }
}
