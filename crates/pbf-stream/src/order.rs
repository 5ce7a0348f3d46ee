//! The order a plan promises, checked from the keys its ops carry. A copier
//! writes `Sort.Type_then_ID` into the output header and never decodes what
//! it copies, so it must not vouch for an order it has not seen: every op
//! must start at or after the key the op before it ends with, each op's keys
//! (and its frames' and merge inputs') must lie inside its range, and no
//! byte of a source may be read twice. Equal boundary keys are allowed: the
//! copy ops pbf-merge writes for one merge may share a key when duplicates
//! are kept. Memory stays O(ops): the byte ranges read are kept per source
//! with adjacent ranges joined, and a check costs a map lookup.

use std::collections::{BTreeMap, HashMap};

use pbf_format::Key;

use crate::error::Error;
use crate::records::{CopyOp, KeyRecord, MergeOp, SourceRef};

/// The end of the message for a plan whose ops are out of order.
const REMAKE: &str = "make the plan again with pbf-overlap (and pbf-merge)";

/// Byte ranges of one source already read, adjacent ones joined:
/// start -> span.
type Read = BTreeMap<u64, Span>;

/// A run of bytes read by the ops on lines `lines.0..=lines.1`.
#[derive(Clone, Copy, Debug)]
struct Span {
    end: u64,
    lines: (u64, u64),
}

/// What the ops read so far must agree with.
#[derive(Debug, Default)]
pub(crate) struct OrderCheck {
    /// The last key of the op before, and its line.
    before: Option<(Key, u64)>,
    read: HashMap<u32, Read>,
}

impl OrderCheck {
    /// Check a copy op on `line` over the plan's `sources` and take it in.
    pub fn copy(&mut self, op: &CopyOp, line: u64, sources: &[SourceRef]) -> Result<(), Error> {
        let (first, last) = range(op.first, op.last);
        self.keys("copy op", first, last)?;
        check_frames(op, first, last)?;
        self.take(None, (op.source, op.offset, op.length), line, sources)?;
        self.before = Some((last, line));
        Ok(())
    }

    /// Check a merge op on `line` over the plan's `sources` and take it in.
    pub fn merge(&mut self, op: &MergeOp, line: u64, sources: &[SourceRef]) -> Result<(), Error> {
        let (first, last) = range(op.first, op.last);
        self.keys("merge op", first, last)?;
        for (i, input) in op.inputs.iter().enumerate() {
            let (f, l) = range(input.first, input.last);
            if f > l || f < first || l > last {
                return Err(Error::invalid(format!(
                    "merge op {first}..{last}: input {} (offset {}) has keys {f}..{l}, outside \
                     the op's range; {REMAKE}",
                    i + 1,
                    input.offset
                )));
            }
        }
        // In file order, inputs that follow each other are taken as one
        // range: a shuffled file of small blobs is one merge op whose
        // inputs cover the file, one map search instead of millions. A
        // range refused is taken again input by input, to name the one.
        let range = |i: u32| {
            let input = &op.inputs[i as usize];
            (input.source, input.offset, input.length)
        };
        let order = op.file_order();
        let follows = |&a: &u32, &b: &u32| {
            let (a, b) = (range(a), range(b));
            a.0 == b.0 && a.1.saturating_add(a.2) == b.1
        };
        for run in order.chunk_by(follows) {
            let (source, offset, _) = range(run[0]);
            let length = run.iter().map(|&i| range(i).2).sum();
            let whole = self.take(Some(run[0]), (source, offset, length), line, sources);
            if whole.is_err() {
                for &i in run {
                    self.take(Some(i), range(i), line, sources)?;
                }
                whole?;
            }
        }
        self.before = Some((last, line));
        Ok(())
    }

    /// The op's own range, and its place after the op before it.
    fn keys(&self, what: &str, first: Key, last: Key) -> Result<(), Error> {
        if first > last {
            return Err(Error::invalid(format!(
                "{what} {first}..{last}: its first key is after its last key; {REMAKE}"
            )));
        }
        match self.before {
            Some((end, line)) if first < end => Err(Error::invalid(format!(
                "{what} {first}..{last} starts before the op on line {line} ends ({end}): the \
                 ops are not in output order, so the output would not be sorted; {REMAKE}"
            ))),
            _ => Ok(()),
        }
    }

    /// Record `length` bytes at `offset` of `source` as read on `line` by
    /// merge op input `input` (`None`: a copy op), refusing bytes read
    /// before (and naming the source as `sources` do).
    fn take(
        &mut self,
        input: Option<u32>,
        (source, offset, length): (u32, u64, u64),
        line: u64,
        sources: &[SourceRef],
    ) -> Result<(), Error> {
        let end = offset.saturating_add(length);
        let read = self.read.entry(source).or_default();
        let copied = |(&s, &span): (&u64, &Span)| (s, span);
        let before = read.range(..=offset).next_back().map(copied);
        let after = read.range(offset..).next().map(copied);
        for (start, span) in before.into_iter().chain(after) {
            if start < end && offset < span.end {
                let name = sources.iter().find(|s| s.id == source).map(SourceRef::name);
                let name = name.as_deref().unwrap_or("?");
                return Err(read_twice(input, name, (offset, end), (start, span)));
            }
        }
        let mut span = Span {
            end,
            lines: (line, line),
        };
        let mut start = offset;
        let joined = [
            before.filter(|(_, b)| b.end == offset),
            after.filter(|&(s, _)| s == end),
        ];
        for (s, other) in joined.into_iter().flatten() {
            read.remove(&s);
            start = start.min(s);
            span.end = span.end.max(other.end);
            span.lines = (
                span.lines.0.min(other.lines.0),
                span.lines.1.max(other.lines.1),
            );
        }
        read.insert(start, span);
        Ok(())
    }
}

fn range(first: KeyRecord, last: KeyRecord) -> (Key, Key) {
    (Key::from(first), Key::from(last))
}

/// A copy op's frame keys, when given: each frame's range inside the op's,
/// and each frame starting at or after the one before it ends.
fn check_frames(op: &CopyOp, first: Key, last: Key) -> Result<(), Error> {
    let mut end = first;
    for (i, frame) in op.frames.iter().enumerate() {
        let (f, l) = range(frame.first, frame.last);
        if f > l || l > last || f < first {
            return Err(Error::invalid(format!(
                "copy op {first}..{last}: frame {} has keys {f}..{l}, outside the op's range; \
                 {REMAKE}",
                i + 1
            )));
        }
        if f < end {
            return Err(Error::invalid(format!(
                "copy op {first}..{last}: frame {} ({f}..{l}) starts before frame {} ends \
                 ({end}): the frames are not in output order; {REMAKE}",
                i + 1,
                i
            )));
        }
        end = l;
    }
    Ok(())
}

/// `input`: the index of the merge op input that reads the bytes (`None`:
/// a copy op), named only when a range is refused, so a merge op of
/// millions of inputs formats nothing.
fn read_twice(
    input: Option<u32>,
    source: &str,
    (offset, end): (u64, u64),
    (start, span): (u64, Span),
) -> Error {
    let what = match input {
        None => "copy op".to_owned(),
        Some(i) => format!("merge op input {}", u64::from(i) + 1),
    };
    let who = match span.lines {
        (a, b) if a == b => format!("the op on line {a}"),
        (a, b) => format!("the ops on lines {a}..{b}"),
    };
    Error::invalid(format!(
        "{what} reads bytes {offset}..{end} of {source}, and {who} already read bytes \
         {start}..{}: a blob copied or merged twice would put its objects in the output twice; \
         {REMAKE}",
        span.end
    ))
}

#[cfg(test)]
mod tests {
    use pbf_format::Kind;

    use super::*;
    use crate::Counts;
    use crate::records::{FrameKeys, MergeInput};

    fn check() -> OrderCheck {
        OrderCheck::default()
    }

    /// The plan's sources: two files of 1000 bytes.
    fn sources() -> Vec<SourceRef> {
        let source = |id| SourceRef {
            id,
            file: crate::FileIdentity {
                size: 1000,
                ..crate::FileIdentity::unrecorded(format!("/in{id}.pbf").as_ref())
            },
            spool: false,
        };
        vec![source(0), source(1)]
    }

    fn key(id: i64, version: u32) -> KeyRecord {
        Key::new(Kind::Way, id, version).into()
    }

    fn copy(offset: u64, first: KeyRecord, last: KeyRecord) -> CopyOp {
        CopyOp {
            source: 0,
            offset,
            length: 10,
            blobs: 1,
            first,
            last,
            elements: 1,
            duplicate_ids: 0,
            frames: Vec::new(),
        }
    }

    #[test]
    fn ops_in_order_pass_and_may_share_a_boundary_key() {
        let mut c = check();
        // The second shares the first's last key; the third comes later.
        let ops = [(0, 1, 5, 2), (10, 5, 7, 3), (100, 8, 9, 4)];
        for (offset, first, last, line) in ops {
            let op = copy(offset, key(first, 1), key(last, 1));
            c.copy(&op, line, &sources())
                .unwrap_or_else(|e| panic!("line {line}: {e}"));
        }
    }

    #[test]
    fn an_op_starting_before_the_last_one_ends_is_named_with_both_lines() {
        let mut c = check();
        c.copy(&copy(0, key(1, 1), key(7, 1)), 2, &sources())
            .expect("first");
        let e = c
            .copy(&copy(10, key(5, 1), key(9, 2)), 3, &sources())
            .expect_err("reordered")
            .to_string();
        assert!(
            e.starts_with("copy op w5 v1..w9 v2 starts before the op on line 2 ends (w7 v1)"),
            "{e}"
        );
        assert!(e.contains("make the plan again with pbf-overlap"), "{e}");
    }

    #[test]
    fn first_after_last_is_refused() {
        let e = check()
            .copy(&copy(0, key(9, 1), key(1, 1)), 2, &sources())
            .expect_err("backwards")
            .to_string();
        assert!(
            e.contains("w9 v1..w1 v1: its first key is after its last"),
            "{e}"
        );
    }

    #[test]
    fn bytes_read_twice_are_refused_and_adjacent_ranges_joined() {
        let mut c = check();
        // Bytes 10..20, 20..30, then 0..10.
        for (offset, id, line) in [(10, 1, 2), (20, 2, 3), (0, 3, 4)] {
            let op = copy(offset, key(id, 1), key(id, 1));
            c.copy(&op, line, &sources())
                .unwrap_or_else(|e| panic!("line {line}: {e}"));
        }
        assert_eq!(c.read[&0].len(), 1, "joined: {:?}", c.read);
        let e = c
            .copy(&copy(25, key(4, 1), key(4, 1)), 5, &sources())
            .expect_err("overlap")
            .to_string();
        assert!(
            e.contains(
                "bytes 25..35 of /in0.pbf, and the ops on lines 2..4 already read bytes 0..30"
            ),
            "{e}"
        );
        let mut other = copy(25, key(5, 1), key(5, 1));
        other.source = 1;
        c.copy(&other, 6, &sources()).expect("another source");
    }

    #[test]
    fn frames_must_be_in_order_inside_the_op() {
        let frame = |f, l| FrameKeys {
            length: 5,
            first: f,
            last: l,
            counts: Counts::default(),
            duplicate_ids: 0,
            negative_ids: false,
        };
        let mut op = copy(0, key(1, 1), key(9, 1));
        op.frames = vec![frame(key(1, 1), key(5, 1)), frame(key(5, 1), key(9, 1))];
        check().copy(&op, 2, &sources()).expect("in order");
        op.frames = vec![frame(key(4, 1), key(9, 1)), frame(key(1, 1), key(3, 1))];
        let e = check().copy(&op, 2, &sources()).expect_err("reordered");
        assert!(
            e.to_string()
                .contains("frame 2 (w1 v1..w3 v1) starts before frame 1 ends (w9 v1)"),
            "{e}"
        );
        op.frames = vec![frame(key(0, 1), key(9, 1))];
        let e = check().copy(&op, 2, &sources()).expect_err("outside");
        assert!(
            e.to_string()
                .contains("frame 1 has keys w0 v1..w9 v1, outside"),
            "{e}"
        );
    }

    #[test]
    fn merge_inputs_must_lie_inside_the_op_and_be_read_once() {
        let input = |offset, f, l| MergeInput {
            source: 0,
            offset,
            length: 10,
            first: f,
            last: l,
            sorted: true,
            elements: 1,
        };
        let mut op = MergeOp {
            inputs: vec![
                input(0, key(1, 1), key(5, 1)),
                input(10, key(2, 1), key(6, 1)),
            ],
            first: key(1, 1),
            last: key(6, 1),
            elements: 2,
        };
        let mut c = check();
        c.merge(&op, 2, &sources()).expect("merge");
        let e = c
            .copy(&copy(5, key(7, 1), key(8, 1)), 3, &sources())
            .expect_err("read twice");
        assert!(
            e.to_string()
                .contains("the op on line 2 already read bytes 0..20"),
            "{e}"
        );
        op.inputs[1].last = key(7, 1);
        let e = check().merge(&op, 2, &sources()).expect_err("outside");
        assert!(
            e.to_string()
                .contains("input 2 (offset 10) has keys w2 v1..w7 v1"),
            "{e}"
        );
    }

    /// Inputs that follow each other are taken as one range, and a range
    /// refused names the input that reads the bytes read before.
    #[test]
    fn a_refused_run_of_inputs_names_its_input() {
        let input = |offset| MergeInput {
            source: 0,
            offset,
            length: 10,
            first: key(10, 1),
            last: key(20, 1),
            sorted: true,
            elements: 1,
        };
        // In key order here; the check takes them in file order.
        let op = MergeOp {
            inputs: vec![input(40), input(20), input(30)],
            first: key(10, 1),
            last: key(20, 1),
            elements: 3,
        };
        let mut c = check();
        c.copy(&copy(35, key(1, 1), key(2, 1)), 2, &sources())
            .expect("copy");
        let e = c.merge(&op, 3, &sources()).expect_err("read twice");
        assert!(
            e.to_string()
                .contains("merge op input 3 reads bytes 30..40 of"),
            "{e}"
        );
        let mut c = check();
        c.copy(&copy(0, key(1, 1), key(2, 1)), 2, &sources())
            .expect("copy");
        c.merge(&op, 3, &sources()).expect("after the copy");
        c.copy(&copy(50, key(30, 1), key(31, 1)), 4, &sources())
            .expect("a copy after the run");
        let e = c
            .copy(&copy(45, key(32, 1), key(33, 1)), 5, &sources())
            .expect_err("read twice");
        assert!(
            e.to_string()
                .contains("the ops on lines 3..4 already read bytes 20..60"),
            "{e}"
        );
        let mut overlapping = op.clone();
        overlapping.inputs[2].offset = 25;
        let e = check()
            .merge(&overlapping, 2, &sources())
            .expect_err("inputs overlap");
        assert!(
            e.to_string()
                .contains("merge op input 3 reads bytes 25..35"),
            "{e}"
        );
    }
}
