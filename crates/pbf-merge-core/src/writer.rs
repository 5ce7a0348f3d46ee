//! The block writer: takes merged elements in parcels ([`Parcels`] checks
//! their order and keeps what [`Keep`] says: with `--latest` the newest
//! version of each object, which the output's writer drops if deleted),
//! cuts blocks, and encodes and compresses them on the worker pool while
//! the merge goes on. Encoded blocks come back through a FIFO of at most
//! `in_flight` pending results, a bounded reorder buffer that keeps output
//! order, and go to a [`Target`]: the spool or a spill file. Parcels come
//! from one merge, or from the pieces of one in turn; either way the
//! blocks are cut at the same elements.
//!
//! A block being filled holds the parcels its elements are in, and so the
//! decoded input blobs and spill packets ([`Columns`]) they refer to, and
//! keeps those alive until it is encoded.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};

use pbf_format::block::{self, BLOCK_SLACK, Columns, EncodeOptions, Obj};
use pbf_format::compress::{self, Compression};
use pbf_format::key::{packed_negative, packed_same_object as same_object};
use pbf_format::scan::Summary;
use pbf_format::{Keep, Key, frame, indexdata};
use rayon::ThreadPool;

use crate::error::{Error, Result};
use crate::graph::Tasks;
use crate::packet;
use crate::progress::Meter;
use crate::sorted::{Item, Order};

/// Where encoded blocks go.
pub(crate) trait Target {
    /// Write one encoded block, in order.
    fn write(&mut self, block: Encoded) -> Result<()>;
}

/// What the writer makes of a block.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BlockFormat {
    /// A PBF data frame for the output, with our indexdata when the flag
    /// says so.
    PbfFrame(Compression, EncodeOptions, bool),
    /// A spill packet ([`crate::packet`]): the elements and their blobs.
    SpillPacket(Compression),
}

/// An encoded block.
#[derive(Debug)]
pub(crate) struct Encoded {
    /// The bytes to write.
    pub bytes: Vec<u8>,
    /// The keys of the block.
    pub summary: Summary,
    /// Sum of [`Order::approx`] of the block's elements.
    pub approx: u64,
}

/// Limits for cutting blocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cut {
    /// Most elements.
    pub elements: usize,
    /// Most bytes by [`Order::encoded`].
    pub encoded: usize,
    /// Most bytes by [`Order::approx`] (decoded memory).
    pub approx: usize,
}

/// Cuts, encodes and writes blocks in order.
pub(crate) struct BlockWriter<T: Target> {
    target: T,
    format: BlockFormat,
    cut: Cut,
    pool: Arc<ThreadPool>,
    /// Where each encode's CPU time is recorded.
    pub tasks: Arc<Tasks>,
    in_flight: VecDeque<Receiver<Result<Encoded>>>,
    max_in_flight: usize,
    block: Pending,
    /// What is kept of one object's versions.
    pub keep: Keep,
    last: Option<(u128, u64)>,
    /// Items written.
    pub written: u64,
    /// Items dropped as repeats.
    pub dropped: u64,
    /// Told the items merged so far as blocks go to the encoder.
    meter: Option<Meter>,
}

impl<T: Target> BlockWriter<T> {
    pub fn new(
        target: T,
        format: BlockFormat,
        cut: Cut,
        keep: Keep,
        pool: Arc<ThreadPool>,
    ) -> BlockWriter<T> {
        let max_in_flight = 2 * pool.current_num_threads().max(1);
        BlockWriter {
            target,
            format,
            cut,
            pool,
            tasks: Arc::default(),
            in_flight: VecDeque::new(),
            max_in_flight,
            block: Pending::default(),
            keep,
            last: None,
            written: 0,
            dropped: 0,
            meter: None,
        }
    }

    /// Tell `meter` the items merged as blocks go to the encoder (the
    /// op's final writer; a spill writer is not metered).
    pub fn metered(mut self, meter: Meter) -> BlockWriter<T> {
        self.meter = Some(meter);
        self
    }

    fn tell_meter(&mut self) {
        if let Some(meter) = &mut self.meter {
            meter.merged(self.written + self.dropped);
        }
    }

    /// Share the room for blocks in flight with other writers, `writers`
    /// in all (pieces merged side by side, each into a writer of its own),
    /// so that together they hold what one writer holds.
    pub fn sharing(mut self, writers: usize) -> BlockWriter<T> {
        self.max_in_flight = (self.max_in_flight / writers.max(1)).max(1);
        self
    }

    /// Whether deleted objects are left out: the output's writer with
    /// [`Keep::Latest`]. A spill keeps them, as a deleted newest version
    /// must still hide the older ones of other runs.
    pub fn drops_deleted(&self) -> bool {
        self.keep == Keep::Latest && matches!(self.format, BlockFormat::PbfFrame(..))
    }

    /// Add merged elements in bulk: `parcel` must be in (key, rank) order
    /// within itself and hold what [`Keep`] keeps (as [`Parcels`] makes
    /// them); it is checked against the elements before it here. Blocks
    /// are cut at the same elements however the merge was parcelled, and
    /// they refer to the parcel's elements in place, so the writer touches
    /// one order per element and the block's keys are summed up where it
    /// is encoded.
    pub fn push_parcel(&mut self, parcel: Parcel) -> Result<()> {
        self.dropped += parcel.dropped;
        let parcel = Arc::new(parcel);
        let orders = &parcel.orders;
        let Some(first) = orders.first() else {
            return Ok(());
        };
        let mut start = 0;
        if repeats(self.last, first.merge_key(), self.keep)? {
            self.dropped += 1;
            start = 1;
        }
        if let Some(last) = self.last.filter(|_| self.keep == Keep::Latest) {
            if same_object(last.0, first.key) {
                return Err(Error::Internal(format!(
                    "{} in two parcels",
                    Key::from_packed(first.key)
                )));
            }
        }
        self.last = orders.last().map(Order::merge_key);
        let mut from = start;
        for (i, order) in orders.iter().enumerate().skip(start) {
            if self.block.len > 0 && self.full(order) {
                if i > from {
                    self.block.slices.push((Arc::clone(&parcel), from, i));
                }
                self.submit()?;
                from = i;
            }
            self.block.add(order);
        }
        if orders.len() > from {
            self.block
                .slices
                .push((Arc::clone(&parcel), from, orders.len()));
        }
        self.written += (orders.len() - start) as u64;
        Ok(())
    }

    /// True when the block being filled has no room for `order`.
    fn full(&self, order: &Order) -> bool {
        let b = &self.block;
        b.len >= self.cut.elements
            || b.encoded.saturating_add(order.encoded as usize) > self.cut.encoded
            || b.approx.saturating_add(order.approx as u64) > self.cut.approx as u64
    }

    /// Encode the current block on the pool; write finished blocks while too
    /// many are pending.
    fn submit(&mut self) -> Result<()> {
        self.tell_meter();
        let block = std::mem::take(&mut self.block);
        let format = self.format;
        let (tx, rx) = sync_channel(1);
        let tasks = Arc::clone(&self.tasks);
        self.pool.spawn(move || {
            let _ = tx.send(tasks.time(|| encode(block, format)));
        });
        self.in_flight.push_back(rx);
        while self.in_flight.len() > self.max_in_flight {
            self.write_one()?;
        }
        Ok(())
    }

    fn write_one(&mut self) -> Result<()> {
        if let Some(rx) = self.in_flight.pop_front() {
            let encoded = rx
                .recv()
                .map_err(|_| Error::Internal("an encoding thread panicked".into()))??;
            self.target.write(encoded)?;
        }
        Ok(())
    }

    /// Write everything still pending and return the target.
    pub fn finish(mut self) -> Result<T> {
        if self.block.len > 0 {
            self.submit()?;
        }
        self.tell_meter();
        while !self.in_flight.is_empty() {
            self.write_one()?;
        }
        Ok(self.target)
    }
}

/// Merged elements handed to the writer at once ([`BlockWriter::push_parcel`]).
#[derive(Default)]
pub(crate) struct Parcel {
    /// The decoded blocks the elements are objects of.
    sources: Vec<Arc<Columns>>,
    /// Each element's order.
    orders: Vec<Order>,
    /// Each element: (slot in `sources`, object).
    objects: Vec<(u32, u32)>,
    /// Elements dropped since the parcel before, as [`Keep`] says.
    dropped: u64,
}

impl Parcel {
    fn views(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = Obj<'_>> {
        self.objects[range]
            .iter()
            .map(|&(slot, object)| self.sources[slot as usize].get(object as usize))
    }
}

/// Elements parcels hold at most (a parcel goes when the next object
/// starts after that many).
const PARCEL: usize = 4096;

/// Makes parcels of a merge's elements, checking their order and keeping
/// what [`Keep`] keeps, and hands each to `send`. A parcel goes when the
/// next object starts, so its last object can still give way to a newer
/// version (`--latest`), and an object is never split between parcels.
pub(crate) struct Parcels<'a> {
    send: &'a mut dyn FnMut(Parcel) -> Result<()>,
    parcel: Parcel,
    /// Per input stream of the merge: the block it gave last, by address,
    /// and its slot. A stream gives one block after another, and a block
    /// belongs to one stream, so this finds a source without hashing.
    by_stream: Vec<(usize, u32)>,
    keep: Keep,
    /// Deleted newest versions are left out (the output's writer).
    drops_deleted: bool,
    last: Option<(u128, u64)>,
}

impl<'a> Parcels<'a> {
    /// Parcels for a writer keeping `keep` (and dropping deleted newest
    /// versions where `drops_deleted`), handed to `send`.
    pub fn new(
        keep: Keep,
        drops_deleted: bool,
        send: &'a mut dyn FnMut(Parcel) -> Result<()>,
    ) -> Parcels<'a> {
        Parcels {
            send,
            parcel: Parcel::default(),
            by_stream: Vec::new(),
            keep,
            drops_deleted,
            last: None,
        }
    }

    /// Add the next element, taken from the merge's input `stream`.
    /// Elements must come in (key, rank) order; equal ones come from one
    /// blob, in its stored order.
    pub fn push(&mut self, order: Order, element: Item<'_>, stream: usize) -> Result<()> {
        let key = order.merge_key();
        if repeats(self.last, key, self.keep)? {
            self.parcel.dropped += 1;
            return Ok(());
        }
        let older = self
            .last
            .is_some_and(|l| self.keep == Keep::Latest && same_object(l.0, key.0));
        self.last = Some(key);
        if older {
            // The newer version takes the place of the last one pushed.
            self.pop();
        } else {
            self.end_object();
            if self.parcel.orders.len() >= PARCEL {
                self.send()?;
            }
        }
        let Item(columns, object) = element;
        if self.by_stream.len() <= stream {
            self.by_stream.resize(stream + 1, (0, u32::MAX));
        }
        let address = Arc::as_ptr(columns) as usize;
        let slot = match self.by_stream[stream] {
            (last, slot) if last == address => slot,
            _ => {
                let slot = self.parcel.sources.len() as u32;
                self.parcel.sources.push(Arc::clone(columns));
                self.by_stream[stream] = (address, slot);
                slot
            }
        };
        self.parcel.orders.push(order);
        self.parcel.objects.push((slot, object));
        Ok(())
    }

    /// Drop the element pushed last.
    fn pop(&mut self) {
        self.parcel.orders.pop();
        self.parcel.objects.pop();
        self.parcel.dropped += 1;
    }

    /// The object pushed last is the newest of its kind and id: left out
    /// when deleted and deleted ones are.
    fn end_object(&mut self) {
        let Some(&(slot, object)) = self.parcel.objects.last() else {
            return;
        };
        let columns = &self.parcel.sources[slot as usize];
        if self.drops_deleted && columns.get(object as usize).deleted() {
            self.pop();
        }
    }

    fn send(&mut self) -> Result<()> {
        self.by_stream.iter_mut().for_each(|s| *s = (0, u32::MAX));
        (self.send)(std::mem::take(&mut self.parcel))
    }

    /// Send what is left once every element is pushed.
    pub fn finish(&mut self) -> Result<()> {
        self.end_object();
        match self.parcel.orders.is_empty() && self.parcel.dropped == 0 {
            true => Ok(()),
            false => self.send(),
        }
    }
}

/// Whether an element of merge key `key` after one of `last` is a repeat
/// to drop ([`Keep::Dedupe`]); an error when it comes out of order.
pub(crate) fn repeats(last: Option<(u128, u64)>, key: (u128, u64), keep: Keep) -> Result<bool> {
    let Some(last) = last else {
        return Ok(false);
    };
    if key < last {
        return Err(Error::Internal(format!(
            "merge out of order: {} (rank {}) after {} (rank {})",
            Key::from_packed(key.0),
            key.1,
            Key::from_packed(last.0),
            last.1
        )));
    }
    Ok(keep == Keep::Dedupe && key.0 == last.0)
}

/// The block being filled: its elements and sizes (its keys are summed up
/// where it is encoded).
#[derive(Default)]
struct Pending {
    /// Elements in the block.
    len: usize,
    /// The elements in order as ranges of parcels.
    slices: Vec<(Arc<Parcel>, usize, usize)>,
    encoded: usize,
    approx: u64,
}

impl Pending {
    /// Count `order` in the block's length and sizes.
    fn add(&mut self, order: &Order) {
        if self.len == 0 {
            self.encoded = BLOCK_SLACK;
        }
        self.len += 1;
        self.encoded = self.encoded.saturating_add(order.encoded as usize);
        self.approx += u64::from(order.approx);
    }
}

/// Encode a block in `format`, summing up its keys as a key scan of it
/// would find them, and for a spill packet its elements' input blobs.
fn encode(block: Pending, format: BlockFormat) -> Result<Encoded> {
    if block.len == 0 {
        return Err(Error::Internal("empty block".into()));
    }
    let keep_blob = matches!(format, BlockFormat::SpillPacket(..));
    let slices = || block.slices.iter();
    let orders = slices().flat_map(|(b, from, to)| &b.orders[*from..*to]);
    let (mut blobs, mut first, mut last, mut counts) = (Vec::new(), 0, 0, [0u64; 4]);
    // `strict`: false once two elements share a key (without dedupe);
    // `duplicate_ids`: elements right after one of the same kind and id.
    let (mut strict, mut duplicate_ids, mut negative_ids) = (true, 0u64, false);
    for (i, order) in orders.enumerate() {
        match i {
            0 => first = order.key,
            _ => {
                strict &= order.key != last;
                duplicate_ids += u64::from(same_object(order.key, last));
            }
        }
        negative_ids |= packed_negative(order.key);
        last = order.key;
        counts[((order.key >> 97) & 3) as usize] += 1;
        if keep_blob {
            blobs.push(order.blob());
        }
    }
    let summary = Summary {
        first: Key::from_packed(first),
        last: Key::from_packed(last),
        counts,
        sorted: strict,
        repeats: !strict,
        versions_unsorted: false,
        duplicate_ids,
        negative_ids,
    };
    let views: Vec<Obj<'_>> = slices()
        .flat_map(|(b, from, to)| b.views(*from..*to))
        .collect();
    let bytes = match format {
        BlockFormat::PbfFrame(c, opts, with_indexdata) => {
            let blob = compress::encode_blob(&block::encode_objects(&views, &opts), c)?;
            let ix =
                with_indexdata.then(|| indexdata::encode(&summary, &frame::BlobStart::of(&blob)));
            frame::encode_frame(&frame::BlobType::OsmData, ix.as_deref(), &blob)?
        }
        BlockFormat::SpillPacket(c) => packet::write_packet(&views, &blobs, c)?,
    };
    Ok(Encoded {
        bytes,
        summary,
        approx: block.approx,
    })
}
