//! Test support of the pbf-sort crates, for their tests only (a
//! dev-dependency; nothing of the product depends on it): where the
//! repository's real PBF files are, and plans built from them in-process,
//! so a tool's `run()` can be tested without the stages before it.
//!
//! A plan here copies a file's data frames, one op per frame in file
//! order, with keys from the product's key scan; that is the plan of a
//! sorted file. Tests take it apart (ops dropped, reordered, a merge op or
//! a `header` record put in) to reach the paths they test.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgMatches, Command};

use pbf_format::compress::{Codec, blob_data, decode_blob};
use pbf_format::frame::{BlobType, PbfFile};
use pbf_format::header::{Header, read_file_header};
use pbf_format::scan::{Summary, scan_block};
use pbf_stream::{CopyOp, Counts, FrameKeys, PlanEnd, PlanHeader, PlanRecord, SourceRef, Writer};

/// The directory of real PBF files: `$PBF_SORT_TEST_DATA`, else the
/// repository's `tests/fixtures`.
pub fn data_dir() -> PathBuf {
    let dir = std::env::var_os("PBF_SORT_TEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures"));
    assert!(
        dir.is_dir(),
        "test data directory {} is missing (set PBF_SORT_TEST_DATA)",
        dir.display()
    );
    dir
}

/// A data file by name, as an absolute path.
pub fn data(name: &str) -> PathBuf {
    let p = data_dir().join(name);
    assert!(p.is_file(), "{} is missing", p.display());
    p.canonicalize().expect("canonical path")
}

/// Run a tool's `run()` in-process with `args` as its command line (after
/// the tool's name), parsed by its `command()`, as `pbf_cli::main` would.
/// Arguments the command refuses fail the test: those are checked on the
/// command itself.
pub fn run_tool(
    command: Command,
    run: fn(&ArgMatches) -> anyhow::Result<ExitCode>,
    args: &[&str],
) -> anyhow::Result<ExitCode> {
    let name = command.get_name().to_owned();
    let m = command
        .try_get_matches_from(std::iter::once(name.as_str()).chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?} do not parse: {e}"));
    run(&m)
}

/// A path as a command-line argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// The real file `name` copied into `dir` as `in.osm.pbf` (a test may
/// change it), and its index.
pub fn copied(dir: &Path, name: &str) -> Indexed {
    let path = dir.join("in.osm.pbf");
    std::fs::copy(data(name), &path).expect("copy the input");
    indexed(&path)
}

/// Names in a directory, sorted.
pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A file as the stages see it: its plan source, its OSMHeader, and its
/// data frames with their keys.
#[derive(Clone, Debug)]
pub struct Indexed {
    /// The plan's source record of the file (id 0, not a spool).
    pub source: SourceRef,
    /// The file's OSMHeader.
    pub header: Header,
    /// Offset of the first data frame: the length of the header frame.
    pub data_start: u64,
    /// Every OSMData frame holding objects, in file order: its offset,
    /// length and keys.
    pub blobs: Vec<(u64, u64, Summary)>,
}

/// Walk `path`'s frames and scan the keys of every data frame.
pub fn indexed(path: &Path) -> Indexed {
    let file = PbfFile::open(path).expect("open");
    let mut walk = file.headers();
    let (head, header) = read_file_header(&file, &mut walk).expect("OSMHeader");
    let mut blobs = Vec::new();
    for fh in walk {
        let fh = fh.expect("frame header");
        if fh.blob_type != BlobType::OsmData {
            continue;
        }
        let raw = decode_blob(&file.read_body(&fh).expect("read")).expect("blob");
        if let Some(summary) = scan_block(&raw).expect("key scan") {
            blobs.push((fh.offset, fh.frame_len(), summary));
        }
    }
    let meta = std::fs::metadata(path).expect("stat");
    Indexed {
        source: SourceRef {
            id: 0,
            file: pbf_stream::FileIdentity::of(path, &meta, None),
            spool: false,
        },
        header,
        data_start: head.frame_len(),
        blobs,
    }
}

/// A copy op of `source`'s frame at `offset`, `length` bytes long, with
/// the frame's keys when `with_frames` (`--add-indexdata` needs them).
pub fn copy_op(source: u32, (offset, length, s): (u64, u64, Summary), with_frames: bool) -> CopyOp {
    let counts = Counts::from_array(s.counts);
    let frames = with_frames
        .then_some(FrameKeys {
            length,
            first: s.first.into(),
            last: s.last.into(),
            counts,
            duplicate_ids: s.duplicate_ids,
            negative_ids: s.negative_ids,
        })
        .into_iter()
        .collect();
    CopyOp {
        source,
        offset,
        length,
        blobs: 1,
        first: s.first.into(),
        last: s.last.into(),
        elements: counts.total(),
        duplicate_ids: s.duplicate_ids,
        frames,
    }
}

/// The plan record for `sources`, with `header` marked sorted.
pub fn plan_header(sources: Vec<SourceRef>, header: &Header) -> PlanHeader {
    let mut header = header.clone();
    header.optional_features.retain(|f| !f.starts_with("Sort."));
    header.optional_features.push("Sort.Type_then_ID".into());
    PlanHeader {
        schema: pbf_stream::PLAN_SCHEMA.into(),
        version: pbf_stream::SCHEMA_VERSION,
        sources,
        header,
        early: false,
        copy_bytes: None,
    }
}

/// The plan of a sorted file: one copy op per data frame, in file order.
pub fn sorted_plan(file: &Indexed, with_frames: bool) -> (PlanHeader, Vec<PlanRecord>) {
    let ops = file
        .blobs
        .iter()
        .map(|&b| PlanRecord::Copy(copy_op(0, b, with_frames)))
        .collect();
    (plan_header(vec![file.source.clone()], &file.header), ops)
}

/// A plan as JSON Lines: the plan record, `records` (ops, `header` and
/// `unsorted` and `sorted` records), and, when `end`, the end record counting the ops.
pub fn plan_bytes(header: &PlanHeader, records: &[PlanRecord], end: bool) -> Vec<u8> {
    let mut w = Writer::new(Vec::new());
    w.write(&PlanRecord::Plan(header.clone())).expect("plan");
    let mut tally = PlanEnd::default();
    for r in records {
        match r {
            PlanRecord::Copy(c) => tally.add_copy(c),
            PlanRecord::Merge(m) => tally.add_merge(m),
            PlanRecord::Header(_) | PlanRecord::Unsorted(_) | PlanRecord::Sorted(_) => {}
            PlanRecord::Plan(_) | PlanRecord::End(_) => panic!("not a record inside a plan"),
        }
        w.write(r).expect("record");
    }
    if end {
        w.write(&PlanRecord::End(tally)).expect("end");
    }
    w.finish().expect("finish")
}

/// Write a plan (see [`plan_bytes`]) to `dir/plan.jsonl`; returns its path.
pub fn write_plan(dir: &Path, header: &PlanHeader, records: &[PlanRecord], end: bool) -> PathBuf {
    let path = dir.join("plan.jsonl");
    std::fs::write(&path, plan_bytes(header, records, end)).expect("write plan");
    path
}

/// What a written PBF file holds, read back.
#[derive(Debug)]
pub struct Written {
    /// Its OSMHeader.
    pub header: Header,
    /// Its data frames that hold objects (padding frames left out), as
    /// bytes, in file order.
    pub frames: Vec<Vec<u8>>,
    /// For each of those frames: the summary its BlobHeader's indexdata
    /// gives when it checks against the Blob, and the summary a key scan of
    /// the block gives.
    pub summaries: Vec<(Option<Summary>, Summary)>,
    /// For each of those frames: how its Blob stores the block.
    pub codecs: Vec<Codec>,
}

/// Read a PBF file back: header, data frames, what their indexdata says.
pub fn written(path: &Path) -> Written {
    let file = PbfFile::open(path).expect("open output");
    let mut walk = file.headers();
    let (_, header) = read_file_header(&file, &mut walk).expect("OSMHeader");
    let mut frames = Vec::new();
    let mut summaries = Vec::new();
    let mut codecs = Vec::new();
    for fh in walk {
        let fh = fh.expect("frame header");
        assert_eq!(fh.blob_type, BlobType::OsmData, "{}", path.display());
        let body = file.read_body(&fh).expect("read");
        let raw = decode_blob(&body).expect("blob");
        let Some(scanned) = scan_block(&raw).expect("key scan") else {
            continue;
        };
        codecs.push(blob_data(&body).expect("blob").compression);
        let from_indexdata = fh
            .indexdata
            .as_deref()
            .zip(fh.blob_start.as_ref())
            .and_then(|(ix, start)| pbf_format::indexdata::decode(ix, start));
        summaries.push((from_indexdata, scanned));
        frames.push(
            file.read_exact_at(fh.offset, fh.frame_len() as usize, "frame")
                .expect("read frame"),
        );
    }
    Written {
        header,
        frames,
        summaries,
        codecs,
    }
}

/// The data frames of `file` that hold objects, as bytes, in file order.
pub fn data_frames(file: &Indexed) -> Vec<Vec<u8>> {
    let f = PbfFile::open(&file.source.file.path).expect("open");
    file.blobs
        .iter()
        .map(|&(offset, length, _)| {
            f.read_exact_at(offset, length as usize, "frame")
                .expect("read frame")
        })
        .collect()
}
