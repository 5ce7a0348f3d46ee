//! Copying ahead of the plan. For a sorted file the index is CPU work and
//! the copy is I/O; run one after the other they cost the sum. A copier that
//! guesses the plan (one source's data frames, whole and in order) can start
//! the copy on a thread as soon as it knows the output header, and keep only
//! what the plan turns out to want: [`OutputFile::land_ahead`] stops the
//! thread and keeps the copied prefix the plan asks for. The thread copies
//! only as far as it is allowed ([`CopyAhead::allow`]: as far as the input
//! was read in order), so a guess proved wrong costs at most that much
//! instead of the whole range. The bytes after the kept prefix
//! are overwritten by what the plan does copy there, and whatever is left of
//! them is cut off by the commit, so a wrong guess costs the wasted copy and
//! never a wrong byte. They are not truncated at once: freeing a gigabyte of
//! a file whose pages are still being written took most of a second on the
//! copier's thread, and the next commit waited again for the freed blocks.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::copy::{CopyStats, copy_range};
use crate::error::{Error, Result};
use crate::output::{OutputFile, WRITEBACK_STEP, start_writeback};

/// Bytes copied between two looks at the gate: small enough that a wrong
/// guess is dropped within a few tens of milliseconds. Each step is handed
/// to the disk as it is copied.
const STEP: u64 = WRITEBACK_STEP;

/// A range of one source being copied into the output on its own thread, at
/// the output's position when it started. Dropping it stops the thread (the
/// output is then dropped too, or the caller lands it first).
#[derive(Debug)]
pub struct CopyAhead {
    /// Where the range starts in the output.
    at: u64,
    /// Where it starts in the source.
    offset: u64,
    len: u64,
    gate: Arc<Gate>,
    thread: Option<JoinHandle<Copied>>,
}

/// How far the thread may copy, and whether it must stop.
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    moved: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// Bytes from the start of the range the thread may copy.
    allowed: u64,
    stop: bool,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        // The state is plain fields: a panic elsewhere leaves it valid.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn change(&self, f: impl FnOnce(&mut GateState)) {
        f(&mut self.lock());
        self.moved.notify_all();
    }

    /// Wait until more than `done` bytes are allowed; the bytes allowed, or
    /// `None` once the thread must stop.
    fn wait_past(&self, done: u64) -> Option<u64> {
        let mut s = self.lock();
        while !s.stop && s.allowed <= done {
            s = self.moved.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        (!s.stop).then_some(s.allowed)
    }
}

/// What the thread did: bytes copied from the start of the range (a
/// prefix), how each step went, and the error that stopped it early, if any.
#[derive(Debug, Default)]
struct Copied {
    done: u64,
    steps: Vec<CopyStats>,
    error: Option<Error>,
}

impl Copied {
    /// How the first `kept` bytes were copied. Within one step the kernel
    /// copies first and the fallback takes the rest ([`copy_range`]), so a
    /// step cut short is split exactly too.
    fn stats_of(&self, kept: u64) -> CopyStats {
        let mut total = CopyStats::default();
        let mut left = kept;
        for s in &self.steps {
            let kernel = s.kernel_bytes.min(left);
            let fallback = s.fallback_bytes.min(left - kernel);
            total.kernel_bytes += kernel;
            total.fallback_bytes += fallback;
            total.fallbacks += u64::from(fallback > 0) * s.fallbacks;
            left -= kernel + fallback;
        }
        total
    }
}

/// What [`OutputFile::land_ahead`] kept.
#[derive(Debug, Default)]
pub struct Landed {
    /// Bytes kept: now part of the output.
    pub kept: u64,
    /// Bytes the thread copied that the plan did not want.
    pub dropped: u64,
    /// The error that stopped the thread before the end of its range. Not a
    /// failure of the output: the caller copies what was not kept itself,
    /// and fails there if the cause persists.
    pub stopped_by: Option<Error>,
}

impl CopyAhead {
    /// Where the range starts in the source.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Let the thread copy the range up to `through`, an offset in the
    /// source (a `sorted` plan record: the input was read in order that far).
    /// It starts allowed nothing; an allowance never shrinks.
    pub fn allow(&self, through: u64) {
        let upto = through.saturating_sub(self.offset).min(self.len);
        self.gate.change(|s| s.allowed = s.allowed.max(upto));
    }

    /// Ask the thread to stop after its current step, without waiting: the
    /// guess proved wrong, but what it copied may still be the prefix the
    /// plan keeps ([`OutputFile::land_ahead`] decides when the ops come).
    pub fn halt(&self) {
        self.gate.change(|s| s.stop = true);
    }

    /// Stop, or with `wait` allow the whole range, and wait for the thread.
    fn join(&mut self, wait: bool) -> Copied {
        let len = self.len;
        self.gate.change(|s| match wait {
            true => s.allowed = len,
            false => s.stop = true,
        });
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(copied)) => copied,
            Some(Err(_)) => Copied {
                error: Some(Error::invalid("copy ahead", "the copying thread panicked")),
                ..Copied::default()
            },
            None => Copied::default(),
        }
    }
}

impl Drop for CopyAhead {
    fn drop(&mut self) {
        self.join(false);
    }
}

/// Copy `len` bytes at `offset` of `src` to `dst` at `at`, in steps as far
/// as the gate allows, until done, stopped or failed.
fn copy_steps(src: &File, offset: u64, len: u64, dst: &File, at: u64, gate: &Gate) -> Copied {
    let mut c = Copied::default();
    while c.done < len {
        let Some(allowed) = gate.wait_past(c.done) else {
            break;
        };
        let step = (allowed - c.done).min(STEP);
        let mut stats = CopyStats::default();
        let res = copy_range(
            src,
            offset + c.done,
            step,
            dst,
            Some(at + c.done),
            &mut stats,
        );
        if let Err(e) = res {
            c.error = Some(e);
            break;
        }
        // Left to itself the kernel would keep the copied pages dirty until
        // the commit's fsync, which would then write the whole file after
        // the index instead of beside it.
        start_writeback(dst, at + c.done, step);
        c.done += step;
        c.steps.push(stats);
    }
    c
}

impl OutputFile {
    /// Start a thread that copies `len` bytes at `offset` of `src` to the
    /// output's current position as far as [`CopyAhead::allow`] lets it
    /// (nothing at first). The position does not move: nothing
    /// else may be written until [`OutputFile::land_ahead`]. Not for
    /// standard output, which cannot be truncated.
    pub fn copy_ahead(
        &self,
        src: &File,
        src_name: &Path,
        offset: u64,
        len: u64,
    ) -> Result<CopyAhead> {
        if self.is_stream() {
            return Err(Error::invalid(
                self.name(),
                "cannot copy ahead into a stream",
            ));
        }
        let name: PathBuf = src_name.to_path_buf();
        let dup = |f: &File, what: &str| {
            f.try_clone()
                .map_err(|e| Error::io(format!("{what}: dup for copying ahead"), e))
        };
        let src = dup(src, &name.display().to_string())?;
        let dst = dup(self.file(), self.name())?;
        let at = self.position();
        let gate = Arc::new(Gate::default());
        let shared = Arc::clone(&gate);
        let thread = std::thread::Builder::new()
            .name("copy-ahead".into())
            .spawn(move || copy_steps(&src, offset, len, &dst, at, &shared))
            .map_err(|e| Error::io("copy ahead: starting a thread", e))?;
        Ok(CopyAhead {
            at,
            offset,
            len,
            gate,
            thread: Some(thread),
        })
    }

    /// End a copy ahead, of which the plan wants the first `want` bytes (at
    /// most its length). Waits for the thread when `want` is the whole range,
    /// else stops it. Keeps the copied prefix the plan wants and moves the
    /// position past it; what was copied after it stays until the plan's own
    /// bytes overwrite it or [`OutputFile::commit`] cuts it off. The caller copies the
    /// rest of `want`, `want - kept` bytes, itself: an error that stopped the
    /// thread is not reported here, because that copy meets it again and
    /// reports it with its own context ([`Landed::stopped_by`] tells it).
    pub fn land_ahead(&mut self, mut ahead: CopyAhead, want: u64) -> Result<Landed> {
        if ahead.at != self.position() {
            return Err(Error::invalid(
                self.name(),
                format!(
                    "copy ahead started at offset {}, the output is at {}",
                    ahead.at,
                    self.position()
                ),
            ));
        }
        let want = want.min(ahead.len);
        let mut copied = ahead.join(want == ahead.len);
        let kept = copied.done.min(want);
        self.add_copied(kept, copied.stats_of(kept));
        Ok(Landed {
            kept,
            dropped: copied.done - kept,
            stopped_by: copied.error.take(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::output::OutputOptions;

    /// A source of `len` distinct bytes and an output holding `head`.
    fn setup(len: usize, head: &[u8]) -> (tempfile::TempDir, File, PathBuf, OutputFile) {
        let dir = tempfile::tempdir().expect("dir");
        let src = dir.path().join("src");
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        fs::write(&src, &bytes).expect("write source");
        let f = File::open(&src).expect("open");
        let mut out =
            OutputFile::create(&dir.path().join("out"), &OutputOptions::default()).expect("create");
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
        let ahead = out.copy_ahead(&f, &src, 1000, 299_000).expect("start");
        let landed = out.land_ahead(ahead, 299_000).expect("land");
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
        let ahead = out.copy_ahead(&f, &src, 10, 199_990).expect("start");
        ahead.allow(200_000);
        // Let the thread finish, so the cut really removes copied bytes.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let landed = out.land_ahead(ahead, 5000).expect("land");
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
        let ahead = out.copy_ahead(&f, &src, 0, 100_000).expect("start");
        ahead.allow(100_000);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let landed = out.land_ahead(ahead, 10).expect("land");
        assert_eq!(landed.kept, 10);
        let other = vec![b'z'; 150_000];
        out.write_all(&other).expect("write over the dropped bytes");
        let want = [b"H".as_slice(), &fs::read(&src).expect("src")[..10], &other].concat();
        assert_eq!(committed(&dir, out), want);
    }

    #[test]
    fn the_thread_copies_only_what_it_is_allowed() {
        let (dir, f, src, mut out) = setup(200_000, b"H");
        let ahead = out.copy_ahead(&f, &src, 1000, 199_000).expect("start");
        // The output holds the header and what the thread copied.
        let copied = |out: &OutputFile| out.file().metadata().expect("stat").len() - 1;
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(copied(&out), 0, "copied before it was allowed");
        ahead.allow(51_000);
        let start = std::time::Instant::now();
        while copied(&out) < 50_000 {
            assert!(
                start.elapsed().as_secs() < 10,
                "the allowed bytes were not copied"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let landed = out.land_ahead(ahead, 0).expect("land");
        assert_eq!((landed.kept, landed.dropped), (0, 50_000));
        assert_eq!(committed(&dir, out), b"H");
    }

    #[test]
    fn an_allowance_never_shrinks_nor_passes_the_range() {
        let (_dir, f, src, mut out) = setup(200_000, b"H");
        let ahead = out.copy_ahead(&f, &src, 1000, 199_000).expect("start");
        ahead.allow(300_000);
        ahead.allow(2000);
        assert_eq!(ahead.gate.lock().allowed, 199_000);
        let landed = out.land_ahead(ahead, 199_000).expect("land");
        assert_eq!((landed.kept, landed.dropped), (199_000, 0));
        assert!(landed.stopped_by.is_none(), "{landed:?}");
    }

    #[test]
    fn nothing_wanted_leaves_the_output_as_it_was() {
        let (dir, f, src, mut out) = setup(100_000, b"HEADER");
        let ahead = out.copy_ahead(&f, &src, 0, 100_000).expect("start");
        let landed = out.land_ahead(ahead, 0).expect("land");
        assert_eq!(landed.kept, 0);
        assert_eq!(out.position(), 6);
        assert_eq!(committed(&dir, out), b"HEADER");
    }

    #[test]
    fn a_range_past_the_source_stops_the_thread_with_its_error() {
        let (_dir, f, src, mut out) = setup(1000, b"");
        let ahead = out.copy_ahead(&f, &src, 500, 1000).expect("start");
        let landed = out.land_ahead(ahead, 1000).expect("land");
        assert!(landed.kept < 1000, "{landed:?}");
        let err = landed.stopped_by.expect("an error").to_string();
        assert!(err.contains("ends"), "{err}");
    }

    #[test]
    fn landing_elsewhere_than_the_start_is_refused() {
        let (_dir, f, src, mut out) = setup(1000, b"");
        let ahead = out.copy_ahead(&f, &src, 0, 1000).expect("start");
        out.write_all(b"x").expect("write");
        let err = out
            .land_ahead(ahead, 1000)
            .expect_err("refused")
            .to_string();
        assert!(err.contains("started at offset 0"), "{err}");
    }

    #[test]
    fn a_stream_cannot_copy_ahead() {
        let dir = tempfile::tempdir().expect("dir");
        let src = dir.path().join("src");
        fs::write(&src, b"abc").expect("write");
        let f = File::open(&src).expect("open");
        let sink = File::create(dir.path().join("sink")).expect("sink");
        let out = OutputFile::stream(sink, "<test>".into());
        assert!(out.copy_ahead(&f, &src, 0, 3).is_err());
    }
}
