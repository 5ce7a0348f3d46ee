//! The plan's ops, read on a thread of their own. While merge ops are in
//! flight, pbf-merge takes the records already read without waiting
//! ([`OpQueue::try_next`]) and starts the next merge op among them; reading
//! on the main thread could not do so without blocking on the pipe while
//! the oldest op's frames wait to be written.

use std::io::BufRead;
use std::sync::mpsc::{Receiver, TryRecvError, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use pbf_stream::{PlanReader, PlanRecord};

/// Records read but not yet taken: enough to see past the copy ops between
/// two merge ops, few enough to bound memory.
const LOOK_AHEAD: usize = 64;

/// What the reading thread sends: the reader's answer for one record.
type Item = std::result::Result<Option<PlanRecord>, pbf_stream::Error>;

/// Ops read ahead by a thread, taken in order.
pub(crate) struct OpQueue {
    rx: Receiver<Item>,
    thread: JoinHandle<Duration>,
    name: String,
}

impl OpQueue {
    /// Read the plan's ops (the plan record is read already) on a new
    /// thread. `name` names the plan in errors.
    pub fn start<R: BufRead + Send + 'static>(mut reader: PlanReader<R>, name: &str) -> OpQueue {
        let (tx, rx) = sync_channel(LOOK_AHEAD);
        let thread = std::thread::spawn(move || {
            loop {
                let item = reader.next_op();
                // After the end record (`Ok(None)`) or an error, nothing follows.
                let more = matches!(item, Ok(Some(_)));
                // A closed channel: the merge failed and nobody reads on.
                if tx.send(item).is_err() || !more {
                    break;
                }
            }
            reader.parse_time()
        });
        OpQueue {
            rx,
            thread,
            name: name.to_string(),
        }
    }

    /// The next op; `None` after the end record.
    pub fn next(&mut self) -> Result<Option<PlanRecord>> {
        let item = self.rx.recv().map_err(|_| self.stopped())?;
        item.with_context(|| self.name.clone())
    }

    /// The next op if one is read already: `None` when none is yet,
    /// `Some(None)` after the end record.
    pub fn try_next(&mut self) -> Result<Option<Option<PlanRecord>>> {
        let item = match self.rx.try_recv() {
            Ok(item) => item,
            Err(TryRecvError::Empty) => return Ok(None),
            Err(TryRecvError::Disconnected) => return Err(self.stopped()),
        };
        item.map(Some).with_context(|| self.name.clone())
    }

    /// Time the thread spent parsing; waits for it (it ends with the end
    /// record, which [`OpQueue::next`] has returned by then).
    pub fn parse_time(self) -> Duration {
        self.thread.join().unwrap_or_default()
    }

    /// The reading thread is gone before the end record.
    fn stopped(&self) -> anyhow::Error {
        anyhow!("{}: the thread reading it stopped", self.name)
    }
}
