//! A sorted stream of blocks with one block of read-ahead: while the merge
//! consumes a block, the next one is read, decompressed, decoded and sorted
//! on the worker pool. Each stream holds at most two blocks, which is what
//! the memory plan counts per run.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};

use rayon::ThreadPool;

use crate::error::{Error, Result};
use crate::graph::Tasks;
use crate::sorted::Block;

/// Produces one sorted block.
pub(crate) type Loader = Box<dyn FnOnce() -> Result<Block> + Send>;

/// Blocks in order, each loaded by its [`Loader`], the next one prefetched.
pub(crate) struct Stream {
    loaders: VecDeque<Loader>,
    pending: Option<Receiver<Result<Block>>>,
    pool: Arc<ThreadPool>,
    /// Where each load's CPU time is recorded.
    tasks: Arc<Tasks>,
}

impl Stream {
    /// A stream over the given loaders, each timed as a task of `tasks`;
    /// the first block starts loading now.
    pub fn new(loaders: Vec<Loader>, pool: Arc<ThreadPool>, tasks: Arc<Tasks>) -> Stream {
        let mut s = Stream {
            loaders: loaders.into(),
            pending: None,
            pool,
            tasks,
        };
        s.start_next();
        s
    }

    /// The next block, or `None` when the stream is exhausted.
    pub fn next_block(&mut self) -> Result<Option<Block>> {
        let Some(rx) = self.pending.take() else {
            return Ok(None);
        };
        let block = rx
            .recv()
            .map_err(|_| Error::Internal("a decoding thread panicked".into()))??;
        self.start_next();
        Ok(Some(block))
    }

    fn start_next(&mut self) {
        if let Some(load) = self.loaders.pop_front() {
            let (tx, rx) = sync_channel(1);
            let tasks = Arc::clone(&self.tasks);
            self.pool.spawn(move || {
                // The receiver is gone only when the merge already failed.
                let _ = tx.send(tasks.time(load));
            });
            self.pending = Some(rx);
        }
    }
}
