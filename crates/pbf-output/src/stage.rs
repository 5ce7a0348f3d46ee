//! An output's appends gathered in memory and written past the page cache a
//! stage at a time ([`crate::OutputFile::stage_appends`]). A copier's ranges
//! are short and never aligned, so each is read into the stage at its place
//! in the output, and the stage goes to the file in whole aligned blocks
//! once full; what is left when the output must show its bytes (a commit,
//! another writer's turn) goes out exactly, its partial last block through
//! the page cache, and the next append reads that block back.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::direct::{ALIGN, AlignedBuf, Direct};
use crate::error::{Error, Result};

/// Bytes of one stage: one direct write each.
pub(crate) const STAGE: usize = 8 << 20;

/// The stage of one output.
#[derive(Debug)]
pub(crate) struct Stage {
    direct: Direct,
    buf: AlignedBuf,
    /// Output offset of the buffer's first byte, a multiple of [`ALIGN`].
    base: u64,
    /// Bytes the buffer holds from `base`.
    fill: usize,
    /// False while the file holds every byte (before the first append and
    /// after a flush).
    holding: bool,
}

impl Stage {
    /// A stage for `file`; `None` where its filesystem has no direct writes.
    pub(crate) fn open(file: &File) -> Option<Stage> {
        Some(Stage {
            direct: Direct::open(file)?,
            buf: AlignedBuf::new(STAGE),
            base: 0,
            fill: 0,
            holding: false,
        })
    }

    /// False once the filesystem refused a direct write: flush, and write
    /// through the page cache from then on.
    pub(crate) fn works(&self) -> bool {
        self.direct.works()
    }

    /// Append `len` bytes at `pos`, the output's position: `fill(buf, done)`
    /// puts the bytes from `done` on into `buf`, whole.
    pub(crate) fn append(
        &mut self,
        file: &File,
        pos: u64,
        len: u64,
        mut fill: impl FnMut(&mut [u8], u64) -> Result<()>,
    ) -> Result<()> {
        if !self.holding {
            self.begin(file, pos)?;
        }
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min((STAGE - self.fill) as u64) as usize;
            fill(&mut self.buf.bytes_mut()[self.fill..self.fill + n], done)?;
            self.fill += n;
            done += n as u64;
            if self.fill == STAGE {
                self.write(file, STAGE)?;
                self.base += STAGE as u64;
                self.fill = 0;
            }
        }
        Ok(())
    }

    /// Start holding at `pos`: the block it falls in begins with bytes the
    /// file has already, which a direct write of that block must repeat.
    fn begin(&mut self, file: &File, pos: u64) -> Result<()> {
        self.base = pos / ALIGN * ALIGN;
        self.fill = (pos - self.base) as usize;
        let head = &mut self.buf.bytes_mut()[..self.fill];
        file.read_exact_at(head, self.base)
            .map_err(|e| Error::io(format!("reading back offset {}", self.base), e))?;
        self.holding = true;
        Ok(())
    }

    /// Write the first `len` bytes held (whole blocks) directly, or through
    /// the page cache where the filesystem refuses.
    fn write(&self, file: &File, len: usize) -> Result<()> {
        let bytes = &self.buf.bytes()[..len];
        let failed = |e| Error::io(format!("write at offset {}", self.base), e);
        if !self.direct.write_at(bytes, self.base).map_err(failed)? {
            file.write_all_at(bytes, self.base).map_err(failed)?;
        }
        Ok(())
    }

    /// Put every byte held into the file: the whole blocks directly, the
    /// rest through the page cache, so no byte past the position is
    /// touched (another writer may have put bytes there).
    pub(crate) fn flush(&mut self, file: &File) -> Result<()> {
        if !self.holding {
            return Ok(());
        }
        let whole = self.fill / ALIGN as usize * ALIGN as usize;
        if whole > 0 {
            self.write(file, whole)?;
        }
        let rest = &self.buf.bytes()[whole..self.fill];
        let at = self.base + whole as u64;
        file.write_all_at(rest, at)
            .map_err(|e| Error::io(format!("write at offset {at}"), e))?;
        self.discard();
        Ok(())
    }

    /// Forget what is held: the output starts over.
    pub(crate) fn discard(&mut self) {
        self.holding = false;
        self.fill = 0;
    }
}
