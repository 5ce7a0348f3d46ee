//! Cloning byte ranges into the output instead of copying them: `FICLONERANGE`
//! on filesystems with shared extents (XFS with `reflink=1`, btrfs). A clone
//! needs source offset, destination offset and length to be multiples of the
//! filesystem block size, and PBF frames are not block-aligned, so
//! [`Cloner::append`] first writes padding frames ([`pbf_format::padding`])
//! until the destination is congruent to the source modulo the block size,
//! copies the unaligned head, clones the aligned middle and copies the tail.
//!
//! [`Cloner::probe`] finds out, before a byte of the output is written,
//! whether the output's filesystem clones at all (a clone of a scratch file
//! into the empty temporary output, truncated again; [`probe_dir`] asks the
//! same of a directory, with scratch files only), and
//! [`Cloner::probe_source`] whether a given source is on it. A range is only
//! aligned when its source is known to clone (or is a spool, which can only
//! be tried when it is read) and the clone pays for the padding; everything
//! else is copied exactly as `pbf-copy` copies it.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

use nix::errno::Errno;
use nix::libc;
use pbf_format::padding;

use pbf_output::{CHUNK, Error, OutputFile, Result};

mod ioctl {
    //! The `FICLONERANGE` ioctl, `_IOW(0x94, 13, struct file_clone_range)`.
    nix::ioctl_write_ptr!(
        /// Clone a range of one file into another (see ioctl_ficlonerange(2)).
        ficlonerange,
        0x94,
        13,
        nix::libc::file_clone_range
    );
}

/// A byte range of a plan source, as [`Cloner::append`] places it.
#[derive(Clone, Copy, Debug)]
pub struct SourceRange<'a> {
    /// The source's id in the plan (what is known of whether it clones
    /// is kept by id).
    pub id: u32,
    /// The open source.
    pub file: &'a File,
    /// Its name in errors.
    pub path: &'a Path,
    /// First byte of the range.
    pub offset: u64,
    /// Length of the range.
    pub len: u64,
}

/// Largest block size we align to; larger ones are treated as "cannot clone".
pub const MAX_BLOCK: u64 = 1 << 20;

/// Clone `len` bytes at `src_off` of `src` to `dst_off` of `dst`. All three
/// must be multiples of the block size (the kernel refuses with `EINVAL`);
/// `len` must not be 0 (which would mean "to the end of the source").
pub fn clone_range(
    src: &File,
    src_off: u64,
    len: u64,
    dst: &File,
    dst_off: u64,
) -> std::result::Result<(), Errno> {
    if len == 0 {
        return Err(Errno::EINVAL);
    }
    let arg = libc::file_clone_range {
        src_fd: i64::from(src.as_raw_fd()),
        src_offset: src_off,
        src_length: len,
        dest_offset: dst_off,
    };
    loop {
        // SAFETY: `arg` is a valid file_clone_range that outlives the call;
        // both descriptors are open for the duration of the borrow.
        match unsafe { ioctl::ficlonerange(dst.as_raw_fd(), &arg) } {
            Err(Errno::EINTR) => {}
            r => return r.map(drop),
        }
    }
}

/// Errors that mean "this pair of files cannot be cloned" rather than an I/O
/// failure: no reflink support, another filesystem, no such ioctl.
pub fn cannot_clone(e: Errno) -> bool {
    matches!(
        e,
        Errno::EOPNOTSUPP | Errno::EXDEV | Errno::EINVAL | Errno::ENOTTY | Errno::ENOSYS
    )
}

/// Why a clone was refused with `e` (one that [`cannot_clone`] accepts),
/// in words that follow the name of the file or filesystem refused.
pub fn refusal(e: Errno) -> String {
    match e {
        Errno::EXDEV => {
            "is on another filesystem than the output, and a clone (reflink) cannot cross \
             filesystems"
                .into()
        }
        _ => format!("cannot clone files (reflink, {e:?})"),
    }
}

/// What [`Cloner`] did, for `-v`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CloneStats {
    /// Bytes cloned (shared with the source).
    pub cloned: u64,
    /// Bytes of ranges copied (unaligned heads and tails, ranges not worth a
    /// clone, ranges whose source cannot clone).
    pub copied: u64,
    /// Bytes of padding frames written.
    pub padding: u64,
    /// Padding frames written.
    pub padding_frames: u64,
    /// `FICLONERANGE` calls that succeeded.
    pub clones: u64,
}

/// Appends ranges to an output, cloning their block-aligned middles.
#[derive(Debug, Default)]
pub struct Cloner {
    /// The block size ranges are aligned to.
    pub block: u64,
    /// The sources whose probe or clone failed with [`cannot_clone`]:
    /// copied from then on. Every other source is tried (a spool, not
    /// probed, at its first clone).
    copies: HashSet<u32>,
    /// What was done so far.
    pub stats: CloneStats,
}

/// How one range should be laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    pad: u64,
    head: u64,
    middle: u64,
    tail: u64,
}

/// Clone a range only when its padding is at most 1/8 of the cloned bytes.
const PAD_RATIO: u64 = 8;

impl Cloner {
    /// Find out whether `out` (still empty) can receive clones: clone one
    /// block of a scratch file created in `out`'s directory into it, then
    /// truncate `out` again. `Ok(Err(reason))` when it cannot.
    pub fn probe(out: &OutputFile) -> Result<std::result::Result<Cloner, String>> {
        let Some(dir) = out.temp_dir() else {
            return Ok(Err("the output is a stream, not a file".into()));
        };
        unwritten(out)?;
        let shown = pbf_cli::paths::dir_words(pbf_cli::paths::dir_of(Path::new(out.name())));
        let probed = probe_into(dir, &shown, out.file());
        truncate(out)?;
        // Every source still to try.
        Ok(probed?.map(|block| Cloner {
            block,
            ..Cloner::default()
        }))
    }

    /// Probe source `id` (open as `src`) before anything is written: clone
    /// its first block into `out` and truncate `out` again. A source shorter
    /// than one block has nothing to clone and counts as cloneable. Returns
    /// the reason when it cannot clone (e.g. it is on another filesystem).
    pub fn probe_source(
        &mut self,
        out: &OutputFile,
        id: u32,
        src: &File,
    ) -> Result<Option<String>> {
        unwritten(out)?;
        let size = src
            .metadata()
            .map_err(|e| Error::io(format!("source {id}: stat"), e))?
            .len();
        let probed = if size >= self.block {
            clone_range(src, 0, self.block, out.file(), 0)
        } else {
            Ok(())
        };
        truncate(out)?;
        match probed {
            Ok(()) => Ok(None),
            Err(e) if cannot_clone(e) => {
                self.copies.insert(id);
                Ok(Some(refusal(e)))
            }
            Err(e) => Err(Error::io(
                format!("source {id}: clone probe"),
                std::io::Error::from(e),
            )),
        }
    }

    /// How to lay out `len` bytes at `src_off` written after `prefix` bytes
    /// at output position `pos`; `None` when a clone does not pay.
    fn layout(&self, pos: u64, prefix: u64, src_off: u64, len: u64) -> Option<Layout> {
        let b = self.block;
        let pad = padding::gap(pos + prefix, src_off, b);
        let start = src_off.next_multiple_of(b);
        let end = (src_off + len) / b * b;
        let middle = end.checked_sub(start).filter(|&m| m >= b)?;
        if pad * PAD_RATIO > middle {
            return None;
        }
        Some(Layout {
            pad,
            head: start - src_off,
            middle,
            tail: src_off + len - end,
        })
    }

    /// Append `prefix` (e.g. a new BlobHeader) and then the range `r`,
    /// cloning the aligned middle when its source clones and the clone pays
    /// for its padding. Padding frames go before `prefix`. With `require`, a
    /// source that turns out unable to clone is an error instead of a copy.
    pub fn append(
        &mut self,
        out: &mut OutputFile,
        r: SourceRange<'_>,
        prefix: &[u8],
        require: bool,
    ) -> Result<()> {
        let layout = match self.copies.contains(&r.id) {
            true => None,
            false => self.layout(out.position(), prefix.len() as u64, r.offset, r.len),
        };
        let Some(l) = layout else {
            out.write_all(prefix)?;
            out.copy_from(r.file, r.path, r.offset, r.len)?;
            self.stats.copied += r.len;
            return Ok(());
        };
        if l.pad > 0 {
            let bytes = padding::padding(l.pad).ok_or_else(|| {
                Error::invalid(out.name(), format!("no padding of {} bytes", l.pad))
            })?;
            out.write_all(&bytes)?;
            self.stats.padding += l.pad;
            self.stats.padding_frames += if padding::fits(l.pad) { 1 } else { 2 };
        }
        out.write_all(prefix)?;
        out.copy_from(r.file, r.path, r.offset, l.head)?;
        let middle = SourceRange {
            offset: r.offset + l.head,
            len: l.middle,
            ..r
        };
        let done = self.clone_middle(out, middle, require)?;
        let rest = l.middle - done + l.tail;
        out.copy_from(r.file, r.path, r.offset + l.head + done, rest)?;
        self.stats.copied += l.head + rest;
        Ok(())
    }

    /// Clone the aligned range `r` in chunks; returns how many bytes were
    /// cloned before the source turned out unable to clone (all of them
    /// normally).
    fn clone_middle(
        &mut self,
        out: &mut OutputFile,
        r: SourceRange<'_>,
        require: bool,
    ) -> Result<u64> {
        let mut done = 0;
        while done < r.len {
            let n = (r.len - done).min(CHUNK);
            let dst_off = out.position();
            match clone_range(r.file, r.offset + done, n, out.file(), dst_off) {
                Ok(()) => {
                    out.advance(n)?;
                    done += n;
                    self.stats.cloned += n;
                    self.stats.clones += 1;
                }
                Err(e) if cannot_clone(e) && !require => {
                    self.copies.insert(r.id);
                    return Ok(done);
                }
                Err(e) => {
                    let why = if cannot_clone(e) {
                        " (--require-reflink: the source cannot be cloned)"
                    } else {
                        ""
                    };
                    return Err(Error::io(
                        format!(
                            "cloning {} bytes {}..{} to {} at offset {dst_off}{why}",
                            r.path.display(),
                            r.offset + done,
                            r.offset + done + n,
                            out.name()
                        ),
                        std::io::Error::from(e),
                    ));
                }
            }
        }
        Ok(done)
    }
}

/// Can files in `dir` receive clones? The block size clones there are
/// aligned to, or why not (naming `dir` as typed, see
/// [`pbf_cli::paths::dir_words`]). Probes with two unnamed scratch files,
/// so nothing outlives the call.
pub fn probe_dir(dir: &Path) -> Result<std::result::Result<u64, String>> {
    let dst = tempfile::tempfile_in(dir).map_err(|e| scratch_error(dir, e))?;
    probe_into(dir, &pbf_cli::paths::dir_words(dir), &dst)
}

/// Clone one block of a scratch file in `dir` into the empty `dst`: the
/// block size when it works, the reason when the filesystem cannot clone
/// (naming it as the filesystem of `shown`).
fn probe_into(dir: &Path, shown: &str, dst: &File) -> Result<std::result::Result<u64, String>> {
    // `f_bsize` of the filesystem: a power of two up to MAX_BLOCK, or none.
    let bs = nix::sys::statvfs::fstatvfs(dst).map(|s| s.block_size());
    let aligned = |b: &u64| b.is_power_of_two() && (512..=MAX_BLOCK).contains(b);
    let Some(block) = bs.ok().filter(aligned) else {
        return Ok(Err(format!(
            "the filesystem of {shown} has no block size clones can be aligned to"
        )));
    };
    let scratch_error = |e| scratch_error(dir, e);
    let mut scratch = tempfile::tempfile_in(dir).map_err(scratch_error)?;
    scratch
        .write_all(&vec![0u8; block as usize])
        .map_err(scratch_error)?;
    match clone_range(&scratch, 0, block, dst, 0) {
        Ok(()) => Ok(Ok(block)),
        Err(e) if cannot_clone(e) => Ok(Err(format!("the filesystem of {shown} {}", refusal(e)))),
        Err(e) => Err(Error::io(
            format!("{}: clone probe", dir.display()),
            std::io::Error::from(e),
        )),
    }
}

/// A scratch file of a probe in `dir` that could not be made or written.
fn scratch_error(dir: &Path, e: std::io::Error) -> Error {
    Error::io(
        format!("{}: scratch file for a clone probe", dir.display()),
        e,
    )
}

/// A probe writes into the output: it must not hold anything yet.
fn unwritten(out: &OutputFile) -> Result<()> {
    match out.position() {
        0 => Ok(()),
        _ => Err(Error::invalid(
            out.name(),
            "probing for clones after writing",
        )),
    }
}

/// Empty the temporary output again after a probe.
fn truncate(out: &OutputFile) -> Result<()> {
    out.file()
        .set_len(0)
        .map_err(|e| Error::io(format!("{}: truncate after the clone probe", out.name()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_output::OutputOptions;

    fn cloner(block: u64) -> Cloner {
        Cloner {
            block,
            ..Cloner::default()
        }
    }

    #[test]
    fn layout_pads_to_congruence_and_clones_the_aligned_middle() {
        let c = cloner(4096);
        let l = c.layout(100, 0, 5000, 100_000).expect("clones");
        assert_eq!((100 + l.pad) % 4096, 5000 % 4096);
        assert_eq!(l.pad, 804);
        assert_eq!((l.head, l.middle, l.tail), (3192, 94_208, 2600));
        assert_eq!(l.head + l.middle + l.tail, 100_000);
        // With a prefix (a new BlobHeader), the bytes after it are aligned.
        let l = c.layout(100, 60, 5000, 100_000).expect("clones");
        assert_eq!((100 + l.pad + 60) % 4096, 5000 % 4096);
        // Already congruent: no padding.
        let l = c.layout(8192 + 7, 0, 7, 50_000).expect("clones");
        assert_eq!(l.pad, 0);
        // A short gap becomes gap + block.
        let l = c.layout(4090, 0, 0, 1 << 20).expect("clones");
        assert_eq!(l.pad, 6 + 4096);
    }

    #[test]
    fn layout_refuses_clones_that_do_not_pay() {
        let c = cloner(4096);
        assert!(c.layout(0, 0, 100, 4000).is_none(), "no whole block");
        assert!(c.layout(0, 0, 1, 8190).is_none(), "no whole aligned block");
        // 3 blocks to clone, up to 4 KiB of padding: more than 1/8.
        assert!(c.layout(100, 0, 0, 3 * 4096).is_none());
        assert!(c.layout(0, 0, 0, 3 * 4096).is_some(), "no padding needed");
    }

    #[test]
    fn probe_answers_on_this_filesystem_and_copies_when_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let out_path = dir.path().join("out.pbf");
        let mut out = OutputFile::create(&out_path, &OutputOptions::default()).expect("out");
        let src_path = dir.path().join("src");
        std::fs::write(&src_path, vec![7u8; 3 * 65_536]).expect("src");
        let src = File::open(&src_path).expect("open");
        let range = SourceRange {
            id: 0,
            file: &src,
            path: &src_path,
            offset: 10,
            len: 2 * 65_536,
        };
        match Cloner::probe(&out).expect("probe") {
            Ok(mut c) => {
                // This filesystem clones (XFS, btrfs): a whole range clones.
                assert!(c.probe_source(&out, 0, &src).expect("source").is_none());
                out.write_all(b"header").expect("header");
                c.append(&mut out, range, b"", true).expect("append");
                assert!(c.stats.cloned > 0, "{:?}", c.stats);
            }
            Err(why) => {
                assert!(
                    why.starts_with("the filesystem of ")
                        && why.contains("cannot clone files (reflink"),
                    "{why}"
                );
                let mut c = cloner(4096);
                c.copies.insert(0);
                out.write_all(b"header").expect("header");
                c.append(&mut out, range, b"ix", false).expect("append");
                assert_eq!(c.stats.padding, 0);
                assert_eq!(c.stats.copied, 2 * 65_536);
            }
        }
        assert_eq!(out.file().metadata().expect("meta").len(), out.position());
        let end = out.position();
        out.commit().expect("commit");
        assert_eq!(std::fs::metadata(&out_path).expect("out").len(), end);
    }

    #[test]
    fn clone_errors_are_classified() {
        assert!(cannot_clone(Errno::EXDEV) && cannot_clone(Errno::EOPNOTSUPP));
        assert!(!cannot_clone(Errno::EIO) && !cannot_clone(Errno::ENOSPC));
        let f = tempfile::tempfile().expect("temp");
        assert_eq!(clone_range(&f, 0, 0, &f, 0), Err(Errno::EINVAL));
    }
}
