//! Copying a byte range between files without passing it through user space:
//! `copy_file_range(2)` in large calls, looping on short copies. When the
//! kernel refuses (another filesystem on old kernels, a pipe or other
//! non-regular output, no syscall, an `O_APPEND` output) the rest of the range
//! goes through a 1 MiB buffer with `pread` and `pwrite` (or `write` for a
//! stream). A source that ends before the range does is an error, never a
//! short output. [`punch_hole`] frees a range of a file that was copied
//! and will not be read again (a spool).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};

use nix::errno::Errno;
use nix::fcntl::copy_file_range;

use crate::error::{Error, ErrorKind, Result};

/// Bytes asked of one `copy_file_range` call.
pub const CHUNK: u64 = 1 << 30;
/// Buffer of the user-space fallback.
const BUF: usize = 1 << 20;

/// How the bytes of one output were copied, for `-v`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Bytes copied by `copy_file_range` (in the kernel, possibly reflinked by it).
    pub kernel_bytes: u64,
    /// Bytes read into memory and written past the page cache
    /// ([`crate::direct`]).
    pub direct_bytes: u64,
    /// Bytes copied through a user-space buffer and the page cache.
    pub fallback_bytes: u64,
    /// Ranges in which the kernel refused and the fallback took over.
    pub fallbacks: u64,
    /// Bytes written from memory (headers, BlobHeaders, padding).
    pub written_bytes: u64,
}

impl CopyStats {
    /// Bytes copied any way.
    pub fn copied(&self) -> u64 {
        self.kernel_bytes + self.direct_bytes + self.fallback_bytes
    }
}

/// Errors after which the same range can still be copied through user space.
fn kernel_refused(e: Errno) -> bool {
    matches!(
        e,
        Errno::EXDEV | Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP | Errno::EBADF
    )
}

/// Copy `len` bytes at `src_off` of `src` to `dst`: at `dst_off`, or at the
/// current position of `dst` when `dst_off` is `None` (required for pipes and
/// for standard output, whose position is not ours).
///
/// Errors carry the offset in their context; the caller adds the file names.
pub fn copy_range(
    src: &File,
    src_off: u64,
    len: u64,
    dst: &File,
    dst_off: Option<u64>,
    stats: &mut CopyStats,
) -> Result<()> {
    // One `copy_file_range` call, `want` bytes from `at` into the range.
    let kernel_copy = |at: u64, want: u64| -> std::result::Result<u64, Errno> {
        let off = |o: u64| i64::try_from(o).map_err(|_| Errno::EINVAL);
        let mut so = off(src_off + at)?;
        let mut d = dst_off.map(|d| off(d + at)).transpose()?;
        Ok(copy_file_range(src, Some(&mut so), dst, d.as_mut(), want as usize)? as u64)
    };
    let mut done = 0u64;
    let mut kernel = true;
    while done < len {
        let want = (len - done).min(CHUNK);
        if kernel {
            match kernel_copy(done, want) {
                Ok(n) if n > 0 => {
                    done += n;
                    stats.kernel_bytes += n;
                }
                Err(Errno::EINTR) => {}
                Err(e) if !kernel_refused(e) => {
                    return Err(Error::io(
                        format!("copy_file_range at source offset {}", src_off + done),
                        e.into(),
                    ));
                }
                // Refused, or no byte copied: the end of the source, or a
                // filesystem that copies nothing (the fallback tells which).
                _ => {
                    kernel = false;
                    stats.fallbacks += 1;
                }
            }
            continue;
        }
        let n = buffered_copy(
            src,
            src_off + done,
            len - done,
            dst,
            dst_off.map(|d| d + done),
        )?;
        done += n;
        stats.fallback_bytes += n;
    }
    Ok(())
}

/// Copy up to one buffer; returns the bytes copied (never 0).
fn buffered_copy(
    src: &File,
    src_off: u64,
    len: u64,
    mut dst: &File,
    dst_off: Option<u64>,
) -> Result<u64> {
    let mut buf = vec![0u8; (len as usize).min(BUF)];
    read_exact(src, &mut buf, src_off, len)?;
    let written = match dst_off {
        Some(o) => dst.write_all_at(&buf, o),
        None => dst.write_all(&buf),
    };
    written.map_err(|e| {
        Error::io(
            format!("writing the bytes read at source offset {src_off}"),
            e,
        )
    })?;
    Ok(buf.len() as u64)
}

/// Fill `buf` from `src` at `at`, where `left` bytes of the range to copy
/// start: a source that ends first is an error naming where it ended and
/// what is missing, never a short output.
pub(crate) fn read_exact(src: &File, buf: &mut [u8], at: u64, left: u64) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let offset = at + got as u64;
        match src.read_at(&mut buf[got..], offset) {
            Ok(0) => {
                let missing = left - got as u64;
                let short = ErrorKind::ShortSource { offset, missing };
                return Err(Error::new("reading the source", short));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(format!("read at source offset {offset}"), e)),
        }
    }
    Ok(())
}

/// What [`punch_hole`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Punched {
    /// The whole blocks inside the range were freed: this many bytes.
    Freed(u64),
    /// The filesystem cannot punch holes (`EOPNOTSUPP`): nothing changed.
    Unsupported,
}

/// Free the whole filesystem blocks inside `offset..offset + len` of `file`
/// (opened for writing) with `fallocate(FALLOC_FL_PUNCH_HOLE |
/// FALLOC_FL_KEEP_SIZE)`: they read as zeros from now on and take no room,
/// and the file keeps its size. The bytes of a block the range only partly
/// covers stay as they are, so a neighbouring range is never touched.
pub fn punch_hole(file: &File, offset: u64, len: u64) -> Result<Punched> {
    let block = file
        .metadata()
        .map_err(|e| Error::io("stat before punching a hole", e))?
        .blksize()
        .max(1);
    let start = offset.div_ceil(block) * block;
    let end = (offset + len) / block * block;
    if end <= start {
        return Ok(Punched::Freed(0));
    }
    let (Ok(at), Ok(n)) = (i64::try_from(start), i64::try_from(end - start)) else {
        return Err(Error::invalid(
            "punching a hole",
            format!("range {start}..{end} is past any file"),
        ));
    };
    let mode = nix::libc::FALLOC_FL_PUNCH_HOLE | nix::libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: the descriptor stays open for the call, which reads no memory.
    let rc = unsafe { nix::libc::fallocate(file.as_raw_fd(), mode, at, n) };
    if rc == 0 {
        return Ok(Punched::Freed(end - start));
    }
    match Errno::last() {
        Errno::EOPNOTSUPP | Errno::ENOSYS => Ok(Punched::Unsupported),
        e => Err(Error::io(
            format!("punching a hole at {start}..{end}"),
            io::Error::from(e),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom};

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().expect("temp");
        f.write_all(bytes).expect("write");
        f
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn copies_in_the_kernel_at_offsets() {
        let data = pattern(3 << 20);
        let src = file_with(&data);
        let mut dst = file_with(b"head");
        let mut stats = CopyStats::default();
        copy_range(&src, 100, 2 << 20, &dst, Some(4), &mut stats).expect("copy");
        assert_eq!(stats.kernel_bytes, 2 << 20, "{stats:?}");
        let mut got = Vec::new();
        dst.seek(SeekFrom::Start(0)).expect("seek");
        dst.read_to_end(&mut got).expect("read");
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..], &data[100..100 + (2 << 20)]);
    }

    #[test]
    fn falls_back_for_a_pipe() {
        let data = pattern(3 << 20);
        let src = file_with(&data);
        let (reader, writer) = nix::unistd::pipe().expect("pipe");
        let reader = std::thread::spawn(move || {
            let mut r = File::from(reader);
            let mut v = Vec::new();
            r.read_to_end(&mut v).expect("read pipe");
            v
        });
        let dst = File::from(writer);
        let mut stats = CopyStats::default();
        copy_range(&src, 5, data.len() as u64 - 5, &dst, None, &mut stats).expect("copy");
        drop(dst);
        let got = reader.join().expect("reader");
        assert_eq!(got, &data[5..]);
        assert_eq!(stats.copied(), data.len() as u64 - 5);
        assert_eq!(stats.fallback_bytes, data.len() as u64 - 5, "{stats:?}");
    }

    #[test]
    fn fallback_path_copies_exactly() {
        let data = pattern((BUF * 2) + 17);
        let src = file_with(&data);
        let dst = file_with(b"");
        let mut done = 0u64;
        while done < data.len() as u64 {
            done += buffered_copy(&src, done, data.len() as u64 - done, &dst, Some(done))
                .expect("buffered");
        }
        let mut got = vec![0u8; data.len()];
        dst.read_exact_at(&mut got, 0).expect("read");
        assert_eq!(got, data);
    }

    #[test]
    fn short_source_is_an_error() {
        let src = file_with(&pattern(1000));
        let dst = file_with(b"");
        let mut stats = CopyStats::default();
        let err = copy_range(&src, 900, 200, &dst, Some(0), &mut stats).expect_err("short");
        assert!(err.to_string().starts_with("reading the source: "), "{err}");
        match err.kind() {
            ErrorKind::ShortSource { offset, missing } => {
                assert_eq!((*offset, *missing), (1000, 100));
            }
            k => panic!("unexpected {k:?}"),
        }
    }

    #[test]
    fn a_punched_range_reads_as_zeros_and_keeps_the_file_size() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("spool");
        let bytes: Vec<u8> = (0..64 * 1024).map(|i| (i % 251 + 1) as u8).collect();
        std::fs::write(&path, &bytes).expect("write");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open");
        let block = f.metadata().expect("stat").blksize();
        // From inside the first block to inside the last: only whole blocks go.
        let (offset, len) = (100, 64 * 1024 - 200);
        let got = punch_hole(&f, offset, len).expect("punch");
        let after = std::fs::read(&path).expect("read");
        assert_eq!(after.len(), bytes.len());
        let (start, end) = (block, (offset + len) / block * block);
        match got {
            Punched::Freed(n) => {
                assert_eq!(n, end - start);
                let (s, e) = (start as usize, end as usize);
                assert!(after[s..e].iter().all(|&b| b == 0));
                assert_eq!(after[..s], bytes[..s]);
                assert_eq!(after[e..], bytes[e..]);
            }
            Punched::Unsupported => assert_eq!(after, bytes),
        }
        assert_eq!(
            punch_hole(&f, 10, 20).expect("inside a block"),
            Punched::Freed(0)
        );
    }
}
