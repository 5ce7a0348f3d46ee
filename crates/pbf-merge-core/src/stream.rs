//! A sorted stream of blocks with one block of read-ahead: while the merge
//! consumes a block, the next one is read, decompressed, decoded and sorted
//! on the worker pool. Each stream holds at most two blocks, which is what
//! the memory plan counts per run.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};

use rayon::ThreadPool;

use crate::error::{Error, ErrorKind, Result};
use crate::sorted::Block;

/// Produces one sorted block.
pub(crate) type Loader = Box<dyn FnOnce() -> Result<Block> + Send>;

/// Blocks in order, each loaded by its [`Loader`], the next one prefetched.
pub(crate) struct Stream {
    loaders: VecDeque<Loader>,
    pending: Option<Receiver<Result<Block>>>,
    pool: Arc<ThreadPool>,
}

impl Stream {
    /// A stream over the given loaders; the first block starts loading now.
    pub fn new(loaders: Vec<Loader>, pool: Arc<ThreadPool>) -> Stream {
        let mut s = Stream {
            loaders: loaders.into(),
            pending: None,
            pool,
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
            .map_err(|_| Error::new(ErrorKind::Internal("a decoding thread panicked".into())))??;
        self.start_next();
        Ok(Some(block))
    }

    fn start_next(&mut self) {
        if let Some(load) = self.loaders.pop_front() {
            let (tx, rx) = sync_channel(1);
            self.pool.spawn(move || {
                // The receiver is gone only when the merge already failed.
                let _ = tx.send(load());
            });
            self.pending = Some(rx);
        }
    }
}
