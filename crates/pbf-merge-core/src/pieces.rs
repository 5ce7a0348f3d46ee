//! One merge in pieces: the key space of a merge's runs is cut into key
//! ranges, each range of every run is merged on a thread of its own, and
//! the pieces' elements go, piece after piece, to one block writer on the
//! calling thread. The writer alone cuts blocks, drops repeats and checks
//! the order, from the same elements in the same order as one merge gives
//! it, so the blocks are cut where one merge cuts them, byte for byte.
//!
//! A boundary is a key (type, id, version), never a rank: elements with
//! equal keys (the ties that timestamps and input order break) fall in one
//! piece. A load that spans a boundary is decoded once and shared by the
//! pieces on either side, each taking its keys of it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use pbf_format::block::Columns;

use crate::error::{Error, ErrorKind, Result};
use crate::graph::{Clock, Span, Tasks};
use crate::merge::{self, Sink};
use crate::run::Run;
use crate::sorted::{Block, Item, Order};
use crate::stream::{Loader, Stream};
use crate::writer::{BlockWriter, Target};
use crate::{Merged, Merger};

/// Loads per run a piece holds on average, at least.
const LOADS_PER_PIECE: usize = 1;

/// The most pieces of one merge.
const MAX_PIECES: usize = 64;

/// Elements a piece sends to the writer at a time.
const CHUNK: usize = 4096;

/// Chunks a piece may have queued before it waits for the writer.
const QUEUED: usize = 4;

/// The boundaries that cut `runs` into pieces of about
/// [`LOADS_PER_PIECE`] loads per run each (at most [`MAX_PIECES`]): keys
/// at quantiles of the loads' first keys. Empty when the runs are too few
/// loads for two pieces.
pub(crate) fn boundaries(runs: &[Run]) -> Vec<u128> {
    let firsts: Vec<u128> = runs
        .iter()
        .flat_map(|r| (0..r.loads()).map(move |i| r.bounds(i).0))
        .collect();
    let pieces = (firsts.len() / (LOADS_PER_PIECE * runs.len().max(1))).min(MAX_PIECES);
    if pieces < 2 {
        return Vec::new();
    }
    quantiles(firsts, pieces)
}

/// The keys that cut `keys` (unsorted, not empty) into `pieces` of about
/// as many keys each: distinct, and past the smallest key, so no piece is
/// empty.
fn quantiles(mut keys: Vec<u128>, pieces: usize) -> Vec<u128> {
    keys.sort_unstable();
    let n = keys.len();
    let mut cuts: Vec<u128> = (1..pieces).map(|i| keys[i * n / pieces]).collect();
    cuts.dedup();
    cuts.retain(|&c| c > keys[0]);
    cuts
}

/// Elements per piece when runs of one load each are cut at their own keys
/// ([`Merger::load_and_cut`]).
const PIECE_ELEMENTS: usize = 16384;

/// The piece holding `key`: boundary `b` starts piece `b + 1`.
fn piece_of(cuts: &[u128], key: u128) -> usize {
    cuts.partition_point(|&c| c <= key)
}

/// A load that spans pieces: decoded by the first piece to ask, kept for
/// the others, dropped when the last has taken it.
struct Shared {
    users: usize,
    block: Mutex<Option<(Arc<Block>, usize)>>,
}

impl Shared {
    fn get(&self, run: &Run, i: usize) -> Result<Arc<Block>> {
        let mut slot = self.block.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((block, left)) = slot.take() {
            if left > 1 {
                *slot = Some((Arc::clone(&block), left - 1));
            }
            return Ok(block);
        }
        // A failed load is not kept: each piece asking meets the error.
        let block = Arc::new(run.load(i)?);
        if self.users > 1 {
            *slot = Some((Arc::clone(&block), self.users - 1));
        }
        Ok(block)
    }
}

/// The loads of one piece: per run, (load, shared when it spans pieces).
type PieceLoads = Vec<Vec<(usize, Option<Arc<Shared>>)>>;

/// Which loads of `runs` each piece reads; `loaded`: the one load of each
/// run, decoded already.
fn plan(runs: &[Arc<Run>], cuts: &[u128], loaded: Option<Vec<Arc<Block>>>) -> Vec<PieceLoads> {
    if let Some(blocks) = loaded {
        return plan_loaded(blocks, cuts);
    }
    let mut pieces: Vec<PieceLoads> = (0..=cuts.len())
        .map(|_| vec![Vec::new(); runs.len()])
        .collect();
    for (r, run) in runs.iter().enumerate() {
        for i in 0..run.loads() {
            let (first, last) = run.bounds(i);
            let (a, b) = (
                piece_of(cuts, first),
                piece_of(cuts, last).max(piece_of(cuts, first)),
            );
            let shared = (b > a).then(|| {
                Arc::new(Shared {
                    users: b - a + 1,
                    block: Mutex::new(None),
                })
            });
            for piece in &mut pieces[a..=b] {
                piece[r].push((i, shared.clone()));
            }
        }
    }
    pieces
}

/// Every piece reads its keys of every run's decoded block.
fn plan_loaded(blocks: Vec<Arc<Block>>, cuts: &[u128]) -> Vec<PieceLoads> {
    let users = cuts.len() + 1;
    let shared: Vec<Arc<Shared>> = blocks
        .into_iter()
        .map(|b| {
            Arc::new(Shared {
                users,
                block: Mutex::new(Some((b, users))),
            })
        })
        .collect();
    (0..users)
        .map(|_| {
            shared
                .iter()
                .map(|s| vec![(0, Some(Arc::clone(s)))])
                .collect()
        })
        .collect()
}

/// Keys at even steps through the decoded `blocks`, cutting them into
/// pieces of about [`PIECE_ELEMENTS`] (at most [`MAX_PIECES`]).
fn cuts_of(blocks: &[Arc<Block>]) -> Vec<u128> {
    let total: usize = blocks.iter().map(|b| b.len()).sum();
    let pieces = (total / PIECE_ELEMENTS).min(MAX_PIECES);
    if pieces < 2 {
        return Vec::new();
    }
    // Samples of every block in proportion to its elements.
    let step = (total / (pieces * 16)).max(1);
    let samples: Vec<u128> = blocks
        .iter()
        .flat_map(|b| b.rest().iter().step_by(step).map(|o| o.key))
        .collect();
    quantiles(samples, pieces)
}

/// Elements of a piece on their way to the writer.
#[derive(Default)]
struct Chunk {
    sources: Vec<Arc<Columns>>,
    entries: Vec<Entry>,
}

struct Entry {
    order: Order,
    slot: u32,
    object: u32,
    stream: u32,
}

/// Sends a piece's merged elements in chunks.
struct PieceSink<'a> {
    tx: &'a SyncSender<Result<Chunk>>,
    chunk: Chunk,
    /// Per stream: the block it gave last, by address, and its slot.
    by_stream: Vec<(usize, u32)>,
}

impl PieceSink<'_> {
    fn send(&mut self) -> Result<()> {
        self.by_stream.iter_mut().for_each(|s| *s = (0, u32::MAX));
        let chunk = std::mem::take(&mut self.chunk);
        self.tx
            .send(Ok(chunk))
            .map_err(|_| Error::new(ErrorKind::Internal("merge stopped".into())))
    }
}

impl Sink for PieceSink<'_> {
    fn push(&mut self, order: Order, element: Item<'_>, stream: usize) -> Result<()> {
        let Item(columns, object) = element;
        if self.by_stream.len() <= stream {
            self.by_stream.resize(stream + 1, (0, u32::MAX));
        }
        let address = Arc::as_ptr(columns) as usize;
        let slot = match self.by_stream[stream] {
            (last, slot) if last == address => slot,
            _ => {
                let slot = self.chunk.sources.len() as u32;
                self.chunk.sources.push(Arc::clone(columns));
                self.by_stream[stream] = (address, slot);
                slot
            }
        };
        self.chunk.entries.push(Entry {
            order,
            slot,
            object,
            stream: stream as u32,
        });
        if self.chunk.entries.len() >= CHUNK {
            self.send()?;
        }
        Ok(())
    }
}

/// A piece to merge: its loads and where its chunks go.
type PieceJob = (PieceLoads, SyncSender<Result<Chunk>>);

/// What the threads merging pieces share.
struct Work<'a> {
    runs: &'a [Arc<Run>],
    cuts: &'a [u128],
    pieces: Vec<Mutex<Option<PieceJob>>>,
    next: AtomicUsize,
    stop: AtomicBool,
    spans: Mutex<Span>,
}

impl Merger {
    /// Decode the one load of each of `runs` on the pool and find the keys
    /// that cut them into pieces of about [`PIECE_ELEMENTS`]: runs of one
    /// load each (blobs that each span most keys, as in a shuffled file)
    /// give no boundaries by their loads' keys, and are held decoded
    /// together by a merge of them anyway. Empty cuts: too few elements.
    pub(crate) fn load_and_cut(&self, runs: &[Run]) -> Result<(Vec<Arc<Block>>, Vec<u128>, Span)> {
        let tasks = Tasks::default();
        let blocks: Vec<Result<Arc<Block>>> = self.pool.install(|| {
            use rayon::prelude::*;
            runs.par_iter()
                .map(|r| tasks.time(|| r.load(0)).map(Arc::new))
                .collect()
        });
        let blocks = blocks.into_iter().collect::<Result<Vec<_>>>()?;
        let clock = Clock::start();
        let cuts = cuts_of(&blocks);
        Ok((blocks, cuts, tasks.span().then(Span::task(clock.elapsed()))))
    }

    /// Merge `runs` in pieces cut at `cuts` (see [`boundaries`]; with
    /// `loaded`, the runs' one load each, see [`Merger::load_and_cut`]), up
    /// to `side_by_side` pieces at once, into the writer `w` on this thread.
    pub(crate) fn merge_pieces<T: Target>(
        &self,
        runs: Vec<Run>,
        cuts: &[u128],
        loaded: Option<Vec<Arc<Block>>>,
        mut w: BlockWriter<T>,
        side_by_side: usize,
    ) -> Result<Merged<T>> {
        let runs: Vec<Arc<Run>> = runs.into_iter().map(Arc::new).collect();
        let mut receivers = Vec::new();
        let pieces = plan(&runs, cuts, loaded)
            .into_iter()
            .map(|loads| {
                let (tx, rx) = sync_channel(QUEUED);
                receivers.push(rx);
                Mutex::new(Some((loads, tx)))
            })
            .collect();
        let work = Work {
            runs: &runs,
            cuts,
            pieces,
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            spans: Mutex::new(Span::default()),
        };
        let clock = Clock::start();
        let written = std::thread::scope(|s| {
            for _ in 0..side_by_side.clamp(1, receivers.len()) {
                s.spawn(|| self.merge_some_pieces(&work));
            }
            let written = write_pieces(receivers, &mut w);
            work.stop.store(true, Ordering::Relaxed);
            written
        });
        written?;
        let (elements, dropped, encodes) = (w.written, w.dropped, Arc::clone(&w.tasks));
        let target = w.finish()?;
        let writer = Span::task(clock.elapsed());
        let pieces = *work.spans.lock().unwrap_or_else(|e| e.into_inner());
        Ok(Merged {
            target,
            written: elements,
            dropped,
            span: pieces.then(writer).then(encodes.span()),
        })
    }

    /// Merge pieces, taken in order, until none is left or the writer
    /// stopped.
    fn merge_some_pieces(&self, work: &Work<'_>) {
        loop {
            let p = work.next.fetch_add(1, Ordering::Relaxed);
            if p >= work.pieces.len() || work.stop.load(Ordering::Relaxed) {
                return;
            }
            let taken = work.pieces[p]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            let Some((loads, tx)) = taken else { return };
            match self.merge_piece(work, p, loads, &tx) {
                Ok(span) => {
                    let mut spans = work.spans.lock().unwrap_or_else(|e| e.into_inner());
                    *spans = spans.beside(span);
                }
                // The writer meets the error in this piece's turn.
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        }
    }

    /// Merge piece `p` into chunks sent to `tx`.
    fn merge_piece(
        &self,
        work: &Work<'_>,
        p: usize,
        loads: PieceLoads,
        tx: &SyncSender<Result<Chunk>>,
    ) -> Result<Span> {
        let lo = match p {
            0 => 0,
            _ => work.cuts[p - 1],
        };
        let hi = work.cuts.get(p).copied();
        let tasks = Arc::new(Tasks::default());
        let streams = loads
            .into_iter()
            .zip(work.runs)
            .filter(|(loads, _)| !loads.is_empty())
            .map(|(loads, run)| {
                let loaders = loads
                    .into_iter()
                    .map(|(i, shared)| loader(Arc::clone(run), i, shared, lo, hi))
                    .collect();
                Stream::new(loaders, Arc::clone(&self.pool), Arc::clone(&tasks))
            })
            .collect();
        let clock = Clock::start();
        let mut sink = PieceSink {
            tx,
            chunk: Chunk::default(),
            by_stream: Vec::new(),
        };
        merge::merge(streams, &mut sink)?;
        if !sink.chunk.entries.is_empty() {
            sink.send()?;
        }
        Ok(tasks.span().then(Span::task(clock.elapsed())))
    }
}

/// Load `i` of `run` for the piece of keys `lo..hi` (no upper bound for
/// the last piece).
fn loader(
    run: Arc<Run>,
    i: usize,
    shared: Option<Arc<Shared>>,
    lo: u128,
    hi: Option<u128>,
) -> Loader {
    Box::new(move || match shared {
        // A load in one piece only is the piece's whole.
        None => run.load(i),
        Some(shared) => Ok(shared.get(&run, i)?.part(lo, hi.unwrap_or(u128::MAX))),
    })
}

/// Give the writer every piece's elements, piece after piece.
fn write_pieces<T: Target>(
    receivers: Vec<Receiver<Result<Chunk>>>,
    w: &mut BlockWriter<T>,
) -> Result<()> {
    for rx in receivers {
        // A piece's queue closes when the piece is done.
        for chunk in rx {
            let chunk = chunk?;
            for e in &chunk.entries {
                let columns = &chunk.sources[e.slot as usize];
                w.push(e.order, Item(columns, e.object), e.stream as usize)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::{BlockFormat, Cut, Encoded};
    use crate::{Options, SourceFiles};
    use pbf_format::block::{BLOCK_SLACK, Element, EncodeOptions, Info, Node, Obj, Way};
    use pbf_format::compress::Compression;
    use proptest::prelude::*;

    /// An element of kind `way` (else node) with a tag telling copies apart.
    fn element(way: bool, id: i64, version: i32, seconds: i64, mark: u32) -> Element {
        let info = Some(Info {
            version,
            timestamp_ms: seconds * 1000,
            changeset: 0,
            uid: 0,
            user: Arc::from(&b""[..]),
            visible: None,
        });
        let tags = vec![(Arc::from(&b"m"[..]), Arc::from(mark.to_string().as_bytes()))];
        match way {
            true => Element::Way(Way {
                id,
                info,
                tags,
                refs: vec![1, 2],
                locations: vec![],
            }),
            false => Element::Node(Node {
                id,
                info,
                lat: 0,
                lon: 0,
                tags,
            }),
        }
    }

    /// Runs of spill packets: each run's elements sorted as a merge orders
    /// them, every packet its own input blob, cut into packets of the
    /// given sizes.
    /// A run's elements (way or node, id, version, seconds) and the sizes
    /// of its input blobs.
    type RunSpec = (Vec<(bool, i64, i32, i64)>, Vec<usize>);

    fn runs(spec: &[RunSpec]) -> Vec<Run> {
        let mut mark = 0;
        let mut blob = 0u32;
        spec.iter()
            .map(|(elements, sizes)| {
                let mut all: Vec<(Order, Element)> = Vec::new();
                let mut sizes = sizes.iter().cycle();
                let mut rest: &[(bool, i64, i32, i64)] = elements;
                while !rest.is_empty() {
                    let n = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
                    let (now, later) = rest.split_at(n);
                    rest = later;
                    blob += 1;
                    for &(way, id, version, seconds) in now {
                        mark += 1;
                        let e = element(way, id, version, seconds, mark);
                        let columns = Columns::from_elements(std::slice::from_ref(&e));
                        let order = Order::of(columns.get(0), blob);
                        all.push((order, e));
                    }
                }
                all.sort_by_key(|(o, _)| o.merge_key());
                let mut packets = Vec::new();
                let mut bounds = Vec::new();
                for chunk in all.chunks(3) {
                    let elements: Vec<Element> = chunk.iter().map(|c| c.1.clone()).collect();
                    let blobs: Vec<u32> = chunk.iter().map(|c| c.0.blob()).collect();
                    let columns = Columns::from_elements(&elements);
                    let views: Vec<Obj<'_>> = columns.views().collect();
                    let packet = crate::packet::write_packet(&views, &blobs, Compression::None)
                        .expect("packet");
                    packets.push(Arc::new(packet));
                    bounds.push((chunk[0].0.key, chunk[chunk.len() - 1].0.key));
                }
                Run::kept(packets, bounds, 1 << 10)
            })
            .collect()
    }

    /// Every block a writer encodes, whole.
    struct Collect(Vec<(Vec<u8>, pbf_format::scan::Summary)>);

    impl Target for Collect {
        fn write(&mut self, block: Encoded) -> Result<()> {
            self.0.push((block.bytes, block.summary));
            Ok(())
        }
    }

    fn merger(dedupe: bool) -> Merger {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("pool");
        let opts = Options {
            dedupe,
            ..Options::default()
        };
        let sources = SourceFiles::open(&[]).expect("no sources");
        Merger::new(opts, sources, Arc::new(pool))
    }

    fn writer(m: &Merger, cut: Cut) -> BlockWriter<Collect> {
        let encode = EncodeOptions {
            max_elements: cut.elements,
            max_bytes: cut.encoded,
            ..EncodeOptions::default()
        };
        let format = BlockFormat::PbfFrame(Compression::None, encode, true);
        BlockWriter::new(
            Collect(Vec::new()),
            format,
            cut,
            m.opts.dedupe,
            m.pool.clone(),
        )
    }

    fn an_element() -> impl Strategy<Value = (bool, i64, i32, i64)> {
        (any::<bool>(), -6i64..6, 1i32..3, 0i64..3)
    }

    proptest! {
        /// Runs of random nodes and ways (negative ids, repeated keys with
        /// timestamps in any order), merged whole and in pieces cut at
        /// their own keys (so ties sit on every boundary): the same blocks,
        /// byte for byte, cut at the same places, the same repeats dropped.
        #[test]
        fn pieces_write_the_blocks_one_merge_writes(
            spec in prop::collection::vec(
                (prop::collection::vec(an_element(), 0..40), prop::collection::vec(1usize..5, 1..4)),
                1..6,
            ),
            cut_at in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
            elements in 1usize..9,
            small_bytes in any::<bool>(),
            dedupe in any::<bool>(),
            side_by_side in 1usize..4,
        ) {
            let m = merger(dedupe);
            let cut = Cut {
                elements,
                encoded: if small_bytes { BLOCK_SLACK + 60 } else { 1 << 20 },
                approx: usize::MAX,
            };
            let whole = m.merge_runs(runs(&spec), writer(&m, cut), &mut || {}).expect("whole");
            let mut keys: Vec<u128> = runs(&spec)
                .iter()
                .flat_map(|r| (0..r.loads()).flat_map(move |i| {
                    let (a, b) = r.bounds(i);
                    [a, b]
                }))
                .collect();
            keys.sort_unstable();
            let mut cuts: Vec<u128> = match keys.is_empty() {
                true => Vec::new(),
                false => cut_at.iter().map(|i| keys[i.index(keys.len())]).collect(),
            };
            cuts.sort_unstable();
            cuts.dedup();
            let pieces = m
                .merge_pieces(runs(&spec), &cuts, None, writer(&m, cut), side_by_side)
                .expect("pieces");
            prop_assert_eq!(whole.written, pieces.written);
            prop_assert_eq!(whole.dropped, pieces.dropped);
            prop_assert_eq!(whole.target.0.len(), pieces.target.0.len());
            prop_assert!(whole.target.0 == pieces.target.0, "blocks differ");
        }
    }

    #[test]
    fn boundaries_cut_many_loads_at_their_keys_and_few_not_at_all() {
        let spec: Vec<RunSpec> = (0..2)
            .map(|r| ((0..60).map(|i| (false, i * 2 + r, 1, 0)).collect(), vec![3]))
            .collect();
        let runs = runs(&spec);
        // 20 packets per run: 20 pieces of about one packet per run.
        let cuts = boundaries(&runs);
        assert_eq!(cuts.len(), 19);
        assert!(cuts.windows(2).all(|w| w[0] < w[1]));
        let firsts: Vec<u128> = runs
            .iter()
            .flat_map(|r| (0..r.loads()).map(move |i| r.bounds(i).0))
            .collect();
        assert!(cuts.iter().all(|c| firsts.contains(c)));
        assert!(boundaries(&[]).is_empty());
        let few = self::runs(&[((0..3).map(|i| (false, i, 1, 0)).collect(), vec![3])]);
        assert!(boundaries(&few).is_empty());
        // A load spanning boundaries is read by every piece it spans.
        let runs: Vec<Arc<Run>> = runs.into_iter().map(Arc::new).collect();
        let (first, last) = runs[0].bounds(0);
        let plan = plan(&runs, &[first / 2 + last / 2], None);
        let shared: usize = plan
            .iter()
            .flatten()
            .flatten()
            .filter(|(_, s)| s.is_some())
            .count();
        assert!(shared >= 2);
    }
}
