//! Subcommands that move frames without decoding them: `permute` (data frames
//! in a seeded random order), `concat` (several files one after another, as
//! `osmium cat` would leave them) and `copy` (the whole file, the disk's floor
//! for a benchmark). Bytes are moved with `copy_file_range`, falling back to
//! `pread`/`pwrite` where the kernel refuses.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::errno::Errno;

use crate::input::Input;
use crate::output::Output;
use crate::rng::Rng;

/// Bytes per `copy_file_range` call.
const CHUNK: u64 = 1 << 30;

/// Copy `len` bytes at `offset` of `src` to the end of `out`.
pub fn copy_range(src: &File, offset: u64, len: u64, out: &mut Output) -> Result<()> {
    let start = out.written();
    let dst = out.file()?;
    let (mut off_in, mut off_out) = (offset as i64, start as i64);
    let mut left = len;
    while left > 0 {
        let want = left.min(CHUNK) as usize;
        match nix::fcntl::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), want) {
            Ok(0) => anyhow::bail!("source ends before offset {off_in}"),
            Ok(n) => left -= n as u64,
            Err(Errno::EXDEV | Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => {
                copy_with_pread(src, off_in as u64, dst, off_out as u64, left)?;
                left = 0;
            }
            Err(e) => return Err(e).context("copy_file_range"),
        }
    }
    let mut f = dst;
    f.seek(SeekFrom::Start(start + len))?;
    out.wrote_directly(len);
    Ok(())
}

fn copy_with_pread(src: &File, mut from: u64, dst: &File, mut to: u64, len: u64) -> Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        src.read_exact_at(&mut buf[..n], from).context("pread")?;
        dst.write_all_at(&buf[..n], to).context("pwrite")?;
        (from, to, left) = (from + n as u64, to + n as u64, left - n as u64);
    }
    Ok(())
}

/// `permute`: the header frame, then the data frames in a seeded random order.
pub fn permute(input: &Path, out: &Path, seed: u64) -> Result<u64> {
    let inp = Input::open(input)?;
    let mut order: Vec<usize> = (0..inp.data.len()).collect();
    Rng::new(seed, 0).shuffle(&mut order);
    let src = inp.file.file();
    let mut output = Output::create(out)?;
    let h = &inp.header_frame;
    copy_range(src, h.offset, h.frame_len(), &mut output)?;
    for i in order {
        let fh = &inp.data[i];
        copy_range(src, fh.offset, fh.frame_len(), &mut output)
            .with_context(|| format!("{}", input.display()))?;
    }
    output.finish()
}

/// `concat`: the first file's header frame, then every file's data frames.
pub fn concat(inputs: &[PathBuf], out: &Path) -> Result<u64> {
    let mut output = Output::create(out)?;
    for (n, path) in inputs.iter().enumerate() {
        let inp = Input::open(path)?;
        let src = inp.file.file();
        if n == 0 {
            let h = &inp.header_frame;
            copy_range(src, h.offset, h.frame_len(), &mut output)?;
        }
        // Data frames follow each other: copy each contiguous stretch at once.
        let mut i = 0;
        while i < inp.data.len() {
            let start = inp.data[i].offset;
            let mut end = inp.data[i].end();
            i += 1;
            while i < inp.data.len() && inp.data[i].offset == end {
                end = inp.data[i].end();
                i += 1;
            }
            copy_range(src, start, end - start, &mut output)
                .with_context(|| format!("{}", path.display()))?;
        }
    }
    output.finish()
}

/// `copy`: the whole file with `copy_file_range`, then fsync.
pub fn copy(input: &Path, out: &Path) -> Result<u64> {
    let src = File::open(input).with_context(|| format!("{}", input.display()))?;
    let len = src.metadata()?.len();
    let mut output = Output::create(out)?;
    copy_range(&src, 0, len, &mut output).with_context(|| format!("{}", input.display()))?;
    output.finish()
}
