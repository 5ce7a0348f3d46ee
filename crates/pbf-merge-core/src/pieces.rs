//! One merge in pieces: the key space of a merge's runs is cut into key
//! ranges, each range of every run is merged on a thread of its own (a
//! merge not cut is one piece, on the calling thread).
//! Output blocks: each piece checks the order of its elements and keeps
//! what [`pbf_format::Keep`] keeps ([`Parcels`]), and hands them in parcels
//! to one block writer on the calling thread, piece after piece. The writer alone cuts blocks, from
//! the same elements in the same order as one merge gives it, so the
//! blocks are cut where one merge cuts them, byte for byte; it reads one
//! order per element, and the encoding task sums up each block's keys.
//! Spill packets, whose bytes no one outside the merge reads, are written
//! by a writer per piece ([`Merger::merge_pieces_apart`]): no thread
//! touches every element of the merge.
//!
//! A boundary is the key of an object's first version, never a version
//! or a rank: every version of an object falls in one piece, and so do
//! elements with equal keys (the ties that timestamps and input order
//! break). A load that spans a boundary is decoded once and shared by the
//! pieces on either side, each taking its keys of it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::graph::{Clock, Span, Tasks};
use crate::merge;
use crate::run::Run;
use crate::sorted::Block;
use crate::stream::{Loader, Stream};
use crate::writer::{BlockWriter, Parcel, Parcels, Target};
use crate::{Merged, Merger, lock};

/// Loads per run a piece holds on average, at least.
const LOADS_PER_PIECE: usize = 1;

/// The most pieces of one merge.
const MAX_PIECES: usize = 64;

/// Parcels a piece may have queued before it waits for the writer.
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
    let mut cuts: Vec<u128> = (1..pieces)
        .map(|i| first_version(keys[i * n / pieces]))
        .collect();
    cuts.dedup();
    cuts.retain(|&c| c > keys[0]);
    cuts
}

/// The key of version 0 of `key`'s object: where a piece may start.
fn first_version(key: u128) -> u128 {
    key & !u128::from(u32::MAX)
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
    /// A load for `users` pieces, decoded already (`block`) or not.
    fn new(users: usize, block: Option<Arc<Block>>) -> Arc<Shared> {
        let block = Mutex::new(block.map(|b| (b, users)));
        Arc::new(Shared { users, block })
    }

    fn get(&self, run: &Run, i: usize) -> Result<Arc<Block>> {
        let mut slot = lock(&self.block);
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
        // Every piece reads its keys of every run's decoded block.
        let users = cuts.len() + 1;
        let shared: Vec<Arc<Shared>> = blocks
            .into_iter()
            .map(|b| Shared::new(users, Some(b)))
            .collect();
        let piece = || shared.iter().map(|s| vec![(0, Some(Arc::clone(s)))]);
        return (0..users).map(|_| piece().collect()).collect();
    }
    let mut pieces: Vec<PieceLoads> = (0..=cuts.len())
        .map(|_| vec![Vec::new(); runs.len()])
        .collect();
    for (r, run) in runs.iter().enumerate() {
        for i in 0..run.loads() {
            let (first, last) = run.bounds(i);
            let a = piece_of(cuts, first);
            let b = piece_of(cuts, last).max(a);
            let shared = (b > a).then(|| Shared::new(b - a + 1, None));
            for piece in &mut pieces[a..=b] {
                piece[r].push((i, shared.clone()));
            }
        }
    }
    pieces
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

/// Run `each` on every job, taken in order by up to `threads` threads of
/// their own, while `meanwhile` runs on this one; no job starts once one
/// or `meanwhile` failed. Returns each job's result, in job order, or the
/// first error (that of `meanwhile` first).
pub(crate) fn in_turns<J: Send, R: Send>(
    jobs: Vec<J>,
    threads: usize,
    each: impl Fn(usize, J) -> Result<R> + Sync,
    meanwhile: impl FnOnce() -> Result<()>,
) -> Result<Vec<R>> {
    let jobs: Vec<Mutex<Option<J>>> = jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let results: Vec<Mutex<Option<Result<R>>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let (next, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
    let take_turns = || {
        loop {
            let p = next.fetch_add(1, Ordering::Relaxed);
            // A job taken is run or dropped, never left waiting: a job's
            // end may be what another thread waits for.
            let job = jobs.get(p).and_then(|j| lock(j).take());
            let Some(job) = job.filter(|_| !stop.load(Ordering::Relaxed)) else {
                return;
            };
            let result = each(p, job);
            if result.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            *lock(&results[p]) = Some(result);
        }
    };
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            s.spawn(take_turns);
        }
        let done = meanwhile();
        if done.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        done
    })?;
    let mut done = Vec::with_capacity(results.len());
    let mut missing = false;
    for result in results {
        match result.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(result) => done.push(result?),
            None => missing = true,
        }
    }
    match missing {
        true => Err(Error::Internal("a task was not run".into())),
        false => Ok(done),
    }
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

    /// K-way merge `runs` into the writer `w` on the calling thread (loads
    /// and encodes on the pool) and finish it: one piece, of every key.
    pub(crate) fn merge_runs<T: Target>(
        &self,
        runs: Vec<Run>,
        mut w: BlockWriter<T>,
    ) -> Result<Merged<T>> {
        let runs: Vec<Arc<Run>> = runs.into_iter().map(Arc::new).collect();
        let loads = plan(&runs, &[], None).pop().unwrap_or_default();
        let (keep, drops_deleted) = (w.keep, w.drops_deleted());
        let mut send = |parcel| w.push_parcel(parcel);
        let mut sink = Parcels::new(keep, drops_deleted, &mut send);
        let span = self.merge_piece(&runs, &[], 0, loads, &mut sink)?;
        Merged::of(w, span)
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
        let jobs = plan(&runs, cuts, loaded)
            .into_iter()
            .map(|loads| {
                let (tx, rx) = sync_channel(QUEUED);
                receivers.push(rx);
                (loads, tx)
            })
            .collect();
        let clock = Clock::start();
        let (keep, drops_deleted) = (w.keep, w.drops_deleted());
        let each = |p: usize, (loads, tx): (PieceLoads, SyncSender<Result<Parcel>>)| {
            let mut send = |parcel| tx.send(Ok(parcel)).map_err(|_| stopped());
            let mut sink = Parcels::new(keep, drops_deleted, &mut send);
            match self.merge_piece(&runs, cuts, p, loads, &mut sink) {
                Ok(span) => Ok(span),
                // The writer meets the error in this piece's turn.
                Err(e) => {
                    let _ = tx.send(Err(e));
                    Err(stopped())
                }
            }
        };
        // The writer takes every piece's elements, piece after piece: a
        // piece's queue closes when the piece is done.
        let write = || {
            for parcel in receivers.into_iter().flatten() {
                w.push_parcel(parcel?)?;
            }
            Ok(())
        };
        let spans = in_turns(jobs, side_by_side, each, write)?;
        let pieces = spans.into_iter().fold(Span::default(), Span::beside);
        Merged::of(w, pieces.then(Span::task(clock.elapsed())))
    }

    /// Merge `runs` in pieces as [`Merger::merge_pieces`] does, but each
    /// piece into a writer of its own, made by `writer` on the piece's
    /// thread: blocks are cut where a piece ends as well, so not where one
    /// merge cuts them (for spill packets, whose bytes no one else reads).
    /// Returns each piece's merge, in key order, and their span.
    pub(crate) fn merge_pieces_apart<T: Target + Send>(
        &self,
        runs: Vec<Run>,
        cuts: &[u128],
        loaded: Option<Vec<Arc<Block>>>,
        writer: impl Fn() -> BlockWriter<T> + Sync,
        side_by_side: usize,
    ) -> Result<(Vec<Merged<T>>, Span)> {
        let runs: Vec<Arc<Run>> = runs.into_iter().map(Arc::new).collect();
        let each = |p: usize, loads: PieceLoads| {
            let mut w = writer();
            let (keep, drops_deleted) = (w.keep, w.drops_deleted());
            let mut send = |parcel| w.push_parcel(parcel);
            let mut sink = Parcels::new(keep, drops_deleted, &mut send);
            let merged = self.merge_piece(&runs, cuts, p, loads, &mut sink);
            merged.and_then(|span| Merged::of(w, span))
        };
        let merged = in_turns(plan(&runs, cuts, loaded), side_by_side, each, || Ok(()))?;
        let span = merged.iter().fold(Span::default(), |s, m| s.beside(m.span));
        Ok((merged, span))
    }

    /// Merge piece `p` of `runs` (cut at `cuts`), reading `loads`, into
    /// `sink`, and finish it; returns the span of its loads and merge.
    fn merge_piece(
        &self,
        runs: &[Arc<Run>],
        cuts: &[u128],
        p: usize,
        loads: PieceLoads,
        sink: &mut Parcels<'_>,
    ) -> Result<Span> {
        let lo = match p {
            0 => 0,
            _ => cuts[p - 1],
        };
        // No upper bound for the last piece.
        let hi = cuts.get(p).copied().unwrap_or(u128::MAX);
        let tasks = Arc::new(Tasks::default());
        let streams = loads
            .into_iter()
            .zip(runs)
            .filter(|(loads, _)| !loads.is_empty())
            .map(|(loads, run)| {
                // Load `i` of `run`, for the piece's keys `lo..hi`.
                let loader = |(i, shared): (usize, Option<Arc<Shared>>)| -> Loader {
                    let run = Arc::clone(run);
                    Box::new(move || match shared {
                        // A load in one piece only is the piece's whole.
                        None => run.load(i),
                        Some(shared) => Ok(shared.get(&run, i)?.part(lo, hi)),
                    })
                };
                let loaders = loads.into_iter().map(loader).collect();
                Stream::new(loaders, Arc::clone(&self.pool), Arc::clone(&tasks))
            })
            .collect();
        let clock = Clock::start();
        merge::merge(streams, sink)?;
        sink.finish()?;
        Ok(tasks.span().then(Span::task(clock.elapsed())))
    }
}

fn stopped() -> Error {
    Error::Internal("merge stopped".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;
    use crate::sorted::Order;
    use crate::writer::{BlockFormat, Cut, Encoded};
    use pbf_format::Keep;
    use pbf_format::block::{BLOCK_SLACK, Columns, Element, EncodeOptions, Info, Node, Obj, Way};
    use pbf_format::compress::Compression;
    use pbf_stream::SourceFiles;
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

    fn merger(keep: Keep) -> Merger {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("pool");
        let opts = Options {
            keep,
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
        collecting(
            m,
            BlockFormat::PbfFrame(Compression::None, encode, true),
            cut,
        )
    }

    /// A writer of `format` into memory, keeping what `m` keeps.
    fn collecting(m: &Merger, format: BlockFormat, cut: Cut) -> BlockWriter<Collect> {
        let (keep, pool) = (m.opts.keep, m.pool.clone());
        BlockWriter::new(Collect(Vec::new()), format, cut, keep, pool)
    }

    fn an_element() -> impl Strategy<Value = (bool, i64, i32, i64)> {
        (any::<bool>(), -6i64..6, 1i32..3, 0i64..3)
    }

    /// Up to five runs.
    fn runs_spec() -> impl Strategy<Value = Vec<RunSpec>> {
        let run = (
            prop::collection::vec(an_element(), 0..40),
            prop::collection::vec(1usize..5, 1..4),
        );
        prop::collection::vec(run, 1..6)
    }

    /// The keys `cut_at` picks out of `keys`, sorted, each once.
    fn chosen_cuts(mut keys: Vec<u128>, cut_at: &[prop::sample::Index]) -> Vec<u128> {
        keys.sort_unstable();
        let mut cuts: Vec<u128> = match keys.is_empty() {
            true => Vec::new(),
            false => cut_at
                .iter()
                .map(|i| first_version(keys[i.index(keys.len())]))
                .collect(),
        };
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    }

    /// One random merge cut into pieces: its runs, where the cuts fall,
    /// elements per block, whether repeats are dropped, and how many pieces
    /// merge side by side.
    #[derive(Debug)]
    struct Case {
        spec: Vec<RunSpec>,
        cut_at: Vec<prop::sample::Index>,
        elements: usize,
        keep: Keep,
        side_by_side: usize,
    }

    prop_compose! {
        fn a_case()(
            spec in runs_spec(),
            cut_at in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
            elements in 1usize..9,
            keep in prop_oneof![Just(Keep::All), Just(Keep::Dedupe), Just(Keep::Latest)],
            side_by_side in 1usize..4,
        ) -> Case {
            Case { spec, cut_at, elements, keep, side_by_side }
        }
    }

    proptest! {
        /// Runs of random nodes and ways (negative ids, repeated keys with
        /// timestamps in any order), merged whole and in pieces cut at
        /// their own keys (so ties sit on every boundary): the same blocks,
        /// byte for byte, cut at the same places, the same repeats dropped.
        #[test]
        fn pieces_write_the_blocks_one_merge_writes(c in a_case(), small_bytes in any::<bool>()) {
            let Case { spec, cut_at, elements, keep, side_by_side } = c;
            let m = merger(keep);
            let cut = Cut {
                elements,
                encoded: if small_bytes { BLOCK_SLACK + 60 } else { 1 << 20 },
                approx: usize::MAX,
            };
            let whole = m.merge_runs(runs(&spec), writer(&m, cut)).expect("whole");
            let keys = runs(&spec)
                .iter()
                .flat_map(|r| (0..r.loads()).flat_map(move |i| {
                    let (a, b) = r.bounds(i);
                    [a, b]
                }))
                .collect();
            let cuts = chosen_cuts(keys, &cut_at);
            let pieces = m
                .merge_pieces(runs(&spec), &cuts, None, writer(&m, cut), side_by_side)
                .expect("pieces");
            prop_assert_eq!(whole.written, pieces.written);
            prop_assert_eq!(whole.dropped, pieces.dropped);
            prop_assert_eq!(whole.target.0.len(), pieces.target.0.len());
            prop_assert!(whole.target.0 == pieces.target.0, "blocks differ");
        }
    }

    /// The elements of spill packets, in order: (element, rank).
    fn unpacked(blocks: &[(Vec<u8>, pbf_format::scan::Summary)]) -> Vec<(Element, u64)> {
        let mut all = Vec::new();
        for (bytes, _) in blocks {
            let mut block = crate::packet::read_packet(bytes).expect("packet");
            while let Some((order, element)) = block.take() {
                all.push((element.into_element(), order.rank));
            }
        }
        all
    }

    fn packet_writer(m: &Merger, elements: usize) -> BlockWriter<Collect> {
        let cut = Cut {
            elements,
            encoded: 1 << 20,
            approx: usize::MAX,
        };
        collecting(m, BlockFormat::SpillPacket(Compression::None), cut)
    }

    proptest! {
        /// Pieces merged each into a writer of its own: their packets,
        /// piece after piece, hold the elements one merge writes, in its
        /// order, with the same repeats dropped; no packet spans pieces.
        #[test]
        fn pieces_apart_write_the_elements_one_merge_writes(c in a_case()) {
            let Case { spec, cut_at, elements, keep, side_by_side } = c;
            let m = merger(keep);
            let whole = m
                .merge_runs(runs(&spec), packet_writer(&m, elements))
                .expect("whole");
            let keys = runs(&spec)
                .iter()
                .flat_map(|r| (0..r.loads()).map(move |i| r.bounds(i).1))
                .collect();
            let cuts = chosen_cuts(keys, &cut_at);
            let writer = || packet_writer(&m, elements).sharing(side_by_side);
            let (pieces, span) = m
                .merge_pieces_apart(runs(&spec), &cuts, None, writer, side_by_side)
                .expect("pieces");
            prop_assert_eq!(pieces.len(), cuts.len() + 1);
            prop_assert!(span.path <= span.work);
            let written: u64 = pieces.iter().map(|p| p.written).sum();
            let dropped: u64 = pieces.iter().map(|p| p.dropped).sum();
            prop_assert_eq!((whole.written, whole.dropped), (written, dropped));
            for (p, piece) in pieces.iter().enumerate() {
                for (_, summary) in &piece.target.0 {
                    let (first, last) = (summary.first.packed(), summary.last.packed());
                    prop_assert!(p == 0 || first >= cuts[p - 1]);
                    prop_assert!(cuts.get(p).is_none_or(|&c| last < c));
                }
            }
            let blocks: Vec<_> = pieces.into_iter().flat_map(|p| p.target.0).collect();
            prop_assert!(unpacked(&whole.target.0) == unpacked(&blocks), "elements differ");
        }
    }

    #[test]
    fn boundaries_cut_many_loads_at_their_objects_and_few_not_at_all() {
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
            .flat_map(|r| (0..r.loads()).map(move |i| first_version(r.bounds(i).0)))
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
