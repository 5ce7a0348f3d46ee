//! The planning core: blobs as compact key segments, sorted by first key and
//! swept with a running maximum of the last key into runs (overlap is
//! transitive, and equal boundary keys overlap). A run of one sorted blob is
//! copied; every other run is merged. Copies of blobs that are contiguous in
//! the same source are coalesced into one copy op.
//!
//! A planet has about 1.3 million blobs, so a blob is held as a fixed-size
//! [`Segment`] (no strings, no per-blob allocation) and ops are produced
//! lazily by [`Ops`], one at a time, while they are written.

use std::iter::Peekable;

use pbf_format::Key;
use pbf_stream::{
    BlobRecord, CopyOp, Counts, FrameKeys, KeyRecord, MergeInput, MergeOp, PlanRecord,
};

/// Most frames in one copy op. Longer contiguous stretches are split into
/// several copy ops (still contiguous), so no plan line and no `frames`
/// vector grows with the input: 16384 frames are about 2.5 MB of JSON.
pub const MAX_COPY_FRAMES: usize = 16_384;

/// One OSMData blob of one source, as the planner needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Smallest key, packed ([`Key::packed`]).
    pub first: u128,
    /// Largest key, packed.
    pub last: u128,
    /// Frame offset in the source.
    pub offset: u64,
    /// Objects per kind (node, way, relation, changeset).
    pub counts: [u32; 4],
    /// Frame length.
    pub length: u32,
    /// Source id.
    pub source: u32,
    /// Position among the source's data blobs (the index's `seq`).
    pub seq: u32,
    /// Keys strictly increase inside the blob.
    pub sorted: bool,
    /// Keys never decrease inside the blob but some repeat. The planner
    /// merges such a blob like an unsorted one (so `pbf-merge --dedupe` sees
    /// the repeats); only `--check` tells the two apart.
    pub repeats: bool,
    /// Keys decrease inside the blob, but only between versions of one
    /// object. Merged like an unsorted blob; `--check` calls it in order.
    pub versions_unsorted: bool,
}

impl Segment {
    /// A segment from a validated blob record of source `source`.
    pub fn from_record(source: u32, b: &BlobRecord) -> Result<Segment, String> {
        let too_big = |what: &str, n: u64| format!("blob {}: {what} {n} is too large", b.seq);
        let counts = b.counts.to_array();
        let mut small = [0u32; 4];
        for (s, &c) in small.iter_mut().zip(&counts) {
            *s = u32::try_from(c).map_err(|_| too_big("object count", c))?;
        }
        Ok(Segment {
            first: Key::from(b.first).packed(),
            last: Key::from(b.last).packed(),
            offset: b.offset,
            counts: small,
            length: u32::try_from(b.length).map_err(|_| too_big("frame length", b.length))?,
            source,
            seq: u32::try_from(b.seq).map_err(|_| too_big("sequence number", b.seq))?,
            sorted: b.sorted,
            repeats: b.repeats,
            versions_unsorted: b.versions_unsorted,
        })
    }

    /// Offset just past the frame.
    pub fn end(&self) -> u64 {
        self.offset + u64::from(self.length)
    }

    /// Number of objects.
    pub fn elements(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum()
    }

    /// True when `next` starts where this frame ends, in the same source.
    pub fn touches(&self, next: &Segment) -> bool {
        self.source == next.source && self.end() == next.offset
    }

    fn counts(&self) -> Counts {
        Counts::from_array(self.counts.map(u64::from))
    }

    fn frame_keys(&self) -> FrameKeys {
        FrameKeys {
            length: u64::from(self.length),
            first: unpack(self.first),
            last: unpack(self.last),
            counts: self.counts(),
        }
    }

    fn merge_input(&self) -> MergeInput {
        MergeInput {
            source: self.source,
            offset: self.offset,
            length: u64::from(self.length),
            first: unpack(self.first),
            last: unpack(self.last),
            sorted: self.sorted,
            elements: self.elements(),
        }
    }
}

/// The key a packed key came from (inverse of [`Key::packed`]).
pub fn unpack(packed: u128) -> KeyRecord {
    KeyRecord::from(Key::from_packed(packed))
}

/// Sort segments into planning order: by first key, then last key, source
/// and offset (so the plan does not depend on the order of the input).
pub fn sort(segs: &mut [Segment]) {
    segs.sort_unstable_by_key(|s| (s.first, s.last, s.source, s.offset));
}

/// The runs of sorted segments: maximal stretches in which every segment
/// starts at or before the largest last key seen so far in the stretch.
pub fn runs(segs: &[Segment]) -> Runs<'_> {
    Runs { rest: segs }
}

/// Iterator over the runs of a sorted segment slice; see [`runs`].
#[derive(Clone, Debug)]
pub struct Runs<'a> {
    rest: &'a [Segment],
}

impl<'a> Iterator for Runs<'a> {
    type Item = &'a [Segment];

    fn next(&mut self) -> Option<&'a [Segment]> {
        let head = self.rest.first()?;
        let mut max = head.last;
        let mut n = 1;
        while let Some(s) = self.rest.get(n).filter(|s| s.first <= max) {
            max = max.max(s.last);
            n += 1;
        }
        let (run, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(run)
    }
}

/// True when a run is copied as is: one blob, sorted inside.
pub fn is_copy(run: &[Segment]) -> bool {
    matches!(run, [s] if s.sorted)
}

/// The ops of a sorted segment slice, in output order.
pub fn ops(segs: &[Segment], frame_keys: bool) -> Ops<'_> {
    Ops {
        runs: runs(segs).peekable(),
        frame_keys,
    }
}

/// Iterator over plan ops (`Copy` and `Merge` records); see [`ops`].
#[derive(Clone, Debug)]
pub struct Ops<'a> {
    runs: Peekable<Runs<'a>>,
    /// Give copy ops their per-frame keys (`pbf-copy --add-indexdata` needs them).
    frame_keys: bool,
}

impl Iterator for Ops<'_> {
    type Item = PlanRecord;

    fn next(&mut self) -> Option<PlanRecord> {
        let run = self.runs.next()?;
        let [seg] = run else {
            return Some(PlanRecord::Merge(merge_op(run)));
        };
        if !seg.sorted {
            return Some(PlanRecord::Merge(merge_op(run)));
        }
        let mut op = CopyOp {
            source: seg.source,
            offset: seg.offset,
            length: 0,
            blobs: 0,
            first: unpack(seg.first),
            last: unpack(seg.last),
            elements: 0,
            frames: Vec::new(),
        };
        let mut prev = *seg;
        add_frame(&mut op, seg, self.frame_keys);
        while op.blobs < MAX_COPY_FRAMES as u64 {
            let next = match self.runs.peek() {
                Some(&[next]) if next.sorted && prev.touches(next) => next,
                _ => break,
            };
            self.runs.next();
            add_frame(&mut op, next, self.frame_keys);
            op.last = unpack(next.last);
            prev = *next;
        }
        Some(PlanRecord::Copy(op))
    }
}

fn add_frame(op: &mut CopyOp, seg: &Segment, frame_keys: bool) {
    op.length += u64::from(seg.length);
    op.blobs += 1;
    op.elements += seg.elements();
    if frame_keys {
        op.frames.push(seg.frame_keys());
    }
}

fn merge_op(run: &[Segment]) -> MergeOp {
    let last = run.iter().map(|s| s.last).max().unwrap_or_default();
    MergeOp {
        inputs: run.iter().map(Segment::merge_input).collect(),
        first: unpack(run.first().map(|s| s.first).unwrap_or_default()),
        last: unpack(last),
        elements: run.iter().map(Segment::elements).sum(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pbf_format::Kind;

    /// A sorted segment of ways [first, last] at offset..offset+length of source 0.
    pub fn way(first: i64, last: i64, offset: u64, length: u32) -> Segment {
        Segment {
            first: Key::new(Kind::Way, first, 1).packed(),
            last: Key::new(Kind::Way, last, 1).packed(),
            offset,
            counts: [0, 2, 0, 0],
            length,
            source: 0,
            seq: 0,
            sorted: true,
            repeats: false,
            versions_unsorted: false,
        }
    }

    fn planned(mut segs: Vec<Segment>) -> Vec<PlanRecord> {
        sort(&mut segs);
        ops(&segs, true).collect()
    }

    fn copies(ops: &[PlanRecord]) -> Vec<(u32, u64, u64, u64)> {
        ops.iter()
            .map(|op| match op {
                PlanRecord::Copy(c) => (c.source, c.offset, c.length, c.blobs),
                other => panic!("expected a copy op, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_segment_is_a_few_dozen_bytes() {
        assert!(std::mem::size_of::<Segment>() <= 80);
    }

    #[test]
    fn unpack_inverts_packed() {
        for (kind, id, version) in [
            (Kind::Node, 0, 0),
            (Kind::Node, -1, 3),
            (Kind::Way, i64::MIN, 1),
            (Kind::Relation, i64::MAX, u32::MAX),
            (Kind::Changeset, 42, 7),
        ] {
            let k = Key::new(kind, id, version);
            assert_eq!(unpack(k.packed()), KeyRecord::from(k));
        }
    }

    #[test]
    fn overlap_is_transitive() {
        let a = way(1, 1_000_000, 100, 10);
        let b = way(8000, 16000, 200, 10);
        let c = way(16000, 24000, 300, 10);
        let d = way(1_000_001, 1_000_002, 400, 10);
        let mut segs = vec![c, d, b, a];
        sort(&mut segs);
        let lens: Vec<usize> = runs(&segs).map(<[Segment]>::len).collect();
        assert_eq!(lens, [3, 1]);
        let ops = planned(segs);
        let PlanRecord::Merge(m) = &ops[0] else {
            panic!("expected a merge, got {:?}", ops[0])
        };
        let offsets: Vec<u64> = m.inputs.iter().map(|i| i.offset).collect();
        assert_eq!(offsets, [100, 200, 300]);
        assert_eq!(m.first, unpack(a.first));
        assert_eq!(m.last, unpack(a.last));
        assert_eq!(m.elements, 6);
        assert_eq!(copies(&ops[1..]), [(0, 400, 10, 1)]);
    }

    #[test]
    fn a_chain_is_one_run_even_where_ends_do_not_meet() {
        let mut segs = vec![
            way(1, 10, 100, 10),
            way(5, 20, 110, 10),
            way(15, 30, 120, 10),
        ];
        sort(&mut segs);
        assert_eq!(runs(&segs).count(), 1);
    }

    #[test]
    fn equal_boundary_keys_overlap() {
        let b = way(8000, 16000, 100, 10);
        let c = way(16000, 24000, 110, 10);
        let ops = planned(vec![b, c]);
        assert_eq!(ops.len(), 1);
        assert!(matches!(&ops[0], PlanRecord::Merge(m) if m.inputs.len() == 2));
        let d = way(16001, 24000, 110, 10);
        assert_eq!(copies(&planned(vec![b, d])), [(0, 100, 20, 2)]);
    }

    #[test]
    fn unsorted_singleton_is_merged() {
        let mut s = way(1, 10, 100, 10);
        s.sorted = false;
        let ops = planned(vec![s]);
        let [PlanRecord::Merge(m)] = ops.as_slice() else {
            panic!("expected one merge, got {ops:?}")
        };
        assert_eq!(m.inputs.len(), 1);
        assert!(!m.inputs[0].sorted);
    }

    #[test]
    fn coalesces_only_contiguous_frames_of_one_source() {
        let a = way(1, 10, 100, 10);
        let b = way(11, 20, 110, 10);
        let gap = way(21, 30, 125, 10);
        let mut other = way(31, 40, 135, 10);
        other.source = 1;
        let c = way(41, 50, 145, 10);
        let ops = planned(vec![a, b, gap, other, c]);
        assert_eq!(
            copies(&ops),
            [
                (0, 100, 20, 2),
                (0, 125, 10, 1),
                (1, 135, 10, 1),
                (0, 145, 10, 1)
            ]
        );
        let PlanRecord::Copy(first) = &ops[0] else {
            unreachable!()
        };
        assert_eq!(first.elements, 4);
        assert_eq!(first.frames.len(), 2);
        assert_eq!(first.frames[1].first, unpack(b.first));
        assert_eq!(first.frames[1].counts[pbf_format::Kind::Way], 2);
    }

    #[test]
    fn without_frame_keys_the_ops_are_the_same_minus_the_keys() {
        // Longer than one copy op may hold, so the cut must not depend on the keys.
        let mut segs: Vec<Segment> = (0..MAX_COPY_FRAMES as u64 + 3)
            .map(|i| way(2 * i as i64 + 1, 2 * i as i64 + 2, 100 + 10 * i, 10))
            .collect();
        sort(&mut segs);
        let with: Vec<PlanRecord> = ops(&segs, true).collect();
        let without: Vec<PlanRecord> = ops(&segs, false).collect();
        assert_eq!(copies(&with), copies(&without));
        assert_eq!(copies(&without).len(), 2);
        for (w, wo) in with.iter().zip(&without) {
            let (PlanRecord::Copy(w), PlanRecord::Copy(wo)) = (w, wo) else {
                panic!("expected copies, got {w:?} and {wo:?}")
            };
            assert_eq!(w.frames.len() as u64, w.blobs);
            assert!(wo.frames.is_empty());
            assert_eq!((w.blobs, w.elements), (wo.blobs, wo.elements));
        }
    }

    #[test]
    fn permuted_blobs_become_copies_in_key_order() {
        let a = way(1, 10, 100, 10);
        let b = way(11, 20, 110, 10);
        let c = way(21, 30, 120, 10);
        let ops = planned(vec![c, a, b]);
        assert_eq!(copies(&ops), [(0, 100, 30, 3)]);
        // Stored out of order: same keys at swapped offsets.
        let swapped = [way(1, 10, 110, 10), way(11, 20, 100, 10), c];
        assert_eq!(
            copies(&planned(swapped.to_vec())),
            [(0, 110, 10, 1), (0, 100, 10, 1), (0, 120, 10, 1)]
        );
    }

    #[test]
    fn long_stretches_are_split_at_the_frame_limit() {
        let n = MAX_COPY_FRAMES + 5;
        let segs: Vec<Segment> = (0..n as i64)
            .map(|i| way(2 * i, 2 * i + 1, 100 + 10 * i as u64, 10))
            .collect();
        let ops = planned(segs);
        let c = copies(&ops);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].3, MAX_COPY_FRAMES as u64);
        assert_eq!(c[1], (0, 100 + 10 * MAX_COPY_FRAMES as u64, 50, 5));
    }
}
