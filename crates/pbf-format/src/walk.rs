//! A header walk that keeps many reads in flight with io_uring.
//!
//! Why it exists: on a cold cache the sequential walk ([`PbfFile::headers`])
//! waits for one disk read per frame, because a frame's offset is known only
//! once the previous BlobHeader is read. To keep the device busy, the file is
//! cut into regions and each region walks its own chain of headers, one read
//! in flight per region, all through one ring.
//!
//! Why it is built this way: only the chain from offset 0 is known to be
//! right. Every other region's chain starts at a guess, the first bytes that
//! look like a frame (a length under 64 KiB and a BlobHeader of type `OSMData`
//! or `OSMHeader` whose frame fits in the file), and a guess can be wrong:
//! `0x0a 0x07 "OSMData"` also occurs in the string tables of raw blobs. So the
//! chains are stitched in file order: a region's frames are taken only from
//! the frame where the chain coming from offset 0 lands exactly on one of them;
//! where it does not, that chain simply goes on through the region with
//! [`PbfFile::frame_header_at`]. Every frame is decoded by the same code as in
//! the sequential walk, and every error comes from the sequential code itself,
//! so the result is the same sequence; a bad guess costs time, never
//! correctness.
//!
//! Memory stays bounded: at most `depth` regions are held at a time, each with
//! at most 2048 headers of its own byte range, and a region is started only
//! when an earlier one has been handed out.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsRawFd;
use std::str::FromStr;

use io_uring::{IoUring, opcode, types};

use crate::error::{Error, Result};
use crate::frame::{
    FrameHeader, HeaderWalk, PbfFile, SEARCH_CHUNK, SEARCH_OVERLAP, plausible_frame,
};

/// Smallest region the walk cuts a file into when it picks the size itself.
const MIN_REGION: u64 = 1 << 20;
/// Largest region the walk picks: bounds the headers held per region.
const MAX_REGION: u64 = 64 << 20;
/// How far into a region the search for its first frame goes.
const MAX_SEARCH: u64 = 1 << 20;
/// Most frames a region's chain holds: bounds memory on files of tiny frames
/// (a planet's 64 MiB regions hold about 1,100). Past it, the walk from
/// offset 0 reads the rest of the region with `pread`.
const MAX_CHAIN_FRAMES: usize = 2048;
/// Where no chain reaches and frames are small, the frames after the
/// current one are read this many bytes at a time and decoded many to a
/// read. A file of small blobs (a few hundred bytes a frame) has more
/// frames per region than a chain holds: one `pread` per frame was most of
/// the walk's system time there.
const CHUNK: usize = 64 << 10;
/// A frame shorter than this is small: the next one is read with a chunk.
const SMALL_FRAME: u64 = 4 << 10;

/// How the header walk reads the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Io {
    /// One `pread` at a time (queue depth 1).
    Pread,
    /// Many reads in flight through io_uring.
    Uring,
}

impl Io {
    /// The name accepted by [`Io::from_str`].
    pub fn name(self) -> &'static str {
        match self {
            Io::Pread => "pread",
            Io::Uring => "uring",
        }
    }
}

impl FromStr for Io {
    type Err = Error;

    fn from_str(s: &str) -> Result<Io> {
        let known = [Io::Pread, Io::Uring].into_iter().find(|io| io.name() == s);
        known.ok_or_else(|| {
            Error::malformed(format!("unknown I/O method {s:?}, expected pread or uring"))
        })
    }
}

/// Tuning of the io_uring walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkOptions {
    /// Regions walked at once, which is also the number of reads in flight.
    pub depth: u32,
    /// Bytes per region; `None` picks one from the file size.
    pub region_len: Option<u64>,
}

impl Default for WalkOptions {
    fn default() -> WalkOptions {
        WalkOptions {
            depth: 64,
            region_len: None,
        }
    }
}

/// Where the frames of an io_uring walk came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Frames taken from region chains read through the ring.
    pub from_chains: u64,
    /// Frames read with `pread` where no chain matched (bad or missing guesses).
    pub by_pread: u64,
    /// Reads submitted to the ring.
    pub ring_reads: u64,
}

/// A walk over all frame headers of a file, by `pread` or io_uring. It yields
/// the same items as [`PbfFile::headers`]: the frames in file order, and
/// after an error nothing more.
pub struct Walk<'a> {
    inner: Inner<'a>,
    fallback: Option<io::Error>,
}

enum Inner<'a> {
    Pread(HeaderWalk<'a>),
    Uring(Box<UringWalk<'a>>),
}

impl<'a> Walk<'a> {
    /// Walk `file` with `io` and default options.
    pub fn new(file: &'a PbfFile, io: Io) -> Walk<'a> {
        Walk::with_options(file, io, WalkOptions::default())
    }

    /// Walk `file` with `io`. When io_uring cannot be set up (old kernel,
    /// seccomp, `kernel.io_uring_disabled`), the walk uses `pread` and
    /// [`Walk::fallback`] says why.
    pub fn with_options(file: &'a PbfFile, io: Io, opts: WalkOptions) -> Walk<'a> {
        let (inner, fallback) = match io {
            Io::Pread => (Inner::Pread(file.headers()), None),
            Io::Uring => match UringWalk::new(file, opts) {
                Ok(w) => (Inner::Uring(Box::new(w)), None),
                Err(e) => (Inner::Pread(file.headers()), Some(e)),
            },
        };
        Walk { inner, fallback }
    }

    /// The method actually used.
    pub fn io(&self) -> Io {
        match self.inner {
            Inner::Pread(_) => Io::Pread,
            Inner::Uring(_) => Io::Uring,
        }
    }

    /// Where the frames so far came from (all zero for a `pread` walk).
    pub fn stats(&self) -> WalkStats {
        match &self.inner {
            Inner::Pread(_) => WalkStats::default(),
            Inner::Uring(w) => w.stats,
        }
    }

    /// Why io_uring was asked for but `pread` is used, if it is.
    pub fn fallback(&self) -> Option<&io::Error> {
        self.fallback.as_ref()
    }
}

impl Iterator for Walk<'_> {
    type Item = Result<FrameHeader>;

    fn next(&mut self) -> Option<Result<FrameHeader>> {
        match &mut self.inner {
            Inner::Pread(w) => w.next(),
            Inner::Uring(w) => w.next(),
        }
    }
}

/// The read a chain is waiting for.
#[derive(Debug, Default)]
enum Step {
    /// Nothing in flight: the chain is complete.
    #[default]
    Done,
    /// Looking for the region's first frame in the bytes at this offset.
    Search(u64),
    /// The BlobHeader of the frame at this offset, longer than its probe.
    Header(u64, Vec<u8>),
    /// Bytes from the frame at this offset: its probe (see
    /// `FrameReader::probe_len`), or [`CHUNK`] bytes after a small frame,
    /// whose frames held whole are all taken from the one read.
    Frames(u64),
}

/// One region's chain of frames, each starting where the previous one ends.
#[derive(Debug, Default)]
struct Chain {
    start: u64,
    end: u64,
    frames: Vec<FrameHeader>,
    buf: Vec<u8>,
    step: Step,
}

/// The next read of a chain: what it is for, where, how many bytes.
type Read = (Step, u64, usize);

impl Chain {
    /// Go on after the read for `step` returned `got` bytes (`None`: failed).
    fn advance(&mut self, file: &PbfFile, step: Step, got: Option<usize>) -> Option<Read> {
        match step {
            Step::Done => None,
            Step::Search(at) => self.after_search(file, at, got?),
            Step::Header(at, probe) => self.after_header(file, at, probe, got?),
            Step::Frames(at) => self.after_frames(file, at, got?),
        }
    }

    fn after_search(&mut self, file: &PbfFile, at: u64, got: usize) -> Option<Read> {
        let buf = &self.buf[..got];
        if let Some(c) = find_candidate(file, at, buf, self.end) {
            return Some(frames_read(file, c, false));
        }
        let next = at + got.saturating_sub(SEARCH_OVERLAP) as u64;
        if next <= at || next >= self.end.min(self.start + MAX_SEARCH) {
            return None;
        }
        Some(search_read(file, next, self.end))
    }

    fn after_header(
        &mut self,
        file: &PbfFile,
        at: u64,
        probe: Vec<u8>,
        got: usize,
    ) -> Option<Read> {
        if got != self.buf.len() {
            return None;
        }
        let fh = file.frames().frame_from_probe(at, &probe, &self.buf).ok()?;
        let (next, small) = (fh.end(), fh.frame_len() < SMALL_FRAME);
        self.keep(fh).then(|| frames_read(file, next, small))
    }

    /// Take the frames that the bytes read at `at` hold whole, each decoded
    /// from its probe, and ask for the rest of the chain: after a small
    /// frame the bytes that follow it, else the next frame's probe.
    fn after_frames(&mut self, file: &PbfFile, at: u64, got: usize) -> Option<Read> {
        let frames = file.frames();
        let buf = std::mem::take(&mut self.buf);
        let mut offset = at;
        let next = loop {
            let start = (offset - at) as usize;
            let Some(probe) = buf
                .get(start..got)
                .and_then(|b| b.get(..frames.probe_len(offset)))
            else {
                // Not held whole: read on from here, unless nothing was.
                break (offset > at).then(|| frames_read(file, offset, true));
            };
            let hl = frames.probed_header_len(offset, probe).ok()? as usize;
            let Some(header) = probe.get(4..4 + hl) else {
                break Some((Step::Header(offset, probe.to_vec()), offset + 4, hl));
            };
            let fh = frames.frame_from_probe(offset, probe, header).ok()?;
            let small = fh.frame_len() < SMALL_FRAME;
            offset = fh.end();
            if !self.keep(fh) {
                break None;
            }
            if !small {
                break Some(frames_read(file, offset, false));
            }
        };
        self.buf = buf;
        next
    }

    /// Keep a frame; true when the chain goes on after it: the next frame
    /// starts in the region, and the chain has room for it.
    fn keep(&mut self, fh: FrameHeader) -> bool {
        let next = fh.end();
        self.frames.push(fh);
        next < self.end && self.frames.len() < MAX_CHAIN_FRAMES
    }
}

/// The read of the frame at `at`: a chunk of [`CHUNK`] bytes after a small
/// frame (a file of small blobs has thousands of frames in a chain, and a
/// read each was most of the walk's time there), else its probe.
fn frames_read(file: &PbfFile, at: u64, small: bool) -> Read {
    let len = match small {
        true => (file.size() - at).min(CHUNK as u64) as usize,
        false => file.frames().probe_len(at),
    };
    (Step::Frames(at), at, len)
}

/// A search read at `at` for a frame starting before `end`.
fn search_read(file: &PbfFile, at: u64, end: u64) -> Read {
    let want = (end - at + SEARCH_OVERLAP as u64).min(SEARCH_CHUNK as u64);
    let len = (file.size() - at).min(want) as usize;
    (Step::Search(at), at, len)
}

/// The first offset in `buf` (read at `base`) before `end` that looks like a frame.
fn find_candidate(file: &PbfFile, base: u64, buf: &[u8], end: u64) -> Option<u64> {
    let room = end.saturating_sub(base).min(buf.len() as u64) as usize;
    (0..room)
        .find(|&p| plausible_frame(file, base + p as u64, &buf[p..]))
        .map(|p| base + p as u64)
}

/// The io_uring walk: regions in flight, and the stitched frames not yet handed out.
struct UringWalk<'a> {
    file: &'a PbfFile,
    ring: IoUring,
    region_len: u64,
    regions: u64,
    /// Region `i` lives in slot `i % slots.len()`.
    slots: Vec<Chain>,
    /// The next region to stitch.
    front: u64,
    in_flight: usize,
    /// Where the chain from offset 0 stands.
    cur: u64,
    ready: VecDeque<Result<FrameHeader>>,
    /// The bytes read last where no chain reached, and their offset.
    chunk: (u64, Vec<u8>),
    /// The length of the frame read there last.
    last_len: u64,
    stats: WalkStats,
    finished: bool,
    /// The ring failed with reads in flight: their buffers must never be freed.
    broken: bool,
}

impl<'a> UringWalk<'a> {
    fn new(file: &'a PbfFile, opts: WalkOptions) -> io::Result<UringWalk<'a>> {
        let depth = opts.depth.max(1);
        let ring = IoUring::new(depth)?;
        let auto = (file.size() / u64::from(depth)).clamp(MIN_REGION, MAX_REGION);
        let region_len = opts.region_len.unwrap_or(auto).max(1);
        let regions = file.size().div_ceil(region_len);
        let mut w = UringWalk {
            file,
            ring,
            region_len,
            regions,
            slots: (0..depth).map(|_| Chain::default()).collect(),
            front: 0,
            in_flight: 0,
            cur: 0,
            ready: VecDeque::new(),
            chunk: (0, Vec::new()),
            last_len: 0,
            stats: WalkStats::default(),
            finished: false,
            broken: false,
        };
        for i in 0..regions.min(u64::from(depth)) {
            w.start_region(i)?;
        }
        Ok(w)
    }

    fn slot(&self, region: u64) -> usize {
        (region % self.slots.len() as u64) as usize
    }

    /// Start the chain of a region: at offset 0 for the first, by a search otherwise.
    fn start_region(&mut self, region: u64) -> io::Result<()> {
        let start = region * self.region_len;
        let slot = self.slot(region);
        let chain = &mut self.slots[slot];
        chain.start = start;
        chain.end = (start + self.region_len).min(self.file.size());
        chain.frames.clear();
        let read = if region == 0 {
            frames_read(self.file, 0, false)
        } else {
            search_read(self.file, start, chain.end)
        };
        self.submit(slot, read)
    }

    /// Queue a read into a slot's buffer.
    fn submit(&mut self, slot: usize, (step, at, len): Read) -> io::Result<()> {
        let chain = &mut self.slots[slot];
        chain.buf.clear();
        chain.buf.resize(len, 0);
        chain.step = step;
        let fd = types::Fd(self.file.file().as_raw_fd());
        let sqe = opcode::Read::new(fd, chain.buf.as_mut_ptr(), len as u32)
            .offset(at)
            .build()
            .user_data(slot as u64);
        // SAFETY: the buffer belongs to the slot, which has no other read in
        // flight; it is neither touched, resized nor freed until this read's
        // completion is reaped (`Drop` waits for all of them, or leaks the
        // buffers if the ring fails). The file outlives the walk.
        let pushed = unsafe { self.ring.submission().push(&sqe) };
        if pushed.is_err() {
            self.ring.submit()?;
            // SAFETY: as above.
            unsafe { self.ring.submission().push(&sqe) }
                .map_err(|_| io::Error::other("io_uring submission queue is full"))?;
        }
        self.in_flight += 1;
        self.stats.ring_reads += 1;
        Ok(())
    }

    /// Wait for at least one completion and return all that are there.
    fn reap(&mut self) -> io::Result<Vec<(usize, i32)>> {
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.broken = true;
                    return Err(e);
                }
            }
        }
        let done: Vec<_> = self
            .ring
            .completion()
            .map(|c| (c.user_data() as usize, c.result()))
            .collect();
        self.in_flight -= done.len();
        Ok(done)
    }

    /// Drive the ring until the front region's chain is complete.
    fn wait_front(&mut self) -> io::Result<()> {
        let front = self.slot(self.front);
        while !matches!(self.slots[front].step, Step::Done) {
            for (slot, res) in self.reap()? {
                let step = std::mem::take(&mut self.slots[slot].step);
                let got = usize::try_from(res).ok();
                if let Some(read) = self.slots[slot].advance(self.file, step, got) {
                    self.submit(slot, read)?;
                }
            }
        }
        Ok(())
    }

    /// Extend the chain from offset 0 through the front region: with that
    /// region's frames where it lands on one of them, by `pread` elsewhere.
    fn stitch_front(&mut self) {
        let slot = self.slot(self.front);
        let end = self.slots[slot].end;
        let mut frames = std::mem::take(&mut self.slots[slot].frames);
        while !self.finished && self.cur < end {
            match frames.binary_search_by_key(&self.cur, |f| f.offset) {
                Ok(j) => self.accept(frames.drain(j..)),
                Err(_) => self.read_one(),
            }
        }
        frames.clear();
        self.slots[slot].frames = frames;
    }

    fn accept(&mut self, frames: impl Iterator<Item = FrameHeader>) {
        for fh in frames {
            self.stats.from_chains += 1;
            self.cur = fh.end();
            self.last_len = fh.frame_len();
            self.ready.push_back(Ok(fh));
        }
    }

    fn read_one(&mut self) {
        self.stats.by_pread += 1;
        let r = self.header_from_chunk(self.cur);
        match &r {
            Ok(fh) => {
                self.cur = fh.end();
                self.last_len = fh.frame_len();
            }
            Err(_) => self.finished = true,
        }
        self.ready.push_back(r);
    }

    /// The frame header at `offset`, as [`PbfFile::frame_header_at`] reads
    /// it, from the same bytes: after a small frame they come from a chunk
    /// read of [`CHUNK`] bytes, which serves the frames after it too.
    /// Everything else (a large frame before, a chunk that cannot be read)
    /// goes to `frame_header_at` itself.
    fn header_from_chunk(&mut self, offset: u64) -> Result<FrameHeader> {
        let frames = self.file.frames();
        let (at, buf) = &self.chunk;
        let len = frames.probe_len(offset) as u64;
        if offset < *at || offset + len > at + buf.len() as u64 {
            if self.last_len == 0 || self.last_len >= SMALL_FRAME {
                return frames.frame_header_at(offset);
            }
            let want = (self.file.size() - offset).min(CHUNK as u64) as usize;
            match frames.read_exact_at(offset, want, "frame length") {
                Ok(buf) => self.chunk = (offset, buf),
                Err(_) => return frames.frame_header_at(offset),
            }
        }
        let start = (offset - self.chunk.0) as usize;
        frames.frame_header_in(offset, &self.chunk.1[start..])
    }

    /// Stitch the front region and start the region `depth` places after it.
    fn next_region(&mut self) -> io::Result<()> {
        self.wait_front()?;
        self.stitch_front();
        let next = self.front + self.slots.len() as u64;
        self.front += 1;
        if self.cur >= self.file.size() || self.front >= self.regions {
            self.finished = true;
        } else if next < self.regions {
            self.start_region(next)?;
        }
        Ok(())
    }

    fn next(&mut self) -> Option<Result<FrameHeader>> {
        while self.ready.is_empty() && !self.finished {
            if let Err(e) = self.next_region() {
                self.finished = true;
                let e = Error::from(e).at(self.cur).in_file(self.file.path());
                self.ready.push_back(Err(e));
            }
        }
        self.ready.pop_front()
    }
}

impl Drop for UringWalk<'_> {
    fn drop(&mut self) {
        while self.in_flight > 0 && !self.broken {
            let _ = self.reap();
        }
        if self.in_flight > 0 {
            // The kernel may still write into these buffers: never free them.
            std::mem::forget(std::mem::take(&mut self.slots));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{BlobType, encode_frame};
    use std::io::Write;
    use std::path::{Path, PathBuf};

    /// The real files: `$PBF_SORT_TEST_DATA`, else the repository's `tests/fixtures`.
    fn data_dir() -> PathBuf {
        std::env::var_os("PBF_SORT_TEST_DATA")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures"))
    }

    fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("pbf-walk-{}-{name}", std::process::id()));
        let mut f = std::fs::File::create(&path).expect("create temp file");
        f.write_all(bytes).expect("write temp file");
        path
    }

    /// Both walks as comparable strings (errors by their one-line message),
    /// and where the io_uring walk found its frames.
    fn both(path: &Path, opts: WalkOptions) -> (Vec<String>, Vec<String>, WalkStats) {
        let file = PbfFile::open(path).expect("open");
        let show = |r: Result<FrameHeader>| match r {
            Ok(fh) => format!("{fh:?}"),
            Err(e) => format!("error at {:?}: {e}", e.offset()),
        };
        let mut walk = Walk::with_options(&file, Io::Uring, opts);
        let why = walk.fallback().map(|e| e.to_string());
        assert_eq!(walk.io(), Io::Uring, "io_uring unavailable: {why:?}");
        let seq = file.headers().map(show).collect();
        let par = walk.by_ref().map(show).collect();
        (seq, par, walk.stats())
    }

    fn assert_same(path: &Path, opts: WalkOptions) -> WalkStats {
        let (seq, par, stats) = both(path, opts);
        assert_eq!(seq, par, "{} with {opts:?}", path.display());
        let frames = seq.iter().filter(|s| !s.starts_with("error")).count() as u64;
        let read = stats.from_chains + stats.by_pread;
        assert!(
            read == frames || read == frames + 1,
            "{stats:?} for {frames}"
        );
        stats
    }

    /// Sum the stats of walking `path` with every option of the grid.
    fn assert_same_grid(path: &Path) -> WalkStats {
        let size = std::fs::metadata(path).expect("stat").len();
        let mut total = WalkStats::default();
        for opts in option_grid(size) {
            let s = assert_same(path, opts);
            total.from_chains += s.from_chains;
            total.by_pread += s.by_pread;
        }
        total
    }

    /// Walk options to try on a file: regions down to one byte on small files.
    fn option_grid(size: u64) -> Vec<WalkOptions> {
        let mut out = vec![WalkOptions::default()];
        let regions = [1, 13, 300, 4096, 65_536, size / 5 + 1];
        for depth in [1, 3, 64] {
            for &region in regions.iter().filter(|&&r| r >= size / 1000) {
                out.push(WalkOptions {
                    depth,
                    region_len: Some(region),
                });
            }
        }
        out
    }

    #[test]
    fn io_names_parse() {
        for io in [Io::Pread, Io::Uring] {
            assert_eq!(io.name().parse::<Io>().expect("known name"), io);
        }
        assert!("aio".parse::<Io>().is_err());
    }

    #[test]
    fn same_frames_on_real_files() {
        let dir = data_dir();
        let (mut seen, mut total) = (0, WalkStats::default());
        for entry in std::fs::read_dir(&dir).expect("test data dir") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|e| e == "pbf") {
                let s = assert_same_grid(&path);
                total.from_chains += s.from_chains;
                total.by_pread += s.by_pread;
                seen += 1;
            }
        }
        assert!(seen >= 20, "only {seen} files in {}", dir.display());
        assert!(total.from_chains > 10 * total.by_pread, "{total:?}");
    }

    #[test]
    fn truncated_file_fails_at_the_same_offset() {
        let dir = data_dir();
        let file = PbfFile::open(&dir.join("bad-truncated.osm.pbf")).expect("open");
        let opts = WalkOptions {
            depth: 4,
            region_len: Some(512),
        };
        let seq = file
            .headers()
            .last()
            .expect("items")
            .expect_err("truncated");
        let par = Walk::with_options(&file, Io::Uring, opts)
            .last()
            .expect("items");
        let par = par.expect_err("truncated");
        assert!(seq.offset().is_some());
        assert_eq!((par.offset(), par.path()), (seq.offset(), seq.path()));
        assert_eq!(par.to_string(), seq.to_string());
    }

    #[test]
    fn concatenated_files_walk_the_same() {
        let dir = data_dir();
        let mut bytes = std::fs::read(dir.join("sorted-andorra.osm.pbf")).expect("read");
        bytes.extend(std::fs::read(dir.join("sorted-monaco-lz4.osm.pbf")).expect("read"));
        bytes.extend(std::fs::read(dir.join("history-niue.osh.pbf")).expect("read"));
        let path = temp_file("concat", &bytes);
        let stats = assert_same_grid(&path);
        assert!(stats.from_chains > 10 * stats.by_pread, "{stats:?}");
        std::fs::remove_file(path).ok();
    }

    /// Raw blobs whose string tables hold "OSMData" and whole fake frames,
    /// some back to back: the search finds them first, and the stitching
    /// must not take them.
    fn decoy_file() -> Vec<u8> {
        use crate::block::{Element, EncodeOptions, Node, encode_block};
        use crate::compress::{Compression, encode_blob};
        let fake = encode_frame(&BlobType::OsmData, None, b"fake body").expect("frame");
        let nodes: Vec<Element> = (0..200)
            .map(|i| {
                let mut value = format!("{i}").into_bytes();
                for _ in 0..=i % 3 {
                    value.extend_from_slice(&fake);
                }
                let tag = (b"OSMData"[..].into(), value.into());
                let node = Node {
                    id: i,
                    info: None,
                    lat: i,
                    lon: i,
                    tags: vec![tag],
                };
                Element::Node(node)
            })
            .collect();
        let block = encode_block(&nodes, &EncodeOptions::default());
        let blob = encode_blob(&block, Compression::None).expect("raw blob");
        let mut bytes = encode_frame(&BlobType::OsmHeader, None, b"header").expect("frame");
        for _ in 0..40 {
            bytes.extend(encode_frame(&BlobType::OsmData, None, &blob).expect("frame"));
        }
        bytes
    }

    #[test]
    fn decoy_frames_inside_raw_blobs_are_not_taken() {
        let bytes = decoy_file();
        let path = temp_file("decoy", &bytes);
        let file = PbfFile::open(&path).expect("open");
        let seq: Vec<_> = file.headers().map(|r| r.expect("frame").offset).collect();
        assert_eq!(seq.len(), 41);
        let from = seq[1] + 1;
        let rest = &bytes[from as usize..];
        let first = find_candidate(&file, from, rest, bytes.len() as u64).expect("a decoy");
        assert!(
            !seq.contains(&first),
            "the first candidate should be a decoy"
        );
        let stats = assert_same_grid(&path);
        assert!(stats.by_pread > 0 && stats.from_chains > 0, "{stats:?}");
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn chains_of_tiny_frames_are_capped() {
        let frames = vec![(1u8, 0usize, false); 3 * MAX_CHAIN_FRAMES];
        let bytes = random_file(&frames, 0);
        let path = temp_file("capped", &bytes);
        let stats = assert_same(&path, WalkOptions::default());
        std::fs::remove_file(path).ok();
        assert_eq!(stats.from_chains, MAX_CHAIN_FRAMES as u64, "{stats:?}");
    }

    /// After a small frame a chain reads a chunk of them at once: a chain of
    /// tiny frames takes a read per [`CHUNK`] bytes, not per frame.
    #[test]
    fn chains_of_small_frames_read_chunks() {
        let frames = vec![(1u8, 300usize, false); 2 * MAX_CHAIN_FRAMES];
        let bytes = random_file(&frames, 0);
        let path = temp_file("chunks", &bytes);
        let opts = WalkOptions {
            depth: 4,
            region_len: Some(bytes.len() as u64 / 4 + 1),
        };
        let stats = assert_same(&path, opts);
        std::fs::remove_file(path).ok();
        assert!(stats.from_chains >= MAX_CHAIN_FRAMES as u64, "{stats:?}");
        let chunks = bytes.len().div_ceil(CHUNK) as u64;
        // Each region: a search, a probe of its first frame, then chunks.
        assert!(stats.ring_reads <= 4 * 2 + chunks + 4, "{stats:?}");
    }

    #[test]
    fn tiny_and_empty_files() {
        let one = encode_frame(&BlobType::OsmHeader, None, b"h").expect("frame");
        let mut two = one.clone();
        two.extend(encode_frame(&BlobType::OsmData, Some(b"ix"), b"d").expect("frame"));
        let mut cut = two.clone();
        cut.truncate(two.len() - 1);
        for (name, bytes) in [("one", one), ("two", two), ("cut", cut), ("zero", vec![])] {
            let path = temp_file(name, &bytes);
            assert_same_grid(&path);
            std::fs::remove_file(path).ok();
        }
    }

    /// A random file: frames of random types and sizes, some bodies full of
    /// fake frames, the tail possibly cut anywhere.
    fn random_file(frames: &[(u8, usize, bool)], cut: usize) -> Vec<u8> {
        let fake = encode_frame(&BlobType::OsmData, Some(b"ix"), b"fake").expect("frame");
        let mut bytes = Vec::new();
        for &(kind, len, decoy) in frames {
            let kind = [
                BlobType::OsmHeader,
                BlobType::OsmData,
                BlobType::from_name("Other"),
            ][usize::from(kind % 3)]
            .clone();
            let body: Vec<u8> = if decoy {
                fake.iter().copied().cycle().take(len).collect()
            } else {
                (0..len).map(|i| (i * 7 % 251) as u8).collect()
            };
            bytes.extend(encode_frame(&kind, None, &body).expect("frame"));
        }
        bytes.truncate(bytes.len().saturating_sub(cut));
        bytes
    }

    proptest::proptest! {
        #[test]
        fn random_files_walk_the_same(
            frames in proptest::collection::vec((0u8..3, 0usize..6000, proptest::bool::ANY), 0..40),
            cut in proptest::prop_oneof![proptest::strategy::Just(0usize), 0usize..100],
            depth in 1u32..9,
            region in 1u64..20_000,
        ) {
            let bytes = random_file(&frames, cut);
            let name = format!("prop-{depth}-{region}-{}", bytes.len());
            let path = temp_file(&name, &bytes);
            let opts = WalkOptions { depth, region_len: Some(region) };
            let (seq, par, _) = both(&path, opts);
            std::fs::remove_file(&path).ok();
            proptest::prop_assert_eq!(seq, par);
        }
    }

    #[test]
    fn ring_setup_failure_falls_back_to_pread_and_says_why() {
        let dir = data_dir();
        let file = PbfFile::open(&dir.join("sorted-andorra.osm.pbf")).expect("open");
        // The kernel refuses rings of more than 32768 entries (EINVAL).
        let opts = WalkOptions {
            depth: 1 << 16,
            region_len: None,
        };
        let walk = Walk::with_options(&file, Io::Uring, opts);
        assert_eq!(walk.io(), Io::Pread);
        assert!(walk.fallback().is_some());
        let got: Vec<_> = walk.map(|r| r.expect("frame")).collect();
        let want: Vec<_> = file.headers().map(|r| r.expect("frame")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn pread_walk_reports_no_fallback() {
        let path = temp_file(
            "pread",
            &encode_frame(&BlobType::OsmHeader, None, b"h").expect("frame"),
        );
        let file = PbfFile::open(&path).expect("open");
        let walk = Walk::new(&file, Io::Pread);
        assert_eq!((walk.io(), walk.fallback().is_none()), (Io::Pread, true));
        assert_eq!(walk.count(), 1);
        std::fs::remove_file(path).ok();
    }
}
