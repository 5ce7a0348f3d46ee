//! What a merge tells a progress bar as it goes, in input bytes: each input
//! frame counts half its length once it is decoded and the other half once
//! the merged elements of its op have gone to the encoder. A bar fed by it
//! moves through both halves of a long op (reading and spilling, then the
//! final merge) and reaches the op's input bytes exactly when the op ends.
//! Between the halves an op that spills merges its runs into fewer; each
//! such pass is told as a [`Phase`], so a bar can say why it waits.

use std::fmt;
use std::sync::Arc;

/// Callbacks told, on any thread, how many input bytes of work are done
/// and which phase a spilling op is in.
#[derive(Clone, Default)]
pub struct Progress {
    done: Option<Arc<dyn Fn(u64) + Send + Sync>>,
    phase: Option<Arc<dyn Fn(Phase) + Send + Sync>>,
}

/// What a merge op that spills is doing while its bytes do not move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Merging its runs into fewer spill runs, the `n`th time (from 1).
    Spilling(u64),
    /// Merging what is left into the output.
    Final,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Spilling(n) => write!(f, "spill pass {n}"),
            Phase::Final => f.write_str("final merge"),
        }
    }
}

impl Progress {
    /// Call `f` with each amount of input bytes done (see the module).
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> Progress {
        Progress {
            done: Some(Arc::new(f)),
            phase: None,
        }
    }

    /// Also call `f` as a spilling op enters each phase.
    pub fn with_phases(mut self, f: impl Fn(Phase) + Send + Sync + 'static) -> Progress {
        self.phase = Some(Arc::new(f));
        self
    }

    fn tell(&self, bytes: u64) {
        if let (Some(f), 1..) = (&self.done, bytes) {
            f(bytes);
        }
    }

    /// A spilling op enters `phase`.
    pub(crate) fn phase(&self, phase: Phase) {
        if let Some(f) = &self.phase {
            f(phase);
        }
    }

    /// Input frames of `frame_len` bytes in all were decoded: the first
    /// halves of their lengths.
    pub(crate) fn loaded(&self, frame_len: u64) {
        self.tell(frame_len / 2);
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.done {
            Some(_) => "Progress(on)",
            None => "Progress(off)",
        })
    }
}

/// The half of a frame's length told as its op's elements are merged: what
/// [`Progress::loaded`] did not tell.
pub(crate) fn second_half(frame_len: u64) -> u64 {
    frame_len - frame_len / 2
}

/// Tells an op's second halves (`bytes` in all) in proportion to its
/// `elements` merged so far.
#[derive(Debug)]
pub(crate) struct Meter {
    progress: Progress,
    bytes: u64,
    elements: u64,
    told: u64,
}

impl Meter {
    pub fn new(progress: Progress, bytes: u64, elements: u64) -> Meter {
        Meter {
            progress,
            bytes,
            elements,
            told: 0,
        }
    }

    /// `merged` of the op's elements have gone to the encoder (written or
    /// dropped as repeats).
    pub fn merged(&mut self, merged: u64) {
        let due = match self.elements {
            0 => self.bytes,
            n => (u128::from(self.bytes) * u128::from(merged.min(n)) / u128::from(n)) as u64,
        };
        if due > self.told {
            self.progress.tell(due - self.told);
            self.told = due;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn counter() -> (Progress, Arc<AtomicU64>) {
        let total = Arc::new(AtomicU64::default());
        let sum = Arc::clone(&total);
        let progress = Progress::new(move |b| {
            sum.fetch_add(b, Ordering::Relaxed);
        });
        (progress, total)
    }

    #[test]
    fn halves_add_up_to_the_frames() {
        let frames = [1u64, 2, 7, 1000, 12_345];
        let (progress, total) = counter();
        let second: u64 = frames.iter().map(|&f| second_half(f)).sum();
        for &f in &frames {
            progress.loaded(f);
        }
        let mut meter = Meter::new(progress, second, 3);
        meter.merged(1);
        let after_one = total.load(Ordering::Relaxed);
        meter.merged(3);
        assert!(after_one < total.load(Ordering::Relaxed));
        assert_eq!(total.load(Ordering::Relaxed), frames.iter().sum::<u64>());
    }

    #[test]
    fn a_meter_tells_each_byte_once() {
        let (progress, total) = counter();
        let mut meter = Meter::new(progress, 100, 10);
        for merged in [0, 3, 3, 2, 10, 12] {
            meter.merged(merged);
        }
        assert_eq!(total.load(Ordering::Relaxed), 100);
    }

    #[test]
    fn phases_are_named() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        let progress =
            Progress::new(|_| {}).with_phases(move |p| into.lock().expect("lock").push(p));
        progress.phase(Phase::Spilling(2));
        progress.phase(Phase::Final);
        let names: Vec<String> = seen
            .lock()
            .expect("lock")
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(names, ["spill pass 2", "final merge"]);
    }

    #[test]
    fn an_op_without_elements_is_done_at_once() {
        let (progress, total) = counter();
        Meter::new(progress, 40, 0).merged(0);
        assert_eq!(total.load(Ordering::Relaxed), 40);
    }
}
