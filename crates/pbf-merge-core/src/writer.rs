//! The block writer: takes merged items in order, drops repeated keys when
//! deduplicating, cuts blocks, and encodes and compresses them on the worker
//! pool while the merge goes on. Encoded blocks come back through a FIFO of
//! at most `in_flight` pending results, a bounded reorder buffer that keeps
//! output order, and go to a [`Target`]: the spool or a spill file.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};

use pbf_format::block::{self, Element, EncodeOptions};
use pbf_format::compress::{self, Compression};
use pbf_format::scan::{Accumulator, Summary};
use pbf_format::{frame, indexdata, wire};
use rayon::ThreadPool;

use crate::error::{Error, ErrorKind, Result};
use crate::input::Item;

/// Where encoded blocks go.
pub(crate) trait Target {
    /// Write one encoded block, in order.
    fn write(&mut self, block: Encoded) -> Result<()>;
}

/// How blocks are encoded.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Codec {
    /// A PBF data frame with our indexdata, for the output.
    Frame(Compression, EncodeOptions),
    /// A spill record: the block and the ranks of its elements.
    Spill(Compression, EncodeOptions),
}

/// An encoded block.
#[derive(Debug)]
pub(crate) struct Encoded {
    /// The bytes to write.
    pub bytes: Vec<u8>,
    /// The keys of the block.
    pub summary: Summary,
    /// Sum of [`Element::approx_size`] of the block's elements.
    pub approx: u64,
}

/// Limits for cutting blocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cut {
    /// Most elements.
    pub elements: usize,
    /// Most bytes by [`Element::encoded_size_bound`].
    pub encoded: usize,
    /// Most bytes by [`Element::approx_size`] (decoded memory).
    pub approx: usize,
}

/// Allowance for a block's own fields, as in `block::split_points`.
const BLOCK_SLACK: usize = 256;

/// Cuts, encodes and writes blocks in order.
pub(crate) struct BlockWriter<T: Target> {
    target: T,
    codec: Codec,
    cut: Cut,
    pool: Arc<ThreadPool>,
    in_flight: VecDeque<Receiver<Result<Encoded>>>,
    max_in_flight: usize,
    block: Vec<Item>,
    encoded: usize,
    approx: usize,
    dedupe: bool,
    last: Option<(u128, u64)>,
    /// Items written.
    pub written: u64,
    /// Items dropped as repeats.
    pub dropped: u64,
}

impl<T: Target> BlockWriter<T> {
    pub fn new(
        target: T,
        codec: Codec,
        cut: Cut,
        dedupe: bool,
        pool: Arc<ThreadPool>,
    ) -> BlockWriter<T> {
        let max_in_flight = 2 * pool.current_num_threads().max(1);
        BlockWriter {
            target,
            codec,
            cut,
            pool,
            in_flight: VecDeque::new(),
            max_in_flight,
            block: Vec::new(),
            encoded: BLOCK_SLACK,
            approx: 0,
            dedupe,
            last: None,
            written: 0,
            dropped: 0,
        }
    }

    /// Add the next item. Items must come in strictly increasing (key, rank).
    pub fn push(&mut self, item: Item) -> Result<()> {
        let order = item.order();
        if let Some(last) = self.last {
            if order <= last {
                return Err(Error::new(ErrorKind::Internal(format!(
                    "merge out of order: {order:?} after {last:?}"
                ))));
            }
            if self.dedupe && order.0 == last.0 {
                self.dropped += 1;
                return Ok(());
            }
        }
        self.last = Some(order);
        let (encoded, approx) = (
            item.element.encoded_size_bound(),
            item.element.approx_size() + crate::ITEM_OVERHEAD,
        );
        let full = self.block.len() >= self.cut.elements
            || self.encoded.saturating_add(encoded) > self.cut.encoded
            || self.approx.saturating_add(approx) > self.cut.approx;
        if !self.block.is_empty() && full {
            self.submit()?;
        }
        self.encoded = self.encoded.saturating_add(encoded);
        self.approx = self.approx.saturating_add(approx);
        self.block.push(item);
        self.written += 1;
        Ok(())
    }

    /// Encode the current block on the pool; write finished blocks while too
    /// many are pending.
    fn submit(&mut self) -> Result<()> {
        let items = std::mem::take(&mut self.block);
        (self.encoded, self.approx) = (BLOCK_SLACK, 0);
        let codec = self.codec;
        let (tx, rx) = sync_channel(1);
        self.pool.spawn(move || {
            let _ = tx.send(encode(items, codec));
        });
        self.in_flight.push_back(rx);
        while self.in_flight.len() > self.max_in_flight {
            self.write_one()?;
        }
        Ok(())
    }

    fn write_one(&mut self) -> Result<()> {
        if let Some(rx) = self.in_flight.pop_front() {
            let encoded = rx.recv().map_err(|_| {
                Error::new(ErrorKind::Internal("an encoding thread panicked".into()))
            })??;
            self.target.write(encoded)?;
        }
        Ok(())
    }

    /// Write everything still pending and return the target.
    pub fn finish(mut self) -> Result<T> {
        if !self.block.is_empty() {
            self.submit()?;
        }
        while !self.in_flight.is_empty() {
            self.write_one()?;
        }
        Ok(self.target)
    }
}

/// Encode a block as the codec says.
fn encode(items: Vec<Item>, codec: Codec) -> Result<Encoded> {
    let mut acc = Accumulator::default();
    let mut approx = 0u64;
    for item in &items {
        acc.push(item.element.key());
        approx += (item.element.approx_size() + crate::ITEM_OVERHEAD) as u64;
    }
    let summary = acc
        .finish()
        .ok_or_else(|| Error::new(ErrorKind::Internal("empty block".into())))?;
    let ranks: Vec<u64> = match codec {
        Codec::Spill(..) => items.iter().map(|i| i.rank).collect(),
        Codec::Frame(..) => Vec::new(),
    };
    let elements: Vec<Element> = items.into_iter().map(|i| i.element).collect();
    let bytes = match codec {
        Codec::Frame(c, opts) => {
            let blob = compress::encode_blob(&block::encode_block(&elements, &opts), c)?;
            frame::encode_frame("OSMData", Some(&indexdata::encode(&summary)), &blob)
        }
        Codec::Spill(c, opts) => {
            let blob = compress::encode_blob(&block::encode_block(&elements, &opts), c)?;
            spill_record(&blob, &ranks)
        }
    };
    Ok(Encoded {
        bytes,
        summary,
        approx,
    })
}

/// A spill record: blob length and ranks length (u32 big-endian each), the
/// Blob message, then the ranks as zigzag varint deltas.
fn spill_record(blob: &[u8], ranks: &[u64]) -> Vec<u8> {
    let mut coded = Vec::with_capacity(ranks.len() * 3);
    let mut prev = 0u64;
    for &r in ranks {
        wire::put_varint(&mut coded, wire::unzigzag(r.wrapping_sub(prev) as i64));
        prev = r;
    }
    let mut out = Vec::with_capacity(8 + blob.len() + coded.len());
    out.extend_from_slice(&(blob.len() as u32).to_be_bytes());
    out.extend_from_slice(&(coded.len() as u32).to_be_bytes());
    out.extend_from_slice(blob);
    out.extend_from_slice(&coded);
    out
}

/// Decode a spill record written by [`spill_record`] into sorted items.
pub(crate) fn read_spill_record(record: &[u8]) -> Result<Vec<Item>> {
    let corrupt = |m: &str| Error::new(ErrorKind::CorruptSpill(m.into()));
    let (head, rest) = record
        .split_first_chunk::<8>()
        .ok_or_else(|| corrupt("short record"))?;
    let blob_len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let ranks_len = u32::from_be_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if rest.len() != blob_len + ranks_len {
        return Err(corrupt("record lengths disagree"));
    }
    let (blob, coded) = rest.split_at(blob_len);
    let elements = block::decode_block(&compress::decode_blob(blob)?)?;
    let mut items = Vec::with_capacity(elements.len());
    let mut ranks = wire::packed(coded);
    let mut prev = 0u64;
    for e in elements {
        let delta = ranks
            .next()
            .ok_or_else(|| corrupt("fewer ranks than elements"))??;
        prev = prev.wrapping_add(wire::zigzag(delta) as u64);
        items.push(Item::new(e, prev));
    }
    if ranks.next().is_some() {
        return Err(corrupt("more ranks than elements"));
    }
    Ok(items)
}
