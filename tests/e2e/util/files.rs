//! Files: where the real PBF files are (the test kit's data directory,
//! shared with the crates' own tests), inputs built from them (frames
//! reordered, permuted, repeated), and the directories a test looks into.

use std::path::{Path, PathBuf};
use std::process::Command;

use pbf_format::frame::{BlobType, PbfFile};
pub use pbf_testkit::{data, data_dir, entries};

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

/// File name as a string.
pub fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Write `input` with its data frames in a seeded random order: bench's
/// `pbf-gen permute`, so a test and a benchmark permute alike.
pub fn permute(input: &Path, out: &Path, seed: u64) {
    let mut output = pbf_bench_gen::output::create(out, &[input.to_path_buf()])
        .unwrap_or_else(|e| panic!("{}: {e:#}", out.display()));
    pbf_bench_gen::frames::permute(input, &mut output, seed)
        .unwrap_or_else(|e| panic!("permute {}: {e:#}", input.display()));
    pbf_bench_gen::output::finish(output).unwrap_or_else(|e| panic!("{}: {e:#}", out.display()));
}

/// Write the first input's header frame, then the data frames of every
/// input in turn (`pbf-gen concat`): one file, one header.
pub fn concat(inputs: &[PathBuf], out: &Path) {
    let mut output = pbf_bench_gen::output::create(out, inputs)
        .unwrap_or_else(|e| panic!("{}: {e:#}", out.display()));
    pbf_bench_gen::frames::concat(inputs, &mut output)
        .unwrap_or_else(|e| panic!("concat {inputs:?}: {e:#}"));
    pbf_bench_gen::output::finish(output).unwrap_or_else(|e| panic!("{}: {e:#}", out.display()));
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

/// A scratch directory and a fresh, empty output directory inside it.
pub fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("mkdir out");
    (dir, out)
}

/// Make a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}
