//! Subcommands that move frames without decoding them: `permute` (data frames
//! in a seeded random order), `concat` (several files one after another, as
//! `osmium cat` would leave them) and `copy` (the whole file, the disk's floor
//! for a benchmark). Bytes are moved by the product's
//! `OutputFile::copy_from`: `copy_file_range`, falling back to
//! `pread`/`pwrite` where the kernel refuses.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pbf_output::OutputFile;

use crate::input::Input;
use crate::rng::Rng;

/// `permute`: the header frame, then the data frames in a seeded random order.
pub fn permute(input: &Path, output: &mut OutputFile, seed: u64) -> Result<()> {
    let inp = Input::open(input)?;
    let mut order: Vec<usize> = (0..inp.data.len()).collect();
    Rng::new(seed, 0).shuffle(&mut order);
    let src = inp.file.file();
    let h = &inp.header_frame;
    output.copy_from(src, input, h.offset, h.frame_len())?;
    for i in order {
        let fh = &inp.data[i];
        output.copy_from(src, input, fh.offset, fh.frame_len())?;
    }
    Ok(())
}

/// `concat`: the first file's header frame, then every file's data frames.
pub fn concat(inputs: &[PathBuf], output: &mut OutputFile) -> Result<()> {
    for (n, path) in inputs.iter().enumerate() {
        let inp = Input::open(path)?;
        let src = inp.file.file();
        if n == 0 {
            let h = &inp.header_frame;
            output.copy_from(src, path, h.offset, h.frame_len())?;
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
            output.copy_from(src, path, start, end - start)?;
        }
    }
    Ok(())
}

/// `copy`: the whole file with `copy_file_range`, then fsync.
pub fn copy(input: &Path, output: &mut OutputFile) -> Result<()> {
    let src = File::open(input).with_context(|| format!("{}", input.display()))?;
    let len = src.metadata()?.len();
    Ok(output.copy_from(&src, input, 0, len)?)
}
