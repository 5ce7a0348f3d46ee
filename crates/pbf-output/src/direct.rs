//! Writes past the page cache (`O_DIRECT`): a second handle on an output
//! file and a buffer aligned for it. `copy_file_range` on a local filesystem
//! copies every byte into new cached pages of the output, which the kernel
//! must then write back and, once input and output outgrow memory, reclaim;
//! a range read into memory (a copy from the source's cached pages) and
//! written directly costs the one copy and leaves no dirty pages
//! (bench/RESULTS-scaling-disk.md). The copy ahead (`pbf_copier::ahead`)
//! and an output's buffered appends ([`crate::OutputFile::buffer_appends`])
//! write this way. Only whole aligned blocks go directly; a partial block
//! goes through the page cache with exactly its bytes, so a writer never
//! overwrites the rest of a block that another writer (a copy ahead
//! thread, the buffer) fills.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicBool, Ordering};

/// Block size direct writes are aligned to, in the file and in memory: a
/// multiple of any disk's logical block.
pub const ALIGN: u64 = 4096;

/// A second handle on an output that writes past the page cache. The
/// first write the filesystem refuses (`EINVAL`) turns it off for good:
/// [`Direct::works`] is false from then on, and callers write through the
/// page cache instead.
#[derive(Debug)]
pub struct Direct {
    file: File,
    works: AtomicBool,
}

impl Direct {
    /// Open `dst` again for direct writes; `None` where the filesystem has
    /// none or the file cannot be opened again.
    pub fn open(dst: &File) -> Option<Direct> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_DIRECT)
            .open(format!("/proc/self/fd/{}", dst.as_raw_fd()))
            .ok()?;
        Some(Direct {
            file,
            works: true.into(),
        })
    }

    /// False once the filesystem refused a direct write.
    pub fn works(&self) -> bool {
        self.works.load(Ordering::Relaxed)
    }

    /// Write `buf` (whole blocks, aligned in memory, as [`AlignedBuf`]
    /// gives them) at `at` (a multiple of [`ALIGN`]). `Ok(false)` when the
    /// filesystem refuses direct writes, now or before: the caller writes
    /// `buf` through the page cache, over whatever part went out.
    pub fn write_at(&self, buf: &[u8], at: u64) -> io::Result<bool> {
        if !self.works() {
            return Ok(false);
        }
        match self.file.write_all_at(buf, at) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(nix::libc::EINVAL) => {
                self.works.store(false, Ordering::Relaxed);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

/// A zeroed buffer of a fixed length whose first byte is aligned to
/// [`ALIGN`] in memory.
#[derive(Debug)]
pub struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A buffer of `len` bytes.
    pub fn new(len: usize) -> AlignedBuf {
        let raw = vec![0; len + ALIGN as usize];
        let start = raw.as_ptr().align_offset(ALIGN as usize);
        AlignedBuf { raw, start, len }
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    /// Its bytes, to fill.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aligned_buffer_starts_on_a_block() {
        for len in [1, 4096, 10_000] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.bytes().as_ptr() as usize % ALIGN as usize, 0);
            assert_eq!(b.bytes_mut().len(), len);
        }
    }

    #[test]
    fn a_direct_write_lands_where_asked_or_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let file = File::create(&path).expect("create");
        let Some(direct) = Direct::open(&file) else {
            eprintln!("SKIPPED: no O_DIRECT on {}", dir.path().display());
            return;
        };
        let mut buf = AlignedBuf::new(2 * ALIGN as usize);
        buf.bytes_mut().fill(7);
        match direct.write_at(buf.bytes(), ALIGN).expect("write") {
            true => {
                let got = std::fs::read(&path).expect("read");
                assert_eq!(got.len(), 3 * ALIGN as usize);
                assert!(got[..ALIGN as usize].iter().all(|&b| b == 0));
                assert!(got[ALIGN as usize..].iter().all(|&b| b == 7));
                assert!(direct.works());
            }
            false => assert!(!direct.works()),
        }
    }
}
