//! The copy-ahead protocol, the planner's side: what `pbf-overlap
//! --sources N` tells a copier before the plan is made, so that it can copy
//! a sorted input while the index is still being read (pbf-stream(5), PLAN
//! STREAM). The copier's side is in the copier.
//!
//! - Promise: the ops are the same with or without `--sources`; the records
//!   below only say what was read so far, never which ranges will be copied.
//! - The early plan record (`"early": true`, no `copy_bytes`) goes out,
//!   flushed, once all N source records are read and the first
//!   [`IN_ORDER_FIRST`] blobs of the last source are in order, and only when
//!   no op can change the output header; a `sorted` record through those
//!   blobs follows it at once. Otherwise the plan record waits for the plan.
//! - `sorted` records follow each time the last source is read in order
//!   [`SORTED_STEP`] further; `unsorted` goes out once, at its first blob out
//!   of order, and ends them. In order means: in order inside (sorted, or
//!   its repeats in the merge's order), starting at or past the end of the
//!   blob before, and not after any sample further on in the file.
//! - Once planned, after an early record: a `header` record with the final
//!   header and `copy_bytes`, then the ops and the end record.
//! - The copier may assume that every frame of the last source that ends at
//!   or before a `sorted` record's `through` is sorted and follows the one
//!   before it; of the ops, nothing until it reads them.
//!
//! Samples: keys pbf-index read ahead at offsets across the file (the
//! source record's `samples`) let the watch see a disorder before the index
//! reaches it. A file made of two sorted files (`cat a b`) is in order up
//! to the seam, half way; its second half's samples sort before the end of
//! its first blobs, so the plan record does not go out early, and a copier
//! does not copy half the file ahead to drop it.
//!
//! A blob cannot keep its place in the output when an object after it in
//! the file sorts at or before its last key. In a sorted file every blob
//! after another starts past that one's end, so no sample ever says so.
//! Samples are hints: a wrong one costs a copier's head start, never an
//! output byte, as the ops do not depend on them.

use std::io::Write;

use anyhow::{Result, bail};
use pbf_format::header::Header;
use pbf_stream::{OutputHeader, PlanHeader, PlanRecord, Sample, SortedThrough, Unsorted, Writer};

use crate::header;
use crate::input::Input;
use crate::plan::Segment;

/// Blobs of the last source that must be read sorted and in file order
/// before `--sources` writes the plan record early: a copier copies ahead on
/// the guess that the input is sorted, and an input whose first blobs are
/// out of order (blob-permuted, or unsorted inside its blobs) would waste
/// that copy. Sixteen blobs are a moment of indexing.
pub const IN_ORDER_FIRST: u32 = 16;

/// Bytes of the last source read in order between two `sorted` records: a
/// copier copies ahead in steps of this size too, so it follows the index
/// a step behind, with a record per step.
pub const SORTED_STEP: u64 = 16 << 20;

/// The plan stream being written, with the watch of the last source's
/// order behind `--sources` and the records it writes before the plan is
/// made (the plan itself: `Ahead::finish`, in lib.rs).
pub struct Ahead {
    /// The plan stream.
    pub out: Writer<Box<dyn Write>>,
    /// What the output header takes from the command line.
    pub made: header::Made,
    /// `--sources`.
    sources: Option<u32>,
    /// Blobs of the last source read so far in order, and the last one's
    /// largest key; `None` once one was out of order (after an early plan
    /// record: the `unsorted` record went out), or the header proved to
    /// depend on the ops.
    in_order: Option<(u32, u128)>,
    /// Whether the plan record went out before the blobs were read.
    early: bool,
    /// The offset of the last `sorted` record.
    sorted_through: u64,
    /// The samples of the last source read, and how many sources were read
    /// when they were taken.
    samples: Samples,
    samples_of: usize,
}

impl Ahead {
    /// A plan written to `out`, with the watch of `--sources N` (none
    /// without it); serialising is timed when `timed` (for -vv: a clock
    /// read per record adds up).
    pub fn new(
        out: Box<dyn Write>,
        made: header::Made,
        sources: Option<u32>,
        timed: bool,
    ) -> Ahead {
        Ahead {
            out: Writer::new(out).timed(timed),
            made,
            sources,
            in_order: Some((0, 0)),
            early: false,
            sorted_through: 0,
            samples: Samples::default(),
            samples_of: 0,
        }
    }

    /// After a source or blob record: with `--sources N`, write the plan
    /// record once N sources are in and the first blobs of the last one are
    /// in order, when no op can change the output header.
    pub fn record_read(&mut self, input: &Input) -> Result<()> {
        let Some(want) = self.sources else {
            return Ok(());
        };
        let have = input.sources.len();
        if have > want as usize {
            bail!("--sources {want}, but the index streams hold more sources");
        }
        if self.samples_of != have {
            (self.samples, self.samples_of) = (Samples::new(&input.samples), have);
        }
        // After an early plan record the source was in order so far: once
        // that ends, the `unsorted` record has gone out.
        if self.in_order.is_none() || have < want as usize {
            return Ok(());
        }
        let Some(seg) = input
            .last_planned()
            .filter(|s| s.source() as usize + 1 == have)
        else {
            return Ok(());
        };
        self.follow(seg);
        if self.early {
            // At the first blob of the last source out of file order, say
            // so at once (a copier copying that source ahead stops), long
            // before the ops.
            return match self.in_order {
                Some(_) => self.sorted(seg),
                None => {
                    self.out.write(&PlanRecord::Unsorted(Unsorted {}))?;
                    self.out.flush()?;
                    Ok(())
                }
            };
        }
        if self.in_order.is_none_or(|(n, _)| n < IN_ORDER_FIRST) {
            return Ok(());
        }
        // Every source is in: whatever the answer, it is final, so the
        // watch ends here either way. (A later OSMHeader of the last source
        // can still change the header: `planned` then gives a header record.)
        let header = header::output_header(&input.headers, false, &self.made);
        if header != header::output_header(&input.headers, true, &self.made) {
            self.in_order = None;
            return Ok(());
        }
        self.out.write(&plan_record(input, header, None))?;
        self.early = true;
        self.sorted(seg)
    }

    /// The record that opens the ops once the plan is made: the plan record,
    /// or after an early one the header record, which brings what the plan
    /// copies (and the header, changed or not).
    pub fn planned(&self, input: &Input, header: Header, copy_bytes: u64) -> Result<PlanRecord> {
        if let Some(want) = self.sources.filter(|&n| n as usize != input.sources.len()) {
            bail!(
                "--sources {want}, but the index streams hold {}",
                pbf_cli::plural(input.sources.len() as u64, "source")
            );
        }
        let copy_bytes = Some(copy_bytes);
        Ok(match self.early {
            false => plan_record(input, header, copy_bytes),
            true => PlanRecord::Header(OutputHeader { header, copy_bytes }),
        })
    }

    /// Say that the last source is in order through `seg`, now (after the
    /// early plan record) or once it is a step past the last such record.
    fn sorted(&mut self, seg: &Segment) -> Result<()> {
        if self.sorted_through > 0 && seg.end() < self.sorted_through + SORTED_STEP {
            return Ok(());
        }
        self.sorted_through = seg.end();
        self.out.write(&PlanRecord::Sorted(SortedThrough {
            source: seg.source(),
            through: seg.end(),
        }))?;
        self.out.flush()?;
        Ok(())
    }

    /// Take `seg`, the last source's newest blob, into the watch of its
    /// order: still in order when in order inside (sorted, or its repeated
    /// keys in the merge's order), not before the blob before, and not
    /// after any sample further on in the file (see [`Samples`]). A key
    /// repeated across a boundary counts as in order: the plan copies both
    /// blobs when their tie ends say so, and merges them otherwise, which
    /// costs the copier the bytes it copied past them, never an output byte.
    fn follow(&mut self, seg: &Segment) {
        let samples = &self.samples;
        self.in_order = self.in_order.and_then(|(n, last)| {
            let next =
                seg.in_order() && (n == 0 || seg.first() >= last) && !samples.contradict(seg);
            next.then_some((n + 1, seg.last()))
        });
    }
}

/// The plan record: early (before planning) when `copy_bytes` is not
/// known yet.
fn plan_record(input: &Input, header: Header, copy_bytes: Option<u64>) -> PlanRecord {
    PlanRecord::Plan(PlanHeader {
        schema: pbf_stream::PLAN_SCHEMA.into(),
        version: pbf_stream::SCHEMA_VERSION,
        sources: input.sources.clone(),
        header,
        early: copy_bytes.is_none(),
        copy_bytes,
    })
}

/// The samples of one source, by offset, with the smallest key from each
/// on.
#[derive(Debug, Default)]
pub struct Samples {
    /// Sample offsets, ascending.
    offsets: Vec<u64>,
    /// For each offset, the smallest first key (packed) of the samples at
    /// or after it.
    smallest_from: Vec<u128>,
}

impl Samples {
    /// The samples of a source record, in any order.
    pub fn new(samples: &[Sample]) -> Samples {
        let mut by_offset: Vec<(u64, u128)> = samples
            .iter()
            .map(|s| (s.offset, pbf_format::Key::from(s.first).packed()))
            .collect();
        by_offset.sort_unstable();
        let mut smallest_from: Vec<u128> = by_offset.iter().map(|&(_, k)| k).collect();
        for i in (1..smallest_from.len()).rev() {
            smallest_from[i - 1] = smallest_from[i - 1].min(smallest_from[i]);
        }
        Samples {
            offsets: by_offset.into_iter().map(|(o, _)| o).collect(),
            smallest_from,
        }
    }

    /// Whether a sample after `seg` in the file sorts before its last key:
    /// then `seg` is not where the output puts it (a sample at its last key
    /// is a key repeated across blobs, in order as [`Ahead::follow`] says).
    pub fn contradict(&self, seg: &Segment) -> bool {
        let after = self.offsets.partition_point(|&o| o <= seg.offset);
        self.smallest_from
            .get(after)
            .is_some_and(|&k| k < seg.last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Purpose;
    use crate::plan;
    use pbf_format::{Key, Kind};
    use pbf_stream::{BlobRecord, FileIdentity, IndexRecord, SourceRecord};
    use std::cell::RefCell;
    use std::io::Cursor;
    use std::rc::Rc;

    use pbf_stream::IndexEnd;

    /// A writer whose bytes the test reads while an [`Ahead`] owns it.
    #[derive(Clone, Default)]
    struct Shared(Rc<RefCell<Vec<u8>>>);

    impl std::io::Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The index of one file whose blobs hold the ways `keys` (first,
    /// last), 1000 bytes apart, sampled at the blobs `sampled`.
    fn index(keys: &[(i64, i64)], sampled: &[usize]) -> Vec<u8> {
        let blobs: Vec<BlobRecord> = keys
            .iter()
            .zip(0..)
            .map(|(&(first, last), i)| BlobRecord {
                seq: i,
                ..plan::tests::way(first, last, 100 + i * 1000, 1000)
            })
            .collect();
        let samples = sampled
            .iter()
            .map(|&i| Sample {
                offset: blobs[i].offset,
                first: blobs[i].first,
            })
            .collect();
        let header = Header {
            required_features: vec!["OsmSchema-V0.6".into(), "DenseNodes".into()],
            ..Header::default()
        };
        let mut w = Writer::new(Vec::new());
        let source = SourceRecord {
            schema: pbf_stream::INDEX_SCHEMA.into(),
            version: pbf_stream::SCHEMA_VERSION,
            file: FileIdentity {
                size: 100 + 1000 * blobs.len() as u64,
                ..FileIdentity::unrecorded("/in.osm.pbf".as_ref())
            },
            header,
            samples,
        };
        w.write(&IndexRecord::Source(source)).expect("source");
        let mut end = IndexEnd::default();
        for b in blobs {
            end.blobs += 1;
            end.counts.add(b.counts);
            w.write(&IndexRecord::Blob(b)).expect("blob");
        }
        w.write(&IndexRecord::End(end)).expect("end");
        w.finish().expect("index")
    }

    /// Plan `index` into `buf`, with `--sources` when given; `after(n)` runs
    /// after each record read (`n` blob records so far) and once at the end.
    fn plan_into(buf: &Shared, index: Vec<u8>, sources: Option<u32>, mut after: impl FnMut(u64)) {
        let made = header::Made {
            writingprogram: "test".into(),
            current_state: false,
        };
        let mut plan = Ahead::new(Box::new(buf.clone()), made, sources, false);
        let mut input = Input::new(Purpose::Plan(plan::Blobs::default()), false);
        let mut on_record = |input: &Input| {
            plan.record_read(input)?;
            after(input.blob_records);
            Ok(())
        };
        input
            .read("index", Box::new(Cursor::new(index)), &mut on_record)
            .expect("read");
        if let Purpose::Plan(blobs) = &mut input.blobs {
            blobs.sort();
        }
        plan.finish(&input, false).expect("plan");
        after(input.blob_records);
    }

    /// What `pbf-overlap --sources 1` writes for `index`: each record's
    /// type (`plan early` for an early plan record) and how many blob
    /// records had been read when it went out (all of them for those
    /// written at the end).
    fn written(index: Vec<u8>) -> Vec<(u64, String)> {
        let buf = Shared::default();
        let mut lines = Vec::new();
        plan_into(&buf, index, Some(1), |read| {
            let text = String::from_utf8(buf.0.take()).expect("utf-8");
            for line in text.lines() {
                let kind = line["{\"type\":\"".len()..]
                    .split('"')
                    .next()
                    .expect("type");
                let early = if line.contains("\"early\":true") {
                    " early"
                } else {
                    ""
                };
                lines.push((read, format!("{kind}{early}")));
            }
        });
        lines
    }

    /// Blobs of ways [10 i, 10 i + 9] for i in `range`.
    fn sorted_keys(range: std::ops::Range<i64>) -> Vec<(i64, i64)> {
        range.map(|i| (10 * i, 10 * i + 9)).collect()
    }

    /// Blobs of ways that interleave those of `sorted_keys(range)`.
    fn interleaving(range: std::ops::Range<i64>) -> Vec<(i64, i64)> {
        range.map(|i| (10 * i + 5, 10 * i + 8)).collect()
    }

    /// The first record of `kind` and when it went out.
    fn first_of<'a>(lines: &'a [(u64, String)], kind: &str) -> Option<&'a (u64, String)> {
        lines.iter().find(|(_, k)| k == kind)
    }

    #[test]
    fn a_sample_against_the_first_blobs_keeps_the_plan_record_back() {
        // Two sorted halves: the second's keys fall among the first's.
        let keys = [sorted_keys(0..20), interleaving(0..20)].concat();
        let without = written(index(&keys, &[]));
        assert_eq!(first_of(&without, "plan early").map(|l| l.0), Some(16));
        assert_eq!(first_of(&without, "unsorted").map(|l| l.0), Some(21));
        let with = written(index(&keys, &[10, 20, 30]));
        assert_eq!(with[0], (40, "plan".to_owned()), "{with:?}");
        assert!(first_of(&with, "sorted").is_none(), "{with:?}");
        assert!(first_of(&with, "unsorted").is_none(), "{with:?}");
    }

    #[test]
    fn a_sample_against_a_later_blob_says_unsorted_when_that_blob_is_read() {
        // In order through blob 29; blob 30 on interleave blobs 20 to 29.
        let keys = [sorted_keys(0..30), interleaving(20..30)].concat();
        let without = written(index(&keys, &[]));
        assert_eq!(first_of(&without, "unsorted").map(|l| l.0), Some(31));
        // The sample of blob 32 (first key 225) sorts inside blob 22.
        let with = written(index(&keys, &[8, 32]));
        assert_eq!(with[0], (16, "plan early".to_owned()), "{with:?}");
        assert_eq!(with[1], (16, "sorted".to_owned()), "{with:?}");
        assert_eq!(first_of(&with, "unsorted").map(|l| l.0), Some(23));
        let ops = |lines: &[(u64, String)]| -> Vec<String> {
            lines
                .iter()
                .skip(2)
                .filter(|l| l.1 != "unsorted")
                .map(|l| l.1.clone())
                .collect()
        };
        assert_eq!(ops(&with), ops(&without), "the same ops");
    }

    /// The records `pbf-overlap` writes for `index`, with `--sources`
    /// when given.
    fn plan_records(index: Vec<u8>, sources: Option<u32>) -> Vec<PlanRecord> {
        let buf = Shared::default();
        plan_into(&buf, index, sources, |_| {});
        let mut lines = pbf_stream::LineReader::new(Cursor::new(buf.0.take()));
        std::iter::from_fn(|| lines.next_record().expect("a plan record")).collect()
    }

    #[test]
    fn the_plan_says_what_its_copy_ops_copy_before_the_first_op() {
        // Blobs 16 to 19 overlap the blobs after them: 16 blobs are copied.
        let keys = [sorted_keys(0..20), interleaving(16..20)].concat();
        let copied = Some(16 * 1000);
        let planned = plan_records(index(&keys, &[]), None);
        let PlanRecord::Plan(p) = &planned[0] else {
            panic!("{planned:?}");
        };
        assert_eq!((p.early, p.copy_bytes), (false, copied));
        assert!(!planned.iter().any(|r| matches!(r, PlanRecord::Header(_))));
        // An early plan record cannot know: the header record brings it.
        let early = plan_records(index(&keys, &[]), Some(1));
        let PlanRecord::Plan(p) = &early[0] else {
            panic!("{early:?}");
        };
        assert_eq!((p.early, p.copy_bytes), (true, None));
        let first_op = early
            .iter()
            .position(|r| matches!(r, PlanRecord::Copy(_) | PlanRecord::Merge(_)))
            .expect("ops");
        let PlanRecord::Header(h) = &early[first_op - 1] else {
            panic!("{early:?}");
        };
        assert_eq!((&h.header, h.copy_bytes), (&p.header, copied));
        assert_eq!(early[first_op..], planned[1..], "the same ops");
    }

    #[test]
    fn samples_of_a_sorted_file_change_nothing() {
        let keys = sorted_keys(0..40);
        let every: Vec<usize> = (0..40).step_by(3).collect();
        let with = written(index(&keys, &every));
        assert_eq!(with, written(index(&keys, &[])));
        assert_eq!(with[0], (16, "plan early".to_owned()), "{with:?}");
        assert_eq!(with[1], (16, "sorted".to_owned()), "{with:?}");
        assert!(first_of(&with, "unsorted").is_none(), "{with:?}");
    }

    fn node(id: i64) -> u128 {
        Key::new(Kind::Node, id, 1).packed()
    }

    fn sample(offset: u64, id: i64) -> Sample {
        Sample {
            offset,
            first: Key::new(Kind::Node, id, 1).into(),
        }
    }

    fn blob(offset: u64, first: i64, last: i64) -> Segment {
        Segment::new(0, (node(first), node(last)), (offset, 100), 2, (true, true))
    }

    #[test]
    fn only_samples_after_a_blob_that_sort_within_it_contradict_it() {
        let samples = Samples::new(&[sample(300, 50), sample(100, 10), sample(500, 900)]);
        // The sample at 300 (key 50) sorts inside [40, 60] and lies after it.
        assert!(samples.contradict(&blob(0, 40, 60)));
        // An equal key is a key repeated across blobs: the ties decide.
        assert!(!samples.contradict(&blob(200, 40, 50)), "an equal key");
        assert!(samples.contradict(&blob(200, 40, 51)));
        assert!(!samples.contradict(&blob(200, 40, 49)));
        // At the sample's own offset, or past it, it says nothing.
        assert!(!samples.contradict(&blob(300, 50, 60)));
        assert!(!samples.contradict(&blob(400, 40, 900)));
        assert!(samples.contradict(&blob(400, 40, 901)));
        assert!(!Samples::default().contradict(&blob(0, 1, 1_000_000)));
    }

    #[test]
    fn a_sorted_file_is_never_contradicted() {
        // Blobs of 100 keys each, 100 bytes apart, sampled at every third.
        let samples: Vec<Sample> = (0..30)
            .step_by(3)
            .map(|i| sample(i * 100, i as i64 * 100))
            .collect();
        let samples = Samples::new(&samples);
        for i in 0..30 {
            let first = i as i64 * 100;
            assert!(
                !samples.contradict(&blob(i * 100, first, first + 99)),
                "blob {i}"
            );
        }
    }
}
