//! The merge's available parallelism, measured from its task graph as it
//! ran: the CPU time of every task (decoding a load, a merge's heap and
//! block cutting, encoding a block, appending to the spool) and the length
//! of the longest chain of tasks that must run one after another (the
//! critical path). Their ratio is how many cores the merge could keep busy
//! with unlimited cores and memory: on two cores it predicts sixteen.
//!
//! Tasks are composed as the engine runs them: an op's preparing thread,
//! then the parts of its frame headers read side by side; the loads of a
//! merge may all run side by side, the heap waits for them, and the block
//! encodes wait for the heap; groups and pieces merged on threads of their
//! own run side by side (a piece with its own writer counts its writing in
//! its own time; pieces with one writer are followed by the writer's
//! time); spill levels follow each other; merge ops in flight run side by
//! side, and their appends to the spool follow each other. Times are each
//! thread's CPU time, so a task that waits or is preempted is not counted
//! as running.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Work and critical path of a part of the task graph, in nanoseconds of
/// CPU time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// CPU time of all its tasks.
    pub work: u64,
    /// CPU time of its longest chain of dependent tasks.
    pub path: u64,
}

impl Span {
    /// One task of `ns` nanoseconds.
    pub fn task(ns: u64) -> Span {
        Span { work: ns, path: ns }
    }

    /// This, then `next` (which waits for it).
    #[must_use]
    pub fn then(self, next: Span) -> Span {
        Span {
            work: self.work + next.work,
            path: self.path + next.path,
        }
    }

    /// This and `other` side by side.
    #[must_use]
    pub fn beside(self, other: Span) -> Span {
        Span {
            work: self.work + other.work,
            path: self.path.max(other.path),
        }
    }

    /// Work divided by the critical path (0 for no work).
    pub fn parallelism(&self) -> f64 {
        match self.path {
            0 => 0.0,
            path => self.work as f64 / path as f64,
        }
    }
}

/// Tasks that may all run side by side, recorded from any thread.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    work: AtomicU64,
    path: AtomicU64,
}

impl Tasks {
    /// Record a task: one [`Span::task`], or one that ran tasks of its
    /// own on the pool.
    pub fn add(&self, span: Span) {
        self.work.fetch_add(span.work, Ordering::Relaxed);
        self.path.fetch_max(span.path, Ordering::Relaxed);
    }

    /// Run `f`, recording its CPU time as one task, or the span it
    /// reported with [`report_nested`] when it split its work on the pool.
    pub fn time<R>(&self, f: impl FnOnce() -> R) -> R {
        let clock = Clock::start();
        NESTED.set(None);
        let r = f();
        self.add(NESTED.take().unwrap_or_else(|| Span::task(clock.elapsed())));
        r
    }

    /// What was recorded.
    pub fn span(&self) -> Span {
        Span {
            work: self.work.load(Ordering::Relaxed),
            path: self.path.load(Ordering::Relaxed),
        }
    }
}

thread_local! {
    /// The span of the task running on this thread, when it split its work
    /// on the pool (whose threads' CPU time its own clock does not see).
    static NESTED: Cell<Option<Span>> = const { Cell::new(None) };
}

/// Report the span of the task running on this thread (see
/// [`Tasks::time`]).
pub(crate) fn report_nested(span: Span) {
    NESTED.set(Some(span));
}

/// The calling thread's CPU time since it was started.
pub(crate) struct Clock(u64);

impl Clock {
    pub fn start() -> Clock {
        Clock(thread_cpu_ns())
    }

    /// Nanoseconds of this thread's CPU time since [`Clock::start`].
    pub fn elapsed(&self) -> u64 {
        thread_cpu_ns().saturating_sub(self.0)
    }
}

/// The calling thread's CPU time (0 where the clock cannot be read).
fn thread_cpu_ns() -> u64 {
    use nix::time::{ClockId, clock_gettime};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(0, |t| {
        (t.tv_sec() as u64).saturating_mul(1_000_000_000) + t.tv_nsec() as u64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_by_side_takes_the_longest_and_in_turn_the_sum() {
        let (a, b) = (Span::task(3), Span::task(5));
        assert_eq!(a.beside(b), Span { work: 8, path: 5 });
        assert_eq!(a.then(b), Span { work: 8, path: 8 });
        assert_eq!(a.beside(b).then(a).parallelism(), 11.0 / 8.0);
        assert_eq!(Span::default().parallelism(), 0.0);
        let t = Tasks::default();
        t.add(Span::task(4));
        t.add(Span::task(2));
        assert_eq!(t.span(), Span { work: 6, path: 4 });
    }

    #[test]
    fn the_clock_counts_cpu_time() {
        let clock = Clock::start();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(clock.elapsed() > 0);
    }
}
