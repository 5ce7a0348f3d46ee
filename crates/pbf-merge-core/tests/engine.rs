//! The engine on real files written with the format library: chains of
//! interleaved sorted files, the multi-level spill path under a tiny memory
//! budget, tie order, --dedupe and --latest, and the errors that must stop a merge.

mod common;

use common::*;
use pbf_format::block::{Element, Info, Node, Relation, Str, Way};
use pbf_format::{Keep, Kind};
use pbf_merge_core::{Flight, Options, Ready, Spool, WrittenFrame};
use std::sync::Arc;

fn info(version: i32) -> Option<Info> {
    Some(Info {
        version,
        timestamp_ms: 1_600_000_000_000,
        changeset: 7,
        uid: 3,
        user: Str::from(&b"someone"[..]),
        visible: None,
    })
}

/// A node whose `mark` tag tells copies of one key apart.
fn node(id: i64, version: i32, mark: &str) -> Element {
    Element::Node(Node {
        id,
        info: info(version),
        lat: id * 100,
        lon: -id * 100,
        tags: vec![(Str::from(&b"mark"[..]), Str::from(mark.as_bytes()))],
    })
}

fn way(id: i64) -> Element {
    Element::Way(Way {
        id,
        info: info(1),
        tags: Vec::new(),
        refs: vec![1, 2, id],
        locations: Vec::new(),
    })
}

fn relation(id: i64) -> Element {
    Element::Relation(Relation {
        id,
        info: info(1),
        tags: Vec::new(),
        members: Vec::new(),
    })
}

fn blob(elements: Vec<Element>, dense: bool) -> Blob {
    Blob { elements, dense }
}

/// Two sorted "extracts" whose blobs interleave, with shared objects.
fn interleaved() -> (Vec<Blob>, Vec<Blob>) {
    let a: Vec<Blob> = (0..4)
        .map(|b| {
            blob(
                (0..50).map(|i| node(b * 100 + 2 * i, 1, "a")).collect(),
                true,
            )
        })
        .collect();
    let mut b: Vec<Blob> = (0..4)
        .map(|b| {
            blob(
                (0..50).map(|i| node(b * 100 + 2 * i + 1, 1, "b")).collect(),
                false,
            )
        })
        .collect();
    // Objects present in both files (same type, id, version).
    b[3].elements.push(node(398, 1, "b"));
    b[3].elements.sort_by_key(Element::key);
    (a, b)
}

fn all_in_input_order(files: &[&[Blob]]) -> Vec<Element> {
    files
        .iter()
        .flat_map(|f| f.iter().flat_map(|b| b.elements.clone()))
        .collect()
}

/// The interleaved files written to `dir`, their sources and the one merge
/// op over all their blobs.
fn interleaved_op(
    dir: &std::path::Path,
) -> (
    (Vec<Blob>, Vec<Blob>),
    [pbf_stream::SourceRef; 2],
    pbf_stream::MergeOp,
) {
    let (a, b) = interleaved();
    let (sa, ra) = write_pbf(&dir.join("a.pbf"), 0, &a);
    let (sb, rb) = write_pbf(&dir.join("b.pbf"), 1, &b);
    let mut inputs: Vec<_> = a
        .iter()
        .zip(&ra)
        .map(|(x, r)| merge_input(0, *r, x))
        .collect();
    inputs.extend(b.iter().zip(&rb).map(|(x, r)| merge_input(1, *r, x)));
    ((a, b), [sa, sb], merge_op(inputs))
}

#[test]
fn interleaved_sorted_files_merge_as_two_chains_without_spilling() {
    let dir = tempdir();
    let ((a, b), sources, op) = interleaved_op(dir.path());
    let (got, stats, _) = run(dir.path(), &sources, &[op], Options::default()).expect("merge");
    assert_eq!(stats[0].chains, 2);
    assert_eq!(stats[0].spill_levels, 0);
    let want = brute_force(all_in_input_order(&[&a, &b]), Keep::All);
    assert_eq!(got, want);
    // Node 398 v1 from file a comes before the copy from file b.
    let marks: Vec<_> = got
        .iter()
        .filter(|e| e.kind() == Kind::Node && e.id() == 398)
        .map(|e| e.tags()[0].1.clone())
        .collect();
    assert_eq!(marks, vec![Str::from(&b"a"[..]), Str::from(&b"b"[..])]);
}

/// Merged frames carry indexdata only when asked (`Options::indexdata`):
/// osmconvert reads only BlobHeaders of 11 to 17 bytes.
#[test]
fn indexdata_only_when_asked() {
    let dir = tempdir();
    let (_, sources, op) = interleaved_op(dir.path());
    for indexdata in [false, true] {
        let sub = tempdir();
        let opts = Options {
            indexdata,
            ..Options::default()
        };
        let (_, _, frames) =
            run(sub.path(), &sources, std::slice::from_ref(&op), opts).expect("merge");
        let spool = pbf_format::frame::PbfFile::open(&sub.path().join("spool")).expect("spool");
        for f in frames {
            let fh = spool.frame_header_at(f.offset).expect("frame");
            assert_eq!(fh.indexdata.is_some(), indexdata, "frame at {}", f.offset);
            if !indexdata {
                assert!(
                    (11..=17).contains(&fh.header_len),
                    "BlobHeader of {}",
                    fh.header_len
                );
            }
        }
    }
}

/// `blobs` written to `dir/in.pbf` as source `id`, and the one merge op
/// over all of them.
fn written_op(
    dir: &std::path::Path,
    id: u32,
    blobs: &[Blob],
) -> (pbf_stream::SourceRef, pbf_stream::MergeOp) {
    let (src, ranges) = write_pbf(&dir.join("in.pbf"), id, blobs);
    let inputs = blobs.iter().zip(&ranges);
    let op = merge_op(inputs.map(|(x, r)| merge_input(id, *r, x)).collect());
    (src, op)
}

/// Merge one op of one source with spill files in a directory of their own
/// (returned, with what was merged and the op's stats).
fn merge_alone(
    src: &pbf_stream::SourceRef,
    op: &pbf_stream::MergeOp,
    memory: u64,
    keep: Keep,
) -> (Vec<Element>, pbf_merge_core::MergeStats, tempfile::TempDir) {
    let sub = tempdir();
    let opts = Options {
        memory,
        keep,
        spill_dir: sub.path().to_path_buf(),
        ..Options::default()
    };
    let (got, stats, _) = run(
        sub.path(),
        std::slice::from_ref(src),
        std::slice::from_ref(op),
        opts,
    )
    .expect("merge");
    (got, stats[0], sub)
}

/// Twelve unsorted mixed-kind blobs over the same key range, with
/// duplicates across blobs and history versions: at a budget of 1024 bytes
/// they spill on two levels or more.
fn twelve_overlapping_blobs() -> Vec<Blob> {
    (0..12i64)
        .map(|b| {
            let mut v: Vec<Element> = (0..30i64)
                .map(|i| {
                    node(
                        (i * 7 + b * 13) % 40 - 5,
                        1 + (i % 3) as i32,
                        &format!("{b}"),
                    )
                })
                .collect();
            v.push(relation(-b));
            v.push(way(b % 4));
            v.reverse();
            blob(v, b % 2 == 0)
        })
        .collect()
}

#[test]
fn tiny_budget_spills_on_several_levels_and_gives_the_same_result() {
    let dir = tempdir();
    let blobs = twelve_overlapping_blobs();
    let (src, op) = written_op(dir.path(), 3, &blobs);
    for keep in [Keep::All, Keep::Dedupe, Keep::Latest] {
        let (got, stats, sub) = merge_alone(&src, &op, 1024, keep);
        let stats = [stats];
        assert!(stats[0].spill_levels >= 2, "{:?}", stats[0]);
        assert!(stats[0].spilled_runs >= 6, "{:?}", stats[0]);
        let want = brute_force(all_in_input_order(&[&blobs]), keep);
        assert_eq!(got.len(), want.len());
        assert_eq!(got, want, "{keep:?}");
        if keep != Keep::All {
            assert!(stats[0].duplicates > 0);
        }
        // Spill files are anonymous: only the spool is left in the directory.
        let left: Vec<_> = std::fs::read_dir(sub.path())
            .expect("read dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("spool")]);
    }
}

/// What a spilling op tells its progress, in order.
#[derive(Debug, PartialEq)]
enum Told {
    Bytes(u64),
    Phase(pbf_merge_core::Phase),
}

#[test]
fn a_spilling_op_tells_its_phases_and_every_input_byte() {
    use pbf_merge_core::{Phase, Progress};
    use std::sync::{Arc, Mutex};
    let dir = tempdir();
    let (src, op) = written_op(dir.path(), 1, &twelve_overlapping_blobs());
    let told = Arc::new(Mutex::new(Vec::new()));
    let (bytes, phases) = (Arc::clone(&told), Arc::clone(&told));
    let progress = Progress::new(move |b| bytes.lock().expect("lock").push(Told::Bytes(b)))
        .with_phases(move |p| phases.lock().expect("lock").push(Told::Phase(p)));
    let sub = tempdir();
    let opts = Options {
        memory: 1024,
        spill_dir: sub.path().to_path_buf(),
        progress,
        ..Options::default()
    };
    let (_, stats, _) = run(sub.path(), &[src], std::slice::from_ref(&op), opts).expect("merge");
    assert!(stats[0].spill_levels >= 2, "{:?}", stats[0]);
    let told = told.lock().expect("lock");
    let sum = |t: &[Told]| -> u64 {
        t.iter()
            .map(|t| match t {
                Told::Bytes(b) => *b,
                Told::Phase(_) => 0,
            })
            .sum()
    };
    // Every input frame's length, once.
    assert_eq!(sum(&told), op.inputs.iter().map(|i| i.length).sum::<u64>());
    // The spill passes in order, then the final merge, which still moves
    // the count: half of the input bytes come after it.
    let phases: Vec<&Told> = told
        .iter()
        .filter(|t| matches!(t, Told::Phase(_)))
        .collect();
    let passes = stats[0].spill_levels;
    let mut want: Vec<Told> = (1..=passes)
        .map(|n| Told::Phase(Phase::Spilling(n)))
        .collect();
    want.push(Told::Phase(Phase::Final));
    assert_eq!(phases, want.iter().collect::<Vec<_>>());
    let at_final = told
        .iter()
        .position(|t| *t == Told::Phase(Phase::Final))
        .expect("the final phase");
    assert!(sum(&told[at_final..]) * 2 >= sum(&told) - 1, "{told:?}");
}

/// Blobs of a few objects, shuffled over one key range: stamped copies of
/// the same versions in different blobs (ties ordered by timestamp, then
/// input order), and every kind.
fn tiny_shuffled_blobs() -> Vec<Blob> {
    (0..400i64)
        .map(|b| {
            let mut v: Vec<Element> = (0..4i64)
                .map(|i| {
                    let mut e = node(
                        (b * 37 + i * 101) % 300,
                        1 + (b % 2) as i32,
                        &format!("{b}"),
                    );
                    if let Element::Node(n) = &mut e {
                        let info = n.info.as_mut().expect("info");
                        info.timestamp_ms = 1_600_000_000_000 + (b % 5) * 1000;
                    }
                    e
                })
                .collect();
            v.push(way(b % 50));
            v.push(relation(-(b % 20)));
            v.reverse();
            blob(v, b % 3 != 0)
        })
        .collect()
}

#[test]
fn tiny_blobs_are_batched_and_sorted_into_runs_like_a_brute_force_sort() {
    let dir = tempdir();
    let blobs = tiny_shuffled_blobs();
    let (src, op) = written_op(dir.path(), 0, &blobs);
    // 256k: batches of a few dozen blobs, compact runs kept in memory;
    // 64M: one batch merged as it is; 48k: compact runs spilled to a file,
    // and spilled again.
    for (memory, keep) in [
        (256 << 10, Keep::All),
        (256 << 10, Keep::Dedupe),
        (256 << 10, Keep::Latest),
        (64 << 20, Keep::All),
        (64 << 20, Keep::Latest),
        (48 << 10, Keep::All),
        (48 << 10, Keep::Latest),
    ] {
        let (got, s, _) = merge_alone(&src, &op, memory, keep);
        match memory {
            m if m == 64 << 20 => {
                assert_eq!((s.batches, s.kept_runs, s.spilled_runs), (1, 0, 0), "{s:?}")
            }
            m if m == 256 << 10 => assert!(s.batches >= 2 && s.kept_runs >= 1, "{s:?}"),
            _ => assert!(s.batches >= 2 && s.spilled_runs >= 1, "{s:?}"),
        }
        let want = brute_force(all_in_input_order(&[&blobs]), keep);
        assert_eq!(got, want, "memory {memory}, {keep:?}");
    }
}

/// An op of thousands of blobs of three objects each, every one spread
/// over the keys of its kinds (nodes, and a way or relation in some).
fn many_wide_blobs() -> Vec<Blob> {
    (0..5000i64)
        .map(|b| {
            let mut v: Vec<Element> = (0..3i64)
                .map(|i| node((b * 7919 + i * 33_331) % 100_000 - 50, 1, &format!("{b}")))
                .collect();
            match b % 3 {
                0 => v.push(way((b * 131) % 5000)),
                1 => v.push(relation(-(b % 70))),
                _ => {}
            }
            v.reverse();
            blob(v, b % 2 == 0)
        })
        .collect()
}

#[test]
fn an_op_of_many_wide_blobs_is_batched() {
    let dir = tempdir();
    let blobs = many_wide_blobs();
    let (src, op) = written_op(dir.path(), 0, &blobs);
    let (got, s, _) = merge_alone(&src, &op, 1 << 30, Keep::All);
    assert!(s.chains > 1 && s.batches > 0, "{s:?}");
    let want = brute_force(all_in_input_order(&[&blobs]), Keep::All);
    assert_eq!(got, want);
}

#[test]
fn an_op_of_many_ordered_blobs_forms_its_chains() {
    let dir = tempdir();
    // Tiny blobs of two sorted files that fit between each other's: the
    // blobs form one long chain.
    let blobs: Vec<Blob> = (0..5000i64)
        .map(|b| {
            let base = (b % 2500) * 10 + (b / 2500) * 5;
            blob(vec![node(base, 1, "a"), node(base + 1, 1, "b")], true)
        })
        .collect();
    let (src, op) = written_op(dir.path(), 0, &blobs);
    let (got, s, _) = merge_alone(&src, &op, 1 << 30, Keep::All);
    assert_eq!(s.chains, 1, "{s:?}");
    let want = brute_force(all_in_input_order(&[&blobs]), Keep::All);
    assert_eq!(got, want);
}

#[test]
fn output_blocks_hold_at_most_max_elements() {
    let dir = tempdir();
    let blobs: Vec<Blob> = (0..2)
        .map(|b| blob((0..9000).map(|i| node(2 * i + b, 1, "x")).collect(), true))
        .collect();
    let (src, ranges) = write_pbf(&dir.path().join("in.pbf"), 0, &blobs);
    let op = merge_op(
        blobs
            .iter()
            .zip(&ranges)
            .map(|(x, r)| merge_input(0, *r, x))
            .collect(),
    );
    let (got, stats, frames) = run(dir.path(), &[src], &[op], Options::default()).expect("merge");
    assert_eq!(got.len(), 18_000);
    assert_eq!(stats[0].frames, 3);
    assert_eq!(frames[0].summary.elements(), 8000);
    assert!(got.is_sorted_by_key(Element::key));
}

fn one_blob_setup(dir: &std::path::Path) -> (pbf_stream::SourceRef, pbf_stream::MergeOp) {
    let blobs = vec![blob(vec![node(3, 1, "x"), node(1, 1, "y")], true)];
    let (src, ranges) = write_pbf(&dir.join("in.pbf"), 0, &blobs);
    (src, merge_op(vec![merge_input(0, ranges[0], &blobs[0])]))
}

fn merge_error(
    dir: &std::path::Path,
    src: pbf_stream::SourceRef,
    op: pbf_stream::MergeOp,
) -> String {
    std::fs::create_dir_all(dir).expect("mkdir");
    match run(dir, &[src], &[op], Options::default()) {
        Ok(_) => panic!("the merge should fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_plan_that_does_not_match_the_file_is_refused() {
    let dir = tempdir();
    let (src, op) = one_blob_setup(dir.path());
    let offset = op.inputs[0].offset;

    let mut wrong_len = op.clone();
    wrong_len.inputs[0].length -= 1;
    let e = merge_error(&dir.path().join("1"), src.clone(), wrong_len);
    assert!(
        e.contains("in.pbf: blob at offset") && e.contains("frame is"),
        "{e}"
    );

    let mut wrong_count = op.clone();
    wrong_count.inputs[0].elements = 3;
    let e = merge_error(&dir.path().join("2"), src.clone(), wrong_count);
    assert!(
        e.contains(&format!("offset {offset}")) && e.contains("3 elements"),
        "{e}"
    );

    let mut wrong_range = op.clone();
    wrong_range.inputs[0].first.id = 2;
    let e = merge_error(&dir.path().join("3"), src.clone(), wrong_range);
    assert!(
        e.contains("the plan says n2 v1..n3 v1, the blob holds n1 v1..n3 v1"),
        "{e}"
    );

    let mut wrong_offset = op;
    wrong_offset.inputs[0].offset += 1;
    let e = merge_error(&dir.path().join("4"), src, wrong_offset);
    assert!(e.contains("in.pbf"), "{e}");
}

#[test]
fn a_corrupt_blob_names_the_file_and_offset() {
    let dir = tempdir();
    let (src, op) = one_blob_setup(dir.path());
    let offset = op.inputs[0].offset;
    let mut bytes = std::fs::read(&src.file.path).expect("read");
    let n = bytes.len();
    bytes[n - 3] ^= 0xff; // inside the zlib stream
    std::fs::write(&src.file.path, &bytes).expect("write");
    let src = source_ref(&src.file.path, 0);
    let e = merge_error(&dir.path().join("x"), src, op);
    assert!(
        e.contains("in.pbf: blob at offset") && e.contains(&offset.to_string()),
        "{e}"
    );
}

#[test]
fn a_changed_source_and_an_existing_spool_are_refused() {
    let dir = tempdir();
    let (mut src, op) = one_blob_setup(dir.path());
    src.file.size += 1;
    let e = merge_error(&dir.path().join("x"), src, op);
    assert!(e.contains("changed since it was indexed"), "{e}");
    let existing = dir.path().join("existing");
    std::fs::write(&existing, b"").expect("write");
    let e = Spool::create(&existing).expect_err("exists").to_string();
    assert!(e.contains("existing") && e.contains("exists"), "{e}");
}

#[test]
fn a_next_op_prepared_early_fails_only_when_it_is_merged() {
    let dir = tempdir();
    let (src, good) = one_blob_setup(dir.path());
    // A length the frame does not have: found when the headers are read.
    let mut bad = good.clone();
    bad.inputs[0].length -= 1;
    let merger = merger(std::slice::from_ref(&src), Options::default()).expect("merger");
    let mut spool = Spool::create(&dir.path().join("spool")).expect("spool");
    let mut frames = Vec::new();
    let mut report = |f: &[WrittenFrame]| {
        frames.extend_from_slice(f);
        Ok(())
    };
    // Both in flight: the bad op is prepared while the good one merges.
    let mut flight = Flight::new(Arc::new(merger), 2);
    flight.start(good);
    flight.start(bad);
    let first = flight.write_oldest(&mut spool, &mut report, None);
    let Ready::Done(stats) = first.expect("the first op is merged whatever the next one holds")
    else {
        panic!("the first op is not done");
    };
    let e = flight
        .write_oldest(&mut spool, &mut report, None)
        .expect_err("bad op");
    assert!(e.to_string().contains("frame is"), "{e}");
    assert_eq!((stats.elements_out, frames.len()), (2, 1));
}
