//! `tile`: N copies of an extract, with ids shifted so the copies follow each
//! other in the id space, written sorted. Copy k adds k × stride (plus the
//! `--offset`) to the magnitude of every id of every kind, and to way node
//! refs and relation member ids with the stride of the kind they refer to, so
//! references stay consistent inside each copy. Tags, metadata, coordinates
//! and the original id gaps are kept.
//!
//! The input is decoded once and held in memory (extracts are small), cut
//! into chunks that are encoded once; each output block is then a chunk with
//! its ids rewritten ([`crate::shift`]) and compressed, on all cores.

use std::ops::Range;
use std::path::Path;

use anyhow::{Result, anyhow, bail};
use pbf_format::block::{Element, encode_block, split_points};
use pbf_format::header::encode_header_frame;
use pbf_format::scan::Summary;
use pbf_format::{Key, Kind};
use pbf_output::OutputFile;
use rayon::prelude::*;

use crate::encode::{FrameEncoder, ordered, summarize};
use crate::input::Input;
use crate::shift::{PerKind, shift_block, shift_id};

/// What `tile` needs besides the encoder.
#[derive(Clone, Debug)]
pub struct TileArgs<'a> {
    /// Number of copies.
    pub copies: u64,
    /// Use at least the strides of this extract (to interleave with it).
    pub stride_of: Option<&'a Path>,
    /// Added to every id magnitude.
    pub offset: i64,
}

/// Write the tiled file; returns the bytes written.
pub fn run(
    input: &Path,
    output: &mut OutputFile,
    args: &TileArgs<'_>,
    encoder: FrameEncoder,
) -> Result<()> {
    let inp = Input::open(input)?;
    let mut elements = inp.decode_all()?;
    elements.sort_by_key(Element::key);
    let mut stride = strides(&elements);
    if let Some(other) = args.stride_of {
        let theirs = strides(&Input::open(other)?.decode_all()?);
        for (s, t) in stride.iter_mut().zip(theirs) {
            *s = (*s).max(t);
        }
    }
    let shifts = shifts(&stride, args)?;
    // Each chunk is encoded once; every copy rewrites its ids.
    let ranges: Vec<Range<usize>> = groups(&elements)
        .into_iter()
        .flat_map(|g| {
            let chunks = split_points(&elements[g.clone()], &encoder.opts);
            chunks
                .into_iter()
                .map(move |c| g.start + c.start..g.start + c.end)
        })
        .collect();
    let chunks: Vec<(Vec<u8>, Summary)> = ranges
        .par_iter()
        .map(|r| {
            let part = &elements[r.clone()];
            Ok((encode_block(part, &encoder.opts), summarize(part)?))
        })
        .collect::<Result<_>>()?;
    drop(elements);
    // Output order: per group (kind, then ids <= 0 before positive ids),
    // every copy in turn. Chunks of one group are consecutive.
    let mut tasks = Vec::new();
    for group in chunks.chunk_by(|a, b| group_of(&a.1) == group_of(&b.1)) {
        for shift in &shifts {
            tasks.extend(group.iter().map(|c| (shift, c)));
        }
    }
    output.write_all(&encode_header_frame(&inp.header, encoder.compression)?)?;
    ordered(
        tasks,
        |(shift, (block, summary))| {
            let shifted = shift_block(block, shift)?;
            let key = |k: Key| Key::new(k.kind, shift_id(k.id, shift[k.kind.index()]), k.version);
            let summary = Summary {
                first: key(summary.first),
                last: key(summary.last),
                ..*summary
            };
            encoder.wrap(&shifted, &summary)
        },
        output,
    )
}

/// The group of a chunk (chunks never span groups).
fn group_of(s: &Summary) -> (Kind, bool) {
    (s.first.kind, s.first.id > 0)
}

/// Elements of one kind and id class (ids <= 0, or positive) form a group.
fn group_key(e: &Element) -> (Kind, bool) {
    (e.kind(), e.id() > 0)
}

/// Ranges of sorted `elements` that share a [`group_key`].
fn groups(elements: &[Element]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for run in elements.chunk_by(|a, b| group_key(a) == group_key(b)) {
        out.push(start..start + run.len());
        start += run.len();
    }
    out
}

/// Per kind, one more than the largest id magnitude used for that kind,
/// counting way refs and relation members too.
fn strides(elements: &[Element]) -> PerKind {
    let mut max = [0u64; 4];
    let mut see = |kind: Kind, id: i64| {
        let m = &mut max[kind.index()];
        *m = (*m).max(id.unsigned_abs());
    };
    for e in elements {
        see(e.kind(), e.id());
        match e {
            Element::Way(w) => w.refs.iter().for_each(|&r| see(Kind::Node, r)),
            Element::Relation(r) => r.members.iter().for_each(|m| see(m.kind, m.id)),
            _ => {}
        }
    }
    max.map(|m| i64::try_from(m).unwrap_or(i64::MAX).saturating_add(1))
}

/// The per-kind shift of every copy, checked so no shifted id overflows.
fn shifts(stride: &PerKind, args: &TileArgs<'_>) -> Result<Vec<PerKind>> {
    if args.offset < 0 {
        bail!("--offset must not be negative");
    }
    let overflow = || anyhow!("ids overflow 64 bits: too many copies for these strides");
    let mut out = Vec::new();
    for k in 0..args.copies {
        let mut shift = [0i64; 4];
        for (s, &st) in shift.iter_mut().zip(stride) {
            let k = i64::try_from(k).map_err(|_| overflow())?;
            *s = k
                .checked_mul(st)
                .and_then(|x| x.checked_add(args.offset))
                .ok_or_else(overflow)?;
            // The largest magnitude of this copy must fit as well.
            s.checked_add(st).ok_or_else(overflow)?;
        }
        out.push(shift);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_refuse_overflow() {
        let args = TileArgs {
            copies: 3,
            stride_of: None,
            offset: 0,
        };
        assert!(shifts(&[i64::MAX / 2; 4], &args).is_err());
        let ok = shifts(&[10, 20, 30, 1], &args).expect("fits");
        assert_eq!(ok[2], [20, 40, 60, 2]);
    }
}
