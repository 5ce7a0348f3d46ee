//! Pipelines: the streams between the stages, as our binaries write them
//! (an index, a plan) or as a test builds them from an index (plans copying
//! chosen blobs in chosen orders, a plan with a `header` record).

use std::path::Path;
use std::process::Output;

use pbf_format::header::{BBox, Header};
use pbf_stream::{
    BlobRecord, CopyOp, FrameKeys, IndexRecord, OutputHeader, PlanHeader, PlanRecord, SourceRecord,
    SourceRef, Writer,
};

use crate::util::{bin, fileinfo, opl, run_with_input, succeeds};
pub use pbf_testkit::plan_bytes;

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

/// The index stream of one file (`pbf-index -q FILE`).
pub fn index_stream(path: &Path) -> Vec<u8> {
    let mut c = bin("pbf-index");
    c.arg("-q").arg(path);
    succeeds(c)
}

/// A file's index: its source record and blob records.
pub fn index(path: &Path) -> (SourceRecord, Vec<BlobRecord>) {
    let mut source = None;
    let mut blobs = Vec::new();
    for rec in records::<IndexRecord>(&index_stream(path)) {
        match rec {
            IndexRecord::Source(s) => source = Some(s),
            IndexRecord::Blob(b) => blobs.push(b),
            IndexRecord::End(_) | IndexRecord::Header(_) => {}
        }
    }
    (source.expect("source record"), blobs)
}

/// `pbf-overlap ARGS` with `input` on standard input.
pub fn overlap(args: &[&str], input: &[u8]) -> Output {
    let mut c = bin("pbf-overlap");
    c.args(args);
    run_with_input(c, input)
}

/// A copy op of one blob (of source 0), with its frame's keys when
/// `with_frames` (`--add-indexdata` needs them).
pub fn copy_op(b: &BlobRecord, with_frames: bool) -> CopyOp {
    let frames = with_frames
        .then_some(FrameKeys {
            length: b.length,
            first: b.first,
            last: b.last,
            counts: b.counts,
            duplicate_ids: b.duplicate_ids,
            negative_ids: b.negative_ids,
        })
        .into_iter()
        .collect();
    CopyOp {
        source: 0,
        offset: b.offset,
        length: b.length,
        blobs: 1,
        first: b.first,
        last: b.last,
        elements: b.counts.total(),
        duplicate_ids: b.duplicate_ids,
        frames,
    }
}

/// The plan header for one source, with the sorted flag in its header.
pub fn plan_header(src: &SourceRecord) -> PlanHeader {
    let source = SourceRef {
        id: 0,
        file: src.file.clone(),
        spool: false,
    };
    pbf_testkit::plan_header(vec![source], &src.header)
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
    // After the plan record and any `sorted` record: the news of a later
    // OSMHeader comes when the planner reads it.
    let at = recs
        .iter()
        .position(|r| !matches!(r, PlanRecord::Plan(_) | PlanRecord::Sorted(_)))
        .unwrap_or(recs.len());
    recs.insert(
        at,
        PlanRecord::Header(OutputHeader {
            header,
            copy_bytes: None,
        }),
    );
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
