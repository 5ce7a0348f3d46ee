//! Property test of the whole engine against a brute-force sort: random
//! elements of every kind (negative ids, history versions, repeated keys,
//! dense and non-dense nodes) in random blob layouts (windows of the key
//! space that overlap only transitively, unsorted and mixed-kind blobs, two
//! files), merged as one op or as the overlap runs pbf-overlap would plan,
//! with memory budgets from tiny (every level of the spill path) to ample,
//! one op at a time and several in flight (the same spool, byte for byte).
//! Repeated keys carry timestamps that do not follow input order (some
//! unset, some below a second), so ties test osmium's timestamp rule.

mod common;

use common::*;
use pbf_format::Key;
use pbf_format::block::{Changeset, Element, Info, Member, Node, Relation, Str, Way};
use pbf_format::key::packed_object;
use pbf_format::{Keep, Kind};
use pbf_merge_core::Options;
use pbf_stream::{MergeInput, MergeOp};
use proptest::prelude::*;

/// Ids in key order: 0, -1 .. -10, then 1 .. 40.
const IDS: usize = 51;
const VERSIONS: usize = 3;
const KEYS: usize = 4 * IDS * VERSIONS;

/// The key at a position of the (small) key space, in key order.
fn key_at(index: usize) -> Key {
    let kind = Kind::ALL[index / (IDS * VERSIONS)];
    let rest = index % (IDS * VERSIONS);
    let i = (rest / VERSIONS) as i64;
    let id = if i <= 10 { -i } else { i - 10 };
    Key::new(kind, id, (rest % VERSIONS) as u32)
}

/// A timestamp for the element with a serial number: 0 to 3 s plus some
/// milliseconds, scattered by a multiplicative hash so that it does not
/// follow input order (0 s with milliseconds is unset, as osmium reads it).
fn timestamp_ms(serial: u32) -> i64 {
    let seconds = serial.wrapping_mul(2_654_435_761) >> 30;
    i64::from(seconds) * 1_000 + i64::from(serial % 7) * 100
}

/// An element with the given key whose content tells copies apart.
fn element(key: Key, serial: u32) -> Element {
    let mark = Str::from(serial.to_string().as_bytes());
    let tags = vec![(Str::from(&b"serial"[..]), mark.clone())];
    let info = (key.version > 0).then(|| Info {
        version: key.version as i32,
        timestamp_ms: timestamp_ms(serial),
        changeset: i64::from(serial),
        uid: serial as i32 - 50,
        user: mark.clone(),
        visible: [None, Some(true), Some(false)][serial as usize % 3],
    });
    match key.kind {
        Kind::Node => Element::Node(Node {
            id: key.id,
            info,
            lat: i64::from(serial) * 100 - 5_000,
            lon: -i64::from(serial) * 7,
            tags,
        }),
        Kind::Way => Element::Way(Way {
            id: key.id,
            info,
            tags,
            refs: vec![key.id, -i64::from(serial)],
            locations: Vec::new(),
        }),
        Kind::Relation => Element::Relation(Relation {
            id: key.id,
            info,
            tags,
            members: vec![Member {
                kind: Kind::Way,
                id: i64::from(serial),
                role: mark,
            }],
        }),
        Kind::Changeset => Element::Changeset(Changeset { id: key.id }),
    }
}

/// One blob: a window [start, start + width] of the key space, picks inside it.
#[derive(Clone, Debug)]
struct BlobSpec {
    start: usize,
    width: usize,
    picks: Vec<usize>,
    sorted: bool,
    dense: bool,
    file: usize,
    order: u32,
}

fn blob_spec() -> impl Strategy<Value = BlobSpec> {
    (
        0..KEYS,
        0usize..60,
        prop::collection::vec(0usize..1000, 1..16),
        any::<bool>(),
        any::<bool>(),
        0usize..2,
        any::<u32>(),
    )
        .prop_map(
            |(start, width, picks, sorted, dense, file, order)| BlobSpec {
                start,
                width,
                picks,
                sorted,
                dense,
                file,
                order,
            },
        )
}

fn build_blob(spec: &BlobSpec, serial: &mut u32) -> Blob {
    let mut keys: Vec<Key> = spec
        .picks
        .iter()
        .map(|p| key_at((spec.start + p % (spec.width + 1)).min(KEYS - 1)))
        .collect();
    if spec.sorted {
        keys.sort();
    }
    let elements = keys
        .into_iter()
        .map(|k| {
            *serial += 1;
            element(k, *serial)
        })
        .collect();
    Blob {
        elements,
        dense: spec.dense,
    }
}

/// Merge ops as pbf-overlap plans them: inputs sorted by first key, swept
/// with a running maximum of the last key (sharing a key is overlapping;
/// with `Keep::Latest`, sharing an object is).
fn overlap_runs(mut inputs: Vec<MergeInput>, keep: Keep) -> Vec<MergeOp> {
    inputs.sort_by_key(|i| Key::from(i.first));
    let mut runs: Vec<Vec<MergeInput>> = Vec::new();
    let mut max_last: Option<Key> = None;
    let reaches = |first: Key, max: Key| match keep {
        Keep::Latest => packed_object(first.packed()) <= packed_object(max.packed()),
        _ => first <= max,
    };
    for i in inputs {
        match max_last {
            Some(m) if reaches(Key::from(i.first), m) => {
                runs.last_mut().expect("a run is open").push(i.clone());
            }
            _ => runs.push(vec![i.clone()]),
        }
        max_last = Some(max_last.map_or(i.last.into(), |m| m.max(i.last.into())));
    }
    runs.into_iter().map(merge_op).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn merge_equals_a_stable_brute_force_sort(
        specs in prop::collection::vec(blob_spec(), 1..14),
        memory in prop_oneof![Just(1u64 << 10), Just(24u64 << 10), Just(1u64 << 30)],
        keep in prop_oneof![Just(Keep::All), Just(Keep::Dedupe), Just(Keep::Latest)],
        one_op in any::<bool>(),
    ) {
        let dir = tempdir();
        let mut serial = 0;
        let blobs: Vec<(usize, u32, Blob)> = specs
            .iter()
            .map(|s| (s.file, s.order, build_blob(s, &mut serial)))
            .collect();
        let mut sources = Vec::new();
        let mut inputs = Vec::new();
        let mut input_order = Vec::new();
        for file in 0..2usize {
            let mut in_file: Vec<&(usize, u32, Blob)> =
                blobs.iter().filter(|b| b.0 == file).collect();
            in_file.sort_by_key(|b| b.1);
            let in_file: Vec<Blob> = in_file.into_iter().map(|b| b.2.clone()).collect();
            if in_file.is_empty() {
                continue;
            }
            let id = 10 - file as u32; // source ids need not follow file order
            let (src, ranges) = write_pbf(&dir.path().join(format!("f{file}.pbf")), id, &in_file);
            sources.push((id, src, ranges, in_file));
        }
        // Input order is (source id, offset, position).
        sources.sort_by_key(|s| s.0);
        for (id, _, ranges, in_file) in &sources {
            for (r, b) in ranges.iter().zip(in_file) {
                inputs.push(merge_input(*id, *r, b));
                input_order.extend(b.elements.iter().cloned());
            }
        }
        let ops = if one_op { vec![merge_op(inputs)] } else { overlap_runs(inputs, keep) };
        let opts = Options {
            memory,
            keep,
            spill_dir: dir.path().to_path_buf(),
            ..Options::default()
        };
        let refs: Vec<_> = sources.iter().map(|s| s.1.clone()).collect();
        let (got, stats, frames) = run(dir.path(), &refs, &ops, opts.clone()).expect("merge");
        let want = brute_force(input_order, keep);
        // Ops in flight write the spool one op at a time writes.
        let (flown, flown_stats, flown_frames) =
            run_in_flight(dir.path(), &refs, &ops, opts, 3).expect("in flight");
        let spool = std::fs::read(dir.path().join("spool")).expect("spool");
        prop_assert!(flown == spool, "the spools differ");
        prop_assert_eq!(&flown_frames, &frames);
        let elements = |s: &[pbf_merge_core::MergeStats]| -> Vec<(u64, u64, u64)> {
            s.iter().map(|s| (s.elements_out, s.duplicates, s.frames)).collect()
        };
        prop_assert_eq!(elements(&flown_stats), elements(&stats));
        prop_assert_eq!(got.len(), want.len());
        prop_assert_eq!(&got, &want);
        if memory == 1 << 10 && specs.len() > 2 && one_op {
            prop_assert!(stats[0].spill_levels > 0 || stats[0].chains <= 1);
        }
    }
}
