//! The last source's samples (the source record's `samples`, pbf-stream(5)):
//! keys pbf-index read ahead at offsets across the file. With them the
//! watch of the last source's order behind `--sources` sees a disorder
//! before the index reaches it. A file made of two sorted files (`cat a b`)
//! is in order up to the seam, half way; its second half's samples sort
//! before the end of its first blobs, so the plan record does not go out
//! early, and a copier does not copy half the file ahead to drop it.
//!
//! A blob cannot keep its place in the output when an object after it in
//! the file sorts at or before its last key. In a sorted file every blob
//! after another starts past that one's end, so no sample ever says so.
//! Samples are hints: a wrong one costs a copier's head start, never an
//! output byte, as the ops do not depend on them.

use pbf_stream::Sample;

use crate::plan::Segment;

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

    /// Whether a sample after `seg` in the file sorts at or before its
    /// last key: then `seg` is not where the output puts it.
    pub fn contradict(&self, seg: &Segment) -> bool {
        let after = self.offsets.partition_point(|&o| o <= seg.offset);
        self.smallest_from
            .get(after)
            .is_some_and(|&k| k <= seg.last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::{Key, Kind};

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
        assert!(samples.contradict(&blob(200, 40, 50)), "an equal key too");
        assert!(!samples.contradict(&blob(200, 40, 49)));
        // At the sample's own offset, or past it, it says nothing.
        assert!(!samples.contradict(&blob(300, 50, 60)));
        assert!(!samples.contradict(&blob(400, 40, 800)));
        assert!(samples.contradict(&blob(400, 40, 900)));
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
