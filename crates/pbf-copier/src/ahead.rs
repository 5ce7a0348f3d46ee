//! The copier's side of the copy-ahead protocol, whole. For a sorted file
//! the index is CPU work and the copy is I/O; one after the other they cost
//! the sum. So:
//!
//! 1. `pbf-overlap --sources` writes the plan record early (`early: true`),
//!    before it plans. The copier then guesses the plan of a sorted file:
//!    the data frames of its only input (beside spools), whole and in file
//!    order. It writes the output header and starts a thread copying those
//!    frames behind it ([`Ahead::start`]), allowed nothing yet.
//! 2. A `sorted` record (the input was read in order up to an offset) lets
//!    the thread copy that far; an `unsorted` record halts it, keeping what
//!    it copied for the ops to confirm.
//! 3. Each copy op that continues the guess only moves its confirmed end.
//!    The first op that does not, or the end of the plan, lands it: the
//!    copied prefix the plan asked for is kept, the confirmed rest is copied
//!    in the ordinary way, and the bytes copied past it are overwritten by
//!    what the plan copies there or cut off by the commit
//!    ([`pbf_output::OutputFile::commit`]). They are not truncated at once:
//!    freeing a gigabyte of pages still being written took most of a second
//!    on the copier's thread, and the commit's fsync waited again for the
//!    freed blocks.
//! 4. A `header` record that changes the output header drops the guess
//!    whole and starts the output over at offset 0
//!    ([`pbf_output::OutputFile::restart`]): every offset moved.
//!
//! A wrong guess costs a wasted copy, at most as far as the input was read
//! in order, and never a wrong byte. Each step the thread copies goes to
//! the disk at once (written past the page cache where the filesystem
//! allows, see `pbf_output::direct`, else handed to write-back), so the commit's fsync
//! does not write the whole file after the index. The planner's side (the early plan record, the `sorted`
//! and `unsorted` records) lives in pbf-overlap; pbf-stream(5) describes the
//! records.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::frames;
use anyhow::{Context, Result};
use pbf_format::frame::BlobType;
use pbf_output::direct::{ALIGN, AlignedBuf, Direct};
use pbf_output::{CopyStats, OutputFile, WRITEBACK_STEP, copy_range};
use pbf_stream::CopyOp;

use crate::{CopySources, OutputHead, Step};

/// The copier's side of the protocol over one plan: the guess, while there
/// is one, and what the last one kept.
#[derive(Debug, Default)]
pub struct Ahead {
    guess: Option<CopyAhead>,
    landed: Option<Landed>,
}

impl Ahead {
    /// Write the header and start copying ahead when `wanted` and the plan
    /// has one input file (beside spools). `wanted`: the plan's record was
    /// written early, and the copier writes the input's bytes as they are
    /// (and was not told not to guess).
    pub fn start(
        wanted: bool,
        head: &mut OutputHead,
        sources: &CopySources,
        out: &mut OutputFile,
    ) -> Result<Ahead> {
        if !wanted || out.is_stream() {
            return Ok(Ahead::default());
        }
        head.write(out)?;
        Ok(Ahead {
            guess: CopyAhead::guess(sources, out)?,
            landed: None,
        })
    }

    /// Act on one plan record: a `sorted` or `unsorted` record moves the
    /// thread's allowance, a copy op that continues the guess is taken into it,
    /// and a `header` record that changes the header drops the guess and
    /// takes it. Returns the record left for the copier: a copy op outside
    /// the guess (the guess is landed first, so the op follows the bytes it
    /// kept), or the `header` record (for its `copy_bytes`).
    pub fn follow<'a>(
        &mut self,
        (step, line): (Step<'a>, u64),
        plan_name: &str,
        head: &mut OutputHead,
        sources: &mut CopySources,
        out: &mut OutputFile,
    ) -> Result<Option<Step<'a>>> {
        match step {
            // Copy ahead as far as the input was read in order (a record
            // about another source says nothing of this one).
            Step::Sorted(s) => {
                if let Some(g) = self.guess.as_ref().filter(|g| g.source == s.source) {
                    g.allow(s.through);
                }
                Ok(None)
            }
            Step::Unsorted => {
                if let Some(g) = &self.guess {
                    g.halt();
                }
                Ok(None)
            }
            Step::Header(h) => {
                if !head.is(&h.header) {
                    if let Some(g) = self.guess.take() {
                        self.landed = Some(g.land(out, 0)?);
                    }
                    head.replace(&h.header, out)?;
                }
                Ok(Some(step))
            }
            Step::Copy(op) => {
                head.write(out)?;
                if self.guess.as_mut().is_some_and(|g| g.extends(op, line)) {
                    return Ok(None);
                }
                self.land(plan_name, sources, out)?;
                Ok(Some(step))
            }
        }
    }

    /// End the guess, if any, at the end of the plan (or before an op
    /// outside it); what the last guess kept and dropped, if there was one.
    pub fn land(
        &mut self,
        plan_name: &str,
        sources: &mut CopySources,
        out: &mut OutputFile,
    ) -> Result<Option<&Landed>> {
        if let Some(g) = self.guess.take() {
            self.landed = Some(g.land_confirmed(plan_name, sources, out)?);
        }
        Ok(self.landed.as_ref())
    }
}

impl CopyAhead {
    /// Start copying the data frames of the plan's only ordinary source
    /// behind what `out` holds. `None` when there is no such source or it
    /// does not start with an OSMHeader frame: the plan is then followed as
    /// it comes, and any problem with the file is reported there.
    fn guess(sources: &CopySources, out: &OutputFile) -> Result<Option<CopyAhead>> {
        let mut files = sources.files();
        let (Some((source, file, path)), None) = (files.next(), files.next()) else {
            return Ok(None);
        };
        // The data frames start just past the OSMHeader frame at offset 0.
        let first = frames::first_frame(file, path).filter(|f| f.blob_type == BlobType::OsmHeader);
        let Some(start) = first.map(|f| f.end()) else {
            return Ok(None);
        };
        let size = file
            .metadata()
            .with_context(|| format!("{}: stat", path.display()))?
            .len();
        if start >= size {
            return Ok(None);
        }
        let ahead = CopyAhead::start(out, source, file, path, start, size - start)?;
        Ok(Some(ahead))
    }

    /// Take `op` (at plan line `line`) into the guess when it continues it.
    fn extends(&mut self, op: &CopyOp, line: u64) -> bool {
        if op.source != self.source || op.offset != self.next {
            return false;
        }
        self.next += op.length;
        self.line = line;
        true
    }

    /// End the guess: keep what the plan confirmed of the copy ahead and
    /// copy the rest of the confirmed range (past the copy's end, or what the
    /// thread had not copied yet) in the ordinary way.
    /// Errors name `plan_name` and the line of the last op it took.
    fn land_confirmed(
        self,
        plan_name: &str,
        sources: &mut CopySources,
        out: &mut OutputFile,
    ) -> Result<Landed> {
        let (source, offset, want, line) =
            (self.source, self.offset, self.next - self.offset, self.line);
        let at = || format!("{plan_name}: line {line}");
        let mut landed = self.land(out, want).with_context(at)?;
        let rest = want - landed.kept;
        if rest > 0 {
            let started = Instant::now();
            let from = offset + landed.kept;
            let (file, path) = sources.range(source, from, rest).with_context(at)?;
            out.copy_from(file, path, from, rest).with_context(at)?;
            landed.copying += started.elapsed();
        }
        Ok(landed)
    }
}

/// Bytes the writer copies between two looks at the allowance: small enough
/// that a wrong guess is dropped within a few milliseconds (a quarter of
/// a write-back step).
const SLICE: u64 = WRITEBACK_STEP / 4;

/// A range of one source being copied into the output by a thread of its
/// own, at the output's position when it started, and how far the plan has
/// confirmed it. Dropping it stops the thread (the output is then dropped
/// too, or the caller lands it first).
#[derive(Debug)]
struct CopyAhead {
    /// Where the range starts in the output.
    at: u64,
    /// The source, and where the range starts in it.
    source: u32,
    offset: u64,
    len: u64,
    /// The offset the next op must start at to continue the guess.
    next: u64,
    /// The plan line of the last op that continued it, for errors.
    line: u64,
    allowance: Arc<Allowance>,
    thread: Option<JoinHandle<WriterOutcome>>,
}

/// How far the writer may copy, how far it took slices, and whether it
/// must stop. The state is plain fields: a panic elsewhere leaves it
/// valid ([`pbf_cli::lock`]).
#[derive(Debug, Default)]
struct Allowance {
    state: Mutex<AllowanceState>,
    moved: Condvar,
}

#[derive(Debug, Default)]
struct AllowanceState {
    /// The range's length: the most that can be allowed and taken.
    len: u64,
    /// Bytes from the start of the range the writer may copy.
    allowed: u64,
    /// Bytes from the start of the range that the writer took as slices.
    taken: u64,
    stop: bool,
}

impl Allowance {
    fn change(&self, f: impl FnOnce(&mut AllowanceState)) {
        f(&mut pbf_cli::lock(&self.state));
        self.moved.notify_all();
    }

    /// Wait until bytes past those taken are allowed, and take the next
    /// slice of them, at most `SLICE` long: its start and length from the
    /// start of the range, or `None` once the writer must stop or the
    /// whole range is taken.
    fn take_slice(&self) -> Option<(u64, u64)> {
        // Where the next slice ends: at most `SLICE` past what was taken and
        // no further than allowed; at `taken` when nothing more is allowed.
        let slice_end = |s: &AllowanceState| s.allowed.min(s.len).min(s.taken + SLICE);
        let mut s = pbf_cli::lock(&self.state);
        while !s.stop && slice_end(&s) <= s.taken && s.taken < s.len {
            s = self.moved.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.stop || s.taken >= s.len {
            return None;
        }
        let (start, end) = (s.taken, slice_end(&s));
        s.taken = end;
        Some((start, end - start))
    }
}

/// What the writer did: bytes copied from the start of the range, how
/// each part of them went, in order, and the error that stopped it early,
/// if any.
#[derive(Debug, Default)]
struct WriterOutcome {
    done: u64,
    steps: Vec<CopyStats>,
    error: Option<pbf_output::Error>,
    /// Time the writer spent copying (not waiting for its allowance), kept or
    /// dropped slices alike.
    busy: Duration,
}

impl WriterOutcome {
    /// How the first `kept` bytes were copied. Within one part the kernel
    /// copies first and the fallback takes the rest ([`copy_range`]), so a
    /// part cut short is split exactly too.
    fn stats_of(&self, kept: u64) -> CopyStats {
        let mut total = CopyStats::default();
        let mut left = kept;
        for s in &self.steps {
            let kernel = s.kernel_bytes.min(left);
            let direct = s.direct_bytes.min(left - kernel);
            let fallback = s.fallback_bytes.min(left - kernel - direct);
            total.kernel_bytes += kernel;
            total.direct_bytes += direct;
            total.fallback_bytes += fallback;
            total.fallbacks += u64::from(fallback > 0) * s.fallbacks;
            left -= kernel + direct + fallback;
        }
        total
    }
}

/// What a landed copy ahead kept.
#[derive(Debug, Default)]
pub struct Landed {
    /// Bytes kept: now part of the output.
    pub kept: u64,
    /// Bytes the thread copied that the plan did not want.
    pub dropped: u64,
    /// The error that stopped the thread before the end of its range. Not a
    /// failure of the output: the caller copies what was not kept itself,
    /// and fails there if the cause persists.
    pub stopped_by: Option<pbf_output::Error>,
    /// Time spent copying: the thread's steps (kept or dropped, not its
    /// waits for the plan) and the rest of the range copied when it landed.
    pub copying: Duration,
}

impl CopyAhead {
    /// Let the writers copy the range up to `through`, an offset in the
    /// source (a `sorted` plan record: the input was read in order that far).
    /// It starts allowed nothing; an allowance never shrinks.
    fn allow(&self, through: u64) {
        let upto = through.saturating_sub(self.offset).min(self.len);
        self.allowance.change(|s| s.allowed = s.allowed.max(upto));
    }

    /// Ask the writer to stop after its current slice, without waiting:
    /// the guess proved wrong, but what it copied may still be the prefix
    /// the plan keeps ([`CopyAhead::land`] decides when the ops come).
    fn halt(&self) {
        self.allowance.change(|s| s.stop = true);
    }

    /// Stop, or with `wait` allow the whole range, and wait for the writer.
    fn join(&mut self, wait: bool) -> WriterOutcome {
        let len = self.len;
        self.allowance.change(|s| match wait {
            true => s.allowed = len,
            false => s.stop = true,
        });
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(copied)) => copied,
            Some(Err(_)) => WriterOutcome {
                error: Some(pbf_output::Error::invalid(
                    "copy ahead",
                    "a copying thread panicked",
                )),
                ..WriterOutcome::default()
            },
            None => WriterOutcome::default(),
        }
    }
}

impl Drop for CopyAhead {
    fn drop(&mut self) {
        self.join(false);
    }
}

/// Copy the allowance's range at `offset` of `src` to `dst` at `at`, one slice
/// at a time as the allowance allows, until all is taken, it is stopped, or a
/// slice fails; whole blocks past the page cache when `direct` and the
/// filesystem allows.
fn copy_slices(
    src: &File,
    offset: u64,
    (dst, at): (&File, u64),
    allowance: &Allowance,
    direct: bool,
) -> WriterOutcome {
    let direct = direct.then(|| Direct::open(dst)).flatten();
    let mut writer = Writer {
        src,
        dst,
        direct: direct.as_ref(),
        buf: None,
    };
    let mut copied = WriterOutcome::default();
    while let Some((start, n)) = allowance.take_slice() {
        let started = Instant::now();
        let slice = writer.copy(offset + start, n, at + start);
        copied.busy += started.elapsed();
        match slice {
            Ok(parts) => {
                copied.done += n;
                copied.steps.extend(parts);
            }
            Err(e) => {
                copied.error = Some(e);
                break;
            }
        }
    }
    copied
}

/// The writer: its handles and its buffer for direct writes.
struct Writer<'a> {
    src: &'a File,
    dst: &'a File,
    direct: Option<&'a Direct>,
    buf: Option<AlignedBuf>,
}

impl Writer<'_> {
    /// Copy `len` bytes at `from` of the source to `to` of the output: the
    /// whole aligned blocks directly where it can, the rest (a partial
    /// block at either end) through the page cache; how each part went, in
    /// order.
    fn copy(&mut self, from: u64, len: u64, to: u64) -> pbf_output::Result<Vec<CopyStats>> {
        let head = ((ALIGN - to % ALIGN) % ALIGN).min(len);
        let body = (len - head) / ALIGN * ALIGN;
        let direct = self.direct.filter(|d| d.works() && body > 0);
        let parts = match direct {
            Some(d) => vec![
                (0, head, None),
                (head, head + body, Some(d)),
                (head + body, len, None),
            ],
            None => vec![(0, len, None)],
        };
        let parts = parts.into_iter().filter(|(a, b, _)| a < b);
        parts
            .map(|(a, b, d)| self.part(from + a, b - a, to + a, d))
            .collect()
    }

    /// One part of a slice, directly (falling back to the page cache where
    /// the filesystem refuses the write) or through the page cache; how it
    /// went.
    fn part(
        &mut self,
        from: u64,
        len: u64,
        to: u64,
        direct: Option<&Direct>,
    ) -> pbf_output::Result<CopyStats> {
        let mut stats = CopyStats::default();
        if let Some(d) = direct {
            if self.write_direct(d, from, len, to)? {
                stats.direct_bytes += len;
                return Ok(stats);
            }
        }
        copy_range(self.src, from, len, self.dst, Some(to), &mut stats)?;
        // Left to itself the kernel would keep the copied pages dirty
        // until the commit's fsync, which would then write them after the
        // index instead of beside it.
        pbf_output::start_writeback(self.dst, to, len);
        Ok(stats)
    }

    /// Read `len` bytes (whole blocks) at `from` of the source into the
    /// buffer and write them directly at `to` (aligned); false when the
    /// filesystem refused the direct write (`EINVAL`).
    fn write_direct(
        &mut self,
        d: &Direct,
        from: u64,
        len: u64,
        to: u64,
    ) -> pbf_output::Result<bool> {
        use std::os::unix::fs::FileExt;
        let buf = self
            .buf
            .get_or_insert_with(|| AlignedBuf::new(SLICE as usize));
        let buf = &mut buf.bytes_mut()[..len as usize];
        self.src.read_exact_at(buf, from).map_err(|e| {
            let what = match e.kind() {
                std::io::ErrorKind::UnexpectedEof => "source ends before the range does",
                _ => "read",
            };
            pbf_output::Error::io(format!("copying ahead at offset {from}: {what}"), e)
        })?;
        d.write_at(buf, to).map_err(|e| {
            pbf_output::Error::io(format!("copying ahead: direct write at offset {to}"), e)
        })
    }
}

impl CopyAhead {
    /// Start a thread that copies `len` bytes at `offset` of `src` (plan
    /// source `source`) to the
    /// output's current position as far as [`CopyAhead::allow`] lets it
    /// (nothing at first). The output's position does not move: nothing
    /// else may be written until [`CopyAhead::land`]. Not for standard
    /// output, which cannot be cut back.
    fn start(
        out: &OutputFile,
        source: u32,
        src: &File,
        src_name: &Path,
        offset: u64,
        len: u64,
    ) -> pbf_output::Result<CopyAhead> {
        if out.is_stream() {
            return Err(pbf_output::Error::invalid(
                out.name(),
                "cannot copy ahead into a stream",
            ));
        }
        let dup = |f: &File, what: &str| {
            f.try_clone()
                .map_err(|e| pbf_output::Error::io(format!("{what}: dup for copying ahead"), e))
        };
        let src = dup(src, &src_name.display().to_string())?;
        let dst = dup(out.file(), out.name())?;
        let at = out.position();
        // Past the page cache as the output's own appends, or not at all.
        let direct = out.is_buffered();
        // Over `len` bytes, allowing nothing yet.
        let allowance = Arc::new(Allowance::default());
        allowance.change(|s| s.len = len);
        let shared = Arc::clone(&allowance);
        let names = format!("copying {} ahead to {}", src_name.display(), out.name());
        let thread = std::thread::Builder::new()
            .name("copy-ahead".into())
            .spawn(move || {
                let mut copied = copy_slices(&src, offset, (&dst, at), &shared, direct);
                copied.error = copied.error.map(|e| e.within(&names));
                copied
            })
            .map_err(|e| pbf_output::Error::io("copy ahead: starting a thread", e))?;
        Ok(CopyAhead {
            at,
            source,
            offset,
            len,
            next: offset,
            line: 0,
            allowance,
            thread: Some(thread),
        })
    }

    /// End the copy ahead, of which the plan wants the first `want` bytes
    /// (at most its length). Waits for the thread when `want` is the whole
    /// range, else stops it. Keeps the copied prefix the plan wants and
    /// moves the output's position past it; what was copied after it stays
    /// until the plan's own bytes overwrite it or the commit cuts it off.
    /// The caller copies the rest of `want`, `want - kept` bytes, itself: an
    /// error that stopped the thread is not reported here, because that copy
    /// meets it again and reports it with its own context
    /// ([`Landed::stopped_by`] tells it).
    fn land(mut self, out: &mut OutputFile, want: u64) -> pbf_output::Result<Landed> {
        if self.at != out.position() {
            return Err(pbf_output::Error::invalid(
                out.name(),
                format!(
                    "copy ahead started at offset {}, the output is at {}",
                    self.at,
                    out.position()
                ),
            ));
        }
        let want = want.min(self.len);
        let mut copied = self.join(want == self.len);
        let kept = copied.done.min(want);
        out.add_copied(kept, copied.stats_of(kept))?;
        Ok(Landed {
            kept,
            dropped: copied.done - kept,
            stopped_by: copied.error.take(),
            copying: copied.busy,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use pbf_output::OutputOptions;
    use std::os::fd::AsRawFd;
    use std::path::PathBuf;

    /// A source of `len` distinct bytes and an output holding `head`.
    fn setup(len: usize, head: &[u8]) -> (tempfile::TempDir, File, PathBuf, OutputFile) {
        let dir = tempfile::tempdir().expect("dir");
        let src = dir.path().join("src");
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        fs::write(&src, &bytes).expect("write source");
        let f = File::open(&src).expect("open");
        let mut out =
            OutputFile::create(&dir.path().join("out"), &OutputOptions::default()).expect("create");
        // As pbf-copy: the header waits in the buffer while the copy ahead
        // writes past it.
        out.buffer_appends();
        out.write_all(head).expect("head");
        (dir, f, src, out)
    }

    fn committed(dir: &tempfile::TempDir, out: OutputFile) -> Vec<u8> {
        out.commit().expect("commit");
        fs::read(dir.path().join("out")).expect("read out")
    }

    #[test]
    fn the_whole_range_is_kept_when_the_plan_wants_it() {
        let (dir, f, src, mut out) = setup(300_000, b"HEAD");
        let ahead = CopyAhead::start(&out, 0, &f, &src, 1000, 299_000).expect("start");
        let landed = ahead.land(&mut out, 299_000).expect("land");
        assert_eq!((landed.kept, landed.dropped), (299_000, 0));
        assert!(landed.stopped_by.is_none());
        assert_eq!(out.position(), 4 + 299_000);
        assert_eq!(out.stats().copied(), 299_000);
        let want = [b"HEAD".as_slice(), &fs::read(&src).expect("src")[1000..]].concat();
        assert_eq!(committed(&dir, out), want);
    }

    #[test]
    fn a_prefix_is_kept_and_the_rest_cut_off() {
        let (dir, f, src, mut out) = setup(200_000, b"H");
        let ahead = CopyAhead::start(&out, 0, &f, &src, 10, 199_990).expect("start");
        ahead.allow(200_000);
        // Let the thread finish, so the cut really removes copied bytes.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let landed = ahead.land(&mut out, 5000).expect("land");
        assert_eq!(landed.kept + landed.dropped, 199_990, "{landed:?}");
        assert_eq!(landed.kept, 5000);
        out.write_all(b"TAIL").expect("tail");
        let want = [
            b"H".as_slice(),
            &fs::read(&src).expect("src")[10..5010],
            b"TAIL",
        ]
        .concat();
        assert_eq!(committed(&dir, out), want);
    }

    #[test]
    fn dropped_bytes_are_overwritten_by_what_the_plan_writes_there() {
        let (dir, f, src, mut out) = setup(100_000, b"H");
        let ahead = CopyAhead::start(&out, 0, &f, &src, 0, 100_000).expect("start");
        ahead.allow(100_000);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let landed = ahead.land(&mut out, 10).expect("land");
        assert_eq!(landed.kept, 10);
        let other = vec![b'z'; 150_000];
        out.write_all(&other).expect("write over the dropped bytes");
        let want = [b"H".as_slice(), &fs::read(&src).expect("src")[..10], &other].concat();
        assert_eq!(committed(&dir, out), want);
    }

    #[test]
    fn the_thread_copies_only_what_it_is_allowed() {
        let (dir, f, src, mut out) = setup(200_000, b"H");
        let ahead = CopyAhead::start(&out, 0, &f, &src, 1000, 199_000).expect("start");
        // The file holds what the thread copied behind the header, which
        // waits in the buffer.
        let bytes = fs::read(&src).expect("src");
        let copied = |out: &OutputFile| {
            let now = fs::read(format!("/proc/self/fd/{}", out.file().as_raw_fd())).expect("read");
            let behind = now.get(1..).unwrap_or_default();
            behind
                .iter()
                .zip(&bytes[1000..])
                .take_while(|(a, b)| a == b)
                .count() as u64
        };
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(copied(&out), 0, "copied before it was allowed");
        ahead.allow(51_000);
        // 50,000 bytes allowed, and copied.
        let upto = 50_000;
        let start = std::time::Instant::now();
        while copied(&out) < upto {
            assert!(
                start.elapsed().as_secs() < 10,
                "the allowed bytes were not copied"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let landed = ahead.land(&mut out, 0).expect("land");
        assert_eq!((landed.kept, landed.dropped), (0, upto));
        assert_eq!(committed(&dir, out), b"H");
    }

    #[test]
    fn an_allowance_never_shrinks_nor_passes_the_range() {
        let (_dir, f, src, mut out) = setup(200_000, b"H");
        let ahead = CopyAhead::start(&out, 0, &f, &src, 1000, 199_000).expect("start");
        ahead.allow(300_000);
        ahead.allow(2000);
        assert_eq!(pbf_cli::lock(&ahead.allowance.state).allowed, 199_000);
        let landed = ahead.land(&mut out, 199_000).expect("land");
        assert_eq!((landed.kept, landed.dropped), (199_000, 0));
        assert!(landed.stopped_by.is_none(), "{landed:?}");
    }

    #[test]
    fn nothing_wanted_leaves_the_output_as_it_was() {
        let (dir, f, src, mut out) = setup(100_000, b"HEADER");
        let ahead = CopyAhead::start(&out, 0, &f, &src, 0, 100_000).expect("start");
        let landed = ahead.land(&mut out, 0).expect("land");
        assert_eq!(landed.kept, 0);
        assert_eq!(out.position(), 6);
        assert_eq!(committed(&dir, out), b"HEADER");
    }

    #[test]
    fn a_range_past_the_source_stops_the_thread_with_its_error() {
        let (_dir, f, src, mut out) = setup(1000, b"");
        let ahead = CopyAhead::start(&out, 0, &f, &src, 500, 1000).expect("start");
        let landed = ahead.land(&mut out, 1000).expect("land");
        assert!(landed.kept < 1000, "{landed:?}");
        let err = landed.stopped_by.expect("an error").to_string();
        assert!(err.contains("ends"), "{err}");
        let names = format!("copying {} ahead to {}", src.display(), out.name());
        assert!(err.starts_with(&names), "{err}");
    }

    #[test]
    fn landing_elsewhere_than_the_start_is_refused() {
        let (_dir, f, src, mut out) = setup(1000, b"");
        let ahead = CopyAhead::start(&out, 0, &f, &src, 0, 1000).expect("start");
        out.write_all(b"x").expect("write");
        let err = ahead.land(&mut out, 1000).expect_err("refused").to_string();
        assert!(err.contains("started at offset 0"), "{err}");
    }

    #[test]
    fn a_stream_cannot_copy_ahead() {
        let dir = tempfile::tempdir().expect("dir");
        let src = dir.path().join("src");
        fs::write(&src, b"abc").expect("write");
        let f = File::open(&src).expect("open");
        let out = OutputFile::create(Path::new("-"), &OutputOptions::default()).expect("stdout");
        assert!(CopyAhead::start(&out, 0, &f, &src, 0, 3).is_err());
    }

    #[test]
    fn whole_blocks_are_written_past_the_page_cache_with_the_same_bytes() {
        let (dir, f, src, mut out) = setup((1 << 20) + 5000, b"HEAD12345");
        let direct = out.is_buffered();
        let len = (1 << 20) + 4000;
        let ahead = CopyAhead::start(&out, 0, &f, &src, 1000, len).expect("start");
        ahead.allow(3000);
        std::thread::sleep(std::time::Duration::from_millis(100));
        let landed = ahead.land(&mut out, len).expect("land");
        assert_eq!((landed.kept, landed.dropped), (len, 0));
        if direct {
            assert!(
                out.stats().direct_bytes >= (1 << 20) - 8192,
                "{:?}",
                out.stats()
            );
        }
        let want = [
            b"HEAD12345".as_slice(),
            &fs::read(&src).expect("src")[1000..],
        ]
        .concat();
        assert_eq!(committed(&dir, out), want);
    }

    #[test]
    fn an_output_not_buffered_is_copied_ahead_through_the_page_cache() {
        let dir = tempfile::tempdir().expect("dir");
        let src = dir.path().join("src");
        let bytes: Vec<u8> = (0..(1u32 << 20) + 5000).map(|i| (i % 251) as u8).collect();
        fs::write(&src, &bytes).expect("write source");
        let f = File::open(&src).expect("open");
        let mut out =
            OutputFile::create(&dir.path().join("out"), &OutputOptions::default()).expect("create");
        out.write_all(b"HEAD").expect("head");
        let len = (1 << 20) + 4000;
        let ahead = CopyAhead::start(&out, 0, &f, &src, 1000, len).expect("start");
        let landed = ahead.land(&mut out, len).expect("land");
        assert_eq!((landed.kept, out.stats().direct_bytes), (len, 0));
        assert_eq!(out.stats().copied(), len);
        assert_eq!(
            committed(&dir, out),
            [b"HEAD".as_slice(), &bytes[1000..]].concat()
        );
    }

    #[test]
    fn slices_at_odd_allowances_make_the_same_bytes() {
        let len = 3 * SLICE as usize + 12_345;
        let (dir, f, src, mut out) = setup(len + 100, b"HEAD123");
        let ahead = CopyAhead::start(&out, 0, &f, &src, 100, len as u64).expect("start");
        // Allowances at odd offsets: slices of every length, most of them
        // starting and ending inside a block.
        for through in (100..len as u64).step_by(777_777) {
            ahead.allow(through);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let landed = ahead.land(&mut out, len as u64).expect("land");
        assert_eq!((landed.kept, landed.dropped), (len as u64, 0));
        assert!(landed.stopped_by.is_none(), "{landed:?}");
        assert_eq!(out.stats().copied(), len as u64);
        let want = [b"HEAD123".as_slice(), &fs::read(&src).expect("src")[100..]].concat();
        assert_eq!(committed(&dir, out), want);
    }
}
