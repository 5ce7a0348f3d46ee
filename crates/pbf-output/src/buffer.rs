//! An output's appends gathered in memory and written past the page cache a
//! buffer at a time ([`crate::OutputFile::buffer_appends`]). A copier's ranges
//! are short and never aligned, so each is read into the buffer at its place
//! in the output, and the buffer goes to the file in whole aligned blocks
//! once full; what is left when the output must show its bytes (a commit,
//! another writer's turn) goes out exactly, its partial last block through
//! the page cache, and the next append reads that block back.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::direct::{ALIGN, AlignedBuf, Direct};
use crate::error::{Error, Result};
use crate::range::CopyStats;

/// Bytes of one buffer: one direct write each.
pub(crate) const BUFFER_LEN: usize = 8 << 20;

/// The buffer of one output.
#[derive(Debug)]
pub(crate) struct DirectBuffer {
    /// Its direct writes: once the filesystem refused one
    /// ([`Direct::works`] is false), flush, and write through the page
    /// cache from then on.
    pub(crate) direct: Direct,
    buf: AlignedBuf,
    /// Output offset of the buffer's first byte, a multiple of [`ALIGN`].
    base: u64,
    /// Bytes the buffer holds from `base`.
    held: usize,
    /// False while the file holds every byte (before the first append and
    /// after a flush).
    holding: bool,
    /// Bytes of copies (not of memory) held and not yet written.
    held_copies: u64,
    /// How the copies written so far went out, until taken: in whole buffers past the page cache
    /// (`direct_bytes`), through the page cache (`fallback_bytes`: held
    /// when the filesystem refused a direct write, or in a flush of less
    /// than a block), and the direct writes refused (`fallbacks`, at most
    /// one).
    pub(crate) tally: CopyStats,
}

impl DirectBuffer {
    /// A buffer for `file`; `None` where its filesystem has no direct writes.
    pub(crate) fn open(file: &File) -> Option<DirectBuffer> {
        Some(DirectBuffer {
            direct: Direct::open(file)?,
            buf: AlignedBuf::new(BUFFER_LEN),
            base: 0,
            held: 0,
            holding: false,
            held_copies: 0,
            tally: CopyStats::default(),
        })
    }

    /// Append `len` bytes at `pos`, the output's position, of a copy when
    /// `copy` (else from memory): `put(buf, done)` puts the bytes from
    /// `done` on into `buf`, whole. On an error the buffer holds nothing
    /// past `pos`, so an output that goes on stays whole.
    pub(crate) fn append(
        &mut self,
        file: &File,
        (pos, len): (u64, u64),
        copy: bool,
        put: impl FnMut(&mut [u8], u64) -> Result<()>,
    ) -> Result<()> {
        if !self.holding {
            self.begin(file, pos)?;
        }
        let (base, held, copies) = (self.base, self.held, self.held_copies);
        let res = self.put_all(file, len, copy, put);
        if res.is_err() {
            if self.base == base {
                (self.held, self.held_copies) = (held, copies);
            } else {
                // A full buffer went out past `pos`, and with it the bytes
                // before `pos`: the next append reads its block back.
                self.discard();
            }
        }
        res
    }

    fn put_all(
        &mut self,
        file: &File,
        len: u64,
        copy: bool,
        mut put: impl FnMut(&mut [u8], u64) -> Result<()>,
    ) -> Result<()> {
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min((BUFFER_LEN - self.held) as u64) as usize;
            put(&mut self.buf.bytes_mut()[self.held..self.held + n], done)?;
            self.held += n;
            self.held_copies += if copy { n as u64 } else { 0 };
            done += n as u64;
            if self.held == BUFFER_LEN {
                self.write(file, BUFFER_LEN)?;
                self.base += BUFFER_LEN as u64;
                self.held = 0;
            }
        }
        Ok(())
    }

    /// Start holding at `pos`: the block it falls in begins with bytes the
    /// file has already, which a direct write of that block must repeat.
    fn begin(&mut self, file: &File, pos: u64) -> Result<()> {
        self.base = pos / ALIGN * ALIGN;
        self.held = (pos - self.base) as usize;
        let head = &mut self.buf.bytes_mut()[..self.held];
        file.read_exact_at(head, self.base)
            .map_err(|e| Error::io(format!("reading back offset {}", self.base), e))?;
        self.holding = true;
        Ok(())
    }

    /// Write the first `len` bytes held (whole blocks) directly, or through
    /// the page cache where the filesystem refuses, and tally the copies
    /// held so far by the way they went.
    fn write(&mut self, file: &File, len: usize) -> Result<()> {
        let bytes = &self.buf.bytes()[..len];
        let end = self.base + len as u64;
        let failed = |e| write_failed(self.base, end, e);
        let works = self.direct.works();
        let direct = works && self.direct.write_at(bytes, self.base).map_err(failed)?;
        if !direct {
            file.write_all_at(bytes, self.base).map_err(failed)?;
        }
        self.tally.fallbacks += u64::from(works && !direct);
        self.tally_copies(direct);
        Ok(())
    }

    fn tally_copies(&mut self, direct: bool) {
        let copies = std::mem::take(&mut self.held_copies);
        match direct {
            true => self.tally.direct_bytes += copies,
            false => self.tally.fallback_bytes += copies,
        }
    }

    /// Put every byte held into the file: the whole blocks directly, the
    /// rest through the page cache, so no byte past the position is
    /// touched (another writer may have put bytes there).
    pub(crate) fn flush(&mut self, file: &File) -> Result<()> {
        if !self.holding {
            return Ok(());
        }
        let whole = self.held / ALIGN as usize * ALIGN as usize;
        if whole > 0 {
            self.write(file, whole)?;
        }
        let rest = &self.buf.bytes()[whole..self.held];
        let at = self.base + whole as u64;
        let end = at + rest.len() as u64;
        file.write_all_at(rest, at)
            .map_err(|e| write_failed(at, end, e))?;
        self.tally_copies(false);
        self.discard();
        Ok(())
    }

    /// Forget what is held: the output starts over, or the file has it.
    pub(crate) fn discard(&mut self) {
        self.holding = false;
        self.held = 0;
        self.held_copies = 0;
    }
}

/// A failed write of the output's bytes `start..end`.
fn write_failed(start: u64, end: u64, e: io::Error) -> Error {
    Error::io(format!("writing bytes {start}..{end} of the output"), e)
}
