//! Merge ops in flight: several ops merged at once, each on a thread of its
//! own (its loads and encodes on the shared pool), their frames appended to
//! the spool in op order. The oldest op's frames go to the spool as they
//! are encoded; a later op's wait in a bounded queue until the ops before it
//! are done, so the spool, and the copy ops reported from it, are what
//! merging the ops one at a time writes, byte for byte.
//!
//! Memory: an op takes its share of the budget ([`Prepared::memory`]) before
//! it decodes anything, in op order, and gives it back when done; the ops
//! in flight together stay within [`crate::Options::memory`]. The oldest op
//! always gets its share (the ops before it are done), so the ops never
//! wait on each other in a circle; an op that must sort batches or spill
//! takes the whole budget and so runs alone.

use std::collections::VecDeque;
use std::io;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use pbf_stream::MergeOp;

use crate::error::{Error, Result};
use crate::graph::{Clock, Span};
use crate::writer::{Encoded, Target};
use crate::{MergeStats, Merger, Prepared, Spool, WrittenFrame};

/// Encoded frames an op may have queued for the spool: a later op stops
/// merging when its queue is full.
const QUEUED_FRAMES: usize = 32;

/// Merge ops in flight, oldest first.
pub struct Flight {
    merger: Arc<Merger>,
    ops: VecDeque<Flying>,
    gate: Arc<Gate>,
    tickets: u64,
    window: usize,
    /// The appends to the spool, one after another.
    appends: Span,
    /// Ops done, side by side.
    ops_span: Span,
}

/// One op in flight, as the spool's writer sees it.
struct Flying {
    rx: Receiver<Message>,
    appended: Appended,
    padding: Option<u64>,
}

/// Bytes of frames reported to the caller at a time (a run's last frames
/// are reported when it ends, whatever their size).
const REPORT_BYTES: u64 = 8 << 20;

/// The frames an op appended to the spool, reported to the caller in order,
/// at least once per [`REPORT_BYTES`] and at the op's end.
#[derive(Debug, Default)]
struct Appended {
    pending: Vec<WrittenFrame>,
    pending_bytes: u64,
    frames: u64,
    bytes: u64,
}

impl Appended {
    /// Append one encoded block to the spool.
    fn append(
        &mut self,
        spool: &mut Spool,
        block: Encoded,
        report: &mut dyn FnMut(&[WrittenFrame]) -> io::Result<()>,
    ) -> Result<()> {
        let length = block.bytes.len() as u64;
        let offset = spool.append(&block.bytes)?;
        self.pending.push(WrittenFrame {
            offset,
            length,
            summary: block.summary,
        });
        self.pending_bytes += length;
        self.frames += 1;
        self.bytes += length;
        if self.pending_bytes >= REPORT_BYTES {
            self.flush(report)?;
        }
        Ok(())
    }

    /// Report the frames not reported yet.
    fn flush(&mut self, report: &mut dyn FnMut(&[WrittenFrame]) -> io::Result<()>) -> Result<()> {
        if !self.pending.is_empty() {
            report(&self.pending).map_err(Error::Output)?;
            self.pending.clear();
            self.pending_bytes = 0;
        }
        Ok(())
    }
}

/// What an op's thread sends.
enum Message {
    Frame(Encoded),
    Done(Result<MergeStats>),
}

/// The oldest op's progress after [`Flight::write_oldest`].
#[derive(Debug)]
pub enum Ready {
    /// Frames may still come.
    Merging,
    /// The op is done and every frame of it is in the spool and reported.
    Done(MergeStats),
}

impl Flight {
    /// Ops in flight over `merger`: at most `window` at once (at least one).
    pub fn new(merger: Arc<Merger>, window: usize) -> Flight {
        let budget = merger.opts.memory;
        Flight {
            merger,
            ops: VecDeque::new(),
            gate: Arc::new(Gate::new(budget)),
            tickets: 0,
            window: window.max(1),
            appends: Span::default(),
            ops_span: Span::default(),
        }
    }

    /// True when another op may start.
    pub fn has_room(&self) -> bool {
        self.ops.len() < self.window
    }

    /// Start merging `op` on a thread of its own: it is prepared there, and
    /// merged once its share of the budget is free.
    pub fn start(&mut self, op: MergeOp) {
        let (tx, rx) = sync_channel(QUEUED_FRAMES);
        let (merger, gate, ticket) = (
            Arc::clone(&self.merger),
            Arc::clone(&self.gate),
            self.tickets,
        );
        self.tickets += 1;
        std::thread::spawn(move || {
            let done = merge_one(&merger, &gate, ticket, op, &tx);
            let _ = tx.send(Message::Done(done));
        });
        self.ops.push_back(Flying {
            rx,
            appended: Appended::default(),
            padding: None,
        });
    }

    /// Append the oldest op's frames to `spool` as they come, reporting
    /// them (at least once per 8 MiB and once at the end), until it is done
    /// or, with `wait`, nothing came for that long.
    pub fn write_oldest(
        &mut self,
        spool: &mut Spool,
        report: &mut dyn FnMut(&[WrittenFrame]) -> io::Result<()>,
        wait: Option<Duration>,
    ) -> Result<Ready> {
        let align = self.merger.opts.align;
        let Some(op) = self.ops.front_mut() else {
            return Err(Error::Internal("no merge op in flight".into()));
        };
        if op.padding.is_none() {
            op.padding = Some(spool.align(align)?);
        }
        loop {
            let message = match wait {
                None => op.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(wait) => op.rx.recv_timeout(wait),
            };
            let message = match message {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => return Ok(Ready::Merging),
                Err(RecvTimeoutError::Disconnected) => {
                    let m = "a merging thread stopped without a word";
                    return Err(Error::Internal(m.into()));
                }
            };
            match message {
                Message::Frame(block) => {
                    let clock = Clock::start();
                    op.appended.append(spool, block, report)?;
                    self.appends = self.appends.then(Span::task(clock.elapsed()));
                }
                Message::Done(done) => {
                    let mut stats = done?;
                    op.appended.flush(report)?;
                    (stats.frames, stats.bytes) = (op.appended.frames, op.appended.bytes);
                    stats.padding = op.padding.unwrap_or(0);
                    self.ops_span = self.ops_span.beside(stats.span);
                    self.ops.pop_front();
                    return Ok(Ready::Done(stats));
                }
            }
        }
    }

    /// The span of the ops done so far: side by side, then their appends
    /// to the spool one after another.
    pub fn span(&self) -> Span {
        self.ops_span.then(self.appends)
    }
}

impl Drop for Flight {
    /// Ops still in flight (after an error) stop: their queues are closed
    /// and none waits for its share of the budget any more.
    fn drop(&mut self) {
        self.gate.close();
        self.ops.clear();
    }
}

/// Prepare and merge one op on its own thread, its frames sent to `tx`.
fn merge_one(
    merger: &Merger,
    gate: &Gate,
    ticket: u64,
    op: MergeOp,
    tx: &SyncSender<Message>,
) -> Result<MergeStats> {
    let prepared = merger.prepare(&op);
    let clock = Clock::start();
    drop(op);
    let dropping = Span::task(clock.elapsed());
    let need = prepared
        .as_ref()
        .map_or(0, |p: &Prepared| p.memory(gate.budget));
    let Some(_share) = gate.enter(ticket, need) else {
        return Err(Error::Internal("merge stopped".into()));
    };
    let mut stats = merger.execute(prepared?, tx)?;
    stats.span = stats.span.then(dropping);
    Ok(stats)
}

/// Sends an op's encoded frames to the spool's writer.
impl Target for &SyncSender<Message> {
    fn write(&mut self, block: Encoded) -> Result<()> {
        self.send(Message::Frame(block))
            .map_err(|_| Error::Internal("merge stopped".into()))
    }
}

/// Shares of the memory budget, taken in op order.
struct Gate {
    budget: u64,
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    /// The ticket whose turn it is to take its share.
    next: u64,
    used: u64,
    closed: bool,
}

/// A share of the budget, given back when dropped.
struct Share<'a> {
    gate: &'a Gate,
    bytes: u64,
}

impl Gate {
    fn new(budget: u64) -> Gate {
        Gate {
            budget,
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    /// Wait for `ticket`'s turn and for `bytes` of the budget (all of it
    /// being free will do for a larger share); `None` once closed.
    fn enter(&self, ticket: u64, bytes: u64) -> Option<Share<'_>> {
        let mut st = crate::lock(&self.state);
        loop {
            if st.closed {
                return None;
            }
            let fits = st.used == 0 || st.used.saturating_add(bytes) <= self.budget;
            if st.next == ticket && fits {
                st.next += 1;
                st.used = st.used.saturating_add(bytes);
                self.changed.notify_all();
                return Some(Share { gate: self, bytes });
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn close(&self) {
        crate::lock(&self.state).closed = true;
        self.changed.notify_all();
    }
}

impl Drop for Share<'_> {
    fn drop(&mut self) {
        let mut st = crate::lock(&self.gate.state);
        st.used = st.used.saturating_sub(self.bytes);
        self.gate.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_taken_in_ticket_order_within_the_budget() {
        let gate = Arc::new(Gate::new(100));
        let a = gate.enter(0, 60).expect("first");
        let order = Arc::new(Mutex::new(Vec::new()));
        let handles: Vec<_> = [(2u64, 10u64), (1, 50)]
            .into_iter()
            .map(|(ticket, bytes)| {
                let (gate, order) = (Arc::clone(&gate), Arc::clone(&order));
                std::thread::spawn(move || {
                    let share = gate.enter(ticket, bytes).expect("share");
                    order.lock().expect("order").push(ticket);
                    std::thread::sleep(Duration::from_millis(20));
                    drop(share);
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        // Ticket 1 needs 50 of the 40 left, and ticket 2 waits its turn
        // although its 10 would fit.
        assert!(order.lock().expect("order").is_empty());
        drop(a);
        handles.into_iter().for_each(|h| h.join().expect("join"));
        let mut entered = order.lock().expect("order").clone();
        entered.sort_unstable();
        assert_eq!(entered, vec![1, 2]);
        // A share larger than the budget is taken when nothing else is.
        assert!(gate.enter(3, 500).is_some());
        gate.close();
        assert!(gate.enter(4, 1).is_none());
    }
}
