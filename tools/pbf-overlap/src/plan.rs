//! The planning core: blobs as compact key segments, sorted by first key and
//! swept with a running maximum of the last key into clusters (overlap is
//! transitive, and equal boundary keys overlap, unless both blobs carry
//! their tie ends and the first one's objects come before the second's in
//! the merge's order of equal keys). A cluster of one blob in order is copied:
//! one sorted inside, or one whose repeated keys are in the merge's order
//! (its record's `ties`; not with `--dedupe`, which must see the repeats);
//! every other cluster is merged. With `--latest` two blobs overlap where
//! they share an object (kind and id, any version), and a blob that holds
//! one twice, or comes from a history file (whose deleted objects only a
//! merge leaves out), is merged. Copies of blobs that are contiguous in the
//! same source are coalesced into one copy op.
//!
//! Memory is per blob, and a file of small blobs has millions (a planet
//! about 1.3 million, a file of five objects per blob 2.4 million at
//! 700 MB), so a blob is a fixed 48-byte [`Segment`] with no strings and no
//! allocation: its two keys packed ([`Key::packed`], 99 bits each), with the
//! source id and the sorted and in-order flags in the bits the first key
//! leaves free, the frame's offset and length, and its number of objects.
//! The tie ends of blobs that carry them are kept in [`Blobs`]' side list,
//! looked up only where a cluster's last key is the next blob's first.
//! Per-kind counts are needed only for the frames of copy ops (a copy
//! op's `frames`), and a blob in order nearly always holds one kind, its
//! keys' kind: only a blob in order whose counts say otherwise keeps them,
//! in another side list. Ops are produced lazily by [`Ops`], and a merge op
//! is a slice of segments that the writer serialises input by input
//! (`pbf_stream::Writer::write_merge`), so no op is held whole.

use std::iter::Peekable;

use pbf_format::key::{packed_object, packed_same_object};
use pbf_format::prefetch::prefetch;
use pbf_format::scan::{Ties, follows_in_tie_order};
use pbf_format::{Keep, Key, Kind};
use pbf_stream::{BlobRecord, CopyOp, Counts, FrameKeys, KeyRecord, MergeInput};
use rayon::slice::ParallelSliceMut;

/// Most frames in one copy op. Longer contiguous stretches are split into
/// several copy ops (still contiguous), so no plan line and no `frames`
/// vector grows with the input: 16384 frames are about 2.5 MB of JSON.
pub const MAX_COPY_FRAMES: usize = 16_384;

/// Bits of a packed key ([`Key::packed`]): kind, sign, |id| and version.
const KEY_BITS: u32 = 99;
const KEY_MASK: u128 = (1 << KEY_BITS) - 1;
/// Above the first key: the sorted flag, the in-order flag, then the
/// source id.
const SORTED_BIT: u32 = KEY_BITS;
const IN_ORDER_BIT: u32 = KEY_BITS + 1;
const SOURCE_SHIFT: u32 = KEY_BITS + 2;
/// Sources a plan can name: the bits left above the first key.
pub const MAX_SOURCES: u32 = 1 << (128 - SOURCE_SHIFT);

/// A `u128` stored as two `u64`s (high, low), so a [`Segment`] is aligned
/// to 8 bytes and has no padding (a `u128` field would align it to 16 and
/// make it 64).
type Wide = [u64; 2];

fn to_halves(v: u128) -> Wide {
    [(v >> 64) as u64, v as u64]
}

fn from_halves([hi, lo]: Wide) -> u128 {
    (u128::from(hi) << 64) | u128::from(lo)
}

/// One OSMData blob of one source, as the planner needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The smallest key, packed, with the sorted flag and the source id
    /// above it.
    head: Wide,
    /// The largest key, packed.
    last: Wide,
    /// Frame offset in the source.
    pub offset: u64,
    /// Frame length.
    pub length: u32,
    /// Number of objects.
    elements: u32,
}

impl Segment {
    /// A segment of source `source` (below [`MAX_SOURCES`]) whose keys run
    /// from `first` to `last` (packed keys).
    pub fn new(
        source: u32,
        (first, last): (u128, u128),
        (offset, length): (u64, u32),
        elements: u32,
        (sorted, in_order): (bool, bool),
    ) -> Segment {
        debug_assert!(source < MAX_SOURCES && first <= KEY_MASK && last <= KEY_MASK);
        let head = (u128::from(source) << SOURCE_SHIFT)
            | (u128::from(in_order) << IN_ORDER_BIT)
            | (u128::from(sorted) << SORTED_BIT)
            | first;
        Segment {
            head: to_halves(head),
            last: to_halves(last),
            offset,
            length,
            elements,
        }
    }

    /// Smallest key, packed ([`Key::packed`]).
    pub fn first(&self) -> u128 {
        from_halves(self.head) & KEY_MASK
    }

    /// Largest key, packed.
    pub fn last(&self) -> u128 {
        from_halves(self.last)
    }

    /// Source id.
    pub fn source(&self) -> u32 {
        (from_halves(self.head) >> SOURCE_SHIFT) as u32
    }

    /// Keys strictly increase inside the blob.
    pub fn sorted(&self) -> bool {
        (from_halves(self.head) >> SORTED_BIT) & 1 == 1
    }

    /// The blob's objects are in the merge's order, so a cluster of it alone is
    /// copied: it is sorted, or its keys repeat in the merge's order of
    /// equal keys (and the plan keeps repeats). A blob whose versions are
    /// out of order is not in order.
    pub fn in_order(&self) -> bool {
        (from_halves(self.head) >> IN_ORDER_BIT) & 1 == 1
    }

    /// Where the blob comes in input order (source, then offset), which
    /// orders equal keys of equal timestamps.
    fn input_order(&self) -> (u32, u64) {
        (self.source(), self.offset)
    }

    /// Offset just past the frame.
    pub fn end(&self) -> u64 {
        self.offset + u64::from(self.length)
    }

    /// Number of objects.
    pub fn elements(&self) -> u64 {
        u64::from(self.elements)
    }

    /// True when `next` starts where this frame ends, in the same source.
    pub fn touches(&self, next: &Segment) -> bool {
        self.source() == next.source() && self.end() == next.offset
    }

    fn merge_input(&self) -> MergeInput {
        MergeInput {
            source: self.source(),
            offset: self.offset,
            length: u64::from(self.length),
            first: unpack(self.first()),
            last: unpack(self.last()),
            sorted: self.sorted(),
            elements: self.elements(),
        }
    }
}

/// The key a packed key came from (inverse of [`Key::packed`]).
pub fn unpack(packed: u128) -> KeyRecord {
    KeyRecord::from(Key::from_packed(packed))
}

/// What a blob in order holds of ids that importers refuse: objects
/// twice, negative ids (kept for blobs with either).
#[derive(Clone, Copy, Debug, Default)]
struct IdNotes {
    duplicate_ids: u64,
    negative_ids: bool,
}

/// What a [`Segment`] cannot tell of a few blobs, by the blob's place in
/// input order (source, offset); sorted by it in [`Blobs::sort`].
type SideList<T> = Vec<((u32, u64), T)>;

/// The value `list` (sorted) holds for `seg`.
fn side<T: Copy>(list: &[((u32, u64), T)], seg: &Segment) -> Option<T> {
    let found = list.binary_search_by_key(&seg.input_order(), |e| e.0);
    found.ok().map(|i| list[i].1)
}

/// The blobs of every source read so far: a [`Segment`] each, and the
/// per-kind counts and tie ends a segment cannot tell.
#[derive(Debug, Default)]
pub struct Blobs {
    segs: Vec<Segment>,
    /// The per-kind counts of blobs in order whose objects are not all of
    /// their first key's kind.
    mixed: SideList<[u32; 4]>,
    /// The tie ends of blobs in order whose keys repeat.
    ties: SideList<Ties>,
    id_notes: SideList<IdNotes>,
    /// What the merge keeps: with `--dedupe` a blob whose keys repeat is
    /// merged, so the merge sees (and drops) the repeats; see also
    /// `--latest` above.
    keep: Keep,
}

impl Blobs {
    /// No blobs yet, planned for a merge that keeps `keep`.
    pub fn new(keep: Keep) -> Blobs {
        Blobs {
            keep,
            ..Blobs::default()
        }
    }

    /// Add a validated blob record of source `source`, a history file
    /// when `history`.
    pub fn push(&mut self, source: u32, b: &BlobRecord, history: bool) -> Result<(), String> {
        let too_big = |what: &str, n: u64| format!("blob {}: {what} {n} is too large", b.seq);
        if source >= MAX_SOURCES {
            return Err(format!("too many sources (at most {MAX_SOURCES})"));
        }
        let mut counts = [0u32; 4];
        for (c, &n) in counts.iter_mut().zip(&b.counts.to_array()) {
            *c = u32::try_from(n).map_err(|_| too_big("object count", n))?;
        }
        let total = b.counts.total();
        let elements = u32::try_from(total).map_err(|_| too_big("object count", total))?;
        let length = u32::try_from(b.length).map_err(|_| too_big("frame length", b.length))?;
        let ties = b
            .ties
            .filter(|_| self.keep == Keep::All && (b.sorted || b.repeats));
        let latest = self.keep == Keep::Latest;
        let in_order = (b.sorted || (b.repeats && ties.is_some()))
            && !(latest && (history || b.duplicate_ids > 0));
        let seg = Segment::new(
            source,
            (Key::from(b.first).packed(), Key::from(b.last).packed()),
            (b.offset, length),
            elements,
            (b.sorted, in_order),
        );
        let at = (source, b.offset);
        if let Some(ties) = ties {
            self.ties.push((at, ties));
        }
        if in_order && (b.duplicate_ids > 0 || b.negative_ids) {
            let notes = IdNotes {
                duplicate_ids: b.duplicate_ids,
                negative_ids: b.negative_ids,
            };
            self.id_notes.push((at, notes));
        }
        if in_order && counts != one_kind(b.first.kind, elements) {
            self.mixed.push((at, counts));
        }
        self.segs.push(seg);
        Ok(())
    }

    /// The blob read last.
    pub fn last(&self) -> Option<&Segment> {
        self.segs.last()
    }

    /// Sort into planning order: by first key, then last key, source and
    /// offset (so the plan does not depend on the order of the input), on
    /// every core: nothing else runs between the index's end and the plan.
    pub fn sort(&mut self) {
        self.segs
            .par_sort_unstable_by_key(|s| (s.first(), s.last(), s.source(), s.offset));
        self.mixed.sort_unstable_by_key(|e| e.0);
        self.ties.sort_unstable_by_key(|e| e.0);
        self.id_notes.sort_unstable_by_key(|e| e.0);
    }

    /// The clusters of the sorted blobs; see [`Clusters`].
    pub fn clusters(&self) -> Clusters<'_> {
        Clusters {
            rest: &self.segs,
            ties: &self.ties,
            by_object: self.keep == Keep::Latest,
        }
    }

    /// Bytes the copy ops of the sorted blobs copy (the plan record's
    /// `copy_bytes`).
    pub fn copy_bytes(&self) -> u64 {
        self.clusters()
            .filter(|c| is_copy(c))
            .map(|c| u64::from(c[0].length))
            .sum()
    }

    /// The ops of the sorted blobs, in output order.
    pub fn ops(&self, frame_keys: bool) -> Ops<'_> {
        Ops {
            clusters: self.clusters().peekable(),
            blobs: self,
            frame_keys,
        }
    }

    fn frame_keys(&self, seg: &Segment) -> FrameKeys {
        let notes = side(&self.id_notes, seg).unwrap_or_default();
        let counts = side(&self.mixed, seg)
            .unwrap_or_else(|| one_kind(Key::from_packed(seg.first()).kind, seg.elements));
        FrameKeys {
            length: u64::from(seg.length),
            first: unpack(seg.first()),
            last: unpack(seg.last()),
            counts: Counts::from_array(counts.map(u64::from)),
            duplicate_ids: notes.duplicate_ids,
            negative_ids: notes.negative_ids,
        }
    }
}

/// Counts of `n` objects all of kind `kind`.
fn one_kind(kind: Kind, n: u32) -> [u32; 4] {
    let mut counts = [0; 4];
    counts[kind.index()] = n;
    counts
}

/// Iterator over the clusters of sorted segments ([`Blobs::clusters`]): maximal
/// stretches in which every segment starts before the largest last key
/// seen so far in the stretch, or at it, unless the stretch is one blob in
/// order whose objects all come before the next one's (see
/// [`Clusters::follows`]).
#[derive(Clone, Debug)]
pub struct Clusters<'a> {
    rest: &'a [Segment],
    /// The tie ends of [`Blobs`], by (source, offset).
    ties: &'a [((u32, u64), Ties)],
    /// Segments overlap where they share an object, not only a key
    /// (`--latest`).
    by_object: bool,
}

impl<'a> Iterator for Clusters<'a> {
    type Item = &'a [Segment];

    fn next(&mut self) -> Option<&'a [Segment]> {
        let head = self.rest.first()?;
        let mut max = head.last();
        let mut n = 1;
        while let Some(s) = self.rest.get(n).filter(|s| self.reaches(s.first(), max)) {
            if n == 1 && s.first() == max && self.all_follow(head) {
                break;
            }
            max = max.max(s.last());
            n += 1;
        }
        let (cluster, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(cluster)
    }
}

impl Clusters<'_> {
    /// Whether a segment starting at `first` overlaps a stretch reaching
    /// `max`.
    fn reaches(&self, first: u128, max: u128) -> bool {
        match self.by_object {
            true => packed_object(first) <= packed_object(max),
            false => first <= max,
        }
    }

    /// Whether every blob after `head` (the first of `rest`) that starts at
    /// its last key can follow it ([`Clusters::follows`]): all of them meet
    /// it at that key, not only the next one in planning order.
    fn all_follow(&self, head: &Segment) -> bool {
        self.rest[1..]
            .iter()
            .take_while(|s| s.first() == head.last())
            .all(|s| self.follows(head, s))
    }

    /// Whether blob `b`, whose first key is blob `a`'s last, can follow `a`
    /// as a cluster of its own: both in order, both with tie ends, and every
    /// object of `a` before every one of `b` in the merge's order (by
    /// timestamp, then input order). Without tie ends they overlap.
    fn follows(&self, a: &Segment, b: &Segment) -> bool {
        if !(a.in_order() && b.in_order()) {
            return false;
        }
        match (side(self.ties, a), side(self.ties, b)) {
            (Some(x), Some(y)) => follows_in_tie_order(x, y, a.input_order() < b.input_order()),
            _ => false,
        }
    }
}

/// True when a cluster is copied as is: one blob in order.
pub fn is_copy(cluster: &[Segment]) -> bool {
    matches!(cluster, [s] if s.in_order())
}

/// One op of the plan.
#[derive(Clone, Debug)]
pub enum Op<'a> {
    /// A copy op, whole (at most [`MAX_COPY_FRAMES`] frames).
    Copy(CopyOp),
    /// A merge op: its cluster of overlapping (or unsorted) blobs, which may
    /// hold millions of blobs.
    Merge(Merge<'a>),
}

/// How many inputs ahead [`Merge::inputs`] fetches a segment.
const PREFETCH_AHEAD: usize = 16;

/// A merge op as a cluster of segments; [`Merge::inputs`] gives its inputs one
/// at a time.
#[derive(Clone, Copy, Debug)]
pub struct Merge<'a> {
    cluster: &'a [Segment],
}

impl<'a> Merge<'a> {
    /// The op's inputs in file order (source id, then offset): the merge
    /// reads their frames in that order, and a reader of an op of millions
    /// of inputs then walks its list front to back instead of all over it.
    pub fn inputs(&self) -> impl Iterator<Item = MergeInput> + 'a {
        let cluster = self.cluster;
        let mut order: Vec<(u32, u64, u32)> = (0u32..)
            .zip(cluster)
            .map(|(i, s)| (s.source(), s.offset, i))
            .collect();
        order.par_sort_unstable();
        // The segments are in key order: fetched a few inputs ahead, their
        // cache misses overlap instead of coming one after another.
        (0..order.len()).map(move |k| {
            if let Some(&(.., ahead)) = order.get(k + PREFETCH_AHEAD) {
                prefetch(&cluster[ahead as usize]);
            }
            cluster[order[k].2 as usize].merge_input()
        })
    }

    /// Number of inputs.
    pub fn len(&self) -> u64 {
        self.cluster.len() as u64
    }

    /// Smallest key of the cluster.
    pub fn first(&self) -> KeyRecord {
        unpack(self.cluster.first().map(Segment::first).unwrap_or_default())
    }

    /// Largest key of the cluster.
    pub fn last(&self) -> KeyRecord {
        let last = self.cluster.iter().map(Segment::last).max();
        unpack(last.unwrap_or_default())
    }

    /// Objects in the cluster.
    pub fn elements(&self) -> u64 {
        self.cluster.iter().map(Segment::elements).sum()
    }
}

/// Iterator over plan ops; see [`Blobs::ops`].
#[derive(Clone, Debug)]
pub struct Ops<'a> {
    clusters: Peekable<Clusters<'a>>,
    blobs: &'a Blobs,
    /// Give copy ops their per-frame keys (`pbf-copy --add-indexdata` needs them).
    frame_keys: bool,
}

impl<'a> Iterator for Ops<'a> {
    type Item = Op<'a>;

    fn next(&mut self) -> Option<Op<'a>> {
        let cluster = self.clusters.next()?;
        let seg = match cluster {
            [seg] if seg.in_order() => seg,
            _ => return Some(Op::Merge(Merge { cluster })),
        };
        let mut op = CopyOp {
            source: seg.source(),
            offset: seg.offset,
            length: 0,
            blobs: 0,
            first: unpack(seg.first()),
            last: unpack(seg.last()),
            elements: 0,
            duplicate_ids: 0,
            frames: Vec::new(),
        };
        let mut prev = *seg;
        self.add_frame(&mut op, seg);
        while op.blobs < MAX_COPY_FRAMES as u64 {
            let next = match self.clusters.peek() {
                Some(&[next]) if next.in_order() && prev.touches(next) => next,
                _ => break,
            };
            self.clusters.next();
            self.add_frame(&mut op, next);
            op.duplicate_ids += u64::from(packed_same_object(prev.last(), next.first()));
            op.last = unpack(next.last());
            prev = *next;
        }
        Some(Op::Copy(op))
    }
}

impl Ops<'_> {
    fn add_frame(&self, op: &mut CopyOp, seg: &Segment) {
        op.length += u64::from(seg.length);
        op.blobs += 1;
        op.elements += seg.elements();
        if let Some(notes) = side(&self.blobs.id_notes, seg) {
            op.duplicate_ids += notes.duplicate_ids;
        }
        if self.frame_keys {
            op.frames.push(self.blobs.frame_keys(seg));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pbf_stream::{KeysFrom, MergeOp, PlanRecord};

    /// A sorted blob record of two ways [first, last] at offset..offset+length.
    pub fn way(first: i64, last: i64, offset: u64, length: u64) -> BlobRecord {
        BlobRecord {
            seq: 0,
            offset,
            length,
            compression: Some(pbf_format::compress::Codec::Zlib),
            raw_size: None,
            first: Key::new(Kind::Way, first, 1).into(),
            last: Key::new(Kind::Way, last, 1).into(),
            counts: Counts::from_array([0, 2, 0, 0]),
            sorted: true,
            repeats: false,
            versions_unsorted: false,
            duplicate_ids: 0,
            negative_ids: false,
            ties: None,
            from: KeysFrom::Decoded,
        }
    }

    fn unsorted(mut b: BlobRecord) -> BlobRecord {
        b.sorted = false;
        b
    }

    /// Blobs of (source, record), sorted for planning.
    fn blobs(records: &[(u32, BlobRecord)]) -> Blobs {
        let mut blobs = Blobs::default();
        for (source, b) in records {
            blobs.push(*source, b, false).expect("a valid record");
        }
        blobs.sort();
        blobs
    }

    fn of_source_0(records: Vec<BlobRecord>) -> Vec<(u32, BlobRecord)> {
        records.into_iter().map(|b| (0, b)).collect()
    }

    /// The op as the record it stands for.
    fn owned(op: Op<'_>) -> PlanRecord {
        match op {
            Op::Copy(c) => PlanRecord::Copy(c),
            Op::Merge(m) => PlanRecord::Merge(MergeOp {
                inputs: m.inputs().collect(),
                first: m.first(),
                last: m.last(),
                elements: m.elements(),
            }),
        }
    }

    fn planned_with(records: &[(u32, BlobRecord)], frame_keys: bool) -> Vec<PlanRecord> {
        blobs(records).ops(frame_keys).map(owned).collect()
    }

    fn planned(records: Vec<BlobRecord>) -> Vec<PlanRecord> {
        planned_with(&of_source_0(records), true)
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
    fn a_segment_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Segment>(), 48);
    }

    #[test]
    fn a_segment_keeps_what_it_is_given() {
        for (kind, id, version) in [
            (Kind::Node, 0, 0),
            (Kind::Node, -1, 3),
            (Kind::Way, i64::MIN, 1),
            (Kind::Relation, i64::MAX, u32::MAX),
            (Kind::Changeset, 42, 7),
        ] {
            let k = Key::new(kind, id, version).packed();
            assert_eq!(unpack(k), KeyRecord::from(Key::new(kind, id, version)));
            for (source, sorted) in [(0, true), (MAX_SOURCES - 1, false), (7, true)] {
                let last = Key::new(Kind::Changeset, i64::MIN, u32::MAX).packed();
                let s = Segment::new(
                    source,
                    (k, last),
                    (u64::MAX - 9, u32::MAX),
                    5,
                    (sorted, sorted),
                );
                assert_eq!(
                    (s.first(), s.last(), s.source(), s.sorted()),
                    (k, last, source, sorted)
                );
                assert_eq!(
                    (s.offset, s.length, s.elements()),
                    (u64::MAX - 9, u32::MAX, 5)
                );
            }
        }
    }

    #[test]
    fn what_a_segment_cannot_hold_is_refused() {
        let mut b = way(1, 2, 100, 10);
        b.length = 1 << 32;
        let e = Blobs::default().push(0, &b, false).expect_err("too long");
        assert!(e.contains("frame length 4294967296 is too large"), "{e}");
        let mut b = way(1, 2, 100, 10);
        b.counts = Counts::from_array([u64::from(u32::MAX), 1, 0, 0]);
        let e = Blobs::default().push(0, &b, false).expect_err("too many");
        assert!(e.contains("object count 4294967296 is too large"), "{e}");
        let e = Blobs::default()
            .push(MAX_SOURCES, &way(1, 2, 100, 10), false)
            .expect_err("too many sources");
        assert!(e.contains("too many sources"), "{e}");
    }

    #[test]
    fn per_kind_counts_survive_in_frame_keys() {
        // A blob of nodes, one of ways whose counts name relations too (the
        // index's word is kept), and a blob of ways and relations.
        let mut nodes = way(1, 2, 100, 10);
        nodes.first = Key::new(Kind::Node, 1, 1).into();
        nodes.last = Key::new(Kind::Node, 2, 1).into();
        nodes.counts = Counts::from_array([2, 0, 0, 0]);
        let mut odd = way(5, 6, 110, 10);
        odd.counts = Counts::from_array([0, 1, 4, 0]);
        let mut mixed = way(10, 11, 130, 10);
        mixed.last = Key::new(Kind::Relation, 1, 1).into();
        mixed.counts = Counts::from_array([0, 3, 2, 0]);
        let records = [nodes, odd, way(7, 9, 120, 10), mixed];
        let ops = planned(records.to_vec());
        let [PlanRecord::Copy(c)] = ops.as_slice() else {
            panic!("expected one copy, got {ops:?}")
        };
        let counts: Vec<Counts> = c.frames.iter().map(|f| f.counts).collect();
        let want: Vec<Counts> = records.iter().map(|r| r.counts).collect();
        assert_eq!(counts, want);
        assert_eq!(c.elements, 2 + 5 + 2 + 5);
    }

    #[test]
    fn overlap_is_transitive() {
        let a = way(1, 1_000_000, 100, 10);
        let b = way(8000, 16000, 200, 10);
        let c = way(16000, 24000, 300, 10);
        let d = way(1_000_001, 1_000_002, 400, 10);
        let records = of_source_0(vec![c, d, b, a.clone()]);
        let lens: Vec<usize> = blobs(&records).clusters().map(<[Segment]>::len).collect();
        assert_eq!(lens, [3, 1]);
        let ops = planned_with(&records, true);
        let PlanRecord::Merge(m) = &ops[0] else {
            panic!("expected a merge, got {:?}", ops[0])
        };
        let offsets: Vec<u64> = m.inputs.iter().map(|i| i.offset).collect();
        assert_eq!(offsets, [100, 200, 300]);
        assert_eq!((m.first, m.last), (a.first, a.last));
        assert_eq!(m.elements, 6);
        assert_eq!(copies(&ops[1..]), [(0, 400, 10, 1)]);
    }

    #[test]
    fn a_chain_is_one_cluster_even_where_ends_do_not_meet() {
        let records = of_source_0(vec![
            way(1, 10, 100, 10),
            way(5, 20, 110, 10),
            way(15, 30, 120, 10),
        ]);
        assert_eq!(blobs(&records).clusters().count(), 1);
    }

    #[test]
    fn equal_boundary_keys_overlap() {
        let b = way(8000, 16000, 100, 10);
        let c = way(16000, 24000, 110, 10);
        let ops = planned(vec![b.clone(), c]);
        assert_eq!(ops.len(), 1);
        assert!(matches!(&ops[0], PlanRecord::Merge(m) if m.inputs.len() == 2));
        let d = way(16001, 24000, 110, 10);
        assert_eq!(copies(&planned(vec![b, d])), [(0, 100, 20, 2)]);
    }

    #[test]
    fn unsorted_singleton_is_merged() {
        let ops = planned(vec![unsorted(way(1, 10, 100, 10))]);
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
        let other = way(31, 40, 135, 10);
        let c = way(41, 50, 145, 10);
        let records = [(0, a), (0, b.clone()), (0, gap), (1, other), (0, c)];
        let ops = planned_with(&records, true);
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
        assert_eq!(first.frames[1].first, b.first);
        assert_eq!(first.frames[1].counts[Kind::Way], 2);
    }

    #[test]
    fn without_frame_keys_the_ops_are_the_same_minus_the_keys() {
        // Longer than one copy op may hold, so the cut must not depend on the keys.
        let records: Vec<BlobRecord> = (0..MAX_COPY_FRAMES as u64 + 3)
            .map(|i| way(2 * i as i64 + 1, 2 * i as i64 + 2, 100 + 10 * i, 10))
            .collect();
        let records = of_source_0(records);
        let with = planned_with(&records, true);
        let without = planned_with(&records, false);
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
        let ops = planned(vec![c.clone(), a, b]);
        assert_eq!(copies(&ops), [(0, 100, 30, 3)]);
        // Stored out of order: same keys at swapped offsets.
        let swapped = vec![way(1, 10, 110, 10), way(11, 20, 100, 10), c];
        assert_eq!(
            copies(&planned(swapped)),
            [(0, 110, 10, 1), (0, 100, 10, 1), (0, 120, 10, 1)]
        );
    }

    #[test]
    fn long_stretches_are_split_at_the_frame_limit() {
        let n = MAX_COPY_FRAMES + 5;
        let records: Vec<BlobRecord> = (0..n as i64)
            .map(|i| way(2 * i, 2 * i + 1, 100 + 10 * i as u64, 10))
            .collect();
        let ops = planned(records);
        let c = copies(&ops);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].3, MAX_COPY_FRAMES as u64);
        assert_eq!(c[1], (0, 100 + 10 * MAX_COPY_FRAMES as u64, 50, 5));
    }

    /// Blob records of one source of ways in stored order, `(id, tie
    /// seconds)` each, cut at `cuts` (indexes of the first object of each
    /// blob but the first), described as pbf-index describes them: the key
    /// summary, and tie ends where keys repeat in the merge's order.
    fn described(objects: &[(i64, u32)], cuts: &[usize]) -> Vec<BlobRecord> {
        let mut bounds: Vec<usize> = cuts.to_vec();
        bounds.extend([0, objects.len()]);
        bounds.sort_unstable();
        bounds.dedup();
        bounds
            .windows(2)
            .map(|w| {
                let blob = &objects[w[0]..w[1]];
                let mut acc = pbf_format::scan::Accumulator::default();
                for &(id, _) in blob {
                    acc.push(Key::new(Kind::Way, id, 1));
                }
                let summary = acc.finish().expect("objects");
                let order = |&(id, tie): &(i64, u32)| (Key::new(Kind::Way, id, 1).packed(), tie);
                let in_order = blob.windows(2).all(|p| order(&p[0]) <= order(&p[1]));
                let ties = Ties {
                    first: blob[0].1,
                    last: blob[blob.len() - 1].1,
                };
                let keys = pbf_stream::BlobKeys {
                    summary,
                    from: KeysFrom::Decoded,
                    compression: None,
                    raw_size: None,
                    ties: (summary.repeats && in_order).then_some(ties),
                };
                // Offsets count objects: blob i spans its objects' indexes.
                let (offset, length) = (w[0] as u64, (w[1] - w[0]) as u64);
                BlobRecord::new(0, offset, length, &keys)
            })
            .collect()
    }

    /// Ways with ids 1, 1, 1, 1, 2, the second and third with the given
    /// tie seconds, in two blobs cut between them (both repeat a key): the
    /// tie ends decide the boundary.
    fn boundary(first: u32, second: u32) -> Vec<BlobRecord> {
        described(&[(1, 0), (1, first), (1, second), (1, 9), (2, 0)], &[2])
    }

    fn merges(ops: &[PlanRecord]) -> usize {
        let merge = |op: &&PlanRecord| matches!(op, PlanRecord::Merge(_));
        ops.iter().filter(merge).count()
    }

    #[test]
    fn repeats_in_timestamp_order_are_copied() {
        let b = boundary(5, 5);
        assert!(b.iter().all(|b| b.repeats && b.ties.is_some()));
        assert_eq!(copies(&planned(b)), [(0, 0, 5, 2)]);
        assert_eq!(copies(&planned(boundary(5, 6))), [(0, 0, 5, 2)]);
    }

    #[test]
    fn a_boundary_out_of_timestamp_order_is_merged() {
        let ops = planned(boundary(6, 5));
        assert!(matches!(ops.as_slice(), [PlanRecord::Merge(m)] if m.inputs.len() == 2));
    }

    #[test]
    fn equal_timestamps_across_sources_follow_the_source_order() {
        let b = boundary(5, 5);
        // The blob holding the earlier 1s comes from the later source: the
        // merge puts the other source's 1s of equal timestamp first.
        let swapped = [(1, b[0].clone()), (0, b[1].clone())];
        assert_eq!(merges(&planned_with(&swapped, false)), 1);
        let in_order = [(0, b[0].clone()), (1, b[1].clone())];
        assert_eq!(copies(&planned_with(&in_order, false)).len(), 2);
    }

    /// The ops `records` (of source 0, a history file when `history`) are
    /// planned into for a merge that keeps `keep`: `true` for a merge.
    fn kinds_of_ops(records: &[BlobRecord], keep: Keep, history: bool) -> Vec<bool> {
        let mut blobs = Blobs::new(keep);
        for r in records {
            blobs.push(0, r, history).expect("a valid record");
        }
        blobs.sort();
        blobs
            .ops(false)
            .map(|op| matches!(op, Op::Merge(_)))
            .collect()
    }

    #[test]
    fn latest_merges_blobs_that_share_an_object_or_hold_one_twice() {
        let older = way(1, 10, 100, 10);
        let mut newer = way(10, 20, 110, 10);
        newer.first = Key::new(Kind::Way, 10, 2).into();
        let apart = way(21, 30, 120, 10);
        let both = [older.clone(), newer, apart.clone()];
        assert_eq!(kinds_of_ops(&both, Keep::All, false), [false]);
        assert_eq!(kinds_of_ops(&both, Keep::Latest, false), [true, false]);
        let mut twice = apart.clone();
        twice.duplicate_ids = 1;
        let records = [older.clone(), twice];
        assert_eq!(kinds_of_ops(&records, Keep::Dedupe, false), [false, false]);
        assert_eq!(kinds_of_ops(&records, Keep::Latest, false), [false, true]);
        let (apart, history) = ([older, apart], true);
        assert_eq!(kinds_of_ops(&apart, Keep::Latest, false), [false, false]);
        assert_eq!(kinds_of_ops(&apart, Keep::Latest, history), [true, true]);
    }

    #[test]
    fn repeats_without_ties_and_dedupe_plans_are_merged() {
        let mut b = boundary(5, 5);
        let mut dedupe = Blobs::new(Keep::Dedupe);
        for r in &b {
            dedupe.push(0, r, false).expect("a valid record");
        }
        dedupe.sort();
        assert!(dedupe.ops(false).all(|op| matches!(op, Op::Merge(_))));
        b[0].ties = None;
        assert_eq!(merges(&planned(b)), 1);
    }

    /// The objects a plan writes, by index into the file's objects: copy
    /// ops in stored order, merge ops in the merge's order (key, tie
    /// seconds, input order: blob, then position).
    fn written(objects: &[(i64, u32)], records: Vec<BlobRecord>) -> Vec<usize> {
        let order = |i: &usize| {
            (
                Key::new(Kind::Way, objects[*i].0, 1).packed(),
                objects[*i].1,
                *i,
            )
        };
        let mut out = Vec::new();
        for op in planned(records) {
            match op {
                PlanRecord::Copy(c) => {
                    out.extend(c.offset as usize..(c.offset + c.length) as usize)
                }
                PlanRecord::Merge(m) => {
                    let mut all: Vec<usize> = m
                        .inputs
                        .iter()
                        .flat_map(|i| i.offset as usize..(i.offset + i.length) as usize)
                        .collect();
                    all.sort_by_key(order);
                    out.extend(all);
                }
                _ => {}
            }
        }
        out
    }

    proptest::proptest! {
        /// Whatever the timestamps and the cuts, the plan writes the
        /// objects in the merge's order of the whole file; and a file in
        /// that order whose every blob repeats a key merges nothing.
        #[test]
        fn plans_write_the_merge_order(
            ids in proptest::collection::vec(0i64..6, 1..40),
            ties in proptest::collection::vec(0u32..3, 40),
            cuts in proptest::collection::vec(0usize..40, 0..8),
            sort_ids in proptest::bool::ANY,
        ) {
            let mut ids = ids;
            if sort_ids {
                ids.sort_unstable();
            }
            let objects: Vec<(i64, u32)> = ids.iter().zip(&ties).map(|(&i, &t)| (i, t)).collect();
            let cuts: Vec<usize> = cuts.into_iter().filter(|&c| c < objects.len()).collect();
            let records = described(&objects, &cuts);
            let mut want: Vec<usize> = (0..objects.len()).collect();
            want.sort_by_key(|&i| (Key::new(Kind::Way, objects[i].0, 1).packed(), objects[i].1, i));
            proptest::prop_assert_eq!(written(&objects, records.clone()), want.clone());
            let in_order = want.iter().enumerate().all(|(n, &i)| n == i);
            if in_order && records.iter().all(|r| r.repeats) {
                let ops = planned(records);
                proptest::prop_assert!(ops.iter().all(|op| !matches!(op, PlanRecord::Merge(_))));
            }
        }
    }
}
